//! Git, through the `git` command users have (their config, their hooks,
//! their credential helpers never asked: no terminal prompt), each call
//! with a deadline and its error in one line. Paths and output stay in this
//! module's errors for the log; what clients see is sanitized by the caller.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git command may take. Worktree creation copies the tree;
/// a large checkout on a slow disk takes seconds, never minutes.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The most bytes of git output kept (status of a huge tree, a long diff).
const MAX_OUTPUT: usize = 8 * 1024 * 1024;

/// A git command that failed: why, in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitError(pub String);

impl std::fmt::Display for GitError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// Runs `git -C dir args…`; its stdout, or why it failed.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    git_accepting(dir, args, &[0]).await
}

/// [`git`], with the exit codes that mean success for this command (a
/// `diff --no-index` that found differences exits 1).
async fn git_accepting(dir: &Path, args: &[&str], success: &[i32]) -> Result<String, GitError> {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let what = args.first().copied().unwrap_or("git");
    let output = match tokio::time::timeout(GIT_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(GitError(format!("cannot run git: {error}"))),
        Err(_) => {
            return Err(GitError(format!(
                "git {what} did not finish in {} s",
                GIT_TIMEOUT.as_secs()
            )));
        }
    };
    if !output.status.code().is_some_and(|code| success.contains(&code)) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().find(|line| !line.trim().is_empty()).unwrap_or("failed");
        return Err(GitError(format!("git {what}: {}", first.trim())));
    }
    let mut stdout = output.stdout;
    stdout.truncate(MAX_OUTPUT);
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// The top of the checkout `dir` is in, or `None` when it is in none.
pub async fn toplevel(dir: &Path) -> Option<PathBuf> {
    let out = git(dir, &["rev-parse", "--show-toplevel"]).await.ok()?;
    Some(PathBuf::from(out.trim()))
}

/// The repository's main checkout: the first worktree git lists (the one
/// whose git-dir is the common dir).
pub async fn main_checkout(dir: &Path) -> Result<PathBuf, GitError> {
    let list = git(dir, &["worktree", "list", "--porcelain"]).await?;
    list.lines()
        .find_map(|line| line.strip_prefix("worktree "))
        .map(PathBuf::from)
        .ok_or_else(|| GitError("git worktree list: no main checkout".to_owned()))
}

/// The commit `rev` names, or why not (an unborn HEAD, a bad ref).
pub async fn commit_of(dir: &Path, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    git(dir, &["rev-parse", "--verify", "--quiet", &spec])
        .await
        .map(|out| out.trim().to_owned())
        .map_err(|_| GitError(format!("`{rev}` names no commit")))
}

/// Whether branch `name` exists.
pub async fn branch_exists(dir: &Path, name: &str) -> bool {
    let reference = format!("refs/heads/{name}");
    git(dir, &["show-ref", "--verify", "--quiet", &reference]).await.is_ok()
}

/// Whether `name` is a valid new branch name.
pub async fn valid_branch_name(dir: &Path, name: &str) -> bool {
    !name.starts_with('-') && git(dir, &["check-ref-format", "--branch", name]).await.is_ok()
}

/// Paths with changes (staged, unstaged or untracked, ignored files aside).
pub async fn dirty_count(dir: &Path) -> Result<u32, GitError> {
    let out = git(dir, &["status", "--porcelain=v1", "--untracked-files=all"]).await?;
    Ok(u32::try_from(out.lines().filter(|line| !line.is_empty()).count()).unwrap_or(u32::MAX))
}

/// Commits on `branch` not on `target`, and the other way round.
pub async fn ahead_behind(dir: &Path, branch: &str, target: &str) -> Result<(u32, u32), GitError> {
    let range = format!("{target}...{branch}");
    let out = git(dir, &["rev-list", "--left-right", "--count", &range]).await?;
    let mut numbers = out.split_whitespace().map(|number| number.parse::<u32>().unwrap_or(0));
    let behind = numbers.next().unwrap_or(0);
    let ahead = numbers.next().unwrap_or(0);
    Ok((ahead, behind))
}

/// Whether `branch`'s tip is reachable from `target`.
pub async fn merged(dir: &Path, branch: &str, target: &str) -> Result<bool, GitError> {
    let branch_commit = commit_of(dir, branch).await?;
    let target_commit = commit_of(dir, target).await?;
    match git(dir, &["merge-base", "--is-ancestor", &branch_commit, &target_commit]).await {
        Ok(_) => Ok(true),
        // Exit status 1 is "not an ancestor"; anything else failed earlier.
        Err(_) => Ok(false),
    }
}

/// The most files and diff lines a workspace diff carries.
const MAX_DIFF_FILES: usize = 200;
const MAX_DIFF_LINES: usize = 20_000;

/// The options every diff here runs with: plain unified text, no helpers.
const DIFF_OPTIONS: [&str; 6] =
    ["--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "-U3", "--"];

/// What `worktree` changed since it left `target`: committed, staged,
/// unstaged, and new files git does not track yet (ignored ones aside),
/// parsed from git's unified diff. The index is never touched.
pub async fn diff_against(
    worktree: &Path,
    target: &str,
) -> Result<shard_protocol::workspace::WorkspaceDiff, GitError> {
    let base = git(worktree, &["merge-base", target, "HEAD"]).await?;
    let base = base.trim();
    let mut args = vec!["diff", base];
    args.extend(DIFF_OPTIONS);
    let mut text = git(worktree, &args).await?;
    let untracked =
        git(worktree, &["ls-files", "--others", "--exclude-standard", "--full-name", "-z"]).await?;
    let mut untracked: Vec<&str> = untracked.split('\0').filter(|path| !path.is_empty()).collect();
    untracked.sort_unstable();
    let tracked = text.lines().filter(|line| line.starts_with("diff --git ")).count();
    let room = MAX_DIFF_FILES.saturating_sub(tracked);
    let left_out = untracked.len() > room;
    for path in untracked.into_iter().take(room) {
        let mut args = vec!["diff", "--no-index"];
        args.extend(DIFF_OPTIONS);
        args.extend(["/dev/null", path]);
        text.push_str(&git_accepting(worktree, &args, &[0, 1]).await?);
        if text.len() >= MAX_OUTPUT {
            break;
        }
    }
    let mut diff = parse_unified(&text);
    diff.truncated |= left_out;
    Ok(diff)
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
            diff.files.push(FileDiff { path: path.to_owned(), hunks: Vec::new() });
            continue;
        }
        let Some(file) = diff.files.last_mut() else { continue };
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

#[cfg(test)]
mod tests {
    use super::parse_unified;

    #[test]
    fn a_unified_diff_becomes_files_and_hunks() {
        let text = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,2 +1,3 @@\n one\n-two\n+deux\n+trois\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n\\ No newline at end of file\n";
        let diff = parse_unified(text);
        assert_eq!(diff.files.len(), 2);
        assert_eq!(diff.files[0].path, "src/a.rs");
        let hunk = &diff.files[0].hunks[0];
        assert_eq!((hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines), (1, 2, 1, 3));
        assert_eq!(hunk.lines, [" one", "-two", "+deux", "+trois"]);
        assert_eq!(diff.files[1].path, "new.txt");
        let hunk = &diff.files[1].hunks[0];
        assert_eq!((hunk.old_start, hunk.old_lines, hunk.new_start, hunk.new_lines), (0, 0, 1, 1));
        assert_eq!(hunk.lines.len(), 2, "the no-newline marker is kept");
        assert!(!diff.truncated);
    }
}
