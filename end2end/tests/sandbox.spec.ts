// Every agent's sandbox in the dashboard (docs/SANDBOX.md): the containment
// line of the agent on screen, a network question answered in one tab while
// the other tab's dialog closes (on a desktop and on a phone, by touch), a
// host allowed always and taken back, and the new-agent form narrowing the
// policy. The daemon's egress proxy finds `example.test` at 127.0.0.1
// (`--egress-resolve`, a hidden flag for tests), where the test serves HTTP.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Locator, Page } from '@playwright/test';
import {
  test as base, expect, agentId, createAgent, enrolled, openAgent, project, prompt, startDaemon, stopDaemon,
  unixCall, type Daemon,
} from './daemon';

/** The HTTP server the agent reaches: its port, and how many requests it answered. */
type Web = { port: number; hits: () => number };

const BODY = 'hello-from-example-test';

const test = base.extend<{}, { web: Web; daemon: Daemon }>({
  web: [
    async ({}, use) => {
      let hits = 0;
      const server = createServer((_request, response) => {
        hits += 1;
        response.end(`${BODY}\n`);
      });
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      await use({ port: (server.address() as AddressInfo).port, hits: () => hits });
      server.closeAllConnections();
      await new Promise((closed) => server.close(closed));
    },
    { scope: 'worker' },
  ],
  daemon: [
    async ({}, use) => {
      const daemon = await startDaemon(['--egress-resolve', 'example.test=127.0.0.1']);
      await use(daemon);
      await stopDaemon(daemon);
    },
    { scope: 'worker' },
  ],
});

const curl = (web: Web) => `run: curl -sS --max-time 20 http://example.test:${web.port}/`;

/** The containment line of the agent on screen. */
const containment = (page: Page): Locator => page.getByRole('group', { name: 'Sandbox' });

/** A tab on the dashboard of `daemon` (enrolled already in its context), with `name` open. */
async function secondTab(page: Page, daemon: Daemon, name: string): Promise<Page> {
  const other = await page.context().newPage();
  await other.goto(daemon.baseURL);
  await expect(other.locator('.connection')).toHaveText('connected');
  await openAgent(other, name);
  return other;
}

/** Checks that `dialog` asks about the test's host as a network question. */
async function asksForTheHost(dialog: Locator, web: Web): Promise<void> {
  const card = dialog.locator('.network-ask');
  await expect(card).toBeVisible();
  await expect(card.locator('.network-title')).toHaveText('Network access');
  await expect(card.locator('.network-host')).toHaveText('example.test');
  await expect(card.locator('.network-port')).toHaveText(`:${web.port}`);
  // curl goes through the proxy with a plain `http://` request.
  await expect(card.locator('.network-through')).toHaveText('through HTTP');
}

