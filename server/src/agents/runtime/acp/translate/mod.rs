//! The translation between Shard's per-agent protocol (PROTOCOL.md §9, what
//! the host speaks) and ACP (what the agent speaks), as a synchronous state
//! machine: a line from either side in, the lines and log entries it gives
//! out. No process, no clock, no file: unit tests drive it line by line, and
//! the bridge (`process.rs`) carries out what it gives.
//!
//! The [`Translator`] routes: each line goes to the part it is about, and
//! where one thing touches several parts (a tool call completes the message
//! streaming, a turn's end closes what the turn left open) the translator
//! composes what each part gives, in order. Each part owns its state, takes
//! plain inputs (the wire's [`Outstanding`] requests and the [`ids::Ids`]
//! when it sends or mints) and is unit-tested on its own:
//! - [`opening`]: `initialize`, then `session/load` or `session/resume` of
//!   the agent's previous session when it offers them, else `session/new`;
//!   the session reopened after a cancelled turn; Shard's `hello` and `sync`.
//! - [`settings`]: modes and models from the session's modes and config
//!   options, listed and switched as Shard's own, and set back to Shard's
//!   record when a session opens without them.
//! - [`turn`]: `prompt` → `session/prompt`, chunks → deltas reconciled by
//!   `message_complete`, the result → usage and `turn_end`; follow-ups
//!   queued durably for the turn's end; `abort` → `session/cancel`.
//! - [`tools`]: tool calls as `tool_call`/`tool_result` (diffs and commands
//!   rendered as Shard's own).
//! - [`question`]: the questions open to people: the agent's permission
//!   requests, and Shard's own before a write [`files`] would not serve at
//!   once (`crate::agents::sensitive`).
//! - [`elicit`]: the agent's forms (ACP elicitation), asked field by field
//!   as Shard's `ui_request`s.
//! - [`plan`]: the agent's plan, one card per turn.
//! - [`commands`]: the agent's slash commands, listed and announced.
//! - [`ids`]: Shard's ids for what the parts show, from one counter.
//!
//! The status clients see (`status`: waiting on a question, streaming,
//! idle) is the translator's own, read from what the parts hold. Every
//! other command is answered with an error saying so, never left without
//! an answer.

mod commands;
mod elicit;
mod files;
mod ids;
mod opening;
mod plan;
mod question;
mod settings;
mod tools;
mod turn;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use agent_client_protocol_schema::v1::{
    self as acp, AgentNotification, AgentRequest, AgentResponse, RequestId,
    RequestPermissionRequest,
};
use shard_platform::conversation::{RecordedSettings, Undelivered};
use shard_platform::session_log::EntryBody;
use shard_protocol::agent::{
    DeltaKind, PermissionAnswer, PermissionResponse, Status, StreamingBehavior, UiResponse,
};
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, ContentBlock, Image};
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};

use self::commands::Commands;
use self::elicit::{Elicited, Forms};
use self::files::{Files, Write};
use self::ids::Ids;
use self::opening::{Opened, Opening};
use self::plan::Plan;
use self::question::Questions;
use self::settings::{Answered, Settings};
use self::tools::{Progress, Tools};
use self::turn::Turns;
use super::error::AcpError;
use super::wire::{self, Incoming, Outstanding};

/// What one line in gives out.
#[derive(Debug, PartialEq)]
pub enum Out {
    /// A §9 line for the host.
    Host(String),
    /// An ACP line for the agent.
    Agent(String),
    /// An entry for Shard's own record of the session.
    Log(EntryBody),
    /// The user's message a turn opens with, to record as a user entry;
    /// then every client learns it and its entry (`user_message`).
    Prompted { text: String, images: Vec<Image>, queued_entry_id: Option<String>, turn_id: String },
    /// A follow-up to record, synced, before it is accepted: the bridge
    /// records it and hands its entry back through [`Translator::queued`].
    Queue(Queueing),
    /// The agent's own id for the session, kept beside Shard's record so
    /// that a later process resumes it.
    Session(String),
    /// A file request of the agent, to carry out inside the cwd and answer.
    Fs(RequestId, FsRequest),
    /// A turn starts: what the agent runs apart from itself now is its own.
    Watch,
    /// A cancelled turn ended: what the agent started apart from itself
    /// during it (a command in a session of its own) is killed.
    Reap,
    /// The agent cannot be used: why. The process is stopped.
    Fatal(String),
}

