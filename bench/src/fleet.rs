//! The fleet: many idle agents under `[limits] max_awake_agents`. A daemon
//! runs the scripted ACP agent ([`crate::acp`]) as its runtime with a cap
//! of 10 awake; 100 agents are created over the unix socket, each prompted
//! once (`burst: 1`, one chunk) so that it has a session, and the governor
//! hibernates the least recently used down to the cap. Printed: how many
//! are awake against the cap (`agent.list`, `fleet.watch`), the daemon's
//! and the agents' memory (`fleet.watch` and `/proc`), their CPU over an
//! idle stretch, what one look of the daemon's sampling costs (the same
//! code, run here against the live processes), and the time from a
//! `prompt` to a hibernated agent's first `message_delta` (its process
//! started again, `initialize`, `session/load`, the turn). The same 100
//! agents in a daemon with no cap give what they cost all awake.
//!
//! Fails only when the fleet does not work: more agents awake than the cap
//! for longer than a few looks, an agent that stopped or failed, a wake-up
//! that never answers. No figure is asserted.

mod cost;
mod watch;

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::Args;
use crate::conn::Conn;
use crate::lifecycle::quantile;
use crate::report::ms;
use crate::shard::{Shard, attach};

use cost::{Cpu, Look, SAMPLE_EVERY};
use watch::{Fleet, Held, Poller, States, Watched};

/// How long more agents than the cap may be awake: a start goes ahead
/// while the agent hibernated to make room for it stops, and the next look
/// (every [`SAMPLE_EVERY`]) hibernates what admission missed.
const OVER_CAP_AT_MOST: Duration = Duration::from_secs(3 * SAMPLE_EVERY.as_secs());

struct Plan {
    agents: usize,
    cap: usize,
    wakes: usize,
    idle: Duration,
}

impl Plan {
    fn of(short: bool) -> Plan {
        match short {
            true => Plan { agents: 20, cap: 4, wakes: 10, idle: Duration::from_secs(4) },
            false => Plan { agents: 100, cap: 10, wakes: 50, idle: Duration::from_secs(20) },
        }
    }
}

/// One daemon's fleet, at rest after every agent had its turn.
struct Side {
    fill: Duration,
    filling: Watched,
    settled: Option<Duration>,
    states: States,
    fleet: Fleet,
    daemon: Held,
    below: Held,
    processes: usize,
    idle: Cpu,
    look: Look,
}

/// Prompts to hibernated agents, and to the same agents awake right after.
#[derive(Default)]
struct Wakes {
    hibernated: Vec<Duration>,
    awake: Vec<Duration>,
    watched: Watched,
    after: States,
}

pub async fn run(args: &Args) -> Result<Vec<String>> {
    let plan = Plan::of(args.short);
    let exe = std::env::current_exe().context("the benchmark's own path")?;
    let runtime = crate::acp::config(&exe);
    let capped = format!("{runtime}\n[limits]\nmax_awake_agents = {}\n", plan.cap);
    let mut broken = Vec::new();

    let daemon = Shard::start(&args.shard, None, Some(&capped)).await?;
    let measured = capped_run(&daemon, &plan, &mut broken).await;
    daemon.stop().await?;
    let (capped, wakes) = measured?;

    let daemon = Shard::start(&args.shard, None, Some(&runtime)).await?;
    let measured = side(&daemon, &plan, None, &mut broken).await;
    daemon.stop().await?;
    let open = measured?.0;

    print(&plan, &capped, &open, &wakes);
    Ok(broken)
}

async fn capped_run(shard: &Shard, plan: &Plan, broken: &mut Vec<String>) -> Result<(Side, Wakes)> {
    let (side, ids, mut control) = side(shard, plan, Some(plan.cap), broken).await?;
    let wakes = wake(shard, &mut control, &ids, plan, broken).await?;
    Ok((side, wakes))
}

/// Creates and prompts the agents, lets the fleet settle, and measures it
/// at rest; the agents' ids, and the connection attached to every one.
async fn side(
    shard: &Shard,
    plan: &Plan,
    cap: Option<usize>,
    broken: &mut Vec<String>,
) -> Result<(Side, Vec<String>, Conn)> {
    let pid = shard.pid().context("daemon pid")?;
    let limit = cap.unwrap_or(usize::MAX);
    let mut control = shard.unix().await?;
    let poller = Poller::start(shard, limit).await?;
    let start = Instant::now();
    let mut ids = Vec::with_capacity(plan.agents);
    for index in 0..plan.agents {
        let id = shard.create_agent_on(&mut control, Some(crate::acp::RUNTIME)).await?;
        attach(&mut control, &id, "interactive").await?;
        turn(&mut control, &id, &format!("fill-{index}"))
            .await
            .with_context(|| format!("the first turn of {id}"))?;
        ids.push(id);
    }
    let fill = start.elapsed();
    let patience = 5 * SAMPLE_EVERY;
    let settled = watch::settle(&mut control, limit, patience).await?;
    if settled.is_none() {
        broken.push(format!("fleet: more than {limit} agents still awake {patience:?} on"));
    }
    let filling = poller.stop().await?;
    // Quiet: what the last turns and hibernations left behind is done.
    tokio::time::sleep(SAMPLE_EVERY).await;
    let before = Cpu::now(pid);
    tokio::time::sleep(plan.idle).await;
    let idle = Cpu::now(pid).since(before);
    let states = watch::states(&mut control).await?;
    let fleet = watch::fleet(&mut control).await?;
    let (daemon, below, processes) = cost::held(pid)?;
    let look = cost::look(pid, 100, Duration::from_secs(3)).await?;
    judge(&filling, &states, cap, "while the agents were created", broken);
    let side = Side { fill, filling, settled, states, fleet, daemon, below, processes, idle, look };
    Ok((side, ids, control))
}

