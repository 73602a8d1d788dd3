//! What the command layer itself refuses (who may run a command, where it
//! may come from, how many may run), and the one mapping of each refusal to
//! the wire's `{code, message}`. A command's own domain (agents, jobs,
//! workspaces) refuses with its own error type.

use shard_protocol::{ErrorCode, WireError};

#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("not attached to `{0}`: attach interactively to act on it")]
    ActUnattached(String),
    #[error("not attached to `{0}`")]
    AnswerUnattached(String),
    #[error("not attached to `{0}`: attach to it first")]
    WatchUnattached(String),
    #[error("an observer never answers requests")]
    ObserverAnswers,
    #[error("an observer only watches")]
    ObserverActs,
    #[error("`{0}` needs the `agent_id` of an attached agent")]
    NoAgentId(&'static str),
    /// A local-only command on a browser's connection, and what to use.
    #[error("{0}")]
    LocalOnly(&'static str),
    /// A person's command from an agent's own process.
    #[error("`{0}` is not for an agent's process")]
    NotForAgents(&'static str),
    /// What only the daemon sends its own agent process.
    #[error("`{0}` is the daemon's own: a budget's cap holds an agent; raise it with `budget.set`")]
    DaemonOnly(&'static str),
    #[error("{limit} slow commands are already running on this connection; wait for their answers")]
    TooManyRunning { limit: usize },
    #[error(
        "`{agent_id}` is on subagent run `{run_id}`: steer it, or stop the run, instead of prompting it"
    )]
    OnRun { agent_id: String, run_id: String },
    #[error("the run's turn ended before the steer was delivered")]
    SteerLate,
    #[error("no session `{0}`")]
    NoSession(String),
    #[error("cannot read the history")]
    History,
    #[error("`{0}` reached the wrong command family")]
    WrongFamily(&'static str),
    #[error("cannot encode the answer: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("security store: {0}")]
    SecurityStore(#[from] std::io::Error),
    #[error("no live session `{0}`")]
    NoBrowserSession(String),
    /// A frame that is not a message (too long, not UTF-8, not JSON).
    #[error("{0}")]
    BadFrame(String),
}

impl CommandError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::ActUnattached(_)
            | Self::AnswerUnattached(_)
            | Self::WatchUnattached(_)
            | Self::NoAgentId(_) => ErrorCode::NotAttached,
            Self::ObserverAnswers
            | Self::ObserverActs
            | Self::LocalOnly(_)
            | Self::NotForAgents(_)
            | Self::DaemonOnly(_) => ErrorCode::PermissionDenied,
            Self::TooManyRunning { .. } | Self::OnRun { .. } | Self::SteerLate => {
                ErrorCode::Conflict
            }
            Self::NoSession(_) | Self::NoBrowserSession(_) => ErrorCode::NotFound,
            Self::History | Self::WrongFamily(_) | Self::Encode(_) | Self::SecurityStore(_) => {
                ErrorCode::InternalError
            }
            Self::BadFrame(_) => ErrorCode::InvalidRequest,
        }
    }
}

impl From<CommandError> for WireError {
    fn from(error: CommandError) -> Self {
        WireError::new(error.code(), error.to_string())
    }
}