/// A follow-up waiting to be recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Queueing {
    pub reply: Option<String>,
    pub text: String,
    pub images: Vec<Image>,
    pub behavior: StreamingBehavior,
    pub pinned: bool,
}

pub use super::fs::FsRequest;

/// What a translator starts from: the agent's directory, and what Shard's
/// record of the session says a new process owes.
#[derive(Debug, Default)]
pub struct Start {
    pub cwd: PathBuf,
    /// Where a write is asked about first (`$SHARD_HOME`, `~/.ssh`, …).
    pub places: crate::agents::sensitive::Places,
    /// The runtime's id: names the model in Shard's record.
    pub runtime: String,
    /// The agent's own session id from an earlier process, if any.
    pub previous: Option<String>,
    /// Follow-ups accepted and never delivered, oldest first.
    pub owed: Vec<Undelivered>,
    /// The mode and model last set.
    pub recorded: RecordedSettings,
}

/// A call a part shows in the turn (a tool's, the plan's card): the block
/// the message streaming so far completes with, when the call is new to
/// it, then the call's `tool_call` event.
struct Shown {
    completes: Option<ContentBlock>,
    call: Out,
}

/// One ACP agent's translation: its parts, and the requests sent to it.
pub struct Translator {
    /// The requests sent to the agent and not yet answered.
    outstanding: Outstanding,
    ids: Ids,
    opening: Opening,
    settings: Settings,
    turns: Turns,
    tools: Tools,
    questions: Questions,
    files: Files,
    forms: Forms,
    plan: Plan,
    commands: Commands,
}

impl Translator {
    /// A translator, and its first line: `initialize`.
    pub fn start(start: Start) -> (Self, Vec<Out>) {
        let mut outstanding = Outstanding::default();
        let (opening, first) = Opening::start(start.cwd.clone(), start.previous, &mut outstanding);
        let translator = Self {
            outstanding,
            ids: Ids::random(),
            opening,
            settings: Settings::new(start.runtime, start.recorded),
            turns: Turns::new(start.owed),
            tools: Tools::default(),
            questions: Questions::default(),
            files: Files::new(start.cwd, start.places),
            forms: Forms::default(),
            plan: Plan::default(),
            commands: Commands::default(),
        };
        (translator, vec![first])
    }

    /// The agent has a session: Shard's `hello` and `sync` went out.
    pub fn is_ready(&self) -> bool {
        self.opening.is_ready()
    }

    /// A fresh id, as the parts mint them.
    #[cfg(test)]
    fn fresh(&mut self, prefix: &str) -> String {
        self.ids.fresh(prefix)
    }

    /// One line from the host (a §9 command).
    pub fn from_host(&mut self, line: &str) -> Vec<Out> {
        let Ok(envelope) = Envelope::<ClientMessage>::from_json(line) else {
            return Vec::new();
        };
        let id = envelope.id;
        let command = shard_protocol::envelope::MessageSet::type_name(&envelope.message);
        match envelope.message {
            ClientMessage::Prompt(prompt) => self.turns.prompt(
                &mut self.ids,
                &mut self.outstanding,
                id,
                prompt,
                self.opening.for_prompt(),
                self.opening.takes_images(),
            ),
            ClientMessage::Steer(_) => {
                vec![respond(id, Response::failed(command, AcpError::Steer.into()))]
            }
            ClientMessage::RecallSteer(_) => self.turns.recall(id),
            ClientMessage::Abort(_) => self.abort(id),
            ClientMessage::PermissionResponse(answer) => self.answered(id, answer),
            ClientMessage::UiResponse(answer) => self.form_answered(id, answer),
            ClientMessage::ListModes(_) => vec![respond(id, self.settings.list_modes())],
            ClientMessage::SetMode(set) => {
                let session = self.opening.ready_session();
                self.settings.set_mode(&mut self.outstanding, id, set.mode, session)
            }
            ClientMessage::ListModels(_) => vec![respond(id, self.settings.list_models())],
            ClientMessage::SetModel(set) => {
                let session = self.opening.ready_session();
                self.settings.set_model(&mut self.outstanding, id, set.model, session)
            }
            ClientMessage::ListCommands(_) => vec![self.commands.list(id)],
            ClientMessage::Hold(hold) => {
                let held = hold.held.then(|| hold.reason.unwrap_or_default());
                let released = held.is_none();
                self.turns.hold(held);
                let mut out = vec![respond(id, Response::accepted(command))];
                if released {
                    out.extend(self.next_queued());
                }
                out
            }
            _ => {
                vec![respond(id, Response::failed(command, AcpError::NotForAcp(command).into()))]
            }
        }
    }

