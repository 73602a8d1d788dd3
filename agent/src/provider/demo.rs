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

/// The reply to `prompt`: what its first directive asks for (a tool call,
/// or a scripted stream), else the prompt said back.
async fn respond(
    out: &mut Out,
    prompt: &str,
    call_id: String,
    window: &[Entry],
) -> Result<(), ProviderError> {
    let lines: Vec<&str> = prompt.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let Some((directive, rest)) = line.split_once(':') else { continue };
        let (directive, argument, following) = (directive.trim(), rest.trim(), &lines[at + 1..]);
        let call = subagent_call(directive, argument, following, window)
            .or_else(|| builtin_call(directive, argument, following));
        if let Some((tool, args)) = call {
            return out.tool_call(call_id, tool, args).await;
        }
        if let Some(script) = Script::parse(directive, argument) {
            return script.play(out).await;
        }
    }
    out.words(&format!("You said: {prompt}")).await
}

/// A built-in tool's directive, as the call it makes.
fn builtin_call(
    directive: &str,
    argument: &str,
    following: &[&str],
) -> Option<(&'static str, Value)> {
    Some(match directive {
        "run" => ("bash", json!({"command": argument})),
        "read" => ("read", json!({"path": argument})),
        "write" => {
            let mut content = following.join("\n");
            content.push('\n');
            ("write", json!({"path": argument, "content": content}))
        }
        "edit" => {
            let old = following.first().copied().unwrap_or_default();
            let new = following.get(1).copied().unwrap_or_default();
            ("edit", json!({"path": argument, "old_string": old, "new_string": new}))
        }
        "ls" => ("ls", json!({"path": argument})),
        "grep" => ("grep", json!({"pattern": argument})),
        "find" => ("find", json!({"pattern": argument})),
        "recall" => {
            let index: u64 = argument.parse().unwrap_or(1);
            ("recall", json!({"index": index}))
        }
        "ask" => ("ask", json!({"question": argument, "kind": "input"})),
        kind @ ("ask-select" | "ask-confirm" | "ask-editor" | "ask-notify") => {
            ("ask", ask_args(&kind["ask-".len()..], argument, following))
        }
        _ => return None,
    })
}

/// `ask-select: QUESTION | A | B`, `ask-confirm:`, `ask-editor:` (the lines
/// after it prefill the answer), `ask-notify:`: the `ask` of that kind.
fn ask_args(kind: &str, argument: &str, following: &[&str]) -> Value {
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
    args
}

/// A directive that scripts the reply's stream instead of calling a tool.
enum Script {
    /// `stream: N` (each delta [`STREAM_INTERVAL`] after the last) and
    /// `burst: N` (no pause).
    Ticks { count: u64, interval: Option<Duration> },
    /// `pace: N RATE`.
    Paced { count: u64, rate: u64 },
    /// `fail: MESSAGE`: a few deltas, then a provider error saying it.
    Fail(String),
}

impl Script {
    fn parse(directive: &str, argument: &str) -> Option<Self> {
        Some(match directive {
            "stream" | "burst" => Self::Ticks {
                count: argument.parse::<u64>().unwrap_or(10).min(MAX_DELTAS),
                interval: (directive == "stream").then_some(STREAM_INTERVAL),
            },
            "pace" => {
                let mut words = argument.split_whitespace();
                let count = words.next().and_then(|word| word.parse::<u64>().ok()).unwrap_or(10);
                let rate = words.next().and_then(|word| word.parse::<u64>().ok()).unwrap_or(100);
                Self::Paced { count: count.min(MAX_DELTAS), rate: rate.clamp(1, MAX_RATE) }
            }
            "fail" => Self::Fail(argument.to_owned()),
            _ => return None,
        })
    }

    async fn play(self, out: &mut Out) -> Result<(), ProviderError> {
        match self {
            Self::Ticks { count, interval } => {
                for index in 1..=count {
                    if let Some(interval) = interval {
                        tokio::time::sleep(interval).await;
                    }
                    out.send(ProviderEvent::Text(format!("tick-{index} "))).await?;
                }
                Ok(())
            }
            Self::Paced { count, rate } => out.paced(count, rate).await,
            Self::Fail(message) => {
                out.words("Starting, then failing.").await?;
                Err(ProviderError::Scripted(message))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{MAX_DELTAS, STREAM_INTERVAL, Script, builtin_call};

    #[test]
    fn a_directive_becomes_its_tool_call() {
        let following = ["old line", "new line"];
        let cases = [
            ("run", "ls -l", ("bash", json!({"command": "ls -l"}))),
            ("recall", "x", ("recall", json!({"index": 1}))),
            (
                "write",
                "a.txt",
                ("write", json!({"path": "a.txt", "content": "old line\nnew line\n"})),
            ),
            (
                "edit",
                "a.txt",
                (
                    "edit",
                    json!({"path": "a.txt", "old_string": "old line", "new_string": "new line"}),
                ),
            ),
            (
                "ask-select",
                "Which? | A | | B",
                ("ask", json!({"question": "Which?", "kind": "select", "options": ["A", "B"]})),
            ),
            (
                "ask-editor",
                "Edit it",
                (
                    "ask",
                    json!({"question": "Edit it", "kind": "editor", "prefill": "old line\nnew line"}),
                ),
            ),
        ];
        for (directive, argument, call) in cases {
            assert_eq!(builtin_call(directive, argument, &following), Some(call), "{directive}");
        }
        assert_eq!(builtin_call("stream", "3", &following), None);
    }

    #[test]
    fn a_scripted_stream_is_bounded() {
        let Some(Script::Ticks { count, interval }) = Script::parse("stream", "3") else {
            panic!("stream is a script");
        };
        assert_eq!((count, interval), (3, Some(STREAM_INTERVAL)));
        let Some(Script::Ticks { count, interval }) = Script::parse("burst", "999999999") else {
            panic!("burst is a script");
        };
        assert_eq!((count, interval), (MAX_DELTAS, None));
        let Some(Script::Paced { count, rate }) = Script::parse("pace", "5 0") else {
            panic!("pace is a script");
        };
        assert_eq!((count, rate), (5, 1));
        assert!(
            matches!(Script::parse("fail", "boom"), Some(Script::Fail(message)) if message == "boom")
        );
        assert!(Script::parse("run", "ls").is_none());
    }
}
