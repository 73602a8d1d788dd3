// The web client's core in Chromium against the real daemon: a transcript
// that keeps its DOM while it streams and stays bounded at any length, what
// survives a reconnect and a reload, per-agent badges, and notifications.
import { allowConsoleError, test, expect, createAgent, enrolled, newEnrollURL, openAgent, project, prompt, unixCall, agentId, UnixClient, type Daemon, agentRow } from './daemon';

/** A unix client attached to `name`, for driving it from outside the page. */
async function driver(daemon: Daemon, name: string): Promise<[UnixClient, string]> {
  const id = await agentId(daemon, name);
  const client = await UnixClient.open(daemon);
  await client.call({ type: 'agent.attach', agent_id: id, role: 'interactive' });
  return [client, id];
}

test('a streamed message keeps its element from first delta to last, and an opened thinking block stays open', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await tab.locator('details.create-panel summary').click();
  await tab.getByLabel('Model').fill('demo-think');
  await createAgent(tab, project(), 'thinker');
  await prompt(tab, 'stream: 150');
  const message = tab.locator('.message.assistant').last();
  const thinking = message.locator('details.thinking');
  await expect(thinking).toBeVisible();
  await thinking.locator('summary').click();
  // Mark the elements: a re-render would replace them and lose the marks.
  await message.evaluate((element) => ((element as any).shardMark = 'kept'));
  await expect(message).toContainText('tick-20 ');
  await expect(thinking).toHaveJSProperty('open', true);
  await expect(message).toContainText('tick-100 ');
  await expect(thinking).toHaveJSProperty('open', true);
  await expect(message).toHaveAttribute('data-complete', 'true', { timeout: 20_000 });
  await expect(message).toContainText('tick-150');
  await expect(thinking).toHaveJSProperty('open', true);
  expect(await message.evaluate((element) => (element as any).shardMark)).toBe('kept');
  await context.close();
});

test('a long transcript keeps at most 300 rows in the DOM and pages back to the first', async ({ browser, daemon }) => {
  test.setTimeout(180_000);
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'chatty');
  const [client, id] = await driver(daemon, 'chatty');
  for (let turn = 1; turn <= 340; turn++) {
    await client.turn(id, `m-${turn}`);
  }
  client.close();
  const transcript = tab.locator('.transcript');
  await expect(transcript.locator('.message.assistant').last()).toHaveText('You said: m-340');
  // 340 prompts and their replies, and a compaction marker wherever the
  // demo model's small context was summarized.
  const rows = Number(await transcript.getAttribute('data-rows'));
  expect(rows).toBeGreaterThanOrEqual(680);
  const inDom = transcript.locator('.rows > .row > :is(.message, .tool, .compaction, .notice-line)');
  expect(await inDom.count()).toBe(300);
  await expect(transcript.locator('.message', { hasText: /^You said: m-1$/ })).toHaveCount(0);
  // The end is in view: the view followed it as it grew.
  const atBottom = () => transcript.evaluate((element) => element.scrollHeight - element.scrollTop - element.clientHeight < 4);
  expect(await atBottom()).toBe(true);

  // Each "Show earlier" pages back 100 rows, until the first.
  const earlier = transcript.getByRole('button', { name: /^Show earlier/ });
  for (let left = rows - 300; left > 0; left = Math.max(0, left - 100)) {
    await expect(earlier).toHaveText(`Show earlier (${left} more)`);
    await earlier.click();
  }
  await expect(earlier).toHaveCount(0);
  await expect(transcript.locator('.message.assistant').first()).toHaveText('You said: m-1');
  expect(await inDom.count()).toBe(300);
  await expect(transcript.locator('.message', { hasText: 'You said: m-340' })).toHaveCount(0);
  await transcript.getByRole('button', { name: 'Jump to the latest' }).click();
  await expect(transcript.locator('.message.assistant').last()).toHaveText('You said: m-340');
  await context.close();
});

