//! The per-agent layer (§9): commands a client sends to one agent, the events
//! that agent streams back, and the typed `data` of each command's response.
//!
//! On a daemon connection these messages are routed by the envelope's
//! `agent_id`; on a direct connection (stdio) it is omitted (§5.2). That is why
//! none of these payloads has an `agent_id` field of its own: it lives in
//! [`crate::Envelope`].
//!
//! The types live in one module per part of §9, all re-exported here, so
//! every one of them is `shard_protocol::agent::X`:
//! - `lifecycle`: `hello`, `sync`, `status` (§9.1).
//! - `drive`: `prompt`, `steer`, modes, models, reasoning levels, `recall_steer`
//!   (§9.2) and the change events they announce (§10.2).
//! - `session`: `session_op` and its results (§9.2).
//! - `turn`: the streaming and turn events, `compaction`, `error` (§9.4).
//! - `permission` and `ui`: the questions an agent asks and their answers (§9.5).

use serde::{Deserialize, Serialize};

mod drive;
mod lifecycle;
mod permission;
mod session;
mod turn;
mod ui;

pub use self::drive::{
    AgentCommand, AgentCommands, Effective, ListModelsResult, ListModesResult,
    ListReasoningLevelsResult, ModeChanged, ModelChanged, Prompt, ReasoningLevelChange,
    RecallSteerResult, RecalledInput, SetMode, SetModeResult, SetModel, SetModelResult,
    SetReasoningLevel, Steer, StreamingBehavior,
};
pub use self::lifecycle::{Hello, LiveWindow, PendingKind, PendingRequest, Status, Sync};
pub use self::permission::{
    ChoiceIntent, Decision, DetailFormat, PermissionAnswer, PermissionChoice, PermissionDetail,
    PermissionRequest, PermissionResolved, PermissionResponse,
};
pub use self::session::{
    CompactResult, ForkOrigin, ForkResult, SessionListResult, SessionOp, SessionSummary,
};
pub use self::turn::{
    Compaction, DeltaKind, ErrorEvent, MessageComplete, MessageDelta, ToolCall, ToolResult,
    TurnEnd, TurnStart, UserMessage,
};
pub use self::ui::{NotifyType, UiKind, UiRequest, UiResolved, UiResponse, UiValue};

/// Marks a payload struct with no fields of its own. Serializes as `{}` so it
/// can sit inside an internally tagged message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}
