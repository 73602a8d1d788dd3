//! What the daemon says of its fleet: which agents are awake (`agent.list`,
//! `runtime_state`), what their processes use (`fleet.watch`), and a
//! poller that keeps the most agents it saw awake at once and for how long
//! more than the cap were.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::conn::Conn;
use crate::shard::Shard;

/// How often the poller asks `agent.list`.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// The agents by `runtime_state`, as one `agent.list` answered.
#[derive(Debug, Default, Clone)]
pub struct States {
    /// A process starting or running.
    pub awake: Vec<String>,
    pub hibernated: Vec<String>,
    /// Anything else (stopped, failed): each with its state.
    pub other: Vec<(String, String)>,
}

/// One `agent.list`, sorted by state.
pub async fn states(conn: &mut Conn) -> Result<States> {
    list(conn, &mut Hibernations::default()).await
}

/// The hibernations a connection was told of (`agent_exited` with
/// `runtime_state: "hibernated"`), by their reason: to make room for an
/// agent starting (admission), or at a look (over the cap then).
#[derive(Debug, Default, Clone, Copy)]
pub struct Hibernations {
    pub made_room: usize,
    pub at_a_look: usize,
}

/// One `agent.list`, counting in `told` the hibernations read before its
/// answer.
async fn list(conn: &mut Conn, told: &mut Hibernations) -> Result<States> {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    let id = format!("fleet-list-{}", ASKED.fetch_add(1, Ordering::Relaxed));
    conn.send(&json!({"type": "agent.list", "id": id})).await?;
    let listed = loop {
        let message = conn.until(|_| true).await?;
        if message["type"] == "agent_exited" && message["runtime_state"] == "hibernated" {
            match message["reason"].as_str().is_some_and(|why| why.contains("to make room")) {
                true => told.made_room += 1,
                false => told.at_a_look += 1,
            }
        }
        if message["type"] == "response" && message["id"] == id.as_str() {
            if message["success"] != true {
                bail!("agent.list failed: {}", message["error"]);
            }
            break message;
        }
    };
    let agents = listed["data"]["agents"].as_array().context("agent.list: no agents")?;
    let mut states = States::default();
    for agent in agents {
        let id = agent["agent_id"].as_str().unwrap_or_default().to_owned();
        match agent["runtime_state"].as_str().unwrap_or_default() {
            "starting" | "running" => states.awake.push(id),
            "hibernated" => states.hibernated.push(id),
            other => states.other.push((id, other.to_owned())),
        }
    }
    Ok(states)
}

/// Memory of a set of processes, in bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct Held {
    pub rss: u64,
    pub pss: u64,
}

/// The `fleet.watch` answer (without watching on): how many agents have a
/// process, all of them together, and the daemon.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fleet {
    pub listed: usize,
    pub agents: Held,
    pub daemon: Held,
}

pub async fn fleet(conn: &mut Conn) -> Result<Fleet> {
    let answer = conn.call(json!({"type": "fleet.watch", "watch": false}), "fleet-watch").await?;
    let data = &answer["data"];
    let held = |of: &Value| Held {
        rss: of["rss_bytes"].as_u64().unwrap_or(0),
        pss: of["pss_bytes"].as_u64().unwrap_or(0),
    };
    Ok(Fleet {
        listed: data["agents"].as_array().map_or(0, Vec::len),
        agents: held(&data["agents_total"]),
        daemon: held(&data["daemon"]),
    })
}

/// What the poller saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Watched {
    pub polls: usize,
    /// The most and the fewest agents awake in one answer.
    pub most_awake: usize,
    pub least_awake: usize,
    /// The longest stretch during which every answer had more than the
    /// cap awake.
    pub longest_over: Duration,
    pub hibernations: Hibernations,
}

/// Asks `agent.list` every [`POLL_EVERY`] on a connection of its own until
/// stopped, and once more then, counting the hibernations it is told of
/// meanwhile. Not left running while the daemon's idle CPU is measured:
/// each answer costs the daemon.
pub struct Poller {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Result<Watched>>,
}

impl Poller {
    pub async fn start(shard: &Shard, cap: usize) -> Result<Poller> {
        let mut conn = shard.unix().await?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut watched = Watched { least_awake: usize::MAX, ..Watched::default() };
            let mut over_since: Option<Instant> = None;
            loop {
                let last = stopping.load(Ordering::Relaxed);
                let awake = list(&mut conn, &mut watched.hibernations).await?.awake.len();
                let now = Instant::now();
                watched.polls += 1;
                watched.most_awake = watched.most_awake.max(awake);
                watched.least_awake = watched.least_awake.min(awake);
                if awake > cap {
                    let since = *over_since.get_or_insert(now);
                    watched.longest_over = watched.longest_over.max(now - since);
                } else {
                    over_since = None;
                }
                if last {
                    break;
                }
                tokio::time::sleep(POLL_EVERY).await;
            }
            Ok(watched)
        });
        Ok(Poller { stop, task })
    }

    pub async fn stop(self) -> Result<Watched> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

/// Waits until at most `cap` agents are awake, asking every
/// [`POLL_EVERY`] for at most `patience`; how long it took, or `None` if
/// they never were.
pub async fn settle(conn: &mut Conn, cap: usize, patience: Duration) -> Result<Option<Duration>> {
    let start = Instant::now();
    loop {
        if states(conn).await?.awake.len() <= cap {
            return Ok(Some(start.elapsed()));
        }
        if start.elapsed() > patience {
            return Ok(None);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}
