// Subagent jobs in the dashboard (docs/JOBS.md): a parent's demo model
// launches children, the tree shows them under it, a child's question is
// answered from the inbox, the parent's transcript gets the reports, and
// the jobs panel stops runs and jobs.
import { test, expect, createAgent, enrolled, openAgent, project, prompt } from './daemon';

/** No two of the row's name, badges, status, runtime and activity overlap. */
async function expectApart(row: import('@playwright/test').Locator, at: string): Promise<void> {
  const parts = row.locator('.row-head .name, .row-head .badge, .status, .runtime, .activity');
  const boxes = (await parts.evaluateAll((elements) => elements
    .map((element) => element.getBoundingClientRect())
    .filter((rect) => rect.width > 0 && rect.height > 0)
    .map((rect) => ({ left: rect.left, right: rect.right, top: rect.top, bottom: rect.bottom }))));
  expect(boxes.length).toBeGreaterThanOrEqual(3);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i], boxes[j]];
      const overlap = a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
      expect(overlap, `at ${at}, parts ${i} and ${j} of the row overlap: ${JSON.stringify([a, b])}`).toBe(false);
    }
  }
}

test('a parallel job: children under their parent, a child question from the inbox, the reports in the parent', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'lead');
  await expect(tab.locator('.agent-view h2')).toHaveText('lead');
  const lead = await tab.locator('.agents li', { hasText: 'lead' }).first().getAttribute('data-agent-id');
  await prompt(tab, 'spawn-parallel:\nasker: ask: Which colour do you like?\nechoer: hello from a child');

  // Both children appear under the parent, named by their aliases (the
  // alias is not said twice when it is the name).
  const children = tab.locator(`.agents li[data-parent-id="${lead}"]`);
  await expect(children).toHaveCount(2);
  await expect(children.filter({ hasText: 'asker' }).locator('.name')).toHaveText('asker');
  await expect(children.filter({ hasText: 'echoer' }).locator('.name')).toHaveText('echoer');
  await expect(children.locator('.badge.alias')).toHaveCount(0);

  // The child's question comes to this tab (the parent's interactive client)
  // and is answered from the inbox.
  const dialog = tab.getByRole('dialog');
  if (await dialog.isVisible()) await tab.keyboard.press('Escape');
  const entry = tab.locator('.inbox-item', { hasText: 'Which colour do you like?' });
  await expect(entry).toBeVisible();
  // The waiting child's row at 1280 px: nested under its parent, and its
  // badges and status each in a place of their own.
  const asker = children.filter({ hasText: 'asker' });
  await expect(asker.locator('.badge.waiting')).toHaveText('waiting for you');
  await expect(asker.locator('.status')).toHaveText(/^waiting/);
  const parentRow = tab.locator(`.agents li[data-agent-id="${lead}"] .row-head`).first();
  const [outer, inner] = [await parentRow.boundingBox(), await asker.locator('.row-head').boundingBox()];
  expect(inner!.x, 'a child is indented under its parent').toBeGreaterThan(outer!.x + 4);
  await expectApart(asker, '1280 px');
  // And on a phone, in the list's pane.
  const wide = tab.viewportSize()!;
  await tab.setViewportSize({ width: 390, height: 844 });
  await tab.getByRole('navigation', { name: 'Panes' }).getByRole('button', { name: 'Agents' }).click();
  // (Other specs' agents share the list in CI: it may be further down.)
  await asker.locator('.row-head').scrollIntoViewIfNeeded();
  await expect(asker.locator('.row-head')).toBeInViewport();
  const [phoneOuter, phoneInner] = [await parentRow.boundingBox(), await asker.locator('.row-head').boundingBox()];
  expect(phoneInner!.x, 'a child is indented under its parent on a phone').toBeGreaterThan(phoneOuter!.x + 4);
  await expectApart(asker, '390 px');
  await tab.setViewportSize(wide);
  await openAgent(tab, 'lead');
  await entry.getByLabel('Answer').fill('teal');
  await tab.waitForTimeout(900); // answers arm after 800 ms (crate::guard)
  await entry.getByRole('button', { name: 'Submit' }).click();
  await expect(entry).toHaveCount(0);

  // Each run's report reaches the parent's conversation.
  const reports = tab.locator('.message.assistant', { hasText: '[subagent report]' });
  await expect(reports.filter({ hasText: 'echoer' })).toHaveCount(1, { timeout: 20_000 });
  await expect(reports.filter({ hasText: 'asker' })).toHaveCount(1, { timeout: 20_000 });
  await expect(reports.filter({ hasText: 'asker' })).toContainText('You answered: teal');

  // The jobs panel: the job completed, each run with its usage.
  const job = tab.locator('.jobs-panel .job');
  await expect(job).toHaveCount(1);
  await expect(job).toHaveAttribute('data-state', 'completed');
  await expect(job.locator('.run[data-state="completed"]')).toHaveCount(2);
  await expect(job.locator('.run .usage').first()).toContainText('out');
  await expect(children.locator('.badge.run')).toHaveText(['run completed', 'run completed']);
  await tab.screenshot({ path: testInfo.outputPath('jobs.png'), fullPage: true });

  // The tree folds, and a run links to its child's own transcript.
  await tab.getByRole('button', { name: /Hide the 2 subagents of lead/ }).click();
  await expect(children).toHaveCount(0);
  await tab.getByRole('button', { name: /Show the 2 subagents of lead/ }).click();
  await expect(children).toHaveCount(2);
  await job.getByRole('button', { name: 'Open subagent echoer' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('echoer');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: hello from a child');
  await context.close();
});

