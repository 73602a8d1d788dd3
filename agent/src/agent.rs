//! The agent: one actor that owns the session's state and answers every
//! per-agent command (PROTOCOL.md §9), with at most one turn running beside it
//! as its own task. The controller keeps answering while a turn streams:
//! `list_modes`, `set_model`, permission answers, `abort` and so on.
//!
//! State both sides touch lives in [`Shared`] (crate::shared) behind
//! short-lived locks; the conversation lock is never held across a model
//! call or a question to the user.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use shard_protocol::agent::{
    CompactResult, Effective, Empty, Hello, ListModelsResult, ListModesResult,
    ListReasoningLevelsResult, LiveWindow, ModeChanged, ModelChanged, PermissionAnswer,
    PermissionResolved, Prompt, ReasoningLevelChange, RecallSteerResult, SessionListResult,
    SessionOp, SetModeResult, SetModelResult, StreamingBehavior, Sync, UiResolved, UiValue,
};
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::message::Response;
use shard_protocol::types::AgentStatus;
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ModelConfig};
use crate::conversation::Conversation;
use crate::modes;
use crate::session_log::{EntryBody, UnqueueReason};
use crate::shared::{Pending, Shared, State, StrictReply, UserInput};
use crate::stdio::Inbound;
use crate::turn::{Ending, Opening};

/// How many outbound messages may wait for stdout. A direct client that stops
/// reading eventually stalls the agent (it is the only client); the daemon
/// always reads.
pub const OUTBOUND_QUEUE: usize = 1024;

/// Steer or follow-up messages that may wait for a turn, each queue. A
/// person steers a few times a turn; a client that queues more is looping.
pub const MAX_QUEUED_INPUTS: usize = 32;
/// Bytes of text and images the two queues may hold together: a few large
/// prompts with screenshots, never unbounded memory.
pub const MAX_QUEUED_BYTES: usize = 32 * 1024 * 1024;

fn error(code: ErrorCode, message: impl Into<String>) -> WireError {
    WireError::new(code, message)
}

/// Why the agent stops.
pub enum Exit {
    /// stdin closed and all work is done.
    InputClosed,
    /// SIGTERM/SIGINT or stdout gone.
    Stopped,
}

/// The controller: reads decoded commands, runs turns, answers everything.
pub struct Agent {
    shared: Arc<Shared>,
    turn: Option<(JoinHandle<Ending>, CancellationToken)>,
}

/// What an agent starts with, besides its conversation.
pub struct Startup {
    pub config: Config,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub mode: String,
    pub model: String,
    pub reasoning_level: Option<String>,
    pub toolset: crate::tools::Toolset,
    pub instructions: Option<String>,
}

