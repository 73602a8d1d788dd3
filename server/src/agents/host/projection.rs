//! The host's projection of its agent: the daemon's own `sync` (§6.4, §9.1),
//! the `AgentInfo` that `agent.list` reads, and the registry events that
//! follow status, runtime state and coarse activity.

use std::sync::{Arc, Mutex};

use shard_platform::session_view::SessionView;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{DeltaKind, PendingRequest, Sync};
use shard_protocol::orchestrator::{ActivityPhase, AgentActivity, AgentExited, AgentStatusChanged};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};

use super::out::Out;
use super::process::Because;
use super::streaming::{Delta, Streaming};
use crate::agents::manifest::Manifest;
use crate::agents::now_ms;

/// The agent as listed before any process ran.
pub(super) fn initial_info(manifest: &Manifest) -> AgentInfo {
    AgentInfo {
        agent_id: manifest.agent_id.clone(),
        identity: manifest.identity.clone(),
        cwd: manifest.cwd.clone(),
        model: manifest.model.clone(),
        provider: None,
        mode: manifest.mode.clone(),
        status: AgentStatus::Idle,
        runtime_state: RuntimeState::Stopped,
        created_at: manifest.created_at,
        usage: None,
        runtime: Some(manifest.runtime_id().to_owned()),
        sandbox: None,
        resources: None,
        node: manifest.remote.as_ref().map(|remote| remote.node.clone()),
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
    agent_id: String,
    pub status: AgentStatus,
    pub runtime_state: RuntimeState,
    pub mode: Option<String>,
    pub model: Option<String>,
    pub capabilities: Option<Vec<String>>,
    /// The context size the agent last reported.
    pub context_tokens: Option<u64>,
    /// The sandbox it runs in, as last described.
    pub sandbox: Option<shard_protocol::sandbox::SandboxInfo>,
    /// The session's record, read while a process runs: `sync`'s live
    /// window. A stopped agent holds none of it (a daemon lists many).
    session: Option<SessionView>,
    /// The reply streaming now, for a `sync` sent mid-reply.
    streaming: Streaming,
    activity: Activity,
    /// The latest `AgentInfo`, shared with the host's handle.
    shared: Arc<Mutex<AgentInfo>>,
}

impl Projection {
    pub fn new(manifest: &Manifest) -> Self {
        Self {
            agent_id: manifest.agent_id.clone(),
            status: AgentStatus::Idle,
            runtime_state: RuntimeState::Stopped,
            mode: None,
            model: None,
            capabilities: None,
            context_tokens: None,
            sandbox: None,
            session: None,
            streaming: Streaming::default(),
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
            let builtin = shard_platform::config::is_builtin_model(model);
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

    /// The phase the status implies, keeping a tool or thinking phase that
    /// a streaming status does not contradict.
    pub fn phase_of_status(&self) -> (ActivityPhase, Option<String>) {
        let phase = match self.status {
            AgentStatus::Idle => ActivityPhase::Idle,
            AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi | AgentStatus::Paused => {
                ActivityPhase::Waiting
            }
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

    /// `agent_activity` when the activity changed: coarse and sanitized —
    /// a phase, the status and at most a tool's name; never text,
    /// arguments, results or paths.
    pub fn set_activity(&mut self, phase: ActivityPhase, tool: Option<String>) -> Option<Out> {
        let activity = Activity { phase, tool, status: self.status };
        if self.activity == activity {
            return None;
        }
        self.activity = activity;
        Some(Out::Broadcast(ServerMessage::AgentActivity(AgentActivity {
            agent_id: self.agent_id.clone(),
            timestamp: now_ms(),
            phase: self.activity.phase,
            status: self.status,
            tool_name: self.activity.tool.clone(),
        })))
    }

    /// The activity the status implies (on status changes).
    pub fn activity_of_status(&mut self) -> Option<Out> {
        let (phase, tool) = self.phase_of_status();
        self.set_activity(phase, tool)
    }

    /// `agent_status_changed` with the current status and runtime state.
    fn status_event(&self, detail: Option<String>) -> Out {
        Out::Broadcast(ServerMessage::AgentStatusChanged(AgentStatusChanged {
            agent_id: self.agent_id.clone(),
            status: self.status,
            runtime_state: self.runtime_state,
            detail,
        }))
    }

    /// What a node says of its agent while the hub does not listen to it:
    /// its status there, and whether its process runs there.
    pub fn node_said(&mut self, status: AgentStatus, state: RuntimeState) -> Vec<Out> {
        let mut out = Vec::new();
        if (self.status, self.runtime_state) != (status, state) {
            (self.status, self.runtime_state) = (status, state);
            out.extend([Out::Publish, self.status_event(None)]);
        }
        out.extend(self.activity_of_status());
        out
    }

    pub fn set_runtime_state(&mut self, state: RuntimeState) -> Vec<Out> {
        if self.runtime_state == state {
            return Vec::new();
        }
        self.runtime_state = state;
        vec![Out::Publish, self.status_event(None)]
    }

    /// The process ended: stopped when that was `expected`, else failed,
    /// which every client hears with the `reason` (`agent_exited`).
    pub fn exited(
        &mut self,
        expected: bool,
        because: Option<Because>,
        reason: String,
        exit_code: Option<i32>,
    ) -> Vec<Out> {
        // What every client is told: a crash, and a stop by the fleet's
        // limits with its reason; an end that was asked for says nothing.
        let (status, state, told) = match (expected, because) {
            (_, Some(Because::Hibernated(why))) => {
                (AgentStatus::Idle, RuntimeState::Hibernated, Some(why))
            }
            (_, Some(Because::OverCeiling(why))) => {
                (AgentStatus::Error, RuntimeState::Stopped, Some(why))
            }
            (true, None) => (AgentStatus::Idle, RuntimeState::Stopped, None),
            (false, None) => (AgentStatus::Error, RuntimeState::Failed, Some(reason)),
        };
        self.status = status;
        self.session = None;
        self.streaming.ended();
        let mut out = self.set_runtime_state(state);
        if let Some(reason) = told {
            let agent_id = self.agent_id.clone();
            let exited = AgentExited { agent_id, runtime_state: state, reason, exit_code };
            out.push(Out::Broadcast(ServerMessage::AgentExited(exited)));
        }
        out.extend(self.activity_of_status());
        out
    }

    /// The sandbox as described now; `agent_sandbox` when it changed.
    pub fn set_sandbox(&mut self, now: Option<shard_protocol::sandbox::SandboxInfo>) -> Vec<Out> {
        if now == self.sandbox {
            return Vec::new();
        }
        self.sandbox = now.clone();
        let mut out = vec![Out::Publish];
        if let Some(sandbox) = now {
            let event =
                shard_protocol::sandbox::AgentSandbox { agent_id: self.agent_id.clone(), sandbox };
            out.push(Out::Broadcast(ServerMessage::AgentSandbox(event)));
        }
        out
    }

    /// A new process's `sync`: the agent is ready, with this status, mode
    /// and capabilities, and the session's `record` (its model too).
    pub fn synced(&mut self, sync: &Sync, record: Option<SessionView>) {
        self.status = sync.status;
        self.mode = Some(sync.mode.clone());
        if sync.capabilities.is_some() {
            self.capabilities.clone_from(&sync.capabilities);
        }
        self.model = record.as_ref().and_then(SessionView::model);
        self.session = record;
    }

    /// The agent runs another session: its record is read again once a
    /// process runs it.
    pub fn forget_session(&mut self) {
        self.session = None;
    }

    /// The daemon's own `sync` (§6.4, §9.1): the live window from the
    /// session's record, the open questions (the agent's and those of the
    /// descendants it answers for), status and mode.
    pub fn sync(
        &mut self,
        pending_requests: Vec<PendingRequest>,
        runtime_epoch: u64,
        seq: u64,
    ) -> Sync {
        let (mut live_window, problem) =
            self.session.as_mut().map(SessionView::live_window).unwrap_or_default();
        // Mid-reply: the reply so far, which the deltas after this go on.
        if let Some(so_far) = self.streaming.message(&live_window.messages) {
            live_window.messages.push(so_far);
        }
        if let Some(problem) = problem {
            tracing::warn!(agent = %self.agent_id, %problem, "cannot read the session log");
        }
        Sync {
            status: self.status,
            mode: self.mode.clone().unwrap_or_else(|| shard_platform::modes::BUILD.to_owned()),
            capabilities: self.capabilities.clone(),
            runtime_epoch: Some(runtime_epoch),
            live_window,
            pending_requests,
            seq: Some(seq),
            reset: None,
        }
    }

    /// Keeps the projection current from one of the agent's events.
    pub fn observe(&mut self, message: &ServerMessage) -> Vec<Out> {
        let mut out = Vec::new();
        match message {
            ServerMessage::Status(status) => {
                let changed = self.status != status.status;
                self.status = status.status;
                if changed {
                    out.push(Out::Publish);
                    out.push(self.status_event(status.detail.clone()));
                }
                out.extend(self.activity_of_status());
            }
            ServerMessage::ModeChanged(changed) => {
                self.mode = Some(changed.mode.clone());
                out.push(Out::Publish);
            }
            ServerMessage::ModelChanged(changed) => {
                self.model = Some(changed.active.id.clone());
                if changed.capabilities.is_some() {
                    self.capabilities.clone_from(&changed.capabilities);
                }
                out.push(Out::Publish);
            }
            ServerMessage::Usage(usage) => {
                self.context_tokens = usage.context_tokens.or(self.context_tokens);
            }
            ServerMessage::MessageComplete(complete) => {
                self.streaming.completed(&complete.message_id)
            }
            ServerMessage::TurnEnd(_) => self.streaming.ended(),
            ServerMessage::MessageDelta(delta) => out.extend(self.delta(delta.kind)),
            ServerMessage::ToolCall(call) => {
                out.extend(self.set_activity(ActivityPhase::Tool, Some(call.name.clone())))
            }
            ServerMessage::ToolResult(_) => {
                out.extend(self.set_activity(ActivityPhase::Streaming, None))
            }
            _ => {}
        }
        out
    }

    /// A streamed delta: the reply so far grows, and it says what the
    /// agent is doing now.
    pub fn streamed(&mut self, delta: &Delta) -> Option<Out> {
        self.streaming.delta(delta);
        self.delta(delta.kind)
    }

    /// A streamed delta of `kind` says what the agent is doing now.
    fn delta(&mut self, kind: DeltaKind) -> Option<Out> {
        let phase = match kind {
            DeltaKind::Thinking => ActivityPhase::Thinking,
            _ => ActivityPhase::Streaming,
        };
        self.set_activity(phase, None)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shard_protocol::Envelope;

    use super::*;

    fn projection() -> Projection {
        let manifest =
            Manifest { agent_id: "a1".into(), cwd: "/tmp".into(), ..Manifest::default() };
        Projection::new(&manifest)
    }

    fn event(value: serde_json::Value) -> ServerMessage {
        Envelope::<ServerMessage>::from_json(&value.to_string()).expect("an event").message
    }

    fn broadcasts(outs: &[Out]) -> Vec<String> {
        outs.iter()
            .filter_map(|out| match out {
                Out::Broadcast(message) => Some(Envelope::new(message.clone()).to_json()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_status_change_is_published_and_told_once_with_its_activity() {
        let mut projection = projection();
        let streaming = event(json!({"type": "status", "status": "streaming"}));
        let outs = projection.observe(&streaming);
        assert_eq!(Out::kinds(&outs), ["publish", "broadcast", "broadcast"]);
        let told = broadcasts(&outs);
        assert!(told[0].contains("agent_status_changed") && told[1].contains("agent_activity"));
        assert!(projection.observe(&streaming).is_empty(), "nothing changed: nothing told");
        // A tool call is a phase of its own; its name and nothing more.
        let call = event(json!({"type": "tool_call", "tool_call_id": "c1", "name": "bash",
            "args": {"command": "cat secret"}}));
        let told = broadcasts(&projection.observe(&call));
        assert!(told[0].contains(r#""tool_name":"bash""#) && !told[0].contains("secret"));
        // Streaming does not undo the tool phase; a result does.
        assert!(projection.observe(&streaming).is_empty());
        let result = event(
            json!({"type": "tool_result", "tool_call_id": "c1", "content": {"kind": "text", "text": "x"}, "is_error": false}),
        );
        assert!(broadcasts(&projection.observe(&result))[0].contains(r#""phase":"streaming""#));
    }

    #[test]
    fn an_unexpected_exit_is_a_failure_every_client_hears_of() {
        let mut projection = projection();
        assert_eq!(
            Out::kinds(&projection.set_runtime_state(RuntimeState::Running)),
            ["publish", "broadcast"]
        );
        assert!(projection.set_runtime_state(RuntimeState::Running).is_empty());
        let outs = projection.exited(false, None, "killed by SIGSEGV".into(), None);
        let told = broadcasts(&outs);
        assert!(told.iter().any(|line| line.contains("agent_exited") && line.contains("SIGSEGV")));
        assert_eq!(
            (projection.status, projection.runtime_state),
            (AgentStatus::Error, RuntimeState::Failed)
        );
        let outs = projection.exited(true, None, "stopped".into(), Some(0));
        assert!(broadcasts(&outs).iter().all(|line| !line.contains("agent_exited")));
        assert_eq!(projection.runtime_state, RuntimeState::Stopped);
    }

    #[test]
    fn sync_says_what_the_agent_shows_now() {
        let mut projection = projection();
        let sync = projection.sync(Vec::new(), 3, 41);
        assert_eq!(sync.mode, shard_platform::modes::BUILD, "a default mode before any process");
        assert_eq!((sync.runtime_epoch, sync.seq), (Some(3), Some(41)));
        let changed =
            event(json!({"type": "mode_changed", "previous_mode": "build", "mode": "plan"}));
        assert_eq!(Out::kinds(&projection.observe(&changed)), ["publish"]);
        assert_eq!(projection.sync(Vec::new(), 3, 41).mode, "plan");
        let info =
            projection.info(&Manifest { agent_id: "a1".into(), ..Manifest::default() }, None);
        assert_eq!(info.mode.as_deref(), Some("plan"));
    }
}
