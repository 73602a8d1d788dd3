// The dashboard in Chromium against the real daemon and the demo model.
import { join } from 'node:path';
import { test, expect, createAgent, enrolled, openAgent, project, prompt, unixCall, agentRow } from './daemon';

test('prompt, stream, a permission asked in two tabs and answered in one, the exit code', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'builder');
  await expect(tab.locator('.agent-view h2')).toHaveText('builder'); // a new agent opens

  await prompt(tab, 'hello there dashboard');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: hello there dashboard');

  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await expect(other.locator('.connection')).toHaveText('connected');
  await openAgent(other, 'builder');

  await prompt(tab, 'run: echo shard-ok');
  const dialog = tab.getByRole('dialog');
  const otherDialog = other.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await expect(otherDialog).toBeVisible();
  // The agent's code span is shown as code, not as backticks.
  await expect(dialog.locator('.question-prompt')).toHaveText('Run echo shard-ok?');
  await expect(dialog.locator('.question-prompt code')).toHaveText('echo shard-ok');
  await expect(dialog).toContainText('echo shard-ok'); // the server's details
  // Nobody was typing: focus moves to the dialog itself, never onto an answer.
  await expect(dialog).toBeFocused();
  await expect(dialog.getByRole('button', { name: /Allow once/ })).not.toBeFocused();
  await expect(tab).toHaveTitle('(1) Shard');
  await tab.screenshot({ path: testInfo.outputPath('permission-dialog.png') });

  // The other tab answers with its keyboard shortcut once the dialog is
  // armed (crate::guard, 800 ms); this tab's dialog goes.
  await expect(otherDialog).toBeFocused();
  await other.waitForTimeout(900);
  await other.keyboard.press('y');
  await expect(otherDialog).toBeHidden();
  await expect(dialog).toBeHidden();
  await expect(tab).toHaveTitle('Shard');
  const tool = tab.locator('.tool').last();
  await expect(tool.locator('.tool-footer')).toContainText('exit code 0');
  await expect(tool).toContainText('shard-ok');
  await expect(tab.locator('.message.assistant').last()).toContainText('exit code 0');
  await tab.screenshot({ path: testInfo.outputPath('agent-view.png'), fullPage: true });
  await context.close();
});

test('a daemon-side drop with a question open: the page reconnects and the question is back', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'patient');
  await prompt(tab, 'run: echo after-reconnect');
  await expect(tab.getByRole('dialog')).toBeVisible();

  const dropped = await unixCall(daemon, { id: 'd', type: 'daemon.disconnect', all: true });
  expect(dropped.success).toBe(true);
  expect(dropped.data.disconnected).toBeGreaterThan(0);
  await expect(tab.locator('.connection')).toHaveText(/reconnecting/);
  await expect(tab.locator('.connection')).toHaveText('connected', { timeout: 15_000 });
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await expect(dialog).toContainText('echo after-reconnect');
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await expect(tab.locator('.tool').last().locator('.tool-footer')).toContainText('exit code 0');
  await context.close();
});

test('the approval inbox answers questions of two agents', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  const first = project();
  const second = project();
  await createAgent(tab, first, 'first');
  await prompt(tab, 'run: touch first.txt');
  await expect(tab.getByRole('dialog')).toBeVisible();
  await tab.keyboard.press('Escape'); // later: it stays in the inbox
  await expect(tab.getByRole('dialog')).toBeHidden();

  await createAgent(tab, second, 'second');
  await prompt(tab, 'run: touch second.txt');
  await expect(tab.getByRole('dialog')).toBeVisible();
  await tab.keyboard.press('Escape');

  const inbox = tab.locator('.inbox');
  await expect(inbox.locator('.inbox-item')).toHaveCount(2);
  await expect(inbox.locator('.count')).toHaveText('2');
  await inbox.locator('.inbox-item', { hasText: 'touch first.txt' }).getByRole('button', { name: /Allow once/ }).click();
  await inbox.locator('.inbox-item', { hasText: 'touch second.txt' }).getByRole('button', { name: /Allow once/ }).click();
  await expect(inbox.locator('.inbox-item')).toHaveCount(0);
  await expect.poll(() => [first, second].map((dir) => require('node:fs').existsSync(join(dir, dir === first ? 'first.txt' : 'second.txt')))).toEqual([true, true]);
  await context.close();
});

