//! Workspaces (PROTOCOL.md §10.1a, docs/WORKSPACES.md): one git worktree
//! per workspace, on its own branch, recorded durably under
//! `$SHARD_HOME/workspaces/`, each launching fresh agents in it. Creation
//! checks everything it can before touching git, holds one lock so that two
//! creates cannot race for a branch, and undoes what it made when a later
//! step fails. What clients see never names a git-dir or common-dir, and
//! never carries git's own output.

pub mod git;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use shard_protocol::display::{escaped, has_hidden};
use shard_protocol::orchestrator::AgentCreate;
use shard_protocol::types::RuntimeState;
use shard_protocol::workspace::{
    BranchDisposition, ConfirmationRequired, WorkspaceAttach, WorkspaceAttached, WorkspaceConflict,
    WorkspaceCreate, WorkspaceDetail, WorkspaceEvent, WorkspaceLaunch, WorkspaceLaunchResult,
    WorkspaceLifecycle, WorkspaceList, WorkspaceListResult, WorkspaceResult, WorkspaceRetire,
    WorkspaceStatus, WorkspaceSummary,
};
use shard_protocol::{Envelope, ErrorCode, ServerMessage, WireError};

use crate::agents::Wire;
use crate::agents::registry::Registry;

pub const RECORD_VERSION: u32 = 1;
/// Why a workspace whose worktree is gone is a tombstone (no paths).
const MISSING: &str = "the worktree is missing (deleted or moved outside Shard)";
/// The longest label (characters).
const MAX_LABEL: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceRecord {
    pub version: u32,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub branch: String,
    pub base_ref: String,
    pub base_commit: String,
    pub integration_target: String,
    /// `integration_target` as an exact ref (or commit id), resolved once at
    /// creation: every later check names it so. Records older than this
    /// field resolve it at each use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_ref: Option<String>,
    /// The repository's main checkout.
    pub repository_cwd: String,
    /// The worktree's checkout directory.
    pub worktree: String,
    pub lifecycle: WorkspaceLifecycle,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<u64>,
    #[serde(default)]
    pub agent_ids: Vec<String>,
}

fn records_dir(home: &Path) -> PathBuf {
    home.join("workspaces")
}

impl WorkspaceRecord {
    fn save(&self, home: &Path) -> anyhow::Result<()> {
        let dir = records_dir(home);
        crate::home::prepare_dir(&dir)?;
        let bytes = serde_json::to_vec_pretty(self)?;
        crate::home::write_private(&dir.join(format!("{}.json", self.workspace_id)), &bytes)?;
        Ok(())
    }

    fn load_all(home: &Path) -> Vec<WorkspaceRecord> {
        let Ok(entries) = std::fs::read_dir(records_dir(home)) else { return Vec::new() };
        entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
            .filter_map(|path| {
                let text = std::fs::read_to_string(&path).ok()?;
                match serde_json::from_str(&text) {
                    Ok(record) => Some(record),
                    Err(error) => {
                        tracing::error!(path = %path.display(), %error, "unreadable workspace record skipped");
                        None
                    }
                }
            })
            .collect()
    }

    fn summary(&self) -> WorkspaceSummary {
        WorkspaceSummary {
            workspace_id: self.workspace_id.clone(),
            label: self.label.clone(),
            cwd: self.worktree.clone(),
            repository_cwd: Some(self.repository_cwd.clone()),
            ownership: Some("owned".to_owned()),
            lifecycle: self.lifecycle,
            branch: Some(self.branch.clone()),
            base_ref: Some(self.base_ref.clone()),
            integration_target: Some(self.integration_target.clone()),
            head_fingerprint: None,
            created_at: self.created_at,
            updated_at: self.updated_at,
            retired_at: self.retired_at,
            agent_count: u32::try_from(self.agent_ids.len()).unwrap_or(u32::MAX),
        }
    }
}

pub struct Workspaces {
    registry: Arc<Registry>,
    home: PathBuf,
    /// Every record, and the lock that makes each change one at a time
    /// (held across the git commands of a create: two creates never race).
    records: tokio::sync::Mutex<BTreeMap<String, WorkspaceRecord>>,
}

/// A typed refusal: `code`, a message, and `data.kind`.
fn refusal(code: ErrorCode, kind: &str, message: impl Into<String>) -> WireError {
    WireError::new(code, message).with_data(json!({"kind": kind}))
}

