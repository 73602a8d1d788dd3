//! `grep`, `find` and `ls`: read-only views of the tree. The walkers honor
//! `.gitignore` and skip hidden files, as a person searching a repository
//! expects, and every listing is capped.

use globset::GlobBuilder;
use ignore::WalkBuilder;
use regex::RegexBuilder;
use serde_json::{Value, json};
use shard_protocol::types::{JsonObject, PathEntry, PathKind, RenderDescriptor};

use super::{
    ToolContext, ToolDefinition, ToolError, ToolOutput, display_path, required_string, resolve,
    string_arg, usize_arg,
};

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Files larger than this are not searched (generated or binary, usually).
const MAX_GREP_FILE_BYTES: u64 = 2 * 1024 * 1024;

fn limit(args: &JsonObject) -> Result<usize, ToolError> {
    Ok(usize_arg(args, "limit")?.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT))
}

/// `grep`, `find` and `ls`, as the model is offered them.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "grep",
            description: "Search file contents with a regular expression. Honors .gitignore.",
            parameters: json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "glob": {"type": "string", "description": "Only files matching this glob"},
                "ignore_case": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1}
            }, "required": ["pattern"]}),
        },
        ToolDefinition {
            name: "find",
            description: "Find files whose path matches a glob (e.g. `**/*.rs`). Honors .gitignore.",
            parameters: json!({"type": "object", "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1}
            }, "required": ["pattern"]}),
        },
        ToolDefinition {
            name: "ls",
            description: "List a directory.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}
            }}),
        },
    ]
}

pub async fn grep(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let pattern = required_string(args, "pattern")?;
    let ignore_case = args.get("ignore_case").and_then(Value::as_bool).unwrap_or(false);
    let regex = RegexBuilder::new(&pattern)
        .case_insensitive(ignore_case)
        .size_limit(1 << 20)
        .build()
        .map_err(ToolError::Pattern)?;
    let glob = match string_arg(args, "glob") {
        Some(glob) => Some(
            GlobBuilder::new(&glob)
                .literal_separator(false)
                .build()
                .map_err(ToolError::Glob)?
                .compile_matcher(),
        ),
        None => None,
    };
    let limit = limit(args)?;
    let root = resolve(&context.cwd, &string_arg(args, "path").unwrap_or_else(|| ".".into()));
    let cwd = context.cwd.clone();
    let cancel = context.cancel.clone();
    tokio::task::spawn_blocking(move || {
        let mut matches = Vec::new();
        let mut truncated = false;
        'walk: for entry in WalkBuilder::new(&root).build().flatten() {
            if cancel.is_cancelled() {
                return Err(ToolError::Aborted);
            }
            let path = entry.path();
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let shown = display_path(&cwd, path);
            if glob
                .as_ref()
                .is_some_and(|glob| !glob.is_match(&shown) && !glob.is_match(entry.file_name()))
            {
                continue;
            }
            if entry.metadata().map_or(true, |meta| meta.len() > MAX_GREP_FILE_BYTES) {
                continue;
            }
            let Ok(bytes) = std::fs::read(path) else { continue };
            if bytes.iter().take(8192).any(|&byte| byte == 0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (number, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if matches.len() == limit {
                        truncated = true;
                        break 'walk;
                    }
                    matches.push(Match {
                        path: shown.clone(),
                        line: number + 1,
                        content: line.trim_end().to_owned(),
                    });
                }
            }
        }
        Ok(grep_output(matches, truncated, limit))
    })
    .await
    .map_err(|source| ToolError::Worker { tool: "grep", source })?
}

/// One line `grep` found.
struct Match {
    /// As shown: relative to the working directory when inside it.
    path: String,
    /// 1-based.
    line: usize,
    content: String,
}

/// `path:line:content` lines for the model, and the same matches as a path
/// list for a person.
fn grep_output(matches: Vec<Match>, truncated: bool, limit: usize) -> ToolOutput {
    let mut text: String = matches
        .iter()
        .map(|Match { path, line, content }| format!("{path}:{line}:{content}\n"))
        .collect();
    if matches.is_empty() {
        text = "no matches\n".into();
    }
    if truncated {
        text.push_str(&format!("[stopped at {limit} matches]\n"));
    }
    let paths = matches
        .into_iter()
        .map(|Match { path, line, content }| PathEntry {
            path,
            kind: PathKind::File,
            hint: Some(format!("{line}: {}", crate::util::truncate_chars(&content, 200))),
        })
        .collect();
    ToolOutput::text(text).with_render(RenderDescriptor::PathList { paths })
}

pub async fn find(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let pattern = required_string(args, "pattern")?;
    let matcher = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .map_err(ToolError::Glob)?
        .compile_matcher();
    let limit = limit(args)?;
    let root = resolve(&context.cwd, &string_arg(args, "path").unwrap_or_else(|| ".".into()));
    let cwd = context.cwd.clone();
    tokio::task::spawn_blocking(move || {
        let mut found = Vec::new();
        let mut truncated = false;
        for entry in WalkBuilder::new(&root).build().flatten() {
            if entry.depth() == 0 {
                continue;
            }
            let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
            // A pattern without a slash matches the file name at any depth.
            let hit = matcher.is_match(relative)
                || (!pattern.contains('/') && matcher.is_match(entry.file_name()));
            if !hit {
                continue;
            }
            if found.len() == limit {
                truncated = true;
                break;
            }
            let kind = if entry.file_type().is_some_and(|kind| kind.is_dir()) {
                PathKind::Dir
            } else {
                PathKind::File
            };
            found.push(PathEntry { path: display_path(&cwd, entry.path()), kind, hint: None });
        }
        let mut text: String = found.iter().map(|entry| format!("{}\n", entry.path)).collect();
        if found.is_empty() {
            text = "no files found\n".into();
        }
        if truncated {
            text.push_str(&format!("[stopped at {limit} results]\n"));
        }
        Ok(ToolOutput::text(text).with_render(RenderDescriptor::PathList { paths: found }))
    })
    .await
    .map_err(|source| ToolError::Worker { tool: "find", source })?
}

pub async fn ls(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path_arg = string_arg(args, "path").unwrap_or_else(|| ".".into());
    let dir = resolve(&context.cwd, &path_arg);
    let cannot_list = |source| ToolError::List { path: path_arg.clone().into(), source };
    let mut reader = tokio::fs::read_dir(&dir).await.map_err(cannot_list)?;
    let mut entries = Vec::new();
    while let Some(entry) = reader.next_entry().await.map_err(cannot_list)? {
        let is_dir = entry.file_type().await.is_ok_and(|kind| kind.is_dir());
        entries.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        if entries.len() > MAX_LIMIT {
            break;
        }
    }
    // Directories first, then files, each alphabetically.
    entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let truncated = entries.len() > MAX_LIMIT;
    entries.truncate(MAX_LIMIT);
    let mut text: String = entries
        .iter()
        .map(|(name, is_dir)| if *is_dir { format!("{name}/\n") } else { format!("{name}\n") })
        .collect();
    if entries.is_empty() {
        text = "(empty directory)\n".into();
    }
    if truncated {
        text.push_str(&format!("[stopped at {MAX_LIMIT} entries]\n"));
    }
    let paths = entries
        .into_iter()
        .map(|(name, is_dir)| PathEntry {
            path: name,
            kind: if is_dir { PathKind::Dir } else { PathKind::File },
            hint: None,
        })
        .collect();
    Ok(ToolOutput::text(text).with_render(RenderDescriptor::PathList { paths }))
}