test('agent output with HTML is shown as text and runs nothing', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  const dialogs: string[] = [];
  tab.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await createAgent(tab, project(), 'echo');
  const hostile = '<img src=x onerror=alert(1)> and <script>alert(2)</script> <b style="color:red">bold</b>';
  await prompt(tab, hostile);
  const reply = tab.locator('.message.assistant').last();
  await expect(reply).toContainText('You said:');
  await expect(reply).toContainText('<img src=x onerror=alert(1)>');
  await expect(reply).toContainText('<script>alert(2)</script>');
  await expect(tab.locator('.transcript img')).toHaveCount(0);
  await expect(tab.locator('.transcript script')).toHaveCount(0);
  await expect(tab.locator('.transcript b')).toHaveCount(0);
  await tab.waitForTimeout(300);
  expect(dialogs).toEqual([]);
  await context.close();
});

test('a mode and a model switched in one tab appear in the other', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'switcher');
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await openAgent(other, 'switcher');
  await expect(other.locator('.pickers').getByLabel('Mode', { exact: true })).toHaveValue('build');

  await tab.locator('.pickers').getByLabel('Mode', { exact: true }).selectOption('plan');
  await expect(other.locator('.pickers').getByLabel('Mode', { exact: true })).toHaveValue('plan');
  await expect(other.locator('.pickers').getByLabel('Reasoning')).toHaveCount(0); // demo has no levels
  await tab.locator('.pickers').getByLabel('Model', { exact: true }).selectOption('demo-think');
  await expect(other.locator('.pickers').getByLabel('Model', { exact: true })).toHaveValue('demo-think');
  // The new model's reasoning levels appear, from the server's catalog.
  await expect(other.locator('.pickers').getByLabel('Reasoning')).toHaveValue('medium');
  await context.close();
});

test('on a 390×844 screen every action is reachable', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 } });
  await createAgent(tab, project(), 'pocket');
  await tab.screenshot({ path: testInfo.outputPath('phone-dashboard.png'), fullPage: true });
  await prompt(tab, 'run: echo from-a-phone');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await expect(dialog.getByRole('button', { name: /Allow once/ })).toBeInViewport();
  await tab.screenshot({ path: testInfo.outputPath('phone-dialog.png') });
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await expect(tab.locator('.tool').last().locator('.tool-footer')).toContainText('exit code 0');
  await tab.locator('.pickers').getByLabel('Mode', { exact: true }).selectOption('plan');
  await expect(tab.locator('.pickers').getByLabel('Mode', { exact: true })).toHaveValue('plan');
  await prompt(tab, 'stream: 200');
  await tab.getByRole('button', { name: 'Abort' }).click();
  await expect(tab.locator('.agent-header .status')).toHaveText('idle');
  await tab.getByRole('button', { name: 'Back to agents' }).click();
  await expect(agentRow(tab, 'pocket')).toBeVisible();
  await tab.screenshot({ path: testInfo.outputPath('phone-agent-view.png'), fullPage: true });
  await context.close();
});

