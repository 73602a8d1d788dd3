// Enrollment and the live agent list, in Chromium against the real daemon.
import { mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  allowConsoleError, test, expect, createAgent, enrolled, newEnrollURL, project, repository, startDaemon, stopDaemon, unixCall, agentRow } from './daemon';

test('a browser enrolls with the printed URL and sees the agents it creates, live', async ({ page, daemon }, testInfo) => {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(error.message));

  await page.goto(daemon.enrollURL);
  await expect(page.locator('.connection')).toHaveText('connected');
  await expect(page.locator('.notice')).toHaveText('This browser is now enrolled.');
  // The code left the address bar.
  expect(page.url()).not.toContain('enroll=');

  const project = realpathSync(mkdtempSync(join(tmpdir(), 'shard-project-')));
  await createAgent(page, project, 'from the browser');
  const created = agentRow(page, 'from the browser');
  await expect(created).toBeVisible();
  await expect(created.locator('.runtime')).toHaveText('running');
  await expect(created.locator('.status')).toHaveText('idle');
  await expect(created.locator('.cwd')).toHaveText(project);

  // An agent created elsewhere (a local tool on the unix socket) appears too.
  const other = realpathSync(mkdtempSync(join(tmpdir(), 'shard-project-')));
  const response = await unixCall(daemon, { id: 'c', type: 'agent.create', cwd: other, name: 'from a tool' });
  expect(response.success).toBe(true);
  await expect(agentRow(page, 'from a tool')).toBeVisible();

  // The session survives a reload: no enrollment needed again.
  await page.reload();
  await expect(page.locator('.connection')).toHaveText('connected');
  // (The worker's daemon may hold other tests' agents too.)
  await expect(agentRow(page, 'from the browser')).toBeVisible();
  await expect(agentRow(page, 'from a tool')).toBeVisible();
  await page.screenshot({ path: testInfo.outputPath('agents.png'), fullPage: true });
  expect(problems).toEqual([]);
});

test('a used or wrong enrollment link says so and the browser stays out', async ({ browser, daemon }) => {
  // A browser that is not enrolled is answered 401 by /bootstrap, which
  // the browser logs.
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${daemon.baseURL}/#enroll=not-a-real-code`);
  await expect(page.locator('.notice')).toContainText('invalid, used or expired');
  await expect(page.locator('.connection')).toHaveText('not enrolled');
  await expect(page.locator('.enroll-help')).toContainText('shard enroll');
  // A fresh code from `shard enroll` lets it in.
  await page.goto(newEnrollURL(daemon));
  await expect(page.locator('.connection')).toHaveText('connected');
  await context.close();
});

/** What a page that is not enrolled must show, and must not. */
async function notEnrolledScreen(page: import('@playwright/test').Page): Promise<void> {
  await expect(page.locator('.connection')).toHaveText('not enrolled');
  const screen = page.locator('.not-enrolled');
  await expect(screen.getByRole('heading')).toHaveText('This browser is not enrolled');
  // Every way in: the daemon's printed link, `shard enroll`, another device.
  await expect(screen).toContainText('shard daemon');
  await expect(screen).toContainText('shard enroll');
  await expect(screen).toContainText('Pair a device');
  // Nothing that pretends to work: no empty list, no form, no agent.
  await expect(page.locator('.layout')).toBeHidden();
  await expect(page.getByText('No agents yet.', { exact: true })).toBeHidden();
  await expect(page.getByRole('button', { name: 'Create agent' })).toBeHidden();
  await expect(page.getByLabel('Working directory')).toBeHidden();
}

test('a browser that is not enrolled is told how to enroll, not shown an empty dashboard', async ({ browser, daemon }) => {
  // A browser that is not enrolled is answered 401 by /bootstrap, which
  // the browser logs.
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(daemon.baseURL);
  await notEnrolledScreen(page);
  // The link it is told about lets it in, and the dashboard comes back.
  await page.goto(newEnrollURL(daemon));
  await expect(page.locator('.connection')).toHaveText('connected');
  await expect(page.locator('.not-enrolled')).toHaveCount(0);
  await expect(page.locator('details.create-panel')).toBeVisible();
  await context.close();
});

test('a browser whose session is revoked, or whose secret is gone, is shown as not enrolled', async ({ browser }) => {
  // Its /bootstrap is refused (401), as the browser's console says.
  allowConsoleError(/status of 401/);
  const daemon = await startDaemon();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'before the revocation');
    const revoked = await unixCall(daemon, { id: 'r', type: 'daemon.revoke_session', all: true });
    expect(revoked.success).toBe(true);
    await notEnrolledScreen(tab);
    await expect(agentRow(tab, 'before the revocation')).toBeHidden();
    await context.close();

    // The cookie without the secret the page keeps is no enrollment either.
    const [other, page] = await enrolled(browser, daemon);
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await notEnrolledScreen(page);
    await other.close();
  } finally {
    await stopDaemon(daemon);
  }
});

