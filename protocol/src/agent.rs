//! The per-agent layer (§9): commands a client sends to one agent, the events
//! that agent streams back, and the typed `data` of each command's response.
//!
//! On a daemon connection these messages are routed by the envelope's
//! `agent_id`; on a direct connection (stdio) it is omitted (§5.2). That is why
//! none of these payloads has an `agent_id` field of its own: it lives in
//! [`crate::Envelope`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{
    AgentStatus, Image, JsonObject, Message, ModeDescriptor, ModelDescriptor, ReasoningLevel,
    RenderDescriptor, ToolResultContent, Usage,
};

/// Marks a payload struct with no fields of its own. Serializes as `{}` so it
/// can sit inside an internally tagged message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

// ---------------------------------------------------------------------------
// §9.1 lifecycle events
// ---------------------------------------------------------------------------

/// `hello`: the first message on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: String,
    pub server_version: String,
    pub capabilities: Vec<String>,
}

/// `sync`: everything a (re)attaching client needs to render the agent now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sync {
    pub status: AgentStatus,
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_epoch: Option<u64>,
    pub live_window: LiveWindow,
    pub pending_requests: Vec<PendingRequest>,
    /// Shard's additive cursor: the `seq` of the agent's last event this
    /// snapshot includes (a client resumes after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Shard's additive flag: the client's cursor was outside retention, so
    /// this snapshot replaces everything it knew of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<bool>,
}

/// The post-compaction message window carried by `sync`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveWindow {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_index: Option<u64>,
}

/// A question still open when `sync` was taken. A delegated child's request
/// surfaced through an ancestor keeps the child's `agent_id` (§6.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(flatten)]
    pub request: PendingKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum PendingKind {
    #[serde(rename = "permission_request")]
    Permission(PermissionRequest),
    #[serde(rename = "ui_request")]
    Ui(UiRequest),
}

impl PendingKind {
    pub fn request_id(&self) -> &str {
        match self {
            Self::Permission(request) => &request.request_id,
            Self::Ui(request) => &request.request_id,
        }
    }
}

/// `status`: sent on every status transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

// ---------------------------------------------------------------------------
// §9.2 drive commands
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// §9.2 session_op
// ---------------------------------------------------------------------------

/// `session_op`: `op` with its op-specific `args`, validated as §9.2's error
/// tables require (a bad argument is INVALID_REQUEST before anything runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawSessionOp", into = "RawSessionOp")]
pub enum SessionOp {
    List,
    Compact {
        /// Overrides the configured tokens to keep for this call; positive.
        keep_recent_tokens: Option<u64>,
    },
    Fork {
        from_entry_id: String,
    },
}

impl SessionOp {
    pub fn op_name(&self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Compact { .. } => "compact",
            Self::Fork { .. } => "fork",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RawSessionOp {
    op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    args: Option<Value>,
}

impl TryFrom<RawSessionOp> for SessionOp {
    type Error = String;

    fn try_from(raw: RawSessionOp) -> Result<Self, String> {
        let args = match raw.args {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(args)) => args,
            Some(_) => return Err("`args` must be an object".into()),
        };
        match raw.op.as_str() {
            "list" => Ok(Self::List),
            "compact" => {
                let keep_recent_tokens = match args.get("keep_recent_tokens") {
                    None | Some(Value::Null) => None,
                    Some(value) => match value.as_u64() {
                        Some(tokens) if tokens > 0 => Some(tokens),
                        _ => {
                            return Err(
                                "`args.keep_recent_tokens` must be a positive integer".into()
                            );
                        }
                    },
                };
                Ok(Self::Compact { keep_recent_tokens })
            }
            "fork" => match args.get("from_entry_id") {
                Some(Value::String(id)) if !id.is_empty() => {
                    Ok(Self::Fork { from_entry_id: id.clone() })
                }
                _ => Err("`args.from_entry_id` must be a non-empty string".into()),
            },
            other => Err(format!(
                "unknown session op `{other}` in `op` (expected list, compact or fork)"
            )),
        }
    }
}

impl From<SessionOp> for RawSessionOp {
    fn from(op: SessionOp) -> Self {
        let op_name = op.op_name().to_owned();
        let args = match op {
            SessionOp::List => None,
            SessionOp::Compact { keep_recent_tokens } => Some(match keep_recent_tokens {
                Some(tokens) => serde_json::json!({ "keep_recent_tokens": tokens }),
                None => serde_json::json!({}),
            }),
            SessionOp::Fork { from_entry_id } => {
                Some(serde_json::json!({ "from_entry_id": from_entry_id }))
            }
        };
        Self { op: op_name, args }
    }
}

/// `session_op: compact` result: either a checkpoint was appended, or a
/// successful no-op with its reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawCompactResult", into = "RawCompactResult")]
pub enum CompactResult {
    Compacted(Compaction),
    Skipped { reason: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RawCompactResult {
    compacted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(flatten)]
    rest: JsonObject,
}

impl TryFrom<RawCompactResult> for CompactResult {
    type Error = String;

