//! `read`, `write` and `edit`.

use serde_json::{Value, json};
use shard_protocol::types::{JsonObject, RenderDescriptor};

use super::{
    ToolContext, ToolDefinition, ToolError, ToolOutput, display_path, required_string, resolve,
    usize_arg,
};

/// Lines `read` returns when no `limit` is given.
const DEFAULT_READ_LINES: usize = 2000;
/// Bytes `read` returns at most: a page, not a whole log file, in the context.
const MAX_READ_BYTES: usize = 100 * 1024;
/// Files larger than this are not loaded for `edit` or a diff.
const MAX_EDIT_BYTES: u64 = 10 * 1024 * 1024;

/// Bytes `read` looks through to count a file's lines after its page: a
/// larger file's total is given as "more than".
const MAX_COUNT_BYTES: u64 = 64 * 1024 * 1024;

/// `read`, `write` and `edit`, as the model is offered them.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "read",
            description: "Read a text file. Returns up to `limit` lines from line `offset` (1-based).",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "File path, relative to the working directory or absolute"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1}
            }, "required": ["path"]}),
        },
        ToolDefinition {
            name: "write",
            description: "Create or overwrite a file with the given content.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"}
            }, "required": ["path", "content"]}),
        },
        ToolDefinition {
            name: "edit",
            description: "Replace an exact string in a file. `old_string` must occur exactly once unless `replace_all` is true.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean"}
            }, "required": ["path", "old_string", "new_string"]}),
        },
    ]
}

pub async fn read(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path_arg = required_string(args, "path")?;
    let offset = usize_arg(args, "offset")?.unwrap_or(1).max(1);
    let limit = usize_arg(args, "limit")?.unwrap_or(DEFAULT_READ_LINES).max(1);
    let path = resolve(&context.cwd, &path_arg);
    let cannot_read = |source| ToolError::Read { path: path_arg.clone().into(), source };
    let file = open_regular(&path).await.map_err(cannot_read)?;
    let page = read_page(file, offset, limit).await.map_err(cannot_read)?;
    if page.binary {
        return Err(ToolError::Binary { path: path_arg.into() });
    }
    let last = offset - 1 + page.shown;
    let mut content = page.text.clone();
    if offset > 1 || last < page.total || page.more {
        let total =
            if page.more { format!("more than {}", page.total) } else { page.total.to_string() };
        content.push_str(&format!(
            "[lines {offset}-{last} of {total}; read with offset {} for more]",
            last + 1
        ));
    }
    let lang = path.extension().and_then(|extension| extension.to_str()).map(str::to_owned);
    Ok(ToolOutput::text(content).with_render(RenderDescriptor::Code {
        path: Some(display_path(&context.cwd, &path)),
        lang,
        text: page.text,
    }))
}

/// Opens `path` for reading only if it is a regular file: a FIFO or a
/// device would block the tool or never end. Opened without blocking, and
/// checked again once open, so a file swapped in between changes nothing.
async fn open_regular(path: &std::path::Path) -> std::io::Result<tokio::fs::File> {
    let not_regular = || std::io::Error::other("not a regular file");
    if !tokio::fs::metadata(path).await?.is_file() {
        return Err(not_regular());
    }
    let file = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .await?;
    if !file.metadata().await?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// One page of a file's lines, read as a stream: the page is kept, the
/// rest only counted (up to [`MAX_COUNT_BYTES`]), so a huge file costs a
/// page of memory.
struct Page {
    text: String,
    shown: usize,
    total: usize,
    /// Counting stopped before the end: `total` is a lower bound.
    more: bool,
    binary: bool,
}

async fn read_page(file: tokio::fs::File, offset: usize, limit: usize) -> std::io::Result<Page> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    // Lines are read at most this long at a time; a longer one never fits
    // a page, and its pieces are only counted.
    const PIECE: u64 = MAX_READ_BYTES as u64 + 1;
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, file);
    let mut page = Page { text: String::new(), shown: 0, total: 0, more: false, binary: false };
    let mut line = Vec::new();
    let mut read: u64 = 0;
    let mut full = false;
    let mut inside_long_line = false;
    loop {
        line.clear();
        let length = (&mut reader).take(PIECE).read_until(b'\n', &mut line).await?;
        if length == 0 {
            break;
        }
        if read < 8192 && line.contains(&0) {
            page.binary = true;
            return Ok(page);
        }
        read += length as u64;
        let piece = !line.ends_with(b"\n") && length as u64 == PIECE;
        if !inside_long_line {
            page.total += 1;
            let wanted = page.total >= offset && page.shown < limit;
            if wanted && !full {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                if piece || page.text.len() + text.len() + 1 > MAX_READ_BYTES {
                    full = true;
                } else {
                    page.text.push_str(text);
                    page.text.push('\n');
                    page.shown += 1;
                }
            }
            full |= page.shown >= limit;
        }
        inside_long_line = piece;
        if full && read > MAX_COUNT_BYTES {
            page.more = true;
            break;
        }
    }
    Ok(page)
}

