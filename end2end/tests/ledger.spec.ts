// The dashboard's usage, sessions and approval history (docs/PROTOCOL-NOTES.md,
// "Usage rollups", "Session operations", "Approval history") in Chromium
// against the real daemon and the demo model.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  test, expect, createAgent, enrolled, openAgent, project, prompt, startDaemon, stopDaemon,
  unixCall,
  Restartable, type Daemon, agentRow } from './daemon';

/** A daemon of its own, with `config` as its config.toml. */
async function configured(config: string): Promise<Daemon> {
  const daemon = await startDaemon();
  writeFileSync(join(daemon.home, 'config.toml'), config);
  return daemon;
}

/** The page's own token formatting (app/src/views/ledger.rs). */
function tokens(count: number): string {
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${Math.floor(count / 1000)}.${Math.floor((count % 1000) / 100)}k`;
  return `${Math.floor(count / 1_000_000)}.${Math.floor((count % 1_000_000) / 100_000)}M`;
}

/** The page's own cost formatting: four decimals. */
function dollars(cost: number): string {
  const units = Math.round(cost * 10_000);
  return `$${Math.floor(units / 10_000)}.${String(units % 10_000).padStart(4, '0')}`;
}

test('usage: each agent in its row and view, all agents above the list, sessions and turns in its panel', async ({ browser }) => {
  // A call costs its input tokens plus twice its output tokens, in dollars.
  const daemon = await configured('[prices.demo]\ninput = 1000000.0\noutput = 2000000.0\n');
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'spender');
    // Long enough to spend thousands of tokens: counts are shortened (2.1k).
    await prompt(tab, `hello usage ${'word '.repeat(2000)}`);
    await expect(tab.locator('.message.assistant').last()).toContainText('You said: hello usage');
    await createAgent(tab, project(), 'saver');
    await prompt(tab, 'just once');
    await expect(tab.locator('.message.assistant').last()).toHaveText('You said: just once');

    // Every figure is the daemon's rollup, as usage.global reports it.
    const global = (await unixCall(daemon, { id: 'g', type: 'usage.global' })).data;
    expect(global.agents).toHaveLength(2);
    const total = global.total;
    expect(total.cost).toBe(total.input + 2 * total.output);
    await expect(tab.locator('.usage-total')).toHaveText(
      `All agents: ${tokens(total.input + total.output)} tok · ${dollars(total.cost)}`,
    );
    for (const line of global.agents) {
      const used = line.usage;
      const row = tab.locator(`li.agent[data-agent-id="${line.agent_id}"]`);
      // Token counts read the same way everywhere: the row, the total, the header.
      await expect(row.locator('.usage')).toHaveText(`${tokens(used.input + used.output)} tok · ${dollars(used.cost)}`);
    }

    // The spender's view: its total in the header, then its panel.
    await agentRow(tab, 'spender').locator('button.open').click();
    await expect(tab.locator('.agent-view h2')).toHaveText('spender');
    const listed = (await unixCall(daemon, { id: 'l', type: 'agent.list' })).data.agents;
    const spender = listed.find((agent: any) => agent.name === 'spender').usage;
    expect(spender.input).toBeGreaterThan(1000);
    await expect(tab.locator('.agent-view [title="tokens used"]')).toHaveText(
      `${tokens(spender.input)} in · ${tokens(spender.output)} out · ${dollars(spender.cost)}`,
    );
    const panel = tab.locator('details.usage-panel');
    await panel.locator('summary').click();
    await expect(panel.locator('.usage-agent-total')).toHaveText(/ · 1 call · 1 turn$/);
    await expect(panel.locator('.usage-sessions li')).toHaveCount(1);
    // Named by its first message, not its id.
    await expect(panel.locator('.usage-sessions li .session-title')).toHaveText(/^hello usage word word .*\(current\)$/);
    await expect(panel.locator('.usage-turn')).toHaveCount(1);
    await expect(panel.locator('.usage-turn').first()).toContainText('demo');

    // A new turn while the panel is open: the panel, the row and the total follow.
    await prompt(tab, 'a second turn');
    await expect(tab.locator('.message.assistant').last()).toHaveText('You said: a second turn');
    await expect(panel.locator('.usage-turn')).toHaveCount(2);
    await expect(panel.locator('.usage-agent-total')).toContainText('2 calls · 2 turns');
    const after = (await unixCall(daemon, { id: 'g2', type: 'usage.global' })).data.total;
    expect(after.turns).toBe(3);
    await expect(tab.locator('.usage-total')).toHaveText(
      `All agents: ${tokens(after.input + after.output)} tok · ${dollars(after.cost)}`,
    );
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});

test('after a daemon restart every agent is listed with what it spent, running or not', async ({ browser }) => {
  const host = new Restartable();
  let daemon = await host.start();
  try {
    writeFileSync(join(daemon.home, 'config.toml'), '[prices.demo]\ninput = 1000000.0\noutput = 2000000.0\n');
    const [context, tab] = await enrolled(browser, daemon);
    for (const name of ['thrifty', 'lavish']) {
      await createAgent(tab, project(), name);
      await prompt(tab, `hello from ${name}`);
      await expect(tab.locator('.message.assistant').last()).toHaveText(`You said: hello from ${name}`);
    }
    const row = (name: string) => agentRow(tab, name).locator('.usage');
    const total = tab.getByLabel('Usage of all agents');
    const before = [await row('thrifty').textContent(), await row('lavish').textContent(), await total.textContent()];
    expect(before[0]).toMatch(/^\d+ tok · \$/);

    await host.stop('SIGTERM');
    daemon = await host.start();
    // A fresh page that opens no agent: both are listed, stopped, as they were.
    const page = await context.newPage();
    await page.goto(daemon.baseURL);
    await expect(page.locator('.connection')).toHaveText('connected', { timeout: 20_000 });
    const rowOf = (name: string) => agentRow(page, name).locator('.usage');
    await expect(rowOf('thrifty')).toHaveText(before[0]!);
    await expect(rowOf('lavish')).toHaveText(before[1]!);
    await expect(page.getByLabel('Usage of all agents')).toHaveText(before[2]!);
    await context.close();
  } finally {
    await host.dispose();
  }
});

test('fork from a message, switch to the fork and back, and compact, from the dashboard', async ({ browser }) => {
  // Compaction keeps almost nothing, so that "Compact now" has work to do.
  const daemon = await configured('[compaction]\nkeep_recent_tokens = 1\n');
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'brancher');
    await prompt(tab, 'first question');
    await expect(tab.locator('.message.assistant').last()).toHaveText('You said: first question');
    await prompt(tab, 'second question');
    await expect(tab.locator('.message.assistant').last()).toHaveText('You said: second question');
    const transcript = tab.locator('.transcript');

    // Fork at the first reply: the sessions panel opens with both sessions.
    const firstReply = tab.locator('.message.assistant').first();
    await firstReply.hover();
    await firstReply.getByRole('button', { name: 'Fork' }).click();
    await expect(tab.locator('.ledger-note')).toContainText('Forked into a new session');
    const sessions = tab.locator('details.sessions-panel');
    await expect(sessions).toHaveJSProperty('open', true);
    await expect(sessions.locator('li.session')).toHaveCount(2);
    await expect(sessions.locator('li.session.active .session-title')).toHaveText('first question');
    await expect(transcript).toContainText('second question'); // the agent is still on its session
    // Both begin with the same message: each row says where it has got to.
    const source = sessions.locator('li.session.active');
    const fork = sessions.locator('li.session:not(.active)');
    await expect(source.locator('.session-latest')).toHaveText('last: second question');
    await expect(fork.locator('.session-title')).toHaveText('first question');
    await expect(fork.locator('.badge')).toHaveText('fork of 1');
    await expect(fork.locator('.session-latest')).toHaveCount(0);

    // Switch to the fork: the transcript is the fork's, and the talk goes on there.
    await sessions.getByRole('button', { name: 'Switch to the fork' }).click();
    await expect(transcript).not.toContainText('second question');
    await expect(transcript).toContainText('You said: first question');
    // What was done is said for a few seconds (8), then goes.
    const note = tab.locator('.ledger-note');
    await expect(note).toHaveText('Switched sessions: the transcript follows.');
    await expect(note).toHaveCount(0, { timeout: 12_000 });
    await expect(sessions.locator('li.session.active .badge', { hasText: 'fork' })).toBeVisible();
    await prompt(tab, 'on the fork');
    await expect(tab.locator('.message.assistant').last()).toHaveText('You said: on the fork');
    await expect(sessions.locator('li.session.active .session-latest')).toHaveText('last: on the fork');

    // Resume the first session: its own transcript comes back, without the fork's.
    await sessions.getByRole('button', { name: 'Resume' }).click();
    await expect(transcript).toContainText('You said: second question');
    await expect(transcript).not.toContainText('on the fork');
    await expect(sessions.locator('li.session.active .badge', { hasText: 'fork' })).toHaveCount(0);

    // Compact now: the result in the note, and the summary in the transcript.
    await sessions.getByRole('button', { name: 'Compact now' }).click();
    await expect(tab.locator('.ledger-note')).toHaveText(/^Compacted: \d+ → \d+ tokens \(summary #1\)\.$/);
    await expect(transcript.locator('.compaction')).toContainText('compacted (#1)');

    // The fork can also become an agent of its own.
    const reply = tab.locator('.message.assistant').last();
    await reply.hover();
    await reply.getByRole('button', { name: 'Fork' }).click();
    await sessions.getByRole('button', { name: 'Open it as a new agent' }).click();
    await expect(tab.locator('.agent-view h2')).toHaveText('brancher (fork)');
    await expect(tab.locator('li.agent')).toHaveCount(2);
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});

test('the approval history says what was asked, the answer, and who gave it from where', async ({ browser, daemon }) => {
  // Far from UTC: times are shown in the reader's own zone.
  const [context, tab] = await enrolled(browser, daemon, { timezoneId: 'Asia/Kolkata' });
  const localNow = () => tab.evaluate(() => {
    const now = new Date();
    const two = (n: number) => String(n).padStart(2, '0');
    return `${now.getFullYear()}-${two(now.getMonth() + 1)}-${two(now.getDate())} ${two(now.getHours())}:${two(now.getMinutes())}`;
  });
  await createAgent(tab, project(), 'approval-keeper');
  const history = tab.locator('details.approvals-panel');
  await history.locator('summary').click();
  await expect(history).toContainText('No questions asked yet.');

  await prompt(tab, 'run: echo approved-here');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await tab.waitForTimeout(900); // answers are armed after 800 ms (crate::guard)
  const before = await localNow();
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await expect(tab.locator('.tool').last().locator('.tool-footer')).toContainText('exit code 0');
  const after = await localNow();
  // The panel is open: the answer shows without reopening it.
  const newest = history.locator('li.approval').first();
  await expect(newest).toHaveAttribute('data-outcome', 'allow');
  await expect(newest.locator('.approval-what')).toHaveText('bash');
  await expect(newest.locator('.approval-prompt')).toContainText('echo approved-here');
  await expect(newest.locator('.approval-who')).toContainText(/^in a browser from 127\.0\.0\.1 at \d{4}-\d\d-\d\d \d\d:\d\d$/);
  // Which enrolled browser, for who wants it, not in the words.
  await expect(newest.locator('.approval-who')).toHaveAttribute('title', /^enrolled browser [0-9a-f]{6}$/);
  const answeredAt = (await newest.locator('.approval-who').textContent())!.split(' at ')[1];
  expect([before, after]).toContain(answeredAt);

  await prompt(tab, 'run: echo refused-here');
  await expect(dialog).toBeVisible();
  await tab.waitForTimeout(900);
  await dialog.getByRole('button', { name: 'Deny' }).click();
  await expect(history.locator('li.approval')).toHaveCount(2);
  await expect(history.locator('li.approval').first()).toHaveAttribute('data-outcome', 'deny');
  await expect(history.locator('li.approval').first().locator('.approval-prompt')).toContainText('echo refused-here');

  // Another tab sees the same history.
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await agentRow(other, 'approval-keeper').locator('button.open').click();
  const theirs = other.locator('details.approvals-panel');
  await theirs.locator('summary').click();
  await expect(theirs.locator('li.approval')).toHaveCount(2);
  await context.close();
});

test('a queued steer is taken back before it lands: its row goes, its text returns to the box, and the model never sees it', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'steered');
  await prompt(tab, 'stream: 300');
  await expect(tab.locator('.agent-view .status')).toHaveText('streaming');
  const box = tab.getByLabel('Message to the agent');
  await box.fill('actually, use the other file');
  await tab.getByRole('button', { name: 'Steer', exact: true }).click();
  await expect(box).toHaveValue('');
  await expect(tab.locator('.message.user', { hasText: 'actually, use the other file' })).toBeVisible();

  await tab.getByRole('button', { name: 'Take back' }).click();
  await expect(box).toHaveValue('actually, use the other file');
  await expect(tab.locator('.message.user', { hasText: 'actually, use the other file' })).toHaveCount(0);
  await expect(tab.getByRole('button', { name: 'Take back' })).toBeHidden();
  // The turn runs to its end without it: had the steer landed, the demo
  // model would have been called again and answered it.
  await expect(tab.locator('.agent-view .status')).toHaveText('idle', { timeout: 20_000 });
  await expect(tab.locator('.message.assistant').last()).toContainText('tick-300');
  await expect(tab.locator('.transcript')).not.toContainText('You said: actually');
  // And a reload (a sync from the session log) agrees.
  await tab.reload();
  await expect(tab.locator('.message.assistant').last()).toContainText('tick-300');
  await expect(tab.locator('.transcript')).not.toContainText('use the other file');
  await context.close();
});

test('a prompt shows in every tab as it lands, and can be edited from at once', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'zqxlive');
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await openAgent(other, 'zqxlive');

  await prompt(tab, 'a first word');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: a first word');
  await prompt(tab, 'asked in one tab');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: asked in one tab');
  // The other tab shows the prompt too, before any reload, with its reply.
  const seen = other.locator('.message.user', { hasText: 'asked in one tab' });
  await expect(seen).toHaveCount(1);
  await expect(other.locator('.message.assistant').last()).toHaveText('You said: asked in one tab');
  await seen.hover();
  await expect(seen.getByRole('button', { name: 'Edit' })).toBeVisible();
  // And the tab that sent it shows it once, with its entry known: Edit
  // starts a session up to the reply before it, the prompt in the box.
  const mine = tab.locator('.message.user', { hasText: 'asked in one tab' });
  await expect(mine).toHaveCount(1);
  await mine.hover();
  await mine.getByRole('button', { name: 'Edit' }).click();
  await expect(tab.getByLabel('Message to the agent')).toHaveValue('asked in one tab');
  await expect(tab.locator('.ledger-note')).toContainText('change it and send it');
  await expect(tab.locator('.message.user')).toHaveCount(1);
  // The first message has nothing before it to edit from.
  await tab.locator('.message.user').hover();
  await expect(tab.locator('.message.user .fork')).toHaveCount(0);
  await context.close();
});
