//! Git, through the `git` command users have (their config, their hooks,
//! their credential helpers never asked: no terminal prompt), each call
//! with a deadline and its error in one line. Paths and output stay in this
//! module's errors for the log; what clients see is sanitized by the caller.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git command may take. Worktree creation copies the tree;
/// a large checkout on a slow disk takes seconds, never minutes.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The most bytes of git output read (status of a huge tree, a long diff):
/// git is stopped there, so the daemon never holds more.
const MAX_OUTPUT: usize = 8 * 1024 * 1024;
/// The most bytes of git's error output read (its first line is kept).
const MAX_STDERR: usize = 64 * 1024;

/// A git command that failed, in one line: git could not be run or read,
/// ran too long or printed too much, refused (its first line of stderr), or
/// answered without the name asked for. The text may hold paths and git's
/// own words: it is for the log, and a caller shows clients its own.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git: {source}")]
    Spawn { source: std::io::Error },
    #[error("cannot read git's output")]
    NoPipes,
    #[error("cannot read git's output: {source}")]
    Read { source: std::io::Error },
    #[error("git {command} did not finish in {} s", .limit.as_secs())]
    TimedOut { command: String, limit: Duration },
    #[error("git {command}: more than {limit} bytes of output")]
    TooMuchOutput { command: String, limit: usize },
    /// Git exited with a code the caller does not accept.
    #[error("git {command}: {stderr}")]
    Failed {
        command: String,
        /// Git's first non-blank line of error output, trimmed.
        stderr: String,
    },
    #[error("git worktree list: no main checkout")]
    NoMainCheckout,
    #[error("`{rev}` names no commit")]
    NoCommit { rev: String },
}

/// What a git command printed, read through a byte cap.
struct Bounded {
    text: String,
    /// Git's exit code (one of those the caller accepts).
    code: Option<i32>,
    /// The cap was reached: git was stopped and `text` is its beginning.
    truncated: bool,
}

/// Runs `git -C dir args…`; its stdout, or why it failed. Output over
/// [`MAX_OUTPUT`] is an error: no caller decides on half an answer.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = run(dir, args, &[0], MAX_OUTPUT).await?;
    if out.truncated {
        return Err(GitError::TooMuchOutput { command: command_name(args), limit: MAX_OUTPUT });
    }
    Ok(out.text)
}

/// Runs git with the exit codes that mean success for this command (a
/// `diff --no-index` that found differences exits 1), reading at most `cap`
/// bytes of its output; git is killed once it has printed more.
async fn run(dir: &Path, args: &[&str], success: &[i32], cap: usize) -> Result<Bounded, GitError> {
    Git::new(dir).accept(success).run_capped(args, cap).await
}

/// One git command with more than [`git`]'s defaults: other exit codes
/// that mean success, more environment, hooks off, another deadline.
pub struct Git<'a> {
    dir: &'a Path,
    success: &'a [i32],
    env: Vec<(&'a str, &'a std::ffi::OsStr)>,
    hooks_off: bool,
    limit: Duration,
}

/// What a [`Git`] command printed, and its exit code.
pub struct Output {
    pub text: String,
    pub code: Option<i32>,
}

impl<'a> Git<'a> {
    pub fn new(dir: &'a Path) -> Self {
        Self { dir, success: &[0], env: Vec::new(), hooks_off: false, limit: GIT_TIMEOUT }
    }

    /// The exit codes that mean success (`[0]` unless told).
    pub fn accept(mut self, codes: &'a [i32]) -> Self {
        self.success = codes;
        self
    }

    /// One more variable in git's environment.
    pub fn env(mut self, name: &'a str, value: &'a std::ffi::OsStr) -> Self {
        self.env.push((name, value));
        self
    }

    /// Runs no hook (`-c core.hooksPath=/dev/null`): for the commands a
    /// workspace action runs on the user's behalf (docs/WORKSPACES.md).
    pub fn hooks_off(mut self) -> Self {
        self.hooks_off = true;
        self
    }

