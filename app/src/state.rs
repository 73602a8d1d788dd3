//! What the page knows, as signals shared by the components and the
//! connection task: the connection, every agent and its activity, the
//! selected agent's transcript, catalogs and capabilities, and every open
//! question this tab has seen. Everything the page sends is a
//! `ClientMessage` from the protocol crate, with a request id the page
//! mints and a table of what each id was for ([`Request`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use leptos::prelude::*;
use shard_protocol::agent::{
    Empty, PendingKind, Prompt, SetMode, SetModel, SetReasoningLevel, StreamingBehavior,
};
use shard_protocol::orchestrator::{
    ActivityPhase, AgentAttach, AgentCreate, AgentKill, AgentTarget, AttachRole,
};
use shard_protocol::subagent::{JobSnapshot, RunSnapshot, SubagentStatus, SubagentStop};
use shard_protocol::types::{
    AgentInfo, AgentStatus, ModeDescriptor, ModelDescriptor, ReasoningLevel,
};
use shard_protocol::workspace::{WorkspaceDetail, WorkspaceSummary};
use shard_protocol::{ClientMessage, Envelope};

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

/// Whether an agent in `status` waits for an answer from a person.
pub fn waiting(status: AgentStatus) -> bool {
    matches!(status, AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi)
}

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

/// The notice of something not sent for want of a connection: it goes once
/// the page is connected again.
pub const NOT_CONNECTED: &str = "Not connected; try again in a moment.";

/// Sends a text frame on the current connection, if any.
pub type Sender = Arc<Mutex<Option<Box<dyn Fn(String) + Send + Sync>>>>;

/// What a request id was for: its response is routed by this, not by the
/// id's spelling.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    List,
    Create,
    /// Attaching the agent on screen (its `sync` follows).
    Attach,
    /// A short attachment to answer another agent's question, and its end.
    Borrow,
    /// A short observer attachment whose `sync` brings another agent's open
    /// questions into the inbox.
    Peek {
        agent_id: String,
    },
    Detach,
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
    /// A parent's jobs (`subagent.status`), merged into [`ClientState::jobs`].
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
    /// Anything else: only a failure is worth telling.
    Command,
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

