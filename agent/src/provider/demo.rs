//! The built-in `demo` models (CONTRACT.md): deterministic, no network, and
//! streaming like a real provider, so that everything runs on a fresh machine
//! and tests can drive every tool. `demo-think` adds a thinking block and has
//! reasoning levels.
//!
//! The model reads the latest user message and acts on its first line that
//! starts with a directive:
//!
//! | line | reply |
//! | --- | --- |
//! | `run: CMD` | calls `bash`, then `exit code N` and the first lines of output |
//! | `read: PATH` | calls `read`, then quotes the file's first line |
//! | `write: PATH` + lines | calls `write` with those lines |
//! | `edit: PATH` + old line + new line | calls `edit` |
//! | `ls: PATH`, `grep: PATTERN`, `find: GLOB` | calls that tool, then counts |
//! | `recall: INDEX` | calls `recall` |
//! | `ask: QUESTION` | calls `ask` (a `ui_request` of kind input), then repeats the answer |
//! | `ask-select: QUESTION \| A \| B`, `ask-confirm:`, `ask-editor:` (+ lines to prefill), `ask-notify:` | the other kinds of `ask` |
//! | `stream: N` | N text deltas, 10 ms apart |
//! | `burst: N` | N text deltas as fast as possible |
//! | `pace: N RATE` | N text deltas at RATE a second, each `tick-I@MICROS ` stamped with the wall clock |
//! | `fail: MESSAGE` | a few deltas, then a provider error |
//! | `spawn: NAME: TASK` | calls `subagent_create` for one child |
//! | `spawn-parallel:` / `spawn-chain:` + `NAME: TASK` lines | calls `subagent_create` with those tasks (to the first empty line) |
//! | `wait: [HANDLE…] [any\|all] [timeout=SECS]` | calls `subagent_wait` (no handle: the latest job) |
//! | `steer: TARGET: MESSAGE` | calls `subagent_steer` |
//! | `relaunch: TARGET: TASK` | calls `subagent_relaunch` |
//! | `status: [TARGET…]` | calls `subagent_status` |
//! | `stop: [HANDLE]` | calls `subagent_stop` (no handle: the latest job) |
//! | anything else | `You said: <message>`, word by word |

use std::time::Duration;

use serde_json::{Value, json};
use shard_protocol::types::{ContentBlock, ToolResultContent, Usage};
use tokio::sync::mpsc;

use super::{ProviderError, ProviderEvent, ProviderRequest};
use crate::conversation::{entry_tokens, estimate_tokens};
use crate::session_log::{Entry, EntryBody};

/// Delay between `stream:` deltas: long enough to steer or abort mid-reply.
const STREAM_INTERVAL: Duration = Duration::from_millis(10);
/// The most deltas `stream:`, `burst:` or `pace:` produce.
const MAX_DELTAS: u64 = 100_000;
/// The fastest `pace:` (deltas a second).
const MAX_RATE: u64 = 100_000;

struct Out {
    events: mpsc::Sender<ProviderEvent>,
    written: String,
}

impl Out {
    async fn send(&mut self, event: ProviderEvent) -> Result<(), ProviderError> {
        match &event {
            ProviderEvent::Text(text)
            | ProviderEvent::Thinking(text)
            | ProviderEvent::ToolArgs { delta: text, .. } => self.written.push_str(text),
            _ => {}
        }
        self.events.send(event).await.map_err(|_| ProviderError::Cancelled)
    }

