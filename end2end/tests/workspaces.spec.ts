// Workspaces in the dashboard (docs/WORKSPACES.md): an agent made in a new
// git worktree from the new-agent form, the list grouped by repository and
// workspace, the diff of what the agent wrote in the workspace panel, and
// retirement with the daemon's refusals and its confirmation; commit, merge
// and push from the panel, each previewed before it is done.
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, enrolled, git, openAgent, project, prompt, repository, unixCall, agentRow } from './daemon';

/** Answers the permission dialog on screen with "Allow once". */
async function allowOnce(tab: import('@playwright/test').Page, text: string): Promise<void> {
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toContainText(text);
  await tab.waitForTimeout(900); // answers arm after 800 ms (crate::guard)
  await dialog.getByRole('button', { name: /Allow once/ }).click();
  await expect(dialog).toBeHidden();
}

test('an agent in a new workspace writes a file, the panel shows the diff, and the workspace retires', async ({ browser, daemon }, testInfo) => {
  const repo = repository();
  const [context, tab] = await enrolled(browser, daemon);

  // The new-agent form, "in a new workspace", with a branch of our own.
  await tab.locator('details.create-panel summary').click();
  await tab.getByLabel('Working directory').fill(repo);
  await tab.getByLabel('Name', { exact: true }).fill('feature');
  await tab.getByLabel(/In a new workspace/).check();
  await tab.getByLabel('Branch', { exact: true }).fill('feature-x');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('feature');

  // The list: the repository, its workspace, and the agent under it.
  const list = tab.locator('.agents > li');
  await expect(list.nth(0)).toHaveClass(/repository/);
  await expect(list.nth(0)).toHaveAttribute('data-repository', repo);
  await expect(list.nth(1)).toHaveClass(/workspace/);
  await expect(list.nth(1)).toContainText('⎇ feature-x');
  await expect(list.nth(2)).toHaveClass(/agent/);
  await expect(list.nth(2)).toContainText('feature');
  const worktree = (await list.nth(2).locator('.cwd').textContent())!;
  expect(worktree).not.toBe(repo);
  expect(git(repo, 'worktree', 'list')).toContain(worktree);

  // The panel: the branch, its target, a clean start.
  const panel = tab.locator('.workspace-panel');
  await expect(panel.locator('.workspace-title')).toHaveText('Workspace feature');
  await expect(panel.locator('.branch')).toHaveText('⎇ feature-x → main');
  await expect(panel.locator('.facts')).toContainText('0 ahead, 0 behind · no uncommitted changes');
  // Its diff says so in plain words, then folds away again.
  await panel.getByText('Diff against main').click();
  await expect(panel.locator('.workspace-diff .hint')).toHaveText('No changes yet.');
  await panel.getByText('Diff against main').click();
  await expect(panel.locator('.workspace-diff .hint')).toBeHidden();

  // The demo agent writes a file; the diff shows it once the turn is over.
  await prompt(tab, 'write: notes/hello.txt\nhello from the workspace');
  await allowOnce(tab, 'notes/hello.txt');
  await expect(panel.locator('.facts')).toContainText('1 uncommitted change');
  await panel.getByText('Diff against main').click();
  const file = panel.locator('.workspace-diff .render.diff');
  await expect(file.locator('.path')).toHaveText('notes/hello.txt');
  await expect(file.locator('.line.add')).toHaveText('+hello from the workspace');
  expect(existsSync(join(repo, 'notes'))).toBe(false); // the main checkout is untouched
  await tab.screenshot({ path: testInfo.outputPath('workspace-diff.png'), fullPage: true });

  // Retiring is refused while the agent runs, then while the work is
  // uncommitted; committed by hand, it stays in the diff.
  await panel.getByRole('button', { name: 'Retire workspace' }).click();
  await expect(panel.locator('.retire-error')).toContainText('terminate it first');
  await tab.getByRole('button', { name: 'Terminate' }).click();
  await expect(agentRow(tab, 'feature').locator('.runtime')).toHaveText('stopped');
  await panel.getByRole('button', { name: 'Retire workspace' }).click();
  await expect(panel.locator('.retire-error')).toContainText('uncommitted changes');
  expect(existsSync(join(worktree, 'notes/hello.txt'))).toBe(true);
  git(worktree, 'add', '-A');
  git(worktree, 'commit', '--quiet', '-m', 'add notes');
  await panel.getByRole('button', { name: 'Refresh' }).click();
  await expect(panel.locator('.facts')).toContainText('1 ahead, 0 behind · no uncommitted changes · not merged');
  await expect(file.locator('.path')).toHaveText('notes/hello.txt');

  // The branch is not merged: the daemon asks, and the page asks us.
  await panel.getByRole('button', { name: 'Retire workspace' }).click();
  const confirm = panel.getByRole('alertdialog', { name: 'Delete the branch?' });
  await expect(confirm).toContainText('not merged');
  expect(existsSync(worktree)).toBe(true); // nothing removed yet
  await confirm.getByRole('button', { name: 'Delete the branch anyway' }).click();
  await expect(panel).toHaveAttribute('data-lifecycle', 'retired');
  await expect(list.nth(1)).toHaveAttribute('data-lifecycle', 'retired');
  await expect(panel.getByRole('button', { name: 'Retire workspace' })).toBeHidden();
  expect(existsSync(worktree)).toBe(false);
  expect(git(repo, 'branch', '--list', 'feature-x').trim()).toBe('');
  const listed = await unixCall(daemon, { type: 'workspace.list', id: 'l', include_retired: true });
  expect(listed.data.workspaces.map((w: any) => w.lifecycle)).toEqual(['retired']);
  await context.close();
});