test('the agent on screen, the scroll position and a half-written prompt survive a reconnect and a reload', async ({ browser, daemon }) => {
  test.setTimeout(120_000);
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'steady');
  await createAgent(tab, project(), 'elsewhere');
  await openAgent(tab, 'steady');
  const transcript = tab.locator('.transcript');
  for (let turn = 1; turn <= 30; turn++) {
    await prompt(tab, `line ${turn}\n\nwith a second paragraph so that the transcript scrolls`);
    await expect(transcript.locator('.message.assistant[data-complete="true"]')).toHaveCount(turn);
  }
  await expect(transcript).toHaveAttribute('data-rows', '60');
  const box = tab.getByLabel('Message to the agent');
  await box.fill('half a thought');
  // Somewhere in the middle, on purpose.
  await transcript.evaluate((element) => (element.scrollTop = Math.floor(element.scrollHeight / 3)));
  const before = await transcript.evaluate((element) => element.scrollTop);
  expect(before).toBeGreaterThan(100);
  const marked = tab.locator('.message.assistant').nth(10);
  await marked.evaluate((element) => ((element as any).shardMark = 'kept'));

  await expect(tab.locator('.agent-view')).toHaveAttribute('data-attach', 'sync');
  const dropped = await unixCall(daemon, { id: 'd', type: 'daemon.disconnect', all: true });
  expect(dropped.data.disconnected).toBeGreaterThan(0);
  await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
  await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 15_000 });
  // The page resumed from its cursor (no sync, no reset of the 60 rows):
  // same agent, same rows (the same elements), same place, same draft.
  await expect(tab.locator('.agent-view')).toHaveAttribute('data-attach', 'resumed');
  await expect(tab.locator('.agent-view h2')).toHaveText('steady');
  await expect(transcript).toHaveAttribute('data-rows', '60');
  await tab.waitForTimeout(300);
  expect(await marked.evaluate((element) => (element as any).shardMark)).toBe('kept');
  expect(Math.abs((await transcript.evaluate((element) => element.scrollTop)) - before)).toBeLessThan(2);
  await expect(box).toHaveValue('half a thought');

  // A draft belongs to its agent: another agent has its own box.
  await openAgent(tab, 'elsewhere');
  await expect(box).toHaveValue('');
  await box.fill('for elsewhere');
  await openAgent(tab, 'steady');
  await expect(box).toHaveValue('half a thought');

  // A reload of the tab comes back to the same agent and drafts.
  await tab.reload();
  await expect(tab.locator('.connection')).toHaveText('connected');
  await expect(tab.locator('.agent-view h2')).toHaveText('steady');
  await expect(box).toHaveValue('half a thought');
  await expect(transcript.locator('.message.assistant').last()).toContainText('line 30');
  await openAgent(tab, 'elsewhere');
  await expect(box).toHaveValue('for elsewhere');
  await context.close();
});

test('a reconnect mid-stream resumes from the cursor: the reply goes on in the same element, whole', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'streamer');
  await prompt(tab, 'stream: 300');
  const reply = tab.locator('.message.assistant').last();
  await expect(reply).toContainText('tick-40 ');
  await reply.evaluate((element) => ((element as any).shardMark = 'same'));
  await unixCall(daemon, { id: 'd', type: 'daemon.disconnect', all: true });
  await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 15_000 });
  await expect(tab.locator('.agent-view')).toHaveAttribute('data-attach', 'resumed');
  await expect(reply).toHaveAttribute('data-complete', 'true', { timeout: 15_000 });
  const expected = Array.from({ length: 300 }, (_, index) => `tick-${index + 1}`).join(' ');
  await expect(reply).toHaveText(expected);
  expect(await reply.evaluate((element) => (element as any).shardMark)).toBe('same');
  await context.close();
});