test('with no agent yet the page says how to make one, and once there are agents, to pick one', async ({ browser }) => {
  const daemon = await startDaemon();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    const empty = tab.locator('.agent-view.empty');
    await expect(empty).toHaveText('No agents yet: create one under \u201cNew agent\u201d.');
    // A phone shows the list alone: the list says it there.
    const [phoneContext, phone] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 } });
    await expect(phone.locator('.agent-view')).toBeHidden();
    await expect(phone.locator('.agents li.empty')).toHaveText('No agents yet: create one under \u201cNew agent\u201d.');
    await createAgent(tab, project(), 'firstborn');
    await expect(phone.locator('.agents li.empty')).toHaveCount(0);
    await expect(agentRow(phone, 'firstborn')).toBeVisible();
    // A tab that has opened none asks to pick one.
    const other = await context.newPage();
    await other.goto(daemon.baseURL);
    await expect(agentRow(other, 'firstborn')).toBeVisible();
    await expect(other.locator('.agent-view.empty')).toHaveText('Select an agent to see its work.');
    await phoneContext.close();
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});

test('the new-agent form answers by its fields, keeps what was typed on a refusal, and closes once made', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  const dir = project();
  await createAgent(tab, dir, 'zqxalpha');
  // Made: the form closed, and the keyboard is in the new agent's message box.
  const panel = tab.locator('details.create-panel');
  await expect(panel).toHaveJSProperty('open', false);
  await expect(tab.getByLabel('Message to the agent')).toBeFocused();

  await panel.locator('summary').click();
  // The name went with the agent made; the folder stays, and folders in use are offered.
  await expect(tab.getByLabel('Name', { exact: true })).toHaveValue('');
  await expect(tab.getByLabel('Working directory')).toHaveValue(dir);
  await expect(tab.locator('#known-dirs option[value="' + dir + '"]')).toHaveCount(1);

  // A folder that is not there: the daemon's reason, by the button, and the fields kept.
  await tab.getByLabel('Working directory').fill(join(dir, 'no-such-folder'));
  await tab.getByLabel('Name', { exact: true }).fill('zqxbeta');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  const problem = tab.locator('.create .form-error');
  await expect(problem).toContainText('Could not create the agent');
  await expect(tab.getByLabel('Name', { exact: true })).toHaveValue('zqxbeta');
  await expect(panel).toHaveJSProperty('open', true);
  await expect(tab.locator('.notice')).toHaveCount(0);

  // A name already taken is refused before anything is asked.
  await tab.getByLabel('Working directory').fill(dir);
  await tab.getByLabel('Name', { exact: true }).fill('zqxalpha');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(problem).toHaveText('An agent is already named \u201czqxalpha\u201d: choose another name.');
  await expect(agentRow(tab, 'zqxalpha')).toHaveCount(1);

  await tab.getByLabel('Name', { exact: true }).fill('zqxbeta');
  await tab.getByRole('button', { name: 'Create agent' }).click();
  await expect(tab.locator('.agent-view h2')).toHaveText('zqxbeta');
  await expect(problem).toHaveCount(0);
  await expect(panel).toHaveJSProperty('open', false);
  await context.close();
});

test('a first agent\'s form offers the daemon\'s folder and names the default model; a workspace is asked for each agent', async ({ browser }) => {
  const daemon = await startDaemon();
  try {
    const [context, tab] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 }, touch: true });
    // On a phone "New agent" is a control a thumb can hit.
    const summary = tab.locator('details.create-panel summary');
    expect((await summary.boundingBox())!.height).toBeGreaterThanOrEqual(40);
    await summary.tap();
    await expect(tab.getByLabel('Working directory')).toHaveValue(realpathSync(daemon.cwd));
    await expect(tab.getByLabel('Model', { exact: true })).toHaveAttribute('placeholder', 'demo (the default)');

    const repo = repository();
    await tab.getByLabel('Working directory').fill(repo);
    await tab.getByLabel('Name', { exact: true }).fill('in-a-tree');
    await tab.getByLabel(/In a new workspace/).check();
    await tab.getByRole('button', { name: 'Create agent' }).tap();
    await expect(tab.locator('.agent-view h2')).toHaveText('in-a-tree');
    // The next agent is in the folder as it is, unless asked again.
    await tab.getByRole('button', { name: 'Back to agents' }).tap();
    await summary.tap();
    await expect(tab.getByLabel(/In a new workspace/)).not.toBeChecked();
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});
