//! The host's projection of its agent: the daemon's own `sync` (§6.4, §9.1),
//! the `AgentInfo` that `agent.list` reads, and the registry events that
//! follow status, runtime state and coarse activity.

use shard_protocol::agent::{DeltaKind, PendingRequest, Sync};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{ActivityPhase, AgentActivity, AgentStatusChanged};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};
use shard_protocol::usage::{AgentUsage, TurnState};
use shard_protocol::{Envelope, ServerMessage};

use std::sync::{Arc, Mutex};

use super::Host;
use crate::agents::manifest::Manifest;
use crate::agents::{Sub, Wire, now_ms};

/// The agent as listed before any process ran.
pub(super) fn initial_info(manifest: &Manifest) -> AgentInfo {
    AgentInfo {
        agent_id: manifest.agent_id.clone(),
        name: manifest.name.clone(),
        cwd: manifest.cwd.clone(),
        model: manifest.model.clone(),
        provider: None,
        mode: manifest.mode.clone(),
        status: AgentStatus::Idle,
        runtime_state: RuntimeState::Stopped,
        created_at: manifest.created_at,
        usage: None,
        parent_agent_id: manifest.parent_agent_id.clone(),
        alias: manifest.alias.clone(),
        definition_name: manifest.definition_name.clone(),
        display_name: manifest.display_name.clone(),
        runtime: Some(manifest.runtime_id().to_owned()),
        sandbox: None,
    }
}

/// The coarse activity last broadcast.
#[derive(Clone, PartialEq)]
struct Activity {
    phase: ActivityPhase,
    /// The tool running, in the `tool` phase.
    tool: Option<String>,
    status: AgentStatus,
}

/// What the daemon shows of its agent between its events: status, runtime
/// state, mode, model, capabilities, context size and coarse activity, and
/// the `AgentInfo` that `agent.list` reads without asking the host. It
/// decides what changed; the host broadcasts it.
pub(super) struct Projection {
    pub status: AgentStatus,
    pub runtime_state: RuntimeState,
    pub mode: Option<String>,
    pub model: Option<String>,
    pub capabilities: Option<Vec<String>>,
    /// The context size the agent last reported.
    pub context_tokens: Option<u64>,
    /// The sandbox it runs in, as last described.
    pub sandbox: Option<shard_protocol::sandbox::SandboxInfo>,
    activity: Activity,
    /// The latest `AgentInfo`, shared with the host's handle.
    shared: Arc<Mutex<AgentInfo>>,
}

impl Projection {
    pub fn new(manifest: &Manifest) -> Self {
        Self {
            status: AgentStatus::Idle,
            runtime_state: RuntimeState::Stopped,
            mode: None,
            model: None,
            capabilities: None,
            context_tokens: None,
            sandbox: None,
            activity: Activity {
                phase: ActivityPhase::Idle,
                tool: None,
                status: AgentStatus::Idle,
            },
            shared: Arc::new(Mutex::new(initial_info(manifest))),
        }
    }

    /// The `AgentInfo` as last published, for the host's handle.
    pub fn shared(&self) -> Arc<Mutex<AgentInfo>> {
        self.shared.clone()
    }