test('a tab opened mid-reply shows the reply from its start, and it goes on in the same element', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'teller');
  await prompt(tab, 'stream: 1000');
  await expect(tab.locator('.message.assistant').last()).toContainText('tick-40 ');

  const late = await context.newPage();
  await late.goto(daemon.baseURL);
  await expect(late.locator('.connection')).toHaveText('connected');
  await openAgent(late, 'teller');
  const reply = late.locator('.message.assistant').last();
  // Still streaming, and shown from its first word, not from when the tab
  // joined.
  await expect(reply).toHaveAttribute('data-complete', 'false');
  await expect(reply).toHaveText(/^tick-1 tick-2 tick-3 .*tick-40 /);
  await reply.evaluate((element) => ((element as any).shardMark = 'same'));
  await expect(reply).toHaveAttribute('data-complete', 'true', { timeout: 30_000 });
  const expected = Array.from({ length: 1000 }, (_, index) => `tick-${index + 1}`).join(' ');
  await expect(reply).toHaveText(expected);
  expect(await reply.evaluate((element) => (element as any).shardMark)).toBe('same');
  await expect(late.locator('.message.assistant')).toHaveCount(1);
  await context.close();
});

test('agents off screen show unread activity and a waiting question; opening one clears it', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'watched');
  await createAgent(tab, project(), 'busy');
  await openAgent(tab, 'watched');
  const busyRow = agentRow(tab, 'busy');
  const watchedRow = agentRow(tab, 'watched');
  await expect(busyRow.locator('.badge')).toHaveCount(0);

  const [client, id] = await driver(daemon, 'busy');
  await client.turn(id, 'did some work');
  await expect(busyRow.locator('.badge.unread')).toHaveText('new');
  await expect(watchedRow.locator('.badge')).toHaveCount(0);

  await client.call({ type: 'prompt', agent_id: id, message: 'run: echo wait-for-me' });
  await expect(busyRow.locator('.badge.waiting')).toHaveText('waiting for you');
  await expect(tab).toHaveTitle('(1) Shard');
  await openAgent(tab, 'busy');
  await expect(busyRow.locator('.badge.unread')).toHaveCount(0);
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toContainText('echo wait-for-me');
  await tab.waitForTimeout(900);
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(busyRow.locator('.badge.waiting')).toHaveCount(0);
  await expect(tab).toHaveTitle('Shard');
  client.close();
  await context.close();
});

test('a question notifies after a short delay, unless its agent is on screen or it was answered first', async ({ browser, daemon }) => {
  // Record notifications instead of showing them; permission is granted.
  const [context, tab] = await enrolled(browser, daemon, { init: () => {
    const shown: string[] = [];
    (window as any).shownNotifications = shown;
    class Recorded {
      static permission = 'granted';
      static requestPermission() { return Promise.resolve('granted'); }
      onclick: (() => void) | null = null;
      constructor(title: string) { shown.push(title); }
      close() {}
    }
    (window as any).Notification = Recorded;
  } });
  const shown = () => tab.evaluate(() => (window as any).shownNotifications as string[]);
  await createAgent(tab, project(), 'front');
  await createAgent(tab, project(), 'back');
  // Granted before: on from the start, as the Notifications dialog says.
  await tab.getByRole('button', { name: 'Notifications' }).click();
  const notifications = tab.getByRole('dialog', { name: 'Notifications' });
  await expect(notifications).toContainText('On in this tab.');
  await expect(notifications.getByRole('button', { name: 'Turn on in this tab' })).toBeHidden();
  await notifications.getByRole('button', { name: 'Close' }).click();
  await expect(notifications).toBeHidden();

  // On screen: the dialog is enough.
  await openAgent(tab, 'front');
  await prompt(tab, 'run: echo on-screen');
  await expect(tab.getByRole('dialog')).toBeVisible();
  await tab.waitForTimeout(3_800);
  expect(await shown()).toEqual([]);
  await tab.getByRole('dialog').getByRole('button', { name: /Deny/ }).click();

  // Off screen and still waiting after the delay: one notification.
  const [client, id] = await driver(daemon, 'back');
  const asked = Date.now();
  await client.call({ type: 'prompt', agent_id: id, message: 'run: echo off-screen' });
  await expect(tab.locator('.inbox-item', { hasText: 'echo off-screen' })).toBeVisible();
  expect(await shown()).toEqual([]);
  await expect.poll(shown, { timeout: 10_000 }).toEqual(['back needs an answer']);
  expect(Date.now() - asked).toBeGreaterThanOrEqual(2_900);
  const settled = client.waitFor((event) => event.type === 'status' && event.agent_id === id && event.status === 'idle');
  await tab.locator('.inbox-item', { hasText: 'echo off-screen' }).getByRole('button', { name: /Deny/ }).click();
  await settled;

  // Answered before the delay is over: none.
  await client.call({ type: 'prompt', agent_id: id, message: 'run: echo answered-fast' });
  const fast = tab.locator('.inbox-item', { hasText: 'echo answered-fast' });
  await expect(fast).toBeVisible();
  await tab.waitForTimeout(900);
  await fast.getByRole('button', { name: /Deny/ }).click();
  await tab.waitForTimeout(3_500);
  expect(await shown()).toEqual(['back needs an answer']);
  client.close();
  await context.close();
});

