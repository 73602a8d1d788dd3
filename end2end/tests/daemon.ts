// A Playwright fixture that runs the real `shard` binary for each worker, in a
// fresh $SHARD_HOME and an empty working directory (so the page can only come
// from the binary itself), and tells the tests its base URL.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test as base } from '@playwright/test';

// stdout is read line by line on '\n' here: the daemon's announcement lines
// are plain ASCII, so Node's line splitting is safe for them.
export const SHARD_BIN = process.env.SHARD_BIN ?? resolve(__dirname, '../../target/release/shard');

export type Daemon = {
  baseURL: string;
  /** The enrollment URL the daemon printed at start (single use). */
  enrollURL: string;
  home: string;
  /** The directory it was started in. */
  cwd: string;
  process: ChildProcess;
};

/** Runs `shard daemon ARGS` in `home` and `cwd`; resolves once it has announced its URLs. */
async function spawnDaemon(home: string, cwd: string, args: string[]): Promise<Daemon> {
  const child = spawn(SHARD_BIN, ['daemon', ...args], {
    cwd,
    env: { SHARD_LOG: 'warn', ...process.env, SHARD_HOME: home },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [baseURL, enrollURL] = await new Promise<[string, string]>((announced, failed) => {
    const timer = setTimeout(() => failed(new Error('shard daemon did not announce within 30 s')), 30_000);
    let base = '';
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const listening = /^listening on (http:\/\/\S+)$/.exec(line);
      if (listening) base = listening[1];
      const enroll = /^enroll: (\S+)$/.exec(line);
      if (enroll && base) {
        clearTimeout(timer);
        announced([base, enroll[1]]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      failed(new Error(`shard daemon exited early with ${code}`));
    });
  });
  return { baseURL, enrollURL, home, cwd, process: child };
}

/** Runs a daemon of its own; `config`, if given, is its config.toml from the start. */
export async function startDaemon(extraArgs: string[] = [], config?: string): Promise<Daemon> {
  const home = mkdtempSync(join(tmpdir(), 'shard-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'shard-cwd-'));
  if (config !== undefined) writeFileSync(join(home, 'config.toml'), config);
  const port = extraArgs.includes('--port') ? [] : ['--port', '0'];
  const daemon = await spawnDaemon(home, cwd, [...port, ...extraArgs]);
  daemon.process.on('exit', () => {
    rmSync(home, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
  });
  return daemon;
}

export async function stopDaemon(daemon: Daemon): Promise<void> {
  if (daemon.process.exitCode !== null) return;
  const exited = new Promise((done) => daemon.process.once('exit', done));
  daemon.process.kill('SIGTERM');
  await exited;
}

/** A fresh single-use enrollment URL from `shard enroll`. */
export function newEnrollURL(daemon: Daemon): string {
  const output = execFileSync(SHARD_BIN, ['enroll'], { env: { ...process.env, SHARD_HOME: daemon.home } });
  const match = /^enroll: (\S+)$/m.exec(output.toString());
  if (!match) throw new Error(`shard enroll printed: ${output}`);
  return match[1];
}

/** Sends one command to the daemon over its unix socket; resolves with the response. */
export function unixCall(daemon: Daemon, command: Record<string, unknown>): Promise<any> {
  return new Promise((resolveResponse, reject) => {
    const socket = connect(join(daemon.home, 'daemon.sock'));
    let buffer = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString();
      let newline;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const message = JSON.parse(buffer.slice(0, newline));
        buffer = buffer.slice(newline + 1);
        if (message.type === 'response' && message.id === command.id) {
          socket.end();
          resolveResponse(message);
        }
      }
    });
    socket.on('error', reject);
    socket.write(JSON.stringify(command) + '\n');
  });
}

/**
 * A daemon that can be stopped and started again on the same $SHARD_HOME and
 * port, so that an open tab reconnects to it (the shared fixture's daemon
 * lives as long as its worker and takes its home with it).
 */
export class Restartable {
  daemon!: Daemon;
  private port = '0';
  readonly home = mkdtempSync(join(tmpdir(), 'shard-home-'));
  private readonly cwd = mkdtempSync(join(tmpdir(), 'shard-cwd-'));

  /** `args`: more of `shard daemon`'s flags, for every start. */
  constructor(private readonly args: string[] = []) {}

  async start(): Promise<Daemon> {
    this.daemon = await spawnDaemon(this.home, this.cwd, ['--port', this.port, ...this.args]);
    this.port = new URL(this.daemon.baseURL).port;
    return this.daemon;
  }

  /** Stops the daemon: gracefully (SIGTERM) or as a crash would (SIGKILL). */
  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const child = this.daemon.process;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill(signal);
    await exited;
  }

  async dispose(): Promise<void> {
    await this.stop();
    // SHARD_KEEP=1 keeps the home (logs, sessions) to look into a failure.
    if (process.env.SHARD_KEEP) return console.log(`kept ${this.home}`);
    rmSync(this.home, { recursive: true, force: true });
    rmSync(this.cwd, { recursive: true, force: true });
  }
}

/**
 * What every page of a test logged as an error: uncaught exceptions,
 * `console.error`, and every Content-Security-Policy violation (the page's
 * policy allows no inline style or script: one would be a bug). Each test
 * fails on any, unless it expects it ([`allowConsoleError`]).
 */
const consoleErrors: string[] = [];
let allowedErrors: RegExp[] = [];

/** Lets the current test log errors matching `pattern` (a failure it causes on purpose). */
export function allowConsoleError(pattern: RegExp): void {
  allowedErrors.push(pattern);
}

/** Records what `page` logs as an error (see `consoleErrors`). */
function watchPage(page: import('@playwright/test').Page): void {
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(`${page.url()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`${page.url()}: uncaught ${error.message}`));
}

const watched = new WeakSet<import('@playwright/test').BrowserContext>();

/** Records what every page of `context` logs as an error, CSP violations included. */
export async function watchContext(context: import('@playwright/test').BrowserContext): Promise<void> {
  if (watched.has(context)) return;
  watched.add(context);
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      console.error(`CSP violation: ${event.violatedDirective} (${event.blockedURI || 'inline'}) at ${event.sourceFile}:${event.lineNumber}`);
    });
  });
  context.on('page', watchPage);
  for (const page of context.pages()) watchPage(page);
}

export const test = base.extend<{ cleanConsole: void }, { daemon: Daemon }>({
  cleanConsole: [
    async ({}, use) => {
      consoleErrors.length = 0;
      allowedErrors = [];
      await use();
      const unexpected = consoleErrors.filter((text) => !allowedErrors.some((pattern) => pattern.test(text)));
      expect(unexpected, 'errors in the browser console').toEqual([]);
    },
    { auto: true },
  ],
  context: async ({ context }, use) => {
    await watchContext(context);
    await use(context);
  },
  // Every context a test makes for itself is watched too: a page's
  // console is clean whichever way it was opened.
  browser: [
    async ({ browser }, use) => {
      const make = browser.newContext.bind(browser);
      browser.newContext = async (options) => {
        const context = await make(options);
        await watchContext(context);
        return context;
      };
      await use(browser);
    },
    { scope: 'worker' },
  ],
  daemon: [
    async ({}, use) => {
      const daemon = await startDaemon();
      await use(daemon);
      await stopDaemon(daemon);
    },
    { scope: 'worker' },
  ],
  baseURL: async ({ daemon }, use) => use(daemon.baseURL),
});

import { expect } from '@playwright/test';
export { expect };

/** Creates an agent through the dashboard's form; resolves once it is listed. */
export async function createAgent(page: import('@playwright/test').Page, cwd: string, name: string): Promise<void> {
  const panel = page.locator('details.create-panel');
  if (!(await panel.evaluate((element) => (element as HTMLDetailsElement).open))) {
    await panel.locator('summary').click();
  }
  await page.getByLabel('Working directory').fill(cwd);
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByRole('button', { name: 'Create agent' }).click();
  // Listed, though on a phone the list is behind the agent's pane.
  await agentRow(page, name).waitFor({ state: 'attached' });
  // And opened: the list can show it before the answer that opens it
  // arrives, and a prompt typed meanwhile would go to the agent before.
  try {
    await expect(page.locator('.agent-view h2')).toHaveText(name);
  } catch (error) {
    // Say why it did not open: the page's notices and the agent's row hold
    // the daemon's reason (an agent that exited at start quotes its log).
    const notices = await page.locator('.notice, [role="alert"]').allInnerTexts();
    const row = await agentRow(page, name).innerText().catch(() => '(no row)');
    throw new Error(`agent "${name}" did not open; notices: ${JSON.stringify(notices)}; row: ${JSON.stringify(row)}\n${error}`);
  }
}

/** Creates an agent on `runtime` (not Shard's own) through the dashboard's form, and opens it. */
export async function createOnRuntime(page: import('@playwright/test').Page, runtime: string, name: string, cwd: string): Promise<void> {
  await page.locator('details.create-panel summary').click();
  await page.getByLabel('Working directory').fill(cwd);
  await page.getByLabel('Name', { exact: true }).fill(name);
  await page.getByLabel('Runtime').selectOption(runtime);
  // Its model and mode are its own, chosen once it runs.
  await expect(page.getByLabel('Model', { exact: true })).toHaveCount(0);
  await page.getByRole('button', { name: 'Create agent' }).click();
  await expect(page.locator('.agent-view h2')).toHaveText(name, { timeout: 60_000 });
}

/**
 * A lasting connection to the daemon's unix socket, as a local tool would
 * hold one: requests answered by id, and every event kept for `waitFor`.
 */
export class UnixClient {
  private socket: import('node:net').Socket;
  private buffer = '';
  private next = 0;
  private waiting = new Map<string, (message: any) => void>();
  private watchers: Array<{ match: (message: any) => boolean; done: (message: any) => void }> = [];

  private constructor(socket: import('node:net').Socket) {
    this.socket = socket;
    socket.on('data', (chunk) => {
      this.buffer += chunk.toString();
      let newline;
      while ((newline = this.buffer.indexOf('\n')) >= 0) {
        const message = JSON.parse(this.buffer.slice(0, newline));
        this.buffer = this.buffer.slice(newline + 1);
        if (message.type === 'response' && this.waiting.has(message.id)) {
          this.waiting.get(message.id)!(message);
          this.waiting.delete(message.id);
        }
        this.watchers = this.watchers.filter((watcher) => {
          if (!watcher.match(message)) return true;
          watcher.done(message);
          return false;
        });
      }
    });
  }

  static open(daemon: Daemon): Promise<UnixClient> {
    return new Promise((opened, failed) => {
      const socket = connect(join(daemon.home, 'daemon.sock'), () => opened(new UnixClient(socket)));
      socket.once('error', failed);
    });
  }

  /** Sends `command` and resolves with its response (failing on an error response). */
  async call(command: Record<string, unknown>): Promise<any> {
    const id = `u-${++this.next}`;
    const answered = new Promise<any>((done) => this.waiting.set(id, done));
    this.socket.write(JSON.stringify({ ...command, id }) + '\n');
    const response = await answered;
    if (!response.success) throw new Error(`${command.type} failed: ${JSON.stringify(response.error)}`);
    return response;
  }

  /** Resolves with the next message that `match` accepts. */
  waitFor(match: (message: any) => boolean): Promise<any> {
    return new Promise((done) => this.watchers.push({ match, done }));
  }

  /** Prompts `agentId` (attached) and resolves when its turn is over. */
  async turn(agentId: string, message: string): Promise<void> {
    // An agent may still be busy after a turn (compacting its context):
    // then the prompt is refused as mid-turn and sent again once it settles.
    for (;;) {
      const idle = this.waitFor((event) => event.type === 'status' && event.agent_id === agentId && event.status === 'idle');
      try {
        await this.call({ type: 'prompt', agent_id: agentId, message });
      } catch (error) {
        if (!String(error).includes('mid-turn')) throw error;
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      await idle;
      return;
    }
  }

  close(): void {
    this.socket.end();
  }
}

/** The id of the agent called `name`. */
export async function agentId(daemon: Daemon, name: string): Promise<string> {
  const listed = await unixCall(daemon, { id: 'l', type: 'agent.list' });
  const agent = listed.data.agents.find((known: any) => known.name === name);
  if (!agent) throw new Error(`no agent called ${name}`);
  return agent.agent_id;
}

/** A fresh project directory for an agent to work in. */
export function project(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'shard-project-')));
}

/** Runs `git ARGS` in `cwd`; its output. */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } }).toString();
}

/** A repository on `main` with one commit, and an identity for the agent's commits. */
export function repository(): string {
  const repo = project();
  git(repo, 'init', '--quiet', '-b', 'main');
  git(repo, 'config', 'user.name', 'Shard Test');
  git(repo, 'config', 'user.email', 'test@example.invalid');
  writeFileSync(join(repo, 'README.md'), '# demo\n');
  git(repo, 'add', 'README.md');
  git(repo, 'commit', '--quiet', '-m', 'first');
  return repo;
}

/**
 * A fresh, enrolled browser context with one tab open on the dashboard;
 * `init` runs in every page before the app (to stand in for browser APIs).
 */
export async function enrolled(
  browser: import('@playwright/test').Browser,
  daemon: Daemon,
  options: {
    viewport?: { width: number; height: number };
    init?: () => void;
    timezoneId?: string;
    /** A phone: touch events and a mobile viewport. */
    touch?: boolean;
  } = {},
): Promise<[import('@playwright/test').BrowserContext, import('@playwright/test').Page]> {
  const context = await browser.newContext({
    ...(options.viewport ? { viewport: options.viewport } : {}),
    ...(options.timezoneId ? { timezoneId: options.timezoneId } : {}),
    ...(options.touch ? { hasTouch: true, isMobile: true } : {}),
  });
  await watchContext(context);
  if (options.init) await context.addInitScript(options.init);
  const page = await context.newPage();
  await page.goto(newEnrollURL(daemon));
  await expect(page.locator('.connection')).toHaveText('connected');
  return [context, page];
}

/** Opens the agent called `name` from the list. */
export async function openAgent(page: import('@playwright/test').Page, name: string): Promise<void> {
  await agentRow(page, name).locator('button.open').click();
  await expect(page.locator('.agent-view h2')).toHaveText(name);
}

/** Types `text` into the message box and sends it. */
export async function prompt(page: import('@playwright/test').Page, text: string): Promise<void> {
  await page.getByLabel('Message to the agent').fill(text);
  await page.locator('.prompt button[type="submit"]').click();
}

/**
 * The list row of the agent named exactly `name`: a row that only mentions
 * it (in another agent's name or working directory) is not it, and in CI
 * one daemon holds every spec's agents.
 */
export function agentRow(page: import('@playwright/test').Page, name: string): import('@playwright/test').Locator {
  return page.locator('li.agent').filter({ has: page.locator('.row-head .name').getByText(name, { exact: true }) });
}
