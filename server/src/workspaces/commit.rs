//! `workspace.commit`: everything in the worktree (what `git add -A` would
//! take), committed on the workspace's branch with the person's message.
//!
//! The tree to commit is made in a scratch copy of the worktree's index, so
//! a preview touches neither the index nor the files. The commit itself is
//! that very tree (`git commit-tree`), put on the branch only if the branch
//! is still where the preview saw it (`git update-ref` with the old value),
//! and the real index then catches up (`git reset`, which leaves the files
//! alone). No hook runs: the person approved a tree, and a hook could change
//! it, or run code an agent wrote, on their click.

use std::path::PathBuf;

use shard_protocol::display::{escaped, has_hidden};
use shard_protocol::workspace::{ChangedPath, WorkspaceActed, WorkspaceAction, WorkspacePreview};

use super::actions::{
    active_record, asked_fingerprint, changed_paths, check_identity, check_settled, count, failed,
    fingerprint, plural, same_state,
};
use super::git::{self, Checkout, Git};
use super::records::WorkspaceRecord;
use super::status::Liveness;
use super::{WorkspaceError, Workspaces, checkout};

/// The longest commit message (bytes).
const MAX_MESSAGE: usize = 64 * 1024;

/// What a commit of everything in the worktree would be.
struct Snapshot {
    /// The commit the branch is at (the new commit's parent).
    head: String,
    /// The tree of everything in the worktree.
    tree: String,
    files: Vec<ChangedPath>,
    file_count: u32,
    fingerprint: String,
    /// The worktree, as git is told of it.
    checkout: Checkout,
}

impl Workspaces {
    /// `workspace.commit` with `dry_run`: what a commit would take.
    pub async fn preview_commit(
        &self,
        request: WorkspaceAction,
    ) -> Result<WorkspacePreview, WorkspaceError> {
        let record = self.acting_on(&request.workspace_id).await?;
        let snapshot = self.snapshot(&record).await?;
        let summary = format!(
            "Commits {} on branch `{}`: everything in the worktree, new files included (ignored ones aside).",
            plural(snapshot.file_count, "changed file"),
            escaped(&record.branch)
        );
        Ok(WorkspacePreview {
            workspace_id: record.workspace_id.clone(),
            summary,
            fingerprint: snapshot.fingerprint,
            branch: record.branch.clone(),
            files: snapshot.files,
            file_count: snapshot.file_count,
            commits: None,
            merge: None,
            target: None,
            conflicts: Vec::new(),
            remote: None,
            remote_branch: None,
            remote_url: None,
        })
    }

    /// `workspace.commit`: the tree the preview showed, committed on the
    /// branch, or a refusal with nothing changed.
    pub async fn commit(&self, request: WorkspaceAction) -> Result<WorkspaceActed, WorkspaceError> {
        let message = commit_message(request.message.as_deref())?;
        let asked = asked_fingerprint(&request, "commit")?;
        // One change at a time, as for creates and retirements.
        let records = self.records.lock().await;
        let record = active_record(&records, &request.workspace_id)?;
        let snapshot = self.snapshot(&record).await?;
        same_state(&asked, &snapshot.fingerprint, "commit")?;
        let acting = Git::new(&snapshot.checkout);
        let args = ["commit-tree", &snapshot.tree, "-p", &snapshot.head, "-m", &message];
        let made = acting.run(&args).await.map_err(failed("make the commit"))?;
        let commit = made.text.trim().to_owned();
        let branch = git::branch_ref(&record.branch);
        let reflog = "shard: commit";
        let args = ["update-ref", "-m", reflog, &branch, &commit, &snapshot.head];
        if let Err(error) = acting.run(&args).await {
            tracing::info!(%error, "the branch moved before the commit");
            return Err(WorkspaceError::Stale { action: "commit" });
        }
        // The index catches up with the new commit; the files stay as they
        // are (anything written since the preview shows as a change).
        if let Err(error) = acting.run(&["reset", "--quiet"]).await {
            tracing::warn!(%error, "committed, but the worktree's index did not catch up");
        }
        drop(records);
        let summary = format!(
            "Committed {} on `{}` as {}.",
            plural(snapshot.file_count, "file"),
            escaped(&record.branch),
            short(&commit)
        );
        let workspace = self.detail(&record).await;
        Ok(WorkspaceActed { summary, commit, workspace })
    }