/// Prompts `plan.wakes` hibernated agents one after the other (the oldest
/// first), each then once more while it is awake.
async fn wake(
    shard: &Shard,
    control: &mut Conn,
    ids: &[String],
    plan: &Plan,
    broken: &mut Vec<String>,
) -> Result<Wakes> {
    let poller = Poller::start(shard, plan.cap).await?;
    let mut wakes = Wakes::default();
    let mut next = ids.iter();
    while wakes.hibernated.len() < plan.wakes {
        let hibernated = watch::states(control).await?.hibernated;
        let Some(id) = next.find(|id| hibernated.contains(id)) else {
            broken
                .push(format!("fleet: only {} hibernated agents to wake", wakes.hibernated.len()));
            break;
        };
        let round = wakes.hibernated.len();
        let woken = turn(control, id, &format!("wake-{round}"))
            .await
            .with_context(|| format!("waking the hibernated {id}"))?;
        wakes.hibernated.push(woken);
        let again = turn(control, id, &format!("again-{round}"))
            .await
            .with_context(|| format!("prompting {id} again, awake"))?;
        wakes.awake.push(again);
    }
    if watch::settle(control, plan.cap, 5 * SAMPLE_EVERY).await?.is_none() {
        broken.push(format!("fleet: more than {} agents still awake after the wake-ups", plan.cap));
    }
    wakes.watched = poller.stop().await?;
    wakes.after = watch::states(control).await?;
    judge(&wakes.watched, &wakes.after, Some(plan.cap), "while agents were woken", broken);
    Ok(wakes)
}

/// What the poller and the last `agent.list` say of the fleet's rules.
fn judge(
    watched: &Watched,
    states: &States,
    cap: Option<usize>,
    when: &str,
    broken: &mut Vec<String>,
) {
    if cap.is_some() && watched.longest_over > OVER_CAP_AT_MOST {
        broken.push(format!(
            "fleet: more agents than the cap were awake for {:.1} s {when} (most: {})",
            watched.longest_over.as_secs_f64(),
            watched.most_awake
        ));
    }
    if let Some((id, state)) = states.other.first() {
        broken.push(format!(
            "fleet: {} agents neither awake nor hibernated, {id} {state}",
            states.other.len()
        ));
    }
}

