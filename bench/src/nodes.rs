//! A node's agent read through the hub (docs/NODES.md) against an agent
//! on the hub itself, in the same run: a hub daemon linked to a node
//! daemon by `shard bridge` as the node's command, both real binaries on
//! this machine. Each round is one `burst: N` turn of the hub's own agent,
//! then one of the node's, each read by a unix-socket client of the hub
//! from the prompt to the turn's last delta; what is compared is deltas a
//! second (target: the node's at 0.8× the hub's or better). A node's
//! deltas go one more pipe, through one more process, and are written to
//! the hub's copy of the session before they are told.
//!
//! Then the link is dropped (the bridge killed) a few times with the agent
//! idle, each after the link held for 5.5 s: how long until the hub has the link back (`node_changed`
//! online), and until the node's agent answers a prompt sent then.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::Args;
use crate::conn::{Conn, read_burst};
use crate::report::{median, ms, ratio};
use crate::shard::{Shard, attach, scratch};

/// Rounds, deltas per round, and drops.
fn sizes(short: bool) -> (usize, u64, usize) {
    if short { (3, 2_000, 2) } else { (10, 20_000, 5) }
}

/// How long the link holds before each drop: longer than what a link
/// must hold for its backoff to start over.
const HELD: Duration = Duration::from_millis(5_500);

/// The longest one round, or one resumption, may take.
const ROUND: Duration = Duration::from_secs(120);

/// One `burst: deltas` turn of `agent`, read by `reader` (attached to it):
/// deltas a second from the prompt to the last, and whether all came in
/// order.
async fn turn(reader: &mut Conn, agent: &str, deltas: u64) -> Result<(f64, bool)> {
    let prompt =
        json!({"type": "prompt", "agent_id": agent, "message": format!("burst: {deltas}")});
    let started = Instant::now();
    reader.send(&prompt).await?;
    let seen =
        tokio::time::timeout(ROUND, read_burst(reader)).await.context("a turn took too long")??;
    let took = started.elapsed();
    reader.until(|message| message["type"] == "turn_end").await?;
    Ok((deltas as f64 / took.as_secs_f64(), seen.deltas == deltas && seen.in_order))
}

/// Kills the hub's bridge to the node: the link drops as a lost
/// connection would.
fn drop_link(hub: &Shard) -> Result<()> {
    let hub_pid = hub.pid().context("the hub's pid")?;
    let bridges: Vec<u32> = crate::procfs::descendants(hub_pid)
        .into_iter()
        .filter(|pid| crate::procfs::cmdline(*pid).iter().any(|arg| arg == "bridge"))
        .collect();
    if bridges.is_empty() {
        bail!("the hub runs no bridge to kill");
    }
    for pid in bridges {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL)?;
    }
    Ok(())
}

/// CPU time used so far by the hub's daemon, by the node's, and by the
/// rest of the run (their agents, the bridge, this bench), in
/// nanoseconds.
fn cpu(hub: &Shard, node: &Shard) -> [u64; 3] {
    let daemons = [hub.pid(), node.pid()].map(Option::unwrap_or_default);
    let others = daemons.iter().flat_map(|pid| crate::procfs::descendants(*pid));
    let rest = others.chain([std::process::id()]).map(crate::procfs::cpu_ns).sum();
    [crate::procfs::cpu_ns(daemons[0]), crate::procfs::cpu_ns(daemons[1]), rest]
}

/// `after - before`, added to `spent`.
fn add_spent(spent: &mut [u64; 3], before: [u64; 3], after: [u64; 3]) {
    for ((spent, before), after) in spent.iter_mut().zip(before).zip(after) {
        *spent += after.saturating_sub(before);
    }
}

/// Waits on `control` for the node's link to be told `state`.
async fn told(control: &mut Conn, state: &str) -> Result<()> {
    let changed = |message: &serde_json::Value| {
        message["type"] == "node_changed" && message["node"]["state"] == state
    };
    tokio::time::timeout(ROUND, control.until(changed))
        .await
        .with_context(|| format!("the link was never told {state}"))??;
    Ok(())
}

