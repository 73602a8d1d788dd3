// Remote access through real TLS reverse proxies, each configured with its
// recipe from docs/WEB-DEPLOYMENT.md: Chromium enrolls over https, gets the
// __Host- cookie, connects, and sees its agents. Each proxy runs on a free
// port, and Caddy on 443 too: its recipe once worked only there.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test, expect, createAgent, startDaemon, stopDaemon, type Daemon, agentRow } from './daemon';

const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';
const CADDY = process.env.CADDY_BIN ?? '/usr/bin/caddy';

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? done(address.port) : fail(new Error('no port'))));
    });
  });
}

/** Fails, saying why, unless this process could listen on `port` (443 needs root, and nobody on it). */
function bindable(port: number): Promise<void> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE'
        ? 'something already listens there (a system nginx or caddy?): stop it'
        : 'run the tests as root, or let this user bind low ports';
      fail(new Error(`this test needs 127.0.0.1:${port} and cannot bind it (${error.code}): ${why}`));
    });
    server.listen(port, '127.0.0.1', () => server.close(() => done()));
  });
}

function waitForPort(port: number, timeoutMs = 15_000): Promise<void> {
  const started = Date.now();
  return new Promise((done, fail) => {
    const attempt = () => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.end();
        done();
      });
      socket.once('error', () => {
        if (Date.now() - started > timeoutMs) fail(new Error(`nothing listens on ${port}`));
        else setTimeout(attempt, 100);
      });
    };
    attempt();
  });
}

/**
 * The block of docs/WEB-DEPLOYMENT.md that follows `<!-- NAME-recipe`, with
 * each of the doc's values replaced by this test's; a value the doc no longer
 * holds fails the test, so the doc cannot drift from what is run.
 */
function recipe(name: string, language: string, replacements: [string, string][]): string {
  const doc = readFileSync(resolve(__dirname, '../../docs/WEB-DEPLOYMENT.md'), 'utf8');
  const marker = doc.indexOf(`<!-- ${name}-recipe`);
  const block = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(doc.slice(marker));
  if (marker < 0 || !block) throw new Error(`no ${name} recipe in WEB-DEPLOYMENT.md`);
  let config = block[1];
  for (const [from, to] of replacements) {
    if (!config.includes(from)) throw new Error(`the ${name} recipe no longer contains ${from}`);
    config = config.replace(from, to);
  }
  return config;
}

/** A reverse proxy as the test runs it: on 127.0.0.1:`port`, in front of the daemon, its files in `dir`. */
type Proxy = {
  name: string;
  start(dir: string, daemonPort: number, port: number): ChildProcess;
  /** The signal that makes it finish what it serves and exit. */
  stopSignal: NodeJS.Signals;
};

const nginx: Proxy = {
  name: 'nginx',
  stopSignal: 'SIGQUIT',
  start(dir, daemonPort, port) {
    if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: scripts/test installs Debian's nginx`);
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost',
    ], { stdio: 'ignore' });
    writeFileSync(join(dir, 'shard.conf'), recipe('nginx', 'nginx', [
      ['listen 443 ssl;', `listen 127.0.0.1:${port} ssl;`],
      ['server_name shard.example.com;', 'server_name localhost;'],
      ['/etc/ssl/shard/fullchain.pem', cert],
      ['/etc/ssl/shard/privkey.pem', key],
      ['proxy_pass http://127.0.0.1:8787;', `proxy_pass http://127.0.0.1:${daemonPort};`],
    ]));
    for (const temp of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(dir, temp));
    const root = process.getuid?.() === 0 ? 'user root root;\n' : '';
    writeFileSync(join(dir, 'nginx.conf'), `${root}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  include ${dir}/shard.conf;
}
`);
    return spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
  },
};

