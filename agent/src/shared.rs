//! What the agent's controller (crate::agent) and its running turn
//! (crate::turn) share: the session's state behind a short-lived lock, the
//! conversation, the way out to the client, and the inputs and questions
//! waiting. Both sides use it; neither reaches into the other.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use shard_protocol::agent::{
    PendingKind, PendingRequest, PermissionAnswer, PermissionRequest, PermissionResolved,
    RecalledInput, Status, StreamingBehavior, UiRequest, UiResolved, UiValue,
};
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, Image};
use shard_protocol::{Envelope, ServerMessage};
use tokio::sync::{mpsc, oneshot};

use crate::config::{Config, ModelConfig};
use crate::conversation::Conversation;

/// A user message waiting to be delivered.
#[derive(Debug, Clone)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<Image>,
    /// A strict steer's pending answer: sent once the steer is delivered
    /// into its turn, or as CONFLICT when that turn ends first. Such a steer
    /// is never carried over into a later turn.
    pub strict: Option<StrictReply>,
    /// When it was queued, in the order of [`State::queued`]: `recall_steer`
    /// takes back the newest across both queues.
    pub queued: u64,
    /// Never taken back by `recall_steer` (a completion report).
    pub pinned: bool,
    /// The `queued` entry that keeps it in the session log until it is
    /// delivered: a steer or follow-up accepted mid-turn survives the
    /// process (a strict steer never does: it belongs to its turn).
    pub queued_entry_id: Option<String>,
}

/// Where a strict steer's answer goes.
#[derive(Debug, Clone)]
pub struct StrictReply {
    pub id: Option<String>,
    pub command: String,
}

impl UserInput {
    /// What it weighs in memory, near enough to bound a queue.
    pub fn size(&self) -> usize {
        self.text.len()
            + self
                .images
                .iter()
                .map(|image| image.data.len() + image.mime_type.len())
                .sum::<usize>()
    }
}

/// A question waiting for its answer.
pub enum Pending {
    Permission { request: PermissionRequest, reply: oneshot::Sender<PermissionAnswer> },
    Ui { request: UiRequest, reply: oneshot::Sender<Option<UiValue>> },
}

pub struct State {
    pub status: AgentStatus,
    pub mode: String,
    pub model: String,
    pub reasoning_level: Option<String>,
    pub steers: VecDeque<UserInput>,
    pub follow_ups: VecDeque<UserInput>,
    /// Open questions in the order they were asked (for `sync`).
    pub pending: Vec<(String, Pending)>,
    pub grants: HashSet<String>,
    /// Set once stdin is closed: nobody can answer any more, so every new
    /// question is refused at once (the headless answer).
    pub headless: bool,
    /// Set by a turn as it emits `turn_end`: the turn is over for every
    /// client that saw it, though the controller may not have reaped it yet.
    pub turn_ended: bool,
    /// The running turn's id, from its `turn_start` to its `turn_end`.
    pub turn_id: Option<String>,
    /// Set while a resumed agent works through what its last process had
    /// queued and never delivered, until it is idle: no client here asked
    /// for that work, so a prompt without `streaming_behavior` waits for it
    /// as a follow-up instead of being refused as mid-turn.
    pub resumed_work: bool,
    /// What an `abort` dropped from the queues, told with the turn's end.
    pub dropped: Vec<String>,
    next_request: u64,
    /// How many inputs were ever queued: each queued one's `queued` number.
    queued: u64,
}

impl State {
    /// An idle agent's state, nothing queued or asked yet.
    pub fn new(
        mode: String,
        model: String,
        reasoning_level: Option<String>,
        grants: HashSet<String>,
    ) -> Self {
        Self {
            status: AgentStatus::Idle,
            mode,
            model,
            reasoning_level,
            steers: VecDeque::new(),
            follow_ups: VecDeque::new(),
            pending: Vec::new(),
            grants,
            headless: false,
            turn_ended: false,
            turn_id: None,
            resumed_work: false,
            dropped: Vec::new(),
            next_request: 0,
            queued: 0,
        }
    }

    /// Queues a steer or a follow-up, numbered for `recall_steer`.
    pub(crate) fn enqueue(&mut self, behavior: StreamingBehavior, mut input: UserInput) {
        self.queued += 1;
        input.queued = self.queued;
        match behavior {
            StreamingBehavior::Steer => self.steers.push_back(input),
            StreamingBehavior::FollowUp => self.follow_ups.push_back(input),
        }
    }

    /// Takes back the input queued last, steer or follow-up, unless it is a
    /// strict steer (a subagent lease's: only its turn's end takes it back).
    /// Also answers the input's `queued` entry, to be settled in the log.
    pub(crate) fn recall(&mut self) -> Option<(RecalledInput, Option<String>)> {
        let newest = |queue: &VecDeque<UserInput>| {
            queue
                .iter()
                .enumerate()
                .filter(|(_, input)| input.strict.is_none() && !input.pinned)
                .max_by_key(|(_, input)| input.queued)
                .map(|(at, input)| (at, input.queued))
        };
        let (input, behavior) = match (newest(&self.steers), newest(&self.follow_ups)) {
            (Some((at, steer)), Some((_, follow_up))) if steer > follow_up => {
                (self.steers.remove(at)?, StreamingBehavior::Steer)
            }
            (Some((at, _)), None) => (self.steers.remove(at)?, StreamingBehavior::Steer),
            (_, Some((at, _))) => (self.follow_ups.remove(at)?, StreamingBehavior::FollowUp),
            (None, None) => return None,
        };
        let recalled = RecalledInput {
            message: input.text,
            streaming_behavior: behavior,
            images: input.images.len() as u64,
        };
        Some((recalled, input.queued_entry_id))
    }

