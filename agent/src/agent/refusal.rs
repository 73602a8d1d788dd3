//! Why the controller refuses a command, and the one mapping of each
//! refusal to the wire's `{code, message}` (PROTOCOL.md §8): a `response`
//! with `success: false`, or an `error` event when the command had no `id`
//! (CONTRACT.md).

use shard_protocol::jsonl::LineError;
use shard_protocol::{ErrorCode, WireError};

use super::{MAX_QUEUED_BYTES, MAX_QUEUED_INPUTS};
use crate::session_log::SessionError;
use crate::shared::LogFailed;
use crate::turn::CompactionFailed;

#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    // What the client sent.
    /// A line that is no message (too long, not UTF-8).
    #[error("{0}")]
    BadLine(LineError),
    /// An orchestrator command (its `type`) on a direct connection.
    #[error("`{0}` is a daemon command; this is a direct connection to one agent")]
    DaemonCommand(&'static str),
    #[error("the agent is mid-turn: set `streaming_behavior` to `steer` or `follow_up`")]
    MidTurn,

    // What the agent has not got.
    #[error("unknown mode `{0}`")]
    UnknownMode(String),
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    #[error("model `{model}` has no reasoning levels")]
    NoReasoningLevels { model: String },
    #[error("model `{model}` has no level `{level}`")]
    UnknownLevel { model: String, level: String },
    /// `fork` from an entry this session does not hold.
    #[error("no entry `{0}` in this session")]
    NoEntry(String),

    // What the agent is doing now.
    #[error("the active model is `{active}`, not `{asked}`")]
    NotActiveModel { active: String, asked: String },
    /// A strict steer for a turn that is not the one running.
    #[error("turn `{0}` is not running")]
    TurnNotRunning(String),
    /// A strict steer still queued when its turn ended.
    #[error("the turn ended before the steer was delivered")]
    SteerTooLate,
    /// `which`: the `steer` or the `follow-up` queue.
    #[error(
        "the {which} queue is full ({MAX_QUEUED_INPUTS} messages or {} MiB wait for this turn); \
         wait for the turn to take them, or abort",
        MAX_QUEUED_BYTES / (1024 * 1024)
    )]
    QueueFull { which: &'static str },
    /// `compact` or `fork` while a turn runs or waits (§9.2).
    #[error("a turn is queued or in flight; session operations run between turns")]
    SessionBusy,

    // What failed.
    #[error(transparent)]
    Log(#[from] LogFailed),
    #[error(transparent)]
    Compaction(#[from] CompactionFailed),
    #[error("fork failed: {0}")]
    Fork(#[source] SessionError),
    /// An answer that would not encode as JSON.
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

impl Refusal {
    fn code(&self) -> ErrorCode {
        match self {
            Self::BadLine(_) | Self::DaemonCommand(_) | Self::MidTurn => ErrorCode::InvalidRequest,
            Self::UnknownMode(_)
            | Self::UnknownModel(_)
            | Self::NoReasoningLevels { .. }
            | Self::UnknownLevel { .. }
            | Self::NoEntry(_) => ErrorCode::NotFound,
            Self::NotActiveModel { .. }
            | Self::TurnNotRunning(_)
            | Self::SteerTooLate
            | Self::QueueFull { .. }
            | Self::SessionBusy => ErrorCode::Conflict,
            Self::Log(_) | Self::Compaction(_) | Self::Fork(_) | Self::Encode(_) => {
                ErrorCode::InternalError
            }
        }
    }
}

impl From<Refusal> for WireError {
    fn from(refusal: Refusal) -> Self {
        WireError::new(refusal.code(), refusal.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(refusal: Refusal) -> (String, String) {
        let wire = WireError::from(refusal);
        (wire.code.as_str().to_owned(), wire.message)
    }

    /// The codes and the words clients have always been answered with.
    #[test]
    fn each_refusal_keeps_its_code_and_words() {
        let said = |code: &str, message: &str| (code.to_owned(), message.to_owned());
        let level = || Refusal::UnknownLevel { model: "demo-think".into(), level: "max".into() };
        let active = || Refusal::NotActiveModel { active: "demo".into(), asked: "x".into() };
        for (refusal, expected) in [
            (
                Refusal::BadLine(LineError::InvalidUtf8),
                said("INVALID_REQUEST", &LineError::InvalidUtf8.to_string()),
            ),
            (
                Refusal::DaemonCommand("agent.list"),
                said(
                    "INVALID_REQUEST",
                    "`agent.list` is a daemon command; this is a direct connection to one agent",
                ),
            ),
            (
                Refusal::MidTurn,
                said(
                    "INVALID_REQUEST",
                    "the agent is mid-turn: set `streaming_behavior` to `steer` or `follow_up`",
                ),
            ),
            (Refusal::UnknownMode("yolo".into()), said("NOT_FOUND", "unknown mode `yolo`")),
            (Refusal::UnknownModel("gpt".into()), said("NOT_FOUND", "unknown model `gpt`")),
            (
                Refusal::NoReasoningLevels { model: "demo".into() },
                said("NOT_FOUND", "model `demo` has no reasoning levels"),
            ),
            (level(), said("NOT_FOUND", "model `demo-think` has no level `max`")),
            (Refusal::NoEntry("e-9".into()), said("NOT_FOUND", "no entry `e-9` in this session")),
            (active(), said("CONFLICT", "the active model is `demo`, not `x`")),
            (
                Refusal::TurnNotRunning("turn-1".into()),
                said("CONFLICT", "turn `turn-1` is not running"),
            ),
            (
                Refusal::SteerTooLate,
                said("CONFLICT", "the turn ended before the steer was delivered"),
            ),
            (
                Refusal::QueueFull { which: "follow-up" },
                said(
                    "CONFLICT",
                    "the follow-up queue is full (32 messages or 32 MiB wait for this turn); \
                     wait for the turn to take them, or abort",
                ),
            ),
            (
                Refusal::SessionBusy,
                said(
                    "CONFLICT",
                    "a turn is queued or in flight; session operations run between turns",
                ),
            ),
            (
                Refusal::Compaction(CompactionFailed::EmptySummary),
                said("INTERNAL_ERROR", "compaction produced an empty summary"),
            ),
        ] {
            assert_eq!(wire(refusal), expected);
        }
    }

    #[test]
    fn what_failed_is_an_internal_error_in_the_same_words() {
        let io = || std::io::Error::from(std::io::ErrorKind::StorageFull);
        let shown = io().to_string();
        assert_eq!(
            wire(Refusal::Log(LogFailed(io()))),
            ("INTERNAL_ERROR".to_owned(), format!("session log: {shown}"))
        );
        let compaction = Refusal::Compaction(CompactionFailed::Log(LogFailed(io())));
        assert_eq!(
            wire(compaction),
            ("INTERNAL_ERROR".to_owned(), format!("session log: {shown}"))
        );
        let fork = SessionError::Io(io());
        let fork_said = format!("fork failed: {fork}");
        assert_eq!(wire(Refusal::Fork(fork)), ("INTERNAL_ERROR".to_owned(), fork_said));
        let encode = serde_json::from_str::<u8>("x").expect_err("not a number");
        let encode_said = encode.to_string();
        assert_eq!(wire(Refusal::Encode(encode)), ("INTERNAL_ERROR".to_owned(), encode_said));
    }
}
