//! The budgets' rules, on plain data: which budgets apply to an agent,
//! whose spend a budget counts, what its cap is, where it stands, and what
//! a raise makes it.

use std::collections::BTreeSet;

use shard_platform::limits::BudgetRule;
use shard_protocol::budget::{
    BudgetKey, BudgetPeriod, BudgetScope, BudgetSet, BudgetState, BudgetStatus, CapSource,
};

use super::{BudgetError, State, UsageBook, WARN_AT, key, period};

/// Parents followed at most: a cycle in the records never loops.
const MAX_DEPTH: usize = 32;
const PERIODS: [BudgetPeriod; 2] = [BudgetPeriod::Day, BudgetPeriod::Month];

/// A cap: dollars, tokens, or both; neither is no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cap {
    pub usd: Option<f64>,
    pub tokens: Option<u64>,
}

impl Cap {
    /// A cap of these, each more than zero; `None` when it caps nothing.
    pub fn of(usd: Option<f64>, tokens: Option<u64>) -> Option<Cap> {
        let usd_ok = usd.is_none_or(|usd| usd.is_finite() && usd > 0.0);
        let tokens_ok = tokens.is_none_or(|tokens| tokens > 0);
        (usd_ok && tokens_ok && (usd.is_some() || tokens.is_some())).then_some(Cap { usd, tokens })
    }

    /// Whether this cap lets more be spent than `before` in any measure
    /// (a measure without a cap is the most).
    pub fn raises(&self, before: &Cap) -> bool {
        let more_usd = match (self.usd, before.usd) {
            (None, Some(_)) => true,
            (Some(now), Some(was)) => now > was,
            _ => false,
        };
        let more_tokens = match (self.tokens, before.tokens) {
            (None, Some(_)) => true,
            (Some(now), Some(was)) => now > was,
            _ => false,
        };
        more_usd || more_tokens
    }

    /// Where `spent` stands against the cap: reached at it, warned from
    /// [`WARN_AT`] of it.
    pub fn state(&self, spent_usd: f64, spent_tokens: u64) -> BudgetState {
        let shares = [
            self.usd.map(|cap| spent_usd / cap),
            self.tokens.map(|cap| spent_tokens as f64 / cap as f64),
        ];
        let most = shares.into_iter().flatten().fold(0.0_f64, f64::max);
        if most >= 1.0 {
            BudgetState::Reached
        } else if most >= WARN_AT {
            BudgetState::Warning
        } else {
            BudgetState::Ok
        }
    }
}

/// The cap of `key` in the period `period_key`, and where it comes from:
/// one a person set (a raise only in the period it was made for), else
/// `config.toml`'s.
pub(super) fn cap(
    state: &State,
    rules: &[BudgetRule],
    key: &BudgetKey,
    period_key: &str,
) -> (Cap, CapSource) {
    let set = state
        .set
        .get(key)
        .filter(|set| set.period_key.as_deref().is_none_or(|at| at == period_key));
    if let Some(set) = set {
        let source = if set.period_key.is_some() { CapSource::Raised } else { CapSource::Set };
        return (Cap { usd: set.usd, tokens: set.tokens }, source);
    }
    let rule = rules.iter().find(|rule| (rule.scope, rule.period) == (key.scope, key.period));
    let cap = rule.map(|rule| Cap { usd: rule.usd, tokens: rule.tokens }).unwrap_or_default();
    (cap, CapSource::Config)
}

fn has_cap(state: &State, rules: &[BudgetRule], key: &BudgetKey) -> bool {
    let ruled = rules.iter().any(|rule| (rule.scope, rule.period) == (key.scope, key.period));
    ruled || state.set.contains_key(key)
}

/// `agent_id`, then its parent, and theirs.
fn lineage<'a>(state: &'a State, agent_id: &'a str) -> impl Iterator<Item = &'a str> {
    let mut next = Some(agent_id);
    std::iter::from_fn(move || {
        let this = next?;
        next = state.parents.get(this).map(String::as_str);
        Some(this)
    })
    .take(MAX_DEPTH)
}

/// The workspace `agent_id` works in: its own, or its nearest ancestor's.
fn workspace_of<'a>(state: &'a State, agent_id: &'a str) -> Option<&'a str> {
    lineage(state, agent_id).find_map(|agent| state.workspaces.get(agent).map(String::as_str))
}