    pub fn next_request_id(&mut self, prefix: &str) -> String {
        self.next_request += 1;
        format!("{prefix}-{}", self.next_request)
    }
}

/// The session log would not take an entry, or make it durable. Whoever
/// was writing says so as INTERNAL_ERROR: a command's response, or an
/// `error` event mid-turn.
#[derive(Debug, thiserror::Error)]
#[error("session log: {0}")]
pub struct LogFailed(#[from] pub std::io::Error);

/// What the controller and the running turn share.
pub struct Shared {
    pub config: Config,
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// The tools this agent offers its model.
    pub toolset: crate::tools::Toolset,
    /// A manager's instructions, after the built-in system prompt.
    pub instructions: Option<String>,
    pub(crate) out: mpsc::Sender<Envelope<ServerMessage>>,
    pub(crate) state: Mutex<State>,
    pub conversation: tokio::sync::Mutex<Conversation>,
    /// Why the daemon holds this agent's model calls (`hold`: a budget
    /// reached), or `None`: a turn waits before its next call while held.
    pub(crate) hold: tokio::sync::watch::Sender<Option<String>>,
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock is a bug that already failed a
        // turn; keep serving with the state as it was left.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends an event to the client.
    pub async fn emit(&self, message: ServerMessage) {
        // The writer stops only when stdout is gone, and then so does the agent.
        let _ = self.out.send(Envelope::new(message)).await;
    }

    pub async fn respond(&self, id: Option<String>, response: Response) {
        let _ = self
            .out
            .send(Envelope {
                id,
                agent_id: None,
                seq: None,
                message: ServerMessage::Response(response),
            })
            .await;
    }

    /// Moves to `status`, telling the client only on a real change.
    pub async fn set_status(&self, status: AgentStatus) {
        self.set_status_because(status, None).await;
    }

    /// Sets the status, with a `detail` saying why.
    pub async fn set_status_because(&self, status: AgentStatus, detail: Option<String>) {
        let changed = {
            let mut state = self.state();
            let changed = state.status != status;
            state.status = status;
            changed
        };
        if changed {
            self.emit(ServerMessage::Status(Status { status, detail })).await;
        }
    }

    pub fn model_config(&self, id: &str) -> Option<&ModelConfig> {
        self.config.model(id)
    }

    /// The model and reasoning level the next provider call uses.
    pub fn active_model(&self) -> (ModelConfig, Option<String>) {
        let state = self.state();
        let model = self
            .config
            .model(&state.model)
            .cloned()
            .unwrap_or_else(|| self.config.models[0].clone());
        (model, state.reasoning_level.clone())
    }

    /// The runtime's capabilities for `hello`, `sync` and `model_changed`.
    pub fn capabilities(&self) -> Vec<String> {
        let mut capabilities: Vec<String> = [
            "streaming-deltas",
            "mode-catalog",
            "mode-switch",
            "model-catalog",
            "model-switch",
            "ui:select",
            "ui:confirm",
            "ui:input",
            "ui:editor",
            "ui:notify",
        ]
        .map(str::to_owned)
        .to_vec();
        let (model, _) = self.active_model();
        if !model.reasoning_levels.is_empty() {
            capabilities.extend(["reasoning-catalog".to_owned(), "reasoning-switch".to_owned()]);
        }
        capabilities
    }

    /// Registers a question and returns what to wait on.
    pub fn ask_permission(
        &self,
        request: PermissionRequest,
    ) -> oneshot::Receiver<PermissionAnswer> {
        let (reply, answer) = oneshot::channel();
        let id = request.request_id.clone();
        self.state().pending.push((id, Pending::Permission { request, reply }));
        answer
    }

    pub fn ask_ui(&self, request: UiRequest) -> oneshot::Receiver<Option<UiValue>> {
        let (reply, answer) = oneshot::channel();
        let id = request.request_id.clone();
        self.state().pending.push((id, Pending::Ui { request, reply }));
        answer
    }

    /// Withdraws an open question (abort), telling the client it is closed.
    pub async fn withdraw(&self, request_id: &str, source: &str) {
        let removed = {
            let mut state = self.state();
            let at = state.pending.iter().position(|(id, _)| id == request_id);
            at.map(|at| state.pending.remove(at).1)
        };
        match removed {
            Some(Pending::Permission { .. }) => {
                self.emit(ServerMessage::PermissionResolved(PermissionResolved {
                    request_id: request_id.to_owned(),
                    answer: PermissionAnswer::Decision(shard_protocol::agent::Decision::Deny),
                    source: Some(source.to_owned()),
                }))
                .await;
            }
            Some(Pending::Ui { .. }) => {
                self.emit(ServerMessage::UiResolved(UiResolved {
                    request_id: request_id.to_owned(),
                    value: serde_json::Value::Null,
                }))
                .await;
            }
            None => {}
        }
    }

    pub(crate) fn pending_requests(&self) -> Vec<PendingRequest> {
        self.state()
            .pending
            .iter()
            .map(|(_, pending)| PendingRequest {
                agent_id: None,
                request: match pending {
                    Pending::Permission { request, .. } => PendingKind::Permission(request.clone()),
                    Pending::Ui { request, .. } => PendingKind::Ui(request.clone()),
                },
            })
            .collect()
    }
}
