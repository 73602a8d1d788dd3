//! Usage rollups (docs/PROTOCOL-NOTES.md, "Usage rollups"): what each turn,
//! session and agent has spent, and the daemon's total, from the `usage`
//! event the agent sends after every provider call and its `turn_start` and
//! `turn_end`.
//!
//! One book for the daemon, shared by every host: a host records its
//! agent's events as they pass (never holding the lock across an await),
//! and the registry's commands read it without waking a dormant agent.
//! Each agent's ledger is `agents/<id>/usage.json` (0600), replaced
//! atomically whenever it changes, so a daemon killed at any instant
//! keeps every call recorded before it; a turn the daemon never saw end is
//! marked `interrupted` when it next loads.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use shard_protocol::budget::BudgetPeriod;
use shard_protocol::types::Usage;
use shard_protocol::usage::{
    AgentUsageLine, SessionUsage, TurnState, TurnUsage, UsageAgentResult, UsageGlobalResult,
    UsageSessionResult, UsageTotals,
};

use super::manifest::agent_dir;

/// Turns kept per agent, newest: enough to see what the last hours cost;
/// sessions and totals keep everything older.
pub const KEPT_TURNS: usize = 100;
/// Days and months whose spend is kept per agent, newest (budgets, and
/// what a day or a month cost).
pub const KEPT_DAYS: usize = 31;
pub const KEPT_MONTHS: usize = 12;
const FILE: &str = "usage.json";
const VERSION: u32 = 1;

/// One agent's ledger, as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Ledger {
    version: u32,
    total: UsageTotals,
    sessions: BTreeMap<String, SessionUsage>,
    /// By local calendar day (`2026-12-06`) and month (`2026-12`): the
    /// spend budgets count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    days: BTreeMap<String, UsageTotals>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    months: BTreeMap<String, UsageTotals>,
    /// Oldest first. In memory only while the agent's host is awake (or a
    /// command asked): a dormant agent costs its totals, not its turns.
    turns: VecDeque<TurnUsage>,
    /// Whether `turns` holds the file's turns.
    #[serde(skip)]
    turns_loaded: bool,
    /// The file could not be read (not absent: unreadable for now): the
    /// figures are kept in memory but never written over it.
    #[serde(skip)]
    frozen: bool,
}

impl Ledger {
    /// The turn `turn_id` if it is the newest one still running.
    fn running(&mut self, turn_id: Option<&str>) -> Option<&mut TurnUsage> {
        self.turns.back_mut().filter(|turn| {
            turn.state == TurnState::Running && turn_id.is_none_or(|id| turn.turn_id == id)
        })
    }

    /// A turn that did not end where it was recorded running (a crash, a
    /// killed process) is closed as interrupted.
    fn interrupt_running(&mut self, at: u64) -> bool {
        match self.running(None) {
            Some(turn) => {
                turn.state = TurnState::Interrupted;
                turn.ended_at = Some(at);
                true
            }
            None => false,
        }
    }
}

/// An agent's new total, for the caller to announce.
pub type Changed = Option<UsageTotals>;

/// What a change leaves to do once the book's lock is released: write the
/// ledger (serialized under the lock, so no copy of it is made), synced to
/// disk or not.
struct Save {
    bytes: Vec<u8>,
    durable: bool,
}

pub struct UsageBook {
    home: PathBuf,
    ledgers: Mutex<HashMap<String, Ledger>>,
}

impl UsageBook {
    pub fn new(home: &Path) -> Self {
        Self { home: home.to_owned(), ledgers: Mutex::new(HashMap::new()) }
    }

