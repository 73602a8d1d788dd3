// A first run as a new user has it, in Chromium against the real daemon:
// an empty transcript on the built-in `demo` model offers prompts that
// show what Shard does (a stream, a command asked first, a file written as
// a diff, a question), and a phone walks the first five minutes: enrol,
// an example, a question answered, a workspace committed.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, createAgent, enrolled, git, project, repository, startDaemon, stopDaemon, agentRow } from './daemon';

test('an empty transcript on the demo model offers examples, each showing what it does', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon);
  const dir = project();
  const examples = tab.getByRole('region', { name: 'Try the demo model' });
  const cases: Array<[RegExp, (name: string) => Promise<void>]> = [
    [/Stream a reply/, async () => {
      await expect(tab.locator('.message.assistant').last()).toHaveAttribute('data-complete', 'true');
      expect((await tab.locator('.message.assistant').last().textContent())!.length).toBeGreaterThan(40);
    }],
    [/Run a command/, async () => {
      const dialog = tab.getByRole('dialog');
      await expect(dialog).toContainText('ls -la');
      await tab.waitForTimeout(900);
      await dialog.getByRole('button', { name: /Allow once/ }).click();
      await expect(tab.locator('.tool').last()).toContainText('exit');
    }],
    [/Write a file/, async () => {
      const dialog = tab.getByRole('dialog');
      await expect(dialog).toContainText('hello.md');
      await tab.waitForTimeout(900);
      await dialog.getByRole('button', { name: /Allow once/ }).click();
      await expect(tab.locator('.tool').last().locator('.line.add').first()).toContainText('# Hello');
      expect(readFileSync(join(dir, 'hello.md'), 'utf8')).toContain('Written by the demo agent.');
    }],
    [/Ask you a question/, async () => {
      const dialog = tab.getByRole('dialog');
      await expect(dialog).toContainText('What should the next agent work on?');
      await tab.waitForTimeout(900);
      await dialog.getByLabel('Answer').fill('the docs');
      await dialog.getByRole('button', { name: 'Submit' }).click();
      await expect(tab.locator('.message.assistant').last()).toContainText('the docs');
    }],
  ];
  for (const [index, [label, check]] of cases.entries()) {
    await createAgent(tab, dir, `first-${index}`);
    await expect(examples).toBeVisible();
    if (index === 0) await tab.screenshot({ path: testInfo.outputPath('first-run.png') });
    await examples.getByRole('button', { name: label }).click();
    // Sent as a prompt of its own: the transcript is not empty any more.
    await expect(examples).toBeHidden();
    await check(`first-${index}`);
  }
  await context.close();
});

test('a phone\'s first five minutes: enrol, an example, a question answered, a workspace committed', async ({ browser }, testInfo) => {
  // A daemon of its own: a first run, with no agent or workspace before.
  const daemon = await startDaemon();
  try {
    const repo = repository();

    const [context, phone] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 }, touch: true });
    await phone.locator('details.create-panel summary').tap();
    await phone.getByLabel('Working directory').fill(repo);
    await phone.getByLabel('Name', { exact: true }).fill('pocket-first');
    await phone.getByLabel(/In a new workspace/).check();
    await phone.getByLabel('Branch', { exact: true }).fill('first-steps');
    await phone.getByRole('button', { name: 'Create agent' }).tap();
    await expect(phone.locator('.agent-view h2')).toHaveText('pocket-first');

    // The examples say what the demo model does; one asks a question.
    const examples = phone.getByRole('region', { name: 'Try the demo model' });
    await expect(examples).toBeInViewport();
    await phone.screenshot({ path: testInfo.outputPath('phone-first-run.png') });
    await examples.getByRole('button', { name: /Ask you a question/ }).tap();
    const dialog = phone.getByRole('dialog');
    await expect(dialog).toContainText('What should the next agent work on?');
    await phone.waitForTimeout(900);
    await dialog.getByLabel('Answer').fill('a notes file');
    await dialog.getByRole('button', { name: 'Submit' }).tap();
    await expect(phone.locator('.message.assistant').last()).toContainText('a notes file');

    // Then a file, written into the workspace once allowed.
    await phone.getByLabel('Message to the agent').fill('write: notes.md\nFirst steps on a phone.');
    await phone.locator('.prompt button[type="submit"]').tap();
    await expect(dialog).toContainText('notes.md');
    await phone.waitForTimeout(900);
    await dialog.getByRole('button', { name: /Allow once/ }).tap();
    await expect(dialog).toBeHidden();
    const worktree = (await agentRow(phone, 'pocket-first').locator('.cwd').textContent())!;
    await expect.poll(() => existsSync(join(worktree, 'notes.md'))).toBe(true);

    // Committed from the workspace panel, on the phone.
    const panel = phone.locator('.workspace-panel');
    await expect(panel.locator('.facts')).toContainText('1 uncommitted change');
    // Folded, the panel leaves most of the screen to the transcript, and
    // Send stays above the pane bar.
    await expect(panel.getByRole('button', { name: 'Commit…' })).toBeHidden();
    const transcript = await phone.locator('.transcript').boundingBox();
    expect(transcript!.height, 'the transcript beside the workspace panel').toBeGreaterThan(844 * 0.3);
    const send = await phone.locator('.prompt button[type="submit"]').boundingBox();
    const bar = await phone.locator('.phonebar').boundingBox();
    expect(send!.y + send!.height).toBeLessThanOrEqual(bar!.y + 1);
    const unfold = panel.getByRole('button', { name: 'Diff, commit, merge…' });
    await unfold.tap();
    await expect(panel.getByRole('button', { name: 'Fold the diff and actions' })).toHaveAttribute('aria-expanded', 'true');
    await panel.getByRole('button', { name: 'Commit…' }).tap();
    const commit = panel.getByRole('dialog', { name: 'Commit' });
    await expect(commit.getByRole('button', { name: 'Commit', exact: true })).toBeInViewport();
    await commit.getByLabel('Commit message').fill('First steps');
    await commit.getByRole('button', { name: 'Commit', exact: true }).tap();
    await expect(panel.locator('.action-result')).toHaveText(/^Committed 1 file on first-steps/);
    expect(git(worktree, 'log', '-1', '--format=%s').trim()).toBe('First steps');
    await phone.screenshot({ path: testInfo.outputPath('phone-committed.png') });
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});
