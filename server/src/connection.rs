//! One client connection speaking the daemon protocol, whatever carries it
//! (WebSocket or unix socket): decodes frames, answers registry commands,
//! checks attachments and roles, and hands per-agent commands to the agent's
//! host. Every answer goes through the connection's [`Outbox`], in order.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use shard_protocol::agent::{ErrorEvent, Hello};
use shard_protocol::envelope::{MessageSet, Scope};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AgentCreateResult, AgentsResult, AttachRole, EnrollResult};
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::sync::oneshot;

use crate::host::HostCommand;
use crate::hub::Outbox;

/// What a connection may reach besides the registry: the daemon's own
/// controls (enrollment, shutdown).
pub trait Daemon: Send + Sync {
    fn registry(&self) -> &crate::registry::Registry;
    /// A new single-use enrollment URL (also printed on the daemon's stdout).
    fn enroll(&self) -> String;
    /// Starts the daemon's shutdown.
    fn shutdown(&self, force: bool);
    /// The live browser sessions (`shard sessions list`).
    fn sessions(&self) -> Vec<shard_protocol::orchestrator::BrowserSession>;
    /// Closes browser connections (one session's, or all) without revoking.
    fn disconnect(&self, target: shard_protocol::orchestrator::RevokeSession) -> u32;
    /// Revokes sessions and closes their sockets; returns the revoked ids.
    fn revoke(
        &self,
        target: shard_protocol::orchestrator::RevokeSession,
    ) -> Result<Vec<String>, WireError>;
}

pub struct Connection {
    pub outbox: Outbox,
    daemon: Arc<dyn Daemon>,
    attached: HashMap<String, AttachRole>,
    /// Names this client in `permission_resolved.source` ("web", "unix").
    source: String,
    /// Whether this transport may shut the daemon down or mint enrollments
    /// (the unix socket: local trust, §4.2).
    local: bool,
}

fn encode(envelope: Envelope<ServerMessage>) -> Bytes {
    Bytes::from(envelope.to_json())
}

impl Connection {
    pub fn new(outbox: Outbox, daemon: Arc<dyn Daemon>, source: &str, local: bool) -> Self {
        Self { outbox, daemon, attached: HashMap::new(), source: source.to_owned(), local }
    }

    /// `hello` (§9.1): transport-scoped capabilities only; each runtime's
    /// own arrive in its `sync`.
    pub fn hello(&self, transport: &str) {
        let hello = Hello {
            protocol_version: shard_protocol::PROTOCOL_VERSION.to_owned(),
            server_version: format!("shard {}", env!("CARGO_PKG_VERSION")),
            capabilities: vec![transport.to_owned(), "streaming-deltas".to_owned()],
        };
        self.outbox.push(encode(Envelope::new(ServerMessage::Hello(hello))));
    }

    fn respond(&self, id: Option<String>, agent_id: Option<String>, response: Response) {
        self.outbox.push(encode(Envelope {
            id,
            agent_id,
            message: ServerMessage::Response(response),
        }));
    }

    /// An error answer: a `response` when there is an id, else an `error`.
    fn reject(
        &self,
        id: Option<String>,
        command: Option<&str>,
        agent_id: Option<String>,
        error: WireError,
    ) {
        match id {
            Some(id) => self.respond(
                Some(id),
                agent_id,
                Response::failed(command.unwrap_or("unknown"), error),
            ),
            None => {
                let event =
                    ErrorEvent { code: error.code, message: error.message, fatal: Some(false) };
                self.outbox.push(encode(Envelope {
                    id: None,
                    agent_id,
                    message: ServerMessage::Error(event),
                }));
            }
        }
    }

    /// A frame the transport could not even split out (too long, not UTF-8).
    pub fn frame_error(&self, why: &str) {
        self.reject(None, None, None, WireError::new(ErrorCode::InvalidRequest, why));
    }

    pub async fn frame(&mut self, text: &str) {
        match Envelope::<ClientMessage>::from_json(text) {
            Ok(envelope) => self.handle(envelope).await,
            Err(problem) => {
                self.reject(
                    problem.id().map(str::to_owned),
                    problem.type_name(),
                    None,
                    problem.to_wire_error(),
                );
            }
        }
    }