fn internal(why: impl std::fmt::Display) -> WireError {
    WireError::new(ErrorCode::InternalError, why.to_string())
}

/// A label as a branch-name piece: lower-case letters, digits and dashes.
fn slug(label: &str) -> String {
    let mut slug = String::new();
    for c in label.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.trim_end_matches('-').chars().take(40).collect()
}

impl Workspaces {
    pub fn load(registry: Arc<Registry>) -> Arc<Self> {
        let home = registry.context.home.clone();
        let records = WorkspaceRecord::load_all(&home)
            .into_iter()
            .map(|record| (record.workspace_id.clone(), record))
            .collect();
        Arc::new(Self { registry, home, records: tokio::sync::Mutex::new(records) })
    }

    fn broadcast(&self, message: ServerMessage) {
        let wire = Wire::from(Envelope::new(message).to_json());
        self.registry.context.broadcast.broadcast(&wire);
    }

    /// `workspace.create`: a worktree on a new branch, recorded, and a fresh
    /// agent in it.
    pub async fn create(
        &self,
        request: WorkspaceCreate,
    ) -> Result<WorkspaceLaunchResult, WireError> {
        if request.label.as_ref().is_some_and(|label| label.chars().count() > MAX_LABEL) {
            return Err(WireError::new(
                ErrorCode::InvalidRequest,
                format!("`label` is longer than {MAX_LABEL} characters"),
            ));
        }
        // A name a person tells apart by reading it: nothing hidden in it.
        for (field, value) in [("label", &request.label), ("branch", &request.branch)] {
            if value.as_deref().is_some_and(has_hidden) {
                return Err(WireError::new(
                    ErrorCode::InvalidRequest,
                    format!("`{field}` holds control or invisible formatting characters"),
                ));
            }
        }
        let cwd = Path::new(&request.cwd);
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(refusal(
                ErrorCode::InvalidRequest,
                "bad_cwd",
                "`cwd` must be an absolute path to a directory",
            ));
        }
        let (toplevel, repository) = repository_of(cwd).await?;
        let base_ref = request.base_ref.clone().unwrap_or_else(|| "HEAD".to_owned());
        let Ok(base_commit) = git::commit_of(&toplevel, &base_ref).await else {
            return Err(if base_ref == "HEAD" {
                refusal(
                    ErrorCode::Conflict,
                    "unborn_base",
                    "the repository has no commit to start from",
                )
            } else {
                refusal(
                    ErrorCode::InvalidRequest,
                    "bad_base_ref",
                    format!("`base_ref` `{base_ref}` names no commit"),
                )
            });
        };
        if base_ref == "HEAD" {
            let dirty = git::dirty_count(&toplevel).await.map_err(internal)?;
            if dirty > 0 {
                return Err(refusal(
                    ErrorCode::Conflict,
                    "dirty_base",
                    format!(
                        "the checkout has {dirty} uncommitted changes, which a new worktree would not have; commit or stash them, or give `base_ref`"
                    ),
                ));
            }
        }
        let (integration_target, integration_ref) = match &request.integration_target {
            Some(target) => {
                let Ok(commit) = git::commit_of(&toplevel, target).await else {
                    return Err(refusal(
                        ErrorCode::InvalidRequest,
                        "bad_integration_target",
                        format!("`integration_target` `{target}` names no commit"),
                    ));
                };
                // A name that is no ref (`HEAD~2`, a short id) is pinned
                // to the commit it names now.
                let exact = git::exact_ref(&toplevel, target).await.unwrap_or(commit);
                (target.clone(), exact)
            }
            None => match git::head_ref(&toplevel).await {
                Some(head) => match head.strip_prefix("refs/heads/") {
                    Some(branch) => (branch.to_owned(), head.clone()),
                    None => (base_commit.clone(), base_commit.clone()),
                },
                None => (base_commit.clone(), base_commit.clone()),
            },
        };
        let workspace_id = format!("ws-{}", crate::id::random_hex());
        let branch = match &request.branch {
            Some(branch) => branch.clone(),
            None => {
                let piece = request.label.as_deref().map(slug).filter(|slug| !slug.is_empty());
                format!("shard/{}", piece.unwrap_or_else(|| workspace_id.clone()))
            }
        };
        if !git::valid_branch_name(&toplevel, &branch).await {
            return Err(refusal(
                ErrorCode::InvalidRequest,
                "bad_branch",
                format!("`{}` is not a valid branch name", escaped(&branch)),
            ));
        }