    /// A follow-up is in Shard's record: it waits for the turn's end (or
    /// starts one, if the turn ended meanwhile).
    pub fn queued(&mut self, reply: Option<String>, input: Undelivered) -> Vec<Out> {
        self.turns.enqueue(input);
        let mut out = vec![respond(reply, Response::accepted("prompt"))];
        out.extend(self.next_queued());
        out
    }

    /// One line from the agent.
    pub fn from_agent(&mut self, line: &str) -> Vec<Out> {
        match wire::decode(line, &mut self.outstanding) {
            Incoming::Response { id, result, .. } => self.response(id, result.map(|r| *r)),
            Incoming::TextChunk { text, thinking } if self.is_ready() => {
                let kind = match thinking {
                    true => DeltaKind::Thinking,
                    false => DeltaKind::Text,
                };
                self.turns.text_chunk(text, kind)
            }
            // Before the session is open: a replay of `session/load`.
            Incoming::TextChunk { .. } => Vec::new(),
            Incoming::Notification(notification) => match *notification {
                AgentNotification::SessionNotification(update) if self.is_ready() => {
                    self.update(update.update)
                }
                // Before the session is open: a replay of `session/load`,
                // already in Shard's own record.
                _ => Vec::new(),
            },
            Incoming::Request(asked, request) => match *request {
                AgentRequest::RequestPermissionRequest(request) => self.asked(asked, request),
                AgentRequest::ReadTextFileRequest(request) => {
                    vec![Out::Fs(asked, FsRequest::Read(request))]
                }
                AgentRequest::WriteTextFileRequest(request) => {
                    match self.files.write(&mut self.ids, request) {
                        Write::Serve(request) => vec![Out::Fs(asked, FsRequest::Write(request))],
                        Write::Ask { request, shown } => vec![
                            self.questions.write_asked(asked, request, *shown),
                            self.status_now(),
                        ],
                    }
                }
                AgentRequest::CreateElicitationRequest(request) => {
                    match self.forms.elicit(&mut self.ids, asked, request) {
                        Elicited::Asked(question) => vec![question, self.status_now()],
                        Elicited::Answered(answer) => vec![answer],
                    }
                }
                _ => vec![Out::Agent(wire::answer(asked, Err(acp::Error::method_not_found())))],
            },
            Incoming::Unanswerable(asked, error) => {
                vec![Out::Agent(wire::answer(asked, Err(error)))]
            }
            Incoming::Ignored(why) => {
                tracing::warn!(%why, "an ACP agent's line was ignored");
                Vec::new()
            }
        }
    }

    fn response(&mut self, id: i64, result: Result<AgentResponse, acp::Error>) -> Vec<Out> {
        match self.opening.opened(id, &result, &mut self.outstanding) {
            Some(Opened::Lines(out)) => return out,
            Some(Opened::Open { session, modes, options }) => {
                return self.session_opened(session, modes, options);
            }
            None => {}
        }
        if self.settings.awaits(id) {
            return match self.settings.answered(id, result) {
                Answered::Lines(out) => out,
                Answered::Restored => self.session_shown(),
            };
        }
        if self.turns.prompted(id) {
            return self.turn_ended(result);
        }
        Vec::new()
    }