/// One `burst: 1` turn of `agent` (attached on `conn`): the time from the
/// prompt to its first `message_delta`, once the turn has ended
/// (`turn_end`) and the agent is idle again.
async fn turn(conn: &mut Conn, agent: &str, id: &str) -> Result<Duration> {
    let prompt = json!({"type": "prompt", "id": id, "agent_id": agent, "message": "burst: 1"});
    let start = Instant::now();
    conn.send(&prompt).await?;
    let (mut first, mut complete, mut accepted) = (None, false, false);
    loop {
        let text = conn.recv().await?;
        let message: Value = serde_json::from_str(&text).context("a message that is not JSON")?;
        if message["type"] == "response" && message["id"] == id {
            if message["success"] != true {
                bail!("the prompt failed: {}", message["error"]);
            }
            accepted = true;
        }
        if message["agent_id"] != agent {
            continue;
        }
        match message["type"].as_str() {
            Some("message_delta") => {
                first.get_or_insert_with(|| start.elapsed());
            }
            Some("turn_end") => complete = true,
            // Such as the daemon saying the agent could not take up its
            // session (`session/load`) and started afresh.
            Some("error") => bail!("the agent's error: {}", message["message"]),
            Some("status") if message["status"] == "idle" && complete && accepted => {
                return first.context("the turn ended without a delta");
            }
            _ => {}
        }
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn held(held: Held) -> String {
    format!("{:.1} / {:.1} MB", mb(held.rss), mb(held.pss))
}

fn print(plan: &Plan, capped: &Side, open: &Side, wakes: &Wakes) {
    let (agents, cap) = (plan.agents, plan.cap);
    let idle = plan.idle.as_secs();
    println!();
    println!(
        "Fleet: {agents} agents of the scripted ACP agent (`shard-bench {}`), each prompted once, at rest; [limits] max_awake_agents = {cap} against no cap",
        crate::acp::FLAG
    );
    let row = |what: &str, a: String, b: String| println!("  {what:<52} | {a:>24} | {b:>24}");
    row("", format!("cap {cap}"), "no cap".to_owned());
    let both = |what: &str, of: &dyn Fn(&Side) -> String| row(what, of(capped), of(open));
    both("created and prompted, one after another", &|side| {
        format!("{:.1} s", side.fill.as_secs_f64())
    });
    both("awake: agent.list / with a process in fleet.watch", &|side| {
        format!("{} / {}", side.states.awake.len(), side.fleet.listed)
    });
    both("hibernated (agent.list)", &|side| side.states.hibernated.len().to_string());
    both("hibernated while creating: to make room / at a look", &|side| {
        let told = side.filling.hibernations;
        format!("{} / {}", told.made_room, told.at_a_look)
    });
    row(
        "most awake while creating (agent.list every 250 ms)",
        format!(
            "{} (over the cap {:.1} s)",
            capped.filling.most_awake,
            capped.filling.longest_over.as_secs_f64()
        ),
        open.filling.most_awake.to_string(),
    );
    both("at the cap after the last turn", &|side| {
        side.settled.map_or("never".to_owned(), |took| format!("{:.1} s", took.as_secs_f64()))
    });
    both("daemon RSS / PSS (/proc)", &|side| held(side.daemon));
    both("daemon RSS / PSS (fleet.watch `daemon`)", &|side| held(side.fleet.daemon));
    both("agents RSS / PSS (fleet.watch `agents_total`)", &|side| held(side.fleet.agents));
    both("every process below the daemon (/proc)", &|side| {
        format!("{} in {}", held(side.below), side.processes)
    });
    both("per awake agent, RSS / PSS (agents_total / awake)", &|side| {
        let awake = side.fleet.listed.max(1) as u64;
        held(Held { rss: side.fleet.agents.rss / awake, pss: side.fleet.agents.pss / awake })
    });
    both(&format!("daemon CPU over {idle} s idle: schedstat (stat)"), &|side| {
        format!("{:.1} ms ({:.0} ms)", ms(side.idle.daemon), ms(side.idle.daemon_stat))
    });
    both("  the same, µs of CPU per agent per second", &|side| {
        let per = side.idle.daemon.as_secs_f64() * 1e6 / plan.idle.as_secs_f64() / agents as f64;
        format!("{per:.1} µs")
    });
    both(&format!("agents' CPU over the same {idle} s"), &|side| {
        format!("{:.1} ms", ms(side.idle.agents))
    });
    both("one look (Snapshot::take + each tree's usage)", &|side| {
        let look = &side.look;
        let [cpu, wall] = [look.cpu, look.wall].map(|time| time.as_secs_f64() * 1e6);
        format!("{cpu:.0} µs CPU, {wall:.0} wall ({}x)", look.looks)
    });
    both("  take / the trees / the daemon's own, µs CPU", &|side| {
        let [take, trees, own] =
            [side.look.take, side.look.trees_cpu, side.look.daemon].map(|t| t.as_secs_f64() * 1e6);
        format!("{take:.0} / {trees:.0} / {own:.0}")
    });
    both("  trees / their processes / all on the machine", &|side| {
        format!("{} / {} / {}", side.look.trees, side.look.processes, side.look.machine)
    });
    both("  µs of CPU per agent per second, a look every 2 s", &|side| {
        format!("{:.2} µs", side.look.per_agent_second(agents))
    });
    let per_awake = |of: fn(&Held) -> u64| {
        of(&capped.fleet.agents) as f64 / capped.fleet.listed.max(1) as f64 * agents as f64
    };
    println!(
        "  {agents} awake estimated from the cap's per-awake-agent figures: {:.0} MB RSS, {:.0} MB PSS; measured with no cap: {:.0} MB RSS, {:.0} MB PSS",
        per_awake(|held| held.rss) / (1024.0 * 1024.0),
        per_awake(|held| held.pss) / (1024.0 * 1024.0),
        mb(open.fleet.agents.rss),
        mb(open.fleet.agents.pss),
    );
    let mut hibernated = wakes.hibernated.clone();
    let mut awake = wakes.awake.clone();
    let p = |samples: &mut Vec<Duration>, q: f64| ms(quantile(samples, q));
    println!(
        "  prompt → first message_delta, {} hibernated agents woken one after another: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        hibernated.len(),
        p(&mut hibernated, 0.5),
        p(&mut hibernated, 0.99),
        p(&mut hibernated, 1.0),
    );
    println!(
        "  the same agents prompted again right after, awake: p50 {:.1} ms, p99 {:.1} ms",
        p(&mut awake, 0.5),
        p(&mut awake, 0.99),
    );
    println!(
        "  while waking: {} to {} awake (over the cap for {:.1} s at most), {} hibernated to make room and {} at a look; then {} awake, {} hibernated",
        wakes.watched.least_awake,
        wakes.watched.most_awake,
        wakes.watched.longest_over.as_secs_f64(),
        wakes.watched.hibernations.made_room,
        wakes.watched.hibernations.at_a_look,
        wakes.after.awake.len(),
        wakes.after.hibernated.len(),
    );
}
