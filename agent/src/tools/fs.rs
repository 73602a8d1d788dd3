//! `read`, `write` and `edit`.

use serde_json::Value;
use shard_protocol::types::{Hunk, JsonObject, RenderDescriptor};
use similar::{ChangeTag, TextDiff};

use super::{ToolContext, ToolOutput, display_path, required_string, resolve, usize_arg};

/// Lines `read` returns when no `limit` is given.
const DEFAULT_READ_LINES: usize = 2000;
/// Bytes `read` returns at most: a page, not a whole log file, in the context.
const MAX_READ_BYTES: usize = 100 * 1024;
/// Files larger than this are not loaded for `edit` or a diff.
const MAX_EDIT_BYTES: u64 = 10 * 1024 * 1024;

pub async fn read(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, String> {
    let path_arg = required_string(args, "path")?;
    let offset = usize_arg(args, "offset")?.unwrap_or(1).max(1);
    let limit = usize_arg(args, "limit")?.unwrap_or(DEFAULT_READ_LINES).max(1);
    let path = resolve(&context.cwd, &path_arg);
    let bytes =
        tokio::fs::read(&path).await.map_err(|error| format!("cannot read {path_arg}: {error}"))?;
    if bytes.iter().take(8192).any(|&byte| byte == 0) {
        return Err(format!("{path_arg} is a binary file"));
    }
    let text = String::from_utf8_lossy(&bytes);
    let total = text.lines().count();
    let mut page = String::new();
    let mut shown = 0;
    for line in text.lines().skip(offset - 1).take(limit) {
        if page.len() + line.len() + 1 > MAX_READ_BYTES {
            break;
        }
        page.push_str(line);
        page.push('\n');
        shown += 1;
    }
    let last = offset - 1 + shown;
    let mut content = page.clone();
    if offset > 1 || last < total {
        content.push_str(&format!(
            "[lines {offset}-{last} of {total}; read with offset {} for more]",
            last + 1
        ));
    }
    let lang = path.extension().and_then(|extension| extension.to_str()).map(str::to_owned);
    Ok(ToolOutput::text(content).with_render(RenderDescriptor::Code {
        path: Some(display_path(&context.cwd, &path)),
        lang,
        text: page,
    }))
}

pub async fn write(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, String> {
    let path_arg = required_string(args, "path")?;
    let content = required_string(args, "content")?;
    let path = resolve(&context.cwd, &path_arg);
    let before = read_for_diff(&path).await?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    tokio::fs::write(&path, &content)
        .await
        .map_err(|error| format!("cannot write {path_arg}: {error}"))?;
    let shown = display_path(&context.cwd, &path);
    let verb = if before.is_some() { "Overwrote" } else { "Created" };
    Ok(ToolOutput::text(format!("{verb} {shown} ({} bytes)", content.len())).with_render(
        RenderDescriptor::Diff {
            path: shown,
            hunks: hunks(before.as_deref().unwrap_or(""), &content),
        },
    ))
}

pub async fn edit(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, String> {
    let path_arg = required_string(args, "path")?;
    let old = required_string(args, "old_string")?;
    let new = required_string(args, "new_string")?;
    let replace_all = args.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
    if old.is_empty() {
        return Err("`old_string` must not be empty".into());
    }
    if old == new {
        return Err("`old_string` and `new_string` are the same".into());
    }
    let path = resolve(&context.cwd, &path_arg);
    let Some(before) = read_for_diff(&path).await? else {
        return Err(format!("{path_arg} does not exist"));
    };
    let count = before.matches(&old).count();
    let after = match count {
        0 => return Err(format!("`old_string` was not found in {path_arg}")),
        1 => before.replacen(&old, &new, 1),
        _ if replace_all => before.replace(&old, &new),
        n => {
            return Err(format!(
                "`old_string` occurs {n} times in {path_arg}; include more context to make it unique, or set replace_all"
            ));
        }
    };
    tokio::fs::write(&path, &after)
        .await
        .map_err(|error| format!("cannot write {path_arg}: {error}"))?;
    let shown = display_path(&context.cwd, &path);
    let replaced = if replace_all { count } else { 1 };
    Ok(ToolOutput::text(format!("Edited {shown}: {replaced} replacement(s)"))
        .with_render(RenderDescriptor::Diff { path: shown, hunks: hunks(&before, &after) }))
}

async fn read_for_diff(path: &std::path::Path) -> Result<Option<String>, String> {
    match tokio::fs::metadata(path).await {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot open {}: {error}", path.display())),
        Ok(meta) if meta.is_dir() => return Err(format!("{} is a directory", path.display())),
        Ok(meta) if meta.len() > MAX_EDIT_BYTES => {
            return Err(format!("{} is too large to edit ({} bytes)", path.display(), meta.len()));
        }
        Ok(_) => {}
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    String::from_utf8(bytes).map(Some).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// Unified-diff hunks with three lines of context (docs/PROTOCOL-NOTES.md).
pub fn hunks(before: &str, after: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(before, after);
    diff.grouped_ops(3)
        .into_iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old = first.old_range().start..last.old_range().end;
            let new = first.new_range().start..last.new_range().end;
            let lines = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|change| {
                    let sign = match change.tag() {
                        ChangeTag::Equal => ' ',
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                    };
                    format!("{sign}{}", change.value().trim_end_matches(['\n', '\r']))
                })
                .collect();
            // Unified-diff convention: an empty side starts at the line before.
            let start = |range: &std::ops::Range<usize>| {
                if range.is_empty() { range.start as u64 } else { range.start as u64 + 1 }
            };
            Some(Hunk {
                old_start: start(&old),
                old_lines: old.len() as u64,
                new_start: start(&new),
                new_lines: new.len() as u64,
                lines,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::hunks;

    #[test]
    fn hunks_carry_real_line_numbers() {
        let before = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let after = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let hunks = hunks(before, after);
        assert_eq!(hunks.len(), 1);
        let hunk = &hunks[0];
        assert_eq!((hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines), (2, 7, 2, 7));
        assert_eq!(hunk.lines, vec![" b", " c", " d", "-e", "+E", " f", " g", " h"]);
    }

    #[test]
    fn a_new_file_is_one_insertion_hunk() {
        let hunks = hunks("", "x\ny\n");
        assert_eq!(hunks.len(), 1);
        assert_eq!((hunks[0].old_start, hunks[0].old_lines, hunks[0].new_start), (0, 0, 1));
        assert_eq!(hunks[0].lines, vec!["+x", "+y"]);
    }
}
