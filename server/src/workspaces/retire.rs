//! `workspace.retire`, safe by default: what it refuses (a live or busy
//! agent, a repository that does not list the worktree, a worktree that is
//! not provably a clean checkout of its own branch, an unmerged branch
//! without confirmation) and, once all of that is proven, how it takes the
//! workspace down: the worktree removed without force, the branch deleted
//! only at the commit proven, the record kept as `retired`.

use std::path::Path;

use shard_protocol::ServerMessage;
use shard_protocol::workspace::{
    BranchDisposition, WorkspaceEvent, WorkspaceLifecycle, WorkspaceResult, WorkspaceRetire,
};

use super::records::WorkspaceRecord;
use super::status::Liveness;
use super::{WorkspaceError, Workspaces, checkout, git, home, no_workspace, target_ref};

impl Workspaces {
    /// `workspace.retire`, safe by default: refused while an agent is live
    /// or busy, while the worktree has changes, or when the repository that
    /// owns it cannot be found; the branch is deleted only when merged (or
    /// on the explicit `delete_confirmed` retry), or kept.
    pub async fn retire(
        &self,
        request: WorkspaceRetire,
    ) -> Result<WorkspaceResult, WorkspaceError> {
        let disposition = request.branch_disposition.unwrap_or(BranchDisposition::DeleteIfMerged);
        let mut records = self.records.lock().await;
        let Some(mut record) = records.get(&request.workspace_id).cloned() else {
            return Err(no_workspace(&request.workspace_id));
        };
        self.check_retirable(&record).await?;
        let worktree = Path::new(&record.worktree).to_path_buf();
        // Anything at the path is the worktree until proven otherwise: only
        // a path that is gone altogether retires without reading it.
        let here = std::fs::symlink_metadata(&worktree).is_ok();
        if here {
            self.prove_removable(&record).await?;
        }
        let delete_branch = branch_to_delete(&record, disposition).await?;
        take_down(&record, here, delete_branch).await?;
        self.mark_retired(&mut record)?;
        let workspace = self.detail(&record).await;
        records.insert(record.workspace_id.clone(), record);
        Ok(WorkspaceResult { workspace })
    }

    /// Refuses a workspace already retired, one its repository does not
    /// list as its worktree, and one with an agent busy or running in it.
    async fn check_retirable(&self, record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return Err(WorkspaceError::AlreadyRetired);
        }
        let repository = Path::new(&record.repository_cwd);
        let owns =
            git::git(repository, &["worktree", "list", "--porcelain"]).await.is_ok_and(|list| {
                list.lines()
                    .any(|line| line.strip_prefix("worktree ") == Some(record.worktree.as_str()))
            });
        if !owns {
            return Err(WorkspaceError::MissingAuthority);
        }
        let Liveness { live, busy } = self.liveness(record);
        if busy {
            return Err(WorkspaceError::Busy);
        }
        if live {
            return Err(WorkspaceError::Live);
        }
        Ok(())
    }

    /// What retire proves before it removes a worktree that is there: git
    /// reads it as a checkout of its own, its HEAD is its branch (so every
    /// commit it holds is on that branch), and it has no changes. Anything
    /// else is refused and nothing is touched.
    async fn prove_removable(&self, record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
        let worktree = &match checkout(record).await {
            Ok(checkout) => checkout,
            Err(WorkspaceError::Relinked) => return Err(WorkspaceError::Relinked),
            Err(_) => return Err(WorkspaceError::UnreadableCheckout),
        };
        let branch = git::branch_ref(&record.branch);
        if git::head_ref(worktree).await.as_deref() != Some(branch.as_str()) {
            return Err(WorkspaceError::HeadMoved { branch: record.branch.clone() });
        }
        let dirty = git::dirty_count(worktree).await.map_err(|source| {
            tracing::warn!(error = %source, "cannot read the worktree's status");
            WorkspaceError::UnreadableStatus { source }
        })?;
        if dirty > 0 {
            return Err(WorkspaceError::Dirty { dirty });
        }
        Ok(())
    }

    /// Records the workspace retired and announces it.
    fn mark_retired(&self, record: &mut WorkspaceRecord) -> Result<(), WorkspaceError> {
        let now = crate::clock::now_ms();
        record.lifecycle = WorkspaceLifecycle::Retired;
        record.retired_at = Some(now);
        record.updated_at = Some(now);
        record.save(&self.home).map_err(home)?;
        self.broadcast(ServerMessage::WorkspaceRetired(WorkspaceEvent {
            workspace: record.summary(),
        }));
        Ok(())
    }
}

/// The commit at which the branch is to be deleted, or `None` to keep it
/// (kept, or already gone). Deleting one not merged into the integration
/// target takes the explicit `delete_confirmed` retry: without it, a typed
/// `confirmation_required` refusal.
async fn branch_to_delete(
    record: &WorkspaceRecord,
    disposition: BranchDisposition,
) -> Result<Option<String>, WorkspaceError> {
    let repository = Path::new(&record.repository_cwd);
    let branch = git::branch_ref(&record.branch);
    let tip = git::commit_of(repository, &branch).await.ok();
    Ok(match (disposition, &tip) {
        (_, None) | (BranchDisposition::Keep, _) => None,
        (BranchDisposition::DeleteConfirmed, Some(tip)) => Some(tip.clone()),
        (BranchDisposition::DeleteIfMerged, Some(tip)) => {
            let target = target_ref(record).await;
            let contained = git::contains(repository, &target, tip).await.unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot tell whether the branch is merged");
                false
            });
            if !contained {
                return Err(WorkspaceError::Unmerged {
                    workspace_id: record.workspace_id.clone(),
                    branch: record.branch.clone(),
                    integration_target: record.integration_target.clone(),
                });
            }
            Some(tip.clone())
        }
    })
}

/// Removes the worktree (when `here`), prunes git's records of it, and
/// deletes the branch when `delete_branch` names the commit it must be at.
async fn take_down(
    record: &WorkspaceRecord,
    here: bool,
    delete_branch: Option<String>,
) -> Result<(), WorkspaceError> {
    let repository = Path::new(&record.repository_cwd);
    if here {
        // No `--force`: git itself refuses a worktree with changes, so
        // nothing written since the checks above is lost either.
        if let Err(source) = git::git(repository, &["worktree", "remove", &record.worktree]).await {
            tracing::warn!(error = %source, "cannot remove the worktree");
            return Err(WorkspaceError::WorktreeNotRemoved { source });
        }
    }
    let _ = git::git(repository, &["worktree", "prune"]).await;
    if let Some(tip) = delete_branch {
        // Only the exact branch, and only while it is at the commit just
        // proven (or confirmed): one that moved meanwhile is kept.
        let branch = git::branch_ref(&record.branch);
        if let Err(error) = git::delete_ref(repository, &branch, &tip).await {
            tracing::warn!(%error, "cannot delete the branch");
        }
    }
    Ok(())
}
