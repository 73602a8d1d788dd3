// The fleet in the dashboard (docs/PROTOCOL-NOTES.md, "The fleet" and
// "Budgets"), against the real daemon and the priced demo model: the fleet
// bar (memory and spend against the limits of config.toml, who is awake),
// each agent's meter, a budget set from the agent's panel that pauses the
// agent at its next model call, and the question to raise it answered by
// touch from a phone (a second device), which lets the waiting prompt go on
// while the first tab's dialog closes. The phone's list fits its width.
import type { Page } from '@playwright/test';
import {
  test, expect, agentRow, createAgent, enrolled, openAgent, project, prompt, startDaemon, stopDaemon,
} from './daemon';

const PHONE = { viewport: { width: 390, height: 844 }, touch: true };

// A call costs a tenth of a cent per input token and twice that per output
// token; the daemon may spend $100 a day; up to four agents run at once.
const CONFIG = `[limits]
max_awake_agents = 4
memory_soft_mb = 4096

[prices.demo]
input = 1000.0
output = 2000.0

[[budgets]]
scope = "daemon"
period = "day"
usd = 100.0
`;

/** The fleet bar's figures on `page`. */
const bar = (page: Page) => page.getByRole('region', { name: 'Fleet' });

test('the fleet bar, an agent paused at its budget and raised by touch from a phone, the bar at phone size', async ({ browser }, testInfo) => {
  const daemon = await startDaemon([], CONFIG);
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await createAgent(tab, project(), 'budgeted');
    await prompt(tab, 'hello there');
    await expect(tab.locator('.message.assistant').last()).toContainText('You said: hello there');

    // The bar: what the running agent holds against the soft ceiling, who
    // is awake of how many, and the day's spend against the daemon's cap.
    await expect(bar(tab).locator('.fleet-memory')).toContainText(/Memory \d+ (KB|MB) of 4096 MB/);
    await expect(bar(tab).getByRole('meter', { name: /Memory of all agents/ })).toBeVisible();
    await expect(bar(tab).locator('.fleet-awake')).toHaveText('1 of 4 awake');
    const today = bar(tab).locator('.fleet-spend').first();
    await expect(today).toContainText(/^today \$\d+\.\d{4} of \$100\.0000$/);
    await expect(today).not.toContainText('$0.0000 of');
    await expect(today).toHaveAttribute('data-state', 'ok');
    // The agent's own meter in its row, and with its CPU in its header.
    await expect(agentRow(tab, 'budgeted').locator('.memory')).toHaveText(/^\d+ (KB|MB)$/);
    await expect(tab.locator('.agent-header .memory')).toHaveText(/^\d+ (KB|MB) · \d+% CPU$/);

    // The budget panel lists the daemon's cap; a cap below what the agent
    // already spent today is reached at once.
    await tab.locator('.ledger-panels summary', { hasText: 'Budget' }).click();
    const panel = tab.locator('.budget-panel');
    await expect(panel.locator('.budget', { hasText: 'daemon · today' })).toContainText('of $100.0000');
    await panel.getByLabel('Cap in dollars').fill('0.0001');
    await panel.getByRole('button', { name: 'Set cap' }).click();
    await expect(panel.locator('.budget-outcome')).toHaveText(/^Now today: \$\d+\.\d{4} of \$0\.0001$/);
    const own = panel.locator('.budget', { hasText: 'agent · today' });
    await expect(own).toHaveAttribute('data-state', 'reached');
    await expect(own.getByRole('button', { name: 'Raise' })).toBeVisible();

    // A phone, enrolled on its own, follows the same agent.
    const [phoneContext, phone] = await enrolled(browser, daemon, PHONE);
    await openAgent(phone, 'budgeted');

    // The next prompt waits before its model call: paused, in both.
    await prompt(tab, 'hello again');
    await expect(tab.locator('.agent-header .status')).toHaveText('paused at its budget');
    await expect(agentRow(tab, 'budgeted').locator('.status')).toHaveText('paused at its budget');
    const dialog = tab.getByRole('dialog');
    const phoneDialog = phone.getByRole('dialog');
    await expect(dialog.getByRole('heading')).toHaveText('budgeted is paused at its budget');
    await expect(phoneDialog).toContainText('is reached');
    const raise = phoneDialog.getByRole('button', { name: /^Raise it to \$/ });
    await expect(raise).toBeVisible();
    await expect(phoneDialog.getByRole('button', { name: /Keep/ })).toBeVisible();
    await phone.screenshot({ path: testInfo.outputPath('phone-budget-question.png') });

    // Raised from the phone: the first tab's dialog goes and the prompt
    // that waited is answered.
    await raise.tap();
    await expect(phoneDialog).toBeHidden();
    await expect(dialog).toBeHidden();
    await expect(tab.locator('.message.assistant').last()).toContainText('You said: hello again');
    await expect(tab.locator('.agent-header .status')).toHaveText('idle');
    // The panel lists again: the agent's budget was raised for today.
    await expect(own).not.toHaveAttribute('data-state', 'ok');
    await expect(today).toContainText(/^today \$\d+\.\d{4} of \$100\.0000$/);

    // At phone size the list pane shows the bar whole, wrapped to its width.
    await phone.getByRole('button', { name: 'Back to agents' }).tap();
    await expect(bar(phone).locator('.fleet-awake')).toHaveText('1 of 4 awake');
    await expect(bar(phone).locator('.fleet-spend').first()).toContainText('of $100.0000');
    const fits = await phone.evaluate(() => {
      const bar = document.querySelector('.fleet-bar')!.getBoundingClientRect();
      return bar.left >= 0 && bar.right <= window.innerWidth
        && document.scrollingElement!.scrollWidth <= window.innerWidth;
    });
    expect(fits).toBe(true);
    await phone.screenshot({ path: testInfo.outputPath('phone-fleet-bar.png') });
    await phoneContext.close();
    await context.close();
  } finally {
    await stopDaemon(daemon);
  }
});
