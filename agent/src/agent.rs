//! The agent: one actor that owns the session's state and answers every
//! per-agent command (PROTOCOL.md §9), with at most one turn running beside it
//! as its own task. The controller keeps answering while a turn streams:
//! `list_modes`, `set_model`, permission answers, `abort` and so on.
//!
//! State both sides touch lives in [`Shared`] (crate::shared) behind
//! short-lived locks; the conversation lock is never held across a model
//! call or a question to the user.
//!
//! - `commands`: a command line decoded and routed.
//! - `inputs`: prompts and steers queued behind a running turn.
//! - `settings`: mode, model and reasoning level.
//! - `session`: `session_op`.
//! - `answers`: permission and UI answers.
//! - `refusal`: why a command is refused, as the wire says it.

mod answers;
mod commands;
mod inputs;
mod refusal;
mod session;
mod settings;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use shard_protocol::agent::{Hello, LiveWindow, Sync, UserMessage};
use shard_protocol::message::Response;
use shard_protocol::types::AgentStatus;
use shard_protocol::{Envelope, ServerMessage, WireError};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::refusal::Refusal;
use crate::config::Config;
use crate::conversation::Conversation;
use crate::session_log::{EntryBody, UnqueueReason};
use crate::shared::{LogFailed, Shared, State, UserInput};
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
            hold: tokio::sync::watch::Sender::new(None),
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
        let recorded =
            self.shared.conversation.lock().await.push(entry).await.map(|entry| entry.id.clone());
        match recorded {
            Ok(entry_id) => {
                // Before `hello`: no `status` event may go out yet; `sync`
                // carries it.
                self.shared.state().status = AgentStatus::Streaming;
                let said = UserMessage { entry_id, text: first.text, turn_id: None };
                Some(Opening::Recorded(said))
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
            let mut queued: Vec<_> =
                state.steers.drain(..).chain(state.follow_ups.drain(..)).collect();
            queued.sort_by_key(|input| input.queued);
            // Told with the turn's end, when a turn is running to end.
            if self.turn.is_some() {
                state.dropped = queued.iter().map(|input| input.text.clone()).collect();
            }
            queued.into_iter().filter_map(|input| input.queued_entry_id).collect()
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

    /// Appends an entry and makes it durable now (a settings change made
    /// while idle must survive a crash too, and so must an accepted steer);
    /// answers its id.
    async fn record(&self, body: EntryBody) -> Result<String, Refusal> {
        let mut conversation = self.shared.conversation.lock().await;
        let written = async {
            let id = conversation.push(body).await?.id.clone();
            conversation.flush().await?;
            Ok::<_, std::io::Error>(id)
        };
        Ok(written.await.map_err(LogFailed)?)
    }
}

/// A command's answer, or what refuses it.
type Answer = Result<Option<serde_json::Value>, Refusal>;

fn ok(data: impl serde::Serialize) -> Answer {
    serde_json::to_value(data).map(Some).map_err(Refusal::Encode)
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

fn to_response(command: &str, answer: Answer) -> Response {
    Response { command: command.to_owned(), outcome: answer.map_err(WireError::from) }
}

#[cfg(test)]
mod interleavings;