test('at 375×812 one pane at a time: which agent waits, answer it, read it, go back, each in one tap', async ({ browser, daemon }, testInfo) => {
  const [context, phone] = await enrolled(browser, daemon, { viewport: { width: 375, height: 812 } });
  const dir = project();
  await createAgent(phone, dir, 'thumbwise');
  // A new agent opens in its own pane: the list is not on screen beneath it.
  await expect(phone.locator('.agent-view h2')).toHaveText('thumbwise');
  await expect(phone.locator('.agent-list')).toBeHidden();
  await expect(phone.getByLabel('Message to the agent')).toBeInViewport();
  await phone.getByRole('button', { name: 'Back to agents' }).click();
  await expect(phone.locator('.agent-view')).toBeHidden();
  await expect(agentRow(phone, 'thumbwise')).toBeInViewport();

  // Another tab (a desktop) sets the agent a command that asks.
  const desk = await context.newPage();
  await desk.goto(daemon.baseURL);
  await openAgent(desk, 'thumbwise');
  await prompt(desk, 'run: echo from-the-pocket');
  await expect(desk.getByRole('dialog')).toBeVisible();

  // The bar at the bottom says one waits; one tap shows which, and its answers.
  const bar = phone.getByRole('navigation', { name: 'Panes' });
  const waiting = bar.getByRole('button', { name: '1 waiting' });
  await expect(waiting).toBeInViewport();
  await waiting.click();
  const entry = phone.locator('.inbox-item', { hasText: 'echo from-the-pocket' });
  await expect(entry).toBeInViewport();
  await expect(entry).toContainText('thumbwise');
  await expect(phone.locator('.agent-list')).toBeHidden();
  await phone.screenshot({ path: testInfo.outputPath('phone-inbox.png') });
  const allow = entry.getByRole('button', { name: /Allow once/ });
  await expect(allow).toBeInViewport();
  const colour = (button: import('@playwright/test').Locator) => button.evaluate((element) => getComputedStyle(element).color);
  const alert = await colour(waiting);
  await allow.click();
  const none = bar.getByRole('button', { name: '0 waiting' });
  await expect(none).toBeVisible();
  await expect(desk.getByRole('dialog')).toBeHidden();
  // Nothing waiting is no alert: not in the colour one waiting was.
  expect(await colour(none)).not.toBe(alert);

  // One tap back to the list, one to the agent: its transcript fills the screen.
  await bar.getByRole('button', { name: 'Agents' }).click();
  await agentRow(phone, 'thumbwise').locator('button.open').click();
  await expect(phone.locator('.tool').last()).toContainText('from-the-pocket');
  await expect(phone.locator('.tool').last()).toBeInViewport();
  await expect(phone.locator('.agent-list')).toBeHidden();
  await phone.screenshot({ path: testInfo.outputPath('phone-transcript.png') });
  await phone.getByRole('button', { name: 'Back to agents' }).click();
  await expect(agentRow(phone, 'thumbwise')).toBeInViewport();

  // From the inbox, the agent's name opens it, its question in a dialog.
  await prompt(desk, 'run: echo second-ask');
  await bar.getByRole('button', { name: '1 waiting' }).click();
  await phone.locator('.inbox-item', { hasText: 'echo second-ask' }).getByRole('button', { name: 'thumbwise' }).click();
  await expect(phone.locator('.agent-view h2')).toHaveText('thumbwise');
  const dialog = phone.getByRole('dialog');
  await expect(dialog).toContainText('echo second-ask');
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toBeHidden();
  await expect(bar.getByRole('button', { name: '0 waiting' })).toBeVisible();
  await context.close();
});

test('a reply keeps its lines: a command\'s output reads as it was printed', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'linekeeper');
  await prompt(tab, 'run: printf "first-line\\nsecond-line\\n"');
  await tab.getByRole('dialog').getByRole('button', { name: /Allow once/ }).click();
  const reply = tab.locator('.message.assistant[data-complete="true"]', { hasText: 'second-line' }).last();
  await expect(reply).toBeVisible();
  const shown = await reply.innerText();
  expect(shown).toMatch(/first-line\nsecond-line/);
  await context.close();
});

test('an ask: question is answered in its dialog', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'curious');
  await prompt(tab, 'ask: What should I call you?');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toContainText('What should I call you?');
  await dialog.getByLabel('Answer').fill('Ada');
  await dialog.getByRole('button', { name: 'Submit' }).click();
  await expect(dialog).toBeHidden();
  await expect(tab.locator('.message.assistant').last()).toHaveText('You answered: Ada');
  await context.close();
});

test('a question whose text hides characters shows them as escapes and says so', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'tricky');
  const dialog = tab.getByRole('dialog');
  // A right-to-left override makes `echo done; rm x #txt.exe` read otherwise.
  await prompt(tab, 'run: echo done\u202E; rm -f nothing-here #exe.txt\u202C');
  await expect(dialog).toBeVisible();
  await expect(dialog.locator('.hidden-characters')).toContainText('hidden characters');
  await expect(dialog).toContainText('echo done\\u{202E}; rm -f nothing-here #exe.txt\\u{202C}');
  const shown = await dialog.textContent();
  expect(shown).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/);
  await tab.waitForTimeout(900);
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toBeHidden();

  // A question's title too; and one with nothing hidden says nothing.
  await prompt(tab, 'ask: Which name\u2067 do you want?');
  await expect(dialog.locator('.hidden-characters')).toBeVisible();
  await expect(dialog).toContainText('Which name\\u{2067} do you want?');
  await dialog.getByLabel('Answer').fill('Ada');
  await tab.waitForTimeout(900);
  await dialog.getByRole('button', { name: 'Submit' }).click();
  await expect(dialog).toBeHidden();
  await prompt(tab, 'ask: Plain question?');
  await expect(dialog).toContainText('Plain question?');
  await expect(dialog.locator('.hidden-characters')).toHaveCount(0);
  await context.close();
});

