//! The fleet and its budgets, as the page shows them: what every running
//! agent's processes use and what the daemon spent, against the limits of
//! `config.toml` (`fleet.watch`, then each `fleet_updated`), and the
//! budgets of the agent on screen (`budget.list`, `budget.set`, kept
//! current by `budget_updated`).

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::budget::{BudgetList, BudgetListResult, BudgetSet, BudgetSetResult};
use shard_protocol::fleet::{FleetUpdated, FleetWatch, Resources};
use shard_protocol::message::Response;

use crate::kept::Kept;
use crate::link::{Link, Request};

#[derive(Clone, Copy)]
pub struct Fleet {
    /// The last look the daemon told, once it answered `fleet.watch`.
    pub now: RwSignal<Option<FleetUpdated>>,
    /// The budgets of the agent on screen, and whose they are (decoded by
    /// the budget panel, whose code comes with it).
    pub budgets: RwSignal<Option<(String, Kept<BudgetListResult>)>>,
    /// The budget panel's open state.
    pub budgets_open: RwSignal<bool>,
    /// What the last `budget.set` from this page came to: the budget as
    /// it stands, or the daemon's refusal.
    pub set: RwSignal<Option<Result<Kept<BudgetSetResult>, String>>>,
    link: Link,
}

impl Fleet {
    pub fn new(link: Link) -> Self {
        Self {
            now: RwSignal::new(None),
            budgets: RwSignal::new(None),
            budgets_open: RwSignal::new(false),
            set: RwSignal::new(None),
            link,
        }
    }

    /// Asks for the fleet now and every change after (on each connection).
    pub fn watch(&self) {
        let watch = ClientMessage::FleetWatch(FleetWatch { watch: true });
        self.link.send(watch, None, Request::Fleet);
    }

    /// The answer to `fleet.watch`.
    pub fn answered(&self, response: &Response) {
        if let Ok(now) = response.data::<FleetUpdated>() {
            self.now.set(Some(now));
        }
    }

    pub fn updated(&self, now: FleetUpdated) {
        self.now.set(Some(now));
    }

    /// What `agent_id`'s processes use, as of the last look.
    pub fn of(&self, agent_id: &str) -> Option<Resources> {
        self.now.with(|now| {
            let agents = &now.as_ref()?.agents;
            agents.iter().find(|agent| agent.agent_id == agent_id).map(|agent| agent.resources)
        })
    }

    /// Asks for every budget that applies to `agent_id`.
    pub fn list_budgets(&self, agent_id: &str) {
        let list = BudgetList { agent_id: Some(agent_id.to_owned()) };
        let request = Request::Budgets { agent_id: agent_id.to_owned() };
        self.link.send(ClientMessage::BudgetList(list), None, request);
    }

    pub fn budgets_listed(&self, agent_id: String, response: Response) {
        if let Ok(data) = response.outcome {
            self.budgets.set(Some((agent_id, Kept::new(data.unwrap_or_default()))));
        }
    }

    /// Sends `budget.set`.
    pub fn set_budget(&self, set: BudgetSet) {
        self.set.set(None);
        self.link.send(ClientMessage::BudgetSet(set), None, Request::BudgetSet);
    }

    /// The answer to `budget.set`. The panel lists again: a budget new to
    /// the agent is in no list yet.
    pub fn budget_set(&self, response: Response) {
        let done = response.success();
        self.set.set(Some(match response.outcome {
            Ok(data) => Ok(Kept::new(data.unwrap_or_default())),
            Err(error) => Err(error.message),
        }));
        if done {
            self.budget_updated();
        }
    }

    /// A budget changed (`budget_updated`): an open panel lists again.
    /// (The fleet bar's spend comes with the next look.)
    pub fn budget_updated(&self) {
        let shown = self.budgets.with_untracked(|shown| shown.as_ref().map(|(id, _)| id.clone()));
        if let Some(agent_id) = shown.filter(|_| self.budgets_open.get_untracked()) {
            self.list_budgets(&agent_id);
        }
    }

    /// Another agent is on screen: an open budget panel shows its budgets.
    pub fn shown(&self, agent_id: Option<&str>) {
        self.set.set(None);
        if let Some(agent_id) = agent_id.filter(|_| self.budgets_open.get_untracked()) {
            self.list_budgets(agent_id);
        }
    }
}

/// `12 MB`, `1.4 GB`: memory at a glance, in whole units (formatting a
/// float costs the bundle 12 KB).
pub fn bytes(count: u64) -> String {
    const MB: u64 = 1024 * 1024;
    const GB: u64 = 1024 * MB;
    match count {
        0..MB => format!("{} KB", count / 1024),
        MB..GB => format!("{} MB", count / MB),
        _ => format!("{}.{} GB", count / GB, count % GB * 10 / GB),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_reads_at_a_glance() {
        assert_eq!(bytes(512 * 1024), "512 KB");
        assert_eq!(bytes(312 * 1024 * 1024 + 5), "312 MB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GB");
    }
}