    /// The agent as `agent.list` shows it, as last published.
    pub fn published(&self) -> AgentInfo {
        self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The agent as it is now, with its usage so far.
    pub fn info(
        &self,
        manifest: &Manifest,
        usage: Option<shard_protocol::types::Usage>,
    ) -> AgentInfo {
        let mut info = initial_info(manifest);
        info.status = self.status;
        info.runtime_state = self.runtime_state;
        info.mode = self.mode.clone().or(info.mode);
        info.model = self.model.clone().or(info.model);
        info.provider = info.model.as_deref().map(|model| {
            let builtin = shard_agent::config::is_builtin_model(model);
            if builtin { "builtin" } else { "configured" }.to_owned()
        });
        info.sandbox = self.sandbox.clone();
        info.usage = usage.map(|mut usage| {
            usage.context_tokens = self.context_tokens;
            usage
        });
        info
    }

    pub fn publish(&self, info: AgentInfo) {
        *self.shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = info;
    }

    /// Whether the activity changed (and must be broadcast).
    pub fn set_activity(&mut self, phase: ActivityPhase, tool: Option<String>) -> bool {
        let activity = Activity { phase, tool, status: self.status };
        if self.activity == activity {
            return false;
        }
        self.activity = activity;
        true
    }

    /// The phase the status implies, keeping a tool or thinking phase that
    /// a streaming status does not contradict.
    pub fn phase_of_status(&self) -> (ActivityPhase, Option<String>) {
        let phase = match self.status {
            AgentStatus::Idle => ActivityPhase::Idle,
            AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi => ActivityPhase::Waiting,
            AgentStatus::Compacting => ActivityPhase::Compacting,
            AgentStatus::Error => ActivityPhase::Error,
            AgentStatus::Streaming | AgentStatus::Unknown => {
                if matches!(self.activity.phase, ActivityPhase::Tool | ActivityPhase::Thinking) {
                    self.activity.phase
                } else {
                    ActivityPhase::Streaming
                }
            }
        };
        let tool = if phase == ActivityPhase::Tool { self.activity.tool.clone() } else { None };
        (phase, tool)
    }

    /// `agent_activity`: coarse and sanitized — a phase, the status and at
    /// most a tool's name; never text, arguments, results or paths.
    pub fn activity_event(&self, agent_id: &str) -> AgentActivity {
        AgentActivity {
            agent_id: agent_id.to_owned(),
            timestamp: now_ms(),
            phase: self.activity.phase,
            status: self.status,
            tool_name: self.activity.tool.clone(),
        }
    }

    /// `agent_status_changed` with the current status and runtime state.
    pub fn status_event(&self, agent_id: &str, detail: Option<String>) -> AgentStatusChanged {
        AgentStatusChanged {
            agent_id: agent_id.to_owned(),
            status: self.status,
            runtime_state: self.runtime_state,
            detail,
        }
    }
}

pub(super) fn encode(envelope: &Envelope<ServerMessage>) -> Wire {
    Wire::from(envelope.to_json())
}

/// Sends a response; `agent_id` is the routing tag (none for registry
/// commands such as `agent.attach`).
pub(super) fn respond(
    subscriber: &Sub,
    id: Option<String>,
    agent_id: Option<&str>,
    response: Response,
) {
    let agent_id = agent_id.map(str::to_owned);
    subscriber.push(encode(&Envelope {
        id,
        agent_id,
        seq: None,
        message: ServerMessage::Response(response),
    }));
}

impl Host {
    /// The daemon's own `sync`, projected from the child (§6.4, §9.1): the
    /// live window from the session log, open questions (this agent's and
    /// those of the descendants it answers for), status and mode.
    pub(super) fn daemon_sync(&mut self) -> Sync {
        let live_window = match &mut self.session {
            Some(session) => {
                let (window, problem) = session.live_window();
                if let Some(problem) = problem {
                    tracing::warn!(agent = %self.manifest.agent_id, %problem, "cannot read the session log");
                }
                window
            }
            None => Default::default(),
        };
        let mut pending_requests: Vec<PendingRequest> = self
            .questions
            .unanswered_requests()
            .map(|request| PendingRequest { agent_id: None, request: request.clone() })
            .collect();
        pending_requests.extend(self.context.delegation.delegated_pending(self.id()));
        Sync {
            status: self.projection.status,
            mode: self
                .projection
                .mode
                .clone()
                .unwrap_or_else(|| shard_agent::modes::BUILD.to_owned()),
            capabilities: self.projection.capabilities.clone(),
            runtime_epoch: Some(self.process.generations.saturating_sub(1)),
            live_window,
            pending_requests,
            seq: Some(self.journal.last_seq()),
            reset: None,
        }
    }

    /// The `sync` as sent; `reset` when it answers a cursor the journal no
    /// longer covers.
    pub(super) fn sync_bytes(&mut self, reset: bool) -> Wire {
        let mut sync = self.daemon_sync();
        sync.reset = reset.then_some(true);
        encode(&Envelope::new(ServerMessage::Sync(sync)).for_agent(self.id()))
    }

    /// A per-agent event (one serialized line) numbered, recorded in the
    /// journal, and tagged with the agent: it is spliced, never decoded and
    /// encoded again.
    pub(super) fn stamp(&mut self, line: &str) -> Wire {
        self.journal.stamp(&self.manifest.agent_id, line)
    }

    pub(super) fn current_info(&self) -> AgentInfo {
        let usage = self.context.usage.total(self.id()).map(|total| total.as_usage());
        self.projection.info(&self.manifest, usage)
    }

    pub(super) fn publish_info(&self) {
        self.projection.publish(self.current_info());
    }

    /// Describes the agent's sandbox again (config.toml, its grants), and
    /// tells every client if it changed (`agent_sandbox`).
    pub(super) fn refresh_sandbox(&mut self) {
        let manifest = &self.manifest;
        let now = self.context.sandbox.describe(
            &manifest.agent_id,
            manifest.runtime_id(),
            manifest.sandbox,
        );
        if now == self.projection.sandbox {
            return;
        }
        self.projection.sandbox = now.clone();
        self.publish_info();
        if let Some(sandbox) = now {
            let event =
                shard_protocol::sandbox::AgentSandbox { agent_id: self.id().to_owned(), sandbox };
            self.context
                .broadcast
                .broadcast(&encode(&Envelope::new(ServerMessage::AgentSandbox(event))));
        }
    }

