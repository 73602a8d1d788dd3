// After a session switch, a resume, a kill or a daemon restart, a tab that
// stayed open shows exactly what a freshly opened tab shows: the same
// transcript rows, the same status and the same buttons (PROTOCOL.md §6.4,
// the `sync` a reattachment or a new runtime brings). Each test compares
// the open tab with a new tab of the same browser, in Chromium against the
// real daemon and the demo model.
import type { BrowserContext, Page } from '@playwright/test';
import {
  allowConsoleError, test, expect, agentId, createAgent, enrolled, openAgent, project, prompt, unixCall, Restartable,
  type Daemon, agentRow } from './daemon';

/** What a tab shows of the agent on screen, as plain data to compare. */
type Shown = {
  agent: string;
  status: string;
  rows: string[];
  buttons: string[];
  dialogs: number;
  inbox: string[];
};

async function shown(page: Page): Promise<Shown> {
  return page.evaluate(() => {
    const text = (element: Element | null | undefined) => (element?.textContent ?? '').replace(/\s+/g, ' ').trim();
    // Notices (a dropped follow-up, a failed call) are this tab's own lines,
    // told as it happened: a tab opened later never had them.
    const rows = [...document.querySelectorAll('.transcript .rows > .row > :is(.message, .tool, .compaction)')].map((row) => {
      if (row.classList.contains('tool')) {
        const tool = row as HTMLElement;
        const output = text(row.querySelector('pre.output, details.raw pre'));
        const line = `${text(row.querySelector('.tool-name'))} ${text(row.querySelector('.tool-args'))}`;
        return `tool ${tool.dataset.state}: ${line} → ${output}`;
      }
      const kind = ['user', 'assistant', 'compaction', 'notice-line'].find((name) => row.classList.contains(name));
      const fork = row.querySelector(':scope > button.fork') ? ' [fork]' : '';
      return `${kind}: ${text(row)}${fork}`;
    });
    const buttons = [...document.querySelectorAll('.agent-view .prompt-actions button')]
      .map((button) => `${text(button)}${(button as HTMLButtonElement).disabled ? ' (disabled)' : ''}`);
    return {
      agent: text(document.querySelector('.agent-view h2')),
      status: text(document.querySelector('.agent-view .status')),
      rows,
      buttons,
      dialogs: document.querySelectorAll('[role="dialog"]').length,
      inbox: [...document.querySelectorAll('.inbox-item')].map((item) => text(item)),
    };
  });
}

/** A new tab of the same browser, with the agent called `name` opened and synced. */
async function fresh(context: BrowserContext, daemon: Daemon, name: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(daemon.baseURL);
  await expect(page.locator('.connection')).toHaveText('connected');
  await openAgent(page, name);
  await expect(page.locator('.agent-view')).toHaveAttribute('data-attach', 'sync');
  return page;
}

/**
 * Waits until `open` shows what a fresh tab on the same agent shows, then
 * returns it. Both may still be settling: the open tab applying its `sync`,
 * and either one following a stopped agent that the fresh tab's attachment
 * starts again (starting, then idle). So the two are read together, again
 * and again, until they agree on two reads in a row; what one tab showed at
 * one moment is never held against what the other shows later.
 */
async function sameAsFresh(context: BrowserContext, daemon: Daemon, open: Page, name: string): Promise<Shown> {
  const reference = await fresh(context, daemon, name);
  try {
    const deadline = Date.now() + 10_000;
    let agreed = 0;
    for (;;) {
      const expected = await shown(reference);
      const seen = await shown(open);
      agreed = JSON.stringify(seen) === JSON.stringify(expected) ? agreed + 1 : 0;
      if (agreed === 2) {
        return expected;
      }
      if (Date.now() > deadline) {
        // Says field by field where the open tab differs.
        expect(seen).toEqual(expected);
      }
      await open.waitForTimeout(150);
    }
  } finally {
    await reference.close();
  }
}

async function turn(page: Page, text: string): Promise<void> {
  await prompt(page, text);
  await expect(page.locator('.message.assistant').last()).toHaveText(`You said: ${text}`);
  await expect(page.locator('.agent-view .status')).toHaveText('idle');
}

// A reply offers Fork, a message Edit (both `.fork`), the first none.
const original = [
  'user: one', 'assistant: You said: one [fork]',
  'user: two [fork]', 'assistant: You said: two [fork]',
  'user: three [fork]', 'assistant: You said: three [fork]',
];
const forked = ['user: one', 'assistant: You said: one [fork]'];

