//! The agent on screen's sessions (list, fork from a message, switch, and
//! compaction on demand), its usage rollups, its approval history, and
//! taking back a queued steer: the requests the page sends for them and
//! what their answers change (docs/PROTOCOL-NOTES.md, "Session operations",
//! "Usage rollups", "Approval history").
//!
//! Each panel fetches when it opens and again when what it shows changed
//! (a usage event, a question answered, a session switched), never on a
//! timer.

#![cfg_attr(not(feature = "hydrate"), allow(dead_code))]

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{
    CompactResult, Empty, ForkResult, RecallSteerResult, SessionListResult, SessionOp,
};
use shard_protocol::approvals::{ApprovalList, ApprovalListResult, ApprovalRecord};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AgentCreate, SessionActivate, SessionActivateResult};
use shard_protocol::usage::{AgentUsage, UsageAgentQuery, UsageAgentResult};

use crate::state::{ClientState, Request};

/// What the last session operation did, or why it could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub text: String,
    pub error: bool,
}

/// The agent on screen's panels.
#[derive(Clone, Copy)]
pub struct Ledger {
    pub sessions: RwSignal<Option<SessionListResult>>,
    pub sessions_open: RwSignal<bool>,
    pub usage: RwSignal<Option<UsageAgentResult>>,
    pub usage_open: RwSignal<bool>,
    pub approvals: RwSignal<Option<Vec<ApprovalRecord>>>,
    pub approvals_open: RwSignal<bool>,
    pub note: RwSignal<Option<Note>>,
    /// The session a fork just made, offered to switch to.
    pub forked: RwSignal<Option<String>>,
}

impl Ledger {
    pub fn new() -> Self {
        Self {
            sessions: RwSignal::new(None),
            sessions_open: RwSignal::new(false),
            usage: RwSignal::new(None),
            usage_open: RwSignal::new(false),
            approvals: RwSignal::new(None),
            approvals_open: RwSignal::new(false),
            note: RwSignal::new(None),
            forked: RwSignal::new(None),
        }
    }

    /// Another agent is on screen: nothing of the last one stays.
    pub fn clear(&self) {
        self.sessions.set(None);
        self.usage.set(None);
        self.approvals.set(None);
        self.note.set(None);
        self.forked.set(None);
    }

