//! §9.2 `session_op`: `list`, `compact` and `fork`, validated while
//! decoding, and the typed `data` of each op's result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::turn::Compaction;
use crate::types::JsonObject;

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
    /// The same of its newest user message: where the session has got to,
    /// which tells a fork from its source when both start alike. Omitted
    /// when the session has at most one user message (it is the title).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<String>,
    /// Set on a fork: the session and entry it was split from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkOrigin>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    pub session_id: String,
    pub entry_id: String,
}
