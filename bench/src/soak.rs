//! S8 soak: steady load with churn for a while, then a look at what the
//! daemon still holds. Two agents stream paced turns to a few browsers that
//! stay; meanwhile browsers keep connecting, attaching, reading a little and
//! leaving (half detach first, half just drop), and agents keep being
//! created or restored, prompted and killed. The daemon's RSS, open
//! descriptors, threads, tasks, connections and agent processes are sampled
//! throughout; once the churn stops, everything it used must be given back.
//!
//! Killed agents stay listed (CONTRACT.md: durable, restorable; the protocol
//! never deletes one), so the agent churn works as a user's day does: it
//! creates agents up to a working set, then keeps restoring the least
//! recently used one (a new process from its durable identity), prompting it
//! and killing it. What a listed agent costs on its own (a dormant record)
//! is S4's to measure.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::Args;
use crate::conn::{Conn, next_loopback};
use crate::latency::read_paced;
use crate::procfs;
use crate::shard::{Shard, attach};

/// One steady turn: 500 deltas at 200 a second, 2.5 s.
const TURN_DELTAS: u64 = 500;
const TURN_RATE: u64 = 200;
const TURN: Duration = Duration::from_millis(2_500);
/// Browsers that stay attached to both steady agents all along.
const STEADY_READERS: usize = 4;
/// Agents the churn creates before it restores old ones instead.
const WORKING_SET: usize = 64;
/// Threads the daemon may hold at the end beyond its start: blocking-pool
/// threads still in their keep-alive.
const THREAD_SLACK: usize = 2;

/// What the daemon held at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    pub at: Duration,
    pub rss: u64,
    /// Of the RSS, the daemon's own memory (heap, stacks), not the pages of
    /// its executable and libraries.
    pub anon: u64,
    pub fds: usize,
    pub threads: usize,
    pub tasks: u64,
    pub connections: u64,
    pub agents: u64,
    pub running_agents: u64,
    /// Agents whose host is awake (the rest are dormant records).
    pub awake_agents: u64,
    /// Agent processes (the daemon's children).
    pub processes: usize,
}

pub struct Soak {
    /// Before anything ran; with the steady load on, before the churn; and
    /// once everything had stopped and settled (the steady agents killed).
    pub base: Sample,
    pub start: Sample,
    pub end: Sample,
    /// The largest RSS seen while it ran.
    pub peak_rss: u64,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    pub attaches: u64,
    pub created: u64,
    /// Stopped agents brought back (a new process each) and killed again.
    pub restored: u64,
    /// Deltas each steady reader got, against what the agents streamed.
    pub steady_deltas: Vec<u64>,
    pub streamed: u64,
}

/// One sample, over a connection of its own: one held open between samples
/// would collect every registry event meanwhile without reading it, and be
/// dropped as too slow, rightly.
async fn sample(shard: &Shard, began: Instant) -> Result<Sample> {
    let pid = shard.pid().context("the daemon's pid")?;
    // The process first, before this sample's connection adds a descriptor.
    let (at, memory, fds, threads) =
        (began.elapsed(), procfs::memory(pid)?, procfs::fds(pid), procfs::threads(pid));
    let (rss, anon) = (memory.rss, memory.anon);
    let processes = procfs::children(pid).len();
    let mut control = shard.unix().await.context("connecting to sample")?;
    let stats =
        control.call(json!({"type": "daemon.stats"}), "stats").await.context("daemon.stats")?;
    drop(control);
    let count = |field: &str| stats["data"][field].as_u64().unwrap_or(0);
    Ok(Sample {
        at,
        rss,
        anon,
        fds,
        threads,
        // The sample's own connection (and its tasks) are not the churn's.
        tasks: count("tasks"),
        connections: count("connections").saturating_sub(1),
        agents: count("agents"),
        running_agents: count("running_agents"),
        awake_agents: count("awake_agents"),
        processes,
    })
}