    fn update(&mut self, update: acp::SessionUpdate) -> Vec<Out> {
        use acp::SessionUpdate as U;
        match update {
            U::AgentMessageChunk(chunk) => self.turns.chunk(chunk, DeltaKind::Text),
            U::AgentThoughtChunk(chunk) => self.turns.chunk(chunk, DeltaKind::Thinking),
            U::ToolCall(call) => {
                let progress = self.tools.call(call, self.turns.in_turn());
                self.progress(progress)
            }
            U::ToolCallUpdate(update) => {
                let progress = self.tools.update(update, self.turns.in_turn());
                self.progress(progress)
            }
            U::Plan(plan) => match self.plan.now(&mut self.ids, plan, self.turns.in_turn()) {
                Some(shown) => self.show(shown),
                None => Vec::new(),
            },
            U::AvailableCommandsUpdate(update) => self.commands.now(update, self.is_ready()),
            U::CurrentModeUpdate(update) => {
                self.settings.mode_now(update.current_mode_id.0.to_string())
            }
            U::ConfigOptionUpdate(update) => self.settings.options_now(update.config_options),
            U::UsageUpdate(usage) => {
                self.turns.usage_now(usage);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The session opened, offering `modes` and `options`: kept, then the
    /// session set to the mode and model it must have before clients see it.
    fn session_opened(
        &mut self,
        session: acp::SessionId,
        modes: Option<&acp::SessionModeState>,
        options: Option<&[acp::SessionConfigOption]>,
    ) -> Vec<Out> {
        let wanted = self.settings.wanted(self.opening.is_reopening());
        self.settings.offered(modes, options);
        let mut out = vec![Out::Session(session.0.to_string())];
        let restoring = self.settings.restore(&mut self.outstanding, wanted, &session);
        if !restoring.is_empty() {
            // Shown once the agent has answered (while reopening, prompts
            // meanwhile wait as follow-ups).
            out.extend(restoring);
            return out;
        }
        out.extend(self.session_shown());
        out
    }

    /// The session opened, with the mode and model it must have: clients
    /// see it (a `hello` and `sync`, or nothing new after a reopening),
    /// then what could not be kept, and the first follow-up owed.
    fn session_shown(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        // After a reopening the clients never saw the session go: no new
        // hello, only what could not be kept, and the prompts that waited.
        if !self.opening.reopened() {
            let settings = &self.settings;
            out.extend(opening::greeting(
                settings.runtime(),
                settings.capabilities(),
                settings.mode(),
            ));
        }
        // What could not be kept (the earlier session, a recorded mode or
        // model), said plainly, then the first follow-up owed.
        out.extend(self.opening.afresh_said());
        out.extend(self.settings.unrestored_said());
        out.extend(self.next_queued());
        out
    }

    /// The oldest follow-up waiting, as a turn of its own, once the
    /// session is open and no turn is in progress.
    fn next_queued(&mut self) -> Vec<Out> {
        let session = self.opening.ready_session();
        self.turns.next_queued(&mut self.ids, &mut self.outstanding, session)
    }

    /// `session/cancel`, every open question answered `cancelled` as ACP
    /// requires, and the follow-ups dropped with the turn; the turn ends
    /// when the agent answers the prompt.
    fn abort(&mut self, id: Option<String>) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("abort"))];
        let abort = self.turns.abort(self.opening.session());
        let dropped = !abort.unqueued.is_empty();
        out.extend(abort.unqueued);
        let Some(cancel) = abort.cancel else {
            // What waited for a hold is gone: the agent is idle again.
            if dropped {
                out.push(self.status_now());
            }
            return out;
        };
        let asked = !self.questions.is_empty() || !self.forms.is_empty();
        out.extend(self.forms.left_open());
        out.extend(self.questions.cancel_all());
        if asked {
            out.push(self.status_now());
        }
        out.push(cancel);
        out
    }

    /// The agent answered the turn's prompt: the message is complete, what
    /// the turn left open (calls, its plan, forms) closed, its usage
    /// counted, and the turn ends (an error says why, then ends it too).
    /// A cancelled turn may have its session reopened; else a follow-up
    /// waiting starts the next.
    fn turn_ended(&mut self, result: Result<AgentResponse, acp::Error>) -> Vec<Out> {
        let model = self.settings.model_name();
        let Some(mut stopped) = self.turns.stop(&mut self.ids, &model) else {
            return Vec::new();
        };
        let aborted = stopped.aborted();
        let mut out = std::mem::take(&mut stopped.completed);
        out.extend(self.tools.left_open());
        out.extend(self.plan.left_open());
        out.extend(self.forms.left_open());
        out.extend(self.turns.ended(stopped, result, &model));
        if aborted {
            let reopened = self.opening.reopen(&mut self.outstanding);
            if !reopened.is_empty() {
                out.extend(reopened);
                return out;
            }
        }
        out.extend(self.next_queued());
        out
    }