    /// `count` deltas at `rate` a second, on a fixed schedule (a late tick
    /// is caught up, so the mean rate holds). Each carries the wall-clock
    /// time it was produced, in microseconds since the Unix epoch, so a
    /// client on the same machine can measure the delivery latency.
    async fn paced(&mut self, count: u64, rate: u64) -> Result<(), ProviderError> {
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        for index in 1..=count {
            ticks.tick().await;
            let micros = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_micros());
            self.send(ProviderEvent::Text(format!("tick-{index}@{micros} "))).await?;
        }
        Ok(())
    }

    async fn words(&mut self, text: &str) -> Result<(), ProviderError> {
        let mut rest = text;
        while !rest.is_empty() {
            // Each delta is one word with the whitespace after it.
            let end = rest
                .char_indices()
                .skip_while(|(_, c)| c.is_whitespace())
                .find(|(_, c)| c.is_whitespace())
                .map_or(rest.len(), |(at, _)| at);
            let end = rest[end..]
                .char_indices()
                .find(|(_, c)| !c.is_whitespace())
                .map_or(rest.len(), |(at, _)| end + at);
            self.send(ProviderEvent::Text(rest[..end].to_owned())).await?;
            rest = &rest[end..];
        }
        Ok(())
    }

    async fn tool_call(
        &mut self,
        id: String,
        name: &str,
        args: Value,
    ) -> Result<(), ProviderError> {
        self.send(ProviderEvent::ToolCallStart { id: id.clone(), name: name.to_owned() }).await?;
        // Arguments in a few pieces, as real providers stream them.
        let json = args.to_string();
        let cut = json.char_indices().map(|(at, _)| at).nth(json.chars().count() / 2).unwrap_or(0);
        for piece in [&json[..cut], &json[cut..]] {
            if !piece.is_empty() {
                self.send(ProviderEvent::ToolArgs { id: id.clone(), delta: piece.to_owned() })
                    .await?;
            }
        }
        Ok(())
    }
}

pub async fn stream(
    request: ProviderRequest,
    events: mpsc::Sender<ProviderEvent>,
) -> Result<(), ProviderError> {
    let input: u64 =
        estimate_tokens(&request.system) + request.window.iter().map(entry_tokens).sum::<u64>();
    let mut out = Out { events, written: String::new() };
    if request.model.id == "demo-think" {
        let level = request.reasoning_level.as_deref().unwrap_or("medium");
        out.send(ProviderEvent::Thinking(format!("Thinking ({level} effort) about the request.")))
            .await?;
    }
    let call_number = request
        .window
        .iter()
        .filter(|entry| matches!(entry.body, EntryBody::Assistant { .. }))
        .count();
    let reply = match last_tool_result(&request.window) {
        Some((call, result)) => {
            out.words(&after_tool(&call, result)).await?;
            Ok(())
        }
        None => {
            let prompt = last_prompt(&request.window).unwrap_or_default();
            respond(&mut out, &prompt, format!("call-{call_number}"), &request.window).await
        }
    };
    let usage = Usage {
        input,
        output: estimate_tokens(&out.written),
        context_tokens: Some(input),
        model: Some(request.model.id.clone()),
        ..Usage::default()
    };
    // Usage is reported even for a failed call: the tokens were spent.
    let _ = out.events.send(ProviderEvent::Usage(usage)).await;
    reply
}

fn last_prompt(window: &[Entry]) -> Option<String> {
    window.iter().rev().find_map(|entry| match &entry.body {
        EntryBody::User { text, .. } => Some(text.clone()),
        _ => None,
    })
}

/// The tool call and result, if the window ends with a tool result.
fn last_tool_result(window: &[Entry]) -> Option<((String, Value), &EntryBody)> {
    let last = window.last()?;
    let EntryBody::ToolResult { tool_call_id, .. } = &last.body else { return None };
    let call = window.iter().rev().find_map(|entry| match &entry.body {
        EntryBody::Assistant { content, .. } => content.iter().find_map(|block| match block {
            ContentBlock::ToolCall { id, name, args } if id == tool_call_id => {
                Some((name.clone(), Value::Object(args.clone())))
            }
            _ => None,
        }),
        _ => None,
    })?;
    Some((call, &last.body))
}

fn result_text(content: &ToolResultContent) -> String {
    match content {
        ToolResultContent::Text { text } => text.clone(),
        ToolResultContent::Json { value } => value.to_string(),
        ToolResultContent::Error { message } => message.clone(),
        ToolResultContent::Unknown => String::new(),
    }
}

