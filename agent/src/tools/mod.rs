//! The filesystem and process tools: `read`, `write`, `edit`, `bash`, `grep`,
//! `find`, `ls`. (`recall` and `ask` need the conversation and the user, so the
//! runtime runs them itself; their definitions are here with the rest.)
//!
//! A tool never fails the agent: every problem becomes an `is_error` result the
//! model can read and react to.

mod bash;
mod error;
mod fs;
mod search;
pub mod subagent;

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::types::{JsonObject, RenderDescriptor, ToolResultContent};
use tokio_util::sync::CancellationToken;

pub use bash::kill_process_group;
pub use error::ToolError;
pub use fs::hunks;

/// What a tool returns.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub content: ToolResultContent,
    pub is_error: bool,
    pub exit_code: Option<i64>,
    pub render: Option<RenderDescriptor>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: ToolResultContent::Text { text: text.into() },
            is_error: false,
            exit_code: None,
            render: None,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self {
            // What a tool failed on (a path, a command's words) may hold
            // anything; the message is shown to people as well as the model.
            content: ToolResultContent::Error { message: into_diagnostic(message.into()) },
            is_error: true,
            exit_code: None,
            render: None,
        }
    }

    pub fn with_render(mut self, render: RenderDescriptor) -> Self {
        self.render = Some(render);
        self
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Whether a tool only reads (PROTOCOL.md §9.4 `read_only`). Everything else
/// is mutating and goes through the permission gate.
pub fn is_read_only(name: &str) -> bool {
    matches!(name, "read" | "grep" | "find" | "ls" | "recall" | "ask") || subagent::reads_only(name)
}

/// The tools one agent offers its model: every built-in one, the subagent
/// tools when the daemon lets it delegate, narrowed to the allowlist its
/// manager gave (`agent.create` `tools`).
#[derive(Debug, Clone, Default)]
pub struct Toolset {
    allowed: Option<std::collections::HashSet<String>>,
    pub delegate: Option<subagent::Delegate>,
}

impl Toolset {
    /// `allowed` names tools that exist (see [`is_known`]).
    pub fn new(allowed: Option<Vec<String>>, delegate: Option<subagent::Delegate>) -> Self {
        Self { allowed: allowed.map(|names| names.into_iter().collect()), delegate }
    }

    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut all = definitions();
        if self.delegate.is_some() {
            all.extend(subagent::definitions());
        }
        all.retain(|tool| self.allowed.as_ref().is_none_or(|allowed| allowed.contains(tool.name)));
        all
    }

    pub fn offers(&self, name: &str) -> bool {
        self.definitions().iter().any(|tool| tool.name == name)
    }
}

/// Whether `name` is a tool some agent can have (for allowlists).
pub fn is_known(name: &str) -> bool {
    definitions().iter().any(|tool| tool.name == name) || subagent::is_subagent_tool(name)
}

/// The tools every model is offered, in a stable order.
pub fn definitions() -> Vec<ToolDefinition> {
    let mut tools = fs::definitions();
    tools.push(bash::definition());
    tools.extend(search::definitions());
    tools.extend(turn_definitions());
    tools
}

/// The tools the turn runs itself (`crate::turn`): they read the session
/// or ask the user.
fn turn_definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "recall",
            description: "Read the exact messages that a compaction summarized, a page at a time.",
            parameters: json!({"type": "object", "properties": {
                "index": {"type": "integer", "minimum": 1, "description": "The compaction index from the summary"},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1}
            }, "required": ["index"]}),
        },
        ToolDefinition {
            name: "ask",
            description: "Ask the user: free text (input), a choice (select), yes/no (confirm), a longer text (editor), or just tell them something (notify).",
            parameters: json!({"type": "object", "properties": {
                "question": {"type": "string"},
                "kind": {"type": "string", "enum": ["input", "select", "confirm", "editor", "notify"]},
                "options": {"type": "array", "items": {"type": "string"}},
                "prefill": {"type": "string"}
            }, "required": ["question"]}),
        },
    ]
}

