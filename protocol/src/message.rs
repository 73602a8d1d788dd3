//! The two closed message sets: what clients send ([`ClientMessage`]) and what
//! servers send ([`ServerMessage`]). Each variant names its wire `type`, its
//! [`Scope`] and whether the spec requires an `id`, in one table per set, so
//! the enum, its decoder and its list of types cannot disagree.

use serde::Serialize;
use serde_json::Value;

use crate::agent::{
    AgentCommands, Compaction, Empty, ErrorEvent, Hello, MessageComplete, MessageDelta,
    ModeChanged, ModelChanged, PermissionRequest, PermissionResolved, PermissionResponse, Prompt,
    ReasoningLevelChange, SessionOp, SetMode, SetModel, SetReasoningLevel, Status, Steer, Sync,
    ToolCall, ToolResult, TurnEnd, TurnStart, UiRequest, UiResolved, UiResponse, UserMessage,
};
use crate::approvals::ApprovalList;
use crate::budget::{BudgetList, BudgetSet, BudgetUpdated, Hold};
use crate::envelope::{MessageSet, PayloadError, Scope, payload};
use crate::error::WireError;
use crate::fleet::{FleetUpdated, FleetWatch};
use crate::node::NodeChanged;
use crate::orchestrator::{
    AgentActivity, AgentAttach, AgentCreate, AgentExited, AgentKill, AgentSpawned,
    AgentStatusChanged, AgentStatusQuery, AgentTarget, ClientPresence, DaemonShutdown,
    RevokeSession, RuntimeQuery, SessionActivate,
};
use crate::sandbox::{AgentSandbox, SandboxRevoke};
use crate::search::SearchQuery;
use crate::subagent::{
    SubagentCreate, SubagentRelaunch, SubagentRunChanged, SubagentStatus, SubagentSteer,
    SubagentStop, SubagentWait,
};
use crate::types::Usage;
use crate::usage::{AgentUsage, UsageAgentQuery, UsageSessionQuery};
use crate::web::PairUsed;
use crate::workspace::{
    WorkspaceAction, WorkspaceAttach, WorkspaceAttached, WorkspaceConflict, WorkspaceCreate,
    WorkspaceEvent, WorkspaceList, WorkspaceRetire, WorkspaceStatus,
};

macro_rules! message_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($payload:ty) = $tag:literal, $scope:ident, $id:ident; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(tag = "type")]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $tag)] $variant($payload), )*
        }

        impl $name {
            /// Every wire `type` of this set, in catalog order.
            pub const TYPES: &'static [&'static str] = &[$($tag),*];
        }

        impl MessageSet for $name {
            fn scope_of(type_name: &str) -> Option<Scope> {
                match type_name {
                    $( $tag => Some(Scope::$scope), )*
                    _ => None,
                }
            }

            fn requires_id(type_name: &str) -> bool {
                match type_name {
                    $( $tag => message_set!(@id $id), )*
                    _ => false,
                }
            }

            fn decode_payload(
                type_name: &str,
                value: Value,
            ) -> Option<Result<Self, PayloadError>> {
                match type_name {
                    $( $tag => Some(payload(value).map(Self::$variant)), )*
                    _ => None,
                }
            }

            fn type_name(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $tag, )*
                }
            }
        }
    };
    (@id required) => { true };
    (@id optional) => { false };
}