fn after_tool((name, args): &(String, Value), result: &EntryBody) -> String {
    let EntryBody::ToolResult { content, is_error, exit_code, .. } = result else {
        return String::new();
    };
    let text = result_text(content);
    let first_lines = |count: usize| text.lines().take(count).collect::<Vec<_>>().join("\n");
    if let Some(code) = exit_code {
        return format!("exit code {code}\n{}", first_lines(5)).trim_end().to_owned();
    }
    if *is_error {
        return format!("The {name} call failed: {}", first_lines(3));
    }
    match name.as_str() {
        "read" => {
            let path = args["path"].as_str().unwrap_or("the file");
            format!("The first line of {path} is: {}", text.lines().next().unwrap_or(""))
        }
        "ask" => format!("You answered: {text}"),
        name if name.starts_with("subagent_") => format!("{name}: {text}"),
        "ls" | "find" | "grep" => {
            let lines: Vec<&str> = text.lines().filter(|line| !line.starts_with('[')).collect();
            format!(
                "{name} found {} results:\n{}",
                lines.len(),
                lines.iter().take(5).copied().collect::<Vec<_>>().join("\n")
            )
        }
        _ => format!("Done: {}", first_lines(3)),
    }
}

/// The job id of the latest `subagent_create` or `subagent_relaunch` this
/// conversation made, for `wait:` and `stop:` without a handle.
fn latest_job(window: &[Entry]) -> Option<String> {
    window.iter().rev().find_map(|entry| match &entry.body {
        EntryBody::ToolResult { tool_name, content: ToolResultContent::Json { value }, .. }
            if tool_name == "subagent_create" || tool_name == "subagent_relaunch" =>
        {
            value["job_id"].as_str().map(str::to_owned)
        }
        _ => None,
    })
}

/// `NAME: TASK` lines up to the first empty one.
fn task_lines(lines: &[&str]) -> Vec<Value> {
    lines
        .iter()
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(name, task)| json!({"name": name.trim(), "task": task.trim()}))
        .collect()
}

/// `wait:` arguments: handles, then an optional mode and `timeout=SECS`.
fn wait_args(argument: &str, window: &[Entry]) -> Value {
    let mut args = serde_json::Map::new();
    let mut handles = Vec::new();
    for word in argument.split_whitespace() {
        match word {
            "any" | "all" => {
                args.insert("mode".into(), json!(word));
            }
            _ => match word.strip_prefix("timeout=").and_then(|secs| secs.parse::<f64>().ok()) {
                Some(seconds) => {
                    args.insert("timeout".into(), json!(seconds));
                }
                None => handles.push(json!(word)),
            },
        }
    }
    if handles.is_empty() {
        handles.extend(latest_job(window).map(Value::from));
    }
    args.insert("handles".into(), Value::Array(handles));
    Value::Object(args)
}

/// A subagent directive's tool call, if `directive` is one.
fn subagent_call(
    directive: &str,
    argument: &str,
    following: &[&str],
    window: &[Entry],
) -> Option<(&'static str, Value)> {
    let pair = |text: &str| {
        let (first, rest) = text.split_once(':').unwrap_or((text, ""));
        (first.trim().to_owned(), rest.trim().to_owned())
    };
    let handle = || {
        if argument.is_empty() {
            latest_job(window).unwrap_or_default()
        } else {
            argument.to_owned()
        }
    };
    Some(match directive {
        "spawn" => {
            let (name, task) = pair(argument);
            ("subagent_create", json!({"name": name, "task": task}))
        }
        "spawn-parallel" | "spawn-chain" => {
            let strategy = if directive == "spawn-chain" { "chain" } else { "parallel" };
            ("subagent_create", json!({"tasks": task_lines(following), "strategy": strategy}))
        }
        "wait" => ("subagent_wait", wait_args(argument, window)),
        "steer" => {
            let (target, message) = pair(argument);
            ("subagent_steer", json!({"target": target, "message": message}))
        }
        "relaunch" => {
            let (target, task) = pair(argument);
            ("subagent_relaunch", json!({"target": target, "task": task}))
        }
        "status" if argument.is_empty() => ("subagent_status", json!({})),
        "status" => {
            let targets: Vec<&str> = argument.split_whitespace().collect();
            ("subagent_status", json!({"targets": targets}))
        }
        "stop" => ("subagent_stop", json!({"handle": handle()})),
        _ => return None,
    })
}

