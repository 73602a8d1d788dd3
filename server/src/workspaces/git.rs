//! Git, through the `git` command users have, each call with a deadline
//! and its error in one line. Paths and output stay in this module's errors
//! for the log; what clients see is sanitized by the caller.
//!
//! The user's own git configuration (system and global) is theirs and is
//! followed: their credential helpers, their `insteadOf` rules, their
//! signing. The repository's configuration is not trusted: an agent's tools
//! can write it (a worktree's `.git` file, `.git/config`, a file it
//! includes), so nothing in it that runs a command is ever followed (see
//! [`PINNED`] and [`neutralized`]), and a checkout's work tree and git
//! directory are named on git's command line ([`Checkout`]) rather than read
//! from files in it.

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

/// Runs `git args…` at `place`; its stdout, or why it failed. Output over
/// [`MAX_OUTPUT`] is an error: no caller decides on half an answer.
pub async fn git<'a>(place: impl Into<Place<'a>>, args: &[&str]) -> Result<String, GitError> {
    let out = run(place.into(), args, &[0], MAX_OUTPUT).await?;
    if out.truncated {
        return Err(GitError::TooMuchOutput { command: command_name(args), limit: MAX_OUTPUT });
    }
    Ok(out.text)
}

/// Runs git with the exit codes that mean success for this command (a
/// `diff --no-index` that found differences exits 1), reading at most `cap`
/// bytes of its output; git is killed once it has printed more.
async fn run(
    place: Place<'_>,
    args: &[&str],
    success: &[i32],
    cap: usize,
) -> Result<Bounded, GitError> {
    Git::new(place).accept(success).run_capped(args, cap).await
}

/// A checkout as git is told of it: its work tree and its git directory
/// named on git's command line, never read from the checkout's own `.git`
/// (whoever writes the checkout can point that anywhere, at a git
/// directory of their own making with a config of their own) nor from a
/// `core.worktree` (which would move the work tree elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub work_tree: PathBuf,
    pub git_dir: PathBuf,
}

/// Where a git command runs: a directory git finds its repository from
/// (for questions about a repository: its top, its worktrees, its refs),
/// or a [`Checkout`] named exactly (for anything that reads or writes a
/// work tree).
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    Dir(&'a Path),
    Checkout(&'a Checkout),
}

impl Place<'_> {
    /// The directory git runs in: the work tree of a checkout.
    pub fn dir(&self) -> &Path {
        match self {
            Place::Dir(dir) => dir,
            Place::Checkout(checkout) => &checkout.work_tree,
        }
    }
}

impl<'a> From<&'a Path> for Place<'a> {
    fn from(dir: &'a Path) -> Self {
        Place::Dir(dir)
    }
}

impl<'a> From<&'a PathBuf> for Place<'a> {
    fn from(dir: &'a PathBuf) -> Self {
        Place::Dir(dir)
    }
}

impl<'a> From<&'a Checkout> for Place<'a> {
    fn from(checkout: &'a Checkout) -> Self {
        Place::Checkout(checkout)
    }
}

/// Settings on every git command line, where they outrank the repository's
/// config: no hook runs (hooks are files in the repository; a hook could
/// also change what was previewed), no file-system monitor (a command),
/// no pager, no recursion into submodules (each has a config of its own,
/// which is not looked at), and no network (a partial clone's lazy fetch
/// would run the remote's transport from the repository's config).
/// [`Git::network`] lets the few known transports through, for the
/// daemon's own scratch repository only (`push.rs`).
pub const PINNED: [&str; 7] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "protocol.allow=never",
    "protocol.ext.allow=never",
];

/// The transports a push or a remote's listing may use: git's own and
/// ssh, https, http and a path on this machine; never `ext::` (a command)
/// nor a remote helper the user's own config does not allow.
const TRANSPORTS: [&str; 5] = [
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.ssh.allow=always",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
];

/// One git command with more than [`git`]'s defaults: other exit codes
/// that mean success, more environment, another deadline, the network.
pub struct Git<'a> {
    place: Place<'a>,
    success: &'a [i32],
    env: Vec<(&'a str, &'a std::ffi::OsStr)>,
    network: bool,
    limit: Duration,
}

