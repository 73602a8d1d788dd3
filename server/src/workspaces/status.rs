//! What a workspace is now: `workspace.list` (the records, by repository)
//! and `workspace.status` (git's view of the worktree, its agents'
//! liveness, and on request its diff). A worktree found gone or switched
//! off its branch moves the workspace into `conflict` (announced), and out
//! again once it is back.

use std::path::Path;

use shard_protocol::ServerMessage;
use shard_protocol::display::escaped;
use shard_protocol::types::RuntimeState;
use shard_protocol::workspace::{
    WorkspaceConflict, WorkspaceDetail, WorkspaceLifecycle, WorkspaceList, WorkspaceListResult,
    WorkspaceResult, WorkspaceState, WorkspaceStatus, WorkspaceSummary,
};

use super::records::WorkspaceRecord;
use super::{WorkspaceError, Workspaces, checkout, git, no_workspace, repository_of, target_ref};

/// Why a workspace whose worktree is gone is a tombstone (no paths).
pub(super) const MISSING: &str = "the worktree is missing (deleted or moved outside Shard)";
/// Why a workspace whose worktree's `.git` was pointed elsewhere is in
/// conflict (git runs nowhere in it until it is put back).
const RELINKED: &str = "the worktree's `.git` no longer points at its repository (changed outside Shard); `git worktree repair` in the repository puts it back";

/// Whether an agent working in a worktree has a process that runs (or
/// starts), and whether one is mid-turn.
pub(super) struct Liveness {
    pub(super) live: bool,
    pub(super) busy: bool,
}

impl Workspaces {
    /// `workspace.list`: by repository (the one `cwd` is in), retired ones
    /// only when asked.
    pub async fn list(
        &self,
        request: WorkspaceList,
    ) -> Result<WorkspaceListResult, WorkspaceError> {
        let repository = match &request.cwd {
            Some(cwd) => Some(repository_of(Path::new(cwd)).await?.1.display().to_string()),
            None => None,
        };
        let with_retired = request.include_retired.unwrap_or(false);
        let records = self.records.lock().await;
        let mut workspaces: Vec<WorkspaceSummary> = records
            .values()
            .filter(|record| {
                repository.as_ref().is_none_or(|repository| &record.repository_cwd == repository)
            })
            .filter(|record| with_retired || record.lifecycle != WorkspaceLifecycle::Retired)
            .map(WorkspaceRecord::summary)
            .collect();
        workspaces
            .sort_by(|a, b| (a.created_at, &a.workspace_id).cmp(&(b.created_at, &b.workspace_id)));
        Ok(WorkspaceListResult { workspaces })
    }

    /// `workspace.status`.
    pub async fn status(
        &self,
        request: WorkspaceStatus,
    ) -> Result<WorkspaceResult, WorkspaceError> {
        let record = {
            let records = self.records.lock().await;
            records.get(&request.workspace_id).cloned()
        };
        let Some(record) = record else {
            return Err(no_workspace(&request.workspace_id));
        };
        let mut workspace = self.detail(&record).await;
        workspace.summary.lifecycle = self.reconcile(&record.workspace_id, &workspace).await;
        let live = record.lifecycle != WorkspaceLifecycle::Retired;
        if request.include_diff == Some(true)
            && live
            && let Ok(checkout) = checkout(&record).await
        {
            let target = target_ref(&record).await;
            match git::diff_against(&checkout, &target).await {
                Ok(diff) => workspace.state.diff = Some(diff),
                Err(error) => tracing::warn!(%error, "cannot diff the workspace"),
            }
        }
        Ok(WorkspaceResult { workspace })
    }

    /// Moves a workspace into or out of `conflict` as `seen` (a fresh
    /// detail) finds its worktree. Answers the lifecycle now recorded.
    async fn reconcile(&self, id: &str, seen: &WorkspaceDetail) -> WorkspaceLifecycle {
        let mut records = self.records.lock().await;
        match records.get_mut(id) {
            Some(record) => self.settle(record, seen.state.conflict.as_deref()),
            None => seen.summary.lifecycle,
        }
    }

