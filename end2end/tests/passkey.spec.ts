// Passkey step-up (docs/SECURITY.md): in a remote mode, allowing `bash`
// from a browser needs a fresh passkey assertion made for that very call.
// The daemon runs as if behind a proxy on loopback, public as
// http://localhost:PORT (a host name, so WebAuthn has a relying party;
// Chromium treats localhost as a secure context), and Chromium's virtual
// authenticator (DevTools WebAuthn domain) stands in for the device's.
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CDPSession, Page } from '@playwright/test';
import { allowConsoleError, test, expect, createAgent, newEnrollURL, project, prompt, startDaemon, stopDaemon, type Daemon } from './daemon';

function freePort(): Promise<number> {
  return new Promise((found) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => found(port));
    });
  });
}

let daemon: Daemon;
test.beforeAll(async () => {
  const port = await freePort();
  daemon = await startDaemon([
    '--port', String(port), '--trust-proxy', 'loopback', '--public-host', `localhost:${port}`,
    '--allowed-origin', `http://localhost:${port}`, '--allow-insecure-remote',
  ]);
});
test.afterAll(async () => {
  await stopDaemon(daemon);
});

async function authenticator(page: Page): Promise<{ cdp: CDPSession; authenticatorId: string }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2', ctap2Version: 'ctap2_1', transport: 'internal',
      hasResidentKey: true, hasUserVerification: true, isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return { cdp, authenticatorId };
}

test('a remote allow of bash needs the passkey, made for that call; a bad assertion allows nothing', async ({ browser }) => {
  // The refusals below are answers of the daemon's passkey routes (409 with
  // no passkey, 403 for a forged one), which the browser logs.
  allowConsoleError(/status of (409 \(Conflict\)|403 \(Forbidden\))/);
  const context = await browser.newContext();
  const tab = await context.newPage();
  await tab.goto(newEnrollURL(daemon));
  await expect(tab.locator('.connection')).toHaveText('connected');
  expect(new URL(tab.url()).hostname).toBe('localhost');
  const { cdp, authenticatorId } = await authenticator(tab);

  // Without a passkey, a guarded allow is refused and says so.
  const cwd = project();
  await createAgent(tab, cwd, 'guarded');
  await prompt(tab, 'run: echo first > first.txt');
  const dialog = tab.getByRole('dialog');
  await expect(dialog).toContainText('echo first');
  await dialog.getByRole('button', { name: /^Allow/ }).first().click();
  await expect(tab.locator('.notice')).toHaveText('Not allowed: this browser has no passkey yet. Add one in \u201cThis browser\u201d at the top, then allow again.');
  await expect(dialog).toContainText('echo first');
  expect(existsSync(join(cwd, 'first.txt'))).toBe(false);
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toHaveCount(0);

  // Register one, from the dialog of this browser, not from Notifications.
  await tab.getByRole('button', { name: 'Notifications' }).click();
  const notifications = tab.getByRole('dialog', { name: 'Notifications' });
  await expect(notifications.getByRole('button', { name: 'Turn on for this device' })).toBeVisible();
  await expect(notifications.getByRole('button', { name: 'Add a passkey' })).toHaveCount(0);
  await notifications.getByRole('button', { name: 'Close' }).click();
  await tab.getByRole('button', { name: 'This browser' }).click();
  const device = tab.getByRole('dialog', { name: 'This browser' });
  await device.getByRole('button', { name: 'Add a passkey' }).click();
  await expect(device).toContainText('Passkey added for this browser.');
  const [credential] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
  expect(credential.rpId).toBe('localhost');
  await device.getByRole('button', { name: 'Close' }).click();

  // A forged signature: the daemon refuses it, nothing runs.
  await prompt(tab, 'run: echo second > second.txt');
  await expect(dialog).toContainText('echo second');
  await cdp.send('WebAuthn.setResponseOverrideBits', { authenticatorId, isBogusSignature: true });
  await dialog.getByRole('button', { name: /^Allow/ }).first().click();
  await expect(tab.locator('.notice')).toContainText('Not allowed: the passkey assertion was not accepted');
  await expect(dialog).toContainText('echo second');
  expect(existsSync(join(cwd, 'second.txt'))).toBe(false);

  // A true one: allowed, that call runs, the counter moved.
  await cdp.send('WebAuthn.setResponseOverrideBits', { authenticatorId, isBogusSignature: false });
  await dialog.getByRole('button', { name: /^Allow/ }).first().click();
  await expect(tab.locator('.notice')).toContainText('Allowed with the passkey.');
  await expect(dialog).toHaveCount(0);
  await expect.poll(() => existsSync(join(cwd, 'second.txt'))).toBe(true);
  const [used] = (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
  expect(used.signCount).toBeGreaterThan(credential.signCount);

  // A deny never asks.
  await prompt(tab, 'run: echo third > third.txt');
  await dialog.getByRole('button', { name: /Deny/ }).click();
  await expect(dialog).toHaveCount(0);
  expect(existsSync(join(cwd, 'third.txt'))).toBe(false);
  await context.close();
});

test('a daemon reached by its public name, not loopback, pairs by a QR code of that origin', async ({ browser }) => {
  const context = await browser.newContext();
  const tab = await context.newPage();
  await tab.goto(newEnrollURL(daemon));
  await expect(tab.locator('.connection')).toHaveText('connected');
  await tab.getByRole('button', { name: 'Pair a device' }).click();
  const dialog = tab.getByRole('dialog', { name: 'Pair a device' });
  const origin = new URL(daemon.enrollURL).origin;
  expect(new URL(origin).hostname).toBe('localhost');
  const escaped = origin.replace(/[.]/g, '\\.');
  await expect(dialog.getByLabel('Pairing link')).toHaveValue(new RegExp(`^${escaped}/#enroll=[A-Za-z0-9_-]{22,}$`));
  const qr = dialog.getByRole('img', { name: 'QR code of the pairing link' });
  await expect(qr).toBeVisible();
  expect(await qr.evaluate((image) => (image as HTMLImageElement).naturalWidth)).toBeGreaterThan(100);
  await expect(dialog.locator('.pair-local')).toBeHidden();
  await context.close();
});
