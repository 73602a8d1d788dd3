// The dashboard on a phone (390×844, touch) as a first-class layout, in
// Chromium against the real daemon: the agent view fits between the bars,
// its panels fold into one row, an opened agent lands on its newest
// message, a tap on a message does not fork it, every agent has an address
// and Back returns to the list.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, agentId, createAgent, enrolled, openAgent, project, prompt, agentRow } from './daemon';

const PHONE = { viewport: { width: 390, height: 844 }, touch: true };

/** The box of `selector`'s first match, which must be on screen. */
async function box(page: import('@playwright/test').Page, selector: string) {
  const found = await page.locator(selector).first().boundingBox();
  if (!found) throw new Error(`${selector} has no box`);
  return found;
}

test('on a phone the agent view fits between the bars, its panels fold into one row, and it opens on its newest message', async ({ browser, daemon }, testInfo) => {
  const [context, phone] = await enrolled(browser, daemon, PHONE);
  await createAgent(phone, project(), 'pocketful');
  for (let turn = 1; turn <= 6; turn++) {
    await prompt(phone, `stream: 12`);
    await expect(phone.locator('.agent-view .status')).toHaveText('idle');
  }
  await prompt(phone, 'the very last words');
  const last = phone.locator('.message.assistant').last();
  await expect(last).toContainText('the very last words');

  // Its name and status are below the top bar; Send is above the pane bar.
  const top = await box(phone, '.topbar');
  const bar = await box(phone, '.phonebar');
  const header = await box(phone, '.agent-header');
  const send = await box(phone, '.prompt button[type="submit"]');
  expect(header.y).toBeGreaterThanOrEqual(top.y + top.height - 1);
  expect(send.y + send.height).toBeLessThanOrEqual(bar.y + 1);
  expect(bar.y + bar.height).toBeLessThanOrEqual(844 + 1);
  // The page itself does not scroll: only the transcript does.
  expect(await phone.evaluate(() => document.scrollingElement!.scrollHeight <= window.innerHeight + 1)).toBe(true);
  await phone.screenshot({ path: testInfo.outputPath('phone-agent.png') });

  // Sessions, Usage, Budget and Approvals are one row of names.
  const panels = phone.locator('.ledger-panels > details > summary');
  await expect(panels).toHaveCount(4);
  const tops = await panels.evaluateAll((summaries) => summaries.map((summary) => Math.round(summary.getBoundingClientRect().top)));
  expect(new Set(tops).size, `summaries at ${tops}`).toBe(1);
  // One opened leaves most of the screen to the transcript.
  await phone.locator('.ledger-panels summary', { hasText: 'Sessions' }).click();
  await expect(phone.locator('.sessions-panel .session').first()).toBeVisible();
  const transcript = await box(phone, '.transcript');
  expect(transcript.height, 'the transcript keeps room with a panel open').toBeGreaterThan(844 * 0.3);
  expect((await box(phone, '.prompt button[type="submit"]')).y).toBeLessThanOrEqual(bar.y);
  await phone.screenshot({ path: testInfo.outputPath('phone-panel-open.png') });
  await phone.locator('.ledger-panels summary', { hasText: 'Sessions' }).click();

  // Opened again from the list, six times: each time on its newest message.
  for (let time = 0; time < 6; time++) {
    await phone.getByRole('button', { name: 'Back to agents' }).click();
    await expect(phone.locator('.agent-list')).toBeVisible();
    if (time === 0) {
      // Its card in the list says its status once.
      const card = await agentRow(phone, 'pocketful').innerText();
      expect(card.match(/\bidle\b/g), card).toHaveLength(1);
    }
    await openAgent(phone, 'pocketful');
    await expect(last).toBeInViewport();
    // At the very end, not just near it, and nothing to bring back.
    const gap = () => phone.locator('.transcript').evaluate((element) => element.scrollHeight - element.scrollTop - element.clientHeight);
    await expect.poll(gap).toBeLessThanOrEqual(8);
    await expect(phone.getByRole('button', { name: '↓ Latest' })).toBeHidden();
  }
  // Scrolled back, "↓ Latest" shows above the pane bar, and a tap on it
  // returns to the end.
  await phone.locator('.transcript').evaluate((element) => element.scrollTo({ top: 0 }));
  const latest = phone.getByRole('button', { name: '↓ Latest' });
  await expect(latest).toBeInViewport();
  const latestBox = await latest.boundingBox();
  expect(latestBox!.y + latestBox!.height).toBeLessThanOrEqual((await box(phone, '.phonebar')).y + 1);
  await latest.tap();
  await expect(latest).toBeHidden();
  const gap = () => phone.locator('.transcript').evaluate((element) => element.scrollHeight - element.scrollTop - element.clientHeight);
  await expect.poll(gap).toBeLessThanOrEqual(8);
  await context.close();
});

