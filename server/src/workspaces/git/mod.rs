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

mod diff;
mod repo;

pub use self::diff::{diff_against, parse_unified};
pub use self::repo::{
    Link, ahead_behind, branch_exists, branch_ref, commit_of, common_dir, contains, delete_ref,
    dirty_count, exact_ref, head_ref, link, linked_git_dir, main_checkout, merged, toplevel,
    valid_branch_name,
};

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
pub(super) struct Bounded {
    pub text: String,
    /// Git's exit code (one of those the caller accepts).
    pub code: Option<i32>,
    /// The cap was reached: git was stopped and `text` is its beginning.
    pub truncated: bool,
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
pub(super) async fn run(
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
pub const PINNED: [&str; 10] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "protocol.allow=never",
    "protocol.ext.allow=never",
    // No collection or maintenance, here or in a remote on this machine
    // pushed to: a detached one would outlive the command (and be cut
    // short as an orphan), one in the foreground would hold it up.
    "gc.auto=0",
    "maintenance.auto=false",
    "receive.autogc=false",
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
        // Held until git has been waited for.
        let (mut child, _kept) =
            crate::children::spawn(&mut command).map_err(|source| GitError::Spawn { source })?;
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
