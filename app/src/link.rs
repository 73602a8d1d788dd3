//! The page's link to the daemon, the one handle every slice sends with:
//! the connection's state, the page-wide notice, the current sender, and
//! the table of what each request id was for ([`Request`]). Everything the
//! page sends is a `ClientMessage` from the protocol crate with an id this
//! table mints (`r-N`); a response is routed by the table, never by the
//! id's spelling.
//!
//! It is `Copy` (its parts are signals and stored values), so each slice
//! keeps one and a view's closures take it for nothing.

use std::collections::BTreeMap;

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AgentAttach, AgentTarget, AttachRole};

/// Whether this tab is on screen now (what `client.presence` says).
#[cfg(feature = "hydrate")]
pub fn on_screen() -> bool {
    web_sys::window()
        .and_then(|window| window.document())
        .is_none_or(|document| document.visibility_state() == web_sys::VisibilityState::Visible)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Server-rendered, before the client runs.
    Loading,
    Enrolling,
    NotEnrolled,
    Connecting,
    Connected,
    /// Lost; trying again in this many seconds (§2.2 backoff).
    Retrying(u32),
    /// The daemon speaks another protocol version than this page (§7):
    /// `newer` when the daemon's is the newer one.
    Mismatch {
        newer: bool,
    },
}

impl Connection {
    pub fn key(self) -> &'static str {
        match self {
            Self::Loading => "loading",
            Self::Enrolling => "enrolling",
            Self::NotEnrolled => "not-enrolled",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Retrying(_) => "retrying",
            Self::Mismatch { .. } => "mismatch",
        }
    }

    pub fn label(self) -> String {
        match self {
            Self::Loading => "loading…".to_owned(),
            Self::Enrolling => "enrolling this browser…".to_owned(),
            Self::NotEnrolled => "not enrolled".to_owned(),
            Self::Connecting => "connecting…".to_owned(),
            Self::Connected => "connected".to_owned(),
            Self::Retrying(seconds) => format!("reconnecting in {seconds} s"),
            Self::Mismatch { newer: true } => {
                "this page is older than the daemon; reload the page".to_owned()
            }
            Self::Mismatch { newer: false } => {
                "this page is newer than the daemon; reload once the daemon is updated".to_owned()
            }
        }
    }
}

/// The notice of something not sent for want of a connection: it goes once
/// the page is connected again.
pub const NOT_CONNECTED: &str = "Not connected; try again in a moment.";

/// Sends a text frame on the current connection.
pub type SendFrame = Box<dyn Fn(String) + Send + Sync>;

/// What a request id was for: its response is routed by this, not by the
/// id's spelling.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    List,
    /// `runtime.list`, for the new-agent form: the hub's (`node` empty) or
    /// a node's.
    Runtimes {
        node: String,
    },
    Create,
    /// Attaching the agent on screen (its `sync` follows).
    Attach {
        agent_id: String,
    },
    /// A short attachment to answer another agent's question, and its end.
    Borrow,
    /// A short observer attachment whose `sync` brings another agent's open
    /// questions into the inbox.
    Peek {
        agent_id: String,
    },
    Detach,
    /// `agent.terminate` of the agent on screen: deferred, it says so.
    Terminate {
        agent_id: String,
    },
    /// Catalog queries, tagged with the runtime generation they asked: an
    /// answer from a superseded runtime is dropped.
    Modes {
        epoch: Option<u64>,
    },
    Models {
        epoch: Option<u64>,
    },
    Levels {
        epoch: Option<u64>,
    },
    Commands {
        epoch: Option<u64>,
    },
    /// A prompt, shown in the transcript only once the agent accepted it;
    /// `queued` when it was sent as a steer or follow-up (it can then be
    /// taken back until it lands).
    Prompt {
        agent_id: String,
        text: String,
        queued: bool,
    },
    /// `recall_steer`: the newest queued steer or follow-up, back.
    Recall {
        agent_id: String,
    },
    /// `usage.agent` of the agent on screen.
    UsageAgent {
        agent_id: String,
    },
    /// `session_op list` of the agent on screen.
    Sessions {
        agent_id: String,
    },
    Fork {
        agent_id: String,
    },
    /// A fork before a user message, to change `text` and send it there.
    Edit {
        agent_id: String,
        text: String,
    },
    Compact {
        agent_id: String,
    },
    /// `session.activate` of the agent on screen.
    Activate {
        agent_id: String,
    },
    /// `approval.list` of the agent on screen.
    Approvals {
        agent_id: String,
    },
    /// `search.query` for these words (trimmed).
    Search {
        query: String,
    },
    /// A parent's jobs (`subagent.status`), merged into the jobs slice.
    Jobs,
    /// `workspace.list`: every workspace the daemon keeps.
    Workspaces,
    /// `workspace.create` or `workspace.attach`: the new agent is opened.
    WorkspaceLaunch,
    WorkspaceStatus {
        workspace_id: String,
    },
    WorkspaceRetire {
        workspace_id: String,
    },
    /// `workspace.commit`, `.merge` or `.push`, or its dry run.
    WorkspaceAction {
        workspace_id: String,
        action: crate::workspace_action::Action,
        dry_run: bool,
    },
    /// An answer to a question (crate::questions): refused, the question
    /// comes back, and a passkey may be asked for.
    Answer {
        agent_id: String,
        request_id: String,
    },
    /// `fleet.watch`: the fleet now, for the fleet bar.
    Fleet,
    /// `node.list`: every node's link.
    Nodes,
    /// `budget.list` of the agent on screen.
    Budgets {
        agent_id: String,
    },
    /// `budget.set` from the budget panel.
    BudgetSet,
    /// Anything else: only a failure is worth telling.
    Command,
    /// A command whose failure is expected and means nothing to a person.
    Quiet,
}