message_set! {
    /// Everything a client sends: per-agent commands (§9) and orchestrator
    /// commands (§10.1, §10.1a, §10.3).
    pub enum ClientMessage {
        // §9.2 drive commands
        Prompt(Prompt) = "prompt", Routed, optional;
        Steer(Steer) = "steer", Routed, optional;
        Abort(Empty) = "abort", Routed, optional;
        SetMode(SetMode) = "set_mode", Routed, optional;
        ListModes(Empty) = "list_modes", Routed, optional;
        ListModels(Empty) = "list_models", Routed, optional;
        // Shard's own extension (docs/PROTOCOL-NOTES.md, "Runtimes").
        ListCommands(Empty) = "list_commands", Routed, optional;
        SetModel(SetModel) = "set_model", Routed, optional;
        ListReasoningLevels(Empty) = "list_reasoning_levels", Routed, required;
        SetReasoningLevel(SetReasoningLevel) = "set_reasoning_level", Routed, required;
        SessionOp(SessionOp) = "session_op", Routed, optional;
        RecallSteer(Empty) = "recall_steer", Routed, optional;
        // Shard extension: only the daemon sends it, to its own agent
        // process (a budget reached, docs/PROTOCOL-NOTES.md "Budgets").
        Hold(Hold) = "hold", Routed, optional;
        // §9.5 answers
        PermissionResponse(PermissionResponse) = "permission_response", Routed, optional;
        UiResponse(UiResponse) = "ui_response", Routed, optional;
        // §10.1 registry
        AgentList(Empty) = "agent.list", Registry, required;
        AgentCreate(AgentCreate) = "agent.create", Registry, required;
        AgentAttach(AgentAttach) = "agent.attach", Registry, required;
        AgentDetach(AgentTarget) = "agent.detach", Registry, required;
        AgentTerminate(AgentTarget) = "agent.terminate", Registry, required;
        AgentKill(AgentKill) = "agent.kill", Registry, required;
        AgentStatus(AgentStatusQuery) = "agent.status", Registry, required;
        DaemonShutdown(DaemonShutdown) = "daemon.shutdown", Registry, required;
        // Shard's own extension (docs/PROTOCOL-NOTES.md): a new browser
        // enrollment URL, for `shard enroll` on the unix socket.
        DaemonEnroll(Empty) = "daemon.enroll", Registry, required;
        // Shard extensions for `shard sessions list|revoke` (unix socket only).
        DaemonSessions(Empty) = "daemon.sessions", Registry, required;
        // What the daemon holds right now (unix socket only): for
        // operators, and for the benchmark's soak to see that nothing leaks.
        DaemonStats(Empty) = "daemon.stats", Registry, required;
        DaemonRevokeSession(RevokeSession) = "daemon.revoke_session", Registry, required;
        // Closes browser connections (of one session, or all) without
        // revoking anything: clients reconnect and resync.
        DaemonDisconnect(RevokeSession) = "daemon.disconnect", Registry, required;
        // §10.1a workspaces
        WorkspaceCreate(WorkspaceCreate) = "workspace.create", Registry, required;
        WorkspaceAttach(WorkspaceAttach) = "workspace.attach", Registry, required;
        WorkspaceList(WorkspaceList) = "workspace.list", Registry, required;
        WorkspaceStatus(WorkspaceStatus) = "workspace.status", Registry, required;
        WorkspaceRetire(WorkspaceRetire) = "workspace.retire", Registry, required;
        // Shard extensions (docs/PROTOCOL-NOTES.md, "Workspace actions"):
        // commit, merge and push a workspace's work, each previewed first.
        WorkspaceCommit(WorkspaceAction) = "workspace.commit", Registry, required;
        WorkspaceMerge(WorkspaceAction) = "workspace.merge", Registry, required;
        WorkspacePush(WorkspaceAction) = "workspace.push", Registry, required;
        // §10.3 subagent jobs
        SubagentCreate(SubagentCreate) = "subagent.create", Registry, required;
        SubagentWait(SubagentWait) = "subagent.wait", Registry, required;
        SubagentSteer(SubagentSteer) = "subagent.steer", Registry, required;
        SubagentRelaunch(SubagentRelaunch) = "subagent.relaunch", Registry, required;
        SubagentStatus(SubagentStatus) = "subagent.status", Registry, required;
        SubagentStop(SubagentStop) = "subagent.stop", Registry, required;
        // Shard extensions (docs/PROTOCOL-NOTES.md): usage rollups, an
        // agent's approval history, and switching an agent's session.
        UsageGlobal(Empty) = "usage.global", Registry, required;
        UsageAgent(UsageAgentQuery) = "usage.agent", Registry, required;
        UsageSession(UsageSessionQuery) = "usage.session", Registry, required;
        ApprovalList(ApprovalList) = "approval.list", Registry, required;
        // Shard extension: take back a host allowed always for an agent.
        SandboxRevoke(SandboxRevoke) = "sandbox.revoke", Registry, required;
        SessionActivate(SessionActivate) = "session.activate", Registry, required;
        // The runtimes agents may run (CONTRACT.md).
        RuntimeList(RuntimeQuery) = "runtime.list", Registry, required;
        // Shard extension: full-text search across every agent's sessions.
        SearchQuery(SearchQuery) = "search.query", Registry, required;
        // Shard extension: whether a client is on screen (notifications).
        ClientPresence(ClientPresence) = "client.presence", Registry, required;
        // Shard extension: what the agents' processes use, now and as it moves.
        FleetWatch(FleetWatch) = "fleet.watch", Registry, required;
        // Shard extensions: budgets, listed and set.
        BudgetList(BudgetList) = "budget.list", Registry, required;
        BudgetSet(BudgetSet) = "budget.set", Registry, required;
        // Shard extension: the nodes a hub reaches, and their links.
        NodeList(Empty) = "node.list", Registry, required;
    }
}

