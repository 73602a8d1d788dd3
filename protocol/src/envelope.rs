//! The §5 envelope: `{ id?, type, agent_id?, ...payload }`, how it is decoded
//! into a typed message, and how it is encoded back.
//!
//! Decoding goes in two steps so that a bad message gets an error that names
//! its field: first the envelope fields are read from the JSON object, then
//! the payload struct for that `type` is deserialized with its path tracked
//! (`prompt: message: invalid type: integer, expected a string`). serde's own
//! tagged-enum decoding would lose that path.
//!
//! Whether `agent_id` belongs to the envelope depends on the message's
//! [`Scope`]: per-agent messages are routed by it, while on orchestrator
//! messages (`agent.attach`, `agent_spawned`, …) it is payload (§5.2, §10.2).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::error::{ErrorCode, WireError};

/// Where a message's `agent_id` lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Per-agent (§9): `agent_id` is the envelope's routing tag, present on
    /// daemon connections and omitted on direct ones.
    Routed,
    /// Orchestrator (§10): no routing tag; any `agent_id` is payload.
    Registry,
}

/// A closed set of messages that can be decoded from an envelope.
pub trait MessageSet: Sized {
    /// The scope of a message `type`, or `None` if the set has no such type.
    fn scope_of(type_name: &str) -> Option<Scope>;
    /// Whether the spec writes `id: string` (required) for this command.
    fn requires_id(type_name: &str) -> bool;
    /// Deserializes the payload of a `type`; `None` if the set has no such type.
    fn decode_payload(type_name: &str, payload: Value) -> Option<Result<Self, PayloadError>>;
    fn type_name(&self) -> &'static str;
}

/// One message with its envelope fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<M> {
    /// Correlation id (§5.1): set on commands, echoed by their `response`.
    pub id: Option<String>,
    /// Routing tag of a per-agent message on a daemon connection.
    pub agent_id: Option<String>,
    /// Shard's additive per-agent event number (docs/PROTOCOL-NOTES.md):
    /// strictly increasing for each agent, the cursor of `agent.attach`'s
    /// `after_seq`.
    pub seq: Option<u64>,
    pub message: M,
}

impl<M> Envelope<M> {
    /// A message with neither correlation id nor routing tag.
    pub fn new(message: M) -> Self {
        Self { id: None, agent_id: None, seq: None, message }
    }

    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    pub fn for_agent(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = Some(agent_id.into());
        self
    }
}

impl<M: MessageSet> Envelope<M> {
    /// Decodes one message from a JSON text (a JSONL line or a WebSocket frame).
    pub fn from_json(text: &str) -> Result<Self, DecodeError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| DecodeError::Syntax(error.to_string()))?;
        Self::from_value(value)
    }

    /// Decodes one message from an already parsed JSON value.
    pub fn from_value(value: Value) -> Result<Self, DecodeError> {
        let Value::Object(mut map) = value else {
            return Err(DecodeError::NotObject);
        };
        let id = match map.remove("id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => Some(id),
            Some(_) => {
                return Err(DecodeError::invalid(None, None, "`id` must be a string"));
            }
        };
        let type_name = match map.remove("type") {
            Some(Value::String(type_name)) => type_name,
            Some(_) => return Err(DecodeError::invalid(None, id, "`type` must be a string")),
            None => return Err(DecodeError::invalid(None, id, "missing field `type`")),
        };
        let Some(scope) = M::scope_of(&type_name) else {
            return Err(DecodeError::UnknownType { type_name, id });
        };
        if id.is_none() && M::requires_id(&type_name) {
            return Err(DecodeError::invalid(Some(type_name), None, "missing field `id`"));
        }
        let seq = match scope {
            Scope::Registry => None,
            Scope::Routed => match map.remove("seq") {
                None | Some(Value::Null) => None,
                Some(Value::Number(seq)) if seq.is_u64() => seq.as_u64(),
                Some(_) => {
                    return Err(DecodeError::invalid(
                        Some(type_name),
                        id,
                        "`seq` must be a non-negative integer",
                    ));
                }
            },
        };
        let agent_id = match scope {
            Scope::Registry => None,
            Scope::Routed => match map.remove("agent_id") {
                None | Some(Value::Null) => None,
                Some(Value::String(agent_id)) => Some(agent_id),
                Some(_) => {
                    return Err(DecodeError::invalid(
                        Some(type_name),
                        id,
                        "`agent_id` must be a string",
                    ));
                }
            },
        };
        match M::decode_payload(&type_name, Value::Object(map)) {
            None => Err(DecodeError::UnknownType { type_name, id }),
            Some(Ok(message)) => Ok(Self { id, agent_id, seq, message }),
            Some(Err(error)) => Err(DecodeError::invalid(Some(type_name), id, error.to_string())),
        }
    }
}