/// Browsers come and go: connect, attach, read a little, leave.
async fn attach_churn(shard: &Shard, agent: &str, stop: &AtomicBool) -> Result<u64> {
    let mut attaches = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut conn = shard.websocket(next_loopback()).await?;
        attach(&mut conn, agent, "observer").await?;
        // A little of the stream (there is none between turns).
        let reading = async {
            for _ in 0..5 {
                conn.recv().await?;
            }
            anyhow::Ok(())
        };
        if let Ok(read) = tokio::time::timeout(Duration::from_millis(200), reading).await {
            read?;
        }
        if attaches % 2 == 0 {
            let detach = json!({"type": "agent.detach", "agent_id": agent});
            conn.call(detach, "detach").await?;
        }
        drop(conn);
        attaches += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(attaches)
}

/// Agents come and go: created (or, once the working set is full, the
/// least recently used one restored), prompted, killed, left.
async fn agent_churn(shard: &Shard, stop: &AtomicBool) -> Result<(u64, u64)> {
    let mut control = shard.unix().await?;
    let mut working_set = VecDeque::new();
    let (mut created, mut restored) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let agent = if working_set.len() < WORKING_SET {
            created += 1;
            shard.create_agent(&mut control).await?
        } else {
            restored += 1;
            working_set.pop_front().context("a full working set")?
        };
        // Attaching restores a stopped agent's process.
        attach(&mut control, &agent, "interactive").await?;
        let prompt = json!({"type": "prompt", "agent_id": agent, "message": "hello there"});
        control.call(prompt, "prompt").await?;
        control
            .until(|message| message["type"] == "turn_end" && message["agent_id"] == agent)
            .await?;
        let kill = json!({"type": "agent.kill", "agent_id": agent, "force": true});
        control.call(kill, "kill").await?;
        control.call(json!({"type": "agent.detach", "agent_id": agent}), "detach").await?;
        working_set.push_back(agent);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok((created, restored))
}

/// S8: the soak, then the daemon's figures over it and what it still
/// holds. Returns what leaked.
pub async fn run(args: &Args) -> Result<Vec<String>> {
    let seconds = args.soak.unwrap_or(if args.short { 30 } else { 1_800 });
    let every = Duration::from_secs(if seconds > 120 { 30 } else { 5 });
    let daemon = Shard::start(&args.shard, 256, None).await?;
    println!();
    println!(
        "S8 soak: {seconds} s of two agents streaming to {STEADY_READERS} steady browsers, with browsers attaching and leaving and agents created (up to a working set), restored and killed throughout"
    );
    let soak = soak(&daemon, Duration::from_secs(seconds), every).await?;
    daemon.stop().await?;
    soak.print_churn();
    soak.print_table();
    soak.print_memory();
    let leaks = soak.leaks();
    if leaks.is_empty() {
        println!(
            "  flat: connections, processes, descriptors, threads and tasks are back where they were"
        );
    }
    Ok(leaks.into_iter().map(|leak| format!("S8: {leak}")).collect())
}

/// Runs the soak for about `duration`, sampling every `every`.
pub async fn soak(shard: &Shard, duration: Duration, every: Duration) -> Result<Soak> {
    let began = Instant::now();
    let base = sample(shard, began).await?;
    // One turn more than the churn lasts, so that it always has a stream.
    let turns = (duration.as_secs_f64() / TURN.as_secs_f64()).ceil() as usize + 1;
    let mut control = shard.unix().await?;
    let steady = Steady::attach(shard, &mut control, turns).await?;
    let start = sample(shard, began).await?;
    let streaming = steady.stream(control);
    let churn = churn(shard, began, duration, every, &steady.agents[0], start).await?;
    let steady_deltas = steady.stop(streaming).await?;
    let end = settle(shard, began, &base).await?;
    Ok(Soak {
        base,
        start,
        end,
        peak_rss: churn.samples.iter().map(|sample| sample.rss).max().unwrap_or(0).max(end.rss),
        samples: churn.samples,
        attaches: churn.attaches,
        created: churn.created,
        restored: churn.restored,
        steady_deltas,
        streamed: turns as u64 * 2 * TURN_DELTAS,
    })
}

/// The steady load: two agents streaming paced turns back to back, and the
/// browsers that stay attached to both all along.
struct Steady {
    agents: Vec<String>,
    /// Each steady reader, to the deltas it got of every turn.
    readers: Vec<JoinHandle<Result<u64>>>,
    turns: usize,
}

