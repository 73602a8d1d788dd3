// The transcript's rendering cost in Chromium, against the real daemon and
// the demo model (docs/PERFORMANCE.md). Printed, not asserted: a timed test
// would flake on a busy machine; the figures go in docs/PERFORMANCE.md.
//
// - burst: a `burst: N` turn on an empty transcript, N = 1,000 / 10,000 /
//   50,000: wall time from Send to the complete message rendered, the
//   page's main-thread time (Chrome's TaskDuration) in that span, and the
//   same turn read by a bare unix-socket client as the no-rendering floor.
// - per delta: main-thread time per delta of a `burst: 5000` turn on an
//   empty transcript and on one that already holds 5,000 messages; the
//   second must stay within 2x of the first.
import { writeFileSync } from 'node:fs';
import type { CDPSession, Page } from '@playwright/test';
import { test, createAgent, enrolled, agentId, project, UnixClient, type Daemon } from '../tests/daemon';

async function mainThreadSeconds(cdp: CDPSession): Promise<number> {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return metrics.find((metric: { name: string }) => metric.name === 'TaskDuration')!.value;
}

type Run = { wallMs: number; mainMs: number; domNodes: number };

/** Sends `text` from the page and waits for the turn's final message to be on screen. */
async function renderTurn(page: Page, cdp: CDPSession, text: string): Promise<Run> {
  await page.getByLabel('Message to the agent').fill(text);
  const before = await mainThreadSeconds(cdp);
  const wallMs = await page.evaluate(async () => {
    // The turn's reply is the message that was not on the page before.
    const known = new Set([...document.querySelectorAll('.message.assistant')].map((element) => element.getAttribute('data-message-id')));
    const complete = () => [...document.querySelectorAll('.message.assistant[data-complete="true"]')]
      .some((element) => !known.has(element.getAttribute('data-message-id')));
    const finished = new Promise<void>((resolve) => {
      const observer = new MutationObserver(() => {
        if (complete()) {
          observer.disconnect();
          resolve();
        }
      });
      observer.observe(document.querySelector('.transcript')!, { subtree: true, childList: true, attributes: true });
    });
    const start = performance.now();
    (document.querySelector('.prompt button[type="submit"]') as HTMLButtonElement).click();
    await finished;
    // Until the frame that shows it has been produced.
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    return performance.now() - start;
  });
  const mainMs = ((await mainThreadSeconds(cdp)) - before) * 1000;
  const domNodes = await page.evaluate(() => document.getElementsByTagName('*').length);
  return { wallMs, mainMs, domNodes };
}

/** The same turn read by a bare unix client: the daemon and agent alone. */
async function floorMs(daemon: Daemon, name: string, text: string): Promise<number> {
  const client = await UnixClient.open(daemon);
  const id = await agentId(daemon, name);
  await client.call({ type: 'agent.attach', agent_id: id, role: 'interactive' });
  const start = performance.now();
  await client.turn(id, text);
  const elapsed = performance.now() - start;
  client.close();
  return elapsed;
}

async function openPage(browser: import('@playwright/test').Browser, daemon: Daemon) {
  const [context, page] = await enrolled(browser, daemon);
  const cdp = await context.newCDPSession(page);
  await cdp.send('Performance.enable');
  return { context, page, cdp };
}

const fixed = (value: number, digits = 1) => value.toFixed(digits);

test('transcript rendering', async ({ browser, daemon }) => {
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    console.log(line);
  };
  const figures: Record<string, unknown> = {};
  const { context, page, cdp } = await openPage(browser, daemon);

  say('burst: N deltas in one turn, empty transcript');
  say('      N | wall ms | main-thread ms | µs/delta (main) | DOM nodes | unix floor ms');
  for (const count of [1_000, 10_000, 50_000]) {
    const name = `burst-${count}`;
    await createAgent(page, project(), name);
    const run = await renderTurn(page, cdp, `burst: ${count}`);
    const floor = await floorMs(daemon, name, `burst: ${count}`);
    figures[name] = { ...run, floorMs: floor };
    say(`${String(count).padStart(7)} | ${fixed(run.wallMs).padStart(7)} | ${fixed(run.mainMs).padStart(14)} | ${fixed((run.mainMs * 1000) / count, 2).padStart(15)} | ${String(run.domNodes).padStart(9)} | ${fixed(floor).padStart(13)}`);
  }

  say('');
  say('per delta: burst: 5000 on an empty transcript and on one holding 5,000 messages');
  const deltas = 5_000;
  await createAgent(page, project(), 'empty');
  const empty = await renderTurn(page, cdp, `burst: ${deltas}`);

  await createAgent(page, project(), 'long');
  const driver = await UnixClient.open(daemon);
  const long = await agentId(daemon, 'long');
  await driver.call({ type: 'agent.attach', agent_id: long, role: 'interactive' });
  const filling = performance.now();
  for (let turn = 1; turn <= 5_000; turn++) {
    await driver.turn(long, `message ${turn}`);
  }
  driver.close();
  await page.locator('.message.assistant', { hasText: 'You said: message 5000' }).waitFor({ timeout: 300_000 });
  const rows = await page.locator('.transcript').getAttribute('data-rows');
  say(`(5,000 messages streamed into the page in ${fixed((performance.now() - filling) / 1000)} s; ${rows} rows with the compaction markers)`);
  const full = await renderTurn(page, cdp, `burst: ${deltas}`);
  const perDelta = (run: Run) => (run.mainMs * 1000) / deltas;
  say(' transcript | wall ms | main-thread ms | µs/delta (main) | DOM nodes');
  say(`      empty | ${fixed(empty.wallMs).padStart(7)} | ${fixed(empty.mainMs).padStart(14)} | ${fixed(perDelta(empty), 2).padStart(15)} | ${String(empty.domNodes).padStart(9)}`);
  say(` 5,000 msgs | ${fixed(full.wallMs).padStart(7)} | ${fixed(full.mainMs).padStart(14)} | ${fixed(perDelta(full), 2).padStart(15)} | ${String(full.domNodes).padStart(9)}`);
  const ratio = perDelta(full) / perDelta(empty);
  say(`ratio (5,000 msgs / empty), main-thread time per delta: ${fixed(ratio, 2)}x (target: within 2x)`);
  figures.perDelta = { empty, full, ratio };
  const out = process.env.SHARD_BENCH_OUT;
  if (out) writeFileSync(out, JSON.stringify({ lines, figures }, null, 2));
  await context.close();
});