message_set! {
    /// Everything a server (the daemon or a direct agent) sends: responses and
    /// events (§9, §10.2, §10.3).
    // `agent_spawned` (an `AgentInfo`) is the largest by far; boxing it cost
    // the browser bundle 0.3 KB on the wire, more than the moves it saves.
    #[allow(clippy::large_enum_variant)]
    pub enum ServerMessage {
        // §9.1 lifecycle
        Hello(Hello) = "hello", Routed, optional;
        Sync(Sync) = "sync", Routed, optional;
        Status(Status) = "status", Routed, optional;
        // §9.3
        Response(Response) = "response", Routed, optional;
        // §9.4 streaming and turns
        TurnStart(TurnStart) = "turn_start", Routed, optional;
        // Shard extension: a user message landed in the session log.
        UserMessage(UserMessage) = "user_message", Routed, optional;
        MessageDelta(MessageDelta) = "message_delta", Routed, optional;
        MessageComplete(MessageComplete) = "message_complete", Routed, optional;
        ToolCall(ToolCall) = "tool_call", Routed, optional;
        ToolResult(ToolResult) = "tool_result", Routed, optional;
        TurnEnd(TurnEnd) = "turn_end", Routed, optional;
        Usage(Usage) = "usage", Routed, optional;
        Compaction(Compaction) = "compaction", Routed, optional;
        Error(ErrorEvent) = "error", Routed, optional;
        // §9.5 questions
        PermissionRequest(PermissionRequest) = "permission_request", Routed, optional;
        PermissionResolved(PermissionResolved) = "permission_resolved", Routed, optional;
        UiRequest(UiRequest) = "ui_request", Routed, optional;
        UiResolved(UiResolved) = "ui_resolved", Routed, optional;
        // §10.2 per-agent changes
        ModelChanged(ModelChanged) = "model_changed", Routed, optional;
        ModeChanged(ModeChanged) = "mode_changed", Routed, optional;
        ReasoningLevelChanged(ReasoningLevelChange) = "reasoning_level_changed", Routed, optional;
        // Shard extension: the commands an agent offers changed.
        CommandsChanged(AgentCommands) = "commands_changed", Routed, optional;
        // §10.2 registry events
        WorkspaceCreated(WorkspaceEvent) = "workspace_created", Registry, optional;
        WorkspaceAttached(WorkspaceAttached) = "workspace_attached", Registry, optional;
        WorkspaceRetired(WorkspaceEvent) = "workspace_retired", Registry, optional;
        WorkspaceConflict(WorkspaceConflict) = "workspace_conflict", Registry, optional;
        // Shard extension: a commit, merge or push changed a workspace.
        WorkspaceUpdated(WorkspaceEvent) = "workspace_updated", Registry, optional;
        AgentSpawned(AgentSpawned) = "agent_spawned", Registry, optional;
        AgentExited(AgentExited) = "agent_exited", Registry, optional;
        AgentStatusChanged(AgentStatusChanged) = "agent_status_changed", Registry, optional;
        AgentActivity(AgentActivity) = "agent_activity", Registry, optional;
        // §10.3
        SubagentRunChanged(SubagentRunChanged) = "subagent_run_changed", Registry, optional;
        // Shard extension: an agent's usage rollup changed.
        AgentUsage(AgentUsage) = "agent_usage", Registry, optional;
        // Shard extension: an agent's sandbox changed (a host granted or
        // taken back).
        AgentSandbox(AgentSandbox) = "agent_sandbox", Registry, optional;
        // Shard extension: this browser session's pairing link was used.
        PairUsed(PairUsed) = "pair_used", Registry, optional;
        // Shard extension: what the agents' processes use changed.
        FleetUpdated(FleetUpdated) = "fleet_updated", Registry, optional;
        // Shard extension: a budget's state or cap changed.
        BudgetUpdated(BudgetUpdated) = "budget_updated", Registry, optional;
        // Shard extension: a node's link moved (online, connecting, offline).
        NodeChanged(NodeChanged) = "node_changed", Registry, optional;
    }
}