/// Every budget with a cap over `agent_id`: its own and each ancestor's,
/// its workspace's, the daemon's; days first.
pub(super) fn applying(state: &State, rules: &[BudgetRule], agent_id: &str) -> Vec<BudgetKey> {
    let mut keys = Vec::new();
    for period in PERIODS {
        for agent in lineage(state, agent_id) {
            keys.push(key(BudgetScope::Agent, Some(agent), period));
        }
        if let Some(workspace) = workspace_of(state, agent_id) {
            keys.push(key(BudgetScope::Workspace, Some(workspace), period));
        }
        keys.push(key(BudgetScope::Daemon, None, period));
    }
    keys.retain(|key| has_cap(state, rules, key));
    keys
}

/// Every budget worth listing: each with a cap a person set, the daemon's,
/// and of the scopes `config.toml` caps, each workspace and each agent that
/// spent anything this period.
pub(super) fn every(
    state: &State,
    rules: &[BudgetRule],
    usage: &UsageBook,
    now: u64,
) -> Vec<BudgetKey> {
    let mut keys: BTreeSet<BudgetKey> = state.set.keys().cloned().collect();
    for rule in rules {
        let span = period::span(rule.period, now);
        match rule.scope {
            BudgetScope::Daemon => {
                keys.insert(key(BudgetScope::Daemon, None, rule.period));
            }
            BudgetScope::Workspace => {
                let workspaces: BTreeSet<&String> = state.workspaces.values().collect();
                for workspace in workspaces {
                    keys.insert(key(BudgetScope::Workspace, Some(workspace), rule.period));
                }
            }
            BudgetScope::Agent => {
                for (agent_id, _) in usage.spent_by_all(rule.period, &span.key) {
                    keys.insert(key(BudgetScope::Agent, Some(&agent_id), rule.period));
                }
            }
            BudgetScope::Unknown => {}
        }
    }
    keys.into_iter().collect()
}

/// Whether what `agent_id` spends counts against `key`.
pub(super) fn counts_for(state: &State, key: &BudgetKey, agent_id: &str) -> bool {
    match key.scope {
        BudgetScope::Agent => {
            let owner = key.agent_id.as_deref();
            lineage(state, agent_id).any(|agent| Some(agent) == owner)
        }
        BudgetScope::Workspace => {
            workspace_of(state, agent_id).is_some_and(|at| Some(at) == key.workspace_id.as_deref())
        }
        BudgetScope::Daemon => true,
        BudgetScope::Unknown => false,
    }
}

/// The budget a `budget.set` names, checked for the ids its scope needs.
pub(super) fn checked_key(request: &BudgetSet) -> Result<BudgetKey, BudgetError> {
    let key = request.key();
    let named = (key.agent_id.is_some(), key.workspace_id.is_some());
    match (key.scope, named) {
        (BudgetScope::Unknown, _) => Err(BudgetError::Unknown),
        _ if key.period == BudgetPeriod::Unknown => Err(BudgetError::Unknown),
        (BudgetScope::Agent, (true, false))
        | (BudgetScope::Workspace, (false, true))
        | (BudgetScope::Daemon, (false, false)) => Ok(key),
        (BudgetScope::Agent, _) => Err(BudgetError::AgentId),
        (BudgetScope::Workspace, _) => Err(BudgetError::WorkspaceId),
        (BudgetScope::Daemon, _) => Err(BudgetError::DaemonNamed),
    }
}

/// What a raise makes a reached budget's cap: each measure at its cap gets
/// another cap's worth from what was spent; the others stay.
pub fn raised(status: &BudgetStatus) -> Cap {
    let usd = status.cap_usd.map(|cap| match status.spent_usd >= cap {
        true => round_cents(status.spent_usd + cap),
        false => cap,
    });
    let tokens = status.cap_tokens.map(|cap| match status.spent_tokens >= cap {
        true => status.spent_tokens.saturating_add(cap),
        false => cap,
    });
    Cap { usd, tokens }
}

fn round_cents(usd: f64) -> f64 {
    (usd * 100.0).ceil() / 100.0
}
