//! One client connection speaking the daemon protocol, whatever carries it:
//! decodes frames, answers registry commands, checks attachments and roles,
//! and hands per-agent commands to the agent's host. Every answer goes
//! through the connection's outbox, in order.
//!
//! Handling a frame never waits: per-agent commands are queued to their
//! host without blocking (a full host queue is an error), and the slow
//! registry commands (`agent.create`, `agent.kill`, `agent.terminate`) run
//! as their own tasks, a bounded number per connection, answering when they
//! finish. So the reader keeps reading (pongs included) however busy the
//! agents are.

use std::collections::HashMap;
use std::sync::Arc;

use crate::agents::Wire;
use shard_protocol::agent::{ErrorEvent, Hello};
use shard_protocol::approvals::{Answerer, ApprovalListResult};
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::envelope::{MessageSet, Scope};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{
    AgentCreateResult, AgentsResult, AttachRole, BrowserSession, DisconnectResult, EnrollResult,
    RevokeResult, RevokeSession, SessionsResult, StatsResult,
};
use shard_protocol::usage::UsageSessionResult;
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;

use super::outbox::Outbox;
use crate::agents::Sub;
use crate::agents::approvals::KEPT as APPROVALS_KEPT;
use crate::agents::host::HostCommand;
use crate::agents::hosts::Refused;
use crate::agents::registry::Registry;
use crate::jobs::Jobs;
use crate::workspaces::Workspaces;

/// Slow registry commands one connection may have running at once. A
/// person creates or kills a handful of agents at a time; more is a script
/// that should wait for its answers.
const BACKGROUND_COMMANDS: usize = 16;

/// What a connection may reach besides the registry: the daemon's own
/// controls (enrollment, sessions, shutdown).
pub trait Daemon: Send + Sync {
    fn registry(&self) -> &Registry;
    /// The subagent job coordinator (§10.3).
    fn jobs(&self) -> &Arc<Jobs>;
    /// Git worktree workspaces (§10.1a).
    fn workspaces(&self) -> &Arc<Workspaces>;
    /// A new single-use enrollment URL (also printed on the daemon's stdout).
    fn enroll(&self) -> String;
    /// Starts the daemon's shutdown.
    fn shutdown(&self, force: bool);
    /// The live browser sessions (`shard sessions list`).
    fn sessions(&self) -> Vec<BrowserSession>;
    /// What the daemon holds right now (`daemon.stats`).
    fn stats(&self) -> StatsResult;
    /// Closes browser connections (one session's, or all) without revoking.
    fn disconnect(&self, target: RevokeSession) -> u32;
    /// Revokes sessions and closes their sockets; returns the revoked ids.
    fn revoke(&self, target: RevokeSession) -> Result<Vec<String>, WireError>;
}

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

