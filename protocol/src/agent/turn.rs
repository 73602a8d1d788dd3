//! §9.4 streaming and turn events: `turn_start`, the deltas of a message
//! and its completion, tool calls and their results, `turn_end`, the
//! `compaction` event and the async `error` event.

use serde::{Deserialize, Serialize};

use crate::types::{JsonObject, Message, RenderDescriptor, ToolResultContent, Usage};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    pub turn_id: String,
}

/// Shard extension (docs/PROTOCOL-NOTES.md, "user_message"): a user message
/// has landed in the session log, as a turn opened with it or as a steer
/// delivered into a turn. Every attached client learns the prompt and its
/// entry (to fork there) without waiting for a `sync`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserMessage {
    pub entry_id: String,
    pub text: String,
    /// The turn it opened or was delivered into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    Text,
    ToolCall,
    Thinking,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDelta {
    pub message_id: String,
    pub block_index: u32,
    pub kind: DeltaKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_delta: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_delta: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageComplete {
    pub message_id: String,
    pub message: Message,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub name: String,
    pub args: JsonObject,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<RenderDescriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_call_id: String,
    pub content: ToolResultContent,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<RenderDescriptor>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub turn_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Shard extension (docs/PROTOCOL-NOTES.md, "turn_end"): the turn was
    /// cut short (`abort`, or its process told to stop), so its last reply
    /// may stop mid-sentence.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
    /// Shard extension: the steers and follow-ups queued behind the turn
    /// that an `abort` dropped unsent, oldest first, as their text (an ACP
    /// runtime's follow-ups too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
}

/// The `compaction` event, and the data of a successful `session_op: compact`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    pub index: u64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub first_kept_entry_id: String,
    /// `[first_id, last_id]` of the summarized span.
    pub message_range: (String, String),
}

/// The async `error` event (§8, §9.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub code: crate::ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fatal: Option<bool>,
}
