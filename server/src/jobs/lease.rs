//! Leases: a run holds its child from the moment its job is recorded until
//! the run ends, and while it does a person's commands to that child go
//! through the job (connections ask [`Jobs::lease`] first). A child is held
//! by at most one run; a run lets go only of a lease it holds itself.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::Jobs;
use super::record::RunRecord;

/// Leased agents: agent id → the run holding it.
#[derive(Default)]
pub(super) struct Leases {
    held: Mutex<HashMap<String, String>>,
}

impl Leases {
    fn held(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The run holding `agent_id`, if one does.
    pub(super) fn holder(&self, agent_id: &str) -> Option<String> {
        self.held().get(agent_id).cloned()
    }

    /// Each run takes its child's lease (all under one lock).
    pub(super) fn hold<'a>(&self, runs: impl IntoIterator<Item = &'a RunRecord>) {
        let mut held = self.held();
        for run in runs {
            held.insert(run.agent_id.clone(), run.run_id.clone());
        }
    }

    /// The run lets its child go, if it is the one holding it.
    pub(super) fn release(&self, run: &RunRecord) {
        let mut held = self.held();
        if held.get(&run.agent_id).is_some_and(|holder| *holder == run.run_id) {
            held.remove(&run.agent_id);
        }
    }
}

impl Jobs {
    /// The run holding `agent_id`'s lease, if one does.
    pub fn lease(&self, agent_id: &str) -> Option<String> {
        self.leases.holder(agent_id)
    }
}
