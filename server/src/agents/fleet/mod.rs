//! The fleet governor: what every agent's processes use, and the limits of
//! `config.toml` held to. One look at `/proc` every [`SAMPLE_EVERY`] for
//! every running agent at once (never a scan per event), kept for
//! `agent.list` and `fleet.watch` and told to the connections watching as
//! `fleet_updated` when a figure moved enough to see. Each host says when
//! its agent is awake and idle, and asks before it starts a process;
//! [`governor`] decides, and its orders (hibernate, stop) reach the hosts
//! through [`Governed`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shard_platform::limits::Limits;
use shard_platform::resources::{self, Snapshot, TreeUsage};
use shard_protocol::ServerMessage;
use shard_protocol::budget::BudgetStatus;
use shard_protocol::envelope::Envelope;
use shard_protocol::fleet::{AgentResources, FleetLimits, FleetUpdated, Resources};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agents::{Processes, Wire};

use self::governor::{Order, Picture};

/// The connections watching the fleet (`fleet.watch`).
pub trait Watchers: Send + Sync {
    fn tell_watchers(&self, bytes: &Wire);
}

/// Where the governor's orders are carried out (the registry's hosts).
pub trait Governed: Send + Sync {
    fn order(&self, order: Order);
    /// Every running agent's host looks at its budgets again
    /// ([`crate::agents::budgets`]).
    fn review_budgets(&self);
}

/// Orders waiting for the watcher to hand them on; a full queue drops
/// them, and the next look decides again.
const ORDERS: usize = 64;

/// How often the agents' processes are looked at.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// A change in memory smaller than this is not told.
const MEMORY_STEP: u64 = 1024 * 1024;
/// A change in CPU smaller than this many points is not told.
const CPU_STEP: f64 = 2.0;

/// The last look at the fleet, and what the hosts said of their agents.
pub struct Fleet {
    processes: Arc<Processes>,
    limits: Limits,
    state: Mutex<State>,
    orders: tokio::sync::mpsc::Sender<Order>,
    /// Taken by [`watch`].
    pending: Mutex<Option<tokio::sync::mpsc::Receiver<Order>>>,
}

/// What a host last said of its agent.
#[derive(Debug, Clone, Copy)]
struct Said {
    awake: bool,
    idle: bool,
    last_used: Instant,
}

#[derive(Default)]
struct State {
    /// CPU ticks of each process tree (by its root) at the last look.
    ticks: HashMap<u32, u64>,
    /// The daemon's own ticks at the last look.
    daemon_ticks: u64,
    taken: Option<Instant>,
    /// What each running agent uses, as of the last look.
    agents: HashMap<String, Resources>,
    daemon: Resources,
    /// What clients were last told.
    told: Option<FleetUpdated>,
    /// By agent.
    said: HashMap<String, Said>,
}

impl Fleet {
    pub fn new(processes: Arc<Processes>, limits: Limits) -> Self {
        let (orders, pending) = tokio::sync::mpsc::channel(ORDERS);
        Self {
            processes,
            limits,
            state: Mutex::default(),
            orders,
            pending: Mutex::new(Some(pending)),
        }
    }

    /// The agent's host says how it is: its process starting or running
    /// (`awake`), with nothing to do (`idle`). Every word counts as use.
    pub fn said(&self, agent_id: &str, awake: bool, idle: bool) {
        let mut state = self.state();
        if !awake {
            state.said.remove(agent_id);
            return;
        }
        let said = Said { awake, idle, last_used: Instant::now() };
        state.said.insert(agent_id.to_owned(), said);
    }

    /// The agent's host says how it is now, when that changed without a
    /// word counted as use: a command answered or what waited for its
    /// process taken up (`idle`), its process told to stop (no longer
    /// `awake`: it is going, and nobody need make room for it).
    pub fn now_is(&self, agent_id: &str, awake: bool, idle: bool) {
        let mut state = self.state();
        if !awake {
            state.said.remove(agent_id);
        } else if let Some(said) = state.said.get_mut(agent_id) {
            said.idle = idle;
        }
    }

