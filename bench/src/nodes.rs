//! A node's agent read through the hub (docs/NODES.md) against an agent
//! on the hub itself, in the same run: a hub daemon linked to a node
//! daemon by `shard bridge` as the node's command, both real binaries on
//! this machine. Each round is one `burst: N` turn of the hub's own agent,
//! then one of the node's, each read by a unix-socket client of the hub
//! from the prompt to the turn's last delta; what is compared is deltas a
//! second. A node's deltas go one more pipe, through one more process,
//! and are written to the hub's copy of the session before they are told.
//! The CPU each part of the run spends (each daemon, the bridge, the
//! agents, this reader) is read from `/proc` around each turn.
//!
//! Then the same turns are read at once on the node and through the hub;
//! then the link is dropped (the bridge killed) a few times with the agent
//! idle, each after the link held for 5.5 s: how long until the hub has
//! the link back (`node_changed` online), and until the node's agent
//! answers a prompt sent then.
//!
//! Last, the rounds again with a new hub and node as two machines of one
//! core each (each daemon started pinned to its core, so that it sizes
//! itself for one): the target (the node's agent at 0.8× the hub's own or
//! better) is about a node on another machine, and on one machine's cores
//! shared a node's turn pays for two daemons where the hub's own pays for
//! one.

use std::path::Path;
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
/// deltas a second from the prompt to the last, whether all came in
/// order, and the milliseconds from the prompt to the first.
async fn turn(reader: &mut Conn, agent: &str, deltas: u64) -> Result<(f64, bool, f64)> {
    let prompt =
        json!({"type": "prompt", "agent_id": agent, "message": format!("burst: {deltas}")});
    let started = Instant::now();
    reader.send(&prompt).await?;
    let seen =
        tokio::time::timeout(ROUND, read_burst(reader)).await.context("a turn took too long")??;
    let took = started.elapsed();
    reader.until(|message| message["type"] == "turn_end").await?;
    let first = seen.first.map_or(f64::NAN, |first| ms(first - started));
    Ok((deltas as f64 / took.as_secs_f64(), seen.deltas == deltas && seen.in_order, first))
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

/// CPU time used so far by each part of the run, in nanoseconds, by
/// [`Part`].
type Spent = [u64; 5];

/// The parts of a run whose CPU time is told apart.
#[derive(Clone, Copy)]
enum Part {
    /// The hub's daemon.
    Hub,
    /// The node's daemon.
    Node,
    /// The hub's link command, `shard bridge`.
    Bridge,
    /// This bench: the clients reading the turns.
    Bench,
    /// The agents and their sandboxes, on both daemons.
    Agents,
}

impl std::ops::Index<Part> for Spent {
    type Output = u64;
    fn index(&self, part: Part) -> &u64 {
        &self[part as usize]
    }
}

fn cpu(hub: &Shard, node: &Shard) -> Spent {
    let daemons = [hub.pid(), node.pid()].map(Option::unwrap_or_default);
    let mut spent = [0; 5];
    spent[Part::Hub as usize] = crate::procfs::cpu_ns(daemons[0]);
    spent[Part::Node as usize] = crate::procfs::cpu_ns(daemons[1]);
    spent[Part::Bench as usize] = crate::procfs::cpu_ns(std::process::id());
    for pid in daemons.iter().flat_map(|pid| crate::procfs::descendants(*pid)) {
        let bridge = crate::procfs::cmdline(pid).iter().any(|arg| arg == "bridge");
        let part = if bridge { Part::Bridge } else { Part::Agents };
        spent[part as usize] += crate::procfs::cpu_ns(pid);
    }
    spent
}

/// `after - before`, added to `spent`.
fn add_spent(spent: &mut Spent, before: Spent, after: Spent) {
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

/// Medians of a series of rounds, and the CPU each side spent.
struct Compared {
    hub_rate: f64,
    node_rate: f64,
    /// Milliseconds from the prompt to the first delta, median.
    hub_first: f64,
    node_first: f64,
    own: Spent,
    linked: Spent,
    deltas: u64,
}

impl Compared {
    /// What `part` spent in the turns of one side, in microseconds a
    /// delta; `None` for the whole.
    fn per_delta(&self, spent: Spent, part: Option<Part>, rounds: usize) -> f64 {
        let ns = part.map_or_else(|| spent.iter().sum(), |part| spent[part]);
        ns as f64 / 1000.0 / (rounds as f64 * self.deltas as f64)
    }

    /// The CPU each side's turns took, in parts.
    fn told(&self, rounds: usize) -> String {
        let at = |spent, part| self.per_delta(spent, part, rounds);
        let (own, linked) = (self.own, self.linked);
        format!(
            "the hub's own agent's turns {:.2} µs (its daemon {:.2}, the agent {:.2}, the reader {:.2}), the node's agent's {:.2} µs (the hub's daemon {:.2}, the bridge {:.2}, the node's daemon {:.2}, the agent {:.2}, the reader {:.2}): {}",
            at(own, None),
            at(own, Some(Part::Hub)),
            at(own, Some(Part::Agents)),
            at(own, Some(Part::Bench)),
            at(linked, None),
            at(linked, Some(Part::Hub)),
            at(linked, Some(Part::Bridge)),
            at(linked, Some(Part::Node)),
            at(linked, Some(Part::Agents)),
            at(linked, Some(Part::Bench)),
            ratio(at(linked, None), at(own, None)),
        )
    }
}

/// Gives this bench back the cores it started with, when dropped.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(error) = pin(std::process::id(), &self.0) {
            eprintln!("  cannot give the bench its cores back: {error:#}");
        }
    }
}