/// A response (success or failure) ready to send.
type Answer = Result<Option<serde_json::Value>, WireError>;

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

    fn subscriber(&self) -> Sub {
        self.outbox.clone()
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
            ],
        };
        self.outbox.push(encode(Envelope::new(ServerMessage::Hello(hello))));
    }

    /// A frame the transport could not even split out (too long, not UTF-8).
    pub fn frame_error(&self, why: &str) {
        reject(&self.outbox, None, None, None, WireError::new(ErrorCode::InvalidRequest, why));
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

    fn handle(&mut self, envelope: Envelope<ClientMessage>) {
        let Envelope { id, agent_id, message, .. } = envelope;
        let command = message.type_name();
        if ClientMessage::scope_of(command) == Some(Scope::Routed) {
            return self.per_agent(id, agent_id, message);
        }
        let registry = self.daemon.registry();
        let local = self.transport.local();
        let answer: Answer = match message {
            ClientMessage::AgentList(_) => ok(AgentsResult { agents: registry.list() }),
            ClientMessage::AgentStatus(query) => match query.agent_id {
                None => ok(AgentsResult { agents: registry.list() }),
                Some(agent_id) => match registry.info(&agent_id) {
                    Some(info) => ok(AgentsResult { agents: vec![info] }),
                    None => Err(not_found(&agent_id)),
                },
            },
            ClientMessage::AgentCreate(request) => {
                let daemon = self.daemon.clone();
                return self.in_background(id, command, async move {
                    let agent_id = daemon.registry().create(request).await?;
                    ok(AgentCreateResult { agent_id })
                });
            }
            ClientMessage::AgentAttach(attach) => {
                let role = attach.role.unwrap_or_default();
                let subscriber = self.subscriber();
                // The host answers: response, sync, then live events.
                let attaching = HostCommand::Attach {
                    subscriber,
                    role,
                    id: id.clone(),
                    after_seq: attach.after_seq,
                };
                match registry.send(&attach.agent_id, attaching) {
                    Ok(()) => {
                        self.attached.insert(attach.agent_id, role);
                    }
                    Err(refused) => {
                        let error = refused_error(refused, &attach.agent_id);
                        reject(&self.outbox, id, Some(command), None, error);
                    }
                }
                return;
            }
            ClientMessage::AgentDetach(target) => {
                if !registry.contains(&target.agent_id) {
                    let error = not_found(&target.agent_id);
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                self.attached.remove(&target.agent_id);
                let subscriber = self.subscriber();
                let detaching = HostCommand::Detach { subscriber, id: id.clone() };
                if let Err(refused) = registry.send(&target.agent_id, detaching) {
                    let error = refused_error(refused, &target.agent_id);
                    reject(&self.outbox, id, Some(command), None, error);
                }
                return;
            }
            ClientMessage::AgentTerminate(target) => {
                let (reply, done) = oneshot::channel();
                if let Err(refused) =
                    registry.send(&target.agent_id, HostCommand::Terminate { reply })
                {
                    let error = refused_error(refused, &target.agent_id);
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                return self.in_background(id, command, async move {
                    ok(done.await.map_err(|_| host_gone())?)
                });
            }
            ClientMessage::AgentKill(kill) => {
                let (reply, done) = oneshot::channel();
                let force = kill.force.unwrap_or(false);
                if let Err(refused) =
                    registry.send(&kill.agent_id, HostCommand::Kill { force, reply })
                {
                    let error = refused_error(refused, &kill.agent_id);
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                // Answers once the process is gone.
                return self.in_background(id, command, async move {
                    done.await.map_err(|_| host_gone())?;
                    Ok(None)
                });
            }
            // CONTRACT.md (revised 2026-12-01): local only.
            ClientMessage::DaemonShutdown(shutdown) if local => {
                respond(&self.outbox, id, None, Response::accepted(command));
                self.daemon.shutdown(shutdown.force.unwrap_or(false));
                return;
            }
            ClientMessage::DaemonEnroll(_) if local => {
                ok(EnrollResult { url: self.daemon.enroll() })
            }
            ClientMessage::DaemonSessions(_) if local => {
                ok(SessionsResult { sessions: self.daemon.sessions() })
            }
            ClientMessage::DaemonStats(_) if local => ok(self.daemon.stats()),
            ClientMessage::DaemonRevokeSession(target) if local => {
                self.daemon.revoke(target).and_then(|revoked| ok(RevokeResult { revoked }))
            }
            ClientMessage::DaemonDisconnect(target) if local => {
                ok(DisconnectResult { disconnected: self.daemon.disconnect(target) })
            }
            ClientMessage::SubagentCreate(request) => {
                if let Err(error) = self.authorize(&request.parent_agent_id, Need::Act) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let jobs = self.daemon.jobs().clone();
                return self.in_background(
                    id,
                    command,
                    async move { ok(jobs.create(request).await?) },
                );
            }
            ClientMessage::SubagentWait(request) => {
                if let Err(error) = self.authorize(&request.parent_agent_id, Need::Watch) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let jobs = self.daemon.jobs().clone();
                // A wait only watches: it ends with its connection.
                return self.watching(id, command, async move { ok(jobs.wait(request).await?) });
            }
            ClientMessage::SubagentSteer(request) => {
                if let Err(error) = self.authorize(&request.parent_agent_id, Need::Act) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let jobs = self.daemon.jobs().clone();
                let source = self.transport.source();
                return self.in_background(id, command, async move {
                    ok(jobs.steer(request, source).await?)
                });
            }
            ClientMessage::SubagentRelaunch(request) => {
                if let Err(error) = self.authorize(&request.parent_agent_id, Need::Act) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let jobs = self.daemon.jobs().clone();
                return self
                    .in_background(id, command, async move { ok(jobs.relaunch(request).await?) });
            }
            ClientMessage::SubagentStatus(request) => {
                // The states, names and usage any connection already sees
                // announced; what the runs said only to an attached one.
                let whole = match self.authorize(&request.parent_agent_id, Need::Watch) {
                    Ok(()) => true,
                    Err(error) if error.code == ErrorCode::NotAttached => false,
                    Err(error) => return reject(&self.outbox, id, Some(command), None, error),
                };
                let jobs = self.daemon.jobs().clone();
                return self.in_background(id, command, async move {
                    let mut status = jobs.status(request).await?;
                    if !whole {
                        status.redact();
                    }
                    ok(status)
                });
            }
            ClientMessage::SubagentStop(request) => {
                if let Err(error) = self.authorize(&request.parent_agent_id, Need::Act) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let jobs = self.daemon.jobs().clone();
                return self.in_background(
                    id,
                    command,
                    async move { ok(jobs.stop(request).await?) },
                );
            }
            ClientMessage::WorkspaceCreate(request) => {
                let workspaces = self.daemon.workspaces().clone();
                return self.in_background(id, command, async move {
                    ok(workspaces.create(request).await?)
                });
            }
            ClientMessage::WorkspaceAttach(request) => {
                let workspaces = self.daemon.workspaces().clone();
                return self.in_background(id, command, async move {
                    ok(workspaces.attach(request).await?)
                });
            }
            ClientMessage::WorkspaceRetire(request) => {
                let workspaces = self.daemon.workspaces().clone();
                return self.in_background(id, command, async move {
                    ok(workspaces.retire(request).await?)
                });
            }
            ClientMessage::WorkspaceList(request) => {
                let workspaces = self.daemon.workspaces().clone();
                return self.in_background(id, command, async move {
                    ok(workspaces.list(request).await?)
                });
            }
            ClientMessage::WorkspaceStatus(request) => {
                let workspaces = self.daemon.workspaces().clone();
                return self.in_background(id, command, async move {
                    ok(workspaces.status(request).await?)
                });
            }
            ClientMessage::UsageGlobal(_) => ok(registry.context.usage.global()),
            ClientMessage::UsageAgent(query) => match registry.contains(&query.agent_id) {
                true => ok(registry.context.usage.agent(&query.agent_id)),
                false => Err(not_found(&query.agent_id)),
            },
            ClientMessage::UsageSession(query) => {
                let home = registry.context.home.clone();
                let usage = registry.context.usage.clone();
                return self.in_background(id, command, async move {
                    let session_id = query.session_id;
                    if let Some(found) = usage.session(&session_id) {
                        return ok(found);
                    }
                    // A session that never spent anything adds up to nothing.
                    let known = tokio::task::spawn_blocking({
                        let session_id = session_id.clone();
                        move || shard_agent::session_view::check(&home, &session_id).is_ok()
                    })
                    .await
                    .unwrap_or(false);
                    if !known {
                        let message = format!("no session `{session_id}`");
                        return Err(WireError::new(ErrorCode::NotFound, message));
                    }
                    ok(UsageSessionResult {
                        session_id,
                        agent_ids: Vec::new(),
                        total: Default::default(),
                        turns: Vec::new(),
                    })
                });
            }
            ClientMessage::ApprovalList(query) => {
                if let Err(error) = self.authorize(&query.agent_id, Need::Watch) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let home = registry.context.home.clone();
                let limit = query.limit.map_or(APPROVALS_KEPT, |limit| limit as usize);
                let limit = limit.min(APPROVALS_KEPT);
                return self.in_background(id, command, async move {
                    let agent_id = query.agent_id;
                    let approvals = tokio::task::spawn_blocking({
                        let agent_id = agent_id.clone();
                        move || crate::agents::approvals::list(&home, &agent_id, limit)
                    })
                    .await
                    .map_err(|_| {
                        WireError::new(ErrorCode::InternalError, "cannot read the history")
                    })?;
                    ok(ApprovalListResult { agent_id, approvals })
                });
            }
            ClientMessage::SessionActivate(request) => {
                if let Err(error) = self.authorize(&request.agent_id, Need::Act) {
                    return reject(&self.outbox, id, Some(command), None, error);
                }
                let daemon = self.daemon.clone();
                return self.in_background(id, command, async move {
                    ok(daemon.registry().activate(request).await?)
                });
            }
            ClientMessage::DaemonShutdown(_) => Err(WireError::new(
                ErrorCode::PermissionDenied,
                "the daemon is stopped locally: use the unix socket or a signal",
            )),
            ClientMessage::DaemonEnroll(_)
            | ClientMessage::DaemonSessions(_)
            | ClientMessage::DaemonStats(_)
            | ClientMessage::DaemonRevokeSession(_)
            | ClientMessage::DaemonDisconnect(_) => Err(WireError::new(
                ErrorCode::PermissionDenied,
                "enrollment and session administration are local: use the unix socket (`shard enroll`, `shard sessions`)",
            )),
            other => Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!("`{}` is not available in this daemon yet", other.type_name()),
            )),
        };
        finish(&self.outbox, id, None, command, answer);
    }

    /// The rule of per-agent commands, for an orchestrator command about
    /// one agent: a change needs an interactive attachment, a read any
    /// attachment. The agent's own process (its `subagent_*` tools, on the
    /// unix socket) speaks for the agent itself.
    fn authorize(&self, agent_id: &str, need: Need) -> Result<(), WireError> {
        let registry = self.daemon.registry();
        if !registry.contains(agent_id) {
            return Err(not_found(agent_id));
        }
        let speaker = self.peer.pid.and_then(|pid| registry.context.processes.agent_of(pid));
        if speaker.as_deref() == Some(agent_id) {
            return Ok(());
        }
        match (self.attached.get(agent_id), need) {
            (None, Need::Act) => Err(WireError::new(
                ErrorCode::NotAttached,
                format!("not attached to `{agent_id}`: attach interactively to act on it"),
            )),
            (None, Need::Watch) => Err(WireError::new(
                ErrorCode::NotAttached,
                format!("not attached to `{agent_id}`: attach to it first"),
            )),
            (Some(AttachRole::Observer), Need::Act) => {
                Err(WireError::new(ErrorCode::PermissionDenied, "an observer only watches"))
            }
            _ => Ok(()),
        }
    }

    /// Runs a slow command as its own task; its answer is sent when it ends.
    fn in_background(
        &self,
        id: Option<String>,
        command: &'static str,
        work: impl Future<Output = Answer> + Send + 'static,
    ) {
        self.answer_later(id, None, command, work);
    }

    /// [`Connection::in_background`] for a per-agent command: its answer
    /// carries the routing `agent_id`.
    fn answer_later(
        &self,
        id: Option<String>,
        agent_id: Option<String>,
        command: &'static str,
        work: impl Future<Output = Answer> + Send + 'static,
    ) {
        let Ok(permit) = self.background.clone().try_acquire_owned() else {
            let error = WireError::new(
                ErrorCode::Conflict,
                format!(
                    "{BACKGROUND_COMMANDS} slow commands are already running on this connection; wait for their answers"
                ),
            );
            return reject(&self.outbox, id, Some(command), agent_id, error);
        };
        let outbox = self.outbox.clone();
        tokio::spawn(async move {
            let answer = work.await;
            finish(&outbox, id, agent_id, command, answer);
            drop(permit);
        });
    }

    /// Like [`Connection::in_background`], for a command that only watches
    /// (`subagent.wait`): dropped when the connection ends, since nobody is
    /// left to answer and the work it watches goes on without it.
    fn watching(
        &self,
        id: Option<String>,
        command: &'static str,
        work: impl Future<Output = Answer> + Send + 'static,
    ) {
        let closing = self.closing.clone();
        self.in_background(id, command, async move {
            tokio::select! {
                answer = work => answer,
                () = closing.cancelled() => Ok(None),
            }
        });
    }

    fn per_agent(&mut self, id: Option<String>, agent_id: Option<String>, message: ClientMessage) {
        let command = message.type_name();
        let Some(agent_id) = agent_id else {
            let error = WireError::new(
                ErrorCode::NotAttached,
                format!("`{command}` needs the `agent_id` of an attached agent"),
            );
            return reject(&self.outbox, id, Some(command), None, error);
        };
        let refuse = |error: WireError| {
            reject(&self.outbox, id.clone(), Some(command), Some(agent_id.clone()), error)
        };
        let answer =
            matches!(message, ClientMessage::PermissionResponse(_) | ClientMessage::UiResponse(_));
        let role = self.attached.get(&agent_id).copied();
        // An answer may come from the agent's own interactive client or, for
        // a delegated child, from an interactive ancestor's (§6.3).
        let delegate = answer
            && self.daemon.registry().context.delegation.may_answer(self.outbox.id(), &agent_id);
        match role {
            None if !delegate => {
                return refuse(WireError::new(
                    ErrorCode::NotAttached,
                    format!("not attached to `{agent_id}`"),
                ));
            }
            Some(AttachRole::Observer) if answer && !delegate => {
                return refuse(WireError::new(
                    ErrorCode::PermissionDenied,
                    "an observer never answers requests",
                ));
            }
            Some(AttachRole::Observer) if !answer && !read_only(&message) => {
                return refuse(WireError::new(
                    ErrorCode::PermissionDenied,
                    "an observer only watches",
                ));
            }
            _ => {}
        }
        let guarded = matches!(
            message,
            ClientMessage::Prompt(_) | ClientMessage::Steer(_) | ClientMessage::Abort(_)
        );
        if guarded {
            if let Some(run_id) = self.daemon.jobs().lease(&agent_id) {
                return self.leased(id, agent_id, run_id, message);
            }
        }
        let subscriber = self.subscriber();
        let queued = if answer {
            let answerer = Answerer {
                source: self.transport.source().to_owned(),
                principal_id: self.peer.principal_id.clone(),
                address: self.peer.address.clone(),
            };
            HostCommand::Answer { subscriber, id: id.clone(), message, answerer }
        } else {
            HostCommand::Forward { subscriber, id: id.clone(), message }
        };
        if let Err(refused) = self.daemon.registry().send(&agent_id, queued) {
            refuse(refused_error(refused, &agent_id));
        }
    }

    /// The lease guard (§10.3) for a prompt, steer or abort (everything
    /// else passes to the child as usual): a child on a run takes no direct
    /// prompt; a person's steer goes through the coordinator's strict steer
    /// and an abort stops the run, both recorded against it.
    fn leased(
        &mut self,
        id: Option<String>,
        agent_id: String,
        run_id: String,
        message: ClientMessage,
    ) {
        use shard_protocol::agent::StreamingBehavior;
        let command = message.type_name();
        let jobs = self.daemon.jobs().clone();
        let message = match message {
            ClientMessage::Steer(steer) => steer.message,
            ClientMessage::Prompt(prompt)
                if prompt.streaming_behavior == Some(StreamingBehavior::Steer) =>
            {
                prompt.message
            }
            ClientMessage::Abort(_) => {
                return self.answer_later(id, Some(agent_id.clone()), command, async move {
                    jobs.stop_leased(&agent_id).await.map(|_| None)
                });
            }
            _ => {
                let error = WireError::new(
                    ErrorCode::Conflict,
                    format!(
                        "`{agent_id}` is on subagent run `{run_id}`: steer it, or stop the run, instead of prompting it"
                    ),
                );
                return reject(&self.outbox, id, Some(command), Some(agent_id), error);
            }
        };
        let source = self.transport.source();
        self.answer_later(id, Some(agent_id.clone()), command, async move {
            let steered = jobs.steer_leased(&agent_id, message, source).await?;
            if steered.status == shard_protocol::subagent::SteerStatus::Injected {
                Ok(None)
            } else {
                Err(WireError::new(
                    ErrorCode::Conflict,
                    "the run's turn ended before the steer was delivered",
                ))
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

/// What an orchestrator command about one agent needs of the connection.
#[derive(Debug, Clone, Copy)]
enum Need {
    /// Reads: any attachment.
    Watch,
    /// Changes: an interactive attachment.
    Act,
}

/// Commands an observer may send: they read, never change anything.
fn read_only(message: &ClientMessage) -> bool {
    matches!(
        message,
        ClientMessage::ListModes(_)
            | ClientMessage::ListModels(_)
            | ClientMessage::ListReasoningLevels(_)
            | ClientMessage::SessionOp(shard_protocol::agent::SessionOp::List)
    )
}

fn not_found(agent_id: &str) -> WireError {
    WireError::new(ErrorCode::NotFound, format!("no agent `{agent_id}`"))
}

fn refused_error(refused: Refused, agent_id: &str) -> WireError {
    match refused {
        Refused::NotFound => not_found(agent_id),
        Refused::Busy => busy(),
        Refused::Gone => host_gone(),
    }
}

fn busy() -> WireError {
    WireError::new(
        ErrorCode::Conflict,
        format!(
            "the agent has {} commands waiting already; retry when it has answered some",
            crate::agents::host::HOST_QUEUE
        ),
    )
}

fn host_gone() -> WireError {
    WireError::new(ErrorCode::InternalError, "the agent host stopped")
}

fn ok(data: impl serde::Serialize) -> Answer {
    serde_json::to_value(data)
        .map(Some)
        .map_err(|error| WireError::new(ErrorCode::InternalError, error.to_string()))
}