    /// Everything a commit needs, read afresh: refused unless the worktree
    /// is there, on its branch, with nobody working in it, with something
    /// to commit and an identity to commit as.
    async fn snapshot(&self, record: &WorkspaceRecord) -> Result<Snapshot, WorkspaceError> {
        let checkout = checkout(record).await?;
        let worktree = &checkout;
        check_settled(worktree, "the worktree").await?;
        let branch = git::branch_ref(&record.branch);
        if git::head_ref(worktree).await.as_deref() != Some(branch.as_str()) {
            return Err(WorkspaceError::OffBranch { branch: record.branch.clone() });
        }
        // An agent mid-turn may be half-way through its edits.
        let Liveness { busy, .. } = self.liveness(record);
        if busy {
            return Err(WorkspaceError::Busy);
        }
        let head = git::commit_of(worktree, &branch)
            .await
            .map_err(|_| WorkspaceError::NoBranch { branch: record.branch.clone() })?;
        let tree = tree_of_everything(worktree, &head).await?;
        let changes =
            changed_paths(worktree, &head, &tree).await.map_err(failed("list the changes"))?;
        if changes.all.is_empty() {
            return Err(WorkspaceError::NothingToCommit);
        }
        check_identity(worktree).await?;
        let fingerprint = fingerprint("commit", &[&branch, &head, &tree]);
        let file_count = count(changes.all.len());
        Ok(Snapshot { head, tree, files: changes.listed, file_count, fingerprint, checkout })
    }
}

/// The tree `git add -A` would make of the worktree, made in a scratch
/// copy of its index (the real one is never touched). Git writes the
/// tree's objects, which nothing refers to until a commit does.
async fn tree_of_everything(worktree: &Checkout, head: &str) -> Result<String, WorkspaceError> {
    let index = worktree.git_dir.join("index");
    let scratch = Scratch(index.with_file_name(format!("index.shard-{}", crate::id::random_hex())));
    let with_scratch = Git::new(worktree).env("GIT_INDEX_FILE", scratch.0.as_os_str());
    // The real index's copy keeps its cached file stats, so nothing
    // unchanged is read again; without one, the branch's tree will do.
    if let Err(error) = std::fs::copy(&index, &scratch.0) {
        tracing::debug!(%error, "no index to copy: starting from the branch");
        with_scratch.run(&["read-tree", head]).await.map_err(failed("read the branch"))?;
    }
    with_scratch.run(&["add", "-A"]).await.map_err(failed("read the worktree's changes"))?;
    let tree = with_scratch.run(&["write-tree"]).await.map_err(failed("write the tree"))?;
    Ok(tree.text.trim().to_owned())
}

/// A scratch index, removed (with any lock git left) when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}

/// The message as git will keep it: lines without trailing blanks, no
/// blank lines around; refused when empty, too long, or holding a hidden
/// character.
fn commit_message(message: Option<&str>) -> Result<String, WorkspaceError> {
    let message = message.unwrap_or("");
    if message.len() > MAX_MESSAGE {
        return Err(WorkspaceError::MessageTooLong { max: MAX_MESSAGE });
    }
    if has_hidden(message) {
        return Err(WorkspaceError::HiddenCharacters { field: "message" });
    }
    let lines: Vec<&str> = message.lines().map(str::trim_end).collect();
    let text = lines.join("\n");
    let text = text.trim_matches('\n');
    if text.trim().is_empty() {
        return Err(WorkspaceError::EmptyMessage);
    }
    Ok(text.to_owned())
}

/// A commit id as people read it.
pub(super) fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    use super::commit_message;
    use crate::workspaces::WorkspaceError;

    #[test]
    fn a_message_is_tidied_and_an_empty_or_hidden_one_refused() {
        let tidy = commit_message(Some("\n\nParse the header  \r\n\r\nIt was read twice.\t\n\n"));
        assert_eq!(tidy.ok().as_deref(), Some("Parse the header\n\nIt was read twice."));
        assert!(matches!(commit_message(Some(" \n \n")), Err(WorkspaceError::EmptyMessage)));
        assert!(matches!(commit_message(None), Err(WorkspaceError::EmptyMessage)));
        assert!(matches!(
            commit_message(Some("fix \u{202e}txt.exe")),
            Err(WorkspaceError::HiddenCharacters { field: "message" })
        ));
        let long = "x".repeat(super::MAX_MESSAGE + 1);
        assert!(matches!(commit_message(Some(&long)), Err(WorkspaceError::MessageTooLong { .. })));
    }
}