test('a question that arrives while you type takes focus, answers nothing typed, then its keys and Tab work', async ({ browser, daemon }, testInfo) => {
  const [context, typist] = await enrolled(browser, daemon);
  const dir = project();
  await createAgent(typist, dir, 'careful');
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await expect(other.locator('.connection')).toHaveText('connected');
  await openAgent(other, 'careful');

  const box = typist.getByLabel('Message to the agent');
  await box.click();
  await box.pressSequentially('yes, ', { delay: 40 });
  // Another tab starts a command that needs permission while this one types.
  await prompt(other, 'run: touch typed-into.txt');
  const dialog = typist.getByRole('dialog');
  // Keep typing through the question's arrival: y, a, n, Enter and Space.
  await typist.keyboard.type('and always allow, yes no y a n', { delay: 40 });
  await expect(dialog).toBeVisible();
  // The modal took focus, onto itself and never onto an answer: what is
  // typed now goes to it, not into the box behind its backdrop.
  await expect(dialog).toBeFocused();
  // Typing on without a pause answers nothing: each key restarts the wait.
  for (let round = 0; round < 4; round++) {
    for (const key of ['y', 'Enter', 'Space', 'n', 'a']) {
      await typist.keyboard.press(key);
      await typist.waitForTimeout(60);
    }
  }
  await expect(dialog).toBeVisible();
  await expect(dialog).toContainText('touch typed-into.txt');
  await expect(box).toHaveValue(/^yes, /);
  await expect(box).not.toHaveValue(/yan/);
  await expect(other.getByRole('dialog')).toBeVisible();
  expect(require('node:fs').existsSync(join(dir, 'typed-into.txt'))).toBe(false);
  await typist.screenshot({ path: testInfo.outputPath('typing-while-asked.png') });

  // After a pause Tab walks the dialog's own controls only, round and round.
  await typist.waitForTimeout(1000);
  const seen: string[] = [];
  for (let step = 0; step < 8; step++) {
    await typist.keyboard.press('Tab');
    const where = await typist.evaluate(() => {
      const active = document.activeElement as HTMLElement | null;
      return { inside: !!active?.closest('[role="dialog"]'), text: active?.textContent?.trim() ?? '' };
    });
    expect(where.inside, `Tab ${step + 1} left the dialog for "${where.text}"`).toBe(true);
    seen.push(where.text);
  }
  for (const label of [/^Allow/, /^Always allow/, /^Deny/, /^Later/]) {
    expect(seen.some((text) => label.test(text)), `${label} in ${seen.join(' | ')}`).toBe(true);
  }
  // Shift+Tab goes the other way, and stays inside too.
  for (let step = 0; step < 5; step++) {
    await typist.keyboard.press('Shift+Tab');
    expect(await typist.evaluate(() => !!document.activeElement?.closest('[role="dialog"]'))).toBe(true);
  }

  // "Always allow" is never one activation: the first asks to confirm.
  const always = dialog.locator('button[data-intent="persist"]');
  await always.click();
  await expect(dialog).toBeVisible();
  await expect(always).toHaveText(/Confirm/);
  // Its hinted key answers: n denies, in every tab, and focus goes back
  // to the box with what was typed before the question.
  await typist.keyboard.press('n');
  await expect(dialog).toBeHidden();
  await expect(other.getByRole('dialog')).toBeHidden();
  await expect(box).toBeFocused();
  expect(require('node:fs').existsSync(join(dir, 'typed-into.txt'))).toBe(false);

  // Esc is "Later": the dialog closes, the question waits in the inbox.
  await prompt(other, 'run: touch later.txt');
  await expect(dialog).toBeFocused();
  await typist.waitForTimeout(900);
  await typist.keyboard.press('Escape');
  await expect(dialog).toBeHidden();
  await expect(typist.locator('.inbox-item', { hasText: 'touch later.txt' })).toBeVisible();
  await context.close();
});