test('tab notifications turn on from the Notifications dialog, and a browser that blocks them is said to', async ({ browser, daemon }) => {
  // Not decided yet; the browser's prompt answers what the test says, when
  // the test says (a person may take a while), and the answer outlives a
  // reload as the browser's would.
  const [context, tab] = await enrolled(browser, daemon, { init: () => {
    const w = window as any;
    class Asked {
      static permission = Asked.stored() ?? 'default';
      static stored() {
        try { return sessionStorage.getItem('test-permission'); } catch { return null; }
      }
      static requestPermission() {
        const answer = () => {
          Asked.permission = w.answerPermission;
          sessionStorage.setItem('test-permission', Asked.permission);
          return Asked.permission;
        };
        if (!w.holdAnswer) return Promise.resolve(answer());
        return new Promise((resolve) => { w.release = () => resolve(answer()); });
      }
    }
    w.answerPermission = 'denied';
    w.Notification = Asked;
  } });
  await tab.getByRole('button', { name: 'Notifications' }).click();
  const notifications = tab.getByRole('dialog', { name: 'Notifications' });
  await expect(notifications).toContainText('Off in this tab.');
  const turnOn = notifications.getByRole('button', { name: 'Turn on in this tab' });
  await turnOn.click();
  await expect(notifications.getByRole('status')).toHaveText(/blocked for this site/);
  await expect(notifications).toContainText('Off in this tab.');

  // While the browser's prompt waits, only this button waits with it.
  await tab.evaluate(() => { (window as any).answerPermission = 'granted'; (window as any).holdAnswer = true; });
  await turnOn.click();
  await expect(turnOn).toBeDisabled();
  await expect(notifications.getByRole('button', { name: 'Close' })).toBeEnabled();
  await expect(notifications.getByRole('button', { name: 'Turn on for this device' })).toBeEnabled();
  await tab.evaluate(() => (window as any).release());
  await expect(notifications).toContainText('On in this tab.');
  await expect(turnOn).toBeHidden();

  // And off again, which a reload of the tab keeps.
  await notifications.getByRole('button', { name: 'Turn off in this tab' }).click();
  await expect(notifications).toContainText('Off in this tab.');
  await tab.reload();
  await expect(tab.locator('.connection')).toHaveText('connected');
  await tab.getByRole('button', { name: 'Notifications' }).click();
  await expect(notifications).toContainText('Off in this tab.');
  await tab.evaluate(() => { (window as any).answerPermission = 'granted'; });
  await notifications.getByRole('button', { name: 'Turn on in this tab' }).click();
  await expect(notifications).toContainText('On in this tab.');

  // A push subscription the browser refuses is said in words a reader can
  // act on, not in the browser's own.
  await tab.evaluate(() => {
    (PushManager.prototype as any).subscribe = () =>
      Promise.reject(new DOMException('Registration failed - push service error', 'AbortError'));
  });
  await notifications.getByRole('button', { name: 'Turn on for this device' }).click();
  const said = notifications.locator('.push-message');
  await expect(said).toHaveText(/^This browser could not reach its push service/);
  await expect(said).not.toContainText('Registration failed');
  await expect(notifications).toContainText('Off on this device.');
  await context.close();
});