/// Requests waiting for their responses, oldest first. Bounded: the oldest
/// entries go once there are this many (their answers are then ignored).
const MAX_PENDING_REQUESTS: usize = 512;

#[derive(Default)]
pub struct Requests {
    next: u64,
    waiting: BTreeMap<u64, Request>,
}

impl Requests {
    /// A new id for `request`.
    pub fn open(&mut self, request: Request) -> String {
        self.next += 1;
        self.waiting.insert(self.next, request);
        while self.waiting.len() > MAX_PENDING_REQUESTS {
            self.waiting.pop_first();
        }
        format!("r-{}", self.next)
    }

    /// What `id` was for, once: a second response to it is ignored.
    pub fn close(&mut self, id: &str) -> Option<Request> {
        let number = id.strip_prefix("r-")?.parse().ok()?;
        self.waiting.remove(&number)
    }

    /// Every request of a dropped connection is void.
    pub fn clear(&mut self) {
        self.waiting.clear();
    }
}

/// A version's numbers, for comparing (`0.1.0` → `[0, 1, 0]`).
fn version(text: &str) -> Vec<u64> {
    text.split('.').map(|part| part.parse().unwrap_or(0)).collect()
}

/// The part of a version that must match: the major, or for 0.x the minor.
fn major(text: &str) -> Vec<u64> {
    let numbers = version(text);
    let significant = if numbers.first() == Some(&0) { 2 } else { 1 };
    numbers.into_iter().take(significant).collect()
}

#[derive(Clone, Copy)]
pub struct Link {
    pub connection: RwSignal<Connection>,
    /// A line for the whole page: what could not be done, and why.
    pub notice: RwSignal<Option<String>>,
    sender: StoredValue<Option<SendFrame>>,
    requests: StoredValue<Requests>,
}

impl Link {
    pub fn new() -> Self {
        Self {
            connection: RwSignal::new(Connection::Loading),
            notice: RwSignal::new(None),
            sender: StoredValue::new(None),
            requests: StoredValue::new(Requests::default()),
        }
    }

    /// Frames go out through `send` from now on.
    pub fn connect(&self, send: SendFrame) {
        self.sender.set_value(Some(send));
    }

    /// Nothing can be sent until the next connection.
    pub fn disconnect(&self) {
        self.sender.set_value(None);
    }

    /// The connection is gone: nothing sent on it will be answered.
    pub fn lost(&self) {
        self.requests.update_value(Requests::clear);
    }

    /// What the request `id` was for, once.
    pub fn close(&self, id: &str) -> Option<Request> {
        self.requests.try_update_value(|requests| requests.close(id)).flatten()
    }

    /// The daemon's `hello` named `protocol_version`: `false` (and the page
    /// stops) when that is another protocol than this page's (§7).
    pub fn greeted(&self, protocol_version: &str) -> bool {
        let ours = shard_protocol::PROTOCOL_VERSION;
        if major(protocol_version) != major(ours) {
            let newer = version(protocol_version) > version(ours);
            self.connection.set(Connection::Mismatch { newer });
            return false;
        }
        self.connection.set(Connection::Connected);
        // Connected again: what could not be sent can be now.
        if self.notice.with_untracked(|notice| notice.as_deref() == Some(NOT_CONNECTED)) {
            self.notice.set(None);
        }
        true
    }

    /// Sends `message` (routed to `agent_id` if it is a per-agent command)
    /// with a new request id recorded as `request`. `false`, with a notice,
    /// when there is no connection.
    pub fn send(&self, message: ClientMessage, agent_id: Option<String>, request: Request) -> bool {
        let connected = self.sender.try_with_value(Option::is_some).unwrap_or(false);
        if !connected {
            self.notice.set(Some(NOT_CONNECTED.to_owned()));
            return false;
        }
        let Some(id) = self.requests.try_update_value(|requests| requests.open(request)) else {
            return false;
        };
        let Some(frame) = crate::outgoing::encode(&message, &id, agent_id.as_deref()) else {
            return false;
        };
        self.sender.try_with_value(|sender| {
            if let Some(send) = sender {
                send(frame);
            }
        });
        true
    }

    /// Tells the daemon whether this tab is on screen (`client.presence`):
    /// a browser with a tab on screen gets no push (docs/NOTIFICATIONS.md).
    /// Nothing while disconnected: the next connection says it anew.
    pub fn presence(&self, visible: bool) {
        if self.sender.try_with_value(Option::is_some).unwrap_or(false) {
            let presence = shard_protocol::orchestrator::ClientPresence { visible };
            self.send(ClientMessage::ClientPresence(presence), None, Request::Command);
        }
    }

    /// Attaches to `agent_id` in `role`, from `after_seq` when resuming.
    pub fn attach(
        &self,
        agent_id: &str,
        role: AttachRole,
        after_seq: Option<u64>,
        request: Request,
    ) -> bool {
        let attach = AgentAttach { agent_id: agent_id.to_owned(), role: Some(role), after_seq };
        self.send(ClientMessage::AgentAttach(attach), None, request)
    }

    pub fn detach(&self, agent_id: &str, request: Request) {
        let target = AgentTarget { agent_id: agent_id.to_owned() };
        self.send(ClientMessage::AgentDetach(target), None, request);
    }

    /// Shows `text` to the whole page.
    pub fn tell(&self, text: String) {
        self.notice.set(Some(text));
    }

    /// The answer to a command that says nothing when it works.
    pub fn answered(&self, response: &Response) {
        if let Err(error) = &response.outcome {
            self.tell(format!("{} failed: {}", response.command, error.message));
        }
    }
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}