/// Everything a tool runs with.
pub struct ToolContext {
    /// The agent's working directory (canonical).
    pub cwd: PathBuf,
    /// Cancelled by `abort`.
    pub cancel: CancellationToken,
    /// Variables `bash` commands never see (provider keys and the like).
    pub hidden_env: std::sync::Arc<crate::config::HiddenEnv>,
}

/// Runs one of the filesystem or process tools.
pub async fn run(name: &str, args: &JsonObject, context: &ToolContext) -> ToolOutput {
    let result = match name {
        "read" => fs::read(args, context).await,
        "write" => fs::write(args, context).await,
        "edit" => fs::edit(args, context).await,
        "bash" => return bash::run(args, context).await,
        "grep" => search::grep(args, context).await,
        "find" => search::find(args, context).await,
        "ls" => search::ls(args, context).await,
        other => Err(ToolError::Unknown(other.to_owned())),
    };
    result.unwrap_or_else(ToolOutput::from)
}

/// The render descriptor a `tool_call` event carries before the tool runs.
pub fn start_render(name: &str, args: &JsonObject) -> Option<RenderDescriptor> {
    match name {
        "bash" => Some(RenderDescriptor::Command {
            command: string_arg(args, "command").unwrap_or_default(),
            exit_code: None,
            duration_ms: None,
        }),
        _ => None,
    }
}

pub(crate) fn string_arg(args: &JsonObject, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

pub(crate) fn required_string(args: &JsonObject, key: &'static str) -> Result<String, ToolError> {
    match args.get(key) {
        Some(Value::String(value)) => Ok(value.clone()),
        Some(_) => Err(ToolError::NotString(key)),
        None => Err(ToolError::Missing(key)),
    }
}

pub(crate) fn usize_arg(args: &JsonObject, key: &'static str) -> Result<Option<usize>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|number| usize::try_from(number).ok())
            .map(Some)
            .ok_or(ToolError::NotCount(key)),
    }
}

/// `path` resolved against `cwd`, with `.` and `..` removed lexically (the
/// file may not exist yet).
pub fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Where a path really leads once the symlinks in the part of it that
/// exists are followed: what a write through it would change.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    // `exists` follows links: a dangling one is part of the rest, and is
    // reported by `Target::through_link` below.
    while !existing.exists() {
        match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return None,
        }
    }
    let mut real = existing.canonicalize().ok()?;
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    Some(real)
}

/// Whether `path` is inside `cwd` once symlinks are followed (for the part of
/// the path that exists).
pub fn is_inside(cwd: &Path, path: &Path) -> bool {
    real_path(path).is_some_and(|real| real.starts_with(cwd))
}

/// What a `write` or `edit` of `path_arg` will change, for its approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The file that will be written, symlinks and `..` resolved.
    pub real: PathBuf,
    /// It is not where the path as given seems to point: a symlink (or a
    /// `..` through one) leads elsewhere.
    pub through_link: bool,
    pub inside: bool,
}

pub fn target(cwd: &Path, path_arg: &str) -> Target {
    let lexical = resolve(cwd, path_arg);
    let dangling = std::fs::symlink_metadata(&lexical).is_ok_and(|meta| meta.is_symlink());
    let real = real_path(&lexical).unwrap_or_else(|| lexical.clone());
    let inside = real.starts_with(cwd);
    Target { through_link: real != lexical || dangling, inside, real }
}

/// The path argument of a tool call, if it has one (for the permission gate).
pub fn target_path(name: &str, args: &JsonObject) -> Option<String> {
    match name {
        "read" | "write" | "edit" => string_arg(args, "path"),
        "grep" | "find" | "ls" => Some(string_arg(args, "path").unwrap_or_else(|| ".".into())),
        _ => None,
    }
}

/// Shows a path relative to `cwd` when it is inside it.
pub(crate) fn display_path(cwd: &Path, path: &Path) -> String {
    path.strip_prefix(cwd).map_or_else(
        |_| path.display().to_string(),
        |relative| {
            let shown = relative.display().to_string();
            if shown.is_empty() { ".".to_owned() } else { shown }
        },
    )
}