test('a network question is answered in one tab while the other tab\'s dialog closes; a host allowed always is revoked', async ({ browser, daemon, web }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'fetcher');
  // The configured policy: the agent writes its own directory and asks about hosts.
  await expect(containment(tab).locator('.sandbox-mode')).toHaveText('Sandboxed: workspace-write');
  await expect(containment(tab).locator('.sandbox-network')).toHaveText('network: ask');
  await expect(containment(tab).locator('.sandbox-inside')).toHaveCount(0);
  await expect(containment(tab).locator('.sandbox-host')).toHaveCount(0);
  const other = await secondTab(tab, daemon, 'fetcher');
  await expect(containment(other).locator('.sandbox-mode')).toHaveText('Sandboxed: workspace-write');

  // The command is asked first; then the host it connects to, in both tabs.
  await prompt(tab, curl(web));
  const dialog = tab.getByRole('dialog');
  const otherDialog = other.getByRole('dialog');
  await expect(dialog).toContainText('curl');
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await asksForTheHost(dialog, web);
  await asksForTheHost(otherDialog, web);
  await expect(otherDialog.getByRole('heading')).toHaveText('fetcher asks for network access');
  // Its three choices, with their keys; "Always allow" has none (crate::guard).
  await expect(otherDialog.locator('button.answer')).toHaveText([
    'Allow this connection (y)',
    `Always allow example.test:${web.port} for this agent`,
    'Deny (n)',
  ]);
  await expect(tab).toHaveTitle('(1) Shard');
  await tab.screenshot({ path: testInfo.outputPath('network-question.png') });

  // The other tab answers with its shortcut once armed; this tab's dialog goes.
  await expect(otherDialog).toBeFocused();
  await other.waitForTimeout(900);
  await other.keyboard.press('y');
  await expect(otherDialog).toBeHidden();
  await expect(dialog).toBeHidden();
  await expect(tab).toHaveTitle('Shard');
  await expect(tab.locator('.tool').last()).toContainText(BODY);
  expect(web.hits()).toBe(1);
  // Allowed once: nothing kept.
  await expect(containment(tab).locator('.sandbox-host')).toHaveCount(0);

  // Allowed always (two separate activations), from the inbox of this tab.
  await prompt(other, curl(web));
  await otherDialog.getByRole('button', { name: /Allow once/ }).click();
  await asksForTheHost(dialog, web);
  await tab.keyboard.press('Escape'); // later: it stays in the inbox
  const entry = tab.locator('.inbox-item', { has: tab.locator('.network-ask') });
  await expect(entry.locator('.network-host')).toHaveText('example.test');
  const always = entry.locator('button.answer[data-intent="persist"]');
  await always.click();
  await expect(always).toHaveText(/^Confirm: always allow/);
  await always.click();
  await expect(entry).toHaveCount(0);
  await expect(otherDialog).toBeHidden();
  await expect(other.locator('.tool').last()).toContainText(BODY);
  const host = `example.test:${web.port}`;
  for (const page of [tab, other]) {
    const granted = containment(page).locator('.sandbox-host[data-granted="true"]');
    await expect(granted).toHaveCount(1);
    await expect(granted.locator('code')).toHaveText(host);
  }
  await tab.screenshot({ path: testInfo.outputPath('granted-host.png') });

  // Taken back in one tab: gone in both, and the daemon keeps nothing.
  await tab.getByRole('button', { name: `Revoke ${host}` }).click();
  await expect(containment(tab).locator('.sandbox-host')).toHaveCount(0);
  await expect(containment(other).locator('.sandbox-host')).toHaveCount(0);
  const status = await unixCall(daemon, { id: 's', type: 'agent.status', agent_id: await agentId(daemon, 'fetcher') });
  expect(status.data.agents[0].sandbox.granted_hosts).toBeUndefined();

  // So the next connection asks again; denied, nothing reaches the server.
  await prompt(tab, curl(web));
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await asksForTheHost(dialog, web);
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toBeHidden();
  await expect(otherDialog).toBeHidden();
  await expect(tab.locator('.agent-header .status')).toHaveText('idle');
  expect(web.hits()).toBe(2);
  await context.close();
});

