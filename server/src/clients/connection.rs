//! One client connection speaking the daemon protocol, whatever carries it:
//! decodes frames, asks the command table (crate::commands) who may run
//! each command, checks the connection's attachments and role against it,
//! and runs the command. Every answer goes through the connection's outbox,
//! in order.
//!
//! Handling a frame never waits: per-agent commands are queued to their
//! host without blocking (a full host queue is an error), and the slow
//! commands run as their own tasks, a bounded number per connection,
//! answering when they finish. So the reader keeps reading (pongs included)
//! however busy the agents are.

use std::collections::HashMap;
use std::sync::Arc;

use shard_protocol::agent::{ErrorEvent, Hello};
use shard_protocol::approvals::Answerer;
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::envelope::{MessageSet, Scope};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AttachRole;
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::outbox::Outbox;
use crate::agents::Wire;
use crate::agents::host::HostCommand;
use crate::commands::Daemon;
use crate::commands::{self, Answer, Answering, Attachment, Caller, Door, Outcome, Standing};

/// Slow commands one connection may have running at once. A person creates
/// or kills a handful of agents at a time; more is a script that should
/// wait for its answers.
const BACKGROUND_COMMANDS: usize = 16;

/// The transport a connection came in on, and the trust that goes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The unix socket: local trust (§4.2); may administer the daemon.
    Unix,
    /// A browser's WebSocket.
    WebSocket,
}

impl Transport {
    /// The capability `hello` names (§9.1).
    fn capability(self) -> &'static str {
        match self {
            Self::Unix => "unix",
            Self::WebSocket => "websocket",
        }
    }

    /// Names this client in `permission_resolved.source`.
    fn source(self) -> &'static str {
        match self {
            Self::Unix => "unix",
            Self::WebSocket => "web",
        }
    }

    fn local(self) -> bool {
        self == Self::Unix
    }
}

/// Who is at the other end, as far as the daemon knows: recorded with the
/// answers this connection gives (`approval.list`).
#[derive(Debug, Clone, Default)]
pub struct Peer {
    /// The enrolled browser (WebSocket only).
    pub principal_id: Option<String>,
    /// The client's address (WebSocket only): the TCP peer, or behind the
    /// trusted proxy the address it forwarded.
    pub address: Option<String>,
    /// The peer process (unix socket only, from the kernel's credentials):
    /// an agent's own process speaks for that agent.
    pub pid: Option<u32>,
}

pub struct Connection {
    outbox: Arc<Outbox>,
    daemon: Arc<dyn Daemon>,
    attached: HashMap<String, AttachRole>,
    transport: Transport,
    peer: Peer,
    background: Arc<Semaphore>,
    /// Cancelled when the connection ends: a `subagent.wait` stops waiting;
    /// the work it watches goes on.
    closing: CancellationToken,
}

fn encode(envelope: Envelope<ServerMessage>) -> Wire {
    Wire::from(envelope.to_json())
}

impl Connection {
    pub fn new(
        outbox: Arc<Outbox>,
        daemon: Arc<dyn Daemon>,
        transport: Transport,
        peer: Peer,
    ) -> Self {
        Self {
            outbox,
            daemon,
            attached: HashMap::new(),
            transport,
            peer,
            background: Arc::new(Semaphore::new(BACKGROUND_COMMANDS)),
            closing: CancellationToken::new(),
        }
    }

    /// `hello` (§9.1): transport-scoped capabilities only; each runtime's
    /// own arrive in its `sync`.
    pub fn hello(&self) {
        let hello = Hello {
            protocol_version: shard_protocol::PROTOCOL_VERSION.to_owned(),
            server_version: format!("shard {}", env!("CARGO_PKG_VERSION")),
            capabilities: vec![
                self.transport.capability().to_owned(),
                "streaming-deltas".to_owned(),
                // Per-agent `seq` and `agent.attach`'s `after_seq`.
                "event-seq".to_owned(),
                // `workspace.commit`, `.merge` and `.push`, previewed first.
                "workspace-actions".to_owned(),
            ],
        };
        self.outbox.push(encode(Envelope::new(ServerMessage::Hello(hello))));
    }

    /// A frame the transport could not even split out (too long, not UTF-8).
    pub fn frame_error(&self, why: &str) {
        let error = commands::CommandError::BadFrame(why.to_owned()).into();
        reject(&self.outbox, None, None, None, error);
    }

    pub fn frame(&mut self, text: &str) {
        match Envelope::<ClientMessage>::from_json(text) {
            Ok(envelope) => self.handle(envelope),
            Err(problem) => {
                let id = problem.id().map(str::to_owned);
                reject(&self.outbox, id, problem.type_name(), None, problem.to_wire_error());
            }
        }
    }