    /// `sandbox.revoke`: takes `host` back from the agent's grants; the
    /// sandbox as it is then.
    pub(super) fn revoke_host(
        &mut self,
        host: &shard_agent::sandbox::HostPort,
    ) -> Result<shard_protocol::sandbox::SandboxInfo, crate::agents::error::AgentError> {
        use crate::agents::error::AgentError;
        match crate::sandbox::grants::revoke(&self.context.home, self.id(), host) {
            Ok(Some(_)) => {}
            Ok(None) => return Err(AgentError::NotGranted(host.to_string())),
            Err(error) => return Err(AgentError::GrantsUnwritten(error.to_string())),
        }
        self.refresh_sandbox();
        self.projection.sandbox.clone().ok_or(AgentError::NotGranted(host.to_string()))
    }

    pub(super) fn set_runtime_state(&mut self, state: RuntimeState) {
        if self.projection.runtime_state == state {
            return;
        }
        self.projection.runtime_state = state;
        self.publish_info();
        self.broadcast_status(None);
    }

    pub(super) fn broadcast_status(&self, detail: Option<String>) {
        let event = self.projection.status_event(self.id(), detail);
        self.context
            .broadcast
            .broadcast(&encode(&Envelope::new(ServerMessage::AgentStatusChanged(event))));
    }

    pub(super) fn set_activity(&mut self, phase: ActivityPhase, tool: Option<String>) {
        if self.projection.set_activity(phase, tool) {
            let event = self.projection.activity_event(self.id());
            self.context
                .broadcast
                .broadcast(&encode(&Envelope::new(ServerMessage::AgentActivity(event))));
        }
    }

    /// The phase implied by the status (used on status changes).
    pub(super) fn emit_activity(&mut self) {
        let (phase, tool) = self.projection.phase_of_status();
        self.set_activity(phase, tool);
    }

    /// Keeps the projection current from one of the agent's events.
    pub(super) fn observe(&mut self, message: &ServerMessage) {
        match message {
            ServerMessage::Status(status) => {
                let changed = self.projection.status != status.status;
                self.projection.status = status.status;
                if !self.projection.status.is_active() {
                    self.turn_expected = false;
                }
                if changed {
                    self.publish_info();
                    self.broadcast_status(status.detail.clone());
                }
                self.emit_activity();
                let stop_when_inactive =
                    self.terminate_when_inactive || self.process.stopping_when_inactive();
                if stop_when_inactive && !self.projection.status.is_active() {
                    self.stop_process();
                }
            }
            ServerMessage::ModeChanged(changed) => {
                self.projection.mode = Some(changed.mode.clone());
                self.publish_info();
            }
            ServerMessage::ModelChanged(changed) => {
                self.projection.model = Some(changed.active.id.clone());
                if changed.capabilities.is_some() {
                    self.projection.capabilities.clone_from(&changed.capabilities);
                }
                self.publish_info();
            }
            ServerMessage::TurnStart(start) => {
                let session = &self.manifest.session_id;
                self.context.usage.turn_started(self.id(), session, &start.turn_id, now_ms());
            }
            ServerMessage::Usage(usage) => {
                self.projection.context_tokens =
                    usage.context_tokens.or(self.projection.context_tokens);
                let session = &self.manifest.session_id;
                if let Some(total) = self.context.usage.call(self.id(), session, usage, now_ms()) {
                    self.publish_info();
                    let event = AgentUsage { agent_id: self.id().to_owned(), usage: total };
                    self.context
                        .broadcast
                        .broadcast(&encode(&Envelope::new(ServerMessage::AgentUsage(event))));
                }
            }
            ServerMessage::TurnEnd(end) => {
                let ended = TurnState::Ended;
                self.context.usage.turn_ended(self.id(), Some(&end.turn_id), ended, now_ms());
            }
            ServerMessage::MessageDelta(delta) => self.observe_delta(delta.kind),
            ServerMessage::ToolCall(call) => {
                self.set_activity(ActivityPhase::Tool, Some(call.name.clone()))
            }
            ServerMessage::ToolResult(_) => self.set_activity(ActivityPhase::Streaming, None),
            _ => {}
        }
    }

    /// A streamed delta says what the agent is doing now.
    pub(super) fn observe_delta(&mut self, kind: DeltaKind) {
        let phase = match kind {
            DeltaKind::Thinking => ActivityPhase::Thinking,
            _ => ActivityPhase::Streaming,
        };
        self.set_activity(phase, None);
    }

    /// Sends bytes to every attached connection.
    pub(super) fn fan_out(&self, bytes: Wire) {
        self.attached.fan_out(&bytes);
    }
}
