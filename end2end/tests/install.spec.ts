// The installable app: Chromium finds the page installable (its manifest,
// icons and service worker), the worker's scope is the page and nothing
// wider, and it takes nothing over: the page is served by the daemon.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, expect } from './daemon';

test('the page is an installable app whose service worker is scoped to it', async ({ playwright, daemon }, testInfo) => {
  // A profile on disk: Chromium offers no install to an incognito context,
  // which is what every other test's context is.
  const profile = mkdtempSync(join(tmpdir(), 'shard-install-'));
  const context = await playwright.chromium.launchPersistentContext(profile, {
    ...testInfo.project.use.launchOptions,
    baseURL: daemon.baseURL,
  });
  const page = context.pages()[0] ?? await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'warning' && message.text().includes('service worker')) problems.push(message.text());
  });
  await page.goto('/');
  await expect(page.locator('main[data-hydrated="true"]')).toBeVisible();

  // The worker the page registered: this origin's root, active.
  const worker = await page.evaluate(async () => {
    const registration = await navigator.serviceWorker.ready;
    return { scope: registration.scope, script: registration.active?.scriptURL ?? '' };
  });
  expect(worker.scope).toBe(`${daemon.baseURL}/`);
  expect(worker.script).toBe(`${daemon.baseURL}/sw.js`);

  // Chromium's own installability check, as its install prompt uses it.
  const cdp = await context.newCDPSession(page);
  await expect
    .poll(async () => (await cdp.send('Page.getInstallabilityErrors')).installabilityErrors, { timeout: 10_000 })
    .toEqual([]);
  const manifest = await cdp.send('Page.getAppManifest');
  expect(manifest.url).toBe(`${daemon.baseURL}/manifest.webmanifest`);
  expect(manifest.errors).toEqual([]);

  // The worker answers no fetch: a reload is the daemon's page, not a copy.
  const reloaded = await page.reload();
  expect(reloaded?.fromServiceWorker()).toBe(false);
  await expect(page.locator('main[data-hydrated="true"]')).toBeVisible();
  expect(problems).toEqual([]);
  await context.close();
  rmSync(profile, { recursive: true, force: true });
});