    /// Decodes nothing more: asks the command table who may run the command
    /// (crate::commands), checks it, and runs the command.
    fn handle(&mut self, envelope: Envelope<ClientMessage>) {
        let Envelope { id, agent_id, message, .. } = envelope;
        let command = message.type_name();
        let rule = commands::rule(&message);
        let routed = ClientMessage::scope_of(command) == Some(Scope::Routed);
        // A per-agent command's answer carries its routing `agent_id`.
        let tag = if routed { agent_id.clone() } else { None };
        let refuse = |error| reject(&self.outbox, id.clone(), Some(command), tag.clone(), error);
        let subject = match (routed, agent_id) {
            (true, Some(agent_id)) => Some(agent_id),
            (true, None) => {
                return refuse(commands::CommandError::NoAgentId(command).into());
            }
            (false, _) => commands::subject(&message).map(str::to_owned),
        };
        let standing = match &subject {
            Some(agent_id) => match self.standing(rule.attachment, agent_id, routed) {
                Ok(standing) => Some((agent_id.as_str(), standing)),
                Err(error) => return refuse(error),
            },
            None => None,
        };
        let door = Door { local: self.transport.local(), an_agent: self.is_an_agent() };
        let grant = match commands::admit(&message, door, standing) {
            Ok(grant) => grant,
            Err(error) => return refuse(error.into()),
        };
        let caller = Caller {
            daemon: &self.daemon,
            attached: &mut self.attached,
            subscriber: self.outbox.clone(),
            id: id.clone(),
            source: self.transport.source(),
            answerer: Answerer {
                source: self.transport.source().to_owned(),
                principal_id: self.peer.principal_id.clone(),
                address: self.peer.address.clone(),
            },
            grant,
        };
        let outcome = match subject {
            Some(agent_id) if routed => commands::routed::run(caller, agent_id, message),
            _ => commands::run(caller, message),
        };
        match outcome {
            Outcome::Now(answer) => finish(&self.outbox, id, tag, command, answer),
            Outcome::Later(work) if rule.answering == Answering::Watching => {
                self.watching(id, command, work)
            }
            Outcome::Later(work) => self.answer_later(id, tag, command, work),
            Outcome::ThenShutDown { force } => {
                finish(&self.outbox, id, None, command, Ok(None));
                self.daemon.shutdown(force);
            }
            Outcome::Sent => {}
        }
    }

    /// Whether the peer is an agent's own process (unix socket only).
    fn is_an_agent(&self) -> bool {
        let processes = &self.daemon.registry().context.processes;
        self.peer.pid.is_some_and(|pid| processes.speaking(pid).is_some())
    }

    /// What this connection is to `agent_id`, for the command table's
    /// check (crate::commands::admit). A registry command about an unknown
    /// agent is NOT_FOUND; the agent's own process (its `subagent_*` tools,
    /// on the unix socket) speaks for the agent itself there, never in its
    /// per-agent commands.
    fn standing(
        &self,
        attachment: Attachment,
        agent_id: &str,
        routed: bool,
    ) -> Result<Standing, WireError> {
        let registry = self.daemon.registry();
        if !routed && !registry.contains(agent_id) {
            return Err(commands::not_found(agent_id));
        }
        let is_the_agent = !routed
            && self.peer.pid.and_then(|pid| registry.context.processes.speaking(pid)).as_deref()
                == Some(agent_id);
        let delegate = matches!(attachment, Attachment::Answer | Attachment::Stop)
            && registry.context.delegation.may_answer(self.outbox.id(), agent_id);
        let role = self.attached.get(agent_id).copied();
        Ok(Standing { role, is_the_agent, delegate, bound: false })
    }

    /// Runs a slow command as its own task, a bounded number at once; its
    /// answer (carrying `agent_id` for a per-agent command) is sent when it
    /// ends.
    fn answer_later(
        &self,
        id: Option<String>,
        agent_id: Option<String>,
        command: &'static str,
        work: impl Future<Output = Answer> + Send + 'static,
    ) {
        let Ok(permit) = self.background.clone().try_acquire_owned() else {
            let error =
                commands::CommandError::TooManyRunning { limit: BACKGROUND_COMMANDS }.into();
            return reject(&self.outbox, id, Some(command), agent_id, error);
        };
        let outbox = self.outbox.clone();
        tokio::spawn(async move {
            let answer = work.await;
            finish(&outbox, id, agent_id, command, answer);
            drop(permit);
        });
    }

    /// Like [`Connection::answer_later`], for a command that only watches
    /// (`subagent.wait`): dropped when the connection ends, since nobody is
    /// left to answer and the work it watches goes on without it.
    fn watching(
        &self,
        id: Option<String>,
        command: &'static str,
        work: impl Future<Output = Answer> + Send + 'static,
    ) {
        let closing = self.closing.clone();
        self.answer_later(id, None, command, async move {
            tokio::select! {
                answer = work => answer,
                () = closing.cancelled() => Ok(None),
            }
        });
    }

    /// Tells every host this connection was attached to that it is gone.
    /// This one waits for room in the hosts' queues: the connection is over,
    /// and the host must learn it.
    pub async fn closed(&mut self) {
        self.closing.cancel();
        let registry = self.daemon.registry();
        for agent_id in self.attached.keys() {
            let gone = HostCommand::Disconnected { subscriber: self.outbox.id() };
            let _ = registry.send_waiting(agent_id, gone).await;
        }
        self.attached.clear();
    }
}

fn respond(outbox: &Outbox, id: Option<String>, agent_id: Option<String>, response: Response) {
    outbox.push(encode(Envelope {
        id,
        agent_id,
        seq: None,
        message: ServerMessage::Response(response),
    }));
}

fn finish(
    outbox: &Outbox,
    id: Option<String>,
    agent_id: Option<String>,
    command: &str,
    answer: Answer,
) {
    match answer {
        Ok(data) => respond(
            outbox,
            id,
            agent_id,
            Response { command: command.to_owned(), outcome: Ok(data) },
        ),
        Err(error) => reject(outbox, id, Some(command), agent_id, error),
    }
}

/// An error answer: a `response` when there is an id, else an `error`.
fn reject(
    outbox: &Outbox,
    id: Option<String>,
    command: Option<&str>,
    agent_id: Option<String>,
    error: WireError,
) {
    match id {
        Some(id) => respond(
            outbox,
            Some(id),
            agent_id,
            Response::failed(command.unwrap_or("unknown"), error),
        ),
        None => {
            let message = into_diagnostic(error.message);
            let event = ErrorEvent { code: error.code, message, fatal: Some(false) };
            outbox.push(encode(Envelope {
                id: None,
                agent_id,
                seq: None,
                message: ServerMessage::Error(event),
            }));
        }
    }
}