        let mut records = self.records.lock().await;
        if git::branch_exists(&toplevel, &branch).await {
            return Err(refusal(
                ErrorCode::Conflict,
                "branch_exists",
                format!("branch `{branch}` already exists"),
            ));
        }
        let worktree = self.home.join("worktrees").join(&workspace_id);
        if worktree.exists() {
            return Err(refusal(
                ErrorCode::Conflict,
                "path_collision",
                "the workspace's directory already exists",
            ));
        }
        crate::home::prepare_dir(&self.home.join("worktrees")).map_err(internal)?;
        let path = worktree.display().to_string();
        if let Err(error) =
            git::git(&toplevel, &["worktree", "add", "--quiet", "-b", &branch, &path, &base_commit])
                .await
        {
            tracing::warn!(%error, "cannot add the worktree");
            // A failed `worktree add -b` makes no branch: only the directory.
            undo(&toplevel, &worktree, None).await;
            return Err(refusal(
                ErrorCode::Conflict,
                "git_failed",
                "git could not create the worktree",
            ));
        }
        let now = crate::clock::now_ms();
        let mut record = WorkspaceRecord {
            version: RECORD_VERSION,
            workspace_id: workspace_id.clone(),
            label: request.label.clone(),
            branch: branch.clone(),
            base_ref,
            base_commit,
            integration_target,
            integration_ref: Some(integration_ref),
            repository_cwd: repository.display().to_string(),
            worktree: worktree.canonicalize().unwrap_or(worktree.clone()).display().to_string(),
            lifecycle: WorkspaceLifecycle::Active,
            created_at: now,
            updated_at: None,
            retired_at: None,
            agent_ids: Vec::new(),
        };
        if let Err(error) = record.save(&self.home) {
            undo(&toplevel, &worktree, Some(&branch)).await;
            return Err(internal(format!("cannot record the workspace: {error:#}")));
        }
        let (agent_id, session_id) = match self.launch(&record, &request.launch).await {
            Ok(launched) => launched,
            Err(error) => {
                // The workspace stays (it is real and recorded); the agent's
                // identity, if made, is in the error's data.
                broadcast_created(self, &record);
                records.insert(workspace_id, record);
                return Err(error);
            }
        };
        record.agent_ids.push(agent_id.clone());
        record.updated_at = Some(crate::clock::now_ms());
        record.save(&self.home).map_err(internal)?;
        broadcast_created(self, &record);
        let workspace = self.detail(&record).await;
        records.insert(workspace_id, record);
        Ok(WorkspaceLaunchResult { agent_id, session_id, workspace })
    }

    /// `workspace.list`: by repository (the one `cwd` is in), retired ones
    /// only when asked.
    pub async fn list(&self, request: WorkspaceList) -> Result<WorkspaceListResult, WireError> {
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
    pub async fn status(&self, request: WorkspaceStatus) -> Result<WorkspaceResult, WireError> {
        let record = {
            let records = self.records.lock().await;
            records.get(&request.workspace_id).cloned()
        };
        let Some(record) = record else {
            return Err(WireError::new(
                ErrorCode::NotFound,
                format!("no workspace `{}`", request.workspace_id),
            ));
        };
        let mut workspace = self.detail(&record).await;
        workspace.summary.lifecycle = self.reconcile(&record.workspace_id, &workspace).await;
        let present =
            workspace.tombstone.is_none() && record.lifecycle != WorkspaceLifecycle::Retired;
        if request.include_diff == Some(true) && present {
            let worktree = Path::new(&record.worktree);
            let target = target_ref(&record).await;
            match git::diff_against(worktree, &target).await {
                Ok(diff) => workspace.diff = Some(diff),
                Err(error) => tracing::warn!(%error, "cannot diff the workspace"),
            }
        }
        Ok(WorkspaceResult { workspace })
    }

    /// `workspace.attach`: a fresh agent in an existing, present worktree.
    pub async fn attach(
        &self,
        request: WorkspaceAttach,
    ) -> Result<WorkspaceLaunchResult, WireError> {
        let mut records = self.records.lock().await;
        let Some(record) = records.get(&request.workspace_id).cloned() else {
            return Err(WireError::new(
                ErrorCode::NotFound,
                format!("no workspace `{}`", request.workspace_id),
            ));
        };
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return Err(refusal(ErrorCode::Conflict, "retired", "the workspace is retired"));
        }
        if !present(Path::new(&record.worktree)).await {
            if let Some(record) = records.get_mut(&request.workspace_id) {
                self.settle(record, Some(MISSING));
            }
            return Err(refusal(
                ErrorCode::Conflict,
                "missing",
                "the workspace's worktree is missing",
            ));
        }
        let (agent_id, session_id) = self.launch(&record, &request.launch).await?;
        let mut record = record;
        record.agent_ids.push(agent_id.clone());
        record.updated_at = Some(crate::clock::now_ms());
        record.save(&self.home).map_err(internal)?;
        self.broadcast(ServerMessage::WorkspaceAttached(WorkspaceAttached {
            workspace: record.summary(),
            agent_id: agent_id.clone(),
            session_id: session_id.clone(),
        }));
        let workspace = self.detail(&record).await;
        records.insert(record.workspace_id.clone(), record);
        Ok(WorkspaceLaunchResult { agent_id, session_id, workspace })
    }

    /// `workspace.retire`, safe by default: refused while an agent is live
    /// or busy, while the worktree has changes, or when the repository that
    /// owns it cannot be found; the branch is deleted only when merged (or
    /// on the explicit `delete_confirmed` retry), or kept.
    pub async fn retire(&self, request: WorkspaceRetire) -> Result<WorkspaceResult, WireError> {
        let disposition = request.branch_disposition.unwrap_or(BranchDisposition::DeleteIfMerged);
        let mut records = self.records.lock().await;
        let Some(mut record) = records.get(&request.workspace_id).cloned() else {
            return Err(WireError::new(
                ErrorCode::NotFound,
                format!("no workspace `{}`", request.workspace_id),
            ));
        };
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return Err(refusal(
                ErrorCode::Conflict,
                "retired",
                "the workspace is already retired",
            ));
        }
        let repository = Path::new(&record.repository_cwd);
        let owns =
            git::git(repository, &["worktree", "list", "--porcelain"]).await.is_ok_and(|list| {
                list.lines()
                    .any(|line| line.strip_prefix("worktree ") == Some(record.worktree.as_str()))
            });
        if !owns {
            return Err(refusal(
                ErrorCode::Conflict,
                "missing_authority",
                "the repository that owns this worktree cannot be found or does not list it; nothing was removed",
            ));
        }
        let (live, busy) = self.liveness(&record);
        if busy {
            return Err(refusal(
                ErrorCode::Conflict,
                "busy",
                "an agent in this workspace is working; abort or let it finish first",
            ));
        }
        if live {
            return Err(refusal(
                ErrorCode::Conflict,
                "live",
                "an agent in this workspace is running; terminate it first",
            ));
        }
        let worktree = Path::new(&record.worktree).to_path_buf();
        // Anything at the path is the worktree until proven otherwise: only
        // a path that is gone altogether retires without reading it.
        let here = std::fs::symlink_metadata(&worktree).is_ok();
        if here {
            self.prove_removable(&record, &worktree).await?;
        }
        let branch = git::branch_ref(&record.branch);
        let tip = git::commit_of(repository, &branch).await.ok();
        let delete_branch = match (disposition, &tip) {
            (_, None) | (BranchDisposition::Keep, _) => None,
            (BranchDisposition::DeleteConfirmed, Some(tip)) => Some(tip.clone()),
            (BranchDisposition::DeleteIfMerged, Some(tip)) => {
                let target = target_ref(&record).await;
                let contained =
                    git::contains(repository, &target, tip).await.unwrap_or_else(|error| {
                        tracing::warn!(%error, "cannot tell whether the branch is merged");
                        false
                    });
                if !contained {
                    let confirm = ConfirmationRequired {
                        kind: "confirmation_required".to_owned(),
                        workspace_id: record.workspace_id.clone(),
                        reason: format!(
                            "branch `{}` is not merged into `{}`: deleting it loses its commits",
                            escaped(&record.branch),
                            escaped(&record.integration_target)
                        ),
                        confirmation_disposition: BranchDisposition::DeleteConfirmed,
                    };
                    return Err(WireError::new(ErrorCode::Conflict, confirm.reason.clone())
                        .with_data(serde_json::to_value(confirm).unwrap_or_default()));
                }
                Some(tip.clone())
            }
        };
        let path = record.worktree.clone();
        if here {
            // No `--force`: git itself refuses a worktree with changes, so
            // nothing written since the checks above is lost either.
            if let Err(error) = git::git(repository, &["worktree", "remove", &path]).await {
                tracing::warn!(%error, "cannot remove the worktree");
                return Err(refusal(
                    ErrorCode::Conflict,
                    "git_failed",
                    "git could not remove the worktree (it may have changed since it was checked); nothing was deleted",
                ));
            }
        }
        let _ = git::git(repository, &["worktree", "prune"]).await;
        if let Some(tip) = delete_branch {
            // Only the exact branch, and only while it is at the commit just
            // proven (or confirmed): one that moved meanwhile is kept.
            if let Err(error) = git::delete_ref(repository, &branch, &tip).await {
                tracing::warn!(%error, "cannot delete the branch");
            }
        }
        let now = crate::clock::now_ms();
        record.lifecycle = WorkspaceLifecycle::Retired;
        record.retired_at = Some(now);
        record.updated_at = Some(now);
        record.save(&self.home).map_err(internal)?;
        self.broadcast(ServerMessage::WorkspaceRetired(WorkspaceEvent {
            workspace: record.summary(),
        }));
        let workspace = self.detail(&record).await;
        records.insert(record.workspace_id.clone(), record);
        Ok(WorkspaceResult { workspace })
    }

    /// What retire proves before it removes a worktree that is there: git
    /// reads it as a checkout of its own, its HEAD is its branch (so every
    /// commit it holds is on that branch), and it has no changes. Anything
    /// else is refused and nothing is touched.
    async fn prove_removable(
        &self,
        record: &WorkspaceRecord,
        worktree: &Path,
    ) -> Result<(), WireError> {
        let unsafe_to_remove = |problem: &str, message: String| {
            WireError::new(ErrorCode::Conflict, message)
                .with_data(json!({"kind": "unsafe", "problem": problem}))
        };
        if !present(worktree).await {
            return Err(unsafe_to_remove(
                "unreadable",
                "git cannot read the worktree as a checkout (its `.git` link is missing or broken), so what it holds cannot be checked; nothing was removed".to_owned(),
            ));
        }
        let branch = git::branch_ref(&record.branch);
        if git::head_ref(worktree).await.as_deref() != Some(branch.as_str()) {
            return Err(unsafe_to_remove(
                "head_moved",
                format!(
                    "the worktree is not on branch `{}` (detached or switched outside Shard), so its commits may be on no branch; switch it back, or keep its work on a branch, first; nothing was removed",
                    record.branch
                ),
            ));
        }
        let dirty = git::dirty_count(worktree).await.map_err(|error| {
            tracing::warn!(%error, "cannot read the worktree's status");
            unsafe_to_remove(
                "unreadable",
                "the worktree's state cannot be read; nothing was removed".to_owned(),
            )
        })?;
        if dirty > 0 {
            return Err(WireError::new(
                ErrorCode::Conflict,
                format!(
                    "the worktree has {dirty} uncommitted changes; commit or discard them first"
                ),
            )
            .with_data(json!({"kind": "dirty", "dirty_files": dirty})));
        }
        Ok(())
    }

    /// Moves a workspace into or out of `conflict` as `seen` (a fresh
    /// detail) finds its worktree. Answers the lifecycle now recorded.
    async fn reconcile(&self, id: &str, seen: &WorkspaceDetail) -> WorkspaceLifecycle {
        let mut records = self.records.lock().await;
        match records.get_mut(id) {
            Some(record) => self.settle(record, seen.conflict.as_deref()),
            None => seen.summary.lifecycle,
        }
    }

    /// Records `conflict` (or its end) on a live workspace, announcing a
    /// move into conflict with `workspace_conflict`.
    fn settle(&self, record: &mut WorkspaceRecord, conflict: Option<&str>) -> WorkspaceLifecycle {
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

    /// A fresh agent and session in `record`'s worktree, named by the
    /// launch fields (else the workspace's label).
    async fn launch(
        &self,
        record: &WorkspaceRecord,
        launch: &WorkspaceLaunch,
    ) -> Result<(String, String), WireError> {
        let create = AgentCreate {
            cwd: record.worktree.clone(),
            name: launch.name.clone().or(launch.title.clone()).or(record.label.clone()),
            model: launch.model.clone(),
            provider: launch.provider.clone(),
            mode: launch.mode.clone(),
            ..AgentCreate::default()
        };
        let agent_id = self.registry.create(create).await?;
        let session_id = self
            .registry
            .manifest(&agent_id)
            .map(|manifest| manifest.session_id)
            .unwrap_or_default();
        Ok((agent_id, session_id))
    }

    /// Whether an agent working in the worktree has a process that runs
    /// (or starts), and whether one is mid-turn: what status reports and
    /// what retire refuses. Every agent counts whose working directory is
    /// inside the worktree, bound to the workspace or not: subagents inherit
    /// their parent's directory.
    fn liveness(&self, record: &WorkspaceRecord) -> (bool, bool) {
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
        (live, busy)
    }

    /// The detail of a workspace as it is now: git's view of its worktree
    /// (a missing one is a tombstone) and its agents' liveness.
    async fn detail(&self, record: &WorkspaceRecord) -> WorkspaceDetail {
        let mut summary = record.summary();
        let worktree = Path::new(&record.worktree);
        let (live, busy) = self.liveness(record);
        let mut detail = WorkspaceDetail {
            summary: summary.clone(),
            agent_ids: record.agent_ids.clone(),
            tombstone: None,
            conflict: None,
            ahead: None,
            behind: None,
            dirty_files: None,
            merged: None,
            live: Some(live),
            busy: Some(busy),
            diff: None,
        };
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return detail;
        }
        if !present(worktree).await {
            detail.tombstone = Some(true);
            detail.conflict = Some(MISSING.to_owned());
            return detail;
        }
        let branch = git::branch_ref(&record.branch);
        if git::head_ref(worktree).await.as_deref() != Some(branch.as_str()) {
            detail.conflict = Some(format!(
                "the worktree is no longer on branch `{}` (switched outside Shard)",
                escaped(&record.branch)
            ));
        }
        summary.head_fingerprint = git::commit_of(worktree, "HEAD")
            .await
            .ok()
            .map(|commit| commit.chars().take(12).collect());
        detail.summary = summary;
        detail.dirty_files = git::dirty_count(worktree).await.ok();
        let target = target_ref(record).await;
        if let Ok((ahead, behind)) = git::ahead_behind(worktree, &branch, &target).await {
            detail.ahead = Some(ahead);
            detail.behind = Some(behind);
        }
        detail.merged = git::merged(worktree, &branch, &target).await.ok();
        detail
    }
}

