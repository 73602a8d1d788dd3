//! A supervised run (PROTOCOL.md §10.3): the job coordinator hands a host
//! one task; the host starts the process if needed, sends the task as a
//! prompt once the agent is idle, follows that one turn, and reports its
//! start and its end (final text, usage, error) to the coordinator. It also
//! carries the coordinator's strict steers into that turn and stops it
//! (abort, then SIGTERM, then SIGKILL) when asked.

use shard_protocol::agent::{Empty, Prompt, Steer};
use shard_protocol::message::Response;
use shard_protocol::types::{ContentBlock, Usage};
use shard_protocol::{ClientMessage, ServerMessage, WireError};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant};

use super::out::{Out, Then};
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

/// One run: its task until sent, then its turn.
struct Supervised {
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
    fn new(task: String, events: mpsc::Sender<RunEvent>) -> Self {
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

/// The run this host is carrying out, and one waiting behind a run that
/// is being stopped. Sans-IO: it says what to send and when to stop the
/// process; the host sends and stops.
#[derive(Default)]
pub(super) struct Runs {
    current: Option<Supervised>,
    next: Option<Supervised>,
}

impl Runs {
    /// Takes a run, or queues it behind one that is being stopped; refused
    /// while another goes on. `reply` says which; `true`: taken.
    pub fn take(
        &mut self,
        task: String,
        events: mpsc::Sender<RunEvent>,
        reply: oneshot::Sender<Result<(), WireError>>,
    ) -> bool {
        let run = Some(Supervised::new(task, events));
        match &self.current {
            None => self.current = run,
            Some(current) if current.stopped && self.next.is_none() => self.next = run,
            Some(_) => {
                let _ = reply.send(Err(AgentError::AlreadyOnRun.into()));
                return false;
            }
        }
        let _ = reply.send(Ok(()));
        true
    }

    /// A run is in hand (its task may not be sent yet).
    pub fn is_running(&self) -> bool {
        self.current.is_some()
    }

    /// A run is in hand or queued.
    pub fn any(&self) -> bool {
        self.current.is_some() || self.next.is_some()
    }

    /// The task as a prompt, to send now that the agent is `idle` (ready,
    /// and in no turn).
    pub fn drive(&mut self, idle: bool) -> Option<Out> {
        let message = self.current.as_mut().filter(|_| idle)?.task.take()?;
        let prompt = Prompt { message, images: None, streaming_behavior: None, pinned: None };
        Some(Out::Send(ClientMessage::Prompt(prompt), Then::RunPrompt))
    }

    /// `HostCommand::SteerRun`: a strict steer into the run's turn, while
    /// the agent is `ready`; refused at once when there is none.
    pub fn steer(
        &self,
        ready: bool,
        message: String,
        reply: oneshot::Sender<Result<String, WireError>>,
    ) -> Option<Out> {
        let Some(turn_id) = self.steer_turn().filter(|_| ready) else {
            let _ = reply.send(Err(AgentError::NoActiveTurn.into()));
            return None;
        };
        let steer = Steer { message, images: None, turn_id: Some(turn_id.clone()) };
        Some(Out::Send(ClientMessage::Steer(steer), Then::Steer { turn_id, reply }))
    }

    /// The agent answered what the run sent: a refused prompt ends the
    /// run; a steer's asker learns its turn or why not.
    pub fn answered(&mut self, then: Then, response: &Response) {
        match then {
            Then::Nothing | Then::Answer { .. } => {}
            Then::RunPrompt => {
                if let Err(error) = &response.outcome {
                    self.end(Some(format!("the task was refused: {}", error.message)));
                }
            }
            Then::Steer { turn_id, reply } => {
                let _ = reply.send(response.outcome.clone().map(|_| turn_id));
            }
        }
    }

    /// What the run sent never reached the agent: its input is full.
    pub fn unsent(&mut self, then: Then) {
        match then {
            Then::Nothing | Then::Answer { .. } => {}
            Then::RunPrompt => self.end(Some("the agent is not reading its input".to_owned())),
            Then::Steer { reply, .. } => {
                let _ = reply.send(Err(AgentError::NotReading.into()));
            }
        }
    }

    /// Follows the run's turn through the agent's events.
    pub fn observe(&mut self, message: &ServerMessage) {
        let Some(run) = &mut self.current else { return };
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
                self.finish(usage, error);
            }
            _ => {}
        }
    }

