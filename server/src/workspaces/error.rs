//! Why a `workspace.*` command is refused or failed, and the one place each
//! reason becomes a wire error: its code, its `data` (the `kind` a client
//! branches on, and for some the facts it needs) and its message, which is
//! the reason's text. Names git holds (branches, targets) are shown through
//! [`escaped`] where a client reads them; git's own output never is.

use serde_json::{Value, json};
use shard_protocol::display::escaped;
use shard_protocol::workspace::{BranchDisposition, ConfirmationRequired};
use shard_protocol::{ErrorCode, WireError};

use super::git::GitError;

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("no workspace `{workspace_id}`")]
    NotFound { workspace_id: String },
    #[error("`cwd` is not in a git repository")]
    NotARepository,
    #[error("`cwd` must be an absolute path to a directory")]
    BadCwd,
    #[error("`label` is longer than {max} characters")]
    LabelTooLong { max: usize },
    /// A label or branch with control or invisible formatting characters.
    #[error("`{field}` holds control or invisible formatting characters")]
    HiddenCharacters { field: &'static str },
    #[error("`{}` is not a valid branch name", escaped(.branch))]
    BadBranch { branch: String },
    #[error("the base `{}` names no commit", escaped(.base_ref))]
    BadBaseRef { base_ref: String },
    #[error("the branch to merge into, `{}`, names no commit", escaped(.target))]
    BadIntegrationTarget { target: String },
    #[error("the repository has no commit to start from")]
    UnbornBase,
    #[error(
        "the checkout has {dirty} uncommitted changes, which a new worktree would not have; commit or stash them, or give `base_ref`"
    )]
    DirtyBase { dirty: u32 },
    #[error("branch `{branch}` already exists")]
    BranchExists { branch: String },
    #[error("the workspace's directory already exists")]
    PathCollision,
    #[error("git could not create the worktree")]
    WorktreeNotAdded { source: GitError },
    /// `workspace.attach` to a retired workspace.
    #[error("the workspace is retired")]
    Retired,
    /// `workspace.retire` of a retired workspace.
    #[error("the workspace is already retired")]
    AlreadyRetired,
    #[error("the workspace's worktree is missing")]
    Missing,
    #[error(
        "the repository that owns this worktree cannot be found or does not list it; nothing was removed"
    )]
    MissingAuthority,
    #[error("an agent in this workspace is working; abort or let it finish first")]
    Busy,
    #[error("an agent in this workspace is running; terminate it first")]
    Live,
    /// What is at the worktree's path is no checkout git can read.
    #[error(
        "git cannot read the worktree as a checkout (its `.git` link is missing or broken), so what it holds cannot be checked; nothing was removed"
    )]
    UnreadableCheckout,
    #[error(
        "the worktree is not on branch `{branch}` (detached or switched outside Shard), so its commits may be on no branch; switch it back, or keep its work on a branch, first; nothing was removed"
    )]
    HeadMoved { branch: String },
    #[error("the worktree's state cannot be read; nothing was removed")]
    UnreadableStatus { source: GitError },
    #[error("the worktree has {dirty} uncommitted changes; commit or discard them first")]
    Dirty { dirty: u32 },
    /// Deleting the branch would lose commits: the `delete_confirmed`
    /// retry is needed.
    #[error(
        "branch `{}` is not merged into `{}`: deleting it loses its commits",
        escaped(.branch),
        escaped(.integration_target)
    )]
    Unmerged { workspace_id: String, branch: String, integration_target: String },
    #[error(
        "git could not remove the worktree (it may have changed since it was checked); nothing was deleted"
    )]
    WorktreeNotRemoved { source: GitError },
    /// A workspace action (`workspace.commit`, `.merge`, `.push`) without
    /// the fingerprint of a preview.
    #[error(
        "`fingerprint` is needed: preview the {action} first (`dry_run: true`) and send back the fingerprint it answered"
    )]
    FingerprintRequired { action: &'static str },
    /// What an action would do changed since its preview.
    #[error(
        "the workspace changed since the preview, so nothing was done; preview the {action} again"
    )]
    Stale { action: &'static str },
    #[error("the commit message is empty")]
    EmptyMessage,
    #[error("the commit message is longer than {max} bytes")]
    MessageTooLong { max: usize },
    #[error("the worktree has no changes to commit")]
    NothingToCommit,
    #[error(
        "git has no name and email to make a commit with: set `user.name` and `user.email` (in the repository or your git config) first"
    )]
    NoIdentity,
    /// A commit in a worktree that is not on its branch.
    #[error(
        "the worktree is not on branch `{}` (detached or switched outside Shard); switch it back first; nothing was committed",
        escaped(.branch)
    )]
    OffBranch { branch: String },
    /// A commit in a worktree, or a merge into a checkout, in the middle of
    /// a merge, rebase, cherry-pick or revert.
    #[error(
        "{checkout} is in the middle of {what}: finish or abort it there first; nothing was done"
    )]
    InProgress { checkout: String, what: &'static str },
    #[error("branch `{}` no longer exists", escaped(.branch))]
    NoBranch { branch: String },
    #[error(
        "merging needs git 2.38 or later (for `git merge-tree --write-tree`); this is git {version}"
    )]
    GitTooOld { version: String },
    #[error(
        "`{}`, which this workspace merges into, is not a local branch (it is a tag, a remote-tracking branch or a commit): there is no branch to merge into",
        escaped(.target)
    )]
    TargetNotBranch { target: String },
    #[error("`{}` already has every commit of `{}`: nothing to merge", escaped(.target), escaped(.branch))]
    NothingToMerge { branch: String, target: String },
    #[error(
        "`{}` does not merge cleanly into `{}`: {} in conflict ({}); merge `{}` into the workspace and resolve them there first; nothing was merged",
        escaped(.branch),
        escaped(.target),
        files(.paths.len()),
        listed(.paths),
        escaped(.target)
    )]
    MergeConflict { branch: String, target: String, paths: Vec<String> },
    /// The target is checked out where uncommitted changes touch files the
    /// merge changes.
    #[error(
        "`{}` is checked out in {checkout}, where uncommitted changes touch {} the merge changes ({}); commit or stash them there first; nothing was merged",
        escaped(.target),
        files(.paths.len()),
        listed(.paths)
    )]
    CheckoutDirty { target: String, checkout: String, paths: Vec<String> },
    #[error(
        "git could not update the files of {checkout}, where `{}` is checked out (a file there would be overwritten); nothing was merged",
        escaped(.target)
    )]
    CheckoutBlocked { target: String, checkout: String, source: GitError },
    /// The worktree's `.git` names another git directory than the one it
    /// was made with: whoever wrote it chose what git would run there.
    #[error(
        "the worktree's `.git` no longer points at its repository (changed outside Shard), so Shard runs no git there; `git worktree repair` in the repository puts it back"
    )]
    Relinked,
    #[error(
        "no remote to push to: name one in `config.toml` (`[workspaces]` `push_remote = \"origin\"`)"
    )]
    NoPushRemote,
    #[error(
        "the repository has no remote `{remote}` (`[workspaces] push_remote` in `config.toml`)"
    )]
    UnknownRemote { remote: String },
    /// The remote's URL is not one value, or the user's git rewrites it
    /// into one it rewrites again: the preview could not name where the
    /// push goes.
    #[error("the URL of remote `{remote}` cannot be named exactly ({why}), so nothing is pushed")]
    UnclearRemote { remote: String, why: &'static str },
    /// `config.toml` cannot be read (the reason, which names its path, is
    /// logged).
    #[error("config.toml cannot be read or is not valid; the daemon's log says why")]
    Config { source: anyhow::Error },
    #[error("`{remote}` already has branch `{}` at this commit: nothing to push", escaped(.branch))]
    NothingToPush { remote: String, branch: String },
    #[error(
        "`{remote}` has commits on branch `{}` that this branch lacks: pushing would drop them, and Shard never forces a push; bring them into the workspace first",
        escaped(.branch)
    )]
    NotFastForward { remote: String, branch: String },
    /// Git could not reach the remote, or the remote refused the push.
    #[error(
        "git could not {what} `{remote}` (unreachable, refused, or no credentials without a prompt; the daemon's log says why); nothing was pushed"
    )]
    PushFailed { what: &'static str, remote: String, source: GitError },
    /// A step of an action that git refused, named for the client (git's
    /// own words go to the log).
    #[error("git could not {what}")]
    ActionFailed { what: &'static str, source: GitError },
    /// The create's record could not be written (the worktree was undone).
    #[error("cannot record the workspace: {source:#}")]
    NotRecorded { source: anyhow::Error },
    /// A write under the daemon's home failed (a record, the worktrees'
    /// directory).
    #[error("{source}")]
    Home { source: anyhow::Error },
    #[error("{0}")]
    Git(#[from] GitError),
    /// The agent registry refused the launch: already a wire error, whose
    /// data may name the agent it made.
    #[error("{}", .0.message)]
    Launch(WireError),
}

impl WorkspaceError {
    fn code(&self) -> ErrorCode {
        use WorkspaceError::*;
        match self {
            NotFound { .. } => ErrorCode::NotFound,
            NotARepository | BadCwd | LabelTooLong { .. } | HiddenCharacters { .. } => {
                ErrorCode::InvalidRequest
            }
            BadBranch { .. } | BadBaseRef { .. } | BadIntegrationTarget { .. } => {
                ErrorCode::InvalidRequest
            }
            FingerprintRequired { .. } | EmptyMessage | MessageTooLong { .. } => {
                ErrorCode::InvalidRequest
            }
            NotRecorded { .. } | Home { .. } | Git(_) | Config { .. } => ErrorCode::InternalError,
            UnbornBase
            | DirtyBase { .. }
            | BranchExists { .. }
            | PathCollision
            | WorktreeNotAdded { .. }
            | Retired
            | AlreadyRetired
            | Missing
            | Relinked
            | MissingAuthority
            | Busy
            | Live
            | UnreadableCheckout
            | HeadMoved { .. }
            | UnreadableStatus { .. }
            | Dirty { .. }
            | Unmerged { .. }
            | WorktreeNotRemoved { .. }
            | Stale { .. }
            | NothingToCommit
            | NoIdentity
            | OffBranch { .. }
            | InProgress { .. }
            | NoBranch { .. }
            | GitTooOld { .. }
            | TargetNotBranch { .. }
            | NothingToMerge { .. }
            | MergeConflict { .. }
            | CheckoutDirty { .. }
            | CheckoutBlocked { .. }
            | NoPushRemote
            | UnknownRemote { .. }
            | UnclearRemote { .. }
            | NothingToPush { .. }
            | NotFastForward { .. }
            | PushFailed { .. }
            | ActionFailed { .. } => ErrorCode::Conflict,
            Launch(wire) => wire.code.clone(),
        }
    }

    /// `error.data`: the `kind` of a typed refusal, and what else a client
    /// needs to act on it.
    fn data(&self) -> Option<Value> {
        use WorkspaceError::*;
        let kind = match self {
            NotARepository => "not_a_repository",
            BadCwd => "bad_cwd",
            BadBranch { .. } => "bad_branch",
            BadBaseRef { .. } => "bad_base_ref",
            BadIntegrationTarget { .. } => "bad_integration_target",
            UnbornBase => "unborn_base",
            DirtyBase { .. } => "dirty_base",
            BranchExists { .. } => "branch_exists",
            PathCollision => "path_collision",
            WorktreeNotAdded { .. } | WorktreeNotRemoved { .. } => "git_failed",
            Retired | AlreadyRetired => "retired",
            Missing => "missing",
            Relinked => return Some(json!({"kind": "unsafe", "problem": "relinked"})),
            MissingAuthority => "missing_authority",
            Busy => "busy",
            Live => "live",
            UnreadableCheckout | UnreadableStatus { .. } => {
                return Some(json!({"kind": "unsafe", "problem": "unreadable"}));
            }
            HeadMoved { .. } => return Some(json!({"kind": "unsafe", "problem": "head_moved"})),
            Dirty { dirty } => return Some(json!({"kind": "dirty", "dirty_files": dirty})),
            Unmerged { workspace_id, .. } => {
                let confirm = ConfirmationRequired {
                    kind: "confirmation_required".to_owned(),
                    workspace_id: workspace_id.clone(),
                    reason: self.to_string(),
                    confirmation_disposition: BranchDisposition::DeleteConfirmed,
                };
                return Some(serde_json::to_value(confirm).unwrap_or_default());
            }
            FingerprintRequired { .. } => "fingerprint_required",
            Stale { .. } => "stale",
            EmptyMessage | MessageTooLong { .. } => "bad_message",
            NothingToCommit => "nothing_to_commit",
            NoIdentity => "no_identity",
            OffBranch { .. } => return Some(json!({"kind": "unsafe", "problem": "head_moved"})),
            InProgress { .. } => "in_progress",
            NoBranch { .. } => "no_branch",
            GitTooOld { .. } => "git_too_old",
            TargetNotBranch { .. } => "target_not_branch",
            NothingToMerge { .. } => "nothing_to_merge",
            MergeConflict { paths, .. } => {
                return Some(json!({"kind": "merge_conflict", "paths": paths}));
            }
            CheckoutDirty { paths, .. } => {
                return Some(json!({"kind": "checkout_dirty", "paths": paths}));
            }
            CheckoutBlocked { .. } => "checkout_blocked",
            NoPushRemote => "no_push_remote",
            UnknownRemote { .. } => "unknown_remote",
            UnclearRemote { .. } => "unclear_remote",
            NothingToPush { .. } => "nothing_to_push",
            NotFastForward { .. } => "not_fast_forward",
            PushFailed { .. } => "push_failed",
            ActionFailed { .. } => "git_failed",
            Launch(wire) => return wire.data.clone(),
            NotFound { .. }
            | LabelTooLong { .. }
            | HiddenCharacters { .. }
            | NotRecorded { .. }
            | Home { .. }
            | Config { .. }
            | Git(_) => return None,
        };
        Some(json!({"kind": kind}))
    }
}

/// "1 file", "3 files".
fn files(count: usize) -> String {
    if count == 1 { "1 file".to_owned() } else { format!("{count} files") }
}

/// The first paths of a list, escaped, and how many more there are.
fn listed(paths: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text =
        paths.iter().take(SHOWN).map(|path| escaped(path)).collect::<Vec<_>>().join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    text
}

impl From<WorkspaceError> for WireError {
    fn from(error: WorkspaceError) -> Self {
        if let WorkspaceError::Launch(wire) = error {
            return wire;
        }
        let wire = WireError::new(error.code(), error.to_string());
        match error.data() {
            Some(data) => wire.with_data(data),
            None => wire,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use shard_protocol::{ErrorCode, WireError};

    use super::WorkspaceError;

    #[test]
    fn a_refusal_carries_its_code_and_kind() {
        let wire = WireError::from(WorkspaceError::BranchExists { branch: "feature".to_owned() });
        assert_eq!(wire.code, ErrorCode::Conflict);
        assert_eq!(wire.message, "branch `feature` already exists");
        assert_eq!(wire.data, Some(json!({"kind": "branch_exists"})));
        let wire = WireError::from(WorkspaceError::Dirty { dirty: 2 });
        assert_eq!(wire.data, Some(json!({"kind": "dirty", "dirty_files": 2})));
        let wire = WireError::from(WorkspaceError::NotFound { workspace_id: "ws-1".to_owned() });
        assert_eq!((wire.code, wire.data), (ErrorCode::NotFound, None));
    }

    #[test]
    fn a_refusal_about_the_base_or_target_names_no_protocol_field() {
        let refusals = [
            WorkspaceError::BadBaseRef { base_ref: "v9".to_owned() },
            WorkspaceError::BadIntegrationTarget { target: "v9".to_owned() },
            WorkspaceError::TargetNotBranch { target: "v1.0".to_owned() },
        ];
        for refusal in refusals {
            let text = refusal.to_string();
            assert!(!text.contains("integration") && !text.contains("base_ref"), "{text}");
            assert!(text.contains("`v"), "names what was given: {text}");
        }
    }

    #[test]
    fn an_unmerged_branch_asks_for_confirmation_with_names_escaped() {
        let wire = WireError::from(WorkspaceError::Unmerged {
            workspace_id: "ws-1".to_owned(),
            branch: "release\u{202e}main".to_owned(),
            integration_target: "main".to_owned(),
        });
        assert_eq!(wire.code, ErrorCode::Conflict);
        let data = wire.data.unwrap_or_default();
        assert_eq!(data["kind"], "confirmation_required");
        assert_eq!(data["workspace_id"], "ws-1");
        assert_eq!(data["reason"], wire.message.as_str());
        assert!(wire.message.contains("release\\u{202E}main"), "{}", wire.message);
    }

    #[test]
    fn a_launch_refusal_passes_through_unchanged() {
        let refused = WireError::new(ErrorCode::NotFound, "unknown model `x`")
            .with_data(json!({"agent_id": "agent-1"}));
        assert_eq!(WireError::from(WorkspaceError::Launch(refused.clone())), refused);
    }
}
