//! Every open question this tab has seen, of any agent, and how the tab
//! answers them. Questions reach only attached clients, so for an agent
//! not on screen that starts waiting the tab *peeks*: it attaches as an
//! observer, takes the open questions from that `sync`, and detaches.
//! Answering another agent's question attaches to it just for the answer.

use std::collections::{BTreeMap, BTreeSet};

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{
    PendingKind, PendingRequest, PermissionAnswer, PermissionResponse, UiResponse, UiValue,
};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AttachRole;

use crate::link::{Link, Request};

/// An open question: whose, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub agent_id: String,
    pub request: PendingKind,
}

impl Question {
    pub fn key(&self) -> (String, String) {
        (self.agent_id.clone(), self.request.request_id().to_owned())
    }
}

/// An answer to a question, as the page builds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Permission(PermissionAnswer),
    /// `None`: dismissed (the agent gets a null value).
    Ui(Option<UiValue>),
}

/// Told of each question new to the page (desktop notifications listen).
pub type Listener = Box<dyn Fn(&Question) + Send + Sync>;

#[derive(Clone, Copy)]
pub struct Questions {
    /// Every open question this tab knows, by (agent, request).
    pub open: RwSignal<BTreeMap<(String, String), Question>>,
    /// Questions the user closed without answering (they stay in the inbox).
    pub dismissed: RwSignal<Vec<(String, String)>>,
    /// Whether a question that waits raises a desktop notification.
    pub notify: RwSignal<bool>,
    /// Agents whose questions a peek is fetching.
    peeking: StoredValue<BTreeSet<String>>,
    /// Answers sent and not yet acknowledged: one the daemon refuses (its
    /// node out of reach, a passkey wanted) comes back, unless the
    /// question was resolved meanwhile.
    answering: StoredValue<Vec<Question>>,
    listener: StoredValue<Option<Listener>>,
    /// The agent on screen (the screen's): its questions come with its
    /// own attachment, so it is never peeked at.
    on_screen: ReadSignal<Option<String>>,
    link: Link,
}

impl Questions {
    pub fn new(link: Link, on_screen: ReadSignal<Option<String>>) -> Self {
        Self {
            open: RwSignal::new(BTreeMap::new()),
            dismissed: RwSignal::new(Vec::new()),
            notify: RwSignal::new(false),
            peeking: StoredValue::new(BTreeSet::new()),
            answering: StoredValue::new(Vec::new()),
            listener: StoredValue::new(None),
            on_screen,
            link,
        }
    }

    fn shows(&self, agent_id: &str) -> bool {
        self.on_screen.with_untracked(|selected| selected.as_deref() == Some(agent_id))
    }

    /// Questions still waiting for this tab, dismissed ones excluded.
    pub fn undismissed(&self) -> Vec<Question> {
        let dismissed = self.dismissed.get();
        self.open.with(|questions| {
            questions
                .values()
                .filter(|question| !dismissed.contains(&question.key()))
                .cloned()
                .collect()
        })
    }

    /// Whether `question` is still open (untracked).
    pub fn is_open(&self, question: &Question) -> bool {
        self.open.with_untracked(|open| open.contains_key(&question.key()))
    }

    /// Closes `key` here; it stays in the inbox.
    pub fn dismiss(&self, key: (String, String)) {
        self.dismissed.update(|dismissed| dismissed.push(key));
    }

    /// `listener` is told of every question new to the page from now on.
    pub fn listen(&self, listener: Listener) {
        self.listener.set_value(Some(listener));
    }

    /// Adds (or refreshes) a question; one new to the page is told to the
    /// listener.
    pub fn add(&self, question: Question) {
        let key = question.key();
        let new = self.open.with_untracked(|questions| !questions.contains_key(&key));
        self.open.update(|questions| {
            questions.insert(key, question.clone());
        });
        if new {
            self.listener.try_with_value(|listener| {
                if let Some(listener) = listener {
                    listener(&question);
                }
            });
        }
    }

    /// A question was answered (here, elsewhere, or by a policy).
    pub fn resolved(&self, agent_id: Option<&str>, request_id: &str) {
        let Some(agent_id) = agent_id else { return };
        let key = (agent_id.to_owned(), request_id.to_owned());
        self.open.update(|questions| {
            questions.remove(&key);
        });
        self.dismissed.update(|dismissed| dismissed.retain(|known| *known != key));
        // Answered elsewhere first: a refusal of this tab's answer is moot.
        self.answering.update_value(|answering| answering.retain(|known| known.key() != key));
    }

    /// Only the agents in `waiting`, and the one on screen (its `sync`
    /// says), have open questions.
    pub fn only_of(&self, waiting: &[String]) {
        let on_screen = self.on_screen.get_untracked();
        self.open.update(|questions| {
            questions.retain(|(agent, _), _| {
                waiting.contains(agent) || on_screen.as_deref() == Some(agent.as_str())
            })
        });
    }

    /// `agent_id` has no open question any more.
    pub fn forget(&self, agent_id: &str) {
        self.open.update(|questions| questions.retain(|(agent, _), _| agent != agent_id));
    }

    /// The questions a `sync` of `agent_id` holds open: `agent_id`'s are
    /// exactly these from now on.
    pub fn synced(&self, agent_id: &str, pending: Vec<PendingRequest>) {
        self.forget(agent_id);
        self.add_pending(agent_id, pending);
    }