impl Steady {
    /// The two agents, made by `control` and attached to it, and the
    /// steady readers attached to both, reading from now on.
    async fn attach(shard: &Shard, control: &mut Conn, turns: usize) -> Result<Steady> {
        let mut agents = Vec::new();
        for _ in 0..2 {
            let agent = shard.create_agent(control).await?;
            attach(control, &agent, "interactive").await?;
            agents.push(agent);
        }
        let mut readers = Vec::new();
        for _ in 0..STEADY_READERS {
            let mut conn = shard.websocket(next_loopback()).await?;
            for agent in &agents {
                attach(&mut conn, agent, "observer").await?;
            }
            readers.push(tokio::spawn(async move {
                read_paced(&mut conn, 2 * turns).await.map(|paced| paced.latencies.len() as u64)
            }));
        }
        Ok(Steady { agents, readers, turns })
    }

    /// Both agents' turns, back to back, prompted by `control`, which the
    /// task gives back once every turn is done.
    fn stream(&self, mut control: Conn) -> JoinHandle<Result<Conn>> {
        let (agents, turns) = (self.agents.clone(), self.turns);
        tokio::spawn(async move {
            for turn in 0..turns {
                for agent in &agents {
                    let message = format!("pace: {TURN_DELTAS} {TURN_RATE}");
                    // A follow-up if the last turn is still ending.
                    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message, "streaming_behavior": "follow_up"});
                    control.call(prompt, &format!("p{turn}")).await?;
                }
                read_paced(&mut control, 2).await?;
            }
            anyhow::Ok(control)
        })
    }

    /// Once the turns are done: what each reader got; then both agents
    /// killed and the controller gone.
    async fn stop(self, streaming: JoinHandle<Result<Conn>>) -> Result<Vec<u64>> {
        let mut control = streaming.await?.context("the steady turns")?;
        let mut steady_deltas = Vec::new();
        for reader in self.readers {
            steady_deltas.push(reader.await?.context("a steady reader")?);
        }
        for agent in &self.agents {
            let kill = json!({"type": "agent.kill", "agent_id": agent, "force": true});
            control.call(kill, "kill").await?;
        }
        drop(control);
        Ok(steady_deltas)
    }
}

/// What the churn did, and every sample taken while it ran.
struct Churn {
    samples: Vec<Sample>,
    attaches: u64,
    created: u64,
    restored: u64,
}