    /// A piece of a tool call: the call shown, then its result.
    fn progress(&mut self, progress: Progress) -> Vec<Out> {
        let mut out = match progress.shown {
            Some(shown) => self.show(shown),
            None => Vec::new(),
        };
        out.extend(progress.finished);
        out
    }

    /// A call shown in the turn: the message streaming so far completes
    /// with its block, if it is new, then the call.
    fn show(&mut self, shown: Shown) -> Vec<Out> {
        let mut out = match shown.completes {
            Some(block) => {
                let model = self.settings.model_name();
                self.turns.complete_message(&mut self.ids, &model, vec![block])
            }
            None => Vec::new(),
        };
        out.push(shown.call);
        out
    }

    /// A permission request: the call it is about shown first, whatever
    /// the agent said of it so far, then Shard's own question.
    fn asked(&mut self, asked: RequestId, request: RequestPermissionRequest) -> Vec<Out> {
        let tool_id = request.tool_call.tool_call_id.0.to_string();
        let shown =
            self.tools.asked_about(&tool_id, request.tool_call.fields, self.turns.in_turn());
        let mut out = match shown {
            Some(shown) => self.show(shown),
            None => Vec::new(),
        };
        let subject = self.tools.subject(&tool_id);
        out.push(self.questions.asked(&mut self.ids, asked, &request.options, subject));
        out.push(self.status_now());
        out
    }

    /// A `permission_response`, accepted whatever it settles.
    fn answered(&mut self, id: Option<String>, answer: PermissionResponse) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("permission_response"))];
        if let Some(settled) = self.questions.answered(answer) {
            out.extend(settled);
            out.push(self.status_now());
        }
        out
    }

    /// A `ui_response`, accepted whatever it settles.
    fn form_answered(&mut self, id: Option<String>, answer: UiResponse) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("ui_response"))];
        if let Some(settled) = self.forms.answered(&mut self.ids, answer) {
            out.extend(settled);
            out.push(self.status_now());
        }
        out
    }

    /// The status as it stands: waiting while a question is open (the
    /// agent's or Shard's own before a write), else streaming in a turn,
    /// else idle.
    fn status_now(&self) -> Out {
        let (questions, forms) = (self.questions.is_empty(), self.forms.is_empty());
        status(match (questions, forms, self.turns.in_turn()) {
            (false, _, _) => AgentStatus::WaitingForPermission,
            (true, false, _) => AgentStatus::WaitingForUi,
            (true, true, true) => AgentStatus::Streaming,
            (true, true, false) => AgentStatus::Idle,
        })
    }
}

/// A refusal of `command`, for the bridge's own refusals.
pub fn failed(reply: Option<String>, command: &str, error: WireError) -> Out {
    respond(reply, Response::failed(command, error))
}

fn event(message: ServerMessage) -> Out {
    Out::Host(Envelope::new(message).to_json())
}

fn respond(id: Option<String>, response: Response) -> Out {
    let envelope = Envelope::new(ServerMessage::Response(response));
    Out::Host(
        match id {
            Some(id) => envelope.with_id(id),
            None => envelope,
        }
        .to_json(),
    )
}

fn resolved(request_id: String, answer: PermissionAnswer, source: Option<&str>) -> Out {
    let source = source.map(str::to_owned);
    event(ServerMessage::PermissionResolved(shard_protocol::agent::PermissionResolved {
        request_id,
        answer,
        source,
    }))
}

fn status(status: AgentStatus) -> Out {
    event(ServerMessage::Status(Status { status, detail: None }))
}

fn error_event(error: WireError) -> Out {
    let event_ = shard_protocol::agent::ErrorEvent {
        code: error.code,
        message: error.message,
        fatal: Some(false),
    };
    event(ServerMessage::Error(event_))
}