    fn try_from(raw: RawCompactResult) -> Result<Self, String> {
        if raw.compacted {
            serde_json::from_value(Value::Object(raw.rest))
                .map(Self::Compacted)
                .map_err(|error| error.to_string())
        } else {
            Ok(Self::Skipped { reason: raw.reason.ok_or("missing field `reason`")? })
        }
    }
}

impl From<CompactResult> for RawCompactResult {
    fn from(result: CompactResult) -> Self {
        match result {
            CompactResult::Compacted(compaction) => {
                let rest = match serde_json::to_value(compaction) {
                    Ok(Value::Object(map)) => map,
                    _ => JsonObject::new(),
                };
                Self { compacted: true, reason: None, rest }
            }
            CompactResult::Skipped { reason } => {
                Self { compacted: false, reason: Some(reason), rest: JsonObject::new() }
            }
        }
    }
}

/// `session_op: fork` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkResult {
    pub fork_id: String,
    pub session_id: String,
    pub head_entry_id: String,
}

/// `session_op: list` result (the shape is pinned in docs/PROTOCOL-NOTES.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionListResult {
    /// The session this agent is running on.
    pub active: String,
    pub sessions: Vec<SessionSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub session_id: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    /// When its newest entry was written (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
    pub entries: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_entry_id: Option<String>,
    /// The first line of its first user message, made safe to show, at most
    /// 80 characters (ending in `…` when cut); none without a user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Set on a fork: the session and entry it was split from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    pub session_id: String,
    pub entry_id: String,
}

// ---------------------------------------------------------------------------
// §9.4 streaming and turn events
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    pub turn_id: String,
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

// ---------------------------------------------------------------------------
// §9.5 permission and UI requests
// ---------------------------------------------------------------------------

/// The legacy semantic permission answers (also the `options` a request offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    /// Always-exact: repeat this exact request, never an inferred scope.
    AllowAlways,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    pub request_id: String,
    pub tool_name: String,
    pub input: Value,
    pub prompt: String,
    pub options: Vec<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<PermissionDetail>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<PermissionChoice>>,
}

