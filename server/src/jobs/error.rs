//! Why a `subagent.*` command is refused or failed, and the one place each
//! reason becomes a wire error: its code and its message, which is the
//! reason's text. A refusal of the agent registry's (a mode, a tool, a
//! child it could not make) is already a wire error and passes through.

use std::fmt;

use shard_protocol::subagent::RunState;
use shard_protocol::{ErrorCode, WireError};

use crate::agents::error::AgentError;

use super::state_name;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("no agent `{agent_id}`")]
    NoAgent { agent_id: String },
    /// A handle that names nothing among the parent's own jobs and children.
    #[error("`{parent}` has no job, run or child `{handle}`")]
    NotFound { handle: String, parent: String },
    #[error("unknown model `{model}`")]
    UnknownModel { model: String },
    #[error("{field} is empty")]
    EmptyText { field: TextField },
    #[error("{field} is over {max} bytes")]
    TextTooLong { field: TextField, max: usize },
    /// A task's `name` that is no valid alias (`problem` says why).
    #[error("task {index}: `name` {problem}")]
    BadName { index: usize, problem: &'static str },
    #[error("a job holds at most {max} tasks (launch policy maxTasks)")]
    TooManyTasks { max: u32 },
    #[error("strategy `single` takes exactly one task")]
    SingleTakesOne,
    #[error("relaunch a child, a run or an alias, not a job")]
    RelaunchOfJob,
    #[error("steer a run, a child or an alias, not a job")]
    SteerOfJob,
    #[error(
        "`{agent_id}` is at depth {depth} and may launch no subagents (launch policy maxDepth {max_depth})"
    )]
    MayNotDelegate { agent_id: String, depth: u32, max_depth: u32 },
    /// A relaunch of a child another run holds.
    #[error("`{agent_id}` is already on run `{run_id}`")]
    Leased { agent_id: String, run_id: String },
    /// A wait on a child that no run ever had.
    #[error("`{handle}` has never had a run")]
    NeverRan { handle: String },
    /// A steer to a child that no run ever had.
    #[error("`{handle}` has no run")]
    NoRun { handle: String },
    #[error("run `{run_id}` is {}: only an active run takes a steer", state_name(*.state))]
    NotActive { run_id: String, state: RunState },
    #[error(
        "`{parent}` has {active} subagent runs queued or running and may have at most {max} at once; wait for some to end"
    )]
    ParentBusy { parent: String, active: usize, max: usize },
    #[error(
        "the daemon has {active} subagent runs queued or running and takes at most {max} at once; wait for some to end"
    )]
    DaemonBusy { active: usize, max: usize },
    #[error(
        "{kept} job records are kept ({kept_per_parent} per parent) and none more has ended; stop or wait for a job first"
    )]
    RecordsFull { kept: usize, kept_per_parent: usize },
    #[error("cannot write the job record: {source:#}")]
    NotRecorded { source: anyhow::Error },
    /// The blocking task that writes a record did not come back.
    #[error("{0}")]
    Writer(#[from] tokio::task::JoinError),
    /// The configuration (where models are named) cannot be read.
    #[error("{source:#}")]
    Config { source: anyhow::Error },
    /// A wait ended by the daemon's shutdown.
    #[error("the daemon is stopping")]
    Stopping,
    /// The agent registry refused: already a wire error.
    #[error("{}", .0.message)]
    Registry(WireError),
}

/// The request text a check is about, as messages name it.
#[derive(Debug, Clone, Copy)]
pub enum TextField {
    /// `subagent.create`'s task number `index`.
    Task { index: usize },
    /// `subagent.relaunch`'s task.
    Relaunch,
    /// `subagent.steer`'s message.
    Steer,
}

impl fmt::Display for TextField {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Task { index } => write!(formatter, "task {index}: `task`"),
            Self::Relaunch => formatter.write_str("`task`"),
            Self::Steer => formatter.write_str("`message`"),
        }
    }
}

impl From<WireError> for JobError {
    fn from(error: WireError) -> Self {
        Self::Registry(error)
    }
}

/// The registry's refusals pass through as the registry maps them.
impl From<AgentError> for JobError {
    fn from(error: AgentError) -> Self {
        Self::Registry(error.into())
    }
}

impl JobError {
    fn code(&self) -> ErrorCode {
        use JobError::*;
        match self {
            NoAgent { .. } | NotFound { .. } | UnknownModel { .. } => ErrorCode::NotFound,
            EmptyText { .. }
            | TextTooLong { .. }
            | BadName { .. }
            | TooManyTasks { .. }
            | SingleTakesOne
            | RelaunchOfJob
            | SteerOfJob => ErrorCode::InvalidRequest,
            MayNotDelegate { .. }
            | Leased { .. }
            | NeverRan { .. }
            | NoRun { .. }
            | NotActive { .. }
            | ParentBusy { .. }
            | DaemonBusy { .. }
            | RecordsFull { .. } => ErrorCode::Conflict,
            NotRecorded { .. } | Writer(_) | Config { .. } | Stopping => ErrorCode::InternalError,
            Registry(wire) => wire.code.clone(),
        }
    }
}

impl From<JobError> for WireError {
    fn from(error: JobError) -> Self {
        match error {
            JobError::Registry(wire) => wire,
            other => WireError::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use shard_protocol::subagent::RunState;
    use shard_protocol::{ErrorCode, WireError};

    use super::{JobError, TextField};

    #[test]
    fn each_reason_has_its_code_and_words() {
        let wire = WireError::from(JobError::EmptyText { field: TextField::Task { index: 2 } });
        assert_eq!(wire.code, ErrorCode::InvalidRequest);
        assert_eq!(wire.message, "task 2: `task` is empty");
        let wire = WireError::from(JobError::NotActive {
            run_id: "run-1".to_owned(),
            state: RunState::Queued,
        });
        assert_eq!(wire.code, ErrorCode::Conflict);
        assert_eq!(wire.message, "run `run-1` is queued: only an active run takes a steer");
        let wire = WireError::from(JobError::NotFound {
            handle: "scout".to_owned(),
            parent: "agent-1".to_owned(),
        });
        assert_eq!(wire.code, ErrorCode::NotFound);
        assert_eq!(wire.message, "`agent-1` has no job, run or child `scout`");
        assert_eq!(wire.data, None);
    }

    #[test]
    fn a_registry_refusal_passes_through_unchanged() {
        let refused = WireError::new(ErrorCode::PermissionDenied, "no");
        assert_eq!(WireError::from(JobError::from(refused.clone())), refused);
    }
}
