//! Budgets (CONTRACT.md, "Fleet limits and budgets"; docs/PROTOCOL-NOTES.md,
//! "Budgets"): caps on what agents spend per day or month, in dollars where
//! the models are priced and in tokens, for one agent (with what its
//! subagents spend), a workspace or the whole daemon. An agent at a cap
//! pauses before its next model call (`status: "paused"`) until a person
//! raises the cap or the period ends.
//!
//! These are orchestrator messages: `agent_id` and `workspace_id` are
//! payload, never a routing tag (§5.2) — but for [`Hold`], which the daemon
//! sends its own agent process.

use serde::{Deserialize, Serialize};

/// Whose spend a budget caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// One agent, with every subagent under it.
    Agent,
    /// Every agent launched in one workspace.
    Workspace,
    /// Every agent of the daemon.
    Daemon,
    #[serde(other)]
    Unknown,
}

/// How long a budget's spend adds up before it starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetPeriod {
    /// The calendar day, in the daemon's local time.
    Day,
    /// The calendar month, in the daemon's local time.
    Month,
    #[serde(other)]
    Unknown,
}

/// Where a budget stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetState {
    /// Under 80 % of every cap.
    Ok,
    /// At 80 % of a cap or more.
    Warning,
    /// A cap is reached: the agents under it pause before their next
    /// model call.
    Reached,
    #[serde(other)]
    Unknown,
}

/// Where a budget's cap comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapSource {
    /// A `[[budgets]]` table of `config.toml`.
    Config,
    /// `budget.set`, until it is cleared.
    Set,
    /// Raised for this period only (`budget.set` with `this_period`, or the
    /// answer to a budget question); the period's end takes it back.
    Raised,
    #[serde(other)]
    Unknown,
}

/// Which budget: a scope, the agent or workspace it is about, a period.
/// (Its fields are written out in each message that names a budget, not
/// flattened: the browser decodes them, and flattening costs its bundle.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BudgetKey {
    pub scope: BudgetScope,
    /// For `scope: "agent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// For `scope: "workspace"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    pub period: BudgetPeriod,
}

/// One budget as it stands now: its cap, what was spent against it in the
/// current period, and what that means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetStatus {
    pub scope: BudgetScope,
    /// For `scope: "agent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// For `scope: "workspace"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    pub period: BudgetPeriod,
    /// The cap in dollars, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_usd: Option<f64>,
    /// The cap in tokens (every kind together), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_tokens: Option<u64>,
    /// Spent this period by the calls whose model is priced.
    pub spent_usd: f64,
    pub spent_tokens: u64,
    /// Calls this period whose model has no price: their tokens count,
    /// their cost is not known (`spent_usd` is then a lower bound).
    #[serde(default)]
    pub unpriced_calls: u64,
    pub state: BudgetState,
    pub source: CapSource,
    /// When the current period began and when it ends (ms since the epoch).
    pub period_start: u64,
    pub resets_at: u64,
}

/// `budget.list` (Shard extension): with `agent_id`, every budget that
/// applies to that agent (its own, its parents', its workspace's, the
/// daemon's); without, every budget with a cap or with spend this period.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

impl BudgetStatus {
    /// Which budget this is.
    pub fn key(&self) -> BudgetKey {
        BudgetKey {
            scope: self.scope,
            agent_id: self.agent_id.clone(),
            workspace_id: self.workspace_id.clone(),
            period: self.period,
        }
    }
}

impl BudgetSet {
    /// Which budget this sets.
    pub fn key(&self) -> BudgetKey {
        BudgetKey {
            scope: self.scope,
            agent_id: self.agent_id.clone(),
            workspace_id: self.workspace_id.clone(),
            period: self.period,
        }
    }
}

/// The answer to `budget.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetListResult {
    pub budgets: Vec<BudgetStatus>,
}

/// `budget.set` (Shard extension): the cap of one budget. With `clear`,
/// the budget goes back to what `config.toml` says; else its cap becomes
/// `usd` and `tokens` (at least one), for good or, with `this_period`,
/// until the current period ends. Answers the budget as it now stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetSet {
    pub scope: BudgetScope,
    /// For `scope: "agent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// For `scope: "workspace"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<String>,
    pub period: BudgetPeriod,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub this_period: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clear: bool,
}

/// The answer to `budget.set`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetSetResult {
    pub budget: BudgetStatus,
}

/// `budget_updated` (Shard extension, registry event, every connection): a
/// budget's state changed (a cap's 80 % passed, a cap reached, a new
/// period) or its cap did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetUpdated {
    pub budget: BudgetStatus,
}

/// `hold` (Shard extension; only the daemon sends it, to its own agent
/// process): `held`, make no model call until told otherwise — a turn
/// that reaches its next model call waits there with `status: "paused"`,
/// and so does a prompt; `held: false` goes on with what waited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub held: bool,
    /// Why, for the `status` event's `detail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The `tool_name` of the daemon's question to raise a reached budget.
pub const BUDGET_TOOL: &str = "budget";
