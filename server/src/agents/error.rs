//! What the registry and the hosts refuse, and the one mapping of each
//! refusal to the wire's `{code, message}`.

use serde_json::json;
use shard_platform::session_view::SessionError;
use shard_protocol::{ErrorCode, WireError};

use super::runtime::acp::error::AcpError;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("no agent `{0}`")]
    NoAgent(String),
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    #[error("unknown mode `{0}`")]
    UnknownMode(String),
    #[error("unknown runtime `{0}`: runtime.list names the configured ones")]
    UnknownRuntime(String),
    #[error("the agent has {queue} commands waiting already; retry when it has answered some")]
    HostBusy { queue: usize },
    #[error("the agent host stopped")]
    HostGone,
    #[error("the agent host stopped")]
    HostGoneStarting,
    #[error("agent {agent_id} was created but its process did not start: {why}")]
    NotStarted { agent_id: String, why: String },

    // What an `agent.create` holds.
    #[error("`cwd` must be an absolute path")]
    CwdRelative,
    #[error("`cwd` {cwd}: {source}")]
    CwdUnreadable { cwd: String, source: std::io::Error },
    #[error("`cwd` {0} is not a directory")]
    CwdNotDirectory(String),
    #[error("`cwd` {0} is owned by another user")]
    CwdForeign(String),
    /// The root, `$SHARD_HOME` or a folder that holds it: every write of
    /// the agent's would be "inside its cwd", Shard's own files included.
    #[error(
        "`cwd` {0} is the filesystem root, Shard's home, or a folder that holds Shard's home: an agent there could rewrite what the daemon runs; choose a project folder"
    )]
    CwdHoldsHome(String),
    #[error("`name` is longer than {max} characters")]
    NameTooLong { max: usize },
    #[error("`name` holds control or invisible formatting characters")]
    NameHidden,
    #[error("`tools`: there is no tool `{0}`")]
    UnknownTool(String),
    #[error("`system_prompt` is over {max} bytes")]
    BriefTooLong { max: usize },
    #[error("`names` holds more than {max} aliases")]
    TooManyAliases { max: usize },
    #[error("`names`: `{alias}` {why}")]
    BadAlias { alias: String, why: &'static str },
    #[error("{0:#}")]
    Config(anyhow::Error),
    #[error("cannot create the session: {0}")]
    SessionCreate(SessionError),
    #[error("cannot write the manifest: {0:#}")]
    ManifestWrite(anyhow::Error),

    // Delegation: a child never gets more than its parent.
    #[error(
        "`{parent}` is at depth {depth} and may nest no deeper (launch policy maxDepth {max_depth})"
    )]
    TooDeep { parent: String, depth: u32, max_depth: u32 },
    #[error("a child never gets a tool its parent lacks: `{parent}` has no `{tool}`")]
    ToolBeyondParent { parent: String, tool: String },
    #[error(
        "a child never gets more than its parent's mode: `{asked}` under a parent in `{parent_mode}` mode"
    )]
    ModeBeyondParent { asked: String, parent_mode: String },
    #[error("`{child}` has {extra}, which its parent `{parent}` lacks")]
    ChildHasMore { child: String, extra: String, parent: String },
    #[error(
        "`{child}` is in `{child_mode}` mode, wider than its parent's `{parent_mode}` mode now; switch the child to `{parent_mode}` or the parent back first"
    )]
    ChildModeWider { child: String, child_mode: String, parent_mode: String },

    // Sessions an agent takes on (adopts or switches to).
    #[error("no session `{0}`")]
    NoSession(String),
    #[error("session `{session_id}` cannot be restored: {why}")]
    SessionUnreadable { session_id: String, why: String },
    #[error("{0}")]
    SessionLog(SessionError),
    #[error("session `{0}` is already adopted")]
    SessionAdopted(String),
    #[error(
        "`{session_id}` is not one of {agent_id}'s sessions (its first session and the forks made from it)"
    )]
    NotInLineage { session_id: String, agent_id: String },
    #[error("session `{session_id}` is run by agent {holder}")]
    SessionHeld { session_id: String, holder: String },
    #[error("the session check stopped")]
    SessionCheckStopped,
    #[error("the agent is busy; switch again in a moment")]
    SwitchBusy,
    #[error(
        "the agent has work in hand (a turn, a question, a run or a command); switch sessions when it is idle"
    )]
    WorkInHand,
    #[error("cannot record the new session")]
    SwitchUnrecorded,

    // An agent's process, and what it is asked while it starts or stops.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    #[error("the agent's host is not running")]
    HostNotRunning,
    #[error("cannot start the agent process: {0}")]
    SpawnFailed(String),
    #[error("cannot start the agent: its working directory {0} is gone")]
    CwdGone(String),
    /// `[limits]` leave no room for another process (agents::fleet).
    #[error("cannot start the agent now: {0}")]
    FleetFull(super::fleet::governor::Full),
    #[error("{0}")]
    SandboxUnavailable(String),
    #[error("{0} is not among the hosts allowed always for this agent")]
    NotGranted(String),
    #[error("cannot write the agent's network grants: {0}")]
    GrantsUnwritten(String),
    #[error(transparent)]
    SandboxWider(crate::sandbox::policy::PolicyError),
    #[error(
        "the sandbox is off in config.toml: an agent without one can be started only from this \
         machine, never from a remote browser"
    )]
    UnsandboxedFromAfar,
    #[error("the agent process did not become ready in time")]
    NotReady,
    #[error("the agent process exited before it was ready: {0}")]
    ExitedStarting(String),
    /// The agent refused to start (its first message was an error).
    #[error("{code}: {message}")]
    StartRefused { code: ErrorCode, message: String },
    #[error("the agent process exited")]
    ProcessExited,
    #[error("the agent's runtime is stopped; send work or re-attach to restore it")]
    RuntimeStopped,
    #[error("the agent is not reading its input fast enough; retry in a moment")]
    InputSlow,
    #[error("the agent's input queue is full; answer again in a moment")]
    AnswerQueueFull,
    /// `[step_up]`: this allow needs the browser's passkey first.
    #[error("allowing this call from a browser needs its passkey (step-up)")]
    StepUpRequired,
    #[error("the agent is already on a run")]
    AlreadyOnRun,
    #[error("the run has no active turn")]
    NoActiveTurn,
    #[error("the agent is not reading its input")]
    NotReading,
    /// The agent runs on a node whose link is down (docs/NODES.md).
    #[error("{0}")]
    NodeOffline(String),
    #[error(
        "the agent's node is offline, so this answer cannot reach it: answer again once the \
         node is back (the question is shown again then)"
    )]
    AnswerNodeOffline,
    #[error("there is no node `{0}` in config.toml")]
    NoNode(String),
    /// What a node answered a command the hub sent it for a client.
    #[error("node `{node}`: {message}")]
    Node { node: String, code: ErrorCode, message: String, data: Option<Box<serde_json::Value>> },
    #[error("a node's answer this daemon cannot read: {0}")]
    NodeUnreadable(String),
    #[error(
        "agent {parent} runs on node `{node}`: its children run there too (`agent.create` with \
         `node`), under the node's sandbox"
    )]
    ParentOnNode { parent: String, node: String },
    #[error(
        "node `{node}` made agent {made}, but the hub lists at most {} agents of one node and \
         has that many of this one's: remove some there to see it here",
        super::nodes::MAX_AGENTS
    )]
    NodeFull { node: String, made: String },

    /// What an agent that speaks ACP refuses (its own type: the bridge
    /// builds them, and this only carries the registry's one to clients).
    #[error(transparent)]
    Acp(#[from] AcpError),
}

