//! Who may answer an agent's questions (PROTOCOL.md §6.3): the agent's own
//! interactive attachments, else those of its nearest ancestor that has any.
//! Observers never count. Hosts read this to route a delegated child's
//! request, keeping the child's `agent_id`, and connections read it to accept
//! an answer for a child they are not attached to.

use std::collections::HashMap;
use std::sync::Mutex;

use shard_protocol::agent::{PendingKind, PendingRequest};

use super::{Sub, SubscriberId};

#[derive(Default)]
pub struct Delegation {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    parents: HashMap<String, String>,
    interactive: HashMap<String, HashMap<SubscriberId, Sub>>,
    /// Each agent's open questions, so an ancestor's `sync` can re-show them.
    pending: HashMap<String, Vec<PendingKind>>,
}

/// Hierarchies are shallow; this bound only stops a corrupt manifest loop.
const MAX_DEPTH: usize = 64;

impl Delegation {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn set_parent(&self, agent: &str, parent: Option<&str>) {
        let mut state = self.state();
        match parent {
            Some(parent) => state.parents.insert(agent.to_owned(), parent.to_owned()),
            None => state.parents.remove(agent),
        };
    }

    pub fn attach(&self, agent: &str, subscriber: &Sub) {
        self.state()
            .interactive
            .entry(agent.to_owned())
            .or_default()
            .insert(subscriber.id(), subscriber.clone());
    }

    pub fn detach(&self, agent: &str, conn: SubscriberId) {
        let mut state = self.state();
        if let Some(connections) = state.interactive.get_mut(agent) {
            connections.remove(&conn);
        }
    }

    /// `agent`, then its ancestors, nearest first.
    fn lineage(state: &State, agent: &str) -> Vec<String> {
        let mut chain = vec![agent.to_owned()];
        while let Some(parent) = chain.last().and_then(|last| state.parents.get(last)) {
            if chain.len() >= MAX_DEPTH || chain.contains(parent) {
                break;
            }
            chain.push(parent.clone());
        }
        chain
    }

    /// The connections that answer `agent`'s questions: its own interactive
    /// attachments, else the nearest ancestor's. Empty: nobody (headless).
    pub fn responders(&self, agent: &str) -> Vec<Sub> {
        let state = self.state();
        for member in Self::lineage(&state, agent) {
            if let Some(connections) = state.interactive.get(&member)
                && !connections.is_empty()
            {
                return connections.values().cloned().collect();
            }
        }
        Vec::new()
    }

    /// Whether `conn` is interactive on `agent` or one of its ancestors.
    pub fn may_answer(&self, conn: SubscriberId, agent: &str) -> bool {
        let state = self.state();
        Self::lineage(&state, agent).iter().any(|member| {
            state.interactive.get(member).is_some_and(|connections| connections.contains_key(&conn))
        })
    }

    /// The descendants of `ancestor` whose questions it would answer: every
    /// agent below it with no interactive attachment between it and `ancestor`.
    pub fn delegated_to(&self, ancestor: &str) -> Vec<String> {
        let state = self.state();
        state
            .parents
            .keys()
            .filter(|agent| {
                let chain = Self::lineage(&state, agent);
                let Some(at) = chain.iter().position(|member| member == ancestor) else {
                    return false;
                };
                at > 0
                    && chain[..at]
                        .iter()
                        .all(|member| state.interactive.get(member).is_none_or(HashMap::is_empty))
            })
            .cloned()
            .collect()
    }

    /// The open questions of `agent`, as its host last published them.
    pub fn pending_of(&self, agent: &str) -> Vec<PendingKind> {
        self.state().pending.get(agent).cloned().unwrap_or_default()
    }

    pub fn set_pending(&self, agent: &str, pending: Vec<PendingKind>) {
        self.state().pending.insert(agent.to_owned(), pending);
    }

    /// Open questions of the descendants `ancestor` answers for, each with its
    /// own agent's id (§6.3: delegation survives reconnect and sync).
    pub fn delegated_pending(&self, ancestor: &str) -> Vec<PendingRequest> {
        let agents = self.delegated_to(ancestor);
        let state = self.state();
        agents
            .into_iter()
            .flat_map(|agent| {
                state.pending.get(&agent).into_iter().flatten().map(move |request| PendingRequest {
                    agent_id: Some(agent.clone()),
                    request: request.clone(),
                })
            })
            .collect()
    }
}
