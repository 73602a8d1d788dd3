//! The §8 error model: the registry of error codes and the `{code, message}`
//! shape that both command errors (`response.error`) and async `error` events use.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// An error code from the §8 registry. The registry is extensible, so a code
/// this build does not know is kept verbatim in [`ErrorCode::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidRequest,
    NotFound,
    NotAttached,
    PermissionDenied,
    ProtocolError,
    Timeout,
    RuntimeStartFailed,
    SessionCorrupt,
    InternalError,
    ProviderError,
    ToolError,
    Conflict,
    /// The agent cannot be contained as configured (CONTRACT.md, "Sandbox").
    SandboxUnavailable,
    /// The agent runs on a node whose link is down (docs/NODES.md).
    NodeOffline,
    Other(String),
}

impl ErrorCode {
    pub fn as_str(&self) -> &str {
        match self {
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::NotFound => "NOT_FOUND",
            Self::NotAttached => "NOT_ATTACHED",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ProtocolError => "PROTOCOL_ERROR",
            Self::Timeout => "TIMEOUT",
            Self::RuntimeStartFailed => "RUNTIME_START_FAILED",
            Self::SessionCorrupt => "SESSION_CORRUPT",
            Self::InternalError => "INTERNAL_ERROR",
            Self::ProviderError => "PROVIDER_ERROR",
            Self::ToolError => "TOOL_ERROR",
            Self::Conflict => "CONFLICT",
            Self::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            Self::NodeOffline => "NODE_OFFLINE",
            Self::Other(code) => code,
        }
    }

    pub fn parse(code: &str) -> Self {
        match code {
            "INVALID_REQUEST" => Self::InvalidRequest,
            "NOT_FOUND" => Self::NotFound,
            "NOT_ATTACHED" => Self::NotAttached,
            "PERMISSION_DENIED" => Self::PermissionDenied,
            "PROTOCOL_ERROR" => Self::ProtocolError,
            "TIMEOUT" => Self::Timeout,
            "RUNTIME_START_FAILED" => Self::RuntimeStartFailed,
            "SESSION_CORRUPT" => Self::SessionCorrupt,
            "INTERNAL_ERROR" => Self::InternalError,
            "PROVIDER_ERROR" => Self::ProviderError,
            "TOOL_ERROR" => Self::ToolError,
            "CONFLICT" => Self::Conflict,
            "SANDBOX_UNAVAILABLE" => Self::SandboxUnavailable,
            "NODE_OFFLINE" => Self::NodeOffline,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        Ok(Self::parse(&code))
    }
}

/// The wire shape of a command error: `{ code, message, data? }` (§9.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl WireError {
    /// An error whose message is made safe to show and bounded (see
    /// [`crate::diagnostic`]): it may quote a path, a model's words or a
    /// peer's input.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: crate::diagnostic::into_diagnostic(message.into()), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_made_safe_to_show() {
        let error = WireError::new(ErrorCode::ToolError, "no such file: \u{1b}[2Jx\u{202e}y\0");
        assert_eq!(error.message, "no such file: x\u{fffd}y\u{fffd}");
        let long = WireError::new(ErrorCode::ProviderError, "z".repeat(100_000));
        assert!(long.message.len() <= crate::DIAGNOSTIC_LIMIT);
        assert!(long.message.ends_with(" bytes more]"));
    }
}