/// The §9.3 response to a command. `id` and a routing `agent_id` live in the
/// envelope. A failed response always carries its `error`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawResponse", into = "RawResponse")]
pub struct Response {
    /// The `type` of the command answered.
    pub command: String,
    pub outcome: Result<Option<Value>, WireError>,
}

impl Response {
    /// A success with typed `data`.
    pub fn ok(command: impl Into<String>, data: impl Serialize) -> Self {
        let data = serde_json::to_value(data).ok().filter(|data| !data.is_null());
        Self { command: command.into(), outcome: Ok(data) }
    }

    /// A success with no `data` (`{ success: true }`).
    pub fn accepted(command: impl Into<String>) -> Self {
        Self { command: command.into(), outcome: Ok(None) }
    }

    pub fn failed(command: impl Into<String>, error: WireError) -> Self {
        Self { command: command.into(), outcome: Err(error) }
    }

    pub fn success(&self) -> bool {
        self.outcome.is_ok()
    }

    /// The `data` as a typed result, or the error it failed with.
    pub fn data<T: serde::de::DeserializeOwned>(&self) -> Result<T, WireError> {
        match &self.outcome {
            Ok(data) => {
                crate::decode::from_value(data.clone().unwrap_or(Value::Null)).map_err(|error| {
                    WireError::new(
                        crate::ErrorCode::InvalidRequest,
                        format!("unexpected `{}` response data: {error}", self.command),
                    )
                })
            }
            Err(error) => Err(error.clone()),
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct RawResponse {
    command: String,
    success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<WireError>,
}

impl TryFrom<RawResponse> for Response {
    type Error = &'static str;

    fn try_from(raw: RawResponse) -> Result<Self, Self::Error> {
        let outcome = match (raw.success, raw.error) {
            (true, None) => Ok(raw.data),
            (true, Some(_)) => return Err("a successful response carries no `error`"),
            (false, Some(error)) => Err(error),
            (false, None) => return Err("a failed response needs an `error`"),
        };
        Ok(Self { command: raw.command, outcome })
    }
}

impl From<Response> for RawResponse {
    fn from(response: Response) -> Self {
        match response.outcome {
            Ok(data) => Self { command: response.command, success: true, data, error: None },
            Err(error) => {
                Self { command: response.command, success: false, data: None, error: Some(error) }
            }
        }
    }
}
