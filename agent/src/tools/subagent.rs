//! The `subagent_*` tools (docs/JOBS.md): an agent the daemon manages
//! delegates work to background subagents by speaking the §10.3 commands to
//! the daemon's unix socket as itself (`parent_agent_id`). The daemon owns
//! the jobs: these tools only ask, and a job keeps running whatever happens
//! to this turn or this process.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::types::{JsonObject, ToolResultContent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{ToolDefinition, ToolError, ToolOutput};

/// Who this agent is to the daemon, when the daemon lets it delegate.
#[derive(Debug, Clone)]
pub struct Delegate {
    pub socket: PathBuf,
    pub agent_id: String,
}

/// How long a command other than `subagent_wait` may take to be answered:
/// the daemon answers them once a record is written, in milliseconds.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest line read from the daemon (a status of many jobs fits).
const MAX_LINE: usize = 4 * 1024 * 1024;

/// The tools, by name, with the command each speaks and the arguments it
/// passes through.
const TOOLS: [(&str, &str, &[&str]); 6] = [
    ("subagent_create", "subagent.create", &["name", "task", "tasks", "strategy", "model", "mode"]),
    ("subagent_wait", "subagent.wait", &["handles", "mode", "timeout"]),
    ("subagent_steer", "subagent.steer", &["target", "message"]),
    ("subagent_relaunch", "subagent.relaunch", &["target", "task"]),
    ("subagent_status", "subagent.status", &["targets"]),
    ("subagent_stop", "subagent.stop", &["handle"]),
];

pub fn is_subagent_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _, _)| *tool == name)
}

/// Whether a subagent tool only reads (for `read_only` on `tool_call`).
pub fn reads_only(name: &str) -> bool {
    matches!(name, "subagent_wait" | "subagent_status")
}

pub fn definitions() -> Vec<ToolDefinition> {
    let handle = json!({"type": "string", "description": "A job id, run id, agent id or the alias a create answered with"});
    vec![
        ToolDefinition {
            name: "subagent_create",
            description: "Start a background job of subagents. Single: `name` and `task`. Batch: `tasks` (each `name` and `task`) with `strategy` `parallel` (all at once) or `chain` (one after another, each given the previous one's final text; `{previous}` in a task marks where). Answers at once with the job's runs; each run's completion report arrives later as a message. Children inherit your working directory, model and mode.",
            parameters: json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "A short name; it becomes the child's alias"},
                "task": {"type": "string", "description": "Everything the child needs: it sees nothing of this conversation"},
                "tasks": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "task": {"type": "string"}
                }, "required": ["name", "task"]}},
                "strategy": {"type": "string", "enum": ["single", "parallel", "chain"]},
                "model": {"type": "string"},
                "mode": {"type": "string"}
            }}),
        },
        ToolDefinition {
            name: "subagent_wait",
            description: "Wait until the given jobs or runs finish (`all`, the default) or any one does (`any`). `timeout` in seconds (0 just looks); a timeout never stops the work. Answers each run's state and final text.",
            parameters: json!({"type": "object", "properties": {
                "handles": {"type": "array", "items": handle, "minItems": 1},
                "mode": {"type": "string", "enum": ["any", "all"]},
                "timeout": {"type": "number", "minimum": 0}
            }, "required": ["handles"]}),
        },
        ToolDefinition {
            name: "subagent_steer",
            description: "Send a message into a running child's current turn. Answers `injected`, or `conflict` if its turn ended first (the message is then dropped, never queued).",
            parameters: json!({"type": "object", "properties": {
                "target": handle, "message": {"type": "string"}
            }, "required": ["target", "message"]}),
        },
        ToolDefinition {
            name: "subagent_relaunch",
            description: "Give a finished or interrupted child a new task: same agent, same conversation so far, same alias; a new job.",
            parameters: json!({"type": "object", "properties": {
                "target": handle, "task": {"type": "string"}
            }, "required": ["target", "task"]}),
        },
        ToolDefinition {
            name: "subagent_status",
            description: "The state of the given jobs, runs or children; without `targets`, your latest 50 jobs.",
            parameters: json!({"type": "object", "properties": {
                "targets": {"type": "array", "items": handle}
            }}),
        },
        ToolDefinition {
            name: "subagent_stop",
            description: "Stop a job (its queued and running runs) or one run (a chain's later steps stop with it). Finished records are kept.",
            parameters: json!({"type": "object", "properties": {
                "handle": handle
            }, "required": ["handle"]}),
        },
    ]
}

