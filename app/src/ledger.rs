//! The agent on screen's sessions (list, fork from a message, switch, and
//! compaction on demand), its usage rollups and its approval history: the
//! requests the page sends for them and what their answers change
//! (docs/PROTOCOL-NOTES.md, "Session operations", "Usage rollups",
//! "Approval history").
//!
//! Each panel fetches when it opens and again when what it shows changed
//! (a usage event, a question answered, a session switched), never on a
//! timer.

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{CompactResult, ForkResult, SessionListResult, SessionOp};
use shard_protocol::approvals::{ApprovalList, ApprovalListResult};
use shard_protocol::identity::AgentIdentity;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AgentCreate, SessionActivate, SessionActivateResult};
use shard_protocol::usage::{UsageAgentQuery, UsageAgentResult};

use crate::kept::Kept;
use crate::link::{Link, Request};
use crate::roster::Roster;

/// How long a note of something done stays up.
#[cfg(feature = "hydrate")]
const DONE_NOTE_SECONDS: u64 = 8;

/// What the last session operation did, or why it could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub text: String,
    pub error: bool,
}

/// The agent on screen's panels.
#[derive(Clone, Copy)]
pub struct Ledger {
    pub sessions: RwSignal<Option<Kept<SessionListResult>>>,
    pub sessions_open: RwSignal<bool>,
    pub usage: RwSignal<Option<Kept<UsageAgentResult>>>,
    pub usage_open: RwSignal<bool>,
    pub approvals: RwSignal<Option<Kept<ApprovalListResult>>>,
    pub approvals_open: RwSignal<bool>,
    /// What the last operation (here, or a take-back of the prompt box)
    /// did: shown above the prompt box.
    pub note: RwSignal<Option<Note>>,
    /// The session a fork just made, offered to switch to.
    pub forked: RwSignal<Option<String>>,
    /// A fork made to edit a message is being switched to.
    editing: RwSignal<bool>,
    /// The session a search result's message is in, offered to switch to.
    pub elsewhere: RwSignal<Option<String>>,
    /// The agent on screen (the screen's): every panel is about it.
    on_screen: ReadSignal<Option<String>>,
    link: Link,
}

impl Ledger {
    pub fn new(link: Link, on_screen: ReadSignal<Option<String>>) -> Self {
        Self {
            sessions: RwSignal::new(None),
            sessions_open: RwSignal::new(false),
            usage: RwSignal::new(None),
            usage_open: RwSignal::new(false),
            approvals: RwSignal::new(None),
            approvals_open: RwSignal::new(false),
            note: RwSignal::new(None),
            forked: RwSignal::new(None),
            editing: RwSignal::new(false),
            elsewhere: RwSignal::new(None),
            on_screen,
            link,
        }
    }

    /// Another agent is on screen: nothing of the last one stays.
    pub fn clear(&self) {
        self.sessions.set(None);
        self.usage.set(None);
        self.approvals.set(None);
        self.note.set(None);
        self.forked.set(None);
        self.elsewhere.set(None);
    }

    /// A search result is in `session_id`, another session of the agent on
    /// screen: the sessions panel opens and offers the switch.
    pub fn offer_session(&self, session_id: &str) {
        self.elsewhere.set(Some(session_id.to_owned()));
        self.tell(
            "That message is in another session of this agent: switch to it to see it.",
            false,
        );
        self.sessions_open.set(true);
        self.fetch_sessions();
    }

    pub fn tell(&self, text: impl Into<String>, error: bool) {
        self.note.set(Some(Note { text: text.into(), error }));
    }

    /// Says what was done, for a few seconds: the change itself is on
    /// screen, and a note left up would go stale.
    fn tell_done(&self, text: &'static str) {
        self.tell(text, false);
        #[cfg(feature = "hydrate")]
        {
            let note = self.note;
            set_timeout(
                move || {
                    if note
                        .with_untracked(|note| note.as_ref().is_some_and(|note| note.text == text))
                    {
                        note.set(None);
                    }
                },
                std::time::Duration::from_secs(DONE_NOTE_SECONDS),
            );
        }
    }

    fn shown(&self) -> Option<String> {
        self.on_screen.get_untracked()
    }

    /// Whether `agent_id` is still the agent on screen (an answer about one
    /// that is no longer shown is dropped).
    fn still_shown(&self, agent_id: &str) -> bool {
        self.on_screen.with_untracked(|shown| shown.as_deref() == Some(agent_id))
    }

