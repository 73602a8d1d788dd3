// The transcript's rendering cost in Chromium, against the real daemon and
// the demo model (docs/PERFORMANCE.md). Printed, not asserted: a timed test
// would flake on a busy machine; the figures go in docs/PERFORMANCE.md.
//
// - burst: a `burst: N` turn on an empty transcript, N = 1,000 / 10,000 /
//   50,000: wall time from Send to the complete message rendered, the
//   page's main-thread time (Chrome's TaskDuration) in that span, and the
//   same turn read by a bare unix-socket client as the no-rendering floor.
//   The target: the page's time over the floor's at 50,000 within 2x of
//   that ratio at 5,000 (deltas are shown once a frame, so the cost
//   should not grow with the burst).
// - typing: 23 characters typed into the message box while a
//   `burst: 50000` streams, against the same typed on an idle page: the
//   time from each key to the frame that shows it, and the whole.
// - per delta: main-thread time per delta of a `burst: 5000` turn on an
//   empty transcript and on one that already holds 5,000 messages; the
//   second must stay within 2x of the first.
import { writeFileSync } from 'node:fs';
import type { CDPSession, Page } from '@playwright/test';
import { test, expect, createAgent, enrolled, agentId, project, UnixClient, type Daemon } from '../tests/daemon';

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

type Typing = { totalMs: number; p50Ms: number; maxMs: number };

/**
 * Types `typed` into the message box, timing each key from its event to the
 * frame after the box took it; with `text` set, while that turn streams.
 */
async function typing(page: Page, typed: string, text?: string): Promise<Typing> {
  const box = page.getByLabel('Message to the agent');
  await box.evaluate((element) => {
    const times: number[] = [];
    (window as any).keyTimes = times;
    // Only what a key typed: filling the box fires `input` with no key.
    let down = 0;
    element.addEventListener('keydown', (event) => { down = event.timeStamp; });
    element.addEventListener('input', () => {
      const since = down;
      down = 0;
      if (since) requestAnimationFrame(() => times.push(performance.now() - since));
    });
  });
  if (text) {
    await box.fill(text);
    await page.locator('.prompt button[type="submit"]').click();
    // Typed once the reply is streaming.
    await page.locator('.message.assistant:not([data-complete="true"])').last().waitFor();
    await box.fill('');
  }
  await box.focus();
  const start = performance.now();
  await page.keyboard.type(typed);
  await expect(box).toHaveValue(typed);
  const totalMs = performance.now() - start;
  const times: number[] = await page.evaluate(() => (window as any).keyTimes);
  times.sort((a, b) => a - b);
  await box.fill('');
  if (text) await expect(page.locator('.agent-view .status')).toHaveText('idle', { timeout: 300_000 });
  return { totalMs, p50Ms: times[Math.floor(times.length / 2)], maxMs: times[times.length - 1] };
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
  say('      N | wall ms | main-thread ms | µs/delta (main) | DOM nodes | unix floor ms | wall / floor');
  const overFloor: Record<number, number> = {};
  for (const count of [1_000, 5_000, 10_000, 50_000]) {
    const name = `burst-${count}`;
    await createAgent(page, project(), name);
    const run = await renderTurn(page, cdp, `burst: ${count}`);
    const floor = await floorMs(daemon, name, `burst: ${count}`);
    overFloor[count] = run.wallMs / floor;
    figures[name] = { ...run, floorMs: floor, overFloor: overFloor[count] };
    say(`${String(count).padStart(7)} | ${fixed(run.wallMs).padStart(7)} | ${fixed(run.mainMs).padStart(14)} | ${fixed((run.mainMs * 1000) / count, 2).padStart(15)} | ${String(run.domNodes).padStart(9)} | ${fixed(floor).padStart(13)} | ${fixed(overFloor[count], 2).padStart(11)}x`);
  }
  const growth = overFloor[50_000] / overFloor[5_000];
  say(`wall / floor at 50,000 over wall / floor at 5,000: ${fixed(growth, 2)}x (target: within 2x)`);
  figures.burstGrowth = growth;

  say('');
  say('typing: 23 characters into the message box, idle and while a burst: 50000 streams');
  const typed = 'a follow-up, typed now.';
  await createAgent(page, project(), 'typist');
  const idle = await typing(page, typed);
  const busy = await typing(page, typed, 'burst: 50000');
  say('          | all 23 keys ms | key to frame p50 ms | max ms');
  for (const [label, run] of [['idle', idle], ['streaming', busy]] as const) {
    say(`${label.padStart(9)} | ${fixed(run.totalMs).padStart(14)} | ${fixed(run.p50Ms).padStart(19)} | ${fixed(run.maxMs).padStart(6)}`);
  }
  figures.typing = { idle, busy };

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
