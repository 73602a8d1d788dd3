// An agent that is not Shard's own (ACP), in Chromium against the real
// daemon: the scripted ACP agent of tests/fixtures/acp, configured as the
// runtime `fake` in config.toml, created from the dashboard's form, its
// question answered from a second tab and from a phone-sized one.
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test, expect, createOnRuntime, enrolled, openAgent, project, prompt, unixCall, agentRow } from './daemon';

const FAKE = resolve(__dirname, '../../tests/fixtures/acp/fake_acp_agent.py');

test.beforeAll(({ daemon }) => {
  writeFileSync(
    join(daemon.home, 'config.toml'),
    `[[runtimes]]\nid = "fake"\nprotocol = "acp"\ncommand = "python3"\nargs = [${JSON.stringify(FAKE)}]\n`,
  );
});

test('an ACP agent made from the form streams, and its question is answered in another tab', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createOnRuntime(tab, 'fake', 'quillon', project());
  const listed = await unixCall(daemon, { id: 'l', type: 'agent.list' });
  const made = listed.data.agents.find((agent: any) => agent.name === 'quillon');
  expect(made.runtime).toBe('fake');

  // Its own commands are suggested as `/` is typed, and sent as typed.
  const box = tab.getByLabel('Message to the agent');
  await box.fill('/');
  const hints = tab.getByRole('list', { name: 'Agent commands' });
  await expect(hints.locator('.name')).toHaveText(['/review', '/compact']);
  await tab.screenshot({ path: testInfo.outputPath('acp-commands.png') });
  await box.fill('/re');
  await expect(hints.locator('.name')).toHaveText(['/review']);
  await expect(hints).toContainText('Review the changes');
  await hints.getByRole('button').click();
  await expect(box).toHaveValue('/review ');
  await expect(hints).toHaveCount(0);
  await box.fill('/review the diff');
  await tab.locator('.prompt button[type="submit"]').click();
  await expect(tab.locator('.message.assistant').last()).toContainText('echo: /review the diff');

  await prompt(tab, 'hello from the browser');
  await expect(tab.locator('.message.assistant').last()).toContainText('echo: hello from the browser');
  // Its sessions are its own: no Fork on a message, no Sessions panel
  // (with "Compact now"); its usage and approvals are still Shard's.
  await expect(tab.locator('.ledger-panels summary', { hasText: 'Usage' })).toBeVisible();
  await expect(tab.locator('.sessions-panel')).toHaveCount(0);
  await tab.locator('.message.assistant').last().hover();
  await expect(tab.locator('button.fork')).toHaveCount(0);
  await expect(tab.getByRole('button', { name: 'Compact now' })).toHaveCount(0);

  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await expect(other.locator('.connection')).toHaveText('connected');
  await openAgent(other, 'quillon');

  await prompt(tab, 'run: echo acp-ok');
  const dialog = tab.getByRole('dialog');
  const otherDialog = other.getByRole('dialog');
  await expect(dialog).toBeVisible();
  await expect(otherDialog).toBeVisible();
  await expect(dialog).toContainText('echo acp-ok');
  // The prompt shows in the other tab as it lands, and once in this one.
  await expect(other.locator('.message.user', { hasText: 'run: echo acp-ok' })).toHaveCount(1);
  await expect(tab.locator('.message.user', { hasText: 'run: echo acp-ok' })).toHaveCount(1);
  // ACP has no way into a running turn: no Steer, only follow-ups and Abort.
  await expect(tab.getByRole('button', { name: 'Abort' })).toBeVisible();
  await expect(tab.getByRole('button', { name: 'Steer' })).toHaveCount(0);
  await expect(agentRow(tab, 'quillon').locator('.model')).toHaveText('fake · default');
  // The agent's own options, by the names it gave them.
  await expect(dialog.getByRole('button', { name: 'Always allow' })).toBeVisible();
  await tab.screenshot({ path: testInfo.outputPath('acp-dialog.png') });
  await otherDialog.getByRole('button', { name: 'Allow', exact: true }).click();
  await expect(otherDialog).toBeHidden();
  await expect(dialog).toBeHidden();
  await expect(tab.locator('.tool').last()).toContainText('acp-ok');

  // An edit is shown as a diff.
  await prompt(tab, 'edit: notes.txt');
  const diff = tab.locator('.tool').last().locator('.render.diff');
  await expect(diff.locator('.line.del')).toHaveText('-old');
  await expect(diff.locator('.line.add')).toHaveText('+new');

  // Its plan: one card, showing the list as it last stood.
  await prompt(tab, 'plan');
  await expect(tab.locator('.message.assistant').last()).toContainText('planned');
  const plan = tab.locator('.tool', { has: tab.locator('.tool-name', { hasText: /^plan$/ }) });
  await expect(plan).toHaveCount(1);
  await expect(plan.locator('.render.kv dt')).toHaveText(['done', 'doing']);
  await expect(plan.locator('.render.kv dd')).toHaveText(['read the code', 'fix the bug']);
  await tab.screenshot({ path: testInfo.outputPath('acp-agent-view.png'), fullPage: true });
  await context.close();
});

test('on a phone-sized tab an ACP agent is watched and its question answered', async ({ browser, daemon }, testInfo) => {
  const [context, tab] = await enrolled(browser, daemon, { viewport: { width: 390, height: 844 } });
  await createOnRuntime(tab, 'fake', 'wjzmoth', project());
  await prompt(tab, 'run: echo from-a-phone');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toBeVisible();
  const allow = dialog.getByRole('button', { name: 'Allow', exact: true });
  await expect(allow).toBeInViewport();
  await tab.screenshot({ path: testInfo.outputPath('acp-phone-dialog.png') });
  await allow.click();
  await expect(dialog).toBeHidden();
  await expect(tab.locator('.tool').last()).toContainText('from-a-phone');
  await context.close();
});

test('an ACP agent\'s form is asked one field at a time: a choice in a dialog, a yes-or-no from the inbox', async ({ browser, daemon }) => {
  const [context, tab] = await enrolled(browser, daemon);
  await createOnRuntime(tab, 'fake', 'formful', project());
  await prompt(tab, 'elicit');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toContainText('Colour');
  await expect(dialog).toContainText('How should it look?');
  await expect(tab.locator('.agent-header .status')).toHaveText(/^waiting/);
  await tab.waitForTimeout(900); // answers arm after 800 ms (crate::guard)
  await dialog.getByRole('button', { name: 'Teal' }).click();

  // The next field, left for the inbox and answered there.
  await expect(dialog).toContainText('Shiny?');
  await dialog.getByRole('button', { name: /Later/ }).click();
  const entry = tab.locator('.inbox-item', { hasText: 'Shiny?' });
  await expect(entry).toBeVisible();
  await tab.waitForTimeout(900);
  await entry.getByRole('button', { name: 'Yes' }).click();
  await expect(entry).toHaveCount(0);
  await expect(tab.locator('.message.assistant').last()).toContainText('"colour": "teal", "shiny": true');
  await context.close();
});
