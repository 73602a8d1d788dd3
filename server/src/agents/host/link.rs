//! The host's link to its agent's process: the running generation's input
//! (as the runtime seam gives it), what was asked through it and waits for
//! an answer, and what waits for a ready process. Each command goes to the
//! agent under an id of the daemon's own (`d-N`), so that its response goes
//! back to the connection that asked, under that connection's id, or to the
//! host itself (a run's prompt, a steer, the daemon's own answers). A
//! process that ends fails what it had in hand; one that cannot start fails
//! what waited.

use std::collections::HashMap;

use shard_protocol::message::Response;
use shard_protocol::orchestrator::AttachRole;
use shard_protocol::{ClientMessage, Envelope, WireError};
use tokio::sync::{mpsc, oneshot};

use super::out::{Out, Then};
use super::process::Control;
use crate::agents::error::AgentError;
use crate::agents::runtime::{ChildEvent, NotTaken, Runtime, SpawnRequest, Spawner};
use crate::agents::{Sub, SubscriberId};

/// Reads of the child's stdout (each at most 64 KiB of lines, or one longer
/// line) buffered between its reader and the host: about 4 MiB. A full
/// buffer pushes back on the agent's stdout, never grows.
const CHILD_READS: usize = 64;

/// A command forwarded to the agent, waiting for its response.
pub(super) struct Inflight {
    /// `None`: the daemon's own command (its response is swallowed).
    pub subscriber: Option<Sub>,
    pub client_id: Option<String>,
    pub command: &'static str,
    pub then: Then,
}

impl Inflight {
    /// The daemon's own command.
    pub fn internal(command: &'static str, then: Then) -> Self {
        Self { subscriber: None, client_id: None, command, then }
    }
}

/// Deferred work that needs a ready process.
pub(super) enum Waiting {
    Attach { subscriber: Sub, role: AttachRole, id: Option<String>, after_seq: Option<u64> },
    Forward { subscriber: Sub, id: Option<String>, message: Box<ClientMessage> },
    Start { reply: oneshot::Sender<Result<(), WireError>> },
}

/// The answer to a per-agent command while no process runs, if it needs
/// none: listing never wakes a stopped runtime (§9.2), and a stopped one
/// has no turn to abort and nothing queued to take back. `None`: the
/// command waits for a process.
pub(super) fn while_stopped(message: &ClientMessage) -> Option<Response> {
    let command = shard_protocol::envelope::MessageSet::type_name(message);
    Some(match message {
        ClientMessage::ListModes(_)
        | ClientMessage::ListModels(_)
        | ClientMessage::ListReasoningLevels(_)
        | ClientMessage::ListCommands(_) => {
            Response::failed(command, AgentError::RuntimeStopped.into())
        }
        ClientMessage::Abort(_) => Response::accepted(command),
        ClientMessage::RecallSteer(_) => {
            Response::ok(command, shard_protocol::agent::RecallSteerResult { recalled: None })
        }
        _ => return None,
    })
}

#[derive(Default)]
pub(super) struct Link {
    /// The running generation, as the runtime seam gives it.
    runtime: Option<Box<dyn Runtime>>,
    /// Where this host's processes send their lines and exits; none while
    /// it is dormant.
    events: Option<mpsc::Sender<ChildEvent>>,
    inflight: HashMap<String, Inflight>,
    next_internal: u64,
    waiting: Vec<Waiting>,
    /// A prompt or steer went to the agent and its work has not settled
    /// (the agent has not reported `idle` since): the agent answers a
    /// prompt before it says it is streaming, and a session switch must
    /// not slip into that gap.
    turn_expected: bool,
}

impl Link {
    /// A fresh queue for the processes' events.
    pub fn wire(&mut self) -> mpsc::Receiver<ChildEvent> {
        let (events, child_events) = mpsc::channel(CHILD_READS);
        self.events = Some(events);
        child_events
    }

    /// The host has its queue: a dormant one runs nothing.
    pub fn awake(&self) -> bool {
        self.events.is_some()
    }

    /// Starts a generation through the runtime seam.
    pub fn spawn(
        &mut self,
        spawner: &dyn Spawner,
        request: &SpawnRequest<'_>,
    ) -> Result<(), AgentError> {
        let events = self.events.clone().ok_or(AgentError::HostNotRunning)?;
        match spawner.spawn(request, events) {
            Ok(runtime) => {
                self.runtime = Some(runtime);
                Ok(())
            }
            Err(error) => {
                tracing::error!(agent = %request.agent_id, %error, "cannot start the agent process");
                Err(AgentError::of_spawn(&error, request.cwd))
            }
        }
    }

    /// Queues one line for the agent; not when there is no process, its
    /// input queue is full, or it cannot be reached now.
    fn send(&mut self, id: &str, message: ClientMessage) -> Result<(), NotTaken> {
        let Some(runtime) = &mut self.runtime else { return Err(NotTaken::Full) };
        let mut line = Envelope::new(message).with_id(id.to_owned()).to_json().into_bytes();
        line.push(b'\n');
        runtime.send(bytes::Bytes::from(line))
    }

