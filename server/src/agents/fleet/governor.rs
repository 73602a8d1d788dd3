//! The fleet's rules (`[limits]` of config.toml): whether a new process may
//! start, which idle agents hibernate to make room, and which agent is
//! stopped for holding too much. Pure: decided from the limits and a
//! picture of the fleet, so every rule is tested without a process.

use shard_platform::limits::Limits;
use tokio::time::Instant;

/// One agent as the governor sees it.
#[derive(Debug, Clone)]
pub struct Picture {
    pub agent_id: String,
    /// Its process is starting or running.
    pub awake: bool,
    /// Awake with nothing to do: no turn, no open question, nothing in
    /// flight. Only such an agent is hibernated.
    pub idle: bool,
    /// Its process tree's proportional memory at the last look.
    pub pss_bytes: u64,
    /// When it last did or was asked something.
    pub last_used: Instant,
}

/// What the governor has an agent do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Stop its process the gentle way; it comes back on its next prompt
    /// or attach, with its conversation.
    Hibernate { agent_id: String, reason: String },
    /// Stop its process tree now.
    Stop { agent_id: String, reason: String },
}

/// Why a start finds no room, naming what holds the fleet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error(
        "{awake} agents are awake, the most limits.max_awake_agents ({max}) allows, and none of them is idle: {holders}"
    )]
    Awake { awake: usize, max: usize, holders: String },
    #[error(
        "the agents hold {held_mb} MB, at limits.memory_hard_mb ({hard_mb} MB), and none of them is idle: {holders}"
    )]
    Memory { held_mb: u64, hard_mb: u64, holders: String },
}

const MB: u64 = 1024 * 1024;

fn mb(bytes: u64) -> u64 {
    bytes.div_ceil(MB)
}

/// Whether `starting` may start its process, and who hibernates first to
/// make room for it; else why not.
pub fn admit(limits: &Limits, starting: &str, fleet: &[Picture]) -> Result<Vec<Order>, Full> {
    let others: Vec<&Picture> =
        fleet.iter().filter(|agent| agent.awake && agent.agent_id != starting).collect();
    let mut awake = others.len();
    let mut held: u64 = others.iter().map(|agent| agent.pss_bytes).sum();
    let mut orders = Vec::new();
    for victim in least_recently_used(&others) {
        let too_many = limits.max_awake().is_some_and(|max| awake + 1 > max);
        let too_much = limits.hard_bytes().is_some_and(|hard| held >= hard);
        if !too_many && !too_much {
            break;
        }
        let reason = if too_many {
            format!(
                "hibernated to make room for {starting}: at most {} agents may be awake at once \
                 (limits.max_awake_agents)",
                limits.max_awake_agents
            )
        } else {
            format!(
                "hibernated to make room for {starting}: the agents held {} MB, at \
                 limits.memory_hard_mb ({} MB)",
                mb(held),
                limits.memory_hard_mb
            )
        };
        awake -= 1;
        held = held.saturating_sub(victim.pss_bytes);
        orders.push(Order::Hibernate { agent_id: victim.agent_id.clone(), reason });
    }
    if let Some(max) = limits.max_awake()
        && awake + 1 > max
    {
        let holders = holders(&others, |agent| agent.agent_id.clone());
        return Err(Full::Awake { awake, max, holders });
    }
    if let Some(hard) = limits.hard_bytes()
        && held >= hard
    {
        let holders =
            holders(&others, |agent| format!("{} {} MB", agent.agent_id, mb(agent.pss_bytes)));
        return Err(Full::Memory { held_mb: mb(held), hard_mb: mb(hard), holders });
    }
    Ok(orders)
}

/// What the last look calls for: an agent over its own ceiling is
/// stopped; over the soft ceiling or the number awake, idle agents
/// hibernate, least recently used first.
pub fn review(limits: &Limits, fleet: &[Picture]) -> Vec<Order> {
    let mut orders = Vec::new();
    let mut awake: Vec<&Picture> = Vec::new();
    for agent in fleet.iter().filter(|agent| agent.awake) {
        match limits.agent_bytes() {
            Some(ceiling) if agent.pss_bytes > ceiling => orders.push(Order::Stop {
                agent_id: agent.agent_id.clone(),
                reason: format!(
                    "stopped: its processes held {} MB, over its ceiling of {} MB \
                     (limits.agent_memory_mb)",
                    mb(agent.pss_bytes),
                    mb(ceiling)
                ),
            }),
            _ => awake.push(agent),
        }
    }
    let mut count = awake.len();
    let mut held: u64 = awake.iter().map(|agent| agent.pss_bytes).sum();
    for victim in least_recently_used(&awake) {
        let too_many = limits.max_awake().is_some_and(|max| count > max);
        let too_much = limits.soft_bytes().is_some_and(|soft| held > soft);
        if !too_many && !too_much {
            break;
        }
        let reason = if too_many {
            "hibernated: more agents were awake than limits.max_awake_agents allows".to_owned()
        } else {
            format!(
                "hibernated: the agents held {} MB, over limits.memory_soft_mb ({} MB)",
                mb(held),
                limits.memory_soft_mb
            )
        };
        count -= 1;
        held = held.saturating_sub(victim.pss_bytes);
        orders.push(Order::Hibernate { agent_id: victim.agent_id.clone(), reason });
    }
    orders
}

/// The idle ones among `agents`, least recently used first.
fn least_recently_used<'a>(agents: &[&'a Picture]) -> Vec<&'a Picture> {
    let mut idle: Vec<&Picture> = agents.iter().copied().filter(|agent| agent.idle).collect();
    idle.sort_by(|a, b| (a.last_used, &a.agent_id).cmp(&(b.last_used, &b.agent_id)));
    idle
}

/// The agents that hold the fleet, most memory first, at most five.
fn holders(agents: &[&Picture], say: impl Fn(&Picture) -> String) -> String {
    let mut agents = agents.to_vec();
    agents.sort_by(|a, b| b.pss_bytes.cmp(&a.pss_bytes).then(a.agent_id.cmp(&b.agent_id)));
    let named: Vec<String> = agents.iter().take(5).map(|agent| say(agent)).collect();
    let more = agents.len().saturating_sub(5);
    let mut said = named.join(", ");
    if more > 0 {
        said.push_str(&format!(" and {more} more"));
    }
    said
}

#[cfg(test)]
mod tests;
