//! S1 fan-out (and S7 wire, from the same turns): one agent streams a
//! `burst:` turn to N attached clients; every client must get every delta
//! in order. Deliveries per second = N × deltas / the time from the first
//! delta any client read to the last client's complete message: the rate
//! of the stream itself. The time from the prompt to that first delta (the
//! turn's start, through the daemon or the relay) is reported beside it.
//!
//! The agent is Shard's own (S1) or the scripted ACP agent ([`crate::acp`],
//! the ACP scenario): the daemon runs it as a configured runtime and turns
//! its chunks into the same `message_delta`s, the relay passes its ACP
//! lines on unchanged and the controller speaks ACP through it.
//!
//! [`run`] measures each point (the median of a few runs each way) and
//! prints the scenario's tables: throughput, CPU per delivery, and the
//! bytes per delta (S7).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::Args;
use crate::conn::{Conn, Seen, next_loopback, read_acp_burst, read_burst};
use crate::procfs;
use crate::relay::{Relay, leave, leave_acp};
use crate::report::{ms, per_second, ratio};
use crate::shard::{Shard, attach};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    WebSocket,
    Unix,
}

/// Whose agent streams the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Shard's own (`shard agent`, its demo model).
    Shard,
    /// The scripted ACP agent, the runtime [`crate::acp::RUNTIME`].
    Acp,
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub clients: usize,
    pub deltas: u64,
    /// From the first delta read to the last client's last.
    pub elapsed: Duration,
    /// From the prompt to the first delta read.
    pub to_first: Duration,
    /// Every client got every delta, in order.
    pub complete: bool,
    /// Clients that got less (closed by the server as too slow, or worse).
    pub short: usize,
    /// Bytes per delta message as one client received it.
    pub bytes_per_delta: f64,
    /// CPU time spent over the turn.
    pub cpu: Cpu,
}

/// CPU time over one turn, by process, in nanoseconds. With client, daemon
/// and agent on the same cores, throughput follows the total.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// The daemon (none for the relay, which runs inside the benchmark).
    pub server: u64,
    pub agent: u64,
    /// The benchmark process: the clients, and for the baseline the relay.
    pub clients: u64,
}

impl Cpu {
    fn sample(server: Option<u32>, agents: &[u32]) -> Cpu {
        Cpu {
            server: server.map_or(0, procfs::cpu_ns),
            agent: agents.iter().copied().map(procfs::cpu_ns).sum(),
            clients: procfs::cpu_ns(std::process::id()),
        }
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            server: self.server.saturating_sub(before.server),
            agent: self.agent.saturating_sub(before.agent),
            clients: self.clients.saturating_sub(before.clients),
        }
    }

    pub fn total(&self) -> u64 {
        self.server + self.agent + self.clients
    }
}

impl Outcome {
    pub fn deliveries_per_second(&self) -> f64 {
        (self.clients as f64 * self.deltas as f64) / self.elapsed.as_secs_f64()
    }
}

/// Each reader's turn, read as Shard sends it or, with `acp`, as the
/// relay passes on an ACP agent's lines.
async fn collect(readers: Vec<Conn>, start: Instant, acp: bool) -> Result<(Vec<Seen>, Instant)> {
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|mut conn| {
            tokio::spawn(async move {
                let seen =
                    if acp { read_acp_burst(&mut conn).await } else { read_burst(&mut conn).await };
                (seen, Instant::now())
            })
        })
        .collect();
    let mut seen = Vec::with_capacity(tasks.len());
    let mut last = start;
    for task in tasks {
        let (outcome, at) = task.await?;
        // A client the server closed (too slow to keep up) got less than all.
        seen.push(outcome.unwrap_or_default());
        last = last.max(at);
    }
    Ok((seen, last))
}

fn outcome(clients: usize, deltas: u64, seen: &[Seen], start: Instant, last: Instant) -> Outcome {
    let first_delta = seen.iter().filter_map(|seen| seen.first).min().unwrap_or(start);
    let elapsed = last.saturating_duration_since(first_delta);
    let to_first = first_delta.saturating_duration_since(start);
    let short = seen.iter().filter(|seen| seen.deltas != deltas || !seen.in_order).count();
    let complete = short == 0;
    let first = seen.first().copied().unwrap_or_default();
    let bytes_per_delta = first.delta_bytes as f64 / first.deltas.max(1) as f64;
    Outcome {
        clients,
        deltas,
        elapsed,
        to_first,
        complete,
        short,
        bytes_per_delta,
        cpu: Cpu::default(),
    }
}

