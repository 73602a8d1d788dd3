//! The Anthropic Messages API (`POST {base}/v1/messages` with `stream: true`).

use std::collections::HashMap;

use futures_util::StreamExt;
use serde_json::{Value, json};
use shard_protocol::types::{ContentBlock, Usage};
use tokio::sync::mpsc;

use super::{
    ProviderError, ProviderEvent, ProviderRequest, REFUSAL_MARKER, api_key, emit, http_client,
    open_stream,
};
use crate::conversation::{summary_heading, tool_result_text};
use crate::session_log::EntryBody;

pub use crate::config::ANTHROPIC_BASE_URL as DEFAULT_BASE_URL;
const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Appends content to the last message when it has the same role: the API
/// wants user and assistant turns to alternate.
fn push(messages: &mut Vec<Value>, role: &str, mut content: Vec<Value>) {
    if let Some(last) = messages.last_mut().filter(|last| last["role"] == role)
        && let Some(existing) = last["content"].as_array_mut()
    {
        existing.append(&mut content);
        return;
    }
    messages.push(json!({"role": role, "content": content}));
}

/// The request body for one call.
pub fn body(request: &ProviderRequest) -> Value {
    let mut messages = Vec::new();
    for entry in &request.window {
        match &entry.body {
            EntryBody::User { text, images, .. } => {
                let mut content = vec![json!({"type": "text", "text": text})];
                content.extend(images.iter().map(|image| {
                    json!({"type": "image", "source": {"type": "base64",
                        "media_type": image.mime_type, "data": image.data}})
                }));
                push(&mut messages, "user", content);
            }
            EntryBody::Assistant { content, thinking_signatures, .. } => {
                let mut signatures = thinking_signatures.iter();
                let blocks = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            Some(json!({"type": "text", "text": text}))
                        }
                        // Thinking goes back only with its signature (the API
                        // rejects unsigned thinking).
                        ContentBlock::Thinking { text } => signatures
                            .next()
                            .filter(|signature| !signature.is_empty())
                            .map(|signature| json!({"type": "thinking", "thinking": text, "signature": signature})),
                        ContentBlock::ToolCall { id, name, args } => Some(
                            json!({"type": "tool_use", "id": id, "name": name, "input": Value::Object(args.clone())}),
                        ),
                        _ => None,
                    })
                    .collect::<Vec<_>>();
                if !blocks.is_empty() {
                    push(&mut messages, "assistant", blocks);
                }
            }
            EntryBody::ToolResult { tool_call_id, content, is_error, exit_code, .. } => {
                push(
                    &mut messages,
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": tool_call_id,
                        "content": tool_result_text(content, *exit_code), "is_error": is_error})],
                );
            }
            EntryBody::Compaction { index, summary, .. } => push(
                &mut messages,
                "user",
                vec![
                    json!({"type": "text", "text": format!("{}\n{summary}", summary_heading(*index))}),
                ],
            ),
            _ => {}
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
        .collect();
    let mut max_tokens = request.model.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({
        "model": request.model.model,
        "system": request.system,
        "messages": messages,
        "tools": tools,
        "stream": true,
    });
    let budget = request
        .reasoning_level
        .as_deref()
        .and_then(|level| request.model.level(level))
        .and_then(|level| level.budget_tokens);
    if let Some(budget) = budget {
        // The thinking budget counts against max_tokens; leave room to answer.
        max_tokens = max_tokens.max(budget + 4096);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    body["max_tokens"] = json!(max_tokens);
    body
}