pub async fn write(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path_arg = required_string(args, "path")?;
    let content = required_string(args, "content")?;
    let path = resolve(&context.cwd, &path_arg);
    let before = read_for_diff(&path).await?;
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| ToolError::Create { path: parent.to_owned(), source })?;
    }
    tokio::fs::write(&path, &content)
        .await
        .map_err(|source| ToolError::Write { path: path_arg.into(), source })?;
    let shown = display_path(&context.cwd, &path);
    let verb = if before.is_some() { "Overwrote" } else { "Created" };
    Ok(ToolOutput::text(format!("{verb} {shown} ({} bytes)", content.len())).with_render(
        RenderDescriptor::Diff {
            path: shown,
            hunks: hunks(before.as_deref().unwrap_or(""), &content),
        },
    ))
}

pub async fn edit(args: &JsonObject, context: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path_arg = required_string(args, "path")?;
    let old = required_string(args, "old_string")?;
    let new = required_string(args, "new_string")?;
    let replace_all = args.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
    if old.is_empty() {
        return Err(ToolError::EmptyOld);
    }
    if old == new {
        return Err(ToolError::NoChange);
    }
    let path = resolve(&context.cwd, &path_arg);
    let Some(before) = read_for_diff(&path).await? else {
        return Err(ToolError::Absent { path: path_arg.into() });
    };
    let count = before.matches(&old).count();
    let after = match count {
        0 => return Err(ToolError::NotFoundIn { path: path_arg.into() }),
        1 => before.replacen(&old, &new, 1),
        _ if replace_all => before.replace(&old, &new),
        count => return Err(ToolError::Ambiguous { path: path_arg.into(), count }),
    };
    tokio::fs::write(&path, &after)
        .await
        .map_err(|source| ToolError::Write { path: path_arg.into(), source })?;
    let shown = display_path(&context.cwd, &path);
    let replaced = if replace_all { count } else { 1 };
    Ok(ToolOutput::text(format!("Edited {shown}: {replaced} replacement(s)"))
        .with_render(RenderDescriptor::Diff { path: shown, hunks: hunks(&before, &after) }))
}

/// What `write` or `edit` is about to replace: `None` when the file does
/// not exist yet.
async fn read_for_diff(path: &std::path::Path) -> Result<Option<String>, ToolError> {
    match tokio::fs::metadata(path).await {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ToolError::Open { path: path.to_owned(), source }),
        Ok(meta) if meta.is_dir() => return Err(ToolError::Directory { path: path.to_owned() }),
        Ok(meta) if meta.len() > MAX_EDIT_BYTES => {
            return Err(ToolError::TooLarge { path: path.to_owned(), bytes: meta.len() });
        }
        Ok(_) => {}
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|source| ToolError::Read { path: path.to_owned(), source })?;
    String::from_utf8(bytes).map(Some).map_err(|_| ToolError::NotText { path: path.to_owned() })
}

pub use shard_platform::diff::hunks;

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