test('keep retires the worktree and keeps the branch; a bad repository is refused in the notice', async ({ browser, daemon }) => {
  const repo = repository();
  const [context, tab] = await enrolled(browser, daemon);
  await tab.locator('details.create-panel summary').click();
  await tab.getByLabel(/In a new workspace/).check();

  // Not a repository: the daemon's typed refusal, and nothing made.
  const plain = project();
  await tab.getByLabel('Working directory').fill(plain);
  await tab.getByLabel('Name', { exact: true }).fill('nowhere');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.create .form-error')).toContainText('not in a git repository');
  await expect(agentRow(tab, 'nowhere')).toHaveCount(0);

  // A workspace whose branch is generated from the name, retired with keep.
  await tab.getByLabel('Working directory').fill(repo);
  await tab.getByLabel('Name', { exact: true }).fill('Tidy Up');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('Tidy Up');
  const panel = tab.locator('.workspace-panel');
  await expect(panel.locator('.branch')).toHaveText('⎇ shard/tidy-up → main');

  // "+ agent" on the workspace's heading: a second agent in the same worktree.
  const agents = tab.locator('li.agent', { hasText: 'Tidy Up' });
  const first = await agents.first().getAttribute('data-agent-id');
  await tab.getByRole('button', { name: 'New agent in workspace Tidy Up' }).click();
  await expect(agents).toHaveCount(2);
  await expect(tab.locator('li.agent.selected')).not.toHaveAttribute('data-agent-id', first!);
  const cwds = await agents.locator('.cwd').allTextContents();
  expect(cwds[0]).toBe(cwds[1]);
  await expect(panel.locator('.workspace-title')).toHaveText('Workspace Tidy Up');
  for (const id of await agents.evaluateAll((rows) => rows.map((row) => row.getAttribute('data-agent-id')))) {
    await tab.locator(`li.agent[data-agent-id="${id}"] button.open`).click();
    await tab.getByRole('button', { name: 'Terminate' }).click();
    await expect(tab.locator(`li.agent[data-agent-id="${id}"] .runtime`)).toHaveText('stopped');
  }
  await panel.getByLabel('Branch after retiring').selectOption('keep');
  await panel.getByRole('button', { name: 'Retire workspace' }).click();
  await expect(panel).toHaveAttribute('data-lifecycle', 'retired');
  expect(git(repo, 'branch', '--list', 'shard/tidy-up')).toContain('shard/tidy-up');
  expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1);
  await context.close();
});

