// A node in the dashboard (docs/NODES.md): a hub daemon linked to a second
// daemon, the node, by `shard bridge` as the node's command, both real
// binaries. From a hub tab: the node's link in the node bar, an agent made
// on the node from the new-agent form and marked with its node on its row
// and in its header, its question answered, its link dropped mid-reply
// (every streamed delta shown once, in order, live and after a reload),
// then its node stopped (shown out of reach; a message refused and kept)
// and started again (the transcript whole, the kept message sent).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from '@playwright/test';
import {
  test, expect, agentRow, enrolled, git, project, prompt, repository, Restartable, SHARD_BIN, startDaemon,
  stopDaemon, unixCall,
} from './daemon';

/** Kills every process whose command line holds all of `words`; how many. */
function killMatching(words: string[]): number {
  let killed = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline: string[];
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`).toString().split('\0');
    } catch {
      continue;
    }
    if (words.every((word) => cmdline.includes(word))) {
      process.kill(Number(entry), 'SIGKILL');
      killed += 1;
    }
  }
  return killed;
}

/** A hub whose one node, `box`, is `node`, linked by `shard bridge`. */
function hubOf(node: Restartable): ReturnType<typeof startDaemon> {
  const command = JSON.stringify([SHARD_BIN, 'bridge', '--home', node.home]);
  return startDaemon([], `[[nodes]]\nid = "box"\ncommand = ${command}\n`);
}

/** The node `box` in the tab's node bar. */
function nodeOf(tab: Page) {
  return tab.getByRole('region', { name: 'Nodes' }).locator('li.node[data-node="box"]');
}

/** The numbers of the `tick-N` deltas in the last reply, in order. */
async function ticks(page: Page): Promise<number[]> {
  const text = await page.locator('.message.assistant').last().innerText();
  return [...text.matchAll(/\btick-(\d+)\b/g)].map((match) => Number(match[1]));
}

const upTo = (count: number) => Array.from({ length: count }, (_, at) => at + 1);

test('a node\'s agent in the dashboard: marked, answered, its link dropped and its node down and back, the transcript whole', async ({ browser }) => {
  test.setTimeout(120_000);
  const node = new Restartable();
  // The node has a runtime the hub has not: the form offers it there.
  writeFileSync(join(node.home, 'config.toml'), '[[runtimes]]\nid = "only-there"\nprotocol = "acp"\ncommand = "true"\n');
  await node.start();
  const hub = await hubOf(node);
  let context: BrowserContext | undefined;
  try {
    let tab: Page;
    [context, tab] = await enrolled(browser, hub);
    const link = nodeOf(tab);
    await expect(link).toHaveAttribute('data-state', 'online');
    await expect(link).toContainText('box');

    // Made on the node from the form: the runtimes offered are the node's.
    await tab.locator('details.create-panel summary').click();
    await tab.getByLabel('Working directory').fill(project());
    await tab.getByLabel('Name', { exact: true }).fill('remote');
    await expect(tab.getByLabel(/In a new workspace/)).toBeVisible();
    await expect(tab.getByLabel('Runtime')).toHaveCount(0);
    await tab.getByLabel('Machine').selectOption('box');
    await expect(tab.getByLabel('Runtime').locator('option[value="only-there"]')).toHaveCount(1);
    await tab.getByRole('button', { name: 'Create agent' }).click();
    await expect(tab.locator('.agent-view h2')).toHaveText('remote');
    await expect(agentRow(tab, 'remote').locator('.badge.node')).toHaveText('on box');
    await expect(tab.locator('.agent-header .badge.node')).toHaveText('on box');
    const listed = await unixCall(node.daemon, { id: 'l', type: 'agent.list' });
    expect(listed.data.agents.map((agent: any) => agent.name)).toEqual(['remote']);

    // Its question, asked on the node, answered from the hub's tab.
    await prompt(tab, 'run: echo from-the-node');
    const dialog = tab.getByRole('dialog');
    await expect(dialog).toContainText('echo from-the-node');
    await dialog.getByRole('button', { name: /Allow once/ }).click();
    await expect(dialog).toBeHidden();
    await expect(tab.locator('.message.assistant').last()).toContainText('exit code 0');
    await expect(tab.locator('.tool').last()).toContainText('from-the-node');

    // The link dropped mid-reply: every delta shown once, in order.
    await prompt(tab, 'stream: 200');
    await expect(tab.locator('.message.assistant').last()).toContainText('tick-30 ');
    expect(killMatching(['bridge', node.home])).toBeGreaterThan(0);
    await expect(tab.locator('.message.assistant').last()).toContainText('tick-200 ', { timeout: 30_000 });
    await expect(tab.locator('.agent-header .status')).toHaveText('idle');
    expect(await ticks(tab)).toEqual(upTo(200));
    await expect(link).toHaveAttribute('data-state', 'online');
    // And from the hub's copy, after a reload.
    await tab.reload();
    await expect(tab.locator('.agent-view h2')).toHaveText('remote');
    await expect(tab.locator('.message.assistant').last()).toContainText('tick-200 ');
    expect(await ticks(tab)).toEqual(upTo(200));

    // The node down: shown out of reach on the bar, the row and the
    // header; a message is refused and kept in the box.
    await node.stop();
    await expect(link).toHaveAttribute('data-state', 'offline');
    await expect(link.locator('.node-error')).not.toBeEmpty();
    await expect(agentRow(tab, 'remote')).toHaveClass(/unreachable/);
    await expect(agentRow(tab, 'remote').locator('.badge.node')).toHaveText(/^box (offline|connecting)$/);
    await expect(tab.locator('.agent-header .node-offline')).toContainText('box is out of reach');
    await prompt(tab, 'hello again');
    await expect(tab.getByLabel('Message to the agent')).toHaveValue('hello again');
    await expect(tab.locator('.message.user').last()).toContainText('stream: 200');

    // Back: the transcript whole, and the kept message goes through.
    await node.start();
    await expect(link).toHaveAttribute('data-state', 'online', { timeout: 45_000 });
    await expect(tab.locator('.agent-header .node-offline')).toHaveCount(0);
    await expect(agentRow(tab, 'remote')).not.toHaveClass(/unreachable/);
    expect(await ticks(tab)).toEqual(upTo(200));
    await tab.locator('.prompt button[type="submit"]').click();
    await expect(tab.locator('.message.assistant').last()).toContainText('You said: hello again');
    await expect(tab.locator('.tool').first()).toContainText('from-the-node');
  } finally {
    // Closed before the hub stops: a tab left open would go on trying to
    // reconnect, and the next test would hear its failures.
    await context?.close();
    await stopDaemon(hub);
    await node.dispose();
  }
});

test('a workspace made on a node from the form: grouped under the node\'s repository, its panel the node\'s', async ({ browser }) => {
  test.setTimeout(90_000);
  const node = new Restartable();
  await node.start();
  const hub = await hubOf(node);
  let context: BrowserContext | undefined;
  try {
    let tab: Page;
    [context, tab] = await enrolled(browser, hub);
    await expect(nodeOf(tab)).toHaveAttribute('data-state', 'online');
    // A repository on the node (this machine here, under the node's daemon).
    const repo = repository();
    await tab.locator('details.create-panel summary').click();
    await tab.getByLabel('Working directory').fill(repo);
    await tab.getByLabel('Name', { exact: true }).fill('far-feature');
    await tab.getByLabel('Machine').selectOption('box');
    await tab.getByLabel(/In a new workspace/).check();
    await tab.getByLabel('Branch', { exact: true }).fill('far-x');
    await tab.getByRole('button', { name: 'Create agent' }).click();
    await expect(tab.locator('.agent-view h2')).toHaveText('far-feature');

    // Grouped under the node's repository, not a hub's of the same path.
    const heading = tab.locator('.agents > li.group.repository');
    await expect(heading).toHaveAttribute('data-node', 'box');
    await expect(heading.locator('.group-node')).toHaveText('box');
    await expect(tab.locator('.agents > li.group.workspace')).toContainText('⎇ far-x');
    await expect(agentRow(tab, 'far-feature').locator('.badge.node')).toHaveText('on box');
    // The worktree is the node's, made by its daemon.
    const listed = await unixCall(node.daemon, { id: 'w', type: 'workspace.list' });
    expect(listed.data.workspaces.map((workspace: any) => workspace.branch)).toEqual(['far-x']);
    expect(git(repo, 'worktree', 'list')).toContain(listed.data.workspaces[0].cwd);
    // Its panel, from the node's status.
    const panel = tab.locator('.workspace-panel');
    await expect(panel.locator('.branch')).toHaveText('⎇ far-x → main');
    await expect(panel.locator('.facts')).toContainText('0 ahead, 0 behind');
  } finally {
    await context?.close();
    await stopDaemon(hub);
    await node.dispose();
  }
});