#[derive(Clone)]
pub struct ClientState {
    pub connection: RwSignal<Connection>,
    pub agents: RwSignal<Vec<AgentInfo>>,
    pub activity: RwSignal<BTreeMap<String, (ActivityPhase, Option<String>)>>,
    pub notice: RwSignal<Option<String>>,
    /// The agent shown (and the only interactive attachment).
    pub selected: RwSignal<Option<String>>,
    /// The `seq` of the last event of the agent on screen: after a dropped
    /// connection the page re-attaches with it and gets only what it
    /// missed (docs/PROTOCOL-NOTES.md, "Event sequence numbers").
    pub cursor: RwSignal<Option<u64>>,
    /// How the last attachment of the agent on screen began: `Some(true)`
    /// resumed from the cursor, `Some(false)` with a `sync`.
    pub resumed: RwSignal<Option<bool>>,
    /// The runtime of the agent on screen stopped since its last `sync`:
    /// the next one may have settled what it left (a tool call closed as
    /// interrupted) with no event saying so, so only a `sync` shows it.
    pub needs_sync: RwSignal<bool>,
    pub transcript: crate::transcript::Rows,
    /// The first transcript row on the page, when the user paged back;
    /// `None` follows the end (crate::views::transcript).
    pub window_start: RwSignal<Option<usize>>,
    /// Bumped to bring the transcript's end into view (an agent opened, a
    /// prompt sent).
    pub scroll_to_end: RwSignal<u64>,
    pub status: RwSignal<AgentStatus>,
    pub mode: RwSignal<String>,
    pub capabilities: RwSignal<Vec<String>>,
    pub modes: RwSignal<Vec<ModeDescriptor>>,
    pub models: RwSignal<Vec<ModelDescriptor>>,
    pub model: RwSignal<Option<ModelDescriptor>>,
    pub levels: RwSignal<Vec<ReasoningLevel>>,
    pub level: RwSignal<Option<String>>,
    /// Every open question this tab knows, by (agent, request).
    pub questions: RwSignal<BTreeMap<(String, String), Question>>,
    /// Questions the user closed without answering (they stay in the inbox).
    pub dismissed: RwSignal<Vec<(String, String)>>,
    pub notify: RwSignal<bool>,
    /// The selected agent's runtime generation, from its last `sync`.
    pub epoch: RwSignal<Option<u64>>,
    /// The prompt being written to the agent on screen, and why the last
    /// one was refused: both outlive a reconnect and a failed send.
    pub draft: RwSignal<String>,
    /// Half-written prompts to the agents not on screen.
    pub drafts: RwSignal<BTreeMap<String, String>>,
    /// Agents that did something while not on screen.
    pub unread: RwSignal<BTreeSet<String>>,
    pub prompt_error: RwSignal<Option<String>>,
    pub sender: Sender,
    pub requests: Arc<Mutex<Requests>>,
    /// Agents whose questions a peek is fetching.
    pub peeking: Arc<Mutex<BTreeSet<String>>>,
    /// Every subagent job the page knows, by id (PROTOCOL.md §10.3).
    pub jobs: RwSignal<BTreeMap<String, JobSnapshot>>,
    /// Parents whose children the agent list hides.
    pub collapsed: RwSignal<BTreeSet<String>>,
    /// Every workspace the page knows, by id (PROTOCOL.md §10.1a).
    pub workspaces: RwSignal<BTreeMap<String, WorkspaceSummary>>,
    /// The latest status of the workspace on screen.
    pub workspace: RwSignal<Option<WorkspaceDetail>>,
    /// Whether the workspace panel shows the diff (its status then asks
    /// for it).
    pub workspace_diff: RwSignal<bool>,
    pub retire_problem: RwSignal<Option<crate::workspaces::RetireProblem>>,
    /// The agent on screen's sessions, rollups and approval history, each
    /// fetched when its panel opens (and refreshed while it is open).
    pub ledger: crate::ledger::Ledger,
    /// Steers and follow-ups this tab queued to the agent on screen that
    /// may not have landed yet: "Take back" is offered while there are.
    pub queued: RwSignal<usize>,
}

impl ClientState {
    pub fn new() -> Self {
        Self {
            connection: RwSignal::new(Connection::Loading),
            agents: RwSignal::new(Vec::new()),
            activity: RwSignal::new(BTreeMap::new()),
            notice: RwSignal::new(None),
            selected: RwSignal::new(None),
            cursor: RwSignal::new(None),
            resumed: RwSignal::new(None),
            needs_sync: RwSignal::new(false),
            transcript: RwSignal::new(Vec::new()),
            window_start: RwSignal::new(None),
            scroll_to_end: RwSignal::new(0),
            status: RwSignal::new(AgentStatus::Idle),
            mode: RwSignal::new(String::new()),
            capabilities: RwSignal::new(Vec::new()),
            modes: RwSignal::new(Vec::new()),
            models: RwSignal::new(Vec::new()),
            model: RwSignal::new(None),
            levels: RwSignal::new(Vec::new()),
            level: RwSignal::new(None),
            questions: RwSignal::new(BTreeMap::new()),
            dismissed: RwSignal::new(Vec::new()),
            notify: RwSignal::new(false),
            epoch: RwSignal::new(None),
            draft: RwSignal::new(String::new()),
            drafts: RwSignal::new(BTreeMap::new()),
            unread: RwSignal::new(BTreeSet::new()),
            prompt_error: RwSignal::new(None),
            sender: Arc::new(Mutex::new(None)),
            requests: Arc::new(Mutex::new(Requests::default())),
            peeking: Arc::new(Mutex::new(BTreeSet::new())),
            jobs: RwSignal::new(BTreeMap::new()),
            collapsed: RwSignal::new(BTreeSet::new()),
            workspaces: RwSignal::new(BTreeMap::new()),
            workspace: RwSignal::new(None),
            workspace_diff: RwSignal::new(false),
            retire_problem: RwSignal::new(None),
            ledger: crate::ledger::Ledger::new(),
            queued: RwSignal::new(0),
        }
    }