    fn finish(&mut self, usage: Option<Usage>, error: Option<String>) {
        let Some(run) = self.current.take() else { return };
        let end = RunEnd { final_text: run.final_text.clone(), usage, error, stopped: run.stopped };
        run.report(RunEvent::Ended(end));
        self.current = self.next.take();
    }

    /// The run ends without its turn ending (the process died, the prompt
    /// was refused, the agent does not read its input).
    pub fn end(&mut self, error: Option<String>) {
        if let Some(run) = &mut self.current
            && run.error.is_none()
        {
            run.error = error;
        }
        let error = self.current.as_mut().and_then(|run| run.error.take());
        self.finish(None, error);
    }

    /// `HostCommand::StopRun`: a run not started yet ends now; a running
    /// turn is aborted, and its process terminated if it does not end
    /// within [`ABORT_GRACE`].
    pub fn stop(&mut self, now: Instant) -> Option<Out> {
        if let Some(next) = self.next.take() {
            next.report(RunEvent::Ended(RunEnd { stopped: true, ..RunEnd::default() }));
        }
        let run = self.current.as_mut()?;
        run.stopped = true;
        if run.task.is_some() {
            self.finish(None, None);
            return None;
        }
        if run.stop_at.is_some() {
            return None;
        }
        run.stop_at = Some(now + ABORT_GRACE);
        Some(Out::Send(ClientMessage::Abort(Empty {}), Then::Nothing))
    }

    /// Whether a stopped run's turn failed to end in time: its process is
    /// to be terminated (once).
    pub fn overdue(&mut self, now: Instant) -> bool {
        let Some(run) = &mut self.current else { return false };
        let due = run.stop_at.is_some_and(|at| now >= at);
        if due {
            run.stop_at = None;
        }
        due
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.current.as_ref().and_then(|run| run.stop_at)
    }

