//! Budgets (CONTRACT.md, "Fleet limits and budgets"; docs/PROTOCOL-NOTES.md,
//! "Budgets"): what each agent, workspace and the daemon spent this day and
//! this month, against the caps of `[[budgets]]` and of `budget.set`.
//!
//! The book reads the spend from the usage ledgers ([`UsageBook`]) and adds
//! it up by scope: an agent's budget counts what its subagents spent too, a
//! workspace's every agent launched in it (and theirs), the daemon's every
//! agent. A host asks [`Budgets::hold`] whether its agent must pause, after
//! each of its agent's calls ([`Budgets::after_call`], which also says which
//! budgets changed state, for every client) and whenever the book says
//! budgets moved ([`Budgets::moved`]: a cap reached elsewhere, raised,
//! set, or a period's end). The caps set by people are kept in
//! `$SHARD_HOME/budgets.json`.

pub mod period;
pub mod rules;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use shard_platform::limits::BudgetRule;
use shard_protocol::budget::{
    BudgetKey, BudgetPeriod, BudgetScope, BudgetSet, BudgetState, BudgetStatus,
};
use shard_protocol::usage::UsageTotals;

pub use self::rules::Cap;
use super::usage::UsageBook;

const FILE: &str = "budgets.json";
/// At this share of a cap, every client is told.
pub const WARN_AT: f64 = 0.8;

/// Why a `budget.set` is refused.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "a budget's scope is \"agent\", \"workspace\" or \"daemon\", its period \"day\" or \"month\""
    )]
    Unknown,
    #[error("an agent's budget names its `agent_id` (and nothing else)")]
    AgentId,
    #[error("a workspace's budget names its `workspace_id` (and nothing else)")]
    WorkspaceId,
    #[error("the daemon's budget names no agent and no workspace")]
    DaemonNamed,
    #[error("no agent `{0}`")]
    NoAgent(String),
    #[error("no workspace `{0}`")]
    NoWorkspace(String),
    #[error("give `usd`, `tokens` or both, each more than 0 (or `clear`)")]
    NoCap,
    #[error(
        "raising a budget from a browser away from this machine needs a passkey: answer the paused agent's budget question"
    )]
    StepUp,
    #[error("cannot keep the budgets: {0}")]
    Store(#[source] anyhow::Error),
}

impl From<BudgetError> for shard_protocol::WireError {
    fn from(error: BudgetError) -> Self {
        use shard_protocol::ErrorCode;
        let code = match &error {
            BudgetError::NoAgent(_) | BudgetError::NoWorkspace(_) => ErrorCode::NotFound,
            BudgetError::StepUp => ErrorCode::PermissionDenied,
            BudgetError::Store(_) => ErrorCode::InternalError,
            _ => ErrorCode::InvalidRequest,
        };
        shard_protocol::WireError::new(code, error.to_string())
    }
}

/// A cap a person set for one budget: for good, or for one period only
/// (`period_key`: a raise).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SetCap {
    #[serde(flatten)]
    key: BudgetKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    period_key: Option<String>,
}

#[derive(Default)]
struct State {
    /// Caps people set, by budget.
    set: BTreeMap<BudgetKey, SetCap>,
    /// Each agent's parent, for agents that have one.
    parents: HashMap<String, String>,
    /// The workspace each agent was launched in.
    workspaces: HashMap<String, String>,
    /// What clients were last told of each budget: its period and state.
    told: HashMap<BudgetKey, (String, BudgetState)>,
    /// Budgets whose cap changed, for the watcher to tell every client.
    announce: Vec<BudgetStatus>,
}

pub struct Budgets {
    rules: Vec<BudgetRule>,
    usage: Arc<UsageBook>,
    home: PathBuf,
    state: Mutex<State>,
    /// Bumped whenever a hold may have changed: the hosts look again.
    moved: tokio::sync::watch::Sender<u64>,
}

