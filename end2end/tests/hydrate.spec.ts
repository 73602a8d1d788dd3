// The web client shell: served by the real daemon, it hydrates in Chromium.
import { test, expect } from './daemon';

test('the app hydrates with no console errors or failed requests', async ({ page }, testInfo) => {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()} ${response.url()}`);
  });

  await page.goto('/');
  await expect(page).toHaveTitle('Shard');
  await expect(page.locator('h1')).toHaveText('Shard');
  // Only the client side flips this: the server always renders "false".
  await expect(page.locator('main[data-hydrated="true"]')).toBeVisible();
  await expect(page.locator('.client-state')).toHaveText('client ready');

  await page.screenshot({ path: testInfo.outputPath('home.png'), fullPage: true });
  expect(problems).toEqual([]);
});

test('a page the app does not know renders its not-found view', async ({ page }) => {
  await page.goto('/no/such/page');
  await expect(page.locator('h1')).toHaveText('Not found');
});