    /// A client's command, to the agent under an id of the daemon's own;
    /// the response to send at once when the agent's input is full.
    pub fn forward(
        &mut self,
        subscriber: Sub,
        id: Option<String>,
        message: ClientMessage,
    ) -> Option<Out> {
        let internal = self.next_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        let work = matches!(message, ClientMessage::Prompt(_) | ClientMessage::Steer(_));
        if let Err(not_taken) = self.send(&internal, message) {
            let error = match not_taken {
                NotTaken::Full => AgentError::InputSlow,
                NotTaken::Unreachable(why) => AgentError::NodeOffline(why),
            };
            let response = Response::failed(command, error.into());
            return Some(Out::Respond { to: subscriber, id, tagged: true, response });
        }
        let inflight =
            Inflight { subscriber: Some(subscriber), client_id: id, command, then: Then::Nothing };
        self.inflight.insert(internal, inflight);
        self.turn_expected |= work;
        None
    }

    /// The daemon's own command to the agent, its response handled as
    /// `then` says; `then` back, and why, when the agent did not take it.
    pub fn own(&mut self, message: ClientMessage, then: Then) -> Result<(), (Then, NotTaken)> {
        let id = self.next_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        if let Err(not_taken) = self.send(&id, message) {
            return Err((then, not_taken));
        }
        self.inflight.insert(id, Inflight::internal(command, then));
        Ok(())
    }

    pub fn control(&mut self, control: Option<Control>) {
        let (Some(runtime), Some(control)) = (&mut self.runtime, control) else { return };
        match control {
            Control::CloseInput => runtime.close_input(),
            Control::Terminate => runtime.terminate(),
            Control::Kill => runtime.kill(),
        }
    }

    /// The id the next command to the agent goes under.
    fn next_id(&mut self) -> String {
        self.next_internal += 1;
        format!("d-{}", self.next_internal)
    }

    /// The agent is inactive: no turn is on its way any more.
    pub fn turn_settled(&mut self) {
        self.turn_expected = false;
    }

    pub fn turn_expected(&self) -> bool {
        self.turn_expected
    }

    /// The agent's response to `id`, and what asked for it. A refused
    /// prompt starts nothing (while the agent is not `active`).
    pub fn answered(&mut self, id: &str, response: &Response, active: bool) -> Option<Inflight> {
        let inflight = self.inflight.remove(id)?;
        let refused_work = matches!(inflight.command, "prompt" | "steer") && !response.success();
        if refused_work && !active {
            self.turn_expected = false;
        }
        Some(inflight)
    }

    /// A connection went: its commands' responses go nowhere.
    pub fn detached(&mut self, subscriber: SubscriberId) {
        self.inflight.retain(|_, inflight| {
            inflight.subscriber.as_ref().is_none_or(|owner| owner.id() != subscriber)
        });
    }

    pub fn wait(&mut self, waiting: Waiting) {
        self.waiting.push(waiting);
    }

    /// Everything that waited for a ready process, now that one is.
    pub fn take_waiting(&mut self) -> Vec<Waiting> {
        std::mem::take(&mut self.waiting)
    }

