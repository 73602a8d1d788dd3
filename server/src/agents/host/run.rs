//! A supervised run (PROTOCOL.md §10.3): the job coordinator hands a host
//! one task; the host starts the process if needed, sends the task as a
//! prompt once the agent is idle, follows that one turn, and reports its
//! start and its end (final text, usage, error) to the coordinator. It also
//! carries the coordinator's strict steers into that turn and stops it
//! (abort, then SIGTERM, then SIGKILL) when asked.

use shard_protocol::agent::{Empty, Prompt, Steer};
use shard_protocol::message::Response;
use shard_protocol::types::{ContentBlock, Usage};
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant};

use super::{Host, Inflight, Then};
use crate::agents::error::AgentError;

/// How long an aborted run's turn may take to end before its process is
/// sent SIGTERM (then, after the kill grace, SIGKILL).
pub const ABORT_GRACE: Duration = Duration::from_secs(3);
/// The most bytes of a run's final text kept (the rest is cut, marked).
pub const MAX_FINAL_TEXT: usize = 64 * 1024;
/// Events one run sends: its start and its end, never more.
pub const RUN_EVENTS: usize = 4;

/// What a run reports to its coordinator.
#[derive(Debug)]
pub enum RunEvent {
    /// The task's turn started.
    Started { turn_id: String },
    /// The task's turn ended, or never could (`error` says why).
    Ended(RunEnd),
}

#[derive(Debug, Default)]
pub struct RunEnd {
    pub final_text: Option<String>,
    pub usage: Option<Usage>,
    /// The turn failed (a provider error, the process died, the prompt was
    /// refused).
    pub error: Option<String>,
    /// The turn ended because it was stopped.
    pub stopped: bool,
}

/// The run this host is carrying out.
pub(super) struct Supervised {
    events: mpsc::Sender<RunEvent>,
    /// The task, until it is sent.
    task: Option<String>,
    /// The turn the task started, once `turn_start` came.
    turn_id: Option<String>,
    final_text: Option<String>,
    error: Option<String>,
    /// Set by a stop: when SIGTERM follows if the turn has not ended.
    stop_at: Option<Instant>,
    stopped: bool,
}

impl Supervised {
    pub(super) fn new(task: String, events: mpsc::Sender<RunEvent>) -> Self {
        Self {
            events,
            task: Some(task),
            turn_id: None,
            final_text: None,
            error: None,
            stop_at: None,
            stopped: false,
        }
    }

    fn report(&self, event: RunEvent) {
        // At most two events into a queue of four: never full.
        let _ = self.events.try_send(event);
    }
}

/// The text blocks of an assistant message, joined.
fn text_of(content: &[ContentBlock]) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// `text` cut to [`MAX_FINAL_TEXT`] bytes at a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_FINAL_TEXT {
        let mut cut = MAX_FINAL_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[cut: the final text was longer]");
    }
    text
}

impl Host {
    /// `HostCommand::Run`: take the run (or queue it behind one that is
    /// being stopped) and start the process it needs.
    pub(super) fn take_run(
        &mut self,
        task: String,
        events: mpsc::Sender<RunEvent>,
        reply: oneshot::Sender<Result<(), WireError>>,
        now: Instant,
    ) {
        let run = Supervised::new(task, events);
        match &self.run {
            None => self.run = Some(run),
            Some(current) if current.stopped && self.next_run.is_none() => {
                self.next_run = Some(run)
            }
            Some(_) => {
                let error = AgentError::AlreadyOnRun.into();
                let _ = reply.send(Err(error));
                return;
            }
        }
        let _ = reply.send(Ok(()));
        self.ensure_process(now);
        self.drive_run(now);
    }

    /// Sends the run's task once the agent is ready and idle.
    pub(super) fn drive_run(&mut self, now: Instant) {
        if !self.ready() || self.projection.status.is_active() {
            return;
        }
        let Some(run) = &mut self.run else { return };
        let Some(task) = run.task.take() else { return };
        let prompt = Prompt { message: task, images: None, streaming_behavior: None, pinned: None };
        let internal = self.internal_id();
        if !self
            .send_to_child(&Envelope::new(ClientMessage::Prompt(prompt)).with_id(internal.clone()))
        {
            self.end_run(Some("the agent is not reading its input".to_owned()));
            return;
        }
        self.inflight.insert(internal, Inflight::internal("prompt", Then::RunPrompt));
        self.last_active = now;
    }

