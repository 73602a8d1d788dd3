// Agents nobody here wrote, in Chromium against the real daemon: Claude Code,
// Codex and opencode through ACP (pinned in tests/acp, installed by
// scripts/test), each driven by the scripted model server of
// tests/fixtures/acp and configured by its setup_agent.py, exactly as
// tests/suite/real_acp.rs drives them over the unix socket. Each is created
// from the dashboard's form and shown streaming; its command asks and is
// answered from a second, phone-sized tab (the first tab's dialog closes);
// one is denied; an edit is shown as a diff; an abort mid-command leaves no
// process behind; and after a daemon restart the open tab reconnects and the
// agent remembers its conversation.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Page } from '@playwright/test';
import { test, expect, createOnRuntime, enrolled, openAgent, project, prompt, Restartable } from './daemon';

const FIXTURES = resolve(__dirname, '../../tests/fixtures/acp');

let server: ChildProcess;
let port = '';
let scratch = '';

test.beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'shard-real-acp-'));
  server = spawn('python3', [join(FIXTURES, 'model_server.py'), '--port', '0', '--log', join(scratch, 'model.log')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  port = await new Promise<string>((announced, failed) => {
    createInterface({ input: server.stdout! }).once('line', (line) => announced(line.replace('PORT ', '').trim()));
    server.once('exit', (code) => failed(new Error(`the model server exited with ${code}`)));
  });
});

test.afterAll(() => {
  server?.kill();
  if (scratch && !process.env.SHARD_KEEP) rmSync(scratch, { recursive: true, force: true });
});

/**
 * The model server's name as the agents are configured with it: each agent
 * runs in its sandbox, whose loopback is its own, and reaches the model
 * server through the daemon's egress proxy, which finds the name on this
 * machine (`--egress-resolve`), as tests/suite/real_acp.rs does.
 */
const MODEL_HOST = 'model.test';
const RESOLVE = ['--egress-resolve', `${MODEL_HOST}=127.0.0.1`];

/**
 * config.toml naming `agent` as a runtime, set up (by setup_agent.py) to
 * reach the model server, in a sandbox that lets it reach that server and
 * nothing else and keep its state where setup_agent.py put it.
 */
function runtimeConfig(agent: string): string {
  const state = join(scratch, agent);
  const output = execFileSync('python3', [join(FIXTURES, 'setup_agent.py'), agent, state, port, '--host', MODEL_HOST]);
  const spec = JSON.parse(output.toString());
  const env = Object.entries(spec.env as Record<string, string>).map(([key, value]) => `${key} = ${JSON.stringify(value)}`);
  return [
    '[[runtimes]]',
    `id = ${JSON.stringify(agent)}`,
    'protocol = "acp"',
    `command = ${JSON.stringify(spec.command[0])}`,
    `args = ${JSON.stringify(spec.command.slice(1))}`,
    `env = { ${env.join(', ')} }`,
    `sandbox = { network = "deny", allow_hosts = [${JSON.stringify(`${MODEL_HOST}:${port}`)}], allow_write = [${JSON.stringify(state)}] }`,
    '',
  ].join('\n');
}

