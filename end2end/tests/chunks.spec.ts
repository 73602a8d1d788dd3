// The parts of the page fetched as WASM chunks of their own (docs/
// PERFORMANCE.md, "The browser bundle"), when their code arrives late: a
// part whose agent was left before it arrived renders nothing and breaks
// nothing (the console check of every test fails on a panic), and the
// agent opened again shows it whole.
import { test, expect, enrolled, repository, agentRow, startDaemon, stopDaemon } from './daemon';

test('a part whose code arrives after its agent was left breaks nothing, and shows when the agent is opened again', async ({ browser }) => {
  // A daemon of its own: the workspace it makes would be another
  // repository in the list that workspaces.spec reads from the top.
  const daemon = await startDaemon();
  try {
    const [context, tab] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 }, touch: true });
    // Every chunk from now on arrives a second late: a slow phone link.
    await context.route('**/pkg/split_*.wasm', async (route) => {
      await new Promise((done) => setTimeout(done, 1000));
      await route.continue();
    });
    const repo = repository();
    await tab.locator('details.create-panel summary').tap();
    await tab.getByLabel('Working directory').fill(repo);
    await tab.getByLabel('Name', { exact: true }).fill('left-early');
    await tab.getByLabel(/In a new workspace/).check();
    await tab.getByRole('button', { name: 'Create agent' }).tap();
    await expect(tab.locator('.agent-view h2')).toHaveText('left-early');
    // Left at once, while its workspace panel, header and examples load.
    await tab.getByRole('button', { name: 'Back to agents' }).tap();
    await expect(agentRow(tab, 'left-early')).toBeInViewport();
    await tab.waitForTimeout(2500);
    await agentRow(tab, 'left-early').locator('button.open').tap();
    await expect(tab.locator('.workspace-panel .branch')).toContainText('→ main');
    await expect(tab.getByRole('region', { name: 'Try the demo model' })).toBeVisible();
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});