impl AgentError {
    /// Why a process in `cwd` could not be started: its sandbox is not
    /// there, its directory is gone, or what the system said.
    pub fn of_spawn(error: &std::io::Error, cwd: &str) -> Self {
        if let Some(why) = super::nodes::Offline::in_io(error) {
            return Self::NodeOffline(why);
        }
        match crate::sandbox::Unavailable::in_io(error) {
            Some(why) => Self::SandboxUnavailable(why),
            None if !std::path::Path::new(cwd).is_dir() => Self::CwdGone(cwd.to_owned()),
            None => Self::SpawnFailed(error.to_string()),
        }
    }

    /// A session that cannot be taken on: absent, or unreadable.
    pub fn session(session_id: &str, error: SessionError) -> Self {
        match error {
            SessionError::NotFound(_) => Self::NoSession(session_id.to_owned()),
            SessionError::Corrupt { why, .. } => {
                Self::SessionUnreadable { session_id: session_id.to_owned(), why }
            }
            other => Self::SessionLog(other),
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            Self::NoAgent(_)
            | Self::UnknownModel(_)
            | Self::UnknownMode(_)
            | Self::UnknownRuntime(_)
            | Self::NoSession(_)
            | Self::NotInLineage { .. } => ErrorCode::NotFound,
            Self::HostBusy { .. }
            | Self::TooDeep { .. }
            | Self::SessionHeld { .. }
            | Self::SwitchBusy
            | Self::WorkInHand => ErrorCode::Conflict,
            Self::HostGone
            | Self::Config(_)
            | Self::SessionCreate(_)
            | Self::ManifestWrite(_)
            | Self::SessionCheckStopped
            | Self::SwitchUnrecorded
            | Self::ProcessExited => ErrorCode::InternalError,
            Self::HostGoneStarting
            | Self::NotStarted { .. }
            | Self::ShuttingDown
            | Self::HostNotRunning
            | Self::SpawnFailed(_)
            | Self::CwdGone(_)
            | Self::FleetFull(_)
            | Self::NotReady
            | Self::ExitedStarting(_) => ErrorCode::RuntimeStartFailed,
            Self::SandboxUnavailable(_) => ErrorCode::SandboxUnavailable,
            Self::NodeOffline(_) | Self::AnswerNodeOffline => ErrorCode::NodeOffline,
            Self::NoNode(_) => ErrorCode::NotFound,
            Self::Node { code, .. } => code.clone(),
            Self::NodeUnreadable(_) => ErrorCode::ProtocolError,
            Self::NodeFull { .. } => ErrorCode::Conflict,
            Self::ParentOnNode { .. } => ErrorCode::InvalidRequest,
            Self::NotGranted(_) => ErrorCode::NotFound,
            Self::GrantsUnwritten(_) => ErrorCode::InternalError,
            Self::SandboxWider(crate::sandbox::policy::PolicyError::Config(_)) => {
                ErrorCode::InternalError
            }
            Self::SandboxWider(_) | Self::UnsandboxedFromAfar => ErrorCode::PermissionDenied,
            Self::StartRefused { code: ErrorCode::SessionCorrupt, .. } => ErrorCode::SessionCorrupt,
            Self::StartRefused { .. } => ErrorCode::RuntimeStartFailed,
            Self::RuntimeStopped
            | Self::InputSlow
            | Self::AnswerQueueFull
            | Self::AlreadyOnRun
            | Self::NoActiveTurn
            | Self::NotReading => ErrorCode::Conflict,
            Self::Acp(error) => error.code(),
            Self::CwdRelative
            | Self::CwdUnreadable { .. }
            | Self::CwdNotDirectory(_)
            | Self::CwdForeign(_)
            | Self::CwdHoldsHome(_)
            | Self::NameTooLong { .. }
            | Self::NameHidden
            | Self::UnknownTool(_)
            | Self::BriefTooLong { .. }
            | Self::TooManyAliases { .. }
            | Self::BadAlias { .. }
            | Self::SessionAdopted(_) => ErrorCode::InvalidRequest,
            Self::ToolBeyondParent { .. }
            | Self::ModeBeyondParent { .. }
            | Self::ChildHasMore { .. }
            | Self::ChildModeWider { .. }
            | Self::StepUpRequired => ErrorCode::PermissionDenied,
            Self::SessionUnreadable { .. } | Self::SessionLog(_) => ErrorCode::SessionCorrupt,
        }
    }
}

impl From<AgentError> for WireError {
    fn from(error: AgentError) -> Self {
        let wire = WireError::new(error.code(), error.to_string());
        match error {
            AgentError::NotStarted { agent_id, .. } => {
                wire.with_data(json!({"agent_id": agent_id}))
            }
            AgentError::SessionHeld { holder, .. } => wire.with_data(json!({"agent_id": holder})),
            AgentError::Node { data: Some(data), .. } => wire.with_data(*data),
            _ => wire,
        }
    }
}