test('commit, merge and push from the panel: each shows what it will do, then does it', async ({ browser, daemon }, testInfo) => {
  const repo = repository();
  const bare = project();
  git(bare, 'init', '--quiet', '--bare');
  git(repo, 'remote', 'add', 'origin', bare);
  const [context, tab] = await enrolled(browser, daemon);
  await tab.locator('details.create-panel summary').click();
  await tab.getByLabel('Working directory').fill(repo);
  await tab.getByLabel('Name', { exact: true }).fill('cobaltwren');
  await tab.getByLabel(/In a new workspace/).check();
  await tab.getByLabel('Branch', { exact: true }).fill('wren-work');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('cobaltwren');
  const panel = tab.locator('.workspace-panel');
  const worktree = (await agentRow(tab, 'cobaltwren').locator('.cwd').textContent())!;
  mkdirSync(join(worktree, 'notes'));
  writeFileSync(join(worktree, 'notes/wren.txt'), 'a wren\n');
  // Another tab on the same agent, its panel open before any action.
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await openAgent(other, 'cobaltwren');
  const otherFacts = other.locator('.workspace-panel .facts');
  await expect(otherFacts).toContainText('0 ahead, 0 behind · 1 uncommitted change');

  // Commit: the preview lists what it takes; nothing happens before the yes.
  await panel.getByRole('button', { name: 'Commit…' }).click();
  const commit = panel.getByRole('dialog', { name: 'Commit' });
  // The daemon's code spans (`wren-work`) show as code, not backticks.
  await expect(commit).toContainText('Commits 1 changed file on branch wren-work');
  await expect(commit.locator('code', { hasText: 'wren-work' })).toHaveCount(1);
  await expect(commit.locator('.paths li')).toHaveText(['A notes/wren.txt']);
  const yes = commit.getByRole('button', { name: 'Commit', exact: true });
  await expect(yes).toBeDisabled(); // no message yet
  // The keyboard is in the message; Ctrl+Enter commits.
  await expect(commit.getByLabel('Commit message')).toBeFocused();
  await tab.keyboard.press('Control+Enter'); // nothing without a message
  await expect(commit).toBeVisible();
  await tab.keyboard.type('Note the wren');
  await tab.screenshot({ path: testInfo.outputPath('workspace-commit-preview.png'), fullPage: true });
  expect(git(worktree, 'status', '--porcelain')).toContain('?? notes/');
  await tab.keyboard.press('Control+Enter');
  await expect(panel.locator('.action-result')).toHaveText(/^Committed 1 file on wren-work as [0-9a-f]{12}\.$/);
  await expect(commit).toBeHidden();
  expect(git(worktree, 'log', '-1', '--format=%s').trim()).toBe('Note the wren');
  await expect(panel.locator('.facts')).toContainText('1 ahead, 0 behind · no uncommitted changes · not merged');
  // The other tab follows without a reload.
  await expect(otherFacts).toContainText('1 ahead, 0 behind · no uncommitted changes · not merged');

  // Merge: a fast-forward of main, whose checkout follows.
  await panel.getByRole('button', { name: 'Merge into main…' }).click();
  const merge = panel.getByRole('dialog', { name: 'Merge' });
  await expect(merge).toContainText('Fast-forwards main to wren-work: 1 commit, 1 file changed.');
  await expect(merge).toContainText('checked out in the repository\'s main checkout');
  expect(existsSync(join(repo, 'notes'))).toBe(false);
  // The keyboard is on its yes.
  await expect(merge.getByRole('button', { name: 'Merge', exact: true })).toBeFocused();
  await merge.getByRole('button', { name: 'Merge', exact: true }).click();
  await expect(panel.locator('.action-result')).toHaveText('Fast-forwarded main to wren-work (1 commit).');
  expect(existsSync(join(repo, 'notes/wren.txt'))).toBe(true);
  expect(git(repo, 'status', '--porcelain')).toBe('');
  await expect(panel.locator('.facts')).toContainText('0 ahead, 0 behind');

  // Push: refused in place while no remote is configured; then done.
  await panel.getByRole('button', { name: 'Push…' }).click();
  await expect(panel.locator('.action-error')).toContainText('push_remote');
  appendFileSync(join(daemon.home, 'config.toml'), '\n[workspaces]\npush_remote = "origin"\n');
  await panel.getByRole('button', { name: 'Push…' }).click();
  const push = panel.getByRole('dialog', { name: 'Push' });
  // The preview names the exact URL the push goes to.
  await expect(push).toContainText(`Pushes branch wren-work to origin at ${bare}, where it is new: 2 commits it does not have.`);
  await push.getByRole('button', { name: 'Push', exact: true }).click();
  await expect(panel.locator('.action-result')).toHaveText('Pushed 2 commits of branch wren-work to origin.');
  expect(git(bare, 'rev-parse', 'refs/heads/wren-work')).toBe(git(worktree, 'rev-parse', 'HEAD'));
  await context.close();
});