    fn tell(&self, text: impl Into<String>, error: bool) {
        self.note.set(Some(Note { text: text.into(), error }));
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientState {
    fn selected_id(&self) -> Option<String> {
        self.selected.get_untracked()
    }

    pub fn fetch_sessions(&self) {
        let Some(agent_id) = self.selected_id() else { return };
        self.to_selected(ClientMessage::SessionOp(SessionOp::List), Request::Sessions { agent_id });
    }

    /// Forks the agent's session at `entry_id` (a message on screen).
    pub fn fork_at(&self, entry_id: &str) {
        let Some(agent_id) = self.selected_id() else { return };
        let op = SessionOp::Fork { from_entry_id: entry_id.to_owned() };
        self.to_selected(ClientMessage::SessionOp(op), Request::Fork { agent_id });
    }

    pub fn compact(&self) {
        let Some(agent_id) = self.selected_id() else { return };
        let op = SessionOp::Compact { keep_recent_tokens: None };
        self.ledger.tell("Compacting…", false);
        self.to_selected(ClientMessage::SessionOp(op), Request::Compact { agent_id });
    }

    /// Switches the agent on screen to `session_id` (its transcript follows
    /// in a fresh `sync`).
    pub fn activate_session(&self, session_id: &str) {
        let Some(agent_id) = self.selected_id() else { return };
        let activate =
            SessionActivate { agent_id: agent_id.clone(), session_id: session_id.to_owned() };
        self.send(ClientMessage::SessionActivate(activate), None, Request::Activate { agent_id });
    }

    /// Opens `session_id` as an agent of its own, in the same directory.
    pub fn open_session_as_agent(&self, session_id: &str) {
        let Some(agent_id) = self.selected_id() else { return };
        let Some(cwd) = self.agents.with_untracked(|agents| {
            agents.iter().find(|agent| agent.agent_id == agent_id).map(|agent| agent.cwd.clone())
        }) else {
            return;
        };
        let name = format!("{} (fork)", self.agent_name(&agent_id));
        let create = AgentCreate {
            cwd,
            session_id: Some(session_id.to_owned()),
            name: Some(name),
            ..AgentCreate::default()
        };
        self.ledger.forked.set(None);
        self.send(ClientMessage::AgentCreate(create), None, Request::Create);
    }

    /// Fetches again what every open panel shows (another agent is on
    /// screen: an open panel stays open, and nothing else would fill it).
    pub fn refresh_open_panels(&self) {
        if self.ledger.sessions_open.get_untracked() {
            self.fetch_sessions();
        }
        if self.ledger.usage_open.get_untracked() {
            self.fetch_usage();
        }
        if self.ledger.approvals_open.get_untracked() {
            self.fetch_approvals();
        }
    }

    pub fn fetch_usage(&self) {
        let Some(agent_id) = self.selected_id() else { return };
        let query = UsageAgentQuery { agent_id: agent_id.clone() };
        self.send(ClientMessage::UsageAgent(query), None, Request::UsageAgent { agent_id });
    }

    pub fn fetch_approvals(&self) {
        let Some(agent_id) = self.selected_id() else { return };
        let list = ApprovalList { agent_id: agent_id.clone(), limit: None };
        self.send(ClientMessage::ApprovalList(list), None, Request::Approvals { agent_id });
    }

    /// Takes back the newest steer or follow-up queued to the agent on
    /// screen, before it lands.
    pub fn recall(&self) {
        let Some(agent_id) = self.selected_id() else { return };
        self.to_selected(ClientMessage::RecallSteer(Empty {}), Request::Recall { agent_id });
    }
}

/// An agent's rollup changed: its row and, when it is on screen with its
/// usage panel open, the panel.
pub fn usage_changed(state: &ClientState, event: AgentUsage) {
    let on_screen = state.selected.get_untracked().as_deref() == Some(event.agent_id.as_str());
    state.agents.update(|agents| {
        if let Some(agent) = agents.iter_mut().find(|agent| agent.agent_id == event.agent_id) {
            let context = agent.usage.as_ref().and_then(|usage| usage.context_tokens);
            let mut usage = event.usage.as_usage();
            usage.context_tokens = context;
            agent.usage = Some(usage);
        }
    });
    if on_screen && state.ledger.usage_open.get_untracked() {
        state.fetch_usage();
    }
}

/// A question of the agent on screen was asked or answered: the history
/// panel, if open, shows it.
pub fn question_changed(state: &ClientState) {
    if state.ledger.approvals_open.get_untracked() {
        state.fetch_approvals();
    }
}

/// Whether `agent_id` is still the agent on screen (an answer about one
/// that is no longer shown is dropped).
fn still_shown(state: &ClientState, agent_id: &str) -> bool {
    state.selected.get_untracked().as_deref() == Some(agent_id)
}

/// The answer to one of this module's requests.
pub fn answered(state: &ClientState, request: Request, response: Response) {
    let ledger = state.ledger;
    match request {
        Request::Sessions { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<SessionListResult>() {
                Ok(list) => ledger.sessions.set(Some(list)),
                Err(error) => ledger.tell(format!("Sessions: {}", error.message), true),
            }
        }
        Request::Fork { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<ForkResult>() {
                Ok(fork) => {
                    ledger.tell("Forked into a new session: this one is unchanged.", false);
                    ledger.forked.set(Some(fork.session_id));
                    ledger.sessions_open.set(true);
                    state.fetch_sessions();
                }
                Err(error) => ledger.tell(format!("Could not fork: {}", error.message), true),
            }
        }
        Request::Compact { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<CompactResult>() {
                Ok(CompactResult::Compacted(done)) => ledger.tell(
                    format!(
                        "Compacted: {} → {} tokens (summary #{}).",
                        done.tokens_before, done.tokens_after, done.index
                    ),
                    false,
                ),
                Ok(CompactResult::Skipped { .. }) => ledger.tell(
                    "Nothing to compact yet: the conversation has no safe place to cut.",
                    false,
                ),
                Err(error) => ledger.tell(format!("Could not compact: {}", error.message), true),
            }
        }
        Request::Activate { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<SessionActivateResult>() {
                Ok(switched) => {
                    if switched.session_id != switched.previous_session_id {
                        ledger.tell("Switched sessions: the transcript follows.", false);
                    }
                    ledger.forked.set(None);
                    state.fetch_sessions();
                }
                Err(error) => {
                    ledger.tell(format!("Could not switch sessions: {}", error.message), true)
                }
            }
        }
        Request::UsageAgent { agent_id } if still_shown(state, &agent_id) => {
            if let Ok(usage) = response.data::<UsageAgentResult>() {
                ledger.usage.set(Some(usage));
            }
        }
        Request::Approvals { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<ApprovalListResult>() {
                Ok(list) => ledger.approvals.set(Some(list.approvals)),
                Err(error) => ledger.tell(format!("Approval history: {}", error.message), true),
            }
        }
        Request::Recall { agent_id } if still_shown(state, &agent_id) => {
            match response.data::<RecallSteerResult>() {
                Ok(RecallSteerResult { recalled: Some(recalled) }) => {
                    state.queued.update(|queued| *queued = queued.saturating_sub(1));
                    crate::transcript::take_back(state.transcript, &recalled.message);
                    if state.draft.with_untracked(|draft| draft.trim().is_empty()) {
                        state.draft.set(recalled.message);
                        ledger.note.set(None);
                    } else {
                        ledger.tell(format!("Taken back: {}", recalled.message), false);
                    }
                }
                Ok(RecallSteerResult { recalled: None }) => {
                    state.queued.set(0);
                    ledger.tell("Nothing to take back: it has already reached the agent.", false);
                }
                Err(error) => {
                    ledger.tell(format!("Could not take it back: {}", error.message), true)
                }
            }
        }
        _ => {}
    }
}