    /// Another deadline than [`GIT_TIMEOUT`].
    pub fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// Runs `git args…`: its output, or why not. Output over
    /// [`MAX_OUTPUT`] is an error, as for [`git`].
    pub async fn run(&self, args: &[&str]) -> Result<Output, GitError> {
        let out = self.run_capped(args, MAX_OUTPUT).await?;
        if out.truncated {
            return Err(GitError::TooMuchOutput { command: command_name(args), limit: MAX_OUTPUT });
        }
        Ok(Output { text: out.text, code: out.code })
    }

    async fn run_capped(&self, args: &[&str], cap: usize) -> Result<Bounded, GitError> {
        use tokio::io::AsyncReadExt;
        let mut command = tokio::process::Command::new("git");
        command.arg("-C").arg(self.dir);
        if self.hooks_off {
            command.args(["-c", "core.hooksPath=/dev/null"]);
        }
        command
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .envs(self.env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let success = self.success;
        let limit = self.limit;
        let mut child = command.spawn().map_err(|source| GitError::Spawn { source })?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(GitError::NoPipes);
        };
        let work = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            // Both pipes at once, so that git never blocks on a full one; what
            // is past the stderr cap is read and dropped.
            let reading = async {
                let read = stdout.take(cap as u64 + 1).read_to_end(&mut out).await;
                if out.len() > cap {
                    // Over the cap: git is stopped, nothing more is read.
                    let _ = child.start_kill();
                }
                read
            };
            let draining = async {
                let mut stderr = stderr;
                (&mut stderr).take(MAX_STDERR as u64).read_to_end(&mut err).await?;
                tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await?;
                std::io::Result::Ok(())
            };
            let (read, _) = tokio::join!(reading, draining);
            read.map_err(|source| GitError::Read { source })?;
            let truncated = out.len() > cap;
            out.truncate(cap);
            let status = child.wait().await.map_err(|source| GitError::Spawn { source })?;
            Ok::<_, GitError>((out, err, status, truncated))
        };
        let (out, err, status, truncated) = match tokio::time::timeout(limit, work).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(GitError::TimedOut { command: command_name(args), limit });
            }
        };
        if !truncated && !status.code().is_some_and(|code| success.contains(&code)) {
            let stderr = String::from_utf8_lossy(&err);
            let first = stderr.lines().find(|line| !line.trim().is_empty()).unwrap_or("failed");
            let stderr = first.trim().to_owned();
            return Err(GitError::Failed { command: command_name(args), stderr });
        }
        Ok(Bounded {
            text: String::from_utf8_lossy(&out).into_owned(),
            code: status.code(),
            truncated,
        })
    }
}

/// The git command `args` run, as errors name it (`worktree`, `diff`…).
fn command_name(args: &[&str]) -> String {
    args.first().copied().unwrap_or("git").to_owned()
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
        .ok_or(GitError::NoMainCheckout)
}

/// The commit `rev` names, or why not (an unborn HEAD, a bad ref).
pub async fn commit_of(dir: &Path, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    git(dir, &["rev-parse", "--verify", "--quiet", "--end-of-options", &spec])
        .await
        .map(|out| out.trim().to_owned())
        .map_err(|_| GitError::NoCommit { rev: rev.to_owned() })
}

/// The full name of branch `name`: every branch operation names it so,
/// because a short name can mean another ref (`heads/main` is `main`; a
/// tag of the same name hides a branch).
pub fn branch_ref(name: &str) -> String {
    format!("refs/heads/{name}")
}

/// Whether the exact ref `reference` exists.
async fn ref_exists(dir: &Path, reference: &str) -> bool {
    git(dir, &["show-ref", "--verify", "--quiet", reference]).await.is_ok()
}

/// Whether branch `name` exists.
pub async fn branch_exists(dir: &Path, name: &str) -> bool {
    ref_exists(dir, &branch_ref(name)).await
}

/// What `name` means, as an exact ref, resolved once: a full ref as it
/// is, else a branch, a remote-tracking branch or a tag of that name (a
/// branch first, so that a tag never hides it), else a full commit id.
pub async fn exact_ref(dir: &Path, name: &str) -> Option<String> {
    if name.starts_with("refs/") {
        return ref_exists(dir, name).await.then(|| name.to_owned());
    }
    for space in ["refs/heads/", "refs/remotes/", "refs/tags/"] {
        let candidate = format!("{space}{name}");
        if ref_exists(dir, &candidate).await {
            return Some(candidate);
        }
    }
    let full_id = matches!(name.len(), 40 | 64) && name.bytes().all(|b| b.is_ascii_hexdigit());
    if full_id && commit_of(dir, name).await.is_ok_and(|commit| commit == name) {
        return Some(name.to_owned());
    }
    None
}