fn broadcast_created(workspaces: &Workspaces, record: &WorkspaceRecord) {
    workspaces
        .broadcast(ServerMessage::WorkspaceCreated(WorkspaceEvent { workspace: record.summary() }));
}

/// The checkout `cwd` is in and its repository's main checkout, or the
/// typed `not_a_repository` refusal.
async fn repository_of(cwd: &Path) -> Result<(PathBuf, PathBuf), WireError> {
    let refused = || {
        refusal(ErrorCode::InvalidRequest, "not_a_repository", "`cwd` is not in a git repository")
    };
    let toplevel = git::toplevel(cwd).await.ok_or_else(refused)?;
    let repository = git::main_checkout(&toplevel).await.map_err(|error| {
        tracing::warn!(%error, "cannot find the main checkout");
        refused()
    })?;
    Ok((toplevel, repository))
}

/// Whether `worktree` is still a checkout of its own.
async fn present(worktree: &Path) -> bool {
    git::toplevel(worktree).await.is_some_and(|top| top == worktree)
}

/// The workspace's integration target as an exact ref or commit id: the
/// one recorded at creation, else (an older record) resolved now; a name
/// that resolves to nothing stays as it is and names no commit.
async fn target_ref(record: &WorkspaceRecord) -> String {
    if let Some(exact) = &record.integration_ref {
        return exact.clone();
    }
    let repository = Path::new(&record.repository_cwd);
    git::exact_ref(repository, &record.integration_target)
        .await
        .unwrap_or_else(|| format!("refs/heads/{}", record.integration_target))
}

/// Takes back a half-made worktree: its directory, git's record of it, and
/// the branch made for it (only one this create made).
async fn undo(repository: &Path, worktree: &Path, made_branch: Option<&str>) {
    let path = worktree.display().to_string();
    let _ = git::git(repository, &["worktree", "remove", "--force", &path]).await;
    if worktree.exists() {
        let _ = std::fs::remove_dir_all(worktree);
    }
    let _ = git::git(repository, &["worktree", "prune"]).await;
    if let Some(branch) = made_branch {
        let _ = git::git(repository, &["branch", "-D", branch]).await;
    }
}