impl Budgets {
    /// The budgets of `rules`, with the caps kept in `home`.
    pub fn new(home: &Path, rules: Vec<BudgetRule>, usage: Arc<UsageBook>) -> Self {
        let set = match std::fs::read(home.join(FILE)) {
            Ok(bytes) => serde_json::from_slice::<Vec<SetCap>>(&bytes).unwrap_or_else(|error| {
                tracing::warn!(%error, "unreadable budgets.json: the caps set before are lost");
                Vec::new()
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => {
                tracing::warn!(%error, "cannot read budgets.json: the caps set before are not in force");
                Vec::new()
            }
        };
        let set = set.into_iter().map(|cap| (cap.key.clone(), cap)).collect();
        let state = State { set, ..State::default() };
        Self {
            rules,
            usage,
            home: home.to_owned(),
            state: Mutex::new(state),
            moved: tokio::sync::watch::Sender::new(0),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether any budget could ever hold an agent.
    pub fn any(&self) -> bool {
        !self.rules.is_empty() || !self.state().set.is_empty()
    }

    /// `agent_id` is `parent`'s subagent.
    pub fn set_parent(&self, agent_id: &str, parent: Option<&str>) {
        let mut state = self.state();
        match parent {
            Some(parent) => state.parents.insert(agent_id.to_owned(), parent.to_owned()),
            None => state.parents.remove(agent_id),
        };
    }

    /// `agent_id` was launched in `workspace_id`.
    pub fn set_workspace(&self, agent_id: &str, workspace_id: &str) {
        self.state().workspaces.insert(agent_id.to_owned(), workspace_id.to_owned());
    }

    /// Tells when holds may have changed: the hosts of running agents look
    /// again.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.moved.subscribe()
    }

    fn bump(&self) {
        self.moved.send_modify(|generation| *generation += 1);
    }

    /// The budget at its cap that holds `agent_id` now, if one does.
    pub fn hold(&self, agent_id: &str, now: u64) -> Option<BudgetStatus> {
        if !self.any() {
            return None;
        }
        let state = self.state();
        let keys = rules::applying(&state, &self.rules, agent_id);
        keys.into_iter()
            .map(|key| self.status_of(&state, key, now))
            .find(|status| status.state == BudgetState::Reached)
    }

    /// After one of `agent_id`'s calls: the budgets over it whose state
    /// changed since clients were told (for `budget_updated`). When one
    /// reached its cap, every host looks again.
    pub fn after_call(&self, agent_id: &str, now: u64) -> Vec<BudgetStatus> {
        if !self.any() {
            return Vec::new();
        }
        let mut state = self.state();
        let keys = rules::applying(&state, &self.rules, agent_id);
        let statuses: Vec<BudgetStatus> =
            keys.into_iter().map(|key| self.status_of(&state, key, now)).collect();
        let changed = tell(&mut state, statuses);
        drop(state);
        if changed.iter().any(|status| status.state == BudgetState::Reached) {
            self.bump();
        }
        changed
    }

    /// Budgets told as warned or reached whose period ended (or whose cap
    /// moved): their new state, for `budget_updated`; the hosts look again
    /// when any was reached.
    pub fn review(&self, now: u64) -> Vec<BudgetStatus> {
        let mut state = self.state();
        let keys: Vec<BudgetKey> = state.told.keys().cloned().collect();
        let statuses: Vec<BudgetStatus> =
            keys.into_iter().map(|key| self.status_of(&state, key, now)).collect();
        let before: Vec<BudgetKey> = reached(&state);
        let changed = tell(&mut state, statuses);
        drop(state);
        if changed.iter().any(|status| before.contains(&status.key())) {
            self.bump();
        }
        changed
    }

    /// The budgets whose cap changed since last asked, to tell every
    /// client.
    pub fn announced(&self) -> Vec<BudgetStatus> {
        std::mem::take(&mut self.state().announce)
    }

    /// When the soonest period with a budget told as warned or reached
    /// ends: [`Budgets::review`] is due then.
    pub fn next_reset(&self, now: u64) -> Option<u64> {
        let state = self.state();
        let told = state.told.keys();
        told.map(|key| period::span(key.period, now).end).min()
    }

    /// `budget.list`.
    pub fn list(&self, agent_id: Option<&str>, now: u64) -> Vec<BudgetStatus> {
        let state = self.state();
        let keys = match agent_id {
            Some(agent_id) => rules::applying(&state, &self.rules, agent_id),
            None => rules::every(&state, &self.rules, &self.usage, now),
        };
        keys.into_iter().map(|key| self.status_of(&state, key, now)).collect()
    }

    /// The daemon's budgets for the day and the month as they stand at
    /// `now`, capped or not: what the fleet bar shows.
    pub fn daemon(&self, now: u64) -> Vec<BudgetStatus> {
        let state = self.state();
        [BudgetPeriod::Day, BudgetPeriod::Month]
            .into_iter()
            .map(|period| self.status_of(&state, key(BudgetScope::Daemon, None, period), now))
            .collect()
    }

    /// `budget.set`: `known` says whether an agent or workspace exists;
    /// `guarded`: asked from away where `[step_up]` applies, so it may not
    /// raise. The budget as it now stands, told to every client.
    pub fn set(
        &self,
        request: &BudgetSet,
        known: impl Fn(&BudgetKey) -> Result<(), BudgetError>,
        guarded: bool,
        now: u64,
    ) -> Result<BudgetStatus, BudgetError> {
        let key = rules::checked_key(request)?;
        known(&key)?;
        let mut state = self.state();
        let before = self.status_of(&state, key.clone(), now);
        if request.clear {
            state.set.remove(&key);
        } else {
            let cap = Cap::of(request.usd, request.tokens).ok_or(BudgetError::NoCap)?;
            if guarded && cap.raises(&Cap { usd: before.cap_usd, tokens: before.cap_tokens }) {
                return Err(BudgetError::StepUp);
            }
            let span = period::span(key.period, now);
            let period_key = request.this_period.then_some(span.key);
            let set = SetCap { key: key.clone(), usd: cap.usd, tokens: cap.tokens, period_key };
            state.set.insert(key.clone(), set);
        }
        self.save(&state)?;
        let status = self.status_of(&state, key, now);
        state.told.insert(status.key(), (period::span(status.period, now).key, status.state));
        state.announce.push(status.clone());
        drop(state);
        self.bump();
        Ok(status)
    }

    /// The answer to a budget question: each reached measure of `key`'s
    /// cap gets another cap's worth from what was spent, for this period
    /// ([`rules::raised`]). The budget as it now stands.
    pub fn raise(&self, key: &BudgetKey, now: u64) -> Result<BudgetStatus, BudgetError> {
        let status = self.status_of(&self.state(), key.clone(), now);
        let cap = rules::raised(&status);
        let request = BudgetSet {
            scope: key.scope,
            agent_id: key.agent_id.clone(),
            workspace_id: key.workspace_id.clone(),
            period: key.period,
            usd: cap.usd,
            tokens: cap.tokens,
            this_period: true,
            clear: false,
        };
        self.set(&request, |_| Ok(()), false, now)
    }

    fn save(&self, state: &State) -> Result<(), BudgetError> {
        let caps: Vec<&SetCap> = state.set.values().collect();
        let bytes =
            serde_json::to_vec_pretty(&caps).map_err(|error| BudgetError::Store(error.into()))?;
        crate::home::write_private(&self.home.join(FILE), &bytes)
            .map_err(|error| BudgetError::Store(error.into()))
    }

    /// `key` as it stands at `now`.
    fn status_of(&self, state: &State, key: BudgetKey, now: u64) -> BudgetStatus {
        let span = period::span(key.period, now);
        let (cap, source) = rules::cap(state, &self.rules, &key, &span.key);
        let spent = self.spent(state, &key, &span.key);
        let spent_usd = spent.cost.unwrap_or(0.0);
        let spent_tokens = spent.tokens();
        BudgetStatus {
            scope: key.scope,
            agent_id: key.agent_id,
            workspace_id: key.workspace_id,
            period: key.period,
            cap_usd: cap.usd,
            cap_tokens: cap.tokens,
            spent_usd,
            spent_tokens,
            unpriced_calls: spent.unpriced_calls,
            state: cap.state(spent_usd, spent_tokens),
            source,
            period_start: span.start,
            resets_at: span.end,
        }
    }

    /// What the agents under `key` spent in the period `period_key`.
    fn spent(&self, state: &State, key: &BudgetKey, period_key: &str) -> UsageTotals {
        let mut total = UsageTotals::default();
        let all = self.usage.spent_by_all(key.period, period_key);
        for (agent_id, spent) in all {
            if rules::counts_for(state, key, &agent_id) {
                total.add(&spent);
            }
        }
        total
    }
}

/// Records what clients are told of each budget; the ones whose period or
/// state changed since.
fn tell(state: &mut State, statuses: Vec<BudgetStatus>) -> Vec<BudgetStatus> {
    let mut changed = Vec::new();
    for status in statuses {
        let key = status.key();
        let period = period::span(status.period, status.period_start).key;
        let now = (period, status.state);
        let told = state.told.get(&key);
        let fresh = told.is_none() && status.state == BudgetState::Ok;
        if fresh || told == Some(&now) {
            continue;
        }
        if status.state == BudgetState::Ok {
            state.told.remove(&key);
        } else {
            state.told.insert(key, now);
        }
        changed.push(status);
    }
    changed
}

fn reached(state: &State) -> Vec<BudgetKey> {
    let told = state.told.iter();
    told.filter(|(_, (_, at))| *at == BudgetState::Reached).map(|(key, _)| key.clone()).collect()
}

/// A budget for `scope`, `period`, naming `id` as its scope needs.
pub fn key(scope: BudgetScope, id: Option<&str>, period: BudgetPeriod) -> BudgetKey {
    let id = id.map(str::to_owned);
    match scope {
        BudgetScope::Agent => BudgetKey { scope, agent_id: id, workspace_id: None, period },
        BudgetScope::Workspace => BudgetKey { scope, agent_id: None, workspace_id: id, period },
        _ => BudgetKey { scope, agent_id: None, workspace_id: None, period },
    }
}

/// Hands budget changes on until `stop`: when a hold may have changed,
/// every client is told of the caps that changed and every running
/// agent's host looks again; when a period with a budget
/// told as warned or reached ends, every client is told how it stands now.
pub async fn watch(
    budgets: Arc<Budgets>,
    broadcast: Arc<dyn crate::agents::Broadcast>,
    governed: Arc<dyn crate::agents::fleet::Governed>,
    stop: tokio_util::sync::CancellationToken,
) {
    /// A period's end is looked for at least this often (a clock moved,
    /// a suspended machine woke).
    const LOOK_EVERY: u64 = 60_000;
    let mut moved = budgets.subscribe();
    loop {
        let now = crate::clock::now_ms();
        let due = budgets.next_reset(now).map_or(LOOK_EVERY, |at| at.saturating_sub(now));
        let wait = std::time::Duration::from_millis(due.clamp(10, LOOK_EVERY));
        tokio::select! {
            () = stop.cancelled() => return,
            changed = moved.changed() => {
                if changed.is_err() {
                    return;
                }
                // Told first, then the agents go on.
                for budget in budgets.announced() {
                    broadcast.broadcast(&updated(budget));
                }
                governed.review_budgets();
            }
            () = tokio::time::sleep(wait) => {
                for budget in budgets.review(crate::clock::now_ms()) {
                    broadcast.broadcast(&updated(budget));
                }
            }
        }
    }
}

/// `budget_updated`, as sent.
pub fn updated(budget: BudgetStatus) -> crate::agents::Wire {
    use shard_protocol::budget::BudgetUpdated;
    let message = shard_protocol::ServerMessage::BudgetUpdated(BudgetUpdated { budget });
    crate::agents::Wire::from(shard_protocol::Envelope::new(message).to_json())
}

#[cfg(test)]
mod tests;