/// What a [`Git`] command printed, and its exit code.
pub struct Output {
    pub text: String,
    pub code: Option<i32>,
}

impl<'a> Git<'a> {
    pub fn new(place: impl Into<Place<'a>>) -> Self {
        Self {
            place: place.into(),
            success: &[0],
            env: Vec::new(),
            network: false,
            limit: GIT_TIMEOUT,
        }
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

    /// Lets git reach a remote through the [`TRANSPORTS`]: only for the
    /// daemon's own scratch repository, whose config is the daemon's.
    pub fn network(mut self) -> Self {
        self.network = true;
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

    /// `git` at this command's place, with its environment and the
    /// [`PINNED`] settings, before any other argument.
    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("git");
        match self.place {
            Place::Dir(dir) => {
                command.arg("-C").arg(dir);
            }
            Place::Checkout(checkout) => {
                let mut git_dir = std::ffi::OsString::from("--git-dir=");
                git_dir.push(&checkout.git_dir);
                let mut work_tree = std::ffi::OsString::from("--work-tree=");
                work_tree.push(&checkout.work_tree);
                command.arg("-C").arg(&checkout.work_tree).arg(git_dir).arg(work_tree);
            }
        }
        for setting in PINNED {
            command.args(["-c", setting]);
        }
        if self.network {
            for setting in TRANSPORTS {
                command.args(["-c", setting]);
            }
        }
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            // A partial clone never fetches what it lacks (git 2.44 on;
            // `protocol.allow=never` stops older ones).
            .env("GIT_NO_LAZY_FETCH", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .env_remove("GIT_OBJECT_DIRECTORY")
            .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
            .envs(self.env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        command
    }

    async fn run_capped(&self, args: &[&str], cap: usize) -> Result<Bounded, GitError> {
        // What the repository's config would have git run, as it is now.
        let listed = self
            .spawn(self.command(), &["config", "--list", "--show-scope", "-z"], &[0], MAX_OUTPUT)
            .await?;
        if listed.truncated {
            return Err(GitError::TooMuchOutput {
                command: "config".to_owned(),
                limit: MAX_OUTPUT,
            });
        }
        let mut command = self.command();
        for setting in neutralized(&listed.text) {
            command.arg("-c").arg(setting);
        }
        self.spawn(command, args, self.success, cap).await
    }

    async fn spawn(
        &self,
        mut command: tokio::process::Command,
        args: &[&str],
        success: &[i32],
        cap: usize,
    ) -> Result<Bounded, GitError> {
        use tokio::io::AsyncReadExt;
        command.args(args);
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

/// The settings that take back, for one command, whatever the repository's
/// own config (scopes `local` and `worktree`, files it includes among them)
/// sets that would have git run a program: a filter, merge or diff driver,
/// a signing program, an ssh command, an editor, a remote's upload or
/// receive command. Each is set again on the command line, which outranks
/// the repository: to the value the user's own config (system or global)
/// gives it, else to git's default, else to nothing (a driver with no
/// command is no driver). `listing` is `git config --list --show-scope -z`.
pub fn neutralized(listing: &str) -> Vec<String> {
    let mut fields = listing.split('\0');
    let mut trusted: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut taken_back: Vec<&str> = Vec::new();
    while let (Some(scope), Some(entry)) = (fields.next(), fields.next()) {
        let (key, value) = entry.split_once('\n').unwrap_or((entry, ""));
        if !runs_a_program(key) {
            continue;
        }
        match scope {
            "system" | "global" => {
                trusted.insert(key, value);
            }
            // `command` is the daemon's own environment (the user's).
            "command" => {
                trusted.insert(key, value);
            }
            _ => {
                if !taken_back.contains(&key) {
                    taken_back.push(key);
                }
            }
        }
    }
    taken_back
        .into_iter()
        .map(|key| {
            let value = trusted.get(key).copied().unwrap_or_else(|| default_program(key));
            format!("{key}={value}")
        })
        .collect()
}

/// Whether config `key` (as `git config --list` prints it: section and
/// name in lower case) names a program git may run.
fn runs_a_program(key: &str) -> bool {
    let Some((section, rest)) = key.split_once('.') else { return false };
    let name = rest.rsplit_once('.').map_or(rest, |(_, name)| name);
    let named = rest.contains('.');
    match section {
        "filter" => named && matches!(name, "clean" | "smudge" | "process"),
        "merge" => named && name == "driver",
        "diff" => {
            (named && matches!(name, "command" | "textconv")) || (!named && name == "external")
        }
        "gpg" => name == "program" || name == "defaultkeycommand",
        "core" => matches!(
            name,
            "sshcommand" | "askpass" | "editor" | "gitproxy" | "alternaterefscommand"
        ),
        "sequence" => name == "editor",
        "remote" => named && matches!(name, "uploadpack" | "receivepack"),
        "credential" => name == "helper",
        _ => false,
    }
}

/// What git does with `key` unset, written as a value: the default program
/// where git has one, else none at all.
fn default_program(key: &str) -> &'static str {
    match key {
        "gpg.program" | "gpg.openpgp.program" => "gpg",
        "gpg.x509.program" => "gpgsm",
        "gpg.ssh.program" => "ssh-keygen",
        "core.sshcommand" => "ssh",
        _ if key.starts_with("remote.") && key.ends_with(".uploadpack") => "git-upload-pack",
        _ if key.starts_with("remote.") && key.ends_with(".receivepack") => "git-receive-pack",
        _ => "",
    }
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

/// The repository's common git directory (absolute), as git finds it from
/// `dir`.
pub async fn common_dir(dir: &Path) -> Result<PathBuf, GitError> {
    let out = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).await?;
    Ok(PathBuf::from(out.trim()))
}

/// The git directory the repository at `common` records for its linked
/// worktree at `work_tree`: the directory under `worktrees/` whose `gitdir`
/// file names `work_tree/.git`. Read from the repository, never from the
/// worktree.
pub fn linked_git_dir(common: &Path, work_tree: &Path) -> Option<PathBuf> {
    let dot_git = work_tree.join(".git");
    std::fs::read_dir(common.join("worktrees")).ok()?.flatten().map(|entry| entry.path()).find(
        |admin| named_in(&admin.join("gitdir"), admin).is_some_and(|named| same(&named, &dot_git)),
    )
}

/// How a linked worktree stands with the git directory it was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Its `.git` is a file (not a link, not a directory) naming that git
    /// directory, which names it back.
    Intact,
    /// The repository still records it, but its `.git` names something
    /// else, or is no longer a plain file.
    Relinked,
    /// The repository no longer records it there (pruned, or moved), or
    /// it has no `.git` at all: git cannot read it as a checkout.
    Unrecorded,
}

/// How the worktree at `work_tree` stands with `git_dir`.
pub fn link(work_tree: &Path, git_dir: &Path) -> Link {
    let dot_git = work_tree.join(".git");
    if named_in(&git_dir.join("gitdir"), git_dir).is_none_or(|named| !same(&named, &dot_git)) {
        return Link::Unrecorded;
    }
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else { return Link::Unrecorded };
    let is_file = meta.is_file();
    let says = std::fs::read_to_string(&dot_git).is_ok_and(|text| {
        text.strip_prefix("gitdir: ").is_some_and(|named| {
            same(&relative_to(named.trim_end_matches(['\n', '\r']), work_tree), git_dir)
        })
    });
    if is_file && says { Link::Intact } else { Link::Relinked }
}

/// The path a git administrative file holds (one line; relative to `base`
/// when not absolute).
fn named_in(file: &Path, base: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    Some(relative_to(text.trim_end_matches(['\n', '\r']), base))
}

fn relative_to(path: &str, base: &Path) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() { path.to_path_buf() } else { base.join(path) }
}

/// Whether two paths name the same place (each resolved when it exists).
fn same(one: &Path, other: &Path) -> bool {
    let resolve = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    one == other || resolve(one) == resolve(other)
}

/// The commit `rev` names, or why not (an unborn HEAD, a bad ref).
pub async fn commit_of<'a>(place: impl Into<Place<'a>>, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    git(place, &["rev-parse", "--verify", "--quiet", "--end-of-options", &spec])
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
pub async fn head_ref<'a>(place: impl Into<Place<'a>>) -> Option<String> {
    let out = git(place, &["symbolic-ref", "--quiet", "HEAD"]).await.ok()?;
    let reference = out.trim();
    (!reference.is_empty()).then(|| reference.to_owned())
}

/// Whether `name` is a valid new branch name.
pub async fn valid_branch_name(dir: &Path, name: &str) -> bool {
    !name.starts_with('-') && git(dir, &["check-ref-format", "--branch", name]).await.is_ok()
}

/// Paths with changes (staged, unstaged or untracked, ignored files aside).
pub async fn dirty_count<'a>(place: impl Into<Place<'a>>) -> Result<u32, GitError> {
    let args = ["status", "--porcelain=v1", "--untracked-files=all", "--ignore-submodules=all"];
    let out = git(place, &args).await?;
    Ok(u32::try_from(out.lines().filter(|line| !line.is_empty()).count()).unwrap_or(u32::MAX))
}