    /// The agent answered the run's prompt: a refusal ends the run.
    pub(super) fn run_prompt_answered(&mut self, response: &Response) {
        if let Err(error) = &response.outcome {
            self.end_run(Some(format!("the task was refused: {}", error.message)));
        }
    }

    /// Follows the run's turn through the agent's events.
    pub(super) fn observe_run(&mut self, message: &ServerMessage) {
        let Some(run) = &mut self.run else { return };
        if run.task.is_some() {
            return; // not sent yet: whatever this is, it is not the run's turn
        }
        match message {
            ServerMessage::TurnStart(start) if run.turn_id.is_none() => {
                run.turn_id = Some(start.turn_id.clone());
                run.report(RunEvent::Started { turn_id: start.turn_id.clone() });
            }
            ServerMessage::MessageComplete(complete) if run.turn_id.is_some() => {
                let text = text_of(&complete.message.content);
                if !text.trim().is_empty() {
                    run.final_text = Some(bounded(text));
                }
            }
            ServerMessage::Error(error) if run.turn_id.is_some() => {
                run.error = Some(format!("{}: {}", error.code, error.message));
            }
            ServerMessage::TurnEnd(end) if run.turn_id.as_deref() == Some(end.turn_id.as_str()) => {
                let usage = end.usage.clone();
                let error = run.error.take();
                self.finish_run(usage, error);
            }
            _ => {}
        }
    }

    fn finish_run(&mut self, usage: Option<Usage>, error: Option<String>) {
        let Some(run) = self.run.take() else { return };
        let end = RunEnd { final_text: run.final_text.clone(), usage, error, stopped: run.stopped };
        run.report(RunEvent::Ended(end));
        self.run = self.next_run.take();
    }

    /// The run ends without its turn ending (the process died, the prompt
    /// was refused).
    pub(super) fn end_run(&mut self, error: Option<String>) {
        if let Some(run) = &mut self.run
            && run.error.is_none()
        {
            run.error = error;
        }
        let error = self.run.as_mut().and_then(|run| run.error.take());
        self.finish_run(None, error);
    }

    /// `HostCommand::StopRun`: a run not started yet ends now; a running
    /// turn is aborted, then its process terminated if it does not end.
    pub(super) fn stop_run(&mut self, now: Instant) {
        if let Some(next) = self.next_run.take() {
            next.report(RunEvent::Ended(RunEnd { stopped: true, ..RunEnd::default() }));
        }
        let Some(run) = &mut self.run else { return };
        run.stopped = true;
        if run.task.is_some() {
            self.finish_run(None, None);
            return;
        }
        if run.stop_at.is_none() {
            run.stop_at = Some(now + ABORT_GRACE);
            let internal = self.internal_id();
            let abort = Envelope::new(ClientMessage::Abort(Empty {})).with_id(internal.clone());
            if self.send_to_child(&abort) {
                self.inflight.insert(internal, Inflight::internal("abort", Then::Nothing));
            }
        }
    }

    /// A stopped run whose turn did not end in time: terminate the process.
    pub(super) fn run_timers(&mut self, now: Instant) {
        let due = self.run.as_ref().and_then(|run| run.stop_at).is_some_and(|at| now >= at);
        if due {
            if let Some(run) = &mut self.run {
                run.stop_at = None;
            }
            tracing::warn!(agent = %self.id(), "a stopped run did not end its turn; terminating the agent");
            self.kill_process(false, now);
        }
    }

    pub(super) fn run_deadline(&self) -> Option<Instant> {
        self.run.as_ref().and_then(|run| run.stop_at)
    }

    /// `HostCommand::SteerRun`: a strict steer into the run's turn.
    pub(super) fn steer_run(
        &mut self,
        message: String,
        reply: oneshot::Sender<Result<String, WireError>>,
    ) {
        let turn = self.run.as_ref().filter(|run| !run.stopped).and_then(|run| run.turn_id.clone());
        let Some(turn_id) = turn.filter(|_| self.ready()) else {
            let _ = reply.send(Err(AgentError::NoActiveTurn.into()));
            return;
        };
        let steer = Steer { message, images: None, turn_id: Some(turn_id.clone()) };
        let internal = self.internal_id();
        if !self
            .send_to_child(&Envelope::new(ClientMessage::Steer(steer)).with_id(internal.clone()))
        {
            let error = AgentError::NotReading.into();
            let _ = reply.send(Err(error));
            return;
        }
        self.inflight.insert(internal, Inflight::internal("steer", Then::Steer { turn_id, reply }));
    }
}