/// The full ref `dir`'s HEAD is on (`refs/heads/…`), or `None` when it is
/// detached or cannot be read.
pub async fn head_ref(dir: &Path) -> Option<String> {
    let out = git(dir, &["symbolic-ref", "--quiet", "HEAD"]).await.ok()?;
    let reference = out.trim();
    (!reference.is_empty()).then(|| reference.to_owned())
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

/// Commits on `branch` not on `target` (both exact refs), and the other
/// way round.
pub async fn ahead_behind(dir: &Path, branch: &str, target: &str) -> Result<(u32, u32), GitError> {
    let range = format!("{target}...{branch}");
    let out =
        git(dir, &["rev-list", "--left-right", "--count", "--end-of-options", &range]).await?;
    let mut numbers = out.split_whitespace().map(|number| number.parse::<u32>().unwrap_or(0));
    let behind = numbers.next().unwrap_or(0);
    let ahead = numbers.next().unwrap_or(0);
    Ok((ahead, behind))
}

/// Whether `commit` is contained in `target`'s history: `true` only when
/// git says so.
pub async fn contains(dir: &Path, target: &str, commit: &str) -> Result<bool, GitError> {
    let target_commit = commit_of(dir, target).await?;
    let args = ["merge-base", "--is-ancestor", commit, &target_commit];
    // 0: contained; 1: not; anything else failed (and is an error).
    Ok(run(dir, &args, &[0, 1], 0).await?.code == Some(0))
}

/// Whether the tip of `branch_ref` (an exact ref) is contained in
/// `target` (an exact ref or commit id).
pub async fn merged(dir: &Path, branch_ref: &str, target: &str) -> Result<bool, GitError> {
    let tip = commit_of(dir, branch_ref).await?;
    contains(dir, target, &tip).await
}

/// Deletes branch ref `reference` only if it still points at `tip`, the
/// commit whose safety was proven: a branch that moved since is kept.
pub async fn delete_ref(dir: &Path, reference: &str, tip: &str) -> Result<(), GitError> {
    git(dir, &["update-ref", "-d", reference, tip]).await.map(|_| ())
}

/// The most files and diff lines a workspace diff carries.
const MAX_DIFF_FILES: usize = 200;
const MAX_DIFF_LINES: usize = 20_000;
/// The most bytes of diff text read from git, all files together.
const MAX_DIFF_BYTES: usize = 4 * 1024 * 1024;
/// A new file larger than this is listed, not read.
const MAX_NEW_FILE: u64 = 1024 * 1024;

/// The options every diff here runs with: plain unified text, no helpers.
const DIFF_OPTIONS: [&str; 6] =
    ["--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "-U3", "--"];

/// What `worktree` changed since it left `target` (an exact ref):
/// committed, staged, unstaged, and new files git does not track yet
/// (ignored ones aside), parsed from git's unified diff. Git's output is
/// read through a byte cap; a new file too large to show, or not a regular
/// file, is listed as such and never read. The index is never touched.
pub async fn diff_against(
    worktree: &Path,
    target: &str,
) -> Result<shard_protocol::workspace::WorkspaceDiff, GitError> {
    use shard_protocol::workspace::FileDiff;
    let base = git(worktree, &["merge-base", "--end-of-options", target, "HEAD"]).await?;
    let base = base.trim();
    let mut args = vec!["diff", base];
    args.extend(DIFF_OPTIONS);
    let tracked = run(worktree, &args, &[0], MAX_DIFF_BYTES).await?;
    let mut text = tracked.text;
    let mut truncated = tracked.truncated;
    let untracked =
        git(worktree, &["ls-files", "--others", "--exclude-standard", "--full-name", "-z"]).await?;
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
        let new_file = run(worktree, &args, &[0, 1], left).await?;
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