test('at 390×844 by touch: the containment line, a network question tapped in one tab while the other closes, a host revoked', async ({ browser, daemon, web }, testInfo) => {
  const phoneSize = { viewport: { width: 390, height: 844 }, touch: true };
  const [context, phone] = await enrolled(browser, daemon, phoneSize);
  await createAgent(phone, project(), 'pocket-fetcher');
  await expect(containment(phone)).toBeInViewport();
  await expect(containment(phone).locator('.sandbox-mode')).toHaveText('Sandboxed: workspace-write');
  await expect(containment(phone).locator('.sandbox-network')).toHaveText('network: ask');
  const other = await secondTab(phone, daemon, 'pocket-fetcher');
  await phone.screenshot({ path: testInfo.outputPath('phone-containment.png') });

  await prompt(phone, curl(web));
  const dialog = phone.getByRole('dialog');
  const otherDialog = other.getByRole('dialog');
  await dialog.getByRole('button', { name: /Allow once/ }).tap();
  await asksForTheHost(dialog, web);
  await asksForTheHost(otherDialog, web);
  const allow = dialog.getByRole('button', { name: /Allow this connection/ });
  await expect(allow).toBeInViewport();
  await expect(dialog.locator('.network-host')).toBeInViewport();
  await phone.screenshot({ path: testInfo.outputPath('phone-network-question.png') });
  await allow.tap();
  await expect(dialog).toBeHidden();
  await expect(otherDialog).toBeHidden();
  await expect(phone.locator('.tool').last()).toContainText(BODY);

  // Allowed always from the other tab, by two taps; revoked on the phone by one.
  await prompt(other, curl(web));
  await otherDialog.getByRole('button', { name: /Allow once/ }).tap();
  await asksForTheHost(otherDialog, web);
  const always = otherDialog.locator('button.answer[data-intent="persist"]');
  await always.tap();
  await expect(always).toHaveText(/^Confirm: always allow/);
  await always.tap();
  await expect(otherDialog).toBeHidden();
  await expect(dialog).toBeHidden();
  const host = `example.test:${web.port}`;
  const revoke = phone.getByRole('button', { name: `Revoke ${host}` });
  await expect(revoke).toBeInViewport();
  await expect(containment(other).locator('.sandbox-host[data-granted="true"] code')).toHaveText(host);
  await phone.screenshot({ path: testInfo.outputPath('phone-granted-host.png') });
  await revoke.tap();
  await expect(containment(phone).locator('.sandbox-host')).toHaveCount(0);
  await expect(containment(other).locator('.sandbox-host')).toHaveCount(0);
  await context.close();
});

test('the new-agent form narrows the sandbox, and sends nothing when left as configured', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  const sent: any[] = [];
  tab.on('websocket', (socket) => socket.on('framesent', (frame) => {
    const message = JSON.parse(frame.payload.toString());
    if (message.type === 'agent.create') sent.push(message);
  }));
  // The socket was opened before the listener: reload so its frames are seen.
  await tab.reload();
  await expect(tab.locator('.connection')).toHaveText('connected');

  // (The containment line of the agent on screen is a "Sandbox" too.)
  const form = tab.getByRole('form', { name: 'Create an agent' });
  await tab.locator('details.create-panel summary').click();
  await form.getByLabel('Working directory').fill(project());
  await form.getByLabel('Name', { exact: true }).fill('narrowed');
  await expect(form.getByLabel('Sandbox', { exact: true })).toHaveValue('');
  await expect(form.getByLabel('Network', { exact: true })).toHaveValue('');
  await form.getByLabel('Sandbox', { exact: true }).selectOption('read-only');
  await form.getByLabel('Network', { exact: true }).selectOption('deny');
  await form.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('narrowed');
  await expect(containment(tab).locator('.sandbox-mode')).toHaveText('Sandboxed: read-only');
  await expect(containment(tab).locator('.sandbox-network')).toHaveText('network: deny');
  const status = await unixCall(daemon, { id: 's', type: 'agent.status', agent_id: await agentId(daemon, 'narrowed') });
  expect(status.data.agents[0].sandbox).toMatchObject({ mode: 'read-only', network: 'deny' });
  expect(sent.at(-1).sandbox).toEqual({ mode: 'read-only', network: 'deny' });

  // Back to as configured: no `sandbox` at all.
  // The choices stayed for the next agent; put back, nothing is sent.
  await tab.locator('details.create-panel summary').click();
  await expect(form.getByLabel('Sandbox', { exact: true })).toHaveValue('read-only');
  await form.getByLabel('Name', { exact: true }).fill('as-configured');
  await form.getByLabel('Sandbox', { exact: true }).selectOption('');
  await form.getByLabel('Network', { exact: true }).selectOption('');
  await form.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('as-configured');
  await expect(containment(tab).locator('.sandbox-mode')).toHaveText('Sandboxed: workspace-write');
  expect(sent.at(-1)).not.toHaveProperty('sandbox');
  await context.close();
});