/// The turn of `agent` through Shard, to `clients` observers over
/// `transport`.
pub async fn shard(
    shard: &Shard,
    agent: Agent,
    clients: usize,
    deltas: u64,
    transport: Transport,
) -> Result<Outcome> {
    let mut control = shard.unix().await?;
    let runtime = match agent {
        Agent::Shard => None,
        Agent::Acp => Some(crate::acp::RUNTIME),
    };
    let agent = shard.create_agent_on(&mut control, runtime).await?;
    attach(&mut control, &agent, "interactive").await?;
    let mut readers = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut conn = match transport {
            Transport::WebSocket => shard.websocket(next_loopback()).await?,
            Transport::Unix => shard.unix().await?,
        };
        attach(&mut conn, &agent, "observer").await.context("attaching a reader")?;
        readers.push(conn);
    }
    let daemon = shard.pid();
    // An ACP agent runs under `shard guard`: both count as the agent.
    let agents = daemon.map(procfs::descendants).unwrap_or_default();
    let before = Cpu::sample(daemon, &agents);
    let start = Instant::now();
    let running = tokio::spawn(collect(readers, start, false));
    let prompt =
        json!({"type": "prompt", "agent_id": agent, "message": format!("burst: {deltas}")});
    control.call(prompt, "prompt").await.context("prompting")?;
    // The controller leaves once the turn runs: only the readers read.
    let detach = json!({"type": "agent.detach", "agent_id": agent});
    control.call(detach, "detach").await.context("detaching the controller")?;
    let (seen, last) = running.await??;
    let cpu = Cpu::sample(daemon, &agents).since(before);
    let _ =
        control.call(json!({"type": "agent.kill", "agent_id": agent, "force": true}), "kill").await;
    Ok(Outcome { cpu, ..outcome(clients, deltas, &seen, start, last) })
}

/// The same turn of `agent` through the bare relay (`bin agent --stdio`
/// children for Shard's own), to `clients` WebSocket clients.
pub async fn relay(
    bin: &std::path::Path,
    agent: Agent,
    clients: usize,
    deltas: u64,
) -> Result<Outcome> {
    let relay = match agent {
        Agent::Shard => Relay::start(bin, 1).await?,
        Agent::Acp => Relay::start_acp().await?,
    };
    let mut control = relay.client(None).await?;
    if agent == Agent::Acp {
        // What the daemon does for its ACP agent, the controller does here,
        // before any reader is there to see it.
        acp_call(&mut control, 1, "initialize", json!({"protocolVersion": 1})).await?;
        let new = json!({"cwd": "/tmp", "mcpServers": []});
        acp_call(&mut control, 2, "session/new", new).await?;
    }
    let mut readers = Vec::with_capacity(clients);
    for _ in 0..clients {
        readers.push(relay.client(None).await?);
    }
    relay.wait_for(clients + 1).await?;
    let agents = relay.agent_pids();
    let before = Cpu::sample(None, &agents);
    let start = Instant::now();
    let running = tokio::spawn(collect(readers, start, agent == Agent::Acp));
    let message = format!("burst: {deltas}");
    match agent {
        Agent::Shard => {
            control.send(&json!({"type": "prompt", "id": "p", "message": message})).await?;
            // As through Shard, the controller leaves: only the readers read.
            leave(control, 1).await?;
        }
        Agent::Acp => {
            let prompt = json!({
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {
                    "sessionId": crate::acp::SESSION,
                    "prompt": [{"type": "text", "text": message}],
                },
            });
            control.send(&prompt).await?;
            leave_acp(control).await?;
        }
    }
    let (seen, last) = running.await??;
    let cpu = Cpu::sample(None, &agents).since(before);
    relay.stop().await;
    Ok(Outcome { cpu, ..outcome(clients, deltas, &seen, start, last) })
}

/// An ACP request through the relay, and its answer (a success).
async fn acp_call(
    control: &mut Conn,
    id: u64,
    method: &str,
    params: serde_json::Value,
) -> Result<()> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    control.send(&request).await?;
    let answer = control.until(|message| message["id"] == id).await?;
    if answer.get("result").is_none() {
        anyhow::bail!("the ACP agent refused {method}: {answer}");
    }
    Ok(())
}

/// Of several runs of one point, the median by throughput; complete only if
/// every run was, and short by the worst run's count.
pub fn median(mut runs: Vec<Outcome>) -> Option<Outcome> {
    let complete = runs.iter().all(|run| run.complete);
    let short = runs.iter().map(|run| run.short).max().unwrap_or(0);
    runs.sort_by(|a, b| a.deliveries_per_second().total_cmp(&b.deliveries_per_second()));
    let middle = runs.get(runs.len() / 2).copied()?;
    Some(Outcome { complete, short, ..middle })
}

