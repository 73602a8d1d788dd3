// The web client shell: served by the real daemon, it hydrates in Chromium.
import { allowConsoleError, test, expect } from './daemon';

test('the app hydrates with no errors besides the expected 401', async ({ browser, daemon }, testInfo) => {
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  // A fresh context: a browser that was never enrolled.
  const context = await browser.newContext({ baseURL: daemon.baseURL });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('response', (response) => {
    // /bootstrap answers 401 to a browser that is not enrolled: expected.
    const expected = response.status() === 401 && response.url().endsWith('/bootstrap');
    if (response.status() >= 400 && !expected) problems.push(`HTTP ${response.status()} ${response.url()}`);
  });

  await page.goto('/');
  await expect(page).toHaveTitle('Shard');
  await expect(page.locator('.brand')).toHaveText('Shard');
  // Only the client side flips this: the server always renders "false".
  await expect(page.locator('main[data-hydrated="true"]')).toBeVisible();
  await expect(page.locator('.connection')).toHaveText('not enrolled');

  await page.screenshot({ path: testInfo.outputPath('home.png'), fullPage: true });
  expect(problems).toEqual([]);
  await context.close();
});

test('a page the app does not know renders its not-found view', async ({ page }) => {
  // The 404 itself is the browser's to log; nothing else may be (no
  // inline script for the page's policy to refuse).
  allowConsoleError(/no\/such\/page: Failed to load resource: .* 404/);
  const response = await page.goto('/no/such/page');
  expect(response?.status()).toBe(404);
  await expect(page.locator('h1')).toHaveText('Not found');
});