    /// Asks for `parent`'s latest jobs (their runs' states, usage, texts).
    pub fn fetch_jobs(&self, parent: &str) {
        let status = SubagentStatus { parent_agent_id: parent.to_owned(), targets: None };
        self.send(ClientMessage::SubagentStatus(status), None, Request::Jobs);
    }

    /// Stops one of `parent`'s jobs or runs (`handle`).
    pub fn stop_job(&self, parent: &str, handle: &str) {
        let stop = SubagentStop { parent_agent_id: parent.to_owned(), handle: handle.to_owned() };
        self.send(ClientMessage::SubagentStop(stop), None, Request::Command);
    }

    /// `agent_id`'s queued or active run, else its latest one.
    pub fn run_of(&self, agent_id: &str) -> Option<RunSnapshot> {
        self.jobs.with(|jobs| latest_run(jobs, agent_id))
    }

    pub fn requests(&self) -> std::sync::MutexGuard<'_, Requests> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn peeking(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.peeking.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection is gone: nothing sent on it will be answered.
    pub fn connection_lost(&self) {
        self.requests().clear();
        self.peeking().clear();
    }

    /// Brings the open questions of `agent_id` (not on screen) into the
    /// inbox: the tab receives questions only from agents it is attached
    /// to, so it attaches as an observer just long enough for the `sync`.
    pub fn peek(&self, agent_id: &str) {
        let on_screen =
            self.selected.with_untracked(|selected| selected.as_deref() == Some(agent_id));
        let known = self
            .questions
            .with_untracked(|questions| questions.keys().any(|(agent, _)| agent == agent_id));
        if on_screen || known || !self.peeking().insert(agent_id.to_owned()) {
            return;
        }
        let attach = AgentAttach {
            agent_id: agent_id.to_owned(),
            role: Some(AttachRole::Observer),
            after_seq: None,
        };
        let request = Request::Peek { agent_id: agent_id.to_owned() };
        if !self.send(ClientMessage::AgentAttach(attach), None, request) {
            self.peeking().remove(agent_id);
        }
    }

    /// The peek of `agent_id` is over: detach.
    pub fn end_peek(&self, agent_id: &str) {
        self.peeking().remove(agent_id);
        self.detach(agent_id, Request::Detach);
    }

