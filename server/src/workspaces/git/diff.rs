//! A workspace's diff against its target, read from git's unified diff
//! within bounds and parsed to files and hunks.

use std::path::Path;

use super::{Checkout, GitError, Place, git, run};

/// The most files and diff lines a workspace diff carries.
const MAX_DIFF_FILES: usize = 200;
const MAX_DIFF_LINES: usize = 20_000;
/// The most bytes of diff text read from git, all files together.
const MAX_DIFF_BYTES: usize = 4 * 1024 * 1024;
/// A new file larger than this is listed, not read.
const MAX_NEW_FILE: u64 = 1024 * 1024;

/// The options every diff here runs with: plain unified text, no helpers.
const DIFF_OPTIONS: [&str; 7] = [
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--ignore-submodules=all",
    "-U3",
    "--",
];

/// What `worktree` changed since it left `target` (an exact ref):
/// committed, staged, unstaged, and new files git does not track yet
/// (ignored ones aside), parsed from git's unified diff. Git's output is
/// read through a byte cap; a new file too large to show, or not a regular
/// file, is listed as such and never read. The index is never touched.
pub async fn diff_against(
    checkout: &Checkout,
    target: &str,
) -> Result<shard_protocol::workspace::WorkspaceDiff, GitError> {
    use shard_protocol::workspace::FileDiff;
    let worktree = &checkout.work_tree;
    let place = Place::Checkout(checkout);
    let base = git(place, &["merge-base", "--end-of-options", target, "HEAD"]).await?;
    let base = base.trim();
    let mut args = vec!["diff", base];
    args.extend(DIFF_OPTIONS);
    let tracked = run(place, &args, &[0], MAX_DIFF_BYTES).await?;
    let mut text = tracked.text;
    let mut truncated = tracked.truncated;
    let untracked =
        git(place, &["ls-files", "--others", "--exclude-standard", "--full-name", "-z"]).await?;
    let mut untracked: Vec<&str> = untracked.split('\0').filter(|path| !path.is_empty()).collect();
    untracked.sort_unstable();
    let tracked_files = text.lines().filter(|line| line.starts_with("diff --git ")).count();
    let room = MAX_DIFF_FILES.saturating_sub(tracked_files);
    truncated |= untracked.len() > room;
    let mut unread = Vec::new();
    let mut new_paths = std::collections::HashSet::new();
    for path in untracked.into_iter().take(room) {
        new_paths.insert(path.to_owned());
        if let Some(why) = unreadable_new_file(&worktree.join(path)) {
            unread.push(FileDiff { path: path.to_owned(), hunks: Vec::new(), omitted: Some(why) });
            continue;
        }
        let left = MAX_DIFF_BYTES.saturating_sub(text.len());
        if left == 0 {
            truncated = true;
            break;
        }
        let mut args = vec!["diff", "--no-index"];
        args.extend(DIFF_OPTIONS);
        args.extend(["/dev/null", path]);
        let new_file = run(place, &args, &[0, 1], left).await?;
        text.push_str(&new_file.text);
        truncated |= new_file.truncated;
    }
    let mut diff = parse_unified(&text);
    diff.truncated |= truncated;
    // Tracked files in git's order, then the new ones by path, read or not.
    let (mut new_files, mut files): (Vec<_>, Vec<_>) =
        diff.files.into_iter().partition(|file| new_paths.contains(&file.path));
    new_files.extend(unread);
    new_files.sort_by(|a, b| a.path.cmp(&b.path));
    files.extend(new_files);
    diff.truncated |= files.len() > MAX_DIFF_FILES;
    files.truncate(MAX_DIFF_FILES);
    diff.files = files;
    Ok(diff)
}

/// Why a new file is listed without its lines: too large, or not a
/// regular file (a symlink is shown as git shows it: its target's name).
fn unreadable_new_file(path: &Path) -> Option<String> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Some("new file that cannot be read".to_owned());
    };
    if meta.file_type().is_symlink() {
        return None;
    }
    if !meta.is_file() {
        return Some("new entry that is not a regular file".to_owned());
    }
    if meta.len() > MAX_NEW_FILE {
        return Some(format!("new file of {} bytes: too large to show", meta.len()));
    }
    // Git's own test: a NUL in the first 8,000 bytes makes a file binary.
    let mut head = Vec::with_capacity(8000);
    let read = std::fs::File::open(path).and_then(|file| {
        std::io::Read::read_to_end(&mut std::io::Read::take(file, 8000), &mut head)
    });
    match read {
        Ok(_) if head.contains(&0) => Some("binary file".to_owned()),
        Ok(_) => None,
        Err(_) => Some("new file that cannot be read".to_owned()),
    }
}

/// A unified diff as files and hunks, bounded in files and lines.
pub fn parse_unified(text: &str) -> shard_protocol::workspace::WorkspaceDiff {
    use shard_protocol::types::Hunk;
    use shard_protocol::workspace::{FileDiff, WorkspaceDiff};
    let mut diff = WorkspaceDiff::default();
    let mut lines_kept = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            if diff.files.len() >= MAX_DIFF_FILES {
                diff.truncated = true;
                break;
            }
            // `a/PATH b/PATH`: the new side's path (renames are off).
            let path = rest.rsplit_once(" b/").map_or(rest, |(_, path)| path);
            diff.files.push(FileDiff { path: path.to_owned(), hunks: Vec::new(), omitted: None });
            continue;
        }
        let Some(file) = diff.files.last_mut() else { continue };
        if line.starts_with("Binary files ") && file.hunks.is_empty() {
            file.omitted = Some("binary file".to_owned());
            continue;
        }
        if let Some(header) = line.strip_prefix("@@ ") {
            let numbers = |part: Option<&str>| {
                let part = part.unwrap_or("").trim_start_matches(['-', '+']);
                let (start, count) = part.split_once(',').unwrap_or((part, "1"));
                (start.parse().unwrap_or(0), count.parse().unwrap_or(1))
            };
            let mut parts = header.split_whitespace();
            let (old_start, old_lines) = numbers(parts.next());
            let (new_start, new_lines) = numbers(parts.next());
            file.hunks.push(Hunk { old_start, old_lines, new_start, new_lines, lines: Vec::new() });
            continue;
        }
        let Some(hunk) = file.hunks.last_mut() else { continue };
        if line.starts_with([' ', '+', '-', '\\']) {
            if lines_kept >= MAX_DIFF_LINES {
                diff.truncated = true;
                break;
            }
            lines_kept += 1;
            hunk.lines.push(line.to_owned());
        }
    }
    diff
}
