//! Usage rollups (Shard extensions, pinned in docs/PROTOCOL-NOTES.md): what
//! each turn, session and agent has spent, and the daemon's total, kept
//! durably by the daemon from the agents' `usage` and `turn_end` events.
//!
//! These are orchestrator messages: where `agent_id` or `session_id`
//! appears it is payload, never a routing tag (§5.2).

use serde::{Deserialize, Serialize};

use crate::types::Usage;

/// Tokens (and, where the model has a price, cost) summed over provider
/// calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input: u64,
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    /// The sum of every priced call's cost (in the price's currency);
    /// absent when no call had a price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Provider calls counted.
    #[serde(default)]
    pub calls: u64,
    /// Calls whose model has no price in `config.toml`: their tokens are
    /// counted, their cost is not (`cost` is then a lower bound).
    #[serde(default)]
    pub unpriced_calls: u64,
    /// Turns that spent anything (a turn counts once, when it starts
    /// spending).
    #[serde(default)]
    pub turns: u64,
}

impl UsageTotals {
    /// One provider call's `usage` added in.
    pub fn add_call(&mut self, call: &Usage) {
        self.input += call.input;
        self.output += call.output;
        self.cache_read += call.cache_read.unwrap_or(0);
        self.cache_write += call.cache_write.unwrap_or(0);
        self.calls += 1;
        match call.cost {
            Some(cost) if cost.is_finite() && cost >= 0.0 => {
                self.cost = Some(self.cost.unwrap_or(0.0) + cost);
            }
            _ => self.unpriced_calls += 1,
        }
    }

    /// Another rollup added in.
    pub fn add(&mut self, other: &UsageTotals) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.calls += other.calls;
        self.unpriced_calls += other.unpriced_calls;
        self.turns += other.turns;
        if let Some(cost) = other.cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
    }

    /// Every token kind together.
    pub fn tokens(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }

    /// The same totals as the protocol's `Usage` (for `AgentInfo.usage`).
    pub fn as_usage(&self) -> Usage {
        Usage {
            input: self.input,
            output: self.output,
            cache_read: (self.cache_read > 0).then_some(self.cache_read),
            cache_write: (self.cache_write > 0).then_some(self.cache_write),
            cost: self.cost,
            context_tokens: None,
            model: None,
        }
    }
}

/// How a turn's spending ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Still running.
    Running,
    /// Ended with `turn_end`.
    Ended,
    /// The agent's process (or the daemon) stopped before `turn_end`.
    Interrupted,
    #[serde(other)]
    Unknown,
}

/// One turn's rollup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnUsage {
    pub turn_id: String,
    pub session_id: String,
    /// The model of the turn's last call, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    pub state: TurnState,
    pub usage: UsageTotals,
}

/// One session's rollup (within one agent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionUsage {
    pub session_id: String,
    pub usage: UsageTotals,
    pub first_at: u64,
    pub last_at: u64,
}

/// `usage.agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageAgentQuery {
    pub agent_id: String,
}

/// The data of `usage.agent`: the agent's total, each of its sessions, and
/// its newest turns (newest first; the daemon keeps the latest 100).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageAgentResult {
    pub agent_id: String,
    pub total: UsageTotals,
    pub sessions: Vec<SessionUsage>,
    pub turns: Vec<TurnUsage>,
}

/// `usage.session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageSessionQuery {
    pub session_id: String,
}

/// The data of `usage.session`: the session's total over every agent that
/// ran it, and its newest turns still kept (newest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSessionResult {
    pub session_id: String,
    pub agent_ids: Vec<String>,
    pub total: UsageTotals,
    pub turns: Vec<TurnUsage>,
}

/// One agent's line in `usage.global`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentUsageLine {
    pub agent_id: String,
    pub usage: UsageTotals,
}

/// The data of `usage.global`: the whole daemon's total, and each agent
/// that spent anything (most tokens first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageGlobalResult {
    pub total: UsageTotals,
    pub agents: Vec<AgentUsageLine>,
}

/// `agent_usage` (registry event, every connection): an agent's rollup
/// changed. Carries totals only, never text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    pub agent_id: String,
    pub usage: UsageTotals,
}