    fn session_op(&self, agent_id: String, op: SessionOp, request: Request) {
        self.link.send(ClientMessage::SessionOp(op), Some(agent_id), request);
    }

    pub fn fetch_sessions(&self) {
        let Some(agent_id) = self.shown() else { return };
        let request = Request::Sessions { agent_id: agent_id.clone() };
        self.session_op(agent_id, SessionOp::List, request);
    }

    /// Forks the agent's session at `entry_id` (a message on screen).
    pub fn fork_at(&self, entry_id: &str) {
        let Some(agent_id) = self.shown() else { return };
        let op = SessionOp::Fork { from_entry_id: entry_id.to_owned() };
        self.session_op(agent_id.clone(), op, Request::Fork { agent_id });
    }

    /// "Edit" on a user message: a new session with the conversation
    /// before it (a fork at `before`, the entry just before the message),
    /// switched to at once; the message goes back into the box to change
    /// and send (crate::reducer, once the fork is made). The session it was
    /// in is kept as it is, under Sessions.
    pub fn edit_from(&self, before: &str, text: String) {
        let Some(agent_id) = self.shown() else { return };
        let op = SessionOp::Fork { from_entry_id: before.to_owned() };
        self.tell("Opening a new session to edit it in…", false);
        self.session_op(agent_id.clone(), op, Request::Edit { agent_id, text });
    }

    /// The fork for an edit was made (switched to, then) or refused
    /// (said why). Whether its message goes back into the box.
    pub fn edit_forked(&self, agent_id: &str, response: &Response) -> bool {
        if !self.still_shown(agent_id) {
            return false;
        }
        match response.data::<ForkResult>() {
            Ok(fork) => {
                self.editing.set(true);
                self.activate_session(&fork.session_id);
                true
            }
            Err(error) => {
                self.tell(format!("Could not edit there: {}", error.message), true);
                false
            }
        }
    }

    pub fn compact(&self) {
        let Some(agent_id) = self.shown() else { return };
        let op = SessionOp::Compact { keep_recent_tokens: None };
        self.tell("Compacting…", false);
        self.session_op(agent_id.clone(), op, Request::Compact { agent_id });
    }

    /// Switches the agent on screen to `session_id` (its transcript follows
    /// in a fresh `sync`).
    pub fn activate_session(&self, session_id: &str) {
        let Some(agent_id) = self.shown() else { return };
        let activate =
            SessionActivate { agent_id: agent_id.clone(), session_id: session_id.to_owned() };
        let request = Request::Activate { agent_id };
        self.link.send(ClientMessage::SessionActivate(activate), None, request);
    }

    /// Opens `session_id` as an agent of its own, in the same directory.
    pub fn open_session_as_agent(&self, roster: &Roster, session_id: &str) {
        let Some(agent_id) = self.shown() else { return };
        let Some(cwd) = untrack(|| roster.cwd_of(&agent_id)) else { return };
        let name = format!("{} (fork)", roster.name_of(&agent_id));
        let create = AgentCreate {
            cwd,
            session_id: Some(session_id.to_owned()),
            identity: AgentIdentity { name: Some(name), ..AgentIdentity::default() },
            ..AgentCreate::default()
        };
        self.forked.set(None);
        self.link.send(ClientMessage::AgentCreate(create), None, Request::Create);
    }

    /// Fetches again what every open panel shows (another agent is on
    /// screen: an open panel stays open, and nothing else would fill it).
    pub fn refresh_open_panels(&self) {
        if self.sessions_open.get_untracked() {
            self.fetch_sessions();
        }
        if self.usage_open.get_untracked() {
            self.fetch_usage();
        }
        if self.approvals_open.get_untracked() {
            self.fetch_approvals();
        }
    }

    /// The agent's usage, and its sessions' titles to name them by.
    pub fn fetch_usage(&self) {
        let Some(agent_id) = self.shown() else { return };
        self.fetch_sessions();
        let query = UsageAgentQuery { agent_id: agent_id.clone() };
        let request = Request::UsageAgent { agent_id };
        self.link.send(ClientMessage::UsageAgent(query), None, request);
    }

    pub fn fetch_approvals(&self) {
        let Some(agent_id) = self.shown() else { return };
        let list = ApprovalList { agent_id: agent_id.clone(), limit: None };
        let request = Request::Approvals { agent_id };
        self.link.send(ClientMessage::ApprovalList(list), None, request);
    }