    fn ledgers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ledger>> {
        self.ledgers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads `agent_id`'s ledger from its file. Absent: a new one. Not
    /// JSON: kept aside as `usage.json.unreadable` and a new one started.
    /// Unreadable for another reason (permissions, too many open files):
    /// frozen, so that what it holds is never overwritten.
    fn read(&self, agent_id: &str) -> Ledger {
        let path = self.path(agent_id);
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<Ledger>(&bytes) {
                Ok(mut ledger) => {
                    ledger.turns_loaded = true;
                    ledger
                }
                Err(error) => {
                    tracing::warn!(agent = %agent_id, %error, "unreadable usage ledger kept aside; starting a new one");
                    let _ = std::fs::rename(&path, path.with_extension("json.unreadable"));
                    Ledger { turns_loaded: true, ..Ledger::default() }
                }
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Ledger { turns_loaded: true, ..Ledger::default() }
            }
            Err(error) => {
                tracing::error!(agent = %agent_id, %error, "cannot read the usage ledger; it is not written until the daemon restarts");
                Ledger { turns_loaded: true, frozen: true, ..Ledger::default() }
            }
        }
    }

    /// Reads `agent_id`'s ledger at daemon start, keeping its totals. A
    /// turn left running by the daemon that wrote it is closed as
    /// interrupted.
    pub fn load(&self, agent_id: &str) {
        let mut ledger = self.read(agent_id);
        ledger.version = VERSION;
        let save = ledger
            .interrupt_running(crate::clock::now_ms())
            .then(|| encode(agent_id, &ledger, true))
            .flatten();
        ledger.turns = VecDeque::new();
        ledger.turns_loaded = false;
        self.ledgers().insert(agent_id.to_owned(), ledger);
        self.write(agent_id, save);
    }

    /// The agent's host went dormant: its turns stay on disk only.
    pub fn forget_turns(&self, agent_id: &str) {
        if let Some(ledger) = self.ledgers().get_mut(agent_id)
            && !ledger.frozen
        {
            ledger.turns = VecDeque::new();
            ledger.turns_loaded = false;
        }
    }

    /// Runs `change` on the agent's ledger with its turns in memory (read
    /// from the file if they are not), then writes what it asks for.
    fn change<T>(&self, agent_id: &str, change: impl FnOnce(&mut Ledger) -> (T, bool)) -> T {
        let needs_turns = self.ledgers().get(agent_id).is_none_or(|ledger| !ledger.turns_loaded);
        // Read outside the lock; only this agent's host changes its ledger.
        let from_disk = needs_turns.then(|| self.read(agent_id));
        let mut ledgers = self.ledgers();
        let ledger = ledgers.entry(agent_id.to_owned()).or_default();
        if let Some(read) = from_disk
            && !ledger.turns_loaded
        {
            ledger.turns = read.turns;
            ledger.turns_loaded = true;
            ledger.frozen |= read.frozen;
        }
        let (result, durable) = change(ledger);
        ledger.version = VERSION;
        let save = encode(agent_id, ledger, durable);
        drop(ledgers);
        self.write(agent_id, save);
        result
    }

    /// A turn started in `session_id`.
    pub fn turn_started(&self, agent_id: &str, session_id: &str, turn_id: &str, at: u64) {
        self.change(agent_id, |ledger| {
            ledger.interrupt_running(at);
            ledger.turns.push_back(TurnUsage {
                turn_id: turn_id.to_owned(),
                session_id: session_id.to_owned(),
                model: None,
                started_at: at,
                ended_at: None,
                state: TurnState::Running,
                usage: UsageTotals::default(),
            });
            while ledger.turns.len() > KEPT_TURNS {
                ledger.turns.pop_front();
            }
            ((), false)
        })
    }