test('a prompt joins the transcript only once accepted; a refused one stays in the box with its reason', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  const dir = project();
  await createAgent(tab, dir, 'homeless');
  await expect(tab.locator('.agent-view h2')).toHaveText('homeless');
  // Until its process is ready, the tab's attach is still pending, and
  // killing the agent now would fail that attach instead of the prompt.
  let agent: any;
  await expect(async () => {
    const listed = await unixCall(daemon, { id: 'l', type: 'agent.list' });
    agent = listed.data.agents.find((known: any) => known.name === 'homeless');
    expect(agent.runtime_state).toBe('running');
  }).toPass();
  // Its process is gone and cannot come back: its directory is missing.
  const killed = await unixCall(daemon, { id: 'k', type: 'agent.kill', agent_id: agent.agent_id, force: true });
  expect(killed.success).toBe(true);
  require('node:fs').rmdirSync(dir);

  const box = tab.getByLabel('Message to the agent');
  await prompt(tab, 'will this arrive?');
  await expect(tab.locator('.prompt-error')).toContainText('Not sent');
  await expect(box).toHaveValue('will this arrive?');
  await expect(tab.locator('.message.user', { hasText: 'will this arrive?' })).toHaveCount(0);

  // Once the agent can start again, the same text goes through.
  require('node:fs').mkdirSync(dir);
  await tab.locator('.prompt button[type="submit"]').click();
  await expect(tab.locator('.message.user').last()).toHaveText('will this arrive?');
  await expect(box).toHaveValue('');
  await expect(tab.locator('.prompt-error')).toHaveCount(0);
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: will this arrive?');
  await context.close();
});

test('markdown in the transcript becomes elements, and markup or script in it stays text', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'writer');
  const pwned = () => tab.evaluate(() => (window as unknown as { pwned?: number }).pwned);
  await prompt(tab, [
    '## Plan',
    'Read **the docs** at [the site](https://example.com/docs) and run `cargo test`:',
    '',
    '- first',
    '- second',
    '',
    '```',
    'let x = <b>1</b>;',
    '```',
    '<img src=x onerror="window.pwned=1"> [bad](javascript:window.pwned=2) <script>window.pwned=3</script>',
  ].join('\n'));
  const message = tab.locator('.message.user').last();
  await expect(message.locator('h3')).toHaveText('Plan');
  await expect(message.locator('strong')).toHaveText('the docs');
  const link = message.locator('a');
  await expect(link).toHaveCount(1);
  await expect(link).toHaveAttribute('href', 'https://example.com/docs');
  await expect(link).toHaveAttribute('target', '_blank');
  await expect(link).toHaveAttribute('rel', 'noopener noreferrer');
  await expect(message.locator('p code')).toHaveText('cargo test');
  await expect(message.locator('ul > li')).toHaveText(['first', 'second']);
  await expect(message.locator('pre > code')).toHaveText('let x = <b>1</b>;');
  // The markup is shown as written, and none of it became an element.
  await expect(message).toContainText('<img src=x onerror="window.pwned=1">');
  await expect(message).toContainText('<script>window.pwned=3</script>');
  await expect(message.locator('img, script, b')).toHaveCount(0);
  await expect(message.locator('span', { hasText: 'bad' })).not.toHaveAttribute('href', /./);
  await expect(tab.locator('.message.assistant').last()).toContainText('You said:');
  await expect(tab.locator('.message img, .message script')).toHaveCount(0);
  expect(await pwned()).toBeUndefined();
  await context.close();
});