    fn add_pending(&self, agent_id: &str, pending: Vec<PendingRequest>) {
        for pending in pending {
            let agent_id = pending.agent_id.unwrap_or_else(|| agent_id.to_owned());
            self.add(Question { agent_id, request: pending.request });
        }
    }

    /// An `agent_status_changed` of an agent not on screen: one that now
    /// waits is peeked at; one that does not had its questions answered
    /// elsewhere (or denied).
    pub fn status_changed(&self, agent_id: &str, asks: bool, on_screen: bool) {
        if on_screen {
            return;
        }
        if asks {
            self.peek(agent_id);
        } else {
            self.forget(agent_id);
        }
    }

    /// Brings the open questions of `agent_id` (not on screen) into the
    /// inbox: the tab receives questions only from agents it is attached
    /// to, so it attaches as an observer just long enough for the `sync`.
    pub fn peek(&self, agent_id: &str) {
        let known = self
            .open
            .with_untracked(|questions| questions.keys().any(|(agent, _)| agent == agent_id));
        if !known {
            self.refresh(agent_id);
        }
    }

    /// Asks the open questions of `agent_id` (not on screen) again, even
    /// if some are known: its `sync` replaces them.
    pub fn refresh(&self, agent_id: &str) {
        if self.shows(agent_id) || !self.start_peeking(agent_id) {
            return;
        }
        let request = Request::Peek { agent_id: agent_id.to_owned() };
        if !self.link.attach(agent_id, AttachRole::Observer, None, request) {
            self.stop_peeking(agent_id);
        }
    }

    /// `false` when a peek of `agent_id` is already under way.
    fn start_peeking(&self, agent_id: &str) -> bool {
        self.peeking
            .try_update_value(|peeking| peeking.insert(agent_id.to_owned()))
            .unwrap_or(false)
    }

    fn stop_peeking(&self, agent_id: &str) {
        self.peeking.update_value(|peeking| {
            peeking.remove(agent_id);
        });
    }

    /// A `sync` of an agent not on screen: if this tab was peeking at it,
    /// its open questions join the inbox and the peek ends. Another agent's
    /// sync otherwise comes from attaching only to answer: its questions
    /// are already known.
    pub fn peeked(&self, agent_id: &str, pending: Vec<PendingRequest>) {
        let peeking =
            self.peeking.try_with_value(|peeking| peeking.contains(agent_id)).unwrap_or(false);
        if peeking {
            self.synced(agent_id, pending);
            self.stop_peeking(agent_id);
            self.link.detach(agent_id, Request::Detach);
        }
    }

    /// The peek of `agent_id` was refused: it may be tried again.
    pub fn peek_failed(&self, agent_id: &str) {
        self.stop_peeking(agent_id);
    }

    /// The daemon's answer to an answer. Refused (say, its node is out of
    /// reach), the question is open again here; refused for want of a
    /// passkey (docs/SECURITY.md, "Passkey step-up"), the passkey is asked
    /// for: `true`.
    pub fn answer_answered(&self, agent_id: &str, request_id: &str, response: &Response) -> bool {
        // Request ids are each agent's own: two agents may both ask `perm-1`.
        let key = (agent_id.to_owned(), request_id.to_owned());
        let question = self
            .answering
            .try_update_value(|answering| {
                let at = answering.iter().position(|known| known.key() == key)?;
                Some(answering.swap_remove(at))
            })
            .flatten();
        let Err(error) = &response.outcome else { return false };
        if let Some(question) = question {
            self.open.update(|open| {
                open.insert(question.key(), question);
            });
        }
        let needs_passkey = error.code == shard_protocol::ErrorCode::PermissionDenied
            && error.message.contains("passkey");
        if !needs_passkey {
            self.link.answered(response);
        }
        needs_passkey
    }

    /// The connection is gone: no peek will be answered.
    pub fn lost(&self) {
        self.peeking.update_value(BTreeSet::clear);
        // Nor an answer: the list after reconnecting says who still waits.
        self.answering.update_value(Vec::clear);
    }

    /// Answers a question of any agent. For an agent other than the one on
    /// screen the tab attaches interactively just long enough to answer.
    /// Answers `question`, if this tab is connected: offline the answer
    /// could not be sent, so the question stays open, here and everywhere.
    pub fn answer(&self, question: &Question, answer: Answer) {
        if self.link.connection.get_untracked() != crate::link::Connection::Connected {
            return;
        }
        let agent_id = question.agent_id.clone();
        let on_screen = self.shows(&agent_id);
        if !on_screen {
            self.link.attach(&agent_id, AttachRole::Interactive, None, Request::Borrow);
        }
        let request_id = question.request.request_id().to_owned();
        self.answering.update_value(|answering| answering.push(question.clone()));
        let request =
            Request::Answer { agent_id: agent_id.clone(), request_id: request_id.clone() };
        let message = match answer {
            Answer::Permission(answer) => ClientMessage::PermissionResponse(PermissionResponse {
                request_id,
                answer,
                reason: None,
            }),
            Answer::Ui(value) => ClientMessage::UiResponse(UiResponse { request_id, value }),
        };
        self.link.send(message, Some(agent_id.clone()), request);
        if !on_screen {
            self.link.detach(&agent_id, Request::Borrow);
        }
        self.open.update(|questions| {
            questions.remove(&question.key());
        });
    }
}