    /// One provider call's usage. Returns the agent's new total.
    pub fn call(&self, agent_id: &str, session_id: &str, call: &Usage, at: u64) -> Changed {
        self.change(agent_id, |ledger| {
            // A call outside a turn (a manual compaction) counts for the
            // session and the agent, not for a turn.
            let mut first_of_turn = false;
            if let Some(turn) = ledger.running(None) {
                first_of_turn = turn.usage.calls == 0;
                turn.usage.add_call(call);
                if first_of_turn {
                    turn.usage.turns = 1;
                }
                if call.model.is_some() {
                    turn.model.clone_from(&call.model);
                }
            }
            let turns = u64::from(first_of_turn);
            let session =
                ledger.sessions.entry(session_id.to_owned()).or_insert_with(|| SessionUsage {
                    session_id: session_id.to_owned(),
                    usage: UsageTotals::default(),
                    first_at: at,
                    last_at: at,
                });
            session.usage.add_call(call);
            session.usage.turns += turns;
            session.last_at = at;
            let (day, month) = super::budgets::period::keys(at);
            for (periods, key, kept) in
                [(&mut ledger.days, day, KEPT_DAYS), (&mut ledger.months, month, KEPT_MONTHS)]
            {
                let spent = periods.entry(key).or_default();
                spent.add_call(call);
                spent.turns += turns;
                while periods.len() > kept {
                    periods.pop_first();
                }
            }
            ledger.total.add_call(call);
            ledger.total.turns += turns;
            (Some(ledger.total.clone()), false)
        })
    }

    /// The turn ended (`turn_end`), or its process went away first: the
    /// ledger is synced to disk here, once a turn.
    pub fn turn_ended(&self, agent_id: &str, turn_id: Option<&str>, state: TurnState, at: u64) {
        let running = self
            .ledgers()
            .get_mut(agent_id)
            .is_some_and(|ledger| !ledger.turns_loaded || ledger.running(turn_id).is_some());
        if !running {
            return;
        }
        self.change(agent_id, |ledger| match ledger.running(turn_id) {
            Some(turn) => {
                turn.state = state;
                turn.ended_at = Some(at);
                ((), true)
            }
            None => ((), false),
        })
    }

    /// The agent's total, if it ever spent anything.
    pub fn total(&self, agent_id: &str) -> Option<UsageTotals> {
        let ledgers = self.ledgers();
        let total = &ledgers.get(agent_id)?.total;
        (total.calls > 0).then(|| total.clone())
    }

    /// What the agent spent in the period `key` names (a day's or a
    /// month's, [`super::budgets::period`]).
    pub fn spent(&self, agent_id: &str, period: BudgetPeriod, key: &str) -> UsageTotals {
        let ledgers = self.ledgers();
        let Some(ledger) = ledgers.get(agent_id) else { return UsageTotals::default() };
        periods(ledger, period).get(key).cloned().unwrap_or_default()
    }

    /// Every agent that spent anything in the period `key` names, and
    /// what.
    pub fn spent_by_all(&self, period: BudgetPeriod, key: &str) -> Vec<(String, UsageTotals)> {
        let ledgers = self.ledgers();
        let spent = ledgers.iter().filter_map(|(agent_id, ledger)| {
            periods(ledger, period).get(key).map(|spent| (agent_id.clone(), spent.clone()))
        });
        spent.collect()
    }

    /// The agent's ledger with its turns, read from the file for a dormant
    /// agent (and not kept).
    fn whole(&self, agent_id: &str) -> Ledger {
        if let Some(ledger) = self.ledgers().get(agent_id).filter(|ledger| ledger.turns_loaded) {
            return ledger.clone();
        }
        let mut ledger = self.read(agent_id);
        if let Some(known) = self.ledgers().get(agent_id) {
            // What is in memory is newer than a frozen or lagging file.
            ledger.total = known.total.clone();
            ledger.sessions = known.sessions.clone();
        }
        ledger
    }

    /// `usage.agent`.
    pub fn agent(&self, agent_id: &str) -> UsageAgentResult {
        let ledger = self.whole(agent_id);
        let mut sessions: Vec<SessionUsage> = ledger.sessions.into_values().collect();
        sessions.sort_by(|a, b| (a.first_at, &a.session_id).cmp(&(b.first_at, &b.session_id)));
        UsageAgentResult {
            agent_id: agent_id.to_owned(),
            total: ledger.total,
            sessions,
            turns: ledger.turns.into_iter().rev().collect(),
        }
    }