test('a write through a symlink out of the project warns, names the real file and shows all its content on demand', async ({ browser, daemon }) => {
  const fs = require('node:fs');
  const [context, tab] = await enrolled(browser, daemon);
  const dir = project();
  // Not under /tmp: the agent's sandbox has a /tmp of its own, where the
  // link would point at nothing (docs/SANDBOX.md).
  const outside = fs.mkdtempSync(join('/var/tmp', 'shard-outside-'));
  const victim = join(outside, 'bashrc');
  fs.writeFileSync(victim, 'original\n');
  fs.symlinkSync(victim, join(dir, 'notes.txt'));
  await createAgent(tab, dir, 'linked');
  const lines = Array.from({ length: 40 }, (_, n) => `line ${n} of the new content`);
  await prompt(tab, ['write: notes.txt', ...lines].join('\n'));
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  const real = fs.realpathSync(victim);
  await expect(dialog.locator('.question-prompt')).toContainText(real);
  await expect(dialog.locator('.question-prompt')).toContainText('outside the working directory');
  await expect(dialog.locator('dd[data-label="warning"]')).toContainText('symbolic link');
  const content = dialog.locator('dd[data-label="content"] pre');
  await expect(content).toHaveClass(/collapsed/);
  await expect(content).toContainText('line 39 of the new content'); // all of it is there
  await dialog.getByRole('button', { name: 'Show all 40 lines' }).click();
  await expect(content).not.toHaveClass(/collapsed/);
  await tab.waitForTimeout(900); // answers arm after 800 ms
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toBeHidden();
  expect(fs.readFileSync(victim, 'utf8')).toBe('original\n');
  fs.rmSync(outside, { recursive: true, force: true });
  await context.close();
});

test('an edit is asked as the lines it removes and adds, as its card shows it once it ran', async ({ browser, daemon }) => {
  const fs = require('node:fs');
  const [context, tab] = await enrolled(browser, daemon);
  const dir = project();
  fs.writeFileSync(join(dir, 'plan.txt'), 'first\nold step\nlast\n');
  await createAgent(tab, dir, 'zqxeditor');
  await prompt(tab, 'edit: plan.txt\nold step\nnew step');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  const change = dialog.locator('dd[data-label="change"]');
  await expect(change.locator('.line.del')).toHaveText(['-old step']);
  await expect(change.locator('.line.add')).toHaveText(['+new step']);
  await expect(dialog.locator('dd[data-label="replace"], dd[data-label="with"]')).toHaveCount(0);
  await tab.waitForTimeout(900); // answers arm after 800 ms
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await expect(dialog).toBeHidden();
  // The card, once it ran, shows the same change in the file.
  const card = tab.locator('.render.diff').last();
  await expect(card.locator('.line.del')).toHaveText(['-old step']);
  await expect(card.locator('.line.add')).toHaveText(['+new step']);
  expect(fs.readFileSync(join(dir, 'plan.txt'), 'utf8')).toBe('first\nnew step\nlast\n');
  await context.close();
});

test('a failed model call offers Retry, which sends its prompt again', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'zqxretrier');
  await prompt(tab, 'fail: the `upstream` provider is overloaded');
  const failed = tab.locator('.notice-line.error', { hasText: 'PROVIDER_ERROR' });
  await expect(failed).toHaveCount(1);
  // Its words' code spans show as code, not as backticks.
  await expect(failed.locator('code')).toHaveText('upstream');
  await expect(failed).not.toContainText('`');
  await expect(tab.locator('.agent-view .status')).toHaveText('error');
  await failed.getByRole('button', { name: 'Retry' }).click();
  await expect(failed.first().getByRole('button', { name: 'Retry' })).toBeDisabled();
  // The same prompt went again (and the demo model fails it again).
  await expect(tab.locator('.message.user', { hasText: 'provider is overloaded' })).toHaveCount(2);
  await expect(failed).toHaveCount(2);
  await context.close();
});

test('scrolled up while an agent streams, "Latest" brings the end back and follows it', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon, { viewport: { width: 1000, height: 600 } });
  await createAgent(tab, project(), 'zqxscroller');
  await prompt(tab, 'burst: 3000');
  await expect(tab.locator('.agent-view .status')).toHaveText('idle');
  const transcript = tab.locator('.transcript');
  const latest = tab.getByRole('button', { name: '↓ Latest' });
  await expect(latest).toBeHidden();
  await prompt(tab, 'stream: 400');
  await expect(tab.locator('.agent-view .status')).toHaveText('streaming');
  await transcript.evaluate((element) => element.scrollTo({ top: 0 }));
  await expect(latest).toBeVisible();
  // Nothing moves under the reader.
  await tab.waitForTimeout(300);
  expect(await transcript.evaluate((element) => element.scrollTop)).toBe(0);
  await latest.click();
  await expect(latest).toBeHidden();
  const gap = () => transcript.evaluate((element) => element.scrollHeight - element.scrollTop - element.clientHeight);
  await expect.poll(gap).toBeLessThanOrEqual(8);
  // And the end stays in view as the message grows.
  await expect(tab.locator('.agent-view .status')).toHaveText('idle', { timeout: 20_000 });
  await expect.poll(gap).toBeLessThanOrEqual(8);
  await context.close();
});

