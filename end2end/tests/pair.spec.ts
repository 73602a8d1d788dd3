// Pairing a device from an enrolled page (docs/SECURITY.md, "Pairing a
// device"), in Chromium against the real daemon: the link, its QR code and
// its time left; another browser enrolls by it once.
import { allowConsoleError, test, expect, createAgent, enrolled, project, startDaemon, stopDaemon, agentRow } from './daemon';

test('an enrolled page pairs another browser by a one-time link, which then works no more', async ({ browser }, testInfo) => {
  // A browser that is not enrolled is answered 401 by /bootstrap, which
  // the browser logs.
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  const daemon = await startDaemon();
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: daemon.baseURL });
    await createAgent(tab, project(), 'seen from the phone');
    await tab.getByRole('button', { name: 'Pair a device' }).click();
    const dialog = tab.getByRole('dialog', { name: 'Pair a device' });
    const link = dialog.getByLabel('Pairing link');
    const escaped = daemon.baseURL.replace(/[.]/g, '\\.');
    await expect(link).toHaveValue(new RegExp(`^${escaped}/#enroll=[A-Za-z0-9_-]{22,}$`));
    const url = await link.inputValue();
    // On loopback the link names 127.0.0.1, which a phone would open on
    // itself: the dialog says so, and offers no QR code to scan.
    await expect(dialog.locator('.pair-local')).toBeVisible();
    await expect(dialog.locator('.pair-local')).toContainText('works on this computer only');
    await expect(dialog.locator('.pair-local')).toContainText('docs/WEB-DEPLOYMENT.md');
    await expect(dialog.getByRole('img', { name: 'QR code of the pairing link' })).toBeHidden();
    await expect(dialog.locator('.pair-left')).toHaveText(/^Expires in (10:00|9:[0-5]\d)$/);
    await tab.screenshot({ path: testInfo.outputPath('pair.png') });
    await dialog.getByRole('button', { name: 'Copy' }).click();
    expect(await tab.evaluate(() => navigator.clipboard.readText())).toBe(url);

    // A phone-sized second browser opens it: enrolled, it sees the agents,
    // and stays enrolled.
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await phone.newPage();
    await page.goto(url);
    await expect(page.locator('.connection')).toHaveText('connected');
    await expect(page.locator('.notice')).toHaveText('This browser is now enrolled.');
    await expect(agentRow(page, 'seen from the phone')).toBeVisible();
    // The dialog that made the link says it was used, and counts it down no more.
    await expect(dialog.locator('.pair-used')).toContainText('Used: a browser enrolled with this link');
    await expect(link).toBeHidden();
    await expect(dialog.locator('.pair-left')).toBeHidden();
    await page.reload();
    await expect(page.locator('.connection')).toHaveText('connected');

    // Used once, the link lets nobody else in.
    const third = await browser.newContext();
    const late = await third.newPage();
    await late.goto(url);
    await expect(late.locator('.notice')).toContainText('invalid, used or expired');
    await expect(late.locator('.not-enrolled')).toContainText('Pair a device');

    // Escape closes the dialog; the page goes on.
    await tab.keyboard.press('Escape');
    await expect(dialog).toHaveCount(0);
    await expect(tab.locator('.connection')).toHaveText('connected');
    await Promise.all([context.close(), phone.close(), third.close()]);
  } finally {
    await stopDaemon(daemon);
  }
});

test('a pairing link shows its time running out, and a new one retires it', async ({ browser }) => {
  // A browser that is not enrolled is answered 401 by /bootstrap, which
  // the browser logs.
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  const daemon = await startDaemon(['--enroll-code-ttl', '3']);
  try {
    const [context, tab] = await enrolled(browser, daemon);
    await tab.getByRole('button', { name: 'Pair a device' }).click();
    const dialog = tab.getByRole('dialog', { name: 'Pair a device' });
    const link = dialog.getByLabel('Pairing link');
    await expect(link).toHaveValue(/#enroll=/);
    await expect(dialog.locator('.pair-left')).toHaveText(/^Expires in 0:0[1-3]$/);
    await expect(dialog.locator('.pair-left')).toHaveText('Expired: make a new link.', { timeout: 6_000 });
    const expired = await link.inputValue();
    await dialog.getByRole('button', { name: 'New link' }).click();
    await expect(link).not.toHaveValue(expired);
    await expect(link).toHaveValue(/#enroll=/);
    const fresh = await link.inputValue();
    await dialog.getByRole('button', { name: 'New link' }).click();
    await expect(link).not.toHaveValue(fresh);
    // Neither the expired link nor the retired one enrolls anybody.
    const other = await browser.newContext();
    const page = await other.newPage();
    for (const url of [expired, fresh]) {
      await page.goto('about:blank');
      await page.goto(url);
      await expect(page.locator('.notice')).toContainText('invalid, used or expired');
      await expect(page.locator('.connection')).toHaveText('not enrolled');
    }
    await Promise.all([context.close(), other.close()]);
  } finally {
    await stopDaemon(daemon);
  }
});

test('this browser signs out from its own dialog, once asked again, and is enrolled no more', async ({ browser, daemon }) => {
  // A browser that is not enrolled is answered 401 by /bootstrap, which
  // the browser logs.
  allowConsoleError(/status of 401 \(Unauthorized\)/);
  const [context, tab] = await enrolled(browser, daemon);
  const other = await context.newPage();
  await other.goto(daemon.baseURL);
  await expect(other.locator('.connection')).toHaveText('connected');
  await tab.getByRole('button', { name: 'This browser' }).click();
  const dialog = tab.getByRole('dialog', { name: 'This browser' });
  await expect(dialog.getByRole('button', { name: 'Add a passkey' })).toBeVisible();
  // The first click only asks: Close leaves the browser enrolled.
  await dialog.getByRole('button', { name: 'Sign out' }).click();
  await expect(dialog.locator('.browser-leaving')).toHaveText('Sign out this browser?');
  await dialog.getByRole('button', { name: 'Close' }).click();
  await expect(dialog).toBeHidden();
  await expect(tab.locator('.connection')).toHaveText('connected');
  await tab.getByRole('button', { name: 'This browser' }).click();
  await expect(dialog.getByRole('button', { name: 'Sign out', exact: true })).toBeVisible();
  await dialog.getByRole('button', { name: 'Sign out', exact: true }).click();
  await dialog.getByRole('button', { name: 'Sign out now' }).click();
  // Signed out: this tab starts again as a browser that is not enrolled,
  // the other tab of the same browser is cut off too, and a reload stays out.
  await expect(tab.locator('.not-enrolled')).toBeVisible();
  await expect(tab.locator('.connection')).not.toHaveText('connected');
  await expect(other.locator('.not-enrolled')).toBeVisible();
  await tab.reload();
  await expect(tab.locator('.not-enrolled')).toBeVisible();
  await context.close();
});