/// Commits on `branch` not on `target` (both exact refs), and the other
/// way round.
pub async fn ahead_behind<'a>(
    place: impl Into<Place<'a>>,
    branch: &str,
    target: &str,
) -> Result<(u32, u32), GitError> {
    let range = format!("{target}...{branch}");
    let out =
        git(place, &["rev-list", "--left-right", "--count", "--end-of-options", &range]).await?;
    let mut numbers = out.split_whitespace().map(|number| number.parse::<u32>().unwrap_or(0));
    let behind = numbers.next().unwrap_or(0);
    let ahead = numbers.next().unwrap_or(0);
    Ok((ahead, behind))
}

/// Whether `commit` is contained in `target`'s history: `true` only when
/// git says so.
pub async fn contains<'a>(
    place: impl Into<Place<'a>>,
    target: &str,
    commit: &str,
) -> Result<bool, GitError> {
    let place = place.into();
    let target_commit = commit_of(place, target).await?;
    let args = ["merge-base", "--is-ancestor", commit, &target_commit];
    // 0: contained; 1: not; anything else failed (and is an error).
    Ok(run(place, &args, &[0, 1], 0).await?.code == Some(0))
}

/// Whether the tip of `branch_ref` (an exact ref) is contained in
/// `target` (an exact ref or commit id).
pub async fn merged<'a>(
    place: impl Into<Place<'a>>,
    branch_ref: &str,
    target: &str,
) -> Result<bool, GitError> {
    let place = place.into();
    let tip = commit_of(place, branch_ref).await?;
    contains(place, target, &tip).await
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

#[cfg(test)]
mod tests {
    use super::{neutralized, parse_unified};

    #[test]
    fn what_the_repository_config_would_run_is_taken_back_to_the_users_own() {
        let listing = [
            "system\0filter.lfs.clean\ngit-lfs clean -- %f",
            "global\0gpg.program\n/usr/bin/gpg2",
            "global\0user.name\nSomeone",
            "local\0filter.lfs.clean\nsh -c planted",
            "local\0filter.Planted.smudge\nplanted",
            "local\0filter.planted.process\nplanted",
            "local\0merge.planted.driver\nplanted %A",
            "local\0diff.planted.textconv\nplanted",
            "local\0diff.external\nplanted",
            "worktree\0gpg.program\nplanted",
            "local\0gpg.ssh.program\nplanted",
            "local\0core.sshcommand\nplanted",
            "local\0remote.origin.uploadpack\nplanted",
            "local\0remote.origin.receivepack\nplanted",
            "local\0remote.origin.url\n/srv/repo.git",
            "local\0user.email\nx@example.invalid",
            "local\0core.bare",
            "local\0filter.planted.smudge\nagain",
            "",
        ]
        .join("\0");
        let settings = neutralized(&listing);
        assert_eq!(
            settings,
            [
                "filter.lfs.clean=git-lfs clean -- %f",
                "filter.Planted.smudge=",
                "filter.planted.process=",
                "merge.planted.driver=",
                "diff.planted.textconv=",
                "diff.external=",
                "gpg.program=/usr/bin/gpg2",
                "gpg.ssh.program=ssh-keygen",
                "core.sshcommand=ssh",
                "remote.origin.uploadpack=git-upload-pack",
                "remote.origin.receivepack=git-receive-pack",
                "filter.planted.smudge=",
            ]
        );
        assert!(neutralized("").is_empty());
        assert!(neutralized("global\0filter.lfs.clean\ngit-lfs clean").is_empty());
    }

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