pub async fn run(args: &Args) -> Result<Vec<String>> {
    let (rounds, deltas, drops) = sizes(args.short);
    println!("\nNodes: a node's agent through the hub against the hub's own");
    let node = Shard::start(&args.shard, None, None).await?;
    let command = [
        args.shard.display().to_string(),
        "bridge".into(),
        "--home".into(),
        node.home().display().to_string(),
    ];
    let quoted: Vec<String> = command.iter().map(|arg| format!("{arg:?}")).collect();
    let config = format!("[[nodes]]\nid = \"box\"\ncommand = [{}]\n", quoted.join(", "));
    let hub = Shard::start(&args.shard, None, Some(config.as_str())).await?;

    let mut control = hub.unix().await?;
    let online = control.call(json!({"type": "node.list"}), "nodes").await?;
    if online["data"]["nodes"][0]["state"] != "online" {
        told(&mut control, "online").await?;
    }
    let local = hub.create_agent(&mut control).await?;
    let cwd = scratch("cwd")?;
    let create = json!({"type": "agent.create", "cwd": cwd, "name": "remote", "node": "box"});
    let created = control.call(create, "create").await?;
    let remote = created["data"]["agent_id"].as_str().context("the node's agent")?.to_owned();
    let mut on_hub = hub.unix().await?;
    attach(&mut on_hub, &local, "interactive").await?;
    let mut on_node = hub.unix().await?;
    attach(&mut on_node, &remote, "interactive").await?;

    let mut broken = Vec::new();
    let (mut by_hub, mut by_node) = (Vec::new(), Vec::new());
    let (mut spent_own, mut spent_linked) = ([0; 3], [0; 3]);
    for round in 0..rounds {
        let before = cpu(&hub, &node);
        let (rate, whole) = turn(&mut on_hub, &local, deltas).await?;
        let between = cpu(&hub, &node);
        by_hub.push(rate);
        let (remote_rate, remote_whole) = turn(&mut on_node, &remote, deltas).await?;
        by_node.push(remote_rate);
        add_spent(&mut spent_own, before, between);
        add_spent(&mut spent_linked, between, cpu(&hub, &node));
        if !whole || !remote_whole {
            broken.push(format!(
                "nodes: round {round}: in order on the hub {whole}, through the node {remote_whole}"
            ));
        }
    }
    let (hub_rate, node_rate) = (median(&mut by_hub), median(&mut by_node));
    println!(
        "  {rounds} turns of {deltas} deltas each, median: the hub's own agent {hub_rate:.0} deltas/s, a node's agent through its link {node_rate:.0} deltas/s: {} (target: at least 0.8×)",
        ratio(node_rate, hub_rate)
    );
    if node_rate < 0.8 * hub_rate {
        println!("  below target");
    }
    let per_delta = |ns: u64| ns as f64 / 1000.0 / (rounds as f64 * deltas as f64);
    let [own_hub, _, own_rest] = spent_own.map(per_delta);
    let [linked_hub, linked_node, linked_rest] = spent_linked.map(per_delta);
    let (own, linked) = (own_hub + own_rest, linked_hub + linked_node + linked_rest);
    println!(
        "  CPU per delta, every process of the run: the hub's own agent's turns {own:.2} µs (its daemon {own_hub:.2}), the node's agent's {linked:.2} µs (the hub's daemon {linked_hub:.2}, the node's {linked_node:.2}): {}",
        ratio(linked, own)
    );
    println!(
        "  (here both daemons, both agents and the bridge share this machine's cores: a node's turn costs its own daemon's work as well as the hub's)"
    );

    // The same turn of the node's agent read at once on the node itself
    // and through the hub, as the editor scenario reads one turn twice:
    // what the link adds, under the same load for both readers.
    let plain = remote.strip_suffix("@box").context("a node's id")?;
    let mut at_node = node.unix().await?;
    attach(&mut at_node, plain, "observer").await?;
    let (mut direct, mut linked) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let prompt =
            json!({"type": "prompt", "agent_id": remote, "message": format!("burst: {deltas}")});
        let started = Instant::now();
        on_node.send(&prompt).await?;
        let (near, far) = tokio::time::timeout(ROUND, async {
            tokio::join!(async { (read_burst(&mut at_node).await, started.elapsed()) }, async {
                (read_burst(&mut on_node).await, started.elapsed())
            },)
        })
        .await
        .context("a round took too long")?;
        let ((near, near_took), (far, far_took)) = ((near.0?, near.1), (far.0?, far.1));
        if near.deltas != deltas || far.deltas != deltas || !near.in_order || !far.in_order {
            broken.push(format!(
                "nodes: same-turn round {round}: the node's reader {near:?}, the hub's {far:?}"
            ));
        }
        direct.push(deltas as f64 / near_took.as_secs_f64());
        linked.push(deltas as f64 / far_took.as_secs_f64());
        on_node.until(|message| message["type"] == "turn_end").await?;
    }
    let (direct, linked) = (median(&mut direct), median(&mut linked));
    println!(
        "  the same {rounds} turns of the node's agent read at once on the node and through the hub, median: {direct:.0} and {linked:.0} deltas/s: {}",
        ratio(linked, direct)
    );
    drop(at_node);

    let (mut back, mut answered) = (Vec::new(), Vec::new());
    for _ in 0..drops {
        // A link that held starts its backoff over; one dropped at once
        // again is tried ever more slowly (docs/NODES.md).
        tokio::time::sleep(HELD).await;
        let dropped = Instant::now();
        drop_link(&hub)?;
        told(&mut control, "offline").await?;
        told(&mut control, "online").await?;
        back.push(ms(dropped.elapsed()));
        let prompt = json!({"type": "prompt", "agent_id": remote, "message": "hello"});
        on_node.send(&prompt).await?;
        let delta = |message: &serde_json::Value| message["type"] == "message_delta";
        tokio::time::timeout(ROUND, on_node.until(delta))
            .await
            .context("no answer after a drop")??;
        answered.push(ms(dropped.elapsed()));
        on_node.until(|message| message["type"] == "turn_end").await?;
    }
    let (back, answered) = (median(&mut back), median(&mut answered));
    println!(
        "  the link dropped {drops} times (the bridge killed), median: back online {back:.0} ms after the drop (the first retry waits 500 ms), the node's agent answering a prompt sent then {answered:.0} ms after it"
    );
    hub.stop().await?;
    node.stop().await?;
    Ok(broken)
}
