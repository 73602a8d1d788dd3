//! Model providers. Each turns the live window into one streaming request and
//! reports what arrives as [`ProviderEvent`]s; the turn loop assembles blocks,
//! emits `message_delta`s and runs tools. Providers never see the wire protocol.

pub mod anthropic;
pub mod demo;
pub mod openai;
mod sse;

use shard_protocol::types::Usage;
use tokio::sync::mpsc;

use crate::config::{ModelConfig, ProviderKind};
use crate::session_log::Entry;
use crate::tools::ToolDefinition;

/// One piece of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    Text(String),
    Thinking(String),
    /// A new tool call block; its arguments follow as [`ToolArgs`](Self::ToolArgs).
    ToolCallStart {
        id: String,
        name: String,
    },
    ToolArgs {
        id: String,
        delta: String,
    },
    /// The signature of the thinking block just streamed (Anthropic), kept so
    /// the block can be sent back on the next call.
    ThinkingSignature(String),
    /// Token counts of this call, as far as known (may come more than once;
    /// the last one wins).
    Usage(Usage),
}

/// Everything a provider needs for one call.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    pub model: ModelConfig,
    pub reasoning_level: Option<String>,
    pub system: String,
    /// The live window, oldest first (see `conversation`).
    pub window: Vec<Entry>,
    pub tools: Vec<ToolDefinition>,
}

/// Why a model call failed. Its text is what the user sees in the turn's
/// `error` event (made safe to show and bounded there, as a provider wrote
/// some of it).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The model names an `api_key_env` that is not set.
    #[error("model `{model}` needs its API key in the environment variable {variable}")]
    MissingKey { model: String, variable: String },
    /// The request never got a response: connection, TLS, timeout.
    #[error("request failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// The provider answered with an error status; `body` is the start of
    /// what it said.
    #[error("HTTP {status}: {body}")]
    Status { status: reqwest::StatusCode, body: String },
    /// The response body broke off while streaming.
    #[error("stream interrupted: {0}")]
    Interrupted(#[source] eventsource_stream::EventStreamError<reqwest::Error>),
    /// A streamed `data` payload that is not JSON (`what`: event or chunk).
    #[error("unreadable stream {what}: {source}")]
    Unreadable { what: &'static str, source: serde_json::Error },
    /// The stream broke the provider's own protocol.
    #[error("{0}")]
    Protocol(&'static str),
    /// The stream ended with a tool call it never named (OpenAI), which
    /// cannot be run or sent back.
    #[error("the stream ended with a tool call that has no name (id {id})")]
    UnnamedToolCall { id: String },
    /// The stream ended before the reply was complete; it names what was
    /// still owed.
    #[error("the stream ended before {0}")]
    EndedEarly(&'static str),
    /// The provider reported an error in the stream, as it worded it.
    #[error("{0}")]
    Reported(String),
    /// The demo model's `fail:` directive, with its text.
    #[error("{0}")]
    Scripted(String),
    /// The turn stopped listening (aborted).
    #[error("cancelled")]
    Cancelled,
}

/// The most characters of an error body a [`ProviderError::Status`] keeps.
const BODY_EXCERPT: usize = 500;

/// Put before a refusal (OpenAI's `delta.refusal` or `content_filter`,
/// Anthropic's `stop_reason: refusal`): the wire has no field that marks a
/// reply as refused, so the reply's text says it.
pub const REFUSAL_MARKER: &str = "Refused: ";

/// Streams one model call into `events`. Returns when the reply is complete;
/// dropping the future cancels the call.
pub async fn stream(
    request: ProviderRequest,
    events: mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    match request.model.provider {
        ProviderKind::Builtin => demo::stream(request, events).await,
        ProviderKind::Openai => openai::stream(request, events).await,
        ProviderKind::Anthropic => anthropic::stream(request, events).await,
    }
}

/// The API key named by the model's `api_key_env`, read now (never stored in
/// the session or sent anywhere but the provider).
pub(crate) fn api_key(model: &ModelConfig) -> Result<Option<String>, ProviderError> {
    match &model.api_key_env {
        None => Ok(None),
        Some(variable) => crate::keys::get(variable).map(Some).ok_or_else(|| {
            ProviderError::MissingKey { model: model.id.clone(), variable: variable.clone() }
        }),
    }
}

/// A shared HTTP client: connection reuse across calls; generous timeouts
/// because a model may think for minutes before the first byte.
pub(crate) fn http_client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .read_timeout(std::time::Duration::from_secs(600))
            .build()
            .unwrap_or_default()
    })
}

/// Sends a streaming request and returns its server-sent events; an HTTP
/// error status is a [`ProviderError`] carrying the status and (bounded) body.
pub(crate) async fn open_stream(
    call: reqwest::RequestBuilder,
) -> Result<
    impl futures_util::Stream<Item = Result<eventsource_stream::Event, ProviderError>>,
    ProviderError,
> {
    let response = call.send().await.map_err(ProviderError::Transport)?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let body = crate::util::truncate_chars(body.trim(), BODY_EXCERPT);
        return Err(ProviderError::Status { status, body });
    }
    Ok(Box::pin(sse::events(response)))
}

/// Hands one event to the turn; fails when the turn stopped listening.
pub(crate) async fn emit(
    events: &mpsc::Sender<ProviderEvent>,
    event: ProviderEvent,
) -> Result<(), ProviderError> {
    events.send(event).await.map_err(|_| ProviderError::Cancelled)
}
