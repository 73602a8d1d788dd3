//! An OpenAI-compatible chat-completions endpoint (`POST {base}/chat/completions`
//! with `stream: true`): OpenAI itself, local servers such as Ollama,
//! llama.cpp and vLLM, and the gateways and vendors that imitate it (LiteLLM,
//! DeepSeek, Qwen, Gemini), whose streams differ in the details [`ToolCalls`]
//! describes.

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
use crate::util::new_id;

pub use crate::config::OPENAI_BASE_URL as DEFAULT_BASE_URL;

/// The request body for one call.
pub fn body(request: &ProviderRequest) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for entry in &request.window {
        match &entry.body {
            EntryBody::User { text, images, .. } if images.is_empty() => {
                messages.push(json!({"role": "user", "content": text}));
            }
            EntryBody::User { text, images, .. } => {
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
    let mut decoder = Decoder::new(request.model.id.clone());
    while let Some(event) = stream.next().await {
        let event = event?;
        if event.data.trim() == "[DONE]" {
            return decoder.end();
        }
        let chunk: Value = serde_json::from_str(&event.data)
            .map_err(|source| ProviderError::Unreadable { what: "chunk", source })?;
        send_all(&events, decoder.chunk(&chunk)?).await?;
    }
    if decoder.finished {
        decoder.end()
    } else {
        Err(ProviderError::EndedEarly("the reply was complete"))
    }
}

async fn send_all(
    events: &mpsc::Sender<ProviderEvent>,
    batch: Vec<ProviderEvent>,
) -> Result<(), ProviderError> {
    for event in batch {
        emit(events, event).await?;
    }
    Ok(())
}

/// Turns the chunks of one stream into events, keeping what the chunks
/// before told it.
struct Decoder {
    model_id: String,
    calls: ToolCalls,
    /// Whether reply text was streamed (a refusal after it gets its own
    /// paragraph).
    wrote_text: bool,
    /// Whether the refusal marker was sent.
    refusing: bool,
    /// Whether a choice finished (`finish_reason`): a stream that ends
    /// without `[DONE]` after that is complete.
    finished: bool,
}

impl Decoder {
    fn new(model_id: String) -> Self {
        Self {
            model_id,
            calls: ToolCalls::default(),
            wrote_text: false,
            refusing: false,
            finished: false,
        }
    }

    fn chunk(&mut self, chunk: &Value) -> Result<Vec<ProviderEvent>, ProviderError> {
        if let Some(error) = chunk.get("error") {
            let message =
                error["message"].as_str().map_or_else(|| error.to_string(), str::to_owned);
            return Err(ProviderError::Reported(message));
        }
        let mut events = Vec::new();
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            let input = usage["prompt_tokens"].as_u64().unwrap_or(0);
            events.push(ProviderEvent::Usage(Usage {
                input,
                output: usage["completion_tokens"].as_u64().unwrap_or(0),
                cache_read: usage["prompt_tokens_details"]["cached_tokens"].as_u64(),
                context_tokens: Some(input),
                model: Some(self.model_id.clone()),
                ..Usage::default()
            }));
        }
        let Some(choice) = chunk["choices"].get(0) else { return Ok(events) };
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = non_empty(&delta[key]) {
                events.push(ProviderEvent::Thinking(text.to_owned()));
            }
        }
        if let Some(text) = non_empty(&delta["content"]) {
            self.wrote_text = true;
            events.push(ProviderEvent::Text(text.to_owned()));
        }
        if let Some(refusal) = non_empty(&delta["refusal"]) {
            let text = if self.refusing {
                refusal.to_owned()
            } else {
                self.refusing = true;
                let gap = if self.wrote_text { "\n\n" } else { "" };
                format!("{gap}{REFUSAL_MARKER}{refusal}")
            };
            events.push(ProviderEvent::Text(text));
        }
        for part in delta["tool_calls"].as_array().into_iter().flatten() {
            events.extend(self.calls.apply(part));
        }
        if choice["finish_reason"] == "content_filter" && !self.refusing {
            // Azure and others stop a filtered reply with no refusal text:
            // without a word here it would end empty, or cut short.
            self.refusing = true;
            let gap = if self.wrote_text { "\n\n" } else { "" };
            events.push(ProviderEvent::Text(format!(
                "{gap}{REFUSAL_MARKER}the provider's content filter stopped the reply."
            )));
        }
        if choice["finish_reason"].is_string() {
            self.finished = true;
        }
        Ok(events)
    }

    /// The stream is over: fails if a call is still waiting for its name.
    fn end(&self) -> Result<(), ProviderError> {
        self.calls.end()
    }
}