test('on a phone a tap on a message does not fork it; its Fork shows then, and forks', async ({ browser, daemon }) => {
  const [context, phone] = await enrolled(browser, daemon, PHONE);
  await createAgent(phone, project(), 'tapster');
  await prompt(phone, 'first words');
  await expect(phone.locator('.message.assistant').last()).toContainText('first words');
  await prompt(phone, 'second words');
  const reply = phone.locator('.message.assistant').last();
  await expect(reply).toContainText('second words');
  await expect(reply).toHaveAttribute('data-complete', 'true');

  // A reply can be forked from once complete.
  const message = phone.locator('.message.assistant').first();
  // Unseen until the message is chosen, so not yet a button a reader has.
  const fork = message.locator('button.fork');
  await expect(fork).toBeAttached();
  // Tap where the unseen Fork button sits: the message is selected, nothing forks.
  const where = await fork.boundingBox();
  const bubble = await message.boundingBox();
  const x = where && where.width > 0 ? where.x + where.width / 2 : bubble!.x + bubble!.width - 8;
  const y = where && where.height > 0 ? where.y + where.height / 2 : bubble!.y + 8;
  await phone.touchscreen.tap(x, y);
  await phone.waitForTimeout(500);
  await expect(phone.locator('.ledger-note', { hasText: 'Forked' })).toHaveCount(0);
  await expect(message.getByRole('button', { name: 'Fork' })).toBeVisible();
  // The Fork now seen forks.
  await fork.tap();
  await expect(phone.locator('.ledger-note')).toContainText('Forked into a new session');
  await context.close();
});

test('each agent has an address: Back returns to the list, Forward and a reload to the agent', async ({ browser, daemon }) => {
  for (const options of [PHONE, {}]) {
    const [context, page] = await enrolled(browser, daemon, options);
    const name = `addressed-${options === PHONE ? 'phone' : 'desk'}`;
    await createAgent(page, project(), name);
    const id = await agentId(daemon, name);
    await expect(page).toHaveURL(new RegExp(`#agent=${id}$`));

    await page.goBack();
    await expect(page).not.toHaveURL(/#agent=/);
    await expect(page.locator('.agent-view h2')).toHaveCount(0);
    await expect(agentRow(page, name)).toBeVisible();
    await page.goForward();
    await expect(page.locator('.agent-view h2')).toHaveText(name);

    // The header's ← (on a phone) goes back the same way.
    if (options === PHONE) {
      await page.getByRole('button', { name: 'Back to agents' }).click();
      await expect(page).not.toHaveURL(/#agent=/);
      await expect(agentRow(page, name)).toBeInViewport();
      await openAgent(page, name);
    }
    await page.reload();
    await expect(page.locator('.agent-view h2')).toHaveText(name);

    // The address opens the agent in another tab.
    const other = await context.newPage();
    await other.goto(`${daemon.baseURL}/#agent=${id}`);
    await expect(other.locator('.agent-view h2')).toHaveText(name);
    await context.close();
  }
});

test('on a phone a long working directory in the inbox breaks after a slash, never inside a name', async ({ browser, daemon }) => {
  // Each name shorter than a line, the whole longer than one.
  const deep = join(project(), 'worktrees', 'a-long-repository-name', 'feature-branch-worktree', 'src', 'components');
  mkdirSync(deep, { recursive: true });
  const [context, phone] = await enrolled(browser, daemon, PHONE);
  await createAgent(phone, deep, 'deep-digger');
  await prompt(phone, 'run: true');
  const dialog = phone.getByRole('dialog');
  await expect(dialog).toBeVisible();
  // A phone has no keys to hint at: no "(y)", "(n)" or "(Esc)" on the
  // question's buttons, no "Ctrl+Enter sends" under the box.
  await expect(dialog.getByRole('button', { name: /Allow once/ })).toBeVisible();
  const hints = () => phone.locator('.key-hint').evaluateAll(
    (found) => found.filter((hint) => hint.getClientRects().length > 0).map((hint) => hint.textContent));
  expect(await phone.locator('.key-hint').count()).toBeGreaterThan(2);
  expect(await hints()).toEqual([]);
  await dialog.getByRole('button', { name: /Later/ }).tap();
  await phone.getByRole('navigation', { name: 'Panes' }).getByRole('button', { name: /waiting/ }).tap();
  const path = phone.locator('.inbox-item', { hasText: 'deep-digger' }).locator('dd[data-label="working directory"] pre');
  await expect(path).toBeInViewport();
  // Where each rendered line ends: the character before every break.
  const before = await path.evaluate((element) => {
    const ends: string[] = [];
    let lastTop: number | null = null;
    let previous = '';
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent ?? '';
      for (let at = 0; at < text.length; at++) {
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + 1);
        const top = range.getBoundingClientRect().top;
        if (lastTop !== null && top > lastTop + 2) ends.push(previous);
        lastTop = top;
        previous = text[at];
      }
    }
    return ends;
  });
  expect(before.length, 'the path is long enough to wrap').toBeGreaterThan(0);
  expect(before.every((character) => character === '/'), `lines end with ${JSON.stringify(before)}`).toBe(true);
  await context.close();
});
