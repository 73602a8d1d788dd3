// A Playwright fixture that runs the real `shard` binary for each worker, in a
// fresh $SHARD_HOME and an empty working directory (so the page can only come
// from the binary itself), and tells the tests its base URL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { test as base } from '@playwright/test';

// stdout is read line by line on '\n' here: the daemon's announcement lines
// are plain ASCII, so Node's line splitting is safe for them.
const SHARD_BIN = process.env.SHARD_BIN ?? resolve(__dirname, '../../target/release/shard');

export type Daemon = {
  baseURL: string;
  home: string;
  process: ChildProcess;
};

export async function startDaemon(extraArgs: string[] = []): Promise<Daemon> {
  const home = mkdtempSync(join(tmpdir(), 'shard-home-'));
  const cwd = mkdtempSync(join(tmpdir(), 'shard-cwd-'));
  const child = spawn(SHARD_BIN, ['daemon', '--port', '0', ...extraArgs], {
    cwd,
    env: { ...process.env, SHARD_HOME: home },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const baseURL = await new Promise<string>((resolveURL, reject) => {
    const timer = setTimeout(() => reject(new Error('shard daemon did not announce within 30 s')), 30_000);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolveURL(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`shard daemon exited early with ${code}`));
    });
  });
  child.on('exit', () => {
    rmSync(home, { recursive: true, force: true });
    rmSync(cwd, { recursive: true, force: true });
  });
  return { baseURL, home, process: child };
}

export async function stopDaemon(daemon: Daemon): Promise<void> {
  if (daemon.process.exitCode !== null) return;
  const exited = new Promise((done) => daemon.process.once('exit', done));
  daemon.process.kill('SIGTERM');
  await exited;
}

export const test = base.extend<{}, { daemon: Daemon }>({
  daemon: [
    async ({}, use) => {
      const daemon = await startDaemon();
      await use(daemon);
      await stopDaemon(daemon);
    },
    { scope: 'worker' },
  ],
  baseURL: async ({ daemon }, use) => use(daemon.baseURL),
});

export { expect } from '@playwright/test';
