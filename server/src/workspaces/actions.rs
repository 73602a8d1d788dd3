//! What the three workspace actions share (docs/WORKSPACES.md, "Acting on
//! a workspace's result"): a dry run answers what the action would do and
//! a fingerprint of the state it read; the action itself reads the state
//! again, and does nothing unless it has the same fingerprint, so that it
//! does exactly what the person approved. `commit.rs`, `merge.rs` and
//! `push.rs` hold the actions themselves.

use std::collections::BTreeMap;

use shard_protocol::workspace::{ChangedPath, WorkspaceAction, WorkspaceLifecycle};

use super::git::{self, Git, GitError, Place};
use super::records::WorkspaceRecord;
use super::{WorkspaceError, Workspaces, no_workspace};

/// The most paths a preview or a refusal lists (`file_count` tells all).
pub(super) const MAX_LISTED: usize = 200;

/// The state an action read, as an opaque token: a digest of the action's
/// name and of every fact it depends on (commits, trees, refs).
pub(super) fn fingerprint(action: &str, facts: &[&str]) -> String {
    use sha2::Digest;
    let mut digest = sha2::Sha256::new();
    digest.update(action.as_bytes());
    for fact in facts {
        digest.update([0]);
        digest.update(fact.as_bytes());
    }
    crate::id::hex(&digest.finalize()[..16])
}

/// The fingerprint an action (not a dry run) was sent: refused without.
pub(super) fn asked_fingerprint(
    request: &WorkspaceAction,
    action: &'static str,
) -> Result<String, WorkspaceError> {
    request
        .fingerprint
        .clone()
        .filter(|fingerprint| !fingerprint.is_empty())
        .ok_or(WorkspaceError::FingerprintRequired { action })
}

/// Refuses an action whose state is not the one previewed.
pub(super) fn same_state(
    asked: &str,
    now: &str,
    action: &'static str,
) -> Result<(), WorkspaceError> {
    if asked == now { Ok(()) } else { Err(WorkspaceError::Stale { action }) }
}

/// What changes between two commits or trees.
pub(super) struct Changes {
    /// The first [`MAX_LISTED`] paths, with git's status letters.
    pub(super) listed: Vec<ChangedPath>,
    /// Every path.
    pub(super) all: Vec<String>,
}

/// `git diff-tree -r --name-status -z` between two commits or trees.
pub(super) async fn changed_paths<'a>(
    dir: impl Into<Place<'a>>,
    from: &str,
    to: &str,
) -> Result<Changes, GitError> {
    let args = ["diff-tree", "-r", "--no-renames", "--name-status", "-z", from, to];
    let out = git::git(dir, &args).await?;
    let mut fields = out.split('\0').filter(|field| !field.is_empty());
    let mut listed = Vec::new();
    let mut all = Vec::new();
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        if listed.len() < MAX_LISTED {
            listed.push(ChangedPath { status: status.to_owned(), path: path.to_owned() });
        }
        all.push(path.to_owned());
    }
    Ok(Changes { listed, all })
}

/// A count as the wire carries it.
pub(super) fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// "1 commit", "3 commits"; "1 file", "3 files".
pub(super) fn plural(n: u32, one: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") }
}

/// The number of commits in `range` (`A..B`, or `B --not …`).
pub(super) async fn commit_count<'a>(
    dir: impl Into<Place<'a>>,
    args: &[&str],
) -> Result<u32, GitError> {
    let mut all = vec!["rev-list", "--count"];
    all.extend(args);
    let out = git::git(dir, &all).await?;
    Ok(out.trim().parse().unwrap_or(0))
}

/// Whether `ancestor` is in `commit`'s history (both commit ids).
pub(super) async fn is_ancestor<'a>(
    dir: impl Into<Place<'a>>,
    ancestor: &str,
    commit: &str,
) -> Result<bool, GitError> {
    let args = ["merge-base", "--is-ancestor", ancestor, commit];
    Ok(Git::new(dir).accept(&[0, 1]).run(&args).await?.code == Some(0))
}

/// Refuses when git has no identity to make a commit with.
pub(super) async fn check_identity<'a>(dir: impl Into<Place<'a>>) -> Result<(), WorkspaceError> {
    let dir = dir.into();
    for variable in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
        if let Err(error) = git::git(dir, &["var", variable]).await {
            tracing::info!(%error, "git has no identity to commit with");
            return Err(WorkspaceError::NoIdentity);
        }
    }
    Ok(())
}

/// Refuses a checkout in the middle of a merge, rebase, cherry-pick or
/// revert: a commit or a merge there would drop what git is keeping for
/// it (a merge's second parent, the rest of a rebase). `checkout` names
/// it for the person.
pub(super) async fn check_settled<'a>(
    dir: impl Into<Place<'a>>,
    checkout: &str,
) -> Result<(), WorkspaceError> {
    let dir = dir.into();
    const STATES: [(&str, &str); 5] = [
        ("MERGE_HEAD", "a merge"),
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase"),
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
    ];
    for (name, what) in STATES {
        let path = git::git(dir, &["rev-parse", "--git-path", name])
            .await
            .map_err(failed("read the checkout's state"))?;
        if dir.dir().join(path.trim()).exists() {
            return Err(WorkspaceError::InProgress { checkout: checkout.to_owned(), what });
        }
    }
    Ok(())
}

/// A step of an action that git refused: logged, and named to the client.
pub(super) fn failed(what: &'static str) -> impl FnOnce(GitError) -> WorkspaceError {
    move |source| {
        tracing::warn!(error = %source, "workspace action: git could not {what}");
        WorkspaceError::ActionFailed { what, source }
    }
}

/// The record of `workspace_id`, refused when there is none or it is
/// retired (a copy).
pub(super) fn active_record(
    records: &BTreeMap<String, WorkspaceRecord>,
    workspace_id: &str,
) -> Result<WorkspaceRecord, WorkspaceError> {
    let record = records.get(workspace_id).cloned().ok_or_else(|| no_workspace(workspace_id))?;
    if record.lifecycle == WorkspaceLifecycle::Retired {
        return Err(WorkspaceError::Retired);
    }
    Ok(record)
}

impl Workspaces {
    /// The record of a workspace that is not retired (a copy), for a
    /// preview or an action that does not hold the records' lock.
    pub(super) async fn acting_on(
        &self,
        workspace_id: &str,
    ) -> Result<WorkspaceRecord, WorkspaceError> {
        active_record(&*self.records.lock().await, workspace_id)
    }
}

#[cfg(test)]
mod tests {
    use super::fingerprint;

    #[test]
    fn a_fingerprint_tells_actions_and_facts_apart() {
        let one = fingerprint("merge", &["abc", "def"]);
        assert_eq!(one.len(), 32);
        assert_eq!(one, fingerprint("merge", &["abc", "def"]));
        assert_ne!(one, fingerprint("push", &["abc", "def"]));
        assert_ne!(one, fingerprint("merge", &["abcd", "ef"]), "facts are delimited");
    }
}
