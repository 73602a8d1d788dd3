//! The fleet (CONTRACT.md, "Fleet limits and budgets"): what each agent's
//! processes use, as `AgentInfo.resources` and the `fleet_updated` event
//! show it (docs/PROTOCOL-NOTES.md, "The fleet").

use serde::{Deserialize, Serialize};

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
}