impl<M: Serialize> Envelope<M> {
    /// Encodes as one JSON text without a trailing newline.
    pub fn to_json(&self) -> String {
        // Serializing these types into a String cannot fail: every map key is
        // a string and no Serialize impl here returns an error, except for the
        // `Unknown` arms, which only exist on values decoded from a peer.
        serde_json::to_string(self).unwrap_or_else(|error| {
            format!(
                r#"{{"type":"error","code":"INTERNAL_ERROR","message":{}}}"#,
                Value::String(format!("could not encode message: {error}"))
            )
        })
    }
}

fn is_none(value: &&Option<String>) -> bool {
    value.is_none()
}

#[derive(Serialize)]
struct WireEnvelope<'a, M> {
    #[serde(skip_serializing_if = "is_none")]
    id: &'a Option<String>,
    #[serde(flatten)]
    message: &'a M,
    #[serde(skip_serializing_if = "is_none")]
    agent_id: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: &'a Option<u64>,
}

impl<M: Serialize> Serialize for Envelope<M> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        WireEnvelope {
            id: &self.id,
            message: &self.message,
            agent_id: &self.agent_id,
            seq: &self.seq,
        }
        .serialize(serializer)
    }
}

impl<'de, M: MessageSet> Deserialize<'de> for Envelope<M> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(value).map_err(serde::de::Error::custom)
    }
}

/// Why a frame is not a valid message. Every variant maps to INVALID_REQUEST
/// (CONTRACT.md); the `id` and `type` are kept, when they could be read, so
/// that the answer can be a correlated `response` rather than an `error` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The frame is not JSON.
    Syntax(String),
    /// The frame is JSON but not an object.
    NotObject,
    /// The `type` is not one this side of the protocol knows.
    UnknownType { type_name: String, id: Option<String> },
    /// A known `type` whose fields are wrong; `message` names the field.
    Invalid { type_name: Option<String>, id: Option<String>, message: String },
}

impl DecodeError {
    fn invalid(type_name: Option<String>, id: Option<String>, message: impl Into<String>) -> Self {
        Self::Invalid { type_name, id, message: message.into() }
    }

    pub fn id(&self) -> Option<&str> {
        match self {
            Self::UnknownType { id, .. } | Self::Invalid { id, .. } => id.as_deref(),
            Self::Syntax(_) | Self::NotObject => None,
        }
    }

    pub fn type_name(&self) -> Option<&str> {
        match self {
            Self::UnknownType { type_name, .. } => Some(type_name),
            Self::Invalid { type_name, .. } => type_name.as_deref(),
            Self::Syntax(_) | Self::NotObject => None,
        }
    }

    /// The `{code, message}` to answer with.
    pub fn to_wire_error(&self) -> WireError {
        WireError::new(ErrorCode::InvalidRequest, self.to_string())
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(error) => write!(f, "not a JSON message: {error}"),
            Self::NotObject => f.write_str("a message must be a JSON object"),
            Self::UnknownType { type_name, .. } => write!(f, "unknown message type `{type_name}`"),
            Self::Invalid { type_name: Some(type_name), message, .. } => {
                write!(f, "invalid `{type_name}`: {message}")
            }
            Self::Invalid { type_name: None, message, .. } => {
                write!(f, "invalid message: {message}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a payload did not decode, and where when that is tracked.
#[derive(Debug)]
pub struct PayloadError {
    /// The field path (`messages[3].role`); `.` for the payload itself.
    path: Option<String>,
    inner: serde_json::Error,
}

impl std::fmt::Display for PayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path.as_deref() {
            Some(path) if path != "." => write!(f, "{path}: {}", self.inner),
            _ => write!(f, "{}", self.inner),
        }
    }
}

/// Deserializes a payload with its field path tracked.
#[cfg(feature = "field-paths")]
pub(crate) fn payload<T: DeserializeOwned>(value: Value) -> Result<T, PayloadError> {
    serde_path_to_error::deserialize(crate::decode::Json(value)).map_err(|error| PayloadError {
        path: Some(error.path().to_string()),
        inner: error.into_inner(),
    })
}

/// Deserializes a payload (its field path untracked: see the feature).
#[cfg(not(feature = "field-paths"))]
pub(crate) fn payload<T: DeserializeOwned>(value: Value) -> Result<T, PayloadError> {
    crate::decode::from_value(value).map_err(|inner| PayloadError { path: None, inner })
}