impl PermissionRequest {
    /// Whether `answer` is a valid answer to this request. An unknown
    /// `choice_id` is not an answer: the request stays open (§9.5).
    pub fn accepts(&self, answer: &PermissionAnswer) -> bool {
        match answer {
            PermissionAnswer::Decision(decision) => self.options.contains(decision),
            PermissionAnswer::Choice(id) => {
                self.choices.iter().flatten().any(|choice| &choice.id == id)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DetailFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetailFormat {
    Text,
    Command,
    Path,
    Code,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionChoice")]
pub struct PermissionChoice {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<String>,
    pub intent: ChoiceIntent,
}

#[derive(Deserialize)]
struct RawPermissionChoice {
    id: String,
    label: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    accelerator: Option<String>,
    intent: ChoiceIntent,
}

impl TryFrom<RawPermissionChoice> for PermissionChoice {
    type Error = &'static str;

    fn try_from(raw: RawPermissionChoice) -> Result<Self, Self::Error> {
        if raw.id.is_empty() {
            return Err("a choice's `id` must be a non-empty string");
        }
        let RawPermissionChoice { id, label, description, accelerator, intent } = raw;
        Ok(Self { id, label, description, accelerator, intent })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceIntent {
    Allow,
    Persist,
    Deny,
    #[serde(other)]
    Unknown,
}

/// One answer to a permission request: the structured opaque choice, or the
/// legacy semantic decision. The wire form carries exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PermissionAnswer {
    Choice(String),
    Decision(Decision),
}

/// The two mutually exclusive answer fields shared by `permission_response`
/// and `permission_resolved`.
struct RawAnswer {
    choice_id: Option<String>,
    decision: Option<Decision>,
}

impl TryFrom<RawAnswer> for PermissionAnswer {
    type Error = &'static str;

    fn try_from(raw: RawAnswer) -> Result<Self, Self::Error> {
        match (raw.choice_id, raw.decision) {
            (Some(_), Some(_)) => {
                Err("carries both `choice_id` and `decision`; exactly one is allowed")
            }
            (None, None) => Err("needs exactly one of `choice_id` or `decision`"),
            (Some(id), None) if id.is_empty() => Err("`choice_id` must be a non-empty string"),
            (Some(id), None) => Ok(Self::Choice(id)),
            (None, Some(decision)) => Ok(Self::Decision(decision)),
        }
    }
}

impl From<PermissionAnswer> for RawAnswer {
    fn from(answer: PermissionAnswer) -> Self {
        match answer {
            PermissionAnswer::Choice(id) => Self { choice_id: Some(id), decision: None },
            PermissionAnswer::Decision(decision) => {
                Self { choice_id: None, decision: Some(decision) }
            }
        }
    }
}

/// `permission_response`: a client's answer (§9.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionResponse", into = "RawPermissionResponse")]
pub struct PermissionResponse {
    pub request_id: String,
    pub answer: PermissionAnswer,
    pub reason: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RawPermissionResponse {
    request_id: String,
    // Not `#[serde(flatten)]`: flattening would lose the field path in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl TryFrom<RawPermissionResponse> for PermissionResponse {
    type Error = String;

    fn try_from(raw: RawPermissionResponse) -> Result<Self, String> {
        let answer = PermissionAnswer::try_from(RawAnswer {
            choice_id: raw.choice_id,
            decision: raw.decision,
        })
        .map_err(|why| format!("permission_response {why}"))?;
        Ok(Self { request_id: raw.request_id, answer, reason: raw.reason })
    }
}

impl From<PermissionResponse> for RawPermissionResponse {
    fn from(response: PermissionResponse) -> Self {
        let RawAnswer { choice_id, decision } = response.answer.into();
        Self { request_id: response.request_id, choice_id, decision, reason: response.reason }
    }
}

/// `permission_resolved`: broadcast once a request is settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionResolved", into = "RawPermissionResolved")]
pub struct PermissionResolved {
    pub request_id: String,
    pub answer: PermissionAnswer,
    /// Who answered, e.g. `"headless"` or a client label.
    pub source: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RawPermissionResolved {
    request_id: String,
    // Not `#[serde(flatten)]`: flattening would lose the field path in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl TryFrom<RawPermissionResolved> for PermissionResolved {
    type Error = String;

    fn try_from(raw: RawPermissionResolved) -> Result<Self, String> {
        let answer = PermissionAnswer::try_from(RawAnswer {
            choice_id: raw.choice_id,
            decision: raw.decision,
        })
        .map_err(|why| format!("permission_resolved {why}"))?;
        Ok(Self { request_id: raw.request_id, answer, source: raw.source })
    }
}

impl From<PermissionResolved> for RawPermissionResolved {
    fn from(resolved: PermissionResolved) -> Self {
        let RawAnswer { choice_id, decision } = resolved.answer.into();
        Self { request_id: resolved.request_id, choice_id, decision, source: resolved.source }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UiKind {
    Select,
    Confirm,
    Input,
    Editor,
    Notify,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyType {
    Info,
    Warning,
    Error,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiRequest {
    pub request_id: String,
    pub kind: UiKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_type: Option<NotifyType>,
}

/// A `ui_response` value: text, a list (multi-select) or null (dismissed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UiValue {
    Text(String),
    List(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UiResponse {
    pub request_id: String,
    /// `null` dismisses the dialog; it is serialized, never omitted.
    pub value: Option<UiValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UiResolved {
    pub request_id: String,
    pub value: Value,
}

// ---------------------------------------------------------------------------
// §10.2 per-agent change events
// ---------------------------------------------------------------------------

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
