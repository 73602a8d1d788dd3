//! What an agent that speaks ACP refuses, or could not do, and the one
//! mapping of each to the wire's `{code, message}`. The bridge and its
//! translator build their refusals from these; the registry's one refusal
//! of an ACP agent (a model or mode at creation) reaches clients through
//! `AgentError::Acp`.

use shard_protocol::{ErrorCode, WireError};

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("`{0}` is not available for this agent (it speaks ACP)")]
    NotForAcp(&'static str),
    #[error("the agent has no session open yet")]
    NoSession,
    #[error(
        "the agent is on a turn: send this as a follow-up (`streaming_behavior: follow_up`), \
         or wait for the turn's end"
    )]
    TurnRunning,
    #[error("the agent refused to answer")]
    Refused,
    #[error("the agent's turn failed: {0}")]
    PromptFailed(String),
    #[error(
        "this agent speaks ACP, which has no way into a running turn: send it as a follow-up \
         (`streaming_behavior: follow_up`) or abort the turn"
    )]
    Steer,
    #[error("the follow-up could not be recorded, so it was not accepted")]
    QueueUnrecorded,
    #[error("this agent takes no images in a prompt (it does not offer them in ACP); send text")]
    NoImages,
    #[error("too many follow-ups are waiting for this agent's turn to end")]
    QueueFull,
    #[error(
        "an agent that is not Shard's own takes no `model` or `mode` at creation: choose them \
         from its own catalogs once it runs (`set_model`, `set_mode`)"
    )]
    SettingAtCreate,
    #[error("this agent offers no models to choose from")]
    NoModels,
    /// What kind of choice (`mode`, `model`), and the one asked for.
    #[error("this agent offers no {0} `{1}`")]
    Unknown(&'static str, String),
    #[error("the agent refused the change: {0}")]
    RefusedSetting(String),
    #[error(
        "this agent could not take up its earlier session ({0}): it starts a new one, and \
         does not remember what Shard's transcript shows before this point"
    )]
    StartedAfresh(String),
    #[error("the agent's session could not be set back to {0}: it runs as the agent chose")]
    NotRestored(String),
}

impl AcpError {
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            Self::NoSession
            | Self::TurnRunning
            | Self::Steer
            | Self::QueueFull
            | Self::RefusedSetting(_)
            | Self::NotRestored(_) => ErrorCode::Conflict,
            Self::NotForAcp(_) | Self::NoModels | Self::Unknown(..) | Self::StartedAfresh(_) => {
                ErrorCode::NotFound
            }
            Self::Refused | Self::PromptFailed(_) => ErrorCode::ProviderError,
            Self::QueueUnrecorded => ErrorCode::InternalError,
            Self::SettingAtCreate | Self::NoImages => ErrorCode::InvalidRequest,
        }
    }
}

impl From<AcpError> for WireError {
    fn from(error: AcpError) -> Self {
        WireError::new(error.code(), error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_keeps_its_code_and_words() {
        let cases = [
            (AcpError::NotForAcp("steer"), ErrorCode::NotFound),
            (AcpError::NoSession, ErrorCode::Conflict),
            (AcpError::TurnRunning, ErrorCode::Conflict),
            (AcpError::Refused, ErrorCode::ProviderError),
            (AcpError::PromptFailed("no".into()), ErrorCode::ProviderError),
            (AcpError::Steer, ErrorCode::Conflict),
            (AcpError::QueueUnrecorded, ErrorCode::InternalError),
            (AcpError::NoImages, ErrorCode::InvalidRequest),
            (AcpError::QueueFull, ErrorCode::Conflict),
            (AcpError::SettingAtCreate, ErrorCode::InvalidRequest),
            (AcpError::NoModels, ErrorCode::NotFound),
            (AcpError::Unknown("mode", "x".into()), ErrorCode::NotFound),
            (AcpError::RefusedSetting("no".into()), ErrorCode::Conflict),
            (AcpError::StartedAfresh("gone".into()), ErrorCode::NotFound),
            (AcpError::NotRestored("mode `plan`".into()), ErrorCode::Conflict),
        ];
        for (error, code) in cases {
            let message = error.to_string();
            let wire = WireError::from(error);
            assert_eq!((wire.code, wire.message), (code, message));
        }
        let unknown = WireError::from(AcpError::Unknown("model", "big".into()));
        assert_eq!(unknown.message, "this agent offers no model `big`");
    }
}
