//! The orchestrator layer (§10.1, §10.2): commands about the agent registry,
//! the daemon itself, and the registry events every daemon connection sees.
//!
//! These messages never carry a routing `agent_id` (§5.2). Where an
//! `agent_id` appears here it is payload: the agent a command targets, or the
//! agent an event is about.

use serde::{Deserialize, Serialize};

use crate::types::{AgentInfo, AgentStatus, RuntimeState};

/// `headless_policy` of `agent.create`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadlessPolicy {
    Deny,
    AllowIfRuleMatches,
    Queue,
}

/// Limits the daemon pins on a managed child (camelCase on the wire, §10.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPolicy {
    #[serde(rename = "maxTasks")]
    pub max_tasks: u32,
    #[serde(rename = "maxDepth")]
    pub max_depth: u32,
}

/// `agent.create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentCreate {
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headless_policy: Option<HeadlessPolicy>,
    /// Its name and parent; a managed child's alias and names are set by
    /// the daemon, never by clients.
    #[serde(flatten)]
    pub identity: crate::identity::AgentIdentity,
    // Managed-child manifest fields: the daemon sets these, clients do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_policy: Option<LaunchPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// The runtime the agent runs (`runtime.list`); absent: the built-in
    /// agent (CONTRACT.md, "Agents that are not Shard's own").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Narrows the configured sandbox for this agent; never widens it
    /// (CONTRACT.md, "Sandbox").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxRequest>,
    /// The node to run it on (`node.list`); absent: this daemon
    /// (CONTRACT.md, "`shard acp` and nodes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachRole {
    /// Receives and may answer permission and UI requests.
    #[default]
    Interactive,
    /// Watches only; never prompts or answers.
    Observer,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentAttach {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<AttachRole>,
    /// Shard's additive cursor: the `seq` of the last event of this agent
    /// the client has. Within retention the daemon sends exactly the events
    /// after it and no `sync`; otherwise a `sync` with `reset: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

/// `session.activate` (a Shard extension, PROTOCOL.md §9.2 names it for
/// session-first clients): switch an agent to another session of its own
/// lineage (its first session or a fork made from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionActivate {
    pub agent_id: String,
    pub session_id: String,
}

/// The data of `session.activate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionActivateResult {
    pub agent_id: String,
    pub session_id: String,
    pub previous_session_id: String,
}

/// The payload of `agent.detach` and `agent.terminate`: just the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTarget {
    pub agent_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentKill {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// `agent.status`: one agent, or all when `agent_id` is omitted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatusQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// `client.presence` (a Shard extension, docs/PROTOCOL-NOTES.md): whether
/// the client is on screen now. A browser tab says so when it connects and
/// whenever it is shown or hidden; the daemon pushes a question to a browser
/// only while none of its tabs is (docs/NOTIFICATIONS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientPresence {
    pub visible: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonShutdown {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// The data of `daemon.enroll` (a Shard extension): a single-use URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollResult {
    pub url: String,
}

/// `daemon.revoke_session` (a Shard extension): one browser session by id,
/// or every one with `all: true`; exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawRevokeSession", into = "RawRevokeSession")]
pub enum RevokeSession {
    One(String),
    All,
}

#[derive(Serialize, Deserialize)]
struct RawRevokeSession {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    all: Option<bool>,
}

impl TryFrom<RawRevokeSession> for RevokeSession {
    type Error = &'static str;

    fn try_from(raw: RawRevokeSession) -> Result<Self, Self::Error> {
        match (raw.session_id, raw.all) {
            (Some(id), None | Some(false)) if !id.is_empty() => Ok(Self::One(id)),
            (None, Some(true)) => Ok(Self::All),
            _ => Err("needs exactly one of `session_id` or `all: true`"),
        }
    }
}

impl From<RevokeSession> for RawRevokeSession {
    fn from(revoke: RevokeSession) -> Self {
        match revoke {
            RevokeSession::One(id) => Self { session_id: Some(id), all: None },
            RevokeSession::All => Self { session_id: None, all: Some(true) },
        }
    }
}

/// One runtime an agent may run (`runtime.list`): the built-in agent is
/// `{id: "shard", protocol: "shard"}`, a configured one speaks `acp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    pub id: String,
    pub protocol: String,
}

/// `runtime.list`'s request. Shard's additive field: `node`, to list the
/// runtimes of one of the hub's nodes rather than its own (docs/NODES.md).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The data of `runtime.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeListResult {
    pub runtimes: Vec<RuntimeInfo>,
    /// Shard's additive field: the model a built-in agent gets when none
    /// is named (config.toml's `default_model`, else `demo`), for a form to
    /// say so (docs/PROTOCOL-NOTES.md, "Runtimes").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Shard's additive field: a working directory to offer a first agent,
    /// the one the daemon was started in (its user's home when that is the
    /// root). Only a suggestion: `agent.create` still names its `cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_cwd: Option<String>,
}

/// A browser session as `daemon.sessions` lists it: ids and times only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrowserSession {
    pub session_id: String,
    pub principal_id: String,
    pub created_at: u64,
    pub last_seen_at: u64,
    pub expires_at: u64,
    /// Open WebSockets of this session right now.
    pub connections: u32,
    /// Shard's additive field: the host of the push service the session
    /// subscribed to Web Push with (docs/NOTIFICATIONS.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsResult {
    pub sessions: Vec<BrowserSession>,
}

/// `daemon.stats` (Shard extension): what the daemon holds right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsResult {
    /// Tasks alive in the daemon's runtime.
    pub tasks: u64,
    /// Client connections open (browsers and local tools).
    pub connections: u32,
    /// Agents listed (durable, whatever their state).
    pub agents: u32,
    /// Agents whose process is running.
    pub running_agents: u32,
    /// Agents whose host is awake (a task with its queues): running,
    /// attached or with work open. The rest are dormant and cost a record.
    #[serde(default)]
    pub awake_agents: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisconnectResult {
    /// Connections closed.
    pub disconnected: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeResult {
    pub revoked: Vec<String>,
}

/// The data of `agent.list` and `agent.status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentsResult {
    pub agents: Vec<AgentInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCreateResult {
    pub agent_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachResult {
    pub status: AgentStatus,
    pub info: AgentInfo,
    /// Shard's additive field: `true` when `after_seq` was honoured (the
    /// missed events follow, and no `sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminateResult {
    /// `true` when active work will finish first.
    pub deferred: bool,
}

// ---------------------------------------------------------------------------
// §10.2 registry events: `agent_id` here is payload, not routing.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpawned {
    pub agent_id: String,
    pub info: AgentInfo,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentExited {
    pub agent_id: String,
    pub runtime_state: RuntimeState,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentStatusChanged {
    pub agent_id: String,
    pub status: AgentStatus,
    pub runtime_state: RuntimeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityPhase {
    Idle,
    Thinking,
    Streaming,
    Tool,
    Waiting,
    Compacting,
    Retrying,
    Error,
    #[serde(other)]
    Unknown,
}

/// `agent_activity`: the sanitized overview every connection sees. By
/// construction it has no field that could carry prompts, model text, tool
/// arguments or results, or paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentActivity {
    pub agent_id: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    pub phase: ActivityPhase,
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}