pub async fn stream(
    request: ProviderRequest,
    events: mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    let base = request.model.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/');
    let mut call = http_client()
        .post(format!("{base}/v1/messages"))
        .header("anthropic-version", API_VERSION)
        .json(&body(&request));
    if let Some(key) = api_key(&request.model)? {
        call = call.header("x-api-key", key);
    }
    let mut stream = open_stream(call).await?;
    let send = |event| emit(&events, event);
    let mut usage = Usage { model: Some(request.model.id.clone()), ..Usage::default() };
    let mut tool_ids: HashMap<u64, String> = HashMap::new();
    let mut wrote_text = false;
    while let Some(event) = stream.next().await {
        let event = event?;
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|source| ProviderError::Unreadable { what: "event", source })?;
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => take_counts(&mut usage, &data["message"]["usage"]),
            "content_block_start" => {
                let block = &data["content_block"];
                if block["type"] == "tool_use" {
                    let id = block["id"].as_str().unwrap_or_default().to_owned();
                    let name = block["name"].as_str().unwrap_or_default().to_owned();
                    tool_ids.insert(data["index"].as_u64().unwrap_or(0), id.clone());
                    send(ProviderEvent::ToolCallStart { id, name }).await?;
                }
            }
            "content_block_delta" => {
                block_delta(&data, &tool_ids, &mut wrote_text, &events).await?;
            }
            "message_delta" => {
                take_counts(&mut usage, &data["usage"]);
                if data["delta"]["stop_reason"] == "refusal" {
                    // A streaming classifier ended the reply: say so, after
                    // whatever text came before it.
                    let gap = if wrote_text { "\n\n" } else { "" };
                    let text = format!(
                        "{gap}{REFUSAL_MARKER}the model stopped the reply (stop_reason: refusal)."
                    );
                    send(ProviderEvent::Text(text)).await?;
                }
            }
            "message_stop" => {
                send(ProviderEvent::Usage(usage)).await?;
                return Ok(());
            }
            "error" => {
                let message = data["error"]["message"].as_str().unwrap_or("unknown error");
                let kind = data["error"]["type"].as_str().unwrap_or("error");
                return Err(ProviderError::Reported(format!("{kind}: {message}")));
            }
            _ => {}
        }
    }
    Err(ProviderError::EndedEarly("message_stop"))
}

/// One `content_block_delta`: text, thinking, a thinking block's signature,
/// or a piece of a tool call's input (`tool_ids`: the call each block index
/// opened).
async fn block_delta(
    data: &Value,
    tool_ids: &HashMap<u64, String>,
    wrote_text: &mut bool,
    events: &mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    let send = |event| emit(events, event);
    let delta = &data["delta"];
    let text = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
    match delta["type"].as_str().unwrap_or_default() {
        "text_delta" => {
            let text = text("text");
            *wrote_text |= !text.is_empty();
            send(ProviderEvent::Text(text)).await
        }
        "thinking_delta" => send(ProviderEvent::Thinking(text("thinking"))).await,
        "signature_delta" => send(ProviderEvent::ThinkingSignature(text("signature"))).await,
        "input_json_delta" => {
            let index = data["index"].as_u64().unwrap_or(0);
            let id = tool_ids
                .get(&index)
                .cloned()
                .ok_or(ProviderError::Protocol("tool input before its block"))?;
            let partial = text("partial_json");
            if partial.is_empty() {
                return Ok(());
            }
            send(ProviderEvent::ToolArgs { id, delta: partial }).await
        }
        _ => Ok(()),
    }
}

/// Folds a `usage` object into the call's counts: `message_start`'s, then
/// each `message_delta`'s. A delta's counts are cumulative (the input and
/// cache counts too, which change when a server tool adds input), so a count
/// present replaces the one before and an absent one is kept.
fn take_counts(usage: &mut Usage, counts: &Value) {
    if let Some(input) = counts["input_tokens"].as_u64() {
        usage.input = input;
    }
    if let Some(output) = counts["output_tokens"].as_u64() {
        usage.output = output;
    }
    if let Some(read) = counts["cache_read_input_tokens"].as_u64() {
        usage.cache_read = Some(read);
    }
    if let Some(write) = counts["cache_creation_input_tokens"].as_u64() {
        usage.cache_write = Some(write);
    }
    usage.context_tokens =
        Some(usage.input + usage.cache_read.unwrap_or(0) + usage.cache_write.unwrap_or(0));
}