    /// May `agent_id` start its process now? Idle agents are told to
    /// hibernate to make room; the refusal says what holds the fleet.
    pub fn admit(&self, agent_id: &str) -> Result<(), governor::Full> {
        let mut state = self.state();
        let orders = governor::admit(&self.limits, agent_id, &state.pictures())?;
        let said = Said { awake: true, idle: false, last_used: Instant::now() };
        state.said.insert(agent_id.to_owned(), said);
        for order in orders {
            if let Order::Hibernate { agent_id, .. } = &order
                && let Some(victim) = state.said.get_mut(agent_id)
            {
                // Not counted as room twice while it goes.
                victim.idle = false;
            }
            self.send(order);
        }
        Ok(())
    }

    fn send(&self, order: Order) {
        if self.orders.try_send(order).is_err() {
            tracing::warn!("the fleet's orders are backed up; the next look decides again");
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The fleet as of the last look, with the daemon's `spend`
    /// ([`crate::agents::budgets::Budgets::daemon`]).
    pub fn now(&self, spend: Vec<BudgetStatus>) -> FleetUpdated {
        self.state().update(&self.limits, spend)
    }

    /// What the agent's processes use, if it has any running.
    pub fn resources(&self, agent_id: &str) -> Option<Resources> {
        self.state().agents.get(agent_id).copied()
    }

    /// Takes a look at `snapshot`, taken at `now`, with the daemon's
    /// `spend`; the update to tell clients if anything moved enough since
    /// they were last told.
    pub fn sample(
        &self,
        snapshot: &Snapshot,
        now: Instant,
        spend: Vec<BudgetStatus>,
    ) -> Option<FleetUpdated> {
        let roots = self.processes.roots();
        let mut state = self.state();
        let seconds = state.taken.map_or(0.0, |taken| (now - taken).as_secs_f64());
        let mut ticks = HashMap::new();
        let mut agents: HashMap<String, Resources> = HashMap::new();
        for (pid, agent_id) in roots {
            let Some(usage) = snapshot.usage(pid) else { continue };
            let before = state.ticks.get(&pid).copied().unwrap_or(usage.cpu_ticks);
            ticks.insert(pid, usage.cpu_ticks);
            agents.entry(agent_id).or_default().add(&figures(usage, before, seconds));
        }
        if let Some(own) = snapshot.process(std::process::id()) {
            let before = if state.taken.is_some() { state.daemon_ticks } else { own.cpu_ticks };
            state.daemon = figures(own, before, seconds);
            state.daemon_ticks = own.cpu_ticks;
        }
        state.ticks = ticks;
        state.taken = Some(now);
        state.agents = agents;
        for order in governor::review(&self.limits, &state.pictures()) {
            self.send(order);
        }
        let update = state.update(&self.limits, spend);
        if state.told.as_ref().is_some_and(|told| !moved(told, &update)) {
            return None;
        }
        state.told = Some(update.clone());
        Some(update)
    }
}

impl State {
    /// The fleet as the governor sees it: what each host said, with what
    /// its processes held at the last look.
    fn pictures(&self) -> Vec<Picture> {
        self.said
            .iter()
            .map(|(agent_id, said)| Picture {
                agent_id: agent_id.clone(),
                awake: said.awake,
                idle: said.idle,
                pss_bytes: self.agents.get(agent_id).map_or(0, |used| used.pss_bytes),
                last_used: said.last_used,
            })
            .collect()
    }

    fn update(&self, limits: &Limits, spend: Vec<BudgetStatus>) -> FleetUpdated {
        let mut agents: Vec<AgentResources> = self
            .agents
            .iter()
            .map(|(agent_id, resources)| AgentResources {
                agent_id: agent_id.clone(),
                resources: *resources,
            })
            .collect();
        agents.sort_by(|a, b| a.agent_id.cmp(&b.agent_id));
        let mut agents_total = Resources::default();
        for agent in &agents {
            agents_total.add(&agent.resources);
        }
        let limits = FleetLimits {
            max_awake_agents: limits.max_awake_agents,
            memory_soft_mb: limits.memory_soft_mb,
            memory_hard_mb: limits.memory_hard_mb,
            agent_memory_mb: limits.agent_memory_mb,
        };
        FleetUpdated { agents, agents_total, daemon: self.daemon, limits, spend }
    }
}

fn figures(usage: TreeUsage, ticks_before: u64, seconds: f64) -> Resources {
    Resources {
        rss_bytes: usage.rss_bytes,
        pss_bytes: usage.pss_bytes,
        cpu_percent: resources::cpu_percent(ticks_before, usage.cpu_ticks, seconds),
    }
}

/// Whether `now` differs from what was `told` enough to tell again: an
/// agent started or stopped, a figure moved by a step, or the spend did.
fn moved(told: &FleetUpdated, now: &FleetUpdated) -> bool {
    let apart = |a: &Resources, b: &Resources| {
        a.rss_bytes.abs_diff(b.rss_bytes) >= MEMORY_STEP
            || a.pss_bytes.abs_diff(b.pss_bytes) >= MEMORY_STEP
            || (a.cpu_percent - b.cpu_percent).abs() >= CPU_STEP
    };
    told.agents.len() != now.agents.len()
        || told
            .agents
            .iter()
            .zip(&now.agents)
            .any(|(a, b)| a.agent_id != b.agent_id || apart(&a.resources, &b.resources))
        || apart(&told.daemon, &now.daemon)
        || told.spend != now.spend
}

/// Looks at the fleet every [`SAMPLE_EVERY`] until `stop`, telling the
/// watchers what moved (with what `spend` says the daemon spent: its
/// budgets, crate::agents::budgets::Budgets::daemon) and handing the
/// governor's orders to `governed`. The look itself reads `/proc`, off
/// the runtime.
pub async fn watch(
    fleet: Arc<Fleet>,
    spend: impl Fn() -> Vec<BudgetStatus> + Send + 'static,
    watchers: Arc<dyn Watchers>,
    governed: Arc<dyn Governed>,
    stop: CancellationToken,
) {
    let taken = fleet.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    let Some(mut orders) = taken else { return };
    let looker = Looker::start(fleet.clone());
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            Some(order) = orders.recv() => {
                governed.order(order);
                continue;
            }
            _ = every.tick() => {}
        }
        if let Some(update) = looker.look(&fleet, spend()).await {
            let message = Envelope::new(ServerMessage::FleetUpdated(update));
            watchers.tell_watchers(&Wire::from(message.to_json()));
        }
    }
}

