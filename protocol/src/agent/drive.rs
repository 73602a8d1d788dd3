//! §9.2 drive commands: `prompt` and `steer`, the mode, model and
//! reasoning-level commands with their results, `recall_steer`, and the
//! §10.2 change events those settings commands announce.

use serde::{Deserialize, Serialize};

use crate::types::{Image, ModeDescriptor, ModelDescriptor, ReasoningLevel};

/// How a `prompt` sent mid-turn is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamingBehavior {
    /// After the current turn's tool calls, before the next model call.
    Steer,
    /// Once the agent has fully stopped.
    FollowUp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<Image>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming_behavior: Option<StreamingBehavior>,
    /// Shard's additive field: a queued input `recall_steer` never takes
    /// back (the daemon's completion reports: a person taking back their
    /// own steer must not take a subagent's report instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steer {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<Image>>,
    /// Daemon to runtime only (docs/PROTOCOL-NOTES.md, strict steer): the
    /// steer goes into this turn or nowhere. It is answered once delivered
    /// at a provider boundary, or CONFLICT if that turn is not the current
    /// one or ends first; it never becomes a later prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetMode {
    pub mode: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetModel {
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetReasoningLevel {
    /// The active model's descriptor id: an optimistic-concurrency check.
    pub model: String,
    pub effort: String,
}

/// `effective` in model and reasoning changes: always the next provider call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effective {
    NextProviderCall,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetModeResult {
    pub previous_mode: String,
    pub mode: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListModesResult {
    pub modes: Vec<ModeDescriptor>,
    pub active: String,
}

/// A command the agent offers (an ACP agent's slash commands): sent as a
/// prompt that starts with `/` and its name. Shard's own addition
/// (docs/PROTOCOL-NOTES.md, "Runtimes").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCommand {
    pub name: String,
    pub description: String,
    /// What to type after the name, when it takes input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The answer to `list_commands`, and the `commands_changed` event: the
/// commands the agent offers now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCommands {
    pub commands: Vec<AgentCommand>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListModelsResult {
    pub models: Vec<ModelDescriptor>,
    pub active: ModelDescriptor,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetModelResult {
    pub previous: ModelDescriptor,
    pub active: ModelDescriptor,
    pub effective: Effective,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListReasoningLevelsResult {
    pub model: ModelDescriptor,
    pub levels: Vec<ReasoningLevel>,
    pub active: String,
    pub effective: Effective,
}

/// The result of `recall_steer` (a Shard extension, docs/PROTOCOL-NOTES.md):
/// the newest queued steer or follow-up, taken back before it was
/// delivered, or `null` when nothing was queued. `recalled` is always sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallSteerResult {
    pub recalled: Option<RecalledInput>,
}

/// A queued input handed back to the client that may edit and resend it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecalledInput {
    pub message: String,
    pub streaming_behavior: StreamingBehavior,
    /// How many images it carried (they are not sent back); omitted when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// The result of `set_reasoning_level`, and the payload of the
/// `reasoning_level_changed` event (same four fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningLevelChange {
    pub model: ModelDescriptor,
    pub previous: String,
    pub active: String,
    pub effective: Effective,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChanged {
    pub previous: ModelDescriptor,
    pub active: ModelDescriptor,
    pub effective: Effective,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeChanged {
    pub previous_mode: String,
    pub mode: String,
}