    async fn handle(&mut self, envelope: Envelope<ClientMessage>) {
        let Envelope { id, agent_id, message } = envelope;
        let command = message.type_name();
        if ClientMessage::scope_of(command) == Some(Scope::Routed) {
            return self.per_agent(id, agent_id, message).await;
        }
        let registry = self.daemon.registry();
        let result: Result<Option<serde_json::Value>, WireError> = match message {
            ClientMessage::AgentList(_) => ok(AgentsResult { agents: registry.list() }),
            ClientMessage::AgentStatus(query) => match query.agent_id {
                None => ok(AgentsResult { agents: registry.list() }),
                Some(agent_id) => match registry.get(&agent_id) {
                    Some(host) => ok(AgentsResult { agents: vec![host.info()] }),
                    None => Err(not_found(&agent_id)),
                },
            },
            ClientMessage::AgentCreate(request) => match registry.create(request).await {
                Ok(agent_id) => ok(AgentCreateResult { agent_id }),
                Err(error) => Err(error),
            },
            ClientMessage::AgentAttach(attach) => {
                let Some(host) = registry.get(&attach.agent_id) else {
                    return self.reject(id, Some(command), None, not_found(&attach.agent_id));
                };
                let role = attach.role.unwrap_or_default();
                self.attached.insert(attach.agent_id.clone(), role);
                // The host answers: response, sync, then live events.
                let _ = host
                    .commands
                    .send(HostCommand::Attach { outbox: self.outbox.clone(), role, id })
                    .await;
                return;
            }
            ClientMessage::AgentDetach(target) => {
                let Some(host) = registry.get(&target.agent_id) else {
                    return self.reject(id, Some(command), None, not_found(&target.agent_id));
                };
                self.attached.remove(&target.agent_id);
                let _ = host
                    .commands
                    .send(HostCommand::Detach { outbox: self.outbox.clone(), id })
                    .await;
                return;
            }
            ClientMessage::AgentTerminate(target) => match registry.get(&target.agent_id) {
                None => Err(not_found(&target.agent_id)),
                Some(host) => {
                    let (reply, done) = oneshot::channel();
                    let _ = host.commands.send(HostCommand::Terminate { reply }).await;
                    match done.await {
                        Ok(result) => ok(result),
                        Err(_) => {
                            Err(WireError::new(ErrorCode::InternalError, "the agent host stopped"))
                        }
                    }
                }
            },
            ClientMessage::AgentKill(kill) => match registry.get(&kill.agent_id) {
                None => Err(not_found(&kill.agent_id)),
                Some(host) => {
                    let (reply, done) = oneshot::channel();
                    let _ = host
                        .commands
                        .send(HostCommand::Kill { force: kill.force.unwrap_or(false), reply })
                        .await;
                    let _ = done.await;
                    Ok(None)
                }
            },
            ClientMessage::DaemonShutdown(shutdown) => {
                self.respond(id, None, Response::accepted(command));
                self.daemon.shutdown(shutdown.force.unwrap_or(false));
                return;
            }
            ClientMessage::DaemonEnroll(_) if self.local => {
                ok(EnrollResult { url: self.daemon.enroll() })
            }
            ClientMessage::DaemonSessions(_) if self.local => {
                ok(shard_protocol::orchestrator::SessionsResult {
                    sessions: self.daemon.sessions(),
                })
            }
            ClientMessage::DaemonRevokeSession(target) if self.local => {
                match self.daemon.revoke(target) {
                    Ok(revoked) => ok(shard_protocol::orchestrator::RevokeResult { revoked }),
                    Err(error) => Err(error),
                }
            }
            ClientMessage::DaemonDisconnect(target) if self.local => {
                ok(shard_protocol::orchestrator::DisconnectResult {
                    disconnected: self.daemon.disconnect(target),
                })
            }
            ClientMessage::DaemonEnroll(_)
            | ClientMessage::DaemonSessions(_)
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
        match result {
            Ok(data) => {
                self.respond(id, None, Response { command: command.to_owned(), outcome: Ok(data) })
            }
            Err(error) => self.reject(id, Some(command), None, error),
        }
    }

    async fn per_agent(
        &mut self,
        id: Option<String>,
        agent_id: Option<String>,
        message: ClientMessage,
    ) {
        let command = message.type_name();
        let Some(agent_id) = agent_id else {
            let error = WireError::new(
                ErrorCode::NotAttached,
                format!("`{command}` needs the `agent_id` of an attached agent"),
            );
            return self.reject(id, Some(command), None, error);
        };
        let answer =
            matches!(message, ClientMessage::PermissionResponse(_) | ClientMessage::UiResponse(_));
        let role = self.attached.get(&agent_id).copied();
        if answer {
            // An answer may come from the agent's own interactive client or,
            // for a delegated child, from an interactive ancestor's (§6.3).
            let delegate =
                self.daemon.registry().context.delegation.may_answer(self.outbox.id, &agent_id);
            if role.is_none() && !delegate {
                let error =
                    WireError::new(ErrorCode::NotAttached, format!("not attached to `{agent_id}`"));
                return self.reject(id, Some(command), Some(agent_id), error);
            }
            if role == Some(AttachRole::Observer) && !delegate {
                let error = WireError::new(
                    ErrorCode::PermissionDenied,
                    "an observer never answers requests",
                );
                return self.reject(id, Some(command), Some(agent_id), error);
            }
            let Some(host) = self.daemon.registry().get(&agent_id) else {
                return self.reject(
                    id,
                    Some(command),
                    Some(agent_id.clone()),
                    not_found(&agent_id),
                );
            };
            let source = self.source.clone();
            let _ = host
                .commands
                .send(HostCommand::Answer { outbox: self.outbox.clone(), id, message, source })
                .await;
            return;
        }
        match role {
            None => {
                let error =
                    WireError::new(ErrorCode::NotAttached, format!("not attached to `{agent_id}`"));
                self.reject(id, Some(command), Some(agent_id), error);
            }
            Some(AttachRole::Observer) if !read_only(&message) => {
                let error = WireError::new(ErrorCode::PermissionDenied, "an observer only watches");
                self.reject(id, Some(command), Some(agent_id), error);
            }
            Some(_) => {
                let Some(host) = self.daemon.registry().get(&agent_id) else {
                    return self.reject(
                        id,
                        Some(command),
                        Some(agent_id.clone()),
                        not_found(&agent_id),
                    );
                };
                let _ = host
                    .commands
                    .send(HostCommand::Forward { outbox: self.outbox.clone(), id, message })
                    .await;
            }
        }
    }

    /// Tells every host this connection was attached to that it is gone.
    pub async fn closed(&mut self) {
        let registry = self.daemon.registry();
        for agent_id in self.attached.keys() {
            if let Some(host) = registry.get(agent_id) {
                let _ =
                    host.commands.send(HostCommand::Disconnected { conn: self.outbox.id }).await;
            }
        }
        self.attached.clear();
    }
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

fn ok(data: impl serde::Serialize) -> Result<Option<serde_json::Value>, WireError> {
    serde_json::to_value(data)
        .map(Some)
        .map_err(|error| WireError::new(ErrorCode::InternalError, error.to_string()))
}