    /// The rollup of the agent on screen changed: its panel, if open,
    /// shows the new one.
    pub fn usage_changed(&self) {
        if self.usage_open.get_untracked() {
            self.fetch_usage();
        }
    }

    /// A turn of the agent on screen ended: its sessions panel, if open,
    /// shows the session as it is now (its entries, its time).
    pub fn sessions_changed(&self) {
        if self.sessions_open.get_untracked() {
            self.fetch_sessions();
        }
    }

    /// A question of the agent on screen was asked or answered: the history
    /// panel, if open, shows it.
    pub fn question_changed(&self) {
        if self.approvals_open.get_untracked() {
            self.fetch_approvals();
        }
    }

    /// The answer to one of this slice's requests.
    /// Takes a session operation's answer: in the browser once the code
    /// that reads it has arrived ([`answer`]).
    pub fn take_answer(self, request: Request, response: Response) {
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            if answer(self, request, response).await.is_err() {
                self.tell("This part of the page did not load: reload the page.", true);
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = answer(self, request, response);
    }

    fn answered(&self, request: Request, response: Response) {
        match request {
            Request::Sessions { agent_id } if self.still_shown(&agent_id) => {
                match response.outcome {
                    Ok(data) => self.sessions.set(Some(Kept::new(data.unwrap_or_default()))),
                    Err(error) => self.tell(format!("Sessions: {}", error.message), true),
                }
            }
            Request::Fork { agent_id } if self.still_shown(&agent_id) => self.forked(&response),
            Request::Compact { agent_id } if self.still_shown(&agent_id) => {
                self.compacted(&response)
            }
            Request::Activate { agent_id } if self.still_shown(&agent_id) => {
                self.activated(&response)
            }
            Request::UsageAgent { agent_id } if self.still_shown(&agent_id) => {
                if let Ok(data) = response.outcome {
                    self.usage.set(Some(Kept::new(data.unwrap_or_default())));
                }
            }
            Request::Approvals { agent_id } if self.still_shown(&agent_id) => {
                match response.outcome {
                    Ok(data) => self.approvals.set(Some(Kept::new(data.unwrap_or_default()))),
                    Err(error) => self.tell(format!("Approval history: {}", error.message), true),
                }
            }
            _ => {}
        }
    }

    fn forked(&self, response: &Response) {
        match response.data::<ForkResult>() {
            Ok(fork) => {
                self.tell_done("Forked into a new session: this one is unchanged.");
                self.forked.set(Some(fork.session_id));
                self.sessions_open.set(true);
                self.fetch_sessions();
            }
            Err(error) => self.tell(format!("Could not fork: {}", error.message), true),
        }
    }

    fn compacted(&self, response: &Response) {
        match response.data::<CompactResult>() {
            Ok(CompactResult::Compacted(done)) => self.tell(
                format!(
                    "Compacted: {} → {} tokens (summary #{}).",
                    done.tokens_before, done.tokens_after, done.index
                ),
                false,
            ),
            Ok(CompactResult::Skipped { .. }) => self
                .tell("Nothing to compact yet: the conversation has no safe place to cut.", false),
            Err(error) => self.tell(format!("Could not compact: {}", error.message), true),
        }
    }

    fn activated(&self, response: &Response) {
        match response.data::<SessionActivateResult>() {
            Ok(switched) => {
                if self.editing.get_untracked() {
                    self.editing.set(false);
                    self.tell_done(
                        "A new session, up to the message to edit: change it and send it. The earlier session is kept under Sessions.",
                    );
                } else if switched.session_id != switched.previous_session_id {
                    self.tell_done("Switched sessions: the transcript follows.");
                }
                self.forked.set(None);
                self.elsewhere.set(None);
                self.fetch_sessions();
            }
            Err(error) => {
                self.editing.set(false);
                self.tell(format!("Could not switch sessions: {}", error.message), true)
            }
        }
    }
}

/// What a session operation's answer says, told in the panels (decoding
/// its result, every note): a chunk of its own, loaded at the first answer,
/// since nothing asks before a person forks or opens a panel.
#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(ledger_answer, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn answer(
    ledger: Ledger,
    request: Request,
    response: Response,
) -> Result<(), leptos::wasm_split::SplitLoaderError> {
    ledger.answered(request, response);
    Ok(())
}