/// S1 and S7 with Shard's own agent; the ACP scenario, S1's with the
/// scripted ACP agent. Returns what broke (a client that missed events).
pub async fn run(args: &Args, agent: Agent) -> Result<Vec<String>> {
    let plan = Plan::of(args, agent)?;
    let daemon =
        Shard::start(&args.shard, 2 * plan.max_clients() + 64, plan.config.as_deref()).await?;
    print_header(agent, plan.runs);
    let mut broken = Vec::new();
    let mut points = Vec::with_capacity(plan.counts.len());
    for &clients in plan.counts {
        let deltas = plan.deltas(clients);
        let point = Point::measure(&daemon, &args.shard, agent, clients, deltas, plan.runs).await?;
        if !point.complete() {
            broken.push(format!("{} at {clients} clients: a client missed deltas", plan.name));
        }
        point.print_row();
        points.push(point);
    }
    print_cpu(plan.name, &points);
    print_wire(agent, &points);
    daemon.stop().await?;
    Ok(broken)
}

/// What one fan-out scenario measures: at which client counts, how long a
/// turn at each, and how many runs make a point.
struct Plan<'a> {
    /// The scenario's name in the tables and the breakage: S1 or ACP.
    name: &'static str,
    counts: &'a [usize],
    runs: usize,
    short: bool,
    /// The daemon's configuration: the ACP agent's runtime, for ACP.
    config: Option<String>,
}

impl<'a> Plan<'a> {
    fn of(args: &'a Args, agent: Agent) -> Result<Plan<'a>> {
        let mut counts: &[usize] = match (agent, args.short) {
            (Agent::Shard, true) => &[1, 10, 50],
            (Agent::Acp, true) => &[1, 10],
            (_, false) => &[1, 10, 100, 1_000],
        };
        let runs = if args.short { 3 } else { 5 };
        if !args.clients.is_empty() {
            counts = &args.clients;
        }
        let (name, config) = match agent {
            Agent::Shard => ("S1", None),
            Agent::Acp => {
                let exe = std::env::current_exe().context("the benchmark's own path")?;
                ("ACP", Some(crate::acp::config(&exe)))
            }
        };
        Ok(Plan { name, counts, runs, short: args.short, config })
    }

    fn max_clients(&self) -> usize {
        self.counts.iter().copied().max().unwrap_or(1)
    }

    /// Long enough turns that a run measures the stream, not the scheduler:
    /// 50,000 deltas to one client. With more clients the turn is shorter
    /// than the 4 MiB a connection may have queued (a delta is about 150
    /// bytes on the wire): the benchmark's own readers share the cores with
    /// the daemon and fall behind an unpaced burst, and one that fell 4 MiB
    /// behind would rightly be dropped as too slow (P2). That happened at 10
    /// clients over the unix socket with 50,000.
    fn deltas(&self, clients: usize) -> u64 {
        match (self.short, clients) {
            (true, _) => 2_000,
            (false, 1) => 50_000,
            (false, ..100) => 20_000,
            (false, _) => 10_000,
        }
    }
}

fn print_header(agent: Agent, runs: usize) {
    println!();
    match agent {
        Agent::Shard => println!(
            "S1 fan-out: one agent's `burst: D` turn to N clients (deliveries/s from the first delta to the last, the median of {runs}; every client must get every delta; then the prompt to the first delta)"
        ),
        Agent::Acp => println!(
            "ACP fan-out: S1 with an ACP agent (`shard-bench {}`, the runtime `{}`) streaming `burst: D` as fast as it can; the relay runs the same agent, its clients read its ACP lines (deliveries/s from the first delta to the last, the median of {runs}; every client must get every delta; then the prompt to the first delta)",
            crate::acp::FLAG,
            crate::acp::RUNTIME
        ),
    }
    println!(
        "{:>6} | {:>6} | {:>12} | {:>12} | {:>12} | {:>6} | {:>18} | all delivered",
        "N", "D", "shard ws", "relay ws", "shard unix", "ratio", "first: shard/relay"
    );
}

/// One point of the table: the median run each way at one client count.
struct Point {
    clients: usize,
    deltas: u64,
    over_ws: Outcome,
    /// None beyond the daemon's cap on local connections.
    over_unix: Option<Outcome>,
    baseline: Outcome,
}

impl Point {
    async fn measure(
        daemon: &Shard,
        bin: &std::path::Path,
        agent: Agent,
        clients: usize,
        deltas: u64,
        runs: usize,
    ) -> Result<Point> {
        // Each point is the median of three turns: one turn is noisy.
        let (mut ws_runs, mut unix_runs, mut relay_runs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let over = |transport| shard(daemon, agent, clients, deltas, transport);
            ws_runs.push(over(Transport::WebSocket).await?);
            // The daemon takes at most 64 local connections (one is the
            // controller's): beyond that the unix column stays empty.
            if clients < 64 {
                unix_runs.push(over(Transport::Unix).await?);
            }
            relay_runs.push(relay(bin, agent, clients, deltas).await?);
        }
        Ok(Point {
            clients,
            deltas,
            over_ws: median(ws_runs).context("runs")?,
            over_unix: median(unix_runs),
            baseline: median(relay_runs).context("runs")?,
        })
    }