/// Browsers attaching to `agent` and leaving, and agents coming and going,
/// for about `duration` from `began`, sampled every `every` after `start`.
async fn churn(
    shard: &Shard,
    began: Instant,
    duration: Duration,
    every: Duration,
    agent: &str,
    start: Sample,
) -> Result<Churn> {
    let stop = AtomicBool::new(false);
    let mut samples = vec![start];
    let sampling = async {
        while began.elapsed() < duration {
            tokio::time::sleep(every.min(duration.saturating_sub(began.elapsed()))).await;
            match sample(shard, began).await {
                Ok(now) => samples.push(now),
                Err(problem) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(problem);
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        Ok(())
    };
    // A churn that fails stops the others too.
    fn stopping<T>(stop: &AtomicBool, result: Result<T>) -> Result<T> {
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        result
    }
    let (sampled, attaches, created) = tokio::join!(
        sampling,
        async { stopping(&stop, attach_churn(shard, agent, &stop).await) },
        async { stopping(&stop, agent_churn(shard, &stop).await) },
    );
    sampled.context("sampling")?;
    let attaches = attaches.context("attach churn")?;
    let (created, restored) = created.context("agent churn")?;
    Ok(Churn { samples, attaches, created, restored })
}

/// Lets closed connections and killed agents finish going away, and the
/// blocking pool's idle threads (file and process work) time out: tokio
/// keeps one for 10 s after its last job. The sample once all is back
/// where `base` was, or after 15 s.
async fn settle(shard: &Shard, began: Instant, base: &Sample) -> Result<Sample> {
    let settle = Instant::now();
    let mut end = sample(shard, began).await?;
    let settled = |end: &Sample| {
        end.connections <= base.connections
            && end.processes <= base.processes
            && end.fds <= base.fds
            && end.threads <= base.threads + THREAD_SLACK
            && end.tasks <= base.tasks
            && end.awake_agents <= base.awake_agents
    };
    while settle.elapsed() < Duration::from_secs(15) && !settled(&end) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        end = sample(shard, began).await?;
    }
    Ok(end)
}

impl Soak {
    /// How much churn there was, and the daemon over time.
    fn print_churn(&self) {
        println!(
            "  churn: {} browser attachments, {} agents created, {} restored, each prompted and killed; {} samples",
            self.attaches,
            self.created,
            self.restored,
            self.samples.len()
        );
        let timeline: Vec<String> = self
            .samples
            .iter()
            .map(|sample| {
                format!(
                    "{:.0}s {:.1}MB({:.1})/{}t/{}fd",
                    sample.at.as_secs_f64(),
                    sample.rss as f64 / 1e6,
                    sample.anon as f64 / 1e6,
                    sample.tasks,
                    sample.fds
                )
            })
            .collect();
        println!("  over time (RSS (of it anonymous)/tasks/descriptors): {}", timeline.join(", "));
    }

    /// The daemon at start, steady before the churn, and at the end.
    fn print_table(&self) {
        println!(
            "  {:>16} | {:>9} | {:>5} | {:>7} | {:>5} | {:>11} | {:>6} | {:>7} | {:>5} | {:>9}",
            "",
            "RSS MB",
            "fds",
            "threads",
            "tasks",
            "connections",
            "agents",
            "running",
            "awake",
            "processes"
        );
        for (name, sample) in
            [("at start", &self.base), ("steady, no churn", &self.start), ("at the end", &self.end)]
        {
            println!(
                "  {name:>16} | {:>9.1} | {:>5} | {:>7} | {:>5} | {:>11} | {:>6} | {:>7} | {:>5} | {:>9}",
                sample.rss as f64 / 1e6,
                sample.fds,
                sample.threads,
                sample.tasks,
                sample.connections,
                sample.agents,
                sample.running_agents,
                sample.awake_agents,
                sample.processes
            );
        }
    }

    /// The memory's peak and growth: the second half against the first,
    /// since a leak keeps growing and a warm-up (allocator arenas, the
    /// working set's records) does not.
    fn print_memory(&self) {
        let (start, end) = (&self.start, &self.end);
        let half = self.samples.len() / 2;
        let (middle, last) = (&self.samples[half], self.samples.last().unwrap_or(end));
        println!(
            "  RSS at most {:.1} MB; at the end {:+.1} MB over the steady start ({:+.1} MB anonymous), {:+.1} MB over the run's second half ({:+.1} MB anonymous)",
            self.peak_rss as f64 / 1e6,
            (end.rss as f64 - start.rss as f64) / 1e6,
            (end.anon as f64 - start.anon as f64) / 1e6,
            (last.rss as f64 - middle.rss as f64) / 1e6,
            (last.anon as f64 - middle.anon as f64) / 1e6,
        );
    }

    /// What did not come back, as the run's breakage.
    pub fn leaks(&self) -> Vec<String> {
        let (start, end) = (&self.base, &self.end);
        let mut leaks = Vec::new();
        if end.connections != start.connections {
            leaks.push(format!("connections {} → {}", start.connections, end.connections));
        }
        if end.running_agents != start.running_agents {
            leaks.push(format!("running agents {} → {}", start.running_agents, end.running_agents));
        }
        if end.processes != start.processes {
            leaks.push(format!("agent processes {} → {}", start.processes, end.processes));
        }
        if end.fds > start.fds {
            leaks.push(format!("descriptors {} → {}", start.fds, end.fds));
        }
        if end.threads > start.threads + THREAD_SLACK {
            leaks.push(format!("threads {} → {}", start.threads, end.threads));
        }
        if end.tasks > start.tasks {
            leaks.push(format!("tasks {} → {}", start.tasks, end.tasks));
        }
        if end.awake_agents > start.awake_agents {
            leaks.push(format!(
                "agents awake with nothing to do {} → {}",
                start.awake_agents, end.awake_agents
            ));
        }
        if self.steady_deltas.iter().any(|&deltas| deltas != self.streamed) {
            leaks.push(format!(
                "steady readers got {:?} of {} deltas",
                self.steady_deltas, self.streamed
            ));
        }
        leaks
    }
}