/// A string field that is present and not empty.
fn non_empty(value: &Value) -> Option<&str> {
    value.as_str().filter(|text| !text.is_empty())
}

/// The tool calls of one reply, assembled from `delta.tool_calls` parts.
///
/// OpenAI sends a call's `id` and name on its first part only and keys every
/// part by `index`. Servers that imitate it differ: LiteLLM, DeepSeek, Qwen
/// and Fireworks repeat the id on every part, DashScope and Azure (through
/// LiteLLM) send `"id": ""` and `"name": ""` there, some vLLM parsers never
/// send an id, and Gemini sends no `index`. So the index decides: a part for
/// an index not seen before starts a call, any other part continues one, and
/// what a continuation says of the id or the name is ignored. Starting a call
/// on every `id` would split one call into several with scattered arguments,
/// and send the same `tool_call_id` back twice, which servers reject.
#[derive(Default)]
struct ToolCalls {
    calls: Vec<StreamedCall>,
}

struct StreamedCall {
    /// The stream's `index`; `None` when the server sends none.
    index: Option<u64>,
    /// The first non-empty id the stream gave, or one made here.
    id: String,
    /// The first non-empty name; the call is announced once it has one.
    name: String,
    arguments: String,
    announced: bool,
}

impl StreamedCall {
    /// Whether the arguments so far are a whole JSON value: an index-less
    /// part naming a tool after that is the next call (Gemini sends several
    /// complete calls that way), not a repeat of this one's name.
    fn complete(&self) -> bool {
        !self.arguments.trim().is_empty()
            && serde_json::from_str::<serde::de::IgnoredAny>(&self.arguments).is_ok()
    }
}