test('Kill mid-reply asks once more; a stopped agent says so, and a message starts it again', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'stoppable');
  const header = tab.locator('.agent-header');
  const kill = header.getByRole('button', { name: /^Kill/ });
  await expect(kill).toHaveAttribute('title', /cutting off a reply in progress/);
  await expect(header.getByRole('button', { name: 'Terminate' })).toHaveAttribute('title', /once the reply in progress ends/);

  await prompt(tab, 'stream: 600');
  await expect(header.locator('.status')).toHaveText('streaming');
  await kill.click();
  // The first click only asks: the reply streams on.
  await expect(kill).toHaveText('Kill mid-reply?');
  await expect(header.locator('.status')).toHaveText('streaming');
  await kill.click();
  await expect(header.locator('.status')).toHaveText('stopped');
  await expect(header.locator('.status')).toHaveAttribute('title', /a message starts it again/);
  await expect(kill).toHaveText('Kill');
  // The reply says where it was cut off, and keeps what it said.
  const cut = tab.locator('.message.assistant').first();
  await expect(cut.locator('.stopped')).toHaveText('Stopped here: the turn was aborted.');
  await expect(tab.locator('.notice-line')).toHaveCount(0);
  const said = (await cut.locator('.markdown').textContent())!;
  expect(said).toMatch(/^tick-1 /);

  // Started again, the cut-off reply is still there, marked, as the
  // agent's log has it.
  await prompt(tab, 'back again');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: back again');
  await expect(header.locator('.status')).toHaveText('idle');
  await expect(tab.locator('.message.assistant')).toHaveCount(2);
  await expect(cut.locator('.markdown')).toHaveText(said);
  await tab.reload();
  await expect(cut.locator('.stopped')).toHaveText('Stopped here: the turn was aborted.');
  await expect(tab.locator('.message.assistant .stopped')).toHaveCount(1);

  // Terminate mid-reply waits for the reply, and says so meanwhile.
  await prompt(tab, 'stream: 300');
  await expect(header.locator('.status')).toHaveText('streaming');
  await header.getByRole('button', { name: 'Terminate' }).click();
  await expect(tab.locator('.notice-line').last()).toHaveText(
    'Terminating once the reply in progress ends (Kill stops it now).');
  await expect(header.locator('.status')).toHaveText('stopped', { timeout: 30_000 });
  await context.close();
});

test('Abort marks where the reply stopped in every tab, and a follow-up it dropped comes back to its box', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'abortable');
  const other = await context.newPage();
  await other.goto('/');
  await openAgent(other, 'abortable');

  await prompt(tab, 'stream: 3000');
  await expect(tab.locator('.agent-header .status')).toHaveText('streaming');
  await prompt(tab, 'and after that, this');
  await expect(tab.locator('.message.user')).toHaveCount(2);
  await tab.getByRole('button', { name: 'Abort', exact: true }).click();
  await expect(tab.locator('.agent-header .status')).toHaveText('idle');

  // The tab that queued it: the follow-up's row goes, its text is back.
  await expect(tab.locator('.message.user')).toHaveCount(1);
  await expect(tab.getByLabel('Message to the agent')).toHaveValue('and after that, this');
  await expect(tab.locator('.notice-line').last()).toHaveText(
    'What you had queued was not sent; it is back in the message box.');
  await expect(tab.getByRole('button', { name: 'Take back' })).toHaveCount(0);
  // The other tab never showed it, and learns it was dropped.
  await expect(other.locator('.notice-line').last()).toHaveText('A message queued behind it was dropped.');
  await expect(other.locator('.message.user')).toHaveCount(1);
  // Both show where the reply stopped, and so does a tab opened after.
  for (const page of [tab, other]) {
    await expect(page.locator('.message.assistant .stopped')).toHaveText('Stopped here: the turn was aborted.');
  }
  const later = await context.newPage();
  await later.goto('/');
  await openAgent(later, 'abortable');
  await expect(later.locator('.message.assistant .stopped')).toHaveText('Stopped here: the turn was aborted.');
  await expect(later.locator('.notice-line')).toHaveCount(0);
  await later.close();

  // Sent again, it is answered like any prompt.
  await tab.locator('.prompt button[type="submit"]').click();
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: and after that, this');
  await context.close();
});