    /// Every client got every delta, every way.
    fn complete(&self) -> bool {
        let unix_complete = self.over_unix.is_none_or(|outcome| outcome.complete);
        self.over_ws.complete && unix_complete && self.baseline.complete
    }

    fn print_row(&self) {
        let Point { clients, deltas, over_ws, over_unix, baseline } = self;
        println!(
            "{clients:>6} | {deltas:>6} | {:>12} | {:>12} | {:>12} | {:>6} | {:>18} | {}",
            per_second(over_ws.deliveries_per_second()),
            per_second(baseline.deliveries_per_second()),
            over_unix.map_or("-".to_owned(), |outcome| per_second(outcome.deliveries_per_second())),
            ratio(over_ws.deliveries_per_second(), baseline.deliveries_per_second()),
            format!("{:.1} / {:.1} ms", ms(over_ws.to_first), ms(baseline.to_first)),
            if self.complete() {
                "yes".to_owned()
            } else {
                let unix = over_unix.map_or(0, |outcome| outcome.short);
                format!("NO: {} / {} / {unix} short", over_ws.short, baseline.short)
            },
        );
    }
}

/// CPU per delivery at each point, by process, Shard's against the relay's.
fn print_cpu(name: &str, points: &[Point]) {
    println!();
    println!(
        "{name} CPU per delivery (ns, of the median runs): the clients share the cores with the daemon and the agent, so throughput follows the total"
    );
    println!(
        "{:>6} | {:>8} | {:>8} | {:>8} | {:>8} || {:>8} | {:>14} | {:>8} | {:>6}",
        "N", "daemon", "agent", "clients", "total", "agent", "relay+clients", "total", "ratio"
    );
    for Point { clients, over_ws: shard, baseline: relay, .. } in points {
        let per = |ns: u64, outcome: &Outcome| {
            ns as f64 / (outcome.clients as f64 * outcome.deltas as f64)
        };
        println!(
            "{clients:>6} | {:>8.0} | {:>8.0} | {:>8.0} | {:>8.0} || {:>8.0} | {:>14.0} | {:>8.0} | {:>6}",
            per(shard.cpu.server, shard),
            per(shard.cpu.agent, shard),
            per(shard.cpu.clients, shard),
            per(shard.cpu.total(), shard),
            per(relay.cpu.agent, relay),
            per(relay.cpu.clients, relay),
            per(relay.cpu.total(), relay),
            ratio(per(relay.cpu.total(), relay), per(shard.cpu.total(), shard)),
        );
    }
}

/// S7 (or ACP's own): bytes per delta as a client reads it, at the first
/// point measured over both transports.
fn print_wire(agent: Agent, points: &[Point]) {
    let Some((point, over_unix)) = points.iter().find_map(|point| Some((point, point.over_unix?)))
    else {
        return;
    };
    let (over_ws, baseline) = (&point.over_ws, &point.baseline);
    println!();
    println!(
        "{} wire: bytes per delta as a client reads it, against the agent's own line",
        if agent == Agent::Shard { "S7" } else { "ACP" }
    );
    println!("  agent line (what the relay sends): {:.1} B", baseline.bytes_per_delta);
    println!(
        "  shard over WebSocket: {:.1} B ({})",
        over_ws.bytes_per_delta,
        ratio(over_ws.bytes_per_delta, baseline.bytes_per_delta)
    );
    println!(
        "  shard over unix:      {:.1} B ({})",
        over_unix.bytes_per_delta,
        ratio(over_unix.bytes_per_delta, baseline.bytes_per_delta)
    );
}