impl ToolCalls {
    fn apply(&mut self, part: &Value) -> Vec<ProviderEvent> {
        let index = part["index"].as_u64();
        let id = non_empty(&part["id"]);
        let name = non_empty(&part["function"]["name"]);
        let arguments = part["function"]["arguments"].as_str().unwrap_or_default();
        let at = match self.find(index, id, name) {
            Some(at) => at,
            None => {
                self.calls.push(StreamedCall {
                    index,
                    // Never empty: the result goes back under this id.
                    id: id.map_or_else(|| format!("call_{}", new_id()), str::to_owned),
                    name: String::new(),
                    arguments: String::new(),
                    announced: false,
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        if let (true, Some(name)) = (call.name.is_empty(), name) {
            name.clone_into(&mut call.name);
        }
        call.arguments.push_str(arguments);
        if call.announced {
            if arguments.is_empty() {
                return Vec::new();
            }
            return vec![ProviderEvent::ToolArgs {
                id: call.id.clone(),
                delta: arguments.to_owned(),
            }];
        }
        if call.name.is_empty() {
            return Vec::new(); // held until a part names the tool
        }
        call.announced = true;
        let mut events =
            vec![ProviderEvent::ToolCallStart { id: call.id.clone(), name: call.name.clone() }];
        if !call.arguments.is_empty() {
            events.push(ProviderEvent::ToolArgs {
                id: call.id.clone(),
                delta: call.arguments.clone(),
            });
        }
        events
    }

    /// The call a part continues, if any.
    fn find(&self, index: Option<u64>, id: Option<&str>, name: Option<&str>) -> Option<usize> {
        if let Some(index) = index {
            return self.calls.iter().position(|call| call.index == Some(index));
        }
        // No index: an id names its call; a part without one continues the
        // latest index-less call, unless it names a tool after that call's
        // arguments are complete.
        if let Some(id) = id {
            return self.calls.iter().position(|call| call.index.is_none() && call.id == id);
        }
        let last = self.calls.iter().rposition(|call| call.index.is_none())?;
        let next_call = name.is_some() && self.calls[last].complete();
        (!next_call).then_some(last)
    }

    /// A call that never got a name cannot be run or sent back.
    fn end(&self) -> Result<(), ProviderError> {
        match self.calls.iter().find(|call| !call.announced) {
            Some(call) => Err(ProviderError::UnnamedToolCall { id: call.id.clone() }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `parts`, one `delta.tool_calls` entry each.
    fn events(parts: &[Value]) -> (Vec<ProviderEvent>, ToolCalls) {
        let mut calls = ToolCalls::default();
        let events = parts.iter().flat_map(|part| calls.apply(part)).collect();
        (events, calls)
    }

    fn start(id: &str, name: &str) -> ProviderEvent {
        ProviderEvent::ToolCallStart { id: id.into(), name: name.into() }
    }

    fn args(id: &str, delta: &str) -> ProviderEvent {
        ProviderEvent::ToolArgs { id: id.into(), delta: delta.into() }
    }

    #[test]
    fn a_seen_index_continues_its_call_whatever_id_or_name_it_repeats() {
        let (events, _) = events(&[
            json!({"index": 0, "id": "call_a", "function": {"name": "bash", "arguments": "{\"a\""}}),
            json!({"index": 0, "id": "call_a", "function": {"name": "bash", "arguments": ": 1"}}),
            // Another id for a seen index is still the same call.
            json!({"index": 0, "id": "call_other", "function": {"arguments": "}"}}),
        ]);
        assert_eq!(
            events,
            [
                start("call_a", "bash"),
                args("call_a", "{\"a\""),
                args("call_a", ": 1"),
                args("call_a", "}")
            ]
        );
    }

    #[test]
    fn a_call_is_announced_once_a_part_names_it() {
        let (events, calls) = events(&[
            json!({"index": 0, "id": "call_a", "function": {"arguments": "{\"a\":"}}),
            json!({"index": 0, "function": {"name": "read", "arguments": " 1}"}}),
        ]);
        assert_eq!(events, [start("call_a", "read"), args("call_a", "{\"a\": 1}")]);
        assert!(calls.end().is_ok());
    }

    #[test]
    fn a_call_that_never_gets_a_name_fails_the_reply() {
        let (events, calls) = events(&[json!({"index": 0, "function": {"arguments": "{}"}})]);
        assert!(events.is_empty());
        let problem = calls.end().expect_err("no name");
        assert!(matches!(problem, ProviderError::UnnamedToolCall { .. }), "{problem}");
        assert!(problem.to_string().contains("no name"), "{problem}");
    }

    #[test]
    fn without_an_index_a_named_part_after_complete_arguments_is_the_next_call() {
        let (events, _) = events(&[
            json!({"id": "", "function": {"name": "read", "arguments": "{\"path\":"}}),
            // Named again before its arguments are complete: the same call.
            json!({"id": "", "function": {"name": "read", "arguments": " \"a\"}"}}),
            json!({"function": {"name": "read", "arguments": "{}"}}),
            json!({"id": "call_c", "function": {"name": "ls", "arguments": "{}"}}),
        ]);
        let ids: Vec<&str> = events
            .iter()
            .filter_map(|event| match event {
                ProviderEvent::ToolCallStart { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), 3, "{events:?}");
        assert!(ids[0].starts_with("call_") && ids[1].starts_with("call_") && ids[0] != ids[1]);
        assert_eq!(ids[2], "call_c");
        assert_eq!(events[1], args(ids[0], "{\"path\":"));
        assert_eq!(events[2], args(ids[0], " \"a\"}"));
    }

    #[test]
    fn a_refusal_after_text_gets_its_own_paragraph() {
        let mut decoder = Decoder::new("m".into());
        let mut text = String::new();
        for delta in
            [json!({"content": "Well."}), json!({"refusal": "No"}), json!({"refusal": "pe."})]
        {
            for event in decoder.chunk(&json!({"choices": [{"delta": delta}]})).expect("chunk") {
                if let ProviderEvent::Text(piece) = event {
                    text.push_str(&piece);
                }
            }
        }
        assert_eq!(text, "Well.\n\nRefused: Nope.");
    }
}