test('the jobs panel stops one run, then a whole job', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'boss');
  await prompt(tab, 'spawn-parallel:\nslow-a: stream: 3000\nslow-b: stream: 3000');
  const job = tab.locator('.jobs-panel .job');
  await expect(job.locator('.run[data-state="active"]')).toHaveCount(2);
  await job.getByRole('button', { name: 'Stop slow-a' }).click();
  await expect(job.locator('.run[data-state="cancelled"]')).toHaveCount(1);
  await expect(job.locator('.run[data-state="active"]')).toHaveCount(1);
  await job.getByRole('button', { name: 'Stop job' }).click();
  await expect(job.locator('.run[data-state="cancelled"]')).toHaveCount(2);
  await expect(job).toHaveAttribute('data-state', 'cancelled');
  await expect(job.getByRole('button', { name: 'Stop job' })).toHaveCount(0);
  await context.close();
});

test('work a child handed on is listed under its run and stopped from the top', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'zqxtop');
  await prompt(tab, 'spawn: zqxmid: spawn: zqxgrand: stream: 3000');
  const job = tab.locator('.jobs-panel > .jobs > .job');
  await expect(job).toHaveCount(1);
  // The child's own run ends with its turn; the grandchild's goes on, shown under it.
  const mid = job.locator('.run', { hasText: 'zqxmid' }).first();
  await expect(mid).toHaveAttribute('data-state', 'completed');
  const below = mid.getByRole('list', { name: 'Jobs of zqxmid' });
  const grand = below.locator('.run', { hasText: 'zqxgrand' });
  await expect(grand).toHaveAttribute('data-state', 'active');
  await expect(mid.locator('> .duration')).not.toHaveText('0.0 s');
  // Stopped from here, by the person on the top agent.
  await below.getByRole('button', { name: 'Stop zqxgrand' }).click();
  await expect(grand).toHaveAttribute('data-state', 'cancelled');
  await expect(below.locator('.job')).toHaveAttribute('data-state', 'cancelled');
  await expect(tab.locator('p.notice')).toHaveCount(0);
  // The top agent's card of the call reads as fields, its JSON a click away.
  const card = tab.locator('.tool', { hasText: 'subagent_create' });
  await expect(card.locator('.render.json dt', { hasText: 'job_id' })).toBeVisible();
  await expect(card.locator('pre.output')).toHaveCount(0);
  await expect(card.locator('details.raw pre')).toBeHidden();
  await context.close();
});
