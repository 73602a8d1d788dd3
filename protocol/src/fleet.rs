//! The fleet (CONTRACT.md, "Fleet limits and budgets"): what each agent's
//! processes use, as `AgentInfo.resources` and the `fleet_updated` event
//! show it (docs/PROTOCOL-NOTES.md, "The fleet").

use serde::{Deserialize, Serialize};

use crate::budget::BudgetStatus;

/// What an agent's whole process tree uses now, while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Resident memory, each page counted in every process that maps it.
    pub rss_bytes: u64,
    /// Proportional memory: a shared page counts 1/n in each of the n
    /// processes sharing it. What stopping the agent would give back.
    pub pss_bytes: u64,
    /// CPU over the last sampling interval, as a share of one core (a tree
    /// busy on two cores reads 200).
    pub cpu_percent: f64,
}

impl Resources {
    /// The sum of several trees' use.
    pub fn add(&mut self, other: &Resources) {
        self.rss_bytes += other.rss_bytes;
        self.pss_bytes += other.pss_bytes;
        self.cpu_percent += other.cpu_percent;
    }
}

/// One agent's figures in a `fleet_updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResources {
    pub agent_id: String,
    pub resources: Resources,
}

/// `fleet.watch` (Shard extension): answers the fleet as it is now
/// ([`FleetUpdated`]) and, while `watch` (the default), sends this
/// connection `fleet_updated` whenever a figure moved; `watch: false`
/// stops that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetWatch {
    #[serde(default = "watching")]
    pub watch: bool,
}

fn watching() -> bool {
    true
}

/// `fleet_updated` (Shard extension, registry event, to the connections
/// watching the fleet): what every running agent uses. Agents not listed
/// have no process running. Also the answer to `fleet.watch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetUpdated {
    pub agents: Vec<AgentResources>,
    /// Every agent's processes together.
    pub agents_total: Resources,
    /// The daemon's own process.
    pub daemon: Resources,
    /// The limits the fleet is held to.
    #[serde(default)]
    pub limits: FleetLimits,
    /// What every agent of the daemon spent this day and this month: the
    /// daemon's budgets for both periods as they stand, capped or not.
    #[serde(default)]
    pub spend: Vec<BudgetStatus>,
}

/// The `[limits]` of `config.toml`, as written there: 0 means no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetLimits {
    /// Agents whose process runs at once.
    pub max_awake_agents: u32,
    /// Over it (every agent's PSS together), idle agents hibernate.
    pub memory_soft_mb: u64,
    /// A start that would pass it is refused.
    pub memory_hard_mb: u64,
    /// An agent whose process tree passes it is stopped.
    pub agent_memory_mb: u64,
}