test('after a switch to a fork, a resume and a daemon restart, open tabs show what a fresh tab shows', async ({ browser }) => {
  test.setTimeout(120_000);
  const host = new Restartable();
  let daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'brancher');
    for (const text of ['one', 'two', 'three']) await turn(tab, text);

    // A second tab forks at the first reply and switches to the fork.
    const other = await fresh(context, daemon, 'brancher');
    expect((await shown(other)).rows).toEqual(original);
    const first = other.locator('.message.assistant').first();
    await first.hover();
    await first.getByRole('button', { name: 'Fork' }).click();
    await expect(other.locator('.ledger-note')).toContainText('Forked into a new session');
    await other.getByRole('button', { name: 'Switch to the fork' }).click();
    await expect(other.locator('.ledger-note')).toContainText('Switched sessions');

    // Both open tabs show the fork, as a fresh tab does.
    let now = await sameAsFresh(context, daemon, tab, 'brancher');
    expect(now.rows).toEqual(forked);
    expect(await shown(other)).toEqual(now);

    // The first tab resumes the original session: its six rows, everywhere.
    const sessions = tab.locator('details.sessions-panel');
    await sessions.locator('summary').click();
    await expect(sessions.locator('li.session')).toHaveCount(2);
    await sessions.locator('li.session:not(.active)').getByRole('button', { name: 'Resume' }).click();
    await expect(tab.locator('.ledger-note')).toContainText('Switched sessions');
    now = await sameAsFresh(context, daemon, tab, 'brancher');
    expect(now.rows).toEqual(original);
    await expect.poll(() => shown(other)).toEqual(now);

    // A daemon restart: both tabs reconnect and still show the same rows.
    await host.stop('SIGTERM');
    await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
    daemon = await host.start();
    await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    await expect(other.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    now = await sameAsFresh(context, daemon, tab, 'brancher');
    expect(now.rows).toEqual(original);
    await expect.poll(() => shown(other)).toEqual(now);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('after a kill mid-stream or mid-question, the open tab shows what a fresh tab shows', async ({ browser }) => {
  test.setTimeout(120_000);
  const host = new Restartable();
  const daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'victim');
    const status = tab.locator('.agent-view .status');
    const row = agentRow(tab, 'victim');

    // Killed while it streams.
    await prompt(tab, 'stream: 3000');
    await expect(status).toHaveText('streaming');
    await expect(tab.locator('.message.assistant').last()).toContainText('tick-20 ');
    // Mid-reply, Kill asks once more.
    const kill = tab.locator('.agent-view .lifecycle').getByRole('button', { name: /^Kill/ });
    await kill.click();
    await expect(kill).toHaveText('Kill mid-reply?');
    await kill.click();
    await expect(row.locator('.runtime')).toHaveText('stopped');
    // Stopped is not streaming: nothing to steer or abort.
    await expect(status).toHaveText('stopped');
    expect((await shown(tab)).buttons).toEqual(['Send']);
    let now = await sameAsFresh(context, daemon, tab, 'victim');
    expect(now.status).toBe('idle');  // a fresh tab's attachment started it again
    expect(now.buttons).toEqual(['Send']);
    // Kill asks the agent to stop (SIGTERM): it ends the turn and keeps
    // the reply so far, which every tab shows.
    expect(now.rows).toHaveLength(2);
    expect(now.rows[0]).toBe('user: stream: 3000');
    expect(now.rows[1]).toMatch(/^assistant: tick-1 .*tick-20 .*\[fork\]$/);

    // Killed while it waits for permission to run a command (from another
    // client: the question's dialog covers the page).
    await prompt(tab, 'run: echo never-run');
    await expect(tab.getByRole('dialog')).toContainText('echo never-run');
    await expect(status).toHaveText('waiting for permission');
    const id = await agentId(daemon, 'victim');
    expect((await unixCall(daemon, { id: 'k', type: 'agent.kill', agent_id: id, force: true })).success).toBe(true);
    await expect(row.locator('.runtime')).toHaveText('stopped');
    // Nobody is asked anything any more.
    await expect(status).toHaveText('stopped');
    await expect(tab.getByRole('dialog')).toHaveCount(0);
    await expect(tab.locator('.inbox-item')).toHaveCount(0);
    expect((await shown(tab)).buttons).toEqual(['Send']);
    now = await sameAsFresh(context, daemon, tab, 'victim');
    expect(now.status).toBe('idle');
    expect(now.buttons).toEqual(['Send']);
    expect(now.dialogs).toBe(0);
    expect(now.rows.at(-1)).toMatch(/^tool error: bash echo never-run → interrupted/);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('after the daemon is killed mid-stream and started again, the open tab shows what a fresh tab shows, and no "Not connected"', async ({ browser }) => {
  test.setTimeout(120_000);
  const host = new Restartable();
  let daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'crashed');
    await turn(tab, 'before the crash');
    await prompt(tab, 'stream: 3000');
    await expect(tab.locator('.agent-view .status')).toHaveText('streaming');
    await expect(tab.locator('.message.assistant').last()).toContainText('tick-20 ');

    await host.stop('SIGKILL');
    await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
    // Something sent while the daemon is away: the page says it could not.
    await prompt(tab, 'while away');
    await expect(tab.locator('.notice')).toHaveText('Not connected; try again in a moment.');

    daemon = await host.start();
    await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    // Connected again: the notice has gone.
    await expect(tab.locator('.notice', { hasText: 'Not connected' })).toHaveCount(0);
    let now = await sameAsFresh(context, daemon, tab, 'crashed');
    expect(now.status).toBe('idle');
    expect(now.buttons).toEqual(['Send']);
    expect(now.rows.slice(0, 3)).toEqual([
      'user: before the crash', 'assistant: You said: before the crash [fork]', 'user: stream: 3000 [fork]',
    ]);

    // A graceful restart while the agent waits for permission: the same.
    await tab.getByLabel('Message to the agent').fill('');
    await prompt(tab, 'run: echo across-a-restart');
    await expect(tab.getByRole('dialog')).toContainText('echo across-a-restart');
    await host.stop('SIGTERM');
    await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
    daemon = await host.start();
    await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    now = await sameAsFresh(context, daemon, tab, 'crashed');
    expect(now.status).toBe('idle');
    expect(now.buttons).toEqual(['Send']);
    expect(now.dialogs).toBe(0);
    // A graceful stop lets the agent abort the turn its own way.
    expect(now.rows.at(-1)).toMatch(/^tool error: bash echo across-a-restart → aborted while waiting for permission/);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('a follow-up queued before a daemon restart is shown with its reply in every open tab', async ({ browser }) => {
  test.setTimeout(120_000);
  const host = new Restartable();
  let daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'owed');
    const other = await fresh(context, daemon, 'owed');
    await prompt(tab, 'stream: 3000');
    await expect(tab.locator('.agent-view .status')).toHaveText('streaming');
    await tab.getByLabel('Message to the agent').fill('after the restart');
    await tab.getByRole('button', { name: 'Queue follow-up' }).click();
    await expect(tab.getByLabel('Message to the agent')).toHaveValue('');

    // The daemon stops and starts again; the restored agent takes the
    // follow-up up. Both tabs show it, and its reply after it.
    await host.stop('SIGTERM');
    await expect(other.locator('.connection')).toHaveText(/reconnecting/);
    daemon = await host.start();
    for (const page of [tab, other]) {
      await expect(page.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
      await expect(page.locator('.message.assistant').last()).toHaveText('You said: after the restart', { timeout: 20_000 });
      await expect(page.locator('.message.user', { hasText: 'after the restart' })).toHaveCount(1);
    }
    const now = await sameAsFresh(context, daemon, other, 'owed');
    expect(now.rows.slice(-2)).toEqual(['user: after the restart [fork]', 'assistant: You said: after the restart [fork]']);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('offline, a question cannot be answered: its buttons wait for the connection and it stays open', async ({ browser }) => {
  const host = new Restartable();
  let daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'unanswered');
    await prompt(tab, 'run: echo asked-before-the-drop');
    const dialog = tab.getByRole('dialog');
    await expect(dialog).toContainText('asked-before-the-drop');
    await dialog.getByRole('button', { name: /^Later/ }).click();
    const item = tab.locator('.inbox-item');
    const allow = item.locator('button[data-intent="allow"]');
    await expect(allow).toBeEnabled();

    await host.stop('SIGKILL');
    await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
    await expect(allow).toBeDisabled();
    await expect(item.locator('.offline-note')).toHaveText('Offline: answers wait for the connection.');
    // A keyboard shortcut does not answer it either: it stays in the inbox.
    await item.focus();
    await tab.keyboard.press('y');
    await expect(item).toHaveCount(1);

    daemon = await host.start();
    await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    await expect(item.locator('.offline-note')).toHaveCount(0);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('a long backoff ends at once: "Reconnect now", the network back, the tab shown again', async ({ browser }) => {
  test.setTimeout(120_000);
  // While the daemon is down the browser logs each refused connection.
  allowConsoleError(/ERR_CONNECTION_REFUSED/);
  const host = new Restartable();
  let daemon = await host.start();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    const connection = tab.locator('.connection');
    await expect(connection).toHaveText('connected');
    await expect(tab.getByRole('button', { name: 'Reconnect now' })).toHaveCount(0);
    // Each way back, tried once the backoff has grown to 8 s: the page must
    // connect well before that wait would have ended.
    const ways: [string, () => Promise<unknown>][] = [
      ['the button', () => tab.getByRole('button', { name: 'Reconnect now' }).click()],
      ['online', () => tab.evaluate(() => window.dispatchEvent(new Event('online')))],
      ['visibilitychange', () => tab.evaluate(() => document.dispatchEvent(new Event('visibilitychange')))],
      ['pageshow', () => tab.evaluate(() => window.dispatchEvent(new Event('pageshow')))],
    ];
    for (const [way, wake] of ways) {
      await host.stop();
      await expect(connection, way).toHaveText('reconnecting in 8 s', { timeout: 30_000 });
      daemon = await host.start();
      const woken = Date.now();
      await wake();
      await expect(connection, way).toHaveText('connected', { timeout: 5_000 });
      console.log(`${way}: connected ${Date.now() - woken} ms after it, with 8 s of backoff left`);
      await expect(tab.getByRole('button', { name: 'Reconnect now' })).toHaveCount(0);
    }
    await context.close();
  } finally {
    await host.dispose();
  }
});