// Caddy issues its own certificate (`tls internal`) from a CA it keeps in
// `dir`: the global options keep that CA out of the system's trust stores,
// turn off the admin endpoint and the port-80 redirects, and stay on loopback.
const caddy: Proxy = {
  name: 'caddy',
  stopSignal: 'SIGTERM',
  start(dir, daemonPort, port) {
    if (!existsSync(CADDY)) throw new Error(`${CADDY} is missing: scripts/test installs Debian's caddy`);
    const site = recipe('caddy', 'caddyfile', [
      ['shard.example.com {', `localhost:${port} {\n    tls internal`],
      ['reverse_proxy 127.0.0.1:8787', `reverse_proxy 127.0.0.1:${daemonPort}`],
    ]);
    const config = join(dir, 'Caddyfile');
    writeFileSync(config, `{
    admin off
    skip_install_trust
    auto_https disable_redirects
    default_bind 127.0.0.1
}

${site}`);
    return spawn(CADDY, ['run', '--adapter', 'caddyfile', '--config', config], {
      env: { ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, 'config'), XDG_DATA_HOME: join(dir, 'data') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  },
};

/** Resolves once `child` listens on `port`; else fails with what it printed (it exited, or never listened). */
async function listening(proxy: Proxy, child: ChildProcess, port: number): Promise<void> {
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-8_000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  let exited!: (code: number | null) => void;
  const exit = new Promise<number | null>((done) => (exited = done));
  child.once('exit', (code) => exited(code));
  const outcome = await Promise.race([
    waitForPort(port).then(() => 'up', (error: Error) => error.message),
    exit.then((code) => `it exited with ${code}`),
  ]);
  if (outcome !== 'up') throw new Error(`${proxy.name} is not listening on ${port} (${outcome}):\n${output}`);
}

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill(signal);
  const late = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(late);
}

/** The whole flow behind `proxy` on `fixedPort` (else a free port). */
function behind(proxy: Proxy, fixedPort?: number) {
  const where = fixedPort ? `port ${fixedPort}` : 'a free port';
  test.describe(`${proxy.name} on ${where}`, () => {
    let daemon: Daemon | undefined;
    let child: ChildProcess | undefined;
    let dir: string | undefined;
    let port: number;

    test.beforeAll(async () => {
      if (fixedPort) await bindable(fixedPort);
      dir = realpathSync(mkdtempSync(join(tmpdir(), `shard-${proxy.name}-`)));
      const daemonPort = await freePort();
      port = fixedPort ?? (await freePort());
      daemon = await startDaemon([
        '--port', String(daemonPort),
        '--trust-proxy', 'loopback',
        '--public-host', `localhost:${port}`,
        '--allowed-origin', new URL(`https://localhost:${port}`).origin,
      ]);
      child = proxy.start(dir, daemonPort, port);
      await listening(proxy, child, port);
    });

    test.afterAll(async () => {
      if (child) await stopProcess(child, proxy.stopSignal);
      if (daemon) await stopDaemon(daemon);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test(`through ${proxy.name} over https on ${where}: enroll, the __Host- cookie, connect, see the agents`, async ({ browser }, testInfo) => {
      // The proxies' certificate is the test's own. Service workers stay
      // off: Chromium fetches a worker's script past ignoreHTTPSErrors,
      // and that fetch at times brought the whole browser down (a crash
      // report, then "Target page, context or browser has been closed").
      // Notifications have their own spec (push.spec.ts).
      const context = await browser.newContext({ ignoreHTTPSErrors: true, serviceWorkers: 'block' });
      const page = await context.newPage();
      const enroll = new URL(daemon!.enrollURL);
      expect(enroll.origin).toBe(new URL(`https://localhost:${port}`).origin);
      expect(enroll.hash.startsWith('#enroll=')).toBe(true);
      // A proxy that forwards the wrong host gets a 400 that names the header.
      const response = await page.goto(daemon!.enrollURL);
      // Its body says why when it is not a 200 (a 400 names the header).
      // Read only then: a 200 page moves on at once, and its body may be
      // gone by the time it is asked for.
      const status = response?.status();
      const why =
        status === 200 ? '' : await response?.text().catch((error) => `no body: ${error}`);
      expect(status, why).toBe(200);
      await expect(page.locator('.connection')).toHaveText('connected');

      const cookies = await context.cookies();
      const session = cookies.find((cookie) => cookie.name.startsWith('__Host-shard_session'));
      expect(session, JSON.stringify(cookies)).toBeTruthy();
      expect(session!.secure).toBe(true);
      expect(session!.httpOnly).toBe(true);
      expect(session!.sameSite).toBe('Strict');
      expect(session!.path).toBe('/');
      expect(cookies.some((cookie) => cookie.name === 'shard_session')).toBe(false);

      const project = realpathSync(mkdtempSync(join(tmpdir(), 'shard-project-')));
      await createAgent(page, project, 'behind the proxy');
      const row = agentRow(page, 'behind the proxy');
      await expect(row).toBeVisible();
      await expect(row.locator('.runtime')).toHaveText('running');
      await page.screenshot({ path: testInfo.outputPath(`${proxy.name}-${port}.png`), fullPage: true });

      // Reachable from elsewhere, a pairing link names the public origin,
      // and its QR code (drawn by the daemon, an image under the page's
      // img-src data: policy) is there for a phone's camera.
      await page.getByRole('button', { name: 'Pair a device' }).click();
      const dialog = page.getByRole('dialog', { name: 'Pair a device' });
      const origin = new URL(`https://localhost:${port}`).origin.replace(/[.]/g, '\\.');
      await expect(dialog.getByLabel('Pairing link')).toHaveValue(new RegExp(`^${origin}/#enroll=`));
      const qr = dialog.getByRole('img', { name: 'QR code of the pairing link' });
      await expect(qr).toBeVisible();
      expect(await qr.evaluate((image) => (image as HTMLImageElement).naturalWidth)).toBeGreaterThan(100);
      await expect(dialog.locator('.pair-local')).toBeHidden();
      await context.close();
    });
  });
}

behind(nginx);
behind(caddy);
behind(caddy, 443);