    /// Sends `message` (routed to `agent_id` if it is a per-agent command)
    /// with a new request id recorded as `request`. `false`, with a notice,
    /// when there is no connection.
    pub fn send(&self, message: ClientMessage, agent_id: Option<String>, request: Request) -> bool {
        let sender = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(send) = sender.as_ref() else {
            self.notice.set(Some(NOT_CONNECTED.to_owned()));
            return false;
        };
        let id = self.requests().open(request);
        send(Envelope { id: Some(id), agent_id, seq: None, message }.to_json());
        true
    }

    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.with(|capabilities| capabilities.iter().any(|known| known == capability))
    }

    pub fn create_agent(&self, cwd: &str, name: &str, model: &str, mode: &str) {
        let given = |value: &str| (!value.is_empty()).then(|| value.to_owned());
        let create = AgentCreate {
            cwd: cwd.to_owned(),
            name: given(name),
            model: given(model),
            mode: given(mode),
            ..AgentCreate::default()
        };
        self.send(ClientMessage::AgentCreate(create), None, Request::Create);
    }

    /// Attaches interactively to `agent_id`.
    pub fn attach(&self, agent_id: &str, request: Request) {
        self.attach_after(agent_id, None, request);
    }

    /// Re-attaches the agent on screen from its cursor, if the page has one
    /// and what followed it is enough.
    pub fn resume(&self, agent_id: &str) {
        let cursor = self.cursor.get_untracked().filter(|_| !self.needs_sync.get_untracked());
        self.attach_after(agent_id, cursor, Request::Attach);
    }

    /// Attaches the agent on screen again for a `sync` of all of it.
    pub fn resync(&self, agent_id: &str) {
        self.attach_after(agent_id, None, Request::Attach);
    }

    fn attach_after(&self, agent_id: &str, after_seq: Option<u64>, request: Request) {
        let attach = AgentAttach {
            agent_id: agent_id.to_owned(),
            role: Some(AttachRole::Interactive),
            after_seq,
        };
        self.send(ClientMessage::AgentAttach(attach), None, request);
    }

    fn detach(&self, agent_id: &str, request: Request) {
        let target = AgentTarget { agent_id: agent_id.to_owned() };
        self.send(ClientMessage::AgentDetach(target), None, request);
    }

    pub fn list_agents(&self) {
        self.send(ClientMessage::AgentList(Empty {}), None, Request::List);
    }

    pub fn terminate_selected(&self) {
        if let Some(agent_id) = self.selected.get_untracked() {
            self.send(
                ClientMessage::AgentTerminate(AgentTarget { agent_id }),
                None,
                Request::Command,
            );
        }
    }

    pub fn kill_selected(&self) {
        if let Some(agent_id) = self.selected.get_untracked() {
            let kill = AgentKill { agent_id, force: Some(true) };
            self.send(ClientMessage::AgentKill(kill), None, Request::Command);
        }
    }

    pub fn set_mode(&self, mode: String) {
        self.to_selected(ClientMessage::SetMode(SetMode { mode }), Request::Command);
    }

    pub fn set_model(&self, model: String) {
        self.to_selected(ClientMessage::SetModel(SetModel { model }), Request::Command);
    }

    pub fn set_reasoning_level(&self, model: String, effort: String) {
        let set = SetReasoningLevel { model, effort };
        self.to_selected(ClientMessage::SetReasoningLevel(set), Request::Command);
    }

    pub fn abort(&self) {
        self.to_selected(ClientMessage::Abort(Empty {}), Request::Command);
    }

    /// Asks the selected runtime for its catalogs, as its capabilities allow.
    pub fn query_catalogs(&self, modes: bool, models: bool, levels: bool) {
        let epoch = self.epoch.get_untracked();
        if modes {
            self.to_selected(ClientMessage::ListModes(Empty {}), Request::Modes { epoch });
        }
        if models {
            self.to_selected(ClientMessage::ListModels(Empty {}), Request::Models { epoch });
        }
        if levels {
            self.to_selected(
                ClientMessage::ListReasoningLevels(Empty {}),
                Request::Levels { epoch },
            );
        } else {
            self.levels.set(Vec::new());
        }
    }

    /// Shows an agent: it becomes this tab's one interactive attachment.
    pub fn select(&self, agent_id: Option<String>) {
        let previous = self.selected.get_untracked();
        if previous == agent_id {
            return;
        }
        // Each agent keeps its own half-written prompt.
        let draft = self.draft.get_untracked();
        self.drafts.update(|drafts| {
            if let Some(previous) = &previous {
                if draft.is_empty() {
                    drafts.remove(previous);
                } else {
                    drafts.insert(previous.clone(), draft);
                }
            }
        });
        let draft = agent_id.as_ref().and_then(|agent_id| {
            self.drafts.with_untracked(|drafts| drafts.get(agent_id).cloned())
        });
        self.draft.set(draft.unwrap_or_default());
        if let Some(previous) = previous {
            self.detach(&previous, Request::Detach);
        }
        if let Some(agent_id) = &agent_id {
            self.unread.update(|unread| {
                unread.remove(agent_id);
            });
        }
        self.transcript.set(Vec::new());
        self.window_start.set(None);
        self.capabilities.set(Vec::new());
        self.modes.set(Vec::new());
        self.models.set(Vec::new());
        self.levels.set(Vec::new());
        self.epoch.set(None);
        self.cursor.set(None);
        self.resumed.set(None);
        self.needs_sync.set(false);
        self.prompt_error.set(None);
        self.ledger.clear();
        self.queued.set(0);
        self.selected.set(agent_id.clone());
        if let Some(agent_id) = agent_id {
            self.attach(&agent_id, Request::Attach);
            // Panels left open show the new agent's, not nothing.
            self.refresh_open_panels();
        }
    }

    /// Sends a per-agent command to the selected agent.
    pub fn to_selected(&self, message: ClientMessage, request: Request) -> bool {
        let Some(agent_id) = self.selected.get_untracked() else { return false };
        self.send(message, Some(agent_id), request)
    }

    /// Sends a prompt; it joins the transcript once the agent accepts it,
    /// and a refused one goes back into the box with its reason. `false`
    /// when it could not be sent at all.
    pub fn prompt(&self, text: &str, behavior: Option<StreamingBehavior>) -> bool {
        let Some(agent_id) = self.selected.get_untracked() else { return false };
        self.prompt_error.set(None);
        let prompt = Prompt {
            message: text.to_owned(),
            images: None,
            streaming_behavior: behavior,
            pinned: None,
        };
        let queued = behavior.is_some();
        let request = Request::Prompt { agent_id: agent_id.clone(), text: text.to_owned(), queued };
        self.send(ClientMessage::Prompt(prompt), Some(agent_id), request)
    }

    /// Answers a question of any agent. For an agent other than the selected
    /// one the tab attaches interactively just long enough to answer.
    pub fn answer(&self, question: &Question, answer: Answer) {
        let agent_id = question.agent_id.clone();
        let selected = self.selected.get_untracked().as_deref() == Some(agent_id.as_str());
        if !selected {
            self.attach(&agent_id, Request::Borrow);
        }
        let request_id = question.request.request_id().to_owned();
        let message = match answer {
            Answer::Permission(answer) => {
                ClientMessage::PermissionResponse(shard_protocol::agent::PermissionResponse {
                    request_id,
                    answer,
                    reason: None,
                })
            }
            Answer::Ui(value) => {
                ClientMessage::UiResponse(shard_protocol::agent::UiResponse { request_id, value })
            }
        };
        self.send(message, Some(agent_id.clone()), Request::Command);
        if !selected {
            self.detach(&agent_id, Request::Borrow);
        }
        self.questions.update(|questions| {
            questions.remove(&question.key());
        });
    }

    /// Adds or replaces one agent, keeping creation order.
    pub fn upsert(&self, info: AgentInfo) {
        self.agents.update(|agents| {
            match agents.iter_mut().find(|known| known.agent_id == info.agent_id) {
                Some(known) => *known = info,
                None => {
                    agents.push(info);
                    crate::order::sort_by_rank(agents, |agent| {
                        (agent.created_at, agent.agent_id.clone())
                    });
                }
            }
        });
    }

    pub fn agent_name(&self, agent_id: &str) -> String {
        self.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|agent| agent.agent_id == agent_id)
                .and_then(|agent| agent.name.clone())
                .unwrap_or_else(|| agent_id.to_owned())
        })
    }

    /// Questions still waiting for this tab, dismissed ones excluded.
    pub fn open_questions(&self) -> Vec<Question> {
        let dismissed = self.dismissed.get();
        self.questions.with(|questions| {
            questions
                .values()
                .filter(|question| !dismissed.contains(&question.key()))
                .cloned()
                .collect()
        })
    }
}

/// An answer to a question, as the page builds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Permission(shard_protocol::agent::PermissionAnswer),
    /// `None`: dismissed (the agent gets a null value).
    Ui(Option<shard_protocol::agent::UiValue>),
}

/// The agent's queued or active run, else the one of its newest job.
pub fn latest_run(jobs: &BTreeMap<String, JobSnapshot>, agent_id: &str) -> Option<RunSnapshot> {
    let mut latest: Option<(u64, &RunSnapshot)> = None;
    for job in jobs.values() {
        for run in job.runs.iter().filter(|run| run.agent_id.as_deref() == Some(agent_id)) {
            if !run.state.is_terminal() {
                return Some(run.clone());
            }
            if latest.is_none_or(|(created, _)| job.created_at >= created) {
                latest = Some((job.created_at, run));
            }
        }
    }
    latest.map(|(_, run)| run.clone())
}

impl Default for ClientState {
    fn default() -> Self {
        Self::new()
    }
}