/** The live processes whose command line matches `pattern`. */
function running(pattern: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', pattern]).toString().trim().split('\n');
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

// Each agent names its options in its own words: they are picked by intent.
/** Sends `text` and waits for the agent's reply and for it to be idle again, allowing what it asks on the way. */
async function turn(tab: Page, text: string): Promise<void> {
  const replies = tab.locator('.message.assistant');
  const before = await replies.count();
  await prompt(tab, text);
  const dialog = tab.getByRole('dialog');
  const status = tab.locator('.agent-view .status');
  await expect
    .poll(async () => {
      if (await dialog.isVisible()) {
        await dialog.locator('button[data-intent="allow"]').click();
        return false;
      }
      return (await status.textContent()) === 'idle' && (await replies.count()) > before;
    }, { timeout: 60_000 })
    .toBe(true);
}

/** `agent` (whose command line holds `program`) through every step above; `sleep` is its own number of seconds. */
async function aRealAgentInTheBrowser(browser: import('@playwright/test').Browser, agent: string, program: string, sleep: string) {
  test.setTimeout(180_000);
  const host = new Restartable(RESOLVE);
  let daemon = await host.start();
  try {
    writeFileSync(join(daemon.home, 'config.toml'), runtimeConfig(agent));
    const cwd = project();
    const name = `real-${agent}`;
    const [context, tab] = await enrolled(browser, daemon);
    await createOnRuntime(tab, agent, name, cwd);
    const assistant = tab.locator('.message.assistant');

    // A streamed reply.
    await turn(tab, 'hello zebra42');
    await expect(assistant.last()).toContainText('echo: hello zebra42');

    // A command that asks, answered from a phone-sized tab: the first tab's dialog closes.
    const [phoneContext, phone] = await enrolled(browser, daemon, { viewport: { width: 375, height: 812 } });
    await openAgent(phone, name);
    await prompt(tab, 'run: touch allowed.txt');
    const dialog = tab.getByRole('dialog');
    const phoneDialog = phone.getByRole('dialog');
    await expect(dialog).toContainText('allowed.txt', { timeout: 60_000 });
    await expect(phoneDialog).toContainText('allowed.txt');
    const allow = phoneDialog.locator('button[data-intent="allow"]');
    await expect(allow).toBeInViewport();
    await allow.click();
    await expect(phoneDialog).toBeHidden();
    await expect(dialog).toBeHidden();
    await expect(tab.locator('.agent-view .status')).toHaveText('idle', { timeout: 60_000 });
    expect(existsSync(join(cwd, 'allowed.txt'))).toBe(true);
    await phoneContext.close();

    // One that asks and is denied: nothing is run.
    await prompt(tab, 'run: touch denied.txt');
    await expect(dialog).toContainText('denied.txt', { timeout: 60_000 });
    await dialog.locator('button[data-intent="deny"]').click();
    await expect(dialog).toBeHidden();
    await expect(tab.locator('.agent-view .status')).toHaveText('idle', { timeout: 60_000 });
    expect(existsSync(join(cwd, 'denied.txt'))).toBe(false);

    // An edit, shown as a diff.
    await turn(tab, 'edit: edited.txt');
    expect(readFileSync(join(cwd, 'edited.txt'), 'utf8')).toBe('new\n');
    await expect(tab.locator('.render.diff .line.add').filter({ hasText: /^\+new$/ }).first()).toBeVisible();

    // An abort mid-command leaves no process behind; the next prompt is answered.
    await prompt(tab, `sleep: ${sleep}`);
    const sleeping = `^sleep ${sleep}$`;
    await expect
      .poll(async () => {
        if (await dialog.isVisible()) await dialog.locator('button[data-intent="allow"]').click();
        return running(sleeping).length;
      }, { timeout: 60_000 })
      .toBeGreaterThan(0);
    await tab.getByRole('button', { name: 'Abort' }).click();
    await expect(tab.locator('.agent-view .status')).toHaveText('idle', { timeout: 30_000 });
    await expect.poll(() => running(sleeping).length, { timeout: 10_000 }).toBe(0);
    await turn(tab, 'hello again');
    await expect(assistant.last()).toContainText('echo: hello again');

    // A daemon restart: the tab reconnects, the transcript is there, and
    // the agent takes up its session (the model is sent the earlier turns).
    await host.stop('SIGTERM');
    await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
    await expect.poll(() => running(`shard guard -- .*${program}`).length, { timeout: 10_000 }).toBe(0);
    daemon = await host.start();
    await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 40_000 });
    await expect(assistant.first()).toContainText('echo: hello zebra42');
    await turn(tab, 'recall zebra42');
    await expect(assistant.last()).toContainText('recall: remembered');
    await context.close();
  } finally {
    await host.dispose();
  }
}

test('Claude Code under Shard, in the browser', async ({ browser }) => {
  await aRealAgentInTheBrowser(browser, 'claude', 'claude-agent-acp/dist', '53');
});

test('Codex under Shard, in the browser', async ({ browser }) => {
  await aRealAgentInTheBrowser(browser, 'codex', 'codex-acp', '59');
});

test('opencode under Shard, in the browser', async ({ browser }) => {
  await aRealAgentInTheBrowser(browser, 'opencode', 'opencode.exe acp', '61');
});