    pub fn anything_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Nothing in hand and nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.inflight.is_empty() && self.waiting.is_empty()
    }

    /// Answers every piece of work that was waiting for a ready process.
    pub fn fail_waiting(&mut self, error: WireError) -> Vec<Out> {
        let mut out = Vec::new();
        for waiting in std::mem::take(&mut self.waiting) {
            match waiting {
                Waiting::Start { reply } => {
                    let _ = reply.send(Err(error.clone()));
                }
                Waiting::Attach { subscriber, id, .. } => {
                    let response = Response::failed("agent.attach", error.clone());
                    out.push(Out::Respond { to: subscriber, id, tagged: false, response });
                }
                Waiting::Forward { subscriber, id, message } => {
                    let command = shard_protocol::envelope::MessageSet::type_name(message.as_ref());
                    let response = Response::failed(command, error.clone());
                    out.push(Out::Respond { to: subscriber, id, tagged: true, response });
                }
            }
        }
        out
    }

    /// The process ended: what it had in hand fails, and no turn is on
    /// its way. The host's own commands go with it.
    pub fn process_gone(&mut self) -> Vec<Out> {
        self.runtime = None;
        self.turn_expected = false;
        let mut out = Vec::new();
        for (_, inflight) in std::mem::take(&mut self.inflight) {
            if let Some(subscriber) = inflight.subscriber {
                let response = Response::failed(inflight.command, AgentError::ProcessExited.into());
                out.push(Out::Respond {
                    to: subscriber,
                    id: inflight.client_id,
                    tagged: true,
                    response,
                });
            }
        }
        out
    }

    /// Gives back the queue's sender and the room the map and list grew
    /// to (a host going dormant).
    pub fn shed(&mut self) {
        self.events = None;
        self.inflight = HashMap::new();
        self.waiting = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use shard_protocol::agent::{Empty, Prompt};

    use super::*;
    use crate::agents::runtime::NotTaken;

    /// An agent's input that keeps its lines, or refuses them when full.
    #[derive(Clone, Default)]
    struct Input {
        lines: Arc<Mutex<Vec<String>>>,
        full: Arc<Mutex<bool>>,
    }

    impl Runtime for Input {
        fn send(&mut self, line: bytes::Bytes) -> Result<(), NotTaken> {
            if *self.full.lock().expect("lock") {
                return Err(NotTaken::Full);
            }
            self.lines.lock().expect("lock").push(String::from_utf8_lossy(&line).into_owned());
            Ok(())
        }
        fn close_input(&mut self) {}
        fn terminate(&mut self) {}
        fn kill(&mut self) {}
    }

    struct Spawn(Input);

    impl Spawner for Spawn {
        fn spawn(
            &self,
            _: &SpawnRequest<'_>,
            _: mpsc::Sender<ChildEvent>,
        ) -> std::io::Result<Box<dyn Runtime>> {
            Ok(Box::new(self.0.clone()))
        }
    }

    fn linked() -> (Link, Input) {
        let input = Input::default();
        let mut link = Link::default();
        let _events = link.wire();
        let manifest = crate::agents::manifest::Manifest::default();
        link.spawn(
            &Spawn(input.clone()),
            &SpawnRequest::of(std::path::Path::new("/nonexistent"), &manifest, 0),
        )
        .expect("spawned");
        (link, input)
    }

    struct Client;

    impl crate::agents::Subscriber for Client {
        fn id(&self) -> SubscriberId {
            7
        }
        fn push(&self, _: crate::agents::Wire) -> bool {
            true
        }
    }

    fn prompt() -> ClientMessage {
        let message = "hi".to_owned();
        ClientMessage::Prompt(Prompt {
            message,
            images: None,
            streaming_behavior: None,
            pinned: None,
        })
    }

    #[test]
    fn a_command_goes_under_the_daemons_own_id_and_its_answer_back_to_its_asker() {
        let (mut link, input) = linked();
        assert!(link.forward(Arc::new(Client), Some("c-1".into()), prompt()).is_none());
        assert!(link.turn_expected(), "a prompt: a turn is on its way");
        let sent = input.lines.lock().expect("lock").clone();
        assert!(sent[0].contains(r#""id":"d-1""#) && sent[0].ends_with('\n'), "{sent:?}");
        let refused = Response::failed("prompt", AgentError::InputSlow.into());
        let inflight = link.answered("d-1", &refused, false).expect("in flight");
        assert_eq!(inflight.client_id.as_deref(), Some("c-1"));
        assert!(!link.turn_expected(), "a refused prompt starts nothing");
        assert!(link.answered("d-1", &refused, false).is_none(), "answered once");
        assert!(link.is_empty());
    }

    #[test]
    fn a_full_input_refuses_at_once_and_keeps_nothing_in_flight() {
        let (mut link, input) = linked();
        *input.full.lock().expect("lock") = true;
        let refused = link.forward(Arc::new(Client), Some("c-1".into()), prompt());
        assert!(matches!(refused, Some(Out::Respond { tagged: true, .. })));
        assert!(matches!(
            link.own(ClientMessage::Abort(Empty {}), Then::RunPrompt),
            Err((Then::RunPrompt, NotTaken::Full))
        ));
        assert!(link.is_empty() && !link.turn_expected());
    }

    #[test]
    fn a_gone_process_fails_what_it_had_and_a_failed_start_what_waited() {
        let (mut link, _input) = linked();
        link.forward(Arc::new(Client), Some("c-1".into()), prompt());
        assert!(link.own(ClientMessage::Abort(Empty {}), Then::Nothing).is_ok());
        let failed = link.process_gone();
        assert_eq!(Out::kinds(&failed), ["respond"], "the daemon's own command goes silently");
        assert!(link.is_empty());
        assert!(link.forward(Arc::new(Client), None, prompt()).is_some(), "no process: refused");

        let (reply, mut started) = oneshot::channel();
        link.wait(Waiting::Start { reply });
        let message = Box::new(prompt());
        link.wait(Waiting::Forward { subscriber: Arc::new(Client), id: None, message });
        let failed = link.fail_waiting(AgentError::ShuttingDown.into());
        assert_eq!(Out::kinds(&failed), ["respond"]);
        assert!(matches!(started.try_recv(), Ok(Err(_))));
        assert!(!link.anything_waiting());
    }

    #[test]
    fn listing_never_wakes_a_stopped_agent() {
        let listed = while_stopped(&ClientMessage::ListModes(Empty {}));
        assert!(listed.is_some_and(|response| !response.success()));
        assert!(while_stopped(&ClientMessage::Abort(Empty {})).is_some_and(|r| r.success()));
        assert!(while_stopped(&prompt()).is_none(), "a prompt waits for a process");
    }
}