    /// `usage.session`: every agent that ran `session_id` (one at a time,
    /// but a session can move between agents), added up.
    pub fn session(&self, session_id: &str) -> Option<UsageSessionResult> {
        let holders: Vec<(String, UsageTotals)> = self
            .ledgers()
            .iter()
            .filter_map(|(agent_id, ledger)| {
                ledger
                    .sessions
                    .get(session_id)
                    .map(|session| (agent_id.clone(), session.usage.clone()))
            })
            .collect();
        if holders.is_empty() {
            return None;
        }
        let mut total = UsageTotals::default();
        let mut turns = Vec::new();
        let mut agent_ids = Vec::new();
        for (agent_id, usage) in holders {
            total.add(&usage);
            let ledger = self.whole(&agent_id);
            turns.extend(ledger.turns.into_iter().filter(|turn| turn.session_id == session_id));
            agent_ids.push(agent_id);
        }
        agent_ids.sort();
        turns.sort_by(|a, b| (b.started_at, &b.turn_id).cmp(&(a.started_at, &a.turn_id)));
        Some(UsageSessionResult { session_id: session_id.to_owned(), agent_ids, total, turns })
    }

    /// `usage.global`: the daemon's total and every agent that spent
    /// anything, most tokens first.
    pub fn global(&self) -> UsageGlobalResult {
        let ledgers = self.ledgers();
        let mut total = UsageTotals::default();
        let mut agents = Vec::new();
        for (agent_id, ledger) in ledgers.iter().filter(|(_, ledger)| ledger.total.calls > 0) {
            total.add(&ledger.total);
            agents.push(AgentUsageLine { agent_id: agent_id.clone(), usage: ledger.total.clone() });
        }
        agents.sort_by(|a, b| {
            b.usage.tokens().cmp(&a.usage.tokens()).then_with(|| a.agent_id.cmp(&b.agent_id))
        });
        UsageGlobalResult { total, agents }
    }

    fn path(&self, agent_id: &str) -> PathBuf {
        agent_dir(&self.home, agent_id).join(FILE)
    }

    /// Replaces the agent's ledger file: atomically, and synced at a turn's
    /// end. A failure is logged: the rollups stay right in memory, and the
    /// next change tries again.
    fn write(&self, agent_id: &str, save: Option<Save>) {
        let Some(Save { bytes, durable }) = save else { return };
        let path = self.path(agent_id);
        let result = if durable {
            crate::home::write_private(&path, &bytes)
        } else {
            crate::home::replace_private(&path, &bytes)
        };
        if let Err(error) = result {
            tracing::warn!(agent = %agent_id, %error, "cannot write the usage ledger");
        }
    }
}

fn periods(ledger: &Ledger, period: BudgetPeriod) -> &BTreeMap<String, UsageTotals> {
    match period {
        BudgetPeriod::Month => &ledger.months,
        BudgetPeriod::Day | BudgetPeriod::Unknown => &ledger.days,
    }
}