/// The cores this bench may run on: the first two, and all of them as
/// `taskset` writes them; `None` with fewer than two.
fn two_cores() -> Result<Option<(usize, usize, String)>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let allowed = status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .context("no Cpus_allowed_list")?
        .trim()
        .to_owned();
    let cores = cores(&allowed);
    let [first, second, ..] = cores[..] else { return Ok(None) };
    Ok(Some((first, second, allowed)))
}

/// The cores a list such as `0-3,6` names.
fn cores(list: &str) -> Vec<usize> {
    let range = |part: &str| -> Vec<usize> {
        match part.split_once('-') {
            Some((from, to)) => match (from.parse(), to.parse()) {
                (Ok(from), Ok(to)) => (from..=to).collect(),
                _ => Vec::new(),
            },
            None => part.parse().into_iter().collect(),
        }
    };
    list.split(',').flat_map(range).collect()
}

/// Every thread of `pid` to `cores` (`taskset`, util-linux): the threads
/// and processes it starts from then on inherit them.
fn pin(pid: u32, cores: &str) -> Result<()> {
    let status = std::process::Command::new("taskset")
        .args(["--all-tasks", "--pid", "--cpu-list", cores, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset")?;
    // A process that ended meanwhile has nothing left to pin.
    let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists();
    if !status.success() && !gone {
        bail!("taskset could not pin process {pid} to cores {cores}");
    }
    Ok(())
}

/// A node's daemon, a hub's daemon whose `config.toml` reaches it with
/// `shard bridge`, an agent on each (the node's made from the hub), and a
/// reader of each attached on the hub.
struct Linked {
    node: Shard,
    hub: Shard,
    control: Conn,
    local: String,
    remote: String,
    on_hub: Conn,
    on_node: Conn,
}

impl Linked {
    /// `cores`: the core of the hub's machine and of the node's, each
    /// daemon started on its own so that it sizes itself for one (its
    /// agents and the hub's bridge inherit it; this bench, a client of
    /// the hub, stays on the hub's); `None`: every core for all.
    async fn start(shard: &Path, cores: Option<(usize, usize)>) -> Result<Self> {
        if let Some((_, node)) = cores {
            pin(std::process::id(), &node.to_string())?;
        }
        let node = Shard::start(shard, None, None).await?;
        if let Some((hub, _)) = cores {
            pin(std::process::id(), &hub.to_string())?;
        }
        let command = [
            shard.display().to_string(),
            "bridge".into(),
            "--home".into(),
            node.home().display().to_string(),
        ];
        let quoted: Vec<String> = command.iter().map(|arg| format!("{arg:?}")).collect();
        let config = format!("[[nodes]]\nid = \"box\"\ncommand = [{}]\n", quoted.join(", "));
        let hub = Shard::start(shard, None, Some(config.as_str())).await?;

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
        Ok(Self { node, hub, control, local, remote, on_hub, on_node })
    }

    /// `rounds` rounds of one turn of each agent, the hub's first.
    async fn compare(
        &mut self,
        rounds: usize,
        deltas: u64,
        broken: &mut Vec<String>,
    ) -> Result<Compared> {
        let (mut by_hub, mut by_node) = (Vec::new(), Vec::new());
        let (mut hub_first, mut node_first) = (Vec::new(), Vec::new());
        let (mut own, mut linked) = ([0; 5], [0; 5]);
        for round in 0..rounds {
            let before = cpu(&self.hub, &self.node);
            let (rate, whole, first) = turn(&mut self.on_hub, &self.local, deltas).await?;
            hub_first.push(first);
            let between = cpu(&self.hub, &self.node);
            by_hub.push(rate);
            let (remote_rate, remote_whole, first) =
                turn(&mut self.on_node, &self.remote, deltas).await?;
            node_first.push(first);
            by_node.push(remote_rate);
            add_spent(&mut own, before, between);
            add_spent(&mut linked, between, cpu(&self.hub, &self.node));
            if !whole || !remote_whole {
                broken.push(format!(
                    "nodes: round {round}: in order on the hub {whole}, through the node {remote_whole}"
                ));
            }
        }
        Ok(Compared {
            hub_rate: median(&mut by_hub),
            node_rate: median(&mut by_node),
            hub_first: median(&mut hub_first),
            node_first: median(&mut node_first),
            own,
            linked,
            deltas,
        })
    }

    async fn stop(self) -> Result<()> {
        self.hub.stop().await?;
        self.node.stop().await
    }
}

pub async fn run(args: &Args) -> Result<Vec<String>> {
    let (rounds, deltas, drops) = sizes(args.short);
    println!("\nNodes: a node's agent through the hub against the hub's own");
    let mut linked = Linked::start(&args.shard, None).await?;
    let mut broken = Vec::new();
    let compared = linked.compare(rounds, deltas, &mut broken).await?;
    let (hub_rate, node_rate) = (compared.hub_rate, compared.node_rate);
    println!(
        "  {rounds} turns of {deltas} deltas each, median: the hub's own agent {hub_rate:.0} deltas/s, a node's agent through its link {node_rate:.0} deltas/s: {}",
        ratio(node_rate, hub_rate)
    );
    println!("  CPU per delta, every process of the run: {}", compared.told(rounds));
    println!(
        "  the first delta, median: {:.1} ms after the prompt on the hub's own agent, {:.1} ms on the node's",
        compared.hub_first, compared.node_first
    );
    println!(
        "  (here both daemons, both agents and the bridge share this machine's cores: a node's turn costs its own daemon's work as well as the hub's)"
    );

    // The same turn of the node's agent read at once on the node itself
    // and through the hub, as the editor scenario reads one turn twice:
    // what the link adds, under the same load for both readers.
    let Linked { node, hub, control, remote, on_node, .. } = &mut linked;
    let plain = remote.strip_suffix("@box").context("a node's id")?;
    let mut at_node = node.unix().await?;
    attach(&mut at_node, plain, "observer").await?;
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let prompt =
            json!({"type": "prompt", "agent_id": remote, "message": format!("burst: {deltas}")});
        let started = Instant::now();
        on_node.send(&prompt).await?;
        let (near, far) = tokio::time::timeout(ROUND, async {
            tokio::join!(async { (read_burst(&mut at_node).await, started.elapsed()) }, async {
                (read_burst(on_node).await, started.elapsed())
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
        through.push(deltas as f64 / far_took.as_secs_f64());
        on_node.until(|message| message["type"] == "turn_end").await?;
    }
    let (direct, through) = (median(&mut direct), median(&mut through));
    println!(
        "  the same {rounds} turns of the node's agent read at once on the node and through the hub, median: {direct:.0} and {through:.0} deltas/s: {}",
        ratio(through, direct)
    );
    drop(at_node);

    let (mut back, mut answered) = (Vec::new(), Vec::new());
    for _ in 0..drops {
        // A link that held starts its backoff over; one dropped at once
        // again is tried ever more slowly (docs/NODES.md).
        tokio::time::sleep(HELD).await;
        let dropped = Instant::now();
        drop_link(hub)?;
        told(control, "offline").await?;
        told(control, "online").await?;
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
    linked.stop().await?;

    // Two machines of one core each, as a hub and its node would be: the
    // hub's daemon, its agents, its bridge (in for the ssh client) and
    // this bench on one core; the node's daemon and its agents on the
    // other. The hub's own agent has the hub's machine to itself.
    let Some((first, second, allowed)) = two_cores()? else {
        println!("  (fewer than two cores here: no run as two machines)");
        return Ok(broken);
    };
    // Pinning this bench to the cores it has changes nothing, and says
    // whether it may pin at all.
    if let Err(error) = pin(std::process::id(), &allowed) {
        println!("  (no run as two machines: {error:#})");
        return Ok(broken);
    }
    let restore = Restore(allowed);
    let mut machines = Linked::start(&args.shard, Some((first, second))).await?;
    let compared = machines.compare(rounds, deltas, &mut broken).await?;
    machines.stop().await?;
    drop(restore);
    let (hub_rate, node_rate) = (compared.hub_rate, compared.node_rate);
    println!(
        "  as two machines of one core each, {rounds} turns each, median: the hub's own agent {hub_rate:.0} deltas/s, a node's agent through its link {node_rate:.0} deltas/s: {} (target: at least 0.8×)",
        ratio(node_rate, hub_rate)
    );
    if node_rate < 0.8 * hub_rate {
        println!("  below target");
    }
    println!("  CPU per delta as two machines: {}", compared.told(rounds));
    println!(
        "  the first delta, median: {:.1} ms after the prompt on the hub's own agent, {:.1} ms on the node's",
        compared.hub_first, compared.node_first
    );
    Ok(broken)
}
