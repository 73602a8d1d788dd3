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

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

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
            ProviderError(format!(
                "model `{}` needs its API key in the environment variable {variable}",
                model.id
            ))
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
    let response =
        call.send().await.map_err(|error| ProviderError(format!("request failed: {error}")))?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        return Err(ProviderError(format!(
            "HTTP {status}: {}",
            crate::util::truncate_chars(body.trim(), 500)
        )));
    }
    Ok(Box::pin(sse::events(response)))
}

/// Hands one event to the turn; fails when the turn stopped listening.
pub(crate) async fn emit(
    events: &mpsc::Sender<ProviderEvent>,
    event: ProviderEvent,
) -> Result<(), ProviderError> {
    events.send(event).await.map_err(|_| ProviderError("cancelled".into()))
}