/// Where the looks run: a thread of their own. Through the runtime's
/// blocking pool, a look every two seconds would wake its idle threads in
/// turn, each before its keep-alive ran out, so that a pool grown in a
/// busy moment never shrank again; one thread held for good costs less
/// than that, and says what it is.
struct Looker {
    asks: Option<std::sync::mpsc::SyncSender<Ask>>,
}

/// One look to take: the spend to tell with it, and where its answer goes.
type Ask = (Vec<BudgetStatus>, tokio::sync::oneshot::Sender<Option<FleetUpdated>>);

impl Looker {
    /// The thread, ending when the watch does; without it (the system
    /// gave no thread), each look goes through the blocking pool.
    fn start(fleet: Arc<Fleet>) -> Self {
        let (asks, asked) = std::sync::mpsc::sync_channel::<Ask>(1);
        let thread = std::thread::Builder::new().name("fleet-look".to_owned()).spawn(move || {
            while let Ok((spend, answer)) = asked.recv() {
                let _ = answer.send(fleet.sample(&Snapshot::take(), Instant::now(), spend));
            }
        });
        match thread {
            Ok(_) => Self { asks: Some(asks) },
            Err(error) => {
                tracing::warn!(%error, "no thread for the fleet's looks; they share the pool");
                Self { asks: None }
            }
        }
    }

    async fn look(&self, fleet: &Arc<Fleet>, spend: Vec<BudgetStatus>) -> Option<FleetUpdated> {
        let Some(asks) = &self.asks else {
            let fleet = fleet.clone();
            let looked = tokio::task::spawn_blocking(move || {
                fleet.sample(&Snapshot::take(), Instant::now(), spend)
            });
            return looked.await.ok().flatten();
        };
        let (answer, answered) = tokio::sync::oneshot::channel();
        asks.try_send((spend, answer)).ok()?;
        answered.await.ok().flatten()
    }
}

pub mod governor;

#[cfg(test)]
mod tests;