    /// The turn a strict steer goes into: the run's, once started and
    /// while not being stopped.
    fn steer_turn(&self) -> Option<String> {
        self.current.as_ref().filter(|run| !run.stopped).and_then(|run| run.turn_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(value: serde_json::Value) -> ServerMessage {
        let envelope = shard_protocol::Envelope::<ServerMessage>::from_json(&value.to_string());
        envelope.expect("a server message").message
    }

    fn turn_start(turn_id: &str) -> ServerMessage {
        event(json!({"type": "turn_start", "turn_id": turn_id}))
    }

    fn said(text: &str) -> ServerMessage {
        event(json!({"type": "message_complete", "message_id": "m1", "message": {
            "id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]
        }}))
    }

    /// Hands `runs` a run of `task`; what it said.
    fn take(runs: &mut Runs, task: &str, events: &mpsc::Sender<RunEvent>) -> Result<(), WireError> {
        let (reply, mut said) = oneshot::channel();
        let taken = runs.take(task.to_owned(), events.clone(), reply);
        let said = said.try_recv().expect("a reply at once");
        assert_eq!(taken, said.is_ok());
        said
    }

    /// The task a run sent, if it sent one.
    fn prompted(out: Option<Out>) -> Option<String> {
        match out {
            Some(Out::Send(ClientMessage::Prompt(prompt), Then::RunPrompt)) => Some(prompt.message),
            _ => None,
        }
    }

    fn turn_end(turn_id: &str) -> ServerMessage {
        event(json!({"type": "turn_end", "turn_id": turn_id}))
    }

    #[test]
    fn a_run_follows_its_own_turn_and_reports_its_start_and_end_once() {
        let (events, mut reports) = mpsc::channel(RUN_EVENTS);
        let mut runs = Runs::default();
        take(&mut runs, "fix it", &events).expect("taken");
        // Events before the task is sent are another turn's.
        runs.observe(&turn_start("earlier"));
        assert!(reports.try_recv().is_err());
        assert!(runs.drive(false).is_none(), "not while the agent is busy");
        assert_eq!(prompted(runs.drive(true)).as_deref(), Some("fix it"));
        assert!(runs.drive(true).is_none(), "the task is sent once");
        runs.observe(&turn_start("t1"));
        assert!(matches!(reports.try_recv(), Ok(RunEvent::Started { turn_id }) if turn_id == "t1"));
        let (reply, mut steered) = oneshot::channel();
        let Some(Out::Send(_, then)) = runs.steer(true, "also this".into(), reply) else {
            panic!("no steer")
        };
        runs.answered(then, &Response::accepted("steer"));
        assert_eq!(steered.try_recv().ok().and_then(Result::ok).as_deref(), Some("t1"));
        runs.observe(&said("done"));
        runs.observe(&turn_end("other"));
        assert!(runs.is_running(), "another turn's end is not the run's");
        runs.observe(&turn_end("t1"));
        let Ok(RunEvent::Ended(end)) = reports.try_recv() else { panic!("no end") };
        assert_eq!(end.final_text.as_deref(), Some("done"));
        assert!(end.error.is_none() && !end.stopped);
        assert!(!runs.any());
    }

    #[test]
    fn a_second_run_is_refused_unless_the_first_is_being_stopped() {
        let (events, mut reports) = mpsc::channel(RUN_EVENTS);
        let start = Instant::now();
        let mut runs = Runs::default();
        take(&mut runs, "one", &events).expect("taken");
        let refused = take(&mut runs, "two", &events).expect_err("refused");
        assert_eq!(refused.code, shard_protocol::ErrorCode::Conflict);
        runs.drive(true);
        runs.observe(&turn_start("t1"));
        assert!(matches!(runs.stop(start), Some(Out::Send(ClientMessage::Abort(_), _))));
        assert!(runs.stop(start).is_none(), "aborted once");
        let (reply, mut refused) = oneshot::channel();
        assert!(runs.steer(true, "more".into(), reply).is_none(), "no steer into a stopped run");
        assert!(matches!(refused.try_recv(), Ok(Err(_))));
        take(&mut runs, "two", &events).expect("queued behind the stopped one");
        assert!(take(&mut runs, "three", &events).is_err(), "one waits, no more");
        // The turn does not end: once the grace is over, terminate once.
        assert_eq!(runs.deadline(), Some(start + ABORT_GRACE));
        assert!(!runs.overdue(start + ABORT_GRACE - Duration::from_millis(1)));
        assert!(runs.overdue(start + ABORT_GRACE));
        assert!(!runs.overdue(start + ABORT_GRACE * 2));
        runs.end(Some("the agent's process ended".into()));
        let _started = reports.try_recv();
        let Ok(RunEvent::Ended(end)) = reports.try_recv() else { panic!("no end") };
        assert!(end.stopped);
        assert_eq!(end.error.as_deref(), Some("the agent's process ended"));
        assert_eq!(prompted(runs.drive(true)).as_deref(), Some("two"), "the queued run is next");
    }

    #[test]
    fn a_refused_prompt_ends_the_run_and_a_long_answer_is_cut() {
        let (events, mut reports) = mpsc::channel(RUN_EVENTS);
        let mut runs = Runs::default();
        take(&mut runs, "task", &events).expect("taken");
        let Some(Out::Send(_, then)) = runs.drive(true) else { panic!("not sent") };
        let refused = Response::failed(
            "prompt",
            shard_protocol::WireError::new(shard_protocol::ErrorCode::Conflict, "busy"),
        );
        runs.answered(then, &refused);
        let Ok(RunEvent::Ended(end)) = reports.try_recv() else { panic!("no end") };
        assert_eq!(end.error.as_deref(), Some("the task was refused: busy"));
        let long = bounded("é".repeat(MAX_FINAL_TEXT));
        assert!(long.len() < MAX_FINAL_TEXT + 64 && long.ends_with("longer]"));
        // A task the agent's input could not take ends the run too.
        let (events, mut reports) = mpsc::channel(RUN_EVENTS);
        take(&mut runs, "again", &events).expect("taken");
        let Some(Out::Send(_, then)) = runs.drive(true) else { panic!("not sent") };
        runs.unsent(then);
        let Ok(RunEvent::Ended(end)) = reports.try_recv() else { panic!("no end") };
        assert_eq!(end.error.as_deref(), Some("the agent is not reading its input"));
    }
}