/// Runs one subagent tool: one command to the daemon, its answer as JSON.
pub async fn run(
    name: &str,
    args: &JsonObject,
    delegate: &Delegate,
    cancel: &CancellationToken,
) -> ToolOutput {
    let Some((_, command, keys)) = TOOLS.iter().find(|(tool, _, _)| *tool == name) else {
        return ToolError::Unknown(name.to_owned()).into();
    };
    let mut message = Map::new();
    message.insert("type".into(), Value::from(*command));
    message.insert("id".into(), Value::from("tool"));
    message.insert("parent_agent_id".into(), Value::from(delegate.agent_id.clone()));
    for key in *keys {
        if let Some(value) = args.get(*key) {
            message.insert((*key).to_owned(), value.clone());
        }
    }
    let waits = *command == "subagent.wait";
    let exchange = call(&delegate.socket, Value::Object(message).to_string());
    let bounded = async {
        if waits {
            // The daemon applies the wait's own timeout; abort ends it here.
            return exchange.await;
        }
        tokio::time::timeout(ANSWER_TIMEOUT, exchange).await.unwrap_or(Err(Unanswered::Late))
    };
    let answer = tokio::select! {
        answer = bounded => answer,
        () = cancel.cancelled() => Err(Unanswered::Aborted),
    };
    match answer {
        Ok(data) => ToolOutput {
            content: ToolResultContent::Json { value: data },
            is_error: false,
            exit_code: None,
            render: None,
        },
        Err(problem) => ToolOutput::error(format!("{command}: {problem}")),
    }
}

/// Why a subagent command got no `data` from the daemon. The tool result
/// names the command first (`subagent.wait: ...`).
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    #[error("cannot reach the daemon: {0}")]
    Unreachable(#[source] std::io::Error),
    /// The daemon answered with an error response: its code and message.
    #[error("{code}: {message}")]
    Refused { code: String, message: String },
    #[error("the daemon connection failed: {0}")]
    Broken(#[source] std::io::Error),
    #[error("the daemon closed the connection before answering")]
    Closed,
    #[error("the daemon did not answer in time")]
    Late,
    #[error("aborted")]
    Aborted,
}

/// One command on a new connection to the daemon; the response's `data`,
/// or why it failed.
async fn call(socket: &std::path::Path, line: String) -> Result<Value, Unanswered> {
    let mut stream =
        tokio::net::UnixStream::connect(socket).await.map_err(Unanswered::Unreachable)?;
    stream.write_all(&frame(&line)).await.map_err(Unanswered::Unreachable)?;
    let mut decoder = LineDecoder::new(MAX_LINE);
    let mut buffer = vec![0; 64 * 1024];
    loop {
        while let Some(line) = decoder.next_line() {
            let Ok(line) = line else { continue };
            let Ok(value) = serde_json::from_str::<Value>(&line) else { continue };
            if value["type"] != "response" || value["id"] != "tool" {
                continue; // the daemon's broadcasts to every connection
            }
            if value["success"] == true {
                return Ok(value.get("data").cloned().unwrap_or(Value::Null));
            }
            let error = &value["error"];
            return Err(Unanswered::Refused {
                code: error["code"].as_str().unwrap_or("ERROR").to_owned(),
                message: error["message"].as_str().unwrap_or("the daemon refused").to_owned(),
            });
        }
        let read = stream.read(&mut buffer).await.map_err(Unanswered::Broken)?;
        if read == 0 {
            return Err(Unanswered::Closed);
        }
        decoder.feed(&buffer[..read]);
    }
}

#[cfg(test)]
mod tests {
    use super::Unanswered;

    /// The words a model has always read after the command's name.
    #[test]
    fn each_reason_reads_as_before() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let shown = io().to_string();
        for (reason, said) in [
            (Unanswered::Unreachable(io()), format!("cannot reach the daemon: {shown}")),
            (
                Unanswered::Refused { code: "NOT_FOUND".into(), message: "no job `j`".into() },
                "NOT_FOUND: no job `j`".to_owned(),
            ),
            (Unanswered::Broken(io()), format!("the daemon connection failed: {shown}")),
            (Unanswered::Closed, "the daemon closed the connection before answering".into()),
            (Unanswered::Late, "the daemon did not answer in time".into()),
            (Unanswered::Aborted, "aborted".into()),
        ] {
            assert_eq!(reason.to_string(), said);
        }
    }
}