/// The ledger as its file holds it; nothing for a frozen one.
fn encode(agent_id: &str, ledger: &Ledger, durable: bool) -> Option<Save> {
    if ledger.frozen || !ledger.turns_loaded {
        return None;
    }
    match serde_json::to_vec(ledger) {
        Ok(bytes) => Some(Save { bytes, durable }),
        Err(error) => {
            tracing::warn!(agent = %agent_id, %error, "cannot encode the usage ledger");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(input: u64, output: u64, cost: Option<f64>) -> Usage {
        Usage { input, output, cost, model: Some("m".into()), ..Usage::default() }
    }

    #[test]
    fn turns_sessions_agents_and_the_daemon_add_up_and_survive_a_reload() {
        let home = tempfile::tempdir().expect("home");
        for agent in ["a1", "a2"] {
            std::fs::create_dir_all(agent_dir(home.path(), agent)).expect("dir");
        }
        let book = UsageBook::new(home.path());
        book.turn_started("a1", "s1", "t1", 10);
        book.call("a1", "s1", &call(100, 10, Some(0.5)), 11);
        book.call("a1", "s1", &call(50, 5, None), 12);
        book.turn_ended("a1", Some("t1"), TurnState::Ended, 13);
        book.turn_started("a1", "s2", "t2", 20);
        book.call("a1", "s2", &call(1, 1, Some(0.25)), 21);
        book.turn_started("a2", "s3", "t3", 30);
        book.call("a2", "s3", &call(7, 3, Some(1.0)), 31);

        let a1 = book.agent("a1");
        assert_eq!((a1.total.input, a1.total.output, a1.total.calls), (151, 16, 3));
        assert_eq!((a1.total.cost, a1.total.unpriced_calls, a1.total.turns), (Some(0.75), 1, 2));
        let sessions: Vec<_> = a1
            .sessions
            .iter()
            .map(|s| (s.session_id.as_str(), s.usage.input, s.usage.turns))
            .collect();
        assert_eq!(sessions, [("s1", 150, 1), ("s2", 1, 1)]);
        assert_eq!(a1.turns[0].turn_id, "t2");
        assert_eq!(a1.turns[0].state, TurnState::Running);
        assert_eq!((a1.turns[1].usage.input, a1.turns[1].state), (150, TurnState::Ended));
        let global = book.global();
        assert_eq!(
            (global.total.input, global.total.cost, global.total.turns),
            (158, Some(1.75), 3)
        );
        assert_eq!(global.agents[0].agent_id, "a1");

        // A new daemon: everything recorded is back, and the turn that was
        // running is closed as interrupted.
        let again = UsageBook::new(home.path());
        again.load("a1");
        again.load("a2");
        assert_eq!(again.global().total, global.total);
        let a1 = again.agent("a1");
        assert_eq!(a1.turns[0].state, TurnState::Interrupted);
        assert!(a1.turns[0].ended_at.is_some());
    }

    #[test]
    fn each_day_and_month_keeps_what_it_spent_for_the_budgets() {
        let home = tempfile::tempdir().expect("home");
        for agent in ["a1", "a2"] {
            std::fs::create_dir_all(agent_dir(home.path(), agent)).expect("dir");
        }
        let book = UsageBook::new(home.path());
        let long_ago = 86_400_000 * 40;
        book.call("a1", "s1", &call(100, 10, Some(1.0)), long_ago);
        let now = crate::clock::now_ms();
        book.call("a2", "s2", &call(2, 0, Some(0.5)), now);
        book.call("a2", "s2", &call(3, 0, None), now);
        let (day, month) = super::super::budgets::period::keys(now);
        let today = book.spent("a2", BudgetPeriod::Day, &day);
        assert_eq!(
            (today.input, today.cost, today.calls, today.unpriced_calls),
            (5, Some(0.5), 2, 1)
        );
        assert_eq!(book.spent("a2", BudgetPeriod::Month, &month).input, 5);
        assert_eq!(book.spent("a1", BudgetPeriod::Day, &day), UsageTotals::default());
        let (then, _) = super::super::budgets::period::keys(long_ago);
        let that_day = book.spent_by_all(BudgetPeriod::Day, &then);
        assert_eq!(that_day.len(), 1);
        assert_eq!((that_day[0].0.as_str(), that_day[0].1.input), ("a1", 100));
        // Kept across a restart.
        let again = UsageBook::new(home.path());
        again.load("a2");
        assert_eq!(again.spent("a2", BudgetPeriod::Day, &day).input, 5);
    }

    #[test]
    fn only_the_newest_turns_are_kept_but_totals_keep_everything() {
        let home = tempfile::tempdir().expect("home");
        std::fs::create_dir_all(agent_dir(home.path(), "a")).expect("dir");
        let book = UsageBook::new(home.path());
        for turn in 0..(KEPT_TURNS as u64 + 20) {
            let id = format!("t{turn}");
            book.turn_started("a", "s", &id, turn);
            book.call("a", "s", &call(1, 0, None), turn);
            book.turn_ended("a", Some(&id), TurnState::Ended, turn);
        }
        let agent = book.agent("a");
        assert_eq!(agent.turns.len(), KEPT_TURNS);
        assert_eq!(agent.total.turns, KEPT_TURNS as u64 + 20);
        assert_eq!(agent.turns[0].turn_id, format!("t{}", KEPT_TURNS + 19));
    }
}