async fn respond(
    out: &mut Out,
    prompt: &str,
    call_id: String,
    window: &[Entry],
) -> Result<(), ProviderError> {
    let lines: Vec<&str> = prompt.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let Some((directive, rest)) = line.split_once(':') else { continue };
        let argument = rest.trim();
        let following = &lines[at + 1..];
        if let Some((tool, args)) = subagent_call(directive.trim(), argument, following, window) {
            return out.tool_call(call_id, tool, args).await;
        }
        match directive.trim() {
            "run" => return out.tool_call(call_id, "bash", json!({"command": argument})).await,
            "read" => return out.tool_call(call_id, "read", json!({"path": argument})).await,
            "write" => {
                let mut content = following.join("\n");
                content.push('\n');
                return out
                    .tool_call(call_id, "write", json!({"path": argument, "content": content}))
                    .await;
            }
            "edit" => {
                let old = following.first().copied().unwrap_or_default();
                let new = following.get(1).copied().unwrap_or_default();
                return out
                    .tool_call(
                        call_id,
                        "edit",
                        json!({"path": argument, "old_string": old, "new_string": new}),
                    )
                    .await;
            }
            "ls" => return out.tool_call(call_id, "ls", json!({"path": argument})).await,
            "grep" => return out.tool_call(call_id, "grep", json!({"pattern": argument})).await,
            "find" => return out.tool_call(call_id, "find", json!({"pattern": argument})).await,
            "recall" => {
                let index: u64 = argument.parse().unwrap_or(1);
                return out.tool_call(call_id, "recall", json!({"index": index})).await;
            }
            "ask" => {
                return out
                    .tool_call(call_id, "ask", json!({"question": argument, "kind": "input"}))
                    .await;
            }
            // `ask-select: QUESTION | A | B`, `ask-confirm:`, `ask-editor:`
            // (the lines after it prefill the answer), `ask-notify:`.
            kind @ ("ask-select" | "ask-confirm" | "ask-editor" | "ask-notify") => {
                let kind = &kind["ask-".len()..];
                let mut parts = argument.split('|').map(str::trim);
                let question = parts.next().unwrap_or_default();
                let mut args = json!({"question": question, "kind": kind});
                let options: Vec<&str> = parts.filter(|option| !option.is_empty()).collect();
                if !options.is_empty() {
                    args["options"] = json!(options);
                }
                if kind == "editor" && !following.is_empty() {
                    args["prefill"] = json!(following.join("\n"));
                }
                return out.tool_call(call_id, "ask", args).await;
            }
            "stream" | "burst" => {
                let count: u64 = argument.parse::<u64>().unwrap_or(10).min(MAX_DELTAS);
                let paced = directive.trim() == "stream";
                for index in 1..=count {
                    if paced {
                        tokio::time::sleep(STREAM_INTERVAL).await;
                    }
                    out.send(ProviderEvent::Text(format!("tick-{index} "))).await?;
                }
                return Ok(());
            }
            "pace" => {
                let mut words = argument.split_whitespace();
                let count = words.next().and_then(|word| word.parse::<u64>().ok()).unwrap_or(10);
                let rate = words.next().and_then(|word| word.parse::<u64>().ok()).unwrap_or(100);
                return out.paced(count.min(MAX_DELTAS), rate.clamp(1, MAX_RATE)).await;
            }
            "fail" => {
                out.words("Starting, then failing.").await?;
                return Err(ProviderError::Scripted(argument.to_owned()));
            }
            _ => {}
        }
    }
    out.words(&format!("You said: {prompt}")).await
}