test('an answer being typed in the inbox survives other questions arriving and going', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'asker');
  await createAgent(tab, project(), 'noisy');
  await createAgent(tab, project(), 'viewer');
  await openAgent(tab, 'viewer');
  const [asker, askerId] = await driver(daemon, 'asker');
  await asker.call({ type: 'prompt', agent_id: askerId, message: 'ask: What is the plan?' });
  const entry = tab.locator('.inbox-item', { hasText: 'What is the plan?' });
  const field = entry.getByLabel('Answer');
  await field.fill('first we');
  await field.press('End');
  await field.pressSequentially(' measure');
  await field.evaluate((element) => ((element as any).shardMark = 'kept'));
  // Another agent's question comes and is answered while this one is typed.
  const [noisy, noisyId] = await driver(daemon, 'noisy');
  await noisy.call({ type: 'prompt', agent_id: noisyId, message: 'run: echo noise' });
  const noise = tab.locator('.inbox-item', { hasText: 'echo noise' });
  await expect(noise).toBeVisible();
  await expect(field).toHaveValue('first we measure');
  await tab.waitForTimeout(900);
  await noise.getByRole('button', { name: /Deny/ }).click();
  await expect(noise).toHaveCount(0);
  await expect(field).toHaveValue('first we measure');
  // The same element, not a new one with the old value copied in.
  expect(await field.evaluate((element) => (element as any).shardMark)).toBe('kept');
  await field.press('End');
  await field.pressSequentially(', then cut');
  const answered = asker.waitFor((event) => event.type === 'message_complete' && event.agent_id === askerId
    && JSON.stringify(event.message.content).includes('You answered'));
  await entry.getByRole('button', { name: 'Submit' }).click();
  await expect(entry).toHaveCount(0);
  expect(JSON.stringify((await answered).message.content)).toContain('first we measure, then cut');
  asker.close();
  noisy.close();
  await context.close();
});

test('a panel fetches its code the first time it opens, and one whose code does not arrive says so while the rest works', async ({ browser, daemon }) => {
  // The chunk made not to arrive: the browser logs the failed fetch.
  allowConsoleError(/ERR_FAILED|Failed to fetch/);
  const context = await browser.newContext();
  const chunks: string[] = [];
  context.on('request', (request) => {
    const name = new URL(request.url()).pathname.split('/').pop() ?? '';
    if (/^(split|chunk)_.*\.wasm$/.test(name)) chunks.push(name);
  });
  // The search panel's code is made not to arrive.
  await context.route(/\/pkg\/split_search_body[^/]*\.wasm$/, (route) => route.abort());
  const tab = await context.newPage();
  await tab.goto(newEnrollURL(daemon));
  await expect(tab.locator('.connection')).toHaveText('connected');
  expect(chunks, 'nothing lazy is fetched before it is wanted').toEqual([]);

  await tab.getByRole('button', { name: 'Search' }).click();
  const unloaded = tab.getByRole('alert').filter({ hasText: 'did not load' });
  await expect(unloaded).toBeVisible();
  expect(chunks.some((name) => name.startsWith('split_search_body.'))).toBe(true);

  // The page goes on: the new-agent form loads its own code and works.
  await createAgent(tab, project(), 'zqxlazy');
  expect(chunks.some((name) => name.startsWith('split_create_form.'))).toBe(true);
  await expect(tab.locator('.agent-view h2')).toHaveText('zqxlazy');
  await prompt(tab, 'hello lazy panels');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: hello lazy panels');
  // A panel opened again is there at once, fetched once.
  const sessions = tab.locator('details.sessions-panel');
  await sessions.locator('summary').click();
  await expect(sessions.locator('li.session')).toHaveCount(1);
  await sessions.locator('summary').click();
  await sessions.locator('summary').click();
  await expect(sessions.locator('li.session')).toHaveCount(1);
  expect(chunks.filter((name) => name.startsWith('split_sessions_body.'))).toHaveLength(1);

  // The link back, "Try again" fetches the search panel's code anew.
  await context.unroute(/\/pkg\/split_search_body[^/]*\.wasm$/);
  await unloaded.getByRole('button', { name: 'Try again' }).click();
  await expect(tab.getByRole('searchbox', { name: 'Search messages' })).toBeVisible();
  await expect(unloaded).toHaveCount(0);
  await context.close();
});