    /// Records `conflict` (or its end) on a live workspace, announcing a
    /// move into conflict with `workspace_conflict`.
    pub(super) fn settle(
        &self,
        record: &mut WorkspaceRecord,
        conflict: Option<&str>,
    ) -> WorkspaceLifecycle {
        let next = match (record.lifecycle, conflict) {
            (WorkspaceLifecycle::Active, Some(_)) => WorkspaceLifecycle::Conflict,
            (WorkspaceLifecycle::Conflict, None) => WorkspaceLifecycle::Active,
            (unchanged, _) => return unchanged,
        };
        record.lifecycle = next;
        record.updated_at = Some(crate::clock::now_ms());
        if let Err(error) = record.save(&self.home) {
            tracing::warn!(%error, "cannot record the workspace's conflict");
        }
        if let Some(reason) = conflict {
            self.broadcast(ServerMessage::WorkspaceConflict(WorkspaceConflict {
                workspace: record.summary(),
                reason: escaped(reason),
            }));
        }
        next
    }

    /// Whether an agent working in the worktree has a process that runs
    /// (or starts), and whether one is mid-turn: what status reports and
    /// what retire refuses. Every agent counts whose working directory is
    /// inside the worktree, bound to the workspace or not: subagents inherit
    /// their parent's directory.
    pub(super) fn liveness(&self, record: &WorkspaceRecord) -> Liveness {
        let worktree = Path::new(&record.worktree);
        let agents: Vec<_> = self
            .registry
            .list()
            .into_iter()
            .filter(|agent| {
                record.agent_ids.contains(&agent.agent_id)
                    || Path::new(&agent.cwd).starts_with(worktree)
            })
            .collect();
        let live = agents.iter().any(|agent| {
            matches!(agent.runtime_state, RuntimeState::Running | RuntimeState::Starting)
        });
        let busy = agents.iter().any(|agent| agent.status.is_active());
        Liveness { live, busy }
    }

    /// The detail of a workspace as it is now: git's view of its worktree
    /// (a missing one is a tombstone) and its agents' liveness.
    pub(super) async fn detail(&self, record: &WorkspaceRecord) -> WorkspaceDetail {
        let mut summary = record.summary();
        let Liveness { live, busy } = self.liveness(record);
        let mut detail = WorkspaceDetail {
            summary: summary.clone(),
            state: WorkspaceState {
                agent_ids: record.agent_ids.clone(),
                live: Some(live),
                busy: Some(busy),
                ..WorkspaceState::default()
            },
        };
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return detail;
        }
        let worktree = match checkout(record).await {
            Ok(worktree) => worktree,
            Err(WorkspaceError::Relinked) => {
                detail.state.conflict = Some(RELINKED.to_owned());
                return detail;
            }
            Err(_) => {
                detail.state.tombstone = Some(true);
                detail.state.conflict = Some(MISSING.to_owned());
                return detail;
            }
        };
        let worktree = &worktree;
        let branch = git::branch_ref(&record.branch);
        if git::head_ref(worktree).await.as_deref() != Some(branch.as_str()) {
            detail.state.conflict = Some(format!(
                "the worktree is no longer on branch `{}` (switched outside Shard)",
                escaped(&record.branch)
            ));
        }
        summary.head_fingerprint = git::commit_of(worktree, "HEAD")
            .await
            .ok()
            .map(|commit| commit.chars().take(12).collect());
        detail.summary = summary;
        detail.state.dirty_files = git::dirty_count(worktree).await.ok();
        let target = target_ref(record).await;
        if let Ok((ahead, behind)) = git::ahead_behind(worktree, &branch, &target).await {
            detail.state.ahead = Some(ahead);
            detail.state.behind = Some(behind);
        }
        detail.state.merged = git::merged(worktree, &branch, &target).await.ok();
        detail
    }
}
