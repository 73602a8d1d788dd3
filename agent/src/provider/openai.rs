//! An OpenAI-compatible chat-completions endpoint (`POST {base}/chat/completions`
//! with `stream: true`): OpenAI itself and local servers such as Ollama,
//! llama.cpp and vLLM.

use std::collections::HashMap;

use futures_util::StreamExt;
use serde_json::{Value, json};
use shard_protocol::types::{ContentBlock, Usage};
use tokio::sync::mpsc;

use super::{
    ProviderError, ProviderEvent, ProviderRequest, api_key, emit, http_client, open_stream,
};
use crate::conversation::{summary_heading, tool_result_text};
use crate::session_log::EntryBody;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The request body for one call.
pub fn body(request: &ProviderRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for entry in &request.window {
        match &entry.body {
            EntryBody::User { text, images } if images.is_empty() => {
                messages.push(json!({"role": "user", "content": text}));
            }
            EntryBody::User { text, images } => {
                let mut parts = vec![json!({"type": "text", "text": text})];
                parts.extend(images.iter().map(|image| {
                    json!({"type": "image_url", "image_url": {
                        "url": format!("data:{};base64,{}", image.mime_type, image.data)}})
                }));
                messages.push(json!({"role": "user", "content": parts}));
            }
            EntryBody::Assistant { content, .. } => {
                let text: String = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::ToolCall { id, name, args } => Some(json!({
                            "id": id, "type": "function",
                            "function": {"name": name, "arguments": Value::Object(args.clone()).to_string()}
                        })),
                        _ => None,
                    })
                    .collect();
                let mut message = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                messages.push(message);
            }
            EntryBody::ToolResult { tool_call_id, content, exit_code, .. } => {
                messages.push(json!({
                    "role": "tool", "tool_call_id": tool_call_id,
                    "content": tool_result_text(content, *exit_code)
                }));
            }
            EntryBody::Compaction { index, summary, .. } => {
                messages.push(json!({"role": "user", "content": format!("{}\n{summary}", summary_heading(*index))}));
            }
            _ => {}
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters}})
        })
        .collect();
    let mut body = json!({
        "model": request.model.model,
        "messages": messages,
        "tools": tools,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if let Some(level) = &request.reasoning_level {
        body["reasoning_effort"] = json!(level);
    }
    if let Some(max) = request.model.max_output_tokens {
        body["max_completion_tokens"] = json!(max);
    }
    body
}

pub async fn stream(
    request: ProviderRequest,
    events: mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    let base = request.model.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/');
    let mut call = http_client().post(format!("{base}/chat/completions")).json(&body(&request));
    if let Some(key) = api_key(&request.model)? {
        call = call.bearer_auth(key);
    }
    let mut stream = open_stream(call).await?;
    let send = |event| emit(&events, event);
    // Tool calls are identified by `index` in deltas; only the first carries the id.
    let mut call_ids: HashMap<u64, String> = HashMap::new();
    let mut finished = false;
    while let Some(event) = stream.next().await {
        let event = event?;
        if event.data.trim() == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|error| ProviderError(format!("unreadable stream chunk: {error}")))?;
        if let Some(error) = chunk.get("error") {
            let message =
                error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(ProviderError(message));
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            let input = usage["prompt_tokens"].as_u64().unwrap_or(0);
            send(ProviderEvent::Usage(Usage {
                input,
                output: usage["completion_tokens"].as_u64().unwrap_or(0),
                cache_read: usage["prompt_tokens_details"]["cached_tokens"].as_u64(),
                context_tokens: Some(input),
                model: Some(request.model.id.clone()),
                ..Usage::default()
            }))
            .await?;
        }
        let Some(choice) = chunk["choices"].get(0) else { continue };
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|text| !text.is_empty()) {
                send(ProviderEvent::Thinking(text.to_owned())).await?;
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|text| !text.is_empty()) {
            send(ProviderEvent::Text(text.to_owned())).await?;
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0);
            if let Some(id) = call["id"].as_str() {
                let name = call["function"]["name"].as_str().unwrap_or_default().to_owned();
                call_ids.insert(index, id.to_owned());
                send(ProviderEvent::ToolCallStart { id: id.to_owned(), name }).await?;
            }
            if let Some(arguments) =
                call["function"]["arguments"].as_str().filter(|args| !args.is_empty())
            {
                let id = call_ids
                    .get(&index)
                    .cloned()
                    .ok_or_else(|| ProviderError("tool call arguments before the call".into()))?;
                send(ProviderEvent::ToolArgs { id, delta: arguments.to_owned() }).await?;
            }
        }
        if choice["finish_reason"].is_string() {
            finished = true;
        }
    }
    if finished {
        Ok(())
    } else {
        Err(ProviderError("the stream ended before the reply was complete".into()))
    }
}