impl Agent {
    pub fn new(
        start: Startup,
        conversation: Conversation,
        out: mpsc::Sender<Envelope<ServerMessage>>,
    ) -> Self {
        let Startup { config, cwd, home, mode, model, reasoning_level, toolset, instructions } =
            start;
        let grants =
            conversation.grants().into_iter().map(|(_, fingerprint)| fingerprint).collect();
        let state = State::new(mode, model, reasoning_level, grants);
        let shared = Arc::new(Shared {
            config,
            cwd,
            home,
            toolset,
            instructions,
            out,
            state: Mutex::new(state),
            conversation: tokio::sync::Mutex::new(conversation),
        });
        Self { shared, turn: None }
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// `hello`, then `sync` (§9.1): what a direct client sees first. A
    /// resumed session may still owe steers or follow-ups its last process
    /// accepted but never delivered: they are queued again, and the first
    /// opens a turn that starts right after the `sync`, which already shows
    /// it as the newest user message, with the status `streaming`.
    pub async fn greet(&mut self) {
        let owed = self.take_up_undelivered().await;
        self.shared
            .emit(ServerMessage::Hello(Hello {
                protocol_version: shard_protocol::PROTOCOL_VERSION.to_owned(),
                server_version: format!("shard {}", env!("CARGO_PKG_VERSION")),
                capabilities: self.shared.capabilities(),
            }))
            .await;
        let sync = self.sync().await;
        self.shared.emit(ServerMessage::Sync(sync)).await;
        if let Some(opening) = owed {
            self.start_turn(opening);
        }
    }

    /// Queues again what the session log holds as accepted and undelivered,
    /// in the order it was accepted, and takes the first of it as after any
    /// turn (a steer before a follow-up). Its user message is recorded now,
    /// before `sync`; if the log cannot take it, the turn tries again and
    /// reports why.
    async fn take_up_undelivered(&mut self) -> Option<Opening> {
        let owed = self.shared.conversation.lock().await.undelivered();
        if owed.is_empty() {
            return None;
        }
        tracing::info!(count = owed.len(), "delivering what the last process had queued");
        let first = {
            let mut state = self.shared.state();
            state.resumed_work = true;
            for queued in owed {
                let input = UserInput {
                    text: queued.text,
                    images: queued.images,
                    strict: None,
                    queued: 0,
                    pinned: queued.pinned,
                    queued_entry_id: Some(queued.entry_id),
                };
                state.enqueue(queued.behavior, input);
            }
            state.steers.pop_front().or_else(|| state.follow_ups.pop_front())
        }?;
        let entry = crate::turn::user_entry(first.clone());
        let recorded = self.shared.conversation.lock().await.push(entry).await.map(|_| ());
        match recorded {
            Ok(()) => {
                // Before `hello`: no `status` event may go out yet; `sync`
                // carries it.
                self.shared.state().status = AgentStatus::Streaming;
                Some(Opening::Recorded)
            }
            Err(problem) => {
                tracing::error!(%problem, "cannot record the owed user message");
                Some(Opening::Input(first))
            }
        }
    }

    async fn sync(&self) -> Sync {
        let (messages, compaction_index) = {
            let conversation = self.shared.conversation.lock().await;
            (conversation.live_messages(), conversation.compaction_index())
        };
        let (status, mode) = {
            let state = self.shared.state();
            (state.status, state.mode.clone())
        };
        Sync {
            status,
            mode,
            capabilities: Some(self.shared.capabilities()),
            runtime_epoch: None,
            live_window: LiveWindow { messages, compaction_index },
            pending_requests: self.shared.pending_requests(),
            seq: None,
            reset: None,
        }
    }

    /// Runs until stdin closes (and the work it asked for is done) or `stop`.
    pub async fn run(
        mut self,
        mut inbound: mpsc::Receiver<Inbound>,
        stop: CancellationToken,
    ) -> Exit {
        enum Event {
            Line(Option<Inbound>),
            TurnDone(Ending),
            Stop,
        }
        let mut input_open = true;
        loop {
            let event = tokio::select! {
                line = inbound.recv(), if input_open => Event::Line(line),
                ending = wait_turn(&mut self.turn) => Event::TurnDone(ending),
                () = stop.cancelled() => Event::Stop,
            };
            match event {
                Event::Line(Some(Inbound::Line(line))) => self.handle_line(line).await,
                Event::Line(None) => {
                    input_open = false;
                    self.enter_headless().await;
                }
                Event::TurnDone(ending) => {
                    self.turn = None;
                    self.after_turn(ending).await;
                }
                Event::Stop => {
                    self.end_turn().await;
                    return Exit::Stopped;
                }
            }
            if !input_open && self.turn.is_none() {
                return Exit::InputClosed;
            }
        }
    }

    /// Nobody can answer any more: refuse every open question.
    async fn enter_headless(&mut self) {
        let open: Vec<String> = {
            let mut state = self.shared.state();
            state.headless = true;
            state.pending.iter().map(|(id, _)| id.clone()).collect()
        };
        for id in open {
            self.shared.withdraw(&id, "headless").await;
        }
    }

    async fn handle_line(&mut self, line: Result<String, shard_protocol::jsonl::LineError>) {
        let line = match line {
            Ok(line) => line,
            Err(problem) => {
                return self
                    .report(None, None, error(ErrorCode::InvalidRequest, problem.to_string()))
                    .await;
            }
        };
        match Envelope::<ClientMessage>::from_json(&line) {
            Ok(envelope) => self.handle(envelope).await,
            Err(problem) => {
                let command = problem.type_name().map(str::to_owned);
                self.report(problem.id().map(str::to_owned), command, problem.to_wire_error())
                    .await;
            }
        }
    }

    /// An error answer: a `response` when the command had an `id`, else an
    /// `error` event (CONTRACT.md).
    async fn report(&self, id: Option<String>, command: Option<String>, problem: WireError) {
        match id {
            Some(id) => {
                let command = command.unwrap_or_else(|| "unknown".to_owned());
                self.shared.respond(Some(id), Response::failed(command, problem)).await;
            }
            None => {
                self.shared
                    .emit(ServerMessage::Error(shard_protocol::agent::ErrorEvent {
                        code: problem.code,
                        message: into_diagnostic(problem.message),
                        fatal: Some(false),
                    }))
                    .await;
            }
        }
    }

    async fn handle(&mut self, envelope: Envelope<ClientMessage>) {
        let Envelope { id, message, .. } = envelope;
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        let result = match message {
            ClientMessage::Prompt(Prompt { message, images, streaming_behavior, pinned }) => {
                let input = UserInput {
                    text: message,
                    images: images.unwrap_or_default(),
                    strict: None,
                    queued: 0,
                    pinned: pinned.unwrap_or(false),
                    queued_entry_id: None,
                };
                self.prompt(input, streaming_behavior, id.clone(), command).await;
                return;
            }
            ClientMessage::Steer(steer) => {
                let strict = steer.turn_id;
                let mut input = UserInput {
                    text: steer.message,
                    images: steer.images.unwrap_or_default(),
                    strict: None,
                    queued: 0,
                    pinned: false,
                    queued_entry_id: None,
                };
                if let Some(turn_id) = strict {
                    input.strict =
                        Some(StrictReply { id: id.clone(), command: command.to_owned() });
                    self.strict_steer(input, &turn_id, id, command).await;
                    return;
                }
                self.prompt(input, Some(StreamingBehavior::Steer), id.clone(), command).await;
                return;
            }
            ClientMessage::Abort(Empty {}) => {
                self.abort_turn().await;
                Ok(None)
            }
            ClientMessage::SetMode(set) => self.set_mode(set.mode).await,
            ClientMessage::ListModes(Empty {}) => {
                let active = self.shared.state().mode.clone();
                ok(ListModesResult { modes: modes::catalog(), active })
            }
            ClientMessage::ListModels(Empty {}) => {
                let (active, _) = self.shared.active_model();
                ok(ListModelsResult {
                    models: self.shared.config.models.iter().map(ModelConfig::descriptor).collect(),
                    active: active.descriptor(),
                })
            }
            ClientMessage::SetModel(set) => self.set_model(set.model).await,
            ClientMessage::ListReasoningLevels(Empty {}) => self.list_reasoning_levels(),
            ClientMessage::SetReasoningLevel(set) => {
                self.set_reasoning_level(set.model, set.effort).await
            }
            ClientMessage::SessionOp(op) => {
                self.session_op(op, id, command).await;
                return;
            }
            ClientMessage::RecallSteer(Empty {}) => {
                let taken = self.shared.state().recall();
                let recalled = match taken {
                    Some((recalled, entry)) => {
                        self.unqueue(entry, UnqueueReason::Recalled).await;
                        Some(recalled)
                    }
                    None => None,
                };
                ok(RecallSteerResult { recalled })
            }
            ClientMessage::PermissionResponse(response) => {
                self.answer_permission(response.request_id, response.answer).await;
                Ok(None)
            }
            ClientMessage::UiResponse(response) => {
                self.answer_ui(response.request_id, response.value).await;
                Ok(None)
            }
            other => Err(error(
                ErrorCode::InvalidRequest,
                format!(
                    "`{}` is a daemon command; this is a direct connection to one agent",
                    shard_protocol::envelope::MessageSet::type_name(&other)
                ),
            )),
        };
        self.shared.respond(id, to_response(command, result)).await;
    }

    async fn prompt(
        &mut self,
        input: UserInput,
        behavior: Option<StreamingBehavior>,
        id: Option<String>,
        command: &str,
    ) {
        if self.turn.is_none() {
            // Idle: the response, then the turn (CONTRACT.md ordering).
            self.shared.respond(id, Response::accepted(command)).await;
            self.start_turn(Opening::Input(input));
            return;
        }
        // A client that saw `turn_end` may prompt before the controller has
        // reaped the turn: that prompt is the next turn, not a steer, and
        // starts as this one winds down. So is one that reaches a resumed
        // agent busy with what its last process owed.
        let (ended, resumed) = {
            let state = self.shared.state();
            (state.turn_ended, state.resumed_work)
        };
        let behavior = match behavior {
            None if ended || resumed => Some(StreamingBehavior::FollowUp),
            behavior => behavior,
        };
        let room = {
            let state = self.shared.state();
            let weight: usize =
                state.steers.iter().chain(state.follow_ups.iter()).map(UserInput::size).sum();
            let full = |queue: &VecDeque<UserInput>| {
                queue.len() >= MAX_QUEUED_INPUTS || weight + input.size() > MAX_QUEUED_BYTES
            };
            match behavior {
                Some(StreamingBehavior::Steer) if full(&state.steers) => Err(queue_full("steer")),
                Some(StreamingBehavior::FollowUp) if full(&state.follow_ups) => {
                    Err(queue_full("follow-up"))
                }
                Some(behavior) => Ok(behavior),
                None => Err(error(
                    ErrorCode::InvalidRequest,
                    "the agent is mid-turn: set `streaming_behavior` to `steer` or `follow_up`",
                )),
            }
        };
        let queued = match room {
            Ok(behavior) => self.queue(behavior, input).await,
            Err(problem) => Err(problem),
        };
        let response = match queued {
            Ok(()) => Response::accepted(command),
            Err(problem) => Response::failed(command, problem),
        };
        self.shared.respond(id, response).await;
    }

    /// Queues a steer or follow-up once its `queued` entry is in the
    /// session log and synced: a client told it was accepted can count on
    /// it, whatever becomes of this process (a resumed agent delivers it,
    /// [`Agent::greet`]). The controller queues nothing else meanwhile, and
    /// a turn only takes from the queues, so the room checked still holds.
    async fn queue(
        &self,
        behavior: StreamingBehavior,
        mut input: UserInput,
    ) -> Result<(), WireError> {
        let entry = EntryBody::Queued {
            text: input.text.clone(),
            images: input.images.clone(),
            streaming_behavior: behavior,
            pinned: input.pinned,
        };
        input.queued_entry_id = Some(self.record(entry).await?);
        self.shared.state().enqueue(behavior, input);
        Ok(())
    }

    /// Records that queued inputs were taken back, so that no resumed agent
    /// delivers them. The client has its answer either way; a log that
    /// cannot take the record is reported here, and the worst a resume can
    /// then do is deliver what was taken back.
    async fn unqueue(&self, entries: impl IntoIterator<Item = String>, reason: UnqueueReason) {
        let mut entries = entries.into_iter().peekable();
        if entries.peek().is_none() {
            return;
        }
        let mut conversation = self.shared.conversation.lock().await;
        let written = async {
            for queued_entry_id in entries {
                conversation.push(EntryBody::Unqueued { queued_entry_id, reason }).await?;
            }
            conversation.flush().await
        };
        if let Err(problem) = written.await {
            tracing::error!(%problem, "cannot record queued inputs as taken back");
        }
    }

    /// A strict steer (PROTOCOL.md §10.3 `subagent.steer`): queued only if
    /// `turn_id` is the turn running now and has not ended; answered when
    /// delivered, or CONFLICT.
    async fn strict_steer(
        &mut self,
        input: UserInput,
        turn_id: &str,
        id: Option<String>,
        command: &str,
    ) {
        let refused = {
            let mut state = self.shared.state();
            let current = self.turn.is_some()
                && !state.turn_ended
                && state.turn_id.as_deref() == Some(turn_id);
            let weight: usize =
                state.steers.iter().chain(state.follow_ups.iter()).map(UserInput::size).sum();
            if !current {
                Some(error(ErrorCode::Conflict, format!("turn `{turn_id}` is not running")))
            } else if state.steers.len() >= MAX_QUEUED_INPUTS
                || weight + input.size() > MAX_QUEUED_BYTES
            {
                Some(queue_full("steer"))
            } else {
                state.enqueue(StreamingBehavior::Steer, input);
                None
            }
        };
        if let Some(problem) = refused {
            self.shared.respond(id, Response::failed(command, problem)).await;
        }
    }

    /// Strict steers still queued when their turn ends (or is aborted) are
    /// answered CONFLICT and dropped, never delivered into a later turn.
    async fn refuse_strict_steers(&self) {
        let refused: Vec<StrictReply> = {
            let mut state = self.shared.state();
            let (strict, kept): (Vec<UserInput>, Vec<UserInput>) =
                state.steers.drain(..).partition(|input| input.strict.is_some());
            state.steers.extend(kept);
            strict.into_iter().filter_map(|input| input.strict).collect()
        };
        for reply in refused {
            let problem =
                error(ErrorCode::Conflict, "the turn ended before the steer was delivered");
            self.shared.respond(reply.id, Response::failed(reply.command, problem)).await;
        }
    }

    fn start_turn(&mut self, opening: Opening) {
        self.shared.state().turn_ended = false;
        let cancel = CancellationToken::new();
        let handle = tokio::spawn(crate::turn::run(self.shared.clone(), opening, cancel.clone()));
        self.turn = Some((handle, cancel));
    }

    /// After a turn: deliver what was queued, else settle the status (only
    /// now, so a client that sees `idle` finds the agent ready for anything)
    /// and compact if due.
    async fn after_turn(&mut self, ending: Ending) {
        self.refuse_strict_steers().await;
        let next = {
            let mut state = self.shared.state();
            // A steer that arrived as the turn was ending still gets delivered.
            let next = state.steers.pop_front().or_else(|| state.follow_ups.pop_front());
            state.resumed_work &= next.is_some();
            next
        };
        if let Some(input) = next {
            self.start_turn(Opening::Input(input));
            return;
        }
        let status = if ending == Ending::Failed { AgentStatus::Error } else { AgentStatus::Idle };
        self.shared.set_status(status).await;
        let (model, _) = self.shared.active_model();
        let compaction = &self.shared.config.compaction;
        if compaction.enabled {
            let tokens = self.shared.conversation.lock().await.window_tokens();
            let threshold = (model.context_window() as f64 * compaction.threshold) as u64;
            if tokens >= threshold {
                let status = self.shared.state().status;
                let _ = crate::turn::compact(&self.shared, compaction.keep_recent_tokens).await;
                self.shared.set_status(status).await;
            }
        }
    }

    /// `abort`: the turn ends, and the steers and follow-ups queued behind
    /// it are dropped, in the log too.
    async fn abort_turn(&mut self) {
        self.refuse_strict_steers().await;
        let dropped: Vec<String> = {
            let mut guard = self.shared.state();
            let state = &mut *guard;
            state.resumed_work = false;
            let queued = state.steers.drain(..).chain(state.follow_ups.drain(..));
            queued.filter_map(|input| input.queued_entry_id).collect()
        };
        self.unqueue(dropped, UnqueueReason::Aborted).await;
        self.end_turn().await;
    }

    /// Cancels the running turn and waits for its end. What is queued stays
    /// queued: on SIGTERM the process exits with it in the log, where the
    /// next process on this session finds it.
    async fn end_turn(&mut self) {
        self.refuse_strict_steers().await;
        if let Some((handle, cancel)) = self.turn.take() {
            cancel.cancel();
            // The turn winds down quickly: it records results for unfinished
            // tool calls and ends the turn.
            let _ = handle.await;
            self.shared.set_status(AgentStatus::Idle).await;
        }
    }

    async fn set_mode(&self, mode: String) -> Result<Option<serde_json::Value>, WireError> {
        if !modes::is_known(&mode) {
            return Err(error(ErrorCode::NotFound, format!("unknown mode `{mode}`")));
        }
        let previous = std::mem::replace(&mut self.shared.state().mode, mode.clone());
        if previous != mode {
            self.record(EntryBody::Settings {
                mode: Some(mode.clone()),
                model: None,
                reasoning_level: None,
            })
            .await?;
            // §9.2: the event goes out before the response.
            self.shared
                .emit(ServerMessage::ModeChanged(ModeChanged {
                    previous_mode: previous.clone(),
                    mode: mode.clone(),
                }))
                .await;
        }
        ok(SetModeResult { previous_mode: previous, mode })
    }

    async fn set_model(&self, id: String) -> Result<Option<serde_json::Value>, WireError> {
        let Some(next) = self.shared.model_config(&id).cloned() else {
            return Err(error(ErrorCode::NotFound, format!("unknown model `{id}`")));
        };
        let (previous, _) = self.shared.active_model();
        if previous.id != next.id {
            {
                let mut state = self.shared.state();
                state.model = next.id.clone();
                state.reasoning_level = next.default_level();
            }
            self.record(EntryBody::Settings {
                mode: None,
                model: Some(next.id.clone()),
                reasoning_level: next.default_level(),
            })
            .await?;
            self.shared
                .emit(ServerMessage::ModelChanged(ModelChanged {
                    previous: previous.descriptor(),
                    active: next.descriptor(),
                    effective: Effective::NextProviderCall,
                    capabilities: Some(self.shared.capabilities()),
                }))
                .await;
        }
        ok(SetModelResult {
            previous: previous.descriptor(),
            active: next.descriptor(),
            effective: Effective::NextProviderCall,
        })
    }

    fn list_reasoning_levels(&self) -> Result<Option<serde_json::Value>, WireError> {
        let (model, level) = self.shared.active_model();
        if model.reasoning_levels.is_empty() {
            return Err(error(
                ErrorCode::NotFound,
                format!("model `{}` has no reasoning levels", model.id),
            ));
        }
        ok(ListReasoningLevelsResult {
            model: model.descriptor(),
            levels: model.levels(),
            active: level.or_else(|| model.default_level()).unwrap_or_default(),
            effective: Effective::NextProviderCall,
        })
    }

    async fn set_reasoning_level(
        &self,
        model_id: String,
        effort: String,
    ) -> Result<Option<serde_json::Value>, WireError> {
        let (model, current) = self.shared.active_model();
        if model.id != model_id {
            return Err(error(
                ErrorCode::Conflict,
                format!("the active model is `{}`, not `{model_id}`", model.id),
            ));
        }
        if model.level(&effort).is_none() {
            return Err(error(
                ErrorCode::NotFound,
                format!("model `{}` has no level `{effort}`", model.id),
            ));
        }
        let previous = current.or_else(|| model.default_level()).unwrap_or_default();
        let change = ReasoningLevelChange {
            model: model.descriptor(),
            previous: previous.clone(),
            active: effort.clone(),
            effective: Effective::NextProviderCall,
        };
        if previous != effort {
            self.shared.state().reasoning_level = Some(effort.clone());
            self.record(EntryBody::Settings {
                mode: None,
                model: None,
                reasoning_level: Some(effort),
            })
            .await?;
            self.shared.emit(ServerMessage::ReasoningLevelChanged(change.clone())).await;
        }
        ok(change)
    }

    /// Appends an entry and makes it durable now (a settings change made
    /// while idle must survive a crash too, and so must an accepted steer);
    /// answers its id.
    async fn record(&self, body: EntryBody) -> Result<String, WireError> {
        let mut conversation = self.shared.conversation.lock().await;
        let written = async {
            let id = conversation.push(body).await?.id.clone();
            conversation.flush().await?;
            Ok::<_, std::io::Error>(id)
        };
        written
            .await
            .map_err(|problem| error(ErrorCode::InternalError, format!("session log: {problem}")))
    }

    /// `session_op` sends its own response: `compact` must put its idle
    /// status after the response (§9.2 lifecycle).
    async fn session_op(&self, op: SessionOp, id: Option<String>, command: &str) {
        let busy = self.turn.is_some() || !self.shared.state().follow_ups.is_empty();
        let result = match op {
            SessionOp::List => {
                let conversation = self.shared.conversation.lock().await;
                ok(SessionListResult {
                    active: conversation.session_id.clone(),
                    sessions: conversation.list_sessions(),
                })
            }
            SessionOp::Compact { .. } | SessionOp::Fork { .. } if busy => Err(error(
                ErrorCode::Conflict,
                "a turn is queued or in flight; session operations run between turns",
            )),
            SessionOp::Compact { keep_recent_tokens } => {
                let keep =
                    keep_recent_tokens.unwrap_or(self.shared.config.compaction.keep_recent_tokens);
                let response = match crate::turn::compact(&self.shared, keep).await {
                    Ok(Some(compaction)) => ok(CompactResult::Compacted(compaction)),
                    Ok(None) => ok(CompactResult::Skipped { reason: "no_safe_cut".to_owned() }),
                    Err(problem) => Err(error(ErrorCode::InternalError, problem)),
                };
                self.shared.respond(id, to_response(command, response)).await;
                self.shared.set_status(AgentStatus::Idle).await;
                return;
            }
            SessionOp::Fork { from_entry_id } => {
                let conversation = self.shared.conversation.lock().await;
                match conversation.fork(&from_entry_id).await {
                    Ok(result) => ok(result),
                    Err(crate::session_log::SessionError::NotFound(id)) => {
                        Err(error(ErrorCode::NotFound, format!("no entry `{id}` in this session")))
                    }
                    Err(problem) => {
                        Err(error(ErrorCode::InternalError, format!("fork failed: {problem}")))
                    }
                }
            }
        };
        self.shared.respond(id, to_response(command, result)).await;
    }

    async fn answer_permission(&self, request_id: String, answer: PermissionAnswer) {
        let reply = {
            let mut state = self.shared.state();
            let Some(at) = state.pending.iter().position(|(id, _)| *id == request_id) else {
                return; // late or unknown: discarded silently (§6.3)
            };
            let valid = matches!(&state.pending[at].1, Pending::Permission { request, .. } if request.accepts(&answer));
            if !valid {
                return; // an unknown choice_id is not an answer (§9.5)
            }
            match state.pending.remove(at).1 {
                Pending::Permission { reply, .. } => reply,
                Pending::Ui { .. } => return,
            }
        };
        self.shared
            .emit(ServerMessage::PermissionResolved(PermissionResolved {
                request_id,
                answer: answer.clone(),
                source: None,
            }))
            .await;
        let _ = reply.send(answer);
    }

    async fn answer_ui(&self, request_id: String, value: Option<UiValue>) {
        let reply = {
            let mut state = self.shared.state();
            let Some(at) = state.pending.iter().position(|(id, pending)| {
                *id == request_id && matches!(pending, Pending::Ui { .. })
            }) else {
                return;
            };
            match state.pending.remove(at).1 {
                Pending::Ui { reply, .. } => reply,
                Pending::Permission { .. } => return,
            }
        };
        self.shared
            .emit(ServerMessage::UiResolved(UiResolved {
                request_id,
                value: serde_json::to_value(&value).unwrap_or_default(),
            }))
            .await;
        let _ = reply.send(value);
    }
}

fn ok(data: impl serde::Serialize) -> Result<Option<serde_json::Value>, WireError> {
    serde_json::to_value(data)
        .map(Some)
        .map_err(|problem| error(ErrorCode::InternalError, problem.to_string()))
}

fn queue_full(which: &str) -> WireError {
    error(
        ErrorCode::Conflict,
        format!(
            "the {which} queue is full ({MAX_QUEUED_INPUTS} messages or {} MiB wait for this turn); \
             wait for the turn to take them, or abort",
            MAX_QUEUED_BYTES / (1024 * 1024)
        ),
    )
}

async fn wait_turn(turn: &mut Option<(JoinHandle<Ending>, CancellationToken)>) -> Ending {
    match turn {
        Some((handle, _)) => handle.await.unwrap_or_else(|problem| {
            tracing::error!(%problem, "the turn task failed");
            Ending::Failed
        }),
        None => std::future::pending().await,
    }
}

fn to_response(command: &str, result: Result<Option<serde_json::Value>, WireError>) -> Response {
    Response { command: command.to_owned(), outcome: result }
}

#[cfg(test)]
mod interleavings;
