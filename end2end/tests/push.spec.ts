// Web Push end to end (docs/NOTIFICATIONS.md): a "phone" browser subscribes
// from the "Notifications" dialog; with none of its tabs on screen, a
// question is pushed by the daemon to a push service (a fake one on
// loopback, the daemon runs with --insecure-push-endpoints), opened here as
// the browser's push service would hand it over, and delivered to the real
// service worker with DevTools' ServiceWorker.deliverPushMessage. The
// notification is shown; its Allow runs in the worker and the question is
// resolved in every tab. A question answered in a tab closes the
// notification the same way.
//
// Headless Chromium cannot subscribe at a real push service offline, so the
// page's PushManager is stood in for: it hands the page a subscription to
// the fake service, with keys this test holds.
import { createECDH, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, CDPSession, Page, Worker } from '@playwright/test';
import { test, expect, createAgent, newEnrollURL, project, prompt, startDaemon, stopDaemon, type Daemon } from './daemon';

type Pushed = { headers: IncomingMessage['headers']; body: Buffer };

/** A push service on loopback: keeps what it is sent, answers 201. */
async function pushService(): Promise<{ endpoint: string; next: () => Promise<Pushed>; close: () => void }> {
  const queue: Pushed[] = [];
  const waiting: Array<(pushed: Pushed) => void> = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const pushed = { headers: request.headers, body: Buffer.concat(chunks) };
      const taker = waiting.shift();
      if (taker) taker(pushed);
      else queue.push(pushed);
      response.writeHead(201).end();
    });
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}/push/phone`,
    next: () => {
      const ready = queue.shift();
      if (ready) return Promise.resolve(ready);
      return new Promise((taken) => waiting.push(taken));
    },
    close: () => server.close(),
  };
}

/** The browser's side of a subscription (RFC 8291): its key pair and secret. */
function browserKeys() {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return { ecdh, p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16) };
}

/** Opens an aes128gcm body (RFC 8188, keyed per RFC 8291) as a browser does. */
function decrypt(keys: ReturnType<typeof browserKeys>, body: Buffer): any {
  const salt = body.subarray(0, 16);
  const idLength = body[20];
  const senderKey = body.subarray(21, 21 + idLength);
  const sealed = body.subarray(21 + idLength);
  const shared = keys.ecdh.computeSecret(senderKey);
  const info = Buffer.concat([Buffer.from('WebPush: info\0'), keys.ecdh.getPublicKey(), senderKey]);
  const ikm = Buffer.from(hkdfSync('sha256', shared, keys.auth, info, 32));
  const key = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
  const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
  const decipher = createDecipheriv('aes-128-gcm', key, nonce);
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  const padded = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]);
  // The last record ends with the delimiter 2, then any padding zeros.
  const end = padded.lastIndexOf(2);
  return JSON.parse(padded.subarray(0, end).toString('utf8'));
}

/** The page's PushManager, standing in for a push service's subscription. */
function fakePushManager(given: { endpoint: string; p256dh: string; auth: string }) {
  let current: any = null;
  const make = () => ({
    endpoint: given.endpoint,
    expirationTime: null,
    toJSON: () => ({ endpoint: given.endpoint, expirationTime: null, keys: { p256dh: given.p256dh, auth: given.auth } }),
    unsubscribe: async () => { current = null; return true; },
  });
  (PushManager.prototype as any).subscribe = async function (options: any) {
    if (!options || options.userVisibleOnly !== true || !options.applicationServerKey) {
      throw new Error('a subscription must be visible-only and name the daemon key');
    }
    current = make();
    return current;
  };
  (PushManager.prototype as any).getSubscription = async () => current;
}

/** Makes the page say it is not on screen, as a phone's locked screen would. */
/** Counts the page's looks at its push subscription. */
function countSubscriptionLooks(): void {
  const look = PushManager.prototype.getSubscription;
  (window as any).subscriptionLooks = 0;
  PushManager.prototype.getSubscription = function (this: PushManager) {
    (window as any).subscriptionLooks += 1;
    return look.call(this);
  };
}

async function hide(page: Page): Promise<void> {
  await page.evaluate(() => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
    document.dispatchEvent(new Event('visibilitychange'));
  });
}

/**
 * Counts the notifications the worker has finished showing. Chromium can
 * drop a notification from getNotifications() when they are read while it
 * is being shown, so a test reads them only once a push has been shown.
 */
async function countShows(worker: Worker): Promise<void> {
  await worker.evaluate(() => {
    const scope = self as any;
    const show = scope.registration.showNotification.bind(scope.registration);
    scope.shows = 0;
    scope.registration.showNotification = (title: string, options: any) =>
      show(title, options).finally(() => { scope.shows += 1; });
  });
}

/** Delivers `data` as a push to the worker, and waits until it is shown. */
async function deliver(cdp: CDPSession, worker: Worker, registrationId: string, data: unknown): Promise<void> {
  const shows = () => worker.evaluate(() => (self as any).shows as number);
  const before = await shows();
  await cdp.send('ServiceWorker.deliverPushMessage', { origin: daemon.baseURL, registrationId, data: JSON.stringify(data) });
  await expect.poll(shows).toBeGreaterThan(before);
}

/** The page's service worker, and its registration id for DevTools. */
async function workerOf(context: BrowserContext, page: Page): Promise<{ worker: Worker; cdp: CDPSession; registrationId: string }> {
  const cdp = await context.newCDPSession(page);
  const registered = new Promise<string>((found) => {
    cdp.on('ServiceWorker.workerRegistrationUpdated', ({ registrations }) => {
      const ours = registrations.find((registration: any) => !registration.isDeleted);
      if (ours) found(ours.registrationId);
    });
  });
  await cdp.send('ServiceWorker.enable');
  await page.evaluate(() => navigator.serviceWorker.ready);
  const worker = context.serviceWorkers()[0] ?? (await context.waitForEvent('serviceworker'));
  return { worker, cdp, registrationId: await registered };
}

async function shown(worker: Worker): Promise<Array<{ title: string; tag: string; body: string; actions: string[] }>> {
  return worker.evaluate(async () => {
    const notifications = await (self as any).registration.getNotifications();
    return notifications.map((n: any) => ({ title: n.title, tag: n.tag, body: n.body, actions: n.actions.map((a: any) => a.action) }));
  });
}

let daemon: Daemon;
test.beforeAll(async () => {
  daemon = await startDaemon(['--insecure-push-endpoints']);
});
test.afterAll(async () => {
  await stopDaemon(daemon);
});

test('a question reaches the service worker while no tab is on screen, and its Allow answers it everywhere', async ({ browser }) => {
  const service = await pushService();
  const keys = browserKeys();
  const origin = daemon.baseURL;

  // The phone: subscribes from the dialog, after a click.
  const phone = await browser.newContext();
  await phone.grantPermissions(['notifications'], { origin });
  await phone.addInitScript(fakePushManager, { endpoint: service.endpoint, p256dh: keys.p256dh, auth: keys.auth.toString('base64url') });
  await phone.addInitScript(countSubscriptionLooks);
  const phoneTab = await phone.newPage();
  await phoneTab.goto(newEnrollURL(daemon));
  await expect(phoneTab.locator('.connection')).toHaveText('connected');
  const { worker, cdp, registrationId } = await workerOf(phone, phoneTab);
  await countShows(worker);
  await phoneTab.getByRole('button', { name: 'Notifications' }).click();
  const dialog = phoneTab.getByRole('dialog', { name: 'Notifications' });
  await expect(dialog).toContainText('Off on this device.');
  await dialog.getByRole('button', { name: 'Turn on for this device' }).click();
  await expect(dialog).toContainText('On, through 127.0.0.1.');
  await dialog.getByRole('button', { name: 'Close' }).click();

  // The desk: another browser, where the agent works, on screen.
  const desk = await browser.newContext();
  const deskTab = await desk.newPage();
  await deskTab.goto(newEnrollURL(daemon));
  await expect(deskTab.locator('.connection')).toHaveText('connected');
  const cwd = project();
  await createAgent(deskTab, cwd, 'pusher');

  // The phone is locked: its one tab is not on screen.
  await hide(phoneTab);
  await prompt(deskTab, 'run: echo pushed > pushed.txt');
  await expect(deskTab.getByRole('dialog')).toContainText('echo pushed');

  const question = decrypt(keys, (await service.next()).body);
  expect(question.kind).toBe('question');
  expect(question.title).toBe('pusher asks to use bash');
  expect(question.body).toBe('echo pushed > pushed.txt');
  // Its tag names the agent as well as the question (agents number theirs alike).
  expect(question.tag).toBe(`question:${question.agent_id}:${question.request_id}`);
  await deliver(cdp, worker, registrationId, question);
  await expect.poll(() => shown(worker)).toEqual([
    { title: 'pusher asks to use bash', tag: question.tag, body: 'echo pushed > pushed.txt', actions: ['allow', 'deny'] },
  ]);
  // The phone's tab has the question in its inbox too.
  await expect(phoneTab.locator('.inbox-item', { hasText: 'echo pushed' })).toHaveCount(1);

  // Allow, from the notification: run in the worker as its click handler runs it.
  await worker.evaluate(async () => {
    const [notification] = await (self as any).registration.getNotifications();
    await (self as any).clicked(notification, 'allow');
  });
  // Resolved in every tab: the desk's dialog and the phone's inbox close.
  await expect(deskTab.getByRole('dialog')).toHaveCount(0);
  await expect(phoneTab.locator('.inbox-item', { hasText: 'echo pushed' })).toHaveCount(0);
  await expect.poll(() => existsSync(join(cwd, 'pushed.txt'))).toBe(true);
  await expect.poll(() => shown(worker)).toEqual([]);
  // The daemon tells the phone it closed; the worker closes what is left.
  const closedByAllow = decrypt(keys, (await service.next()).body);
  expect(closedByAllow).toMatchObject({ kind: 'closed', request_id: question.request_id });

  // A question answered at the desk closes the phone's notification.
  const looksBefore = await phoneTab.evaluate(() => (window as any).subscriptionLooks);
  await prompt(deskTab, 'run: echo second');
  const second = decrypt(keys, (await service.next()).body);
  await deliver(cdp, worker, registrationId, second);
  await expect.poll(async () => (await shown(worker)).map((n) => n.tag)).toEqual([second.tag]);
  // The hidden tab's own notification of the question is due later; it
  // finds this browser subscribed and leaves the push's, Allow and Deny and
  // all, in place.
  await expect.poll(() => phoneTab.evaluate(() => (window as any).subscriptionLooks), { timeout: 10_000 }).toBeGreaterThan(looksBefore);
  expect(await shown(worker)).toEqual([
    { title: 'pusher asks to use bash', tag: second.tag, body: 'echo second', actions: ['allow', 'deny'] },
  ]);
  await deskTab.getByRole('dialog').getByRole('button', { name: /Deny/ }).click();
  const closed = decrypt(keys, (await service.next()).body);
  expect(closed).toMatchObject({ kind: 'closed', request_id: second.request_id });
  await deliver(cdp, worker, registrationId, closed);
  await expect.poll(() => shown(worker)).toEqual([]);

  // Another agent's question of the same request id: each keeps its own
  // notification, and one's end closes only its own.
  const twinTag = `question:agent-twin:${second.request_id}`;
  const twin = { ...second, agent_id: 'agent-twin', agent: 'twin', title: 'twin asks to use bash', tag: twinTag };
  await deliver(cdp, worker, registrationId, second);
  await deliver(cdp, worker, registrationId, twin);
  await expect.poll(async () => (await shown(worker)).map((n) => n.tag).sort()).toEqual([second.tag, twinTag].sort());
  await deliver(cdp, worker, registrationId, closed);
  await expect.poll(async () => (await shown(worker)).map((n) => n.tag)).toEqual([twinTag]);
  await deliver(cdp, worker, registrationId, { ...closed, agent_id: 'agent-twin', tag: twinTag });
  await expect.poll(() => shown(worker)).toEqual([]);

  // A replayed Allow: refused, said in a notification, nothing runs again.
  await worker.evaluate(async (token) => {
    await (self as any).act(token, { agent: 'pusher', request_id: 'replayed' });
  }, question.actions[0].token);
  await expect.poll(() => shown(worker)).toEqual([
    { title: 'pusher: not answered', tag: 'replayed', body: 'this action was already used, or its question has closed', actions: [] },
  ]);

  service.close();
  await phone.close();
  await desk.close();
});
