// Remote access through a real nginx TLS reverse proxy, configured with the
// server block of docs/WEB-DEPLOYMENT.md: Chromium enrolls over https, gets
// the __Host- cookie, connects, and sees its agents.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test, expect } from '@playwright/test';
import { createAgent, startDaemon, stopDaemon, type Daemon } from './daemon';

const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? done(address.port) : fail(new Error('no port'))));
    });
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

/** The nginx recipe from docs/WEB-DEPLOYMENT.md, with this test's values. */
function recipe(daemonPort: number, proxyPort: number, cert: string, key: string): string {
  const doc = readFileSync(resolve(__dirname, '../../docs/WEB-DEPLOYMENT.md'), 'utf8');
  const marker = doc.indexOf('<!-- nginx-recipe');
  const block = /```nginx\n([\s\S]*?)```/.exec(doc.slice(marker));
  if (marker < 0 || !block) throw new Error('no nginx recipe in WEB-DEPLOYMENT.md');
  const replacements: [string, string][] = [
    ['listen 443 ssl;', `listen 127.0.0.1:${proxyPort} ssl;`],
    ['server_name shard.example.com;', 'server_name localhost;'],
    ['/etc/ssl/shard/fullchain.pem', cert],
    ['/etc/ssl/shard/privkey.pem', key],
    ['proxy_pass http://127.0.0.1:8787;', `proxy_pass http://127.0.0.1:${daemonPort};`],
  ];
  let config = block[1];
  for (const [from, to] of replacements) {
    if (!config.includes(from)) throw new Error(`the recipe no longer contains ${from}`);
    config = config.replace(from, to);
  }
  return config;
}

let daemon: Daemon;
let nginx: ChildProcess;
let proxyPort: number;

test.beforeAll(async () => {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: scripts/test installs Debian's nginx`);
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'shard-nginx-')));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost',
  ], { stdio: 'ignore' });
  const daemonPort = await freePort();
  proxyPort = await freePort();
  daemon = await startDaemon([
    '--port', String(daemonPort),
    '--trust-proxy', 'loopback',
    '--public-host', `localhost:${proxyPort}`,
    '--allowed-origin', `https://localhost:${proxyPort}`,
  ]);
  writeFileSync(join(dir, 'shard.conf'), recipe(daemonPort, proxyPort, cert, key));
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
  nginx = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: 'inherit' });
  await waitForPort(proxyPort);
});

test.afterAll(async () => {
  nginx?.kill('SIGQUIT');
  if (daemon) await stopDaemon(daemon);
});

test('through nginx over https: enroll, the __Host- cookie, connect, see the agents', async ({ browser }, testInfo) => {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  expect(daemon.enrollURL.startsWith(`https://localhost:${proxyPort}/#enroll=`)).toBe(true);
  await page.goto(daemon.enrollURL);
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
  const row = page.locator('li.agent', { hasText: 'behind the proxy' });
  await expect(row).toBeVisible();
  await expect(row.locator('.runtime')).toHaveText('running');
  await page.screenshot({ path: testInfo.outputPath('proxy.png'), fullPage: true });
  await context.close();
});