test('a long conversation is one Tab stop: arrows walk its messages, Tab reaches only the one in focus, and Edit sends it anew', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createAgent(tab, project(), 'keyboarder');
  for (let turn = 1; turn <= 8; turn++) {
    await prompt(tab, `turn ${turn}`);
    await expect(tab.locator('.message.assistant').last()).toHaveText(`You said: turn ${turn}`);
  }
  await expect(tab.locator('.message.assistant[data-complete="true"]')).toHaveCount(8);
  // A Fork on each reply, an Edit on each message but the first.
  await expect(tab.locator('.message .fork')).toHaveCount(15);

  // From the transcript, the message box is a Tab or two away, not 16 Forks.
  const transcript = tab.locator('.transcript');
  const box = tab.getByLabel('Message to the agent');
  await transcript.focus();
  let tabs = 0;
  while (tabs < 20 && !(await box.evaluate((element) => element === document.activeElement))) {
    await tab.keyboard.press('Tab');
    tabs += 1;
  }
  expect(tabs, 'Tabs from the transcript to the message box').toBeLessThanOrEqual(3);

  // ↑ from the transcript takes its last message, ↑ again the one before.
  await transcript.focus();
  await tab.keyboard.press('ArrowUp');
  await expect(tab.locator('.message.assistant').last()).toBeFocused();
  await tab.keyboard.press('ArrowUp');
  const asked = tab.locator('.message.user').last();
  await expect(asked).toBeFocused();
  await tab.keyboard.press('ArrowDown');
  await expect(tab.locator('.message.assistant').last()).toBeFocused();
  await tab.keyboard.press('ArrowUp');
  await expect(asked).toBeFocused();
  // Its Edit shows and is the next Tab stop; Enter edits it there: a new
  // session up to the reply before it, the message in the box to change.
  await expect(asked.locator('.fork')).toBeVisible();
  await tab.keyboard.press('Tab');
  await expect(asked.getByRole('button', { name: 'Edit' })).toBeFocused();
  await expect(tab.locator('.message .fork[tabindex="0"]')).toHaveCount(1);
  await tab.keyboard.press('Enter');
  await expect(box).toHaveValue('turn 8');
  await expect(box).toBeFocused();
  await expect(tab.locator('.ledger-note')).toContainText('change it and send it');
  await expect(tab.locator('.message.user')).toHaveCount(7);
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: turn 7');
  // The sessions: the one it left is kept, and the new one says whose fork it is.
  await tab.locator('details.sessions-panel summary').click();
  const sessions = tab.locator('details.sessions-panel li.session');
  await expect(sessions).toHaveCount(2);
  const current = tab.locator('details.sessions-panel li.session.active');
  await expect(current.locator('.badge', { hasText: 'fork of 1' })).toBeVisible();
  await expect(current.locator('.session-meta')).toHaveText(/^\d+ entries · \d{4}-\d\d-\d\d \d\d:\d\d$/);
  const entries = async () => Number(/^(\d+)/.exec((await current.locator('.session-meta').textContent())!)![1]);
  const before = await entries();
  // Changed and sent, it is answered there, and the open list follows.
  await box.fill('turn 8, said better');
  await box.press('Control+Enter');
  await expect(tab.locator('.message.assistant').last()).toHaveText('You said: turn 8, said better');
  // Its message and the reply: two entries more, without reopening the list.
  await expect(current.locator('.session-meta')).toHaveText(new RegExp(`^${before + 2} entries · `));
  // Both begin with "turn 1": each says where it has got to.
  await expect(current.locator('.session-latest')).toHaveText('last: turn 8, said better');
  await expect(sessions.and(tab.locator(':not(.active)')).locator('.session-latest')).toHaveText('last: turn 8');
  await context.close();
});
