// Search across every agent's sessions and find in a transcript
// (docs/ARCHITECTURE.md, "Search") in Chromium against the real daemon and
// the demo model: a result opens its agent's transcript at the message,
// marked; the find bar sees the whole transcript, not only the rows the
// page renders, and brings a row far outside them into view.
import { test, expect, createAgent, enrolled, openAgent, project, prompt, agentId, UnixClient } from './daemon';

test('a search result opens its agent with the message marked in view', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'vicuna-sought');
  await prompt(tab, 'the wombat migration plan is ready');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: the wombat migration plan is ready');
  // Enough after it that it is out of view, and another agent on screen.
  for (let turn = 1; turn <= 12; turn++) {
    await prompt(tab, `filler line ${turn}\n\n${'more words to make it tall. '.repeat(8)}`);
    await expect(tab.locator('.message.assistant').last()).toContainText(`You said: filler line ${turn}`);
  }
  await createAgent(tab, project(), 'vicuna-decoy');
  await prompt(tab, 'nothing to see');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: nothing to see');

  // `/` opens the search box; results come grouped by agent, words marked.
  await tab.locator('.agent-view h2').click();
  await tab.keyboard.press('/');
  const box = tab.getByRole('searchbox', { name: 'Search messages' });
  await expect(box).toBeFocused();
  await box.pressSequentially('wombat migr');
  const group = tab.locator('.search-group', { has: tab.locator('h3', { hasText: 'vicuna-sought' }) });
  await expect(group.locator('.search-hit')).toHaveCount(2);
  await expect(tab.locator('.search-status')).toHaveText('2 messages');
  await expect(group.locator('.search-snippet .hit').first()).toHaveText(/wombat/i);
  // Never markup from the server: the snippet is text in spans.
  expect(await group.locator('.search-snippet').first().evaluate((element) => [...element.children].every((child) => child.tagName === 'SPAN' && child.children.length === 0))).toBe(true);

  // The prompt's result: its agent opens, the message marked and in view.
  await group.locator('.search-hit', { has: tab.locator('.search-who', { hasText: 'you' }) }).click();
  await expect(tab.locator('.search-panel')).toBeHidden();
  await expect(tab.locator('.agent-view h2')).toHaveText('vicuna-sought');
  const marked = tab.locator('.transcript .row.marked > .message');
  await expect(marked).toHaveCount(1);
  await expect(marked).toHaveClass(/user/);
  await expect(marked).toContainText('the wombat migration plan is ready');
  await expect(marked).toBeInViewport();
  await expect(tab.locator('.message.assistant').last()).not.toBeInViewport();

  // Ctrl+K opens it again with the same words; the arrow keys walk the
  // results, Enter opens one: the agent on screen's other result is marked
  // in its place.
  await tab.keyboard.press('Control+k');
  await expect(box).toBeFocused();
  const hits = group.locator('.search-hit');
  await tab.keyboard.press('ArrowDown');
  await expect(hits.nth(0)).toBeFocused();
  await tab.keyboard.press('ArrowDown');
  await expect(hits.nth(1)).toBeFocused();
  await tab.keyboard.press('ArrowUp');
  await tab.keyboard.press('ArrowUp');
  await expect(box).toBeFocused();
  const agentHit = group.locator('.search-hit', { has: tab.locator('.search-who', { hasText: 'agent' }) });
  while (!(await agentHit.evaluate((hit) => hit === document.activeElement))) await tab.keyboard.press('ArrowDown');
  await tab.keyboard.press('Enter');
  await expect(marked).toHaveCount(1);
  await expect(marked).toHaveClass(/assistant/);
  await expect(marked).toHaveText('You said: the wombat migration plan is ready');
  await expect(marked).toBeInViewport();

  // A query of FTS5 syntax is words.
  await tab.getByRole('button', { name: 'Search', exact: true }).click();
  await expect(box).toBeFocused();
  await box.fill('"wombat* -plan');
  await expect(tab.locator('.search-status')).toHaveText('2 messages');
  await box.fill('zzzz-nothing-like-it');
  await expect(tab.locator('.search-status')).toHaveText('No message has these words.');
  await box.press('Escape');
  await expect(tab.locator('.search-panel')).toBeHidden();
  await context.close();
});

test('find in the transcript reaches a message far outside the rendered rows and scrolls to it', async ({ browser, daemon }) => {
  test.setTimeout(180_000);
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'vicuna-scroll');
  await expect(tab.locator('.agent-view h2')).toHaveText('vicuna-scroll');
  const id = await agentId(daemon, 'vicuna-scroll');
  const client = await UnixClient.open(daemon);
  await client.call({ type: 'agent.attach', agent_id: id, role: 'interactive' });
  await client.turn(id, 'the capybara password is under the mat');
  // A prompt and a reply a row each (the prompts show as they land, from
  // elsewhere too): more than the 300 rows the page renders.
  for (let turn = 1; turn <= 320; turn++) {
    await client.turn(id, `f-${turn}`);
  }
  client.close();
  const transcript = tab.locator('.transcript');
  await expect(transcript.locator('.message.assistant').last()).toHaveText('You said: f-320');
  expect(Number(await transcript.getAttribute('data-rows'))).toBeGreaterThan(320);
  // Not in the DOM: the browser's own find could not see it.
  await expect(transcript.getByText('capybara')).toHaveCount(0);

  // Ctrl+F with the agent on screen opens the page's own find bar.
  await transcript.click();
  await tab.keyboard.press('Control+f');
  const find = tab.getByRole('searchbox', { name: 'Find in the transcript' });
  await expect(find).toBeFocused();
  // The replies' words only (the prompts hold the same words).
  await find.fill('SAID: THE CAPYBARA');
  await expect(tab.locator('.find-count')).toHaveText('1 of 1');
  const marked = transcript.locator('.row.marked > .message');
  await expect(marked).toHaveText('You said: the capybara password is under the mat');
  await expect(marked).toBeInViewport();
  await expect(transcript.getByRole('button', { name: /^Show later/ })).toBeAttached();

  // Steps through several, both ways and round the end; the window follows.
  await find.fill('said: f-31');
  await expect(tab.locator('.find-count')).toHaveText('1 of 11');
  await expect(marked).toHaveText('You said: f-31');
  await expect(marked).toBeInViewport();
  await find.press('Shift+Enter');
  await expect(tab.locator('.find-count')).toHaveText('11 of 11');
  await expect(marked).toHaveText('You said: f-319');
  await expect(marked).toBeInViewport();
  await find.press('Enter');
  await expect(tab.locator('.find-count')).toHaveText('1 of 11');
  await find.press('Enter');
  await expect(tab.locator('.find-count')).toHaveText('2 of 11');
  await expect(marked).toHaveText('You said: f-310');
  await expect(marked).toBeInViewport();
  await find.fill('no such words anywhere');
  await expect(tab.locator('.find-count')).toHaveText('no match');
  await expect(transcript.locator('.row.marked')).toHaveCount(0);
  await find.press('Escape');
  await expect(find).toBeHidden();

  // The Find button opens it too, and another agent on screen closes it.
  await tab.getByRole('button', { name: 'Find', exact: true }).click();
  await expect(find).toBeFocused();
  await createAgent(tab, project(), 'vicuna-other');
  await expect(find).toBeHidden();
  await openAgent(tab, 'vicuna-scroll');
  await context.close();
});
