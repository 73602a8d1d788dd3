//! The durable workspace record: one file per workspace under
//! `$SHARD_HOME/workspaces/` (0600), rewritten whole (atomically) after
//! every change, and the summary the wire sees of it. A record is kept
//! after its workspace is retired.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_protocol::workspace::{WorkspaceLifecycle, WorkspaceSummary};

pub const RECORD_VERSION: u32 = 1;

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
    /// The worktree's git directory in the repository (its
    /// `worktrees/<name>`), read from the repository when the worktree was
    /// made. Git is always told this one, never what the worktree's `.git`
    /// says now. Records older than this field find it in the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_dir: Option<String>,
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
    pub(super) fn save(&self, home: &Path) -> anyhow::Result<()> {
        let dir = records_dir(home);
        crate::home::prepare_dir(&dir)?;
        let bytes = serde_json::to_vec_pretty(self)?;
        crate::home::write_private(&dir.join(format!("{}.json", self.workspace_id)), &bytes)?;
        Ok(())
    }

    pub(super) fn load_all(home: &Path) -> Vec<WorkspaceRecord> {
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

    pub(super) fn summary(&self) -> WorkspaceSummary {
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
            node: None,
        }
    }
}

/// The git directory of the workspace whose worktree is `cwd`, as the
/// daemon recorded it when it made the worktree (what the agent's sandbox
/// lets it commit to); `None` if `cwd` is no workspace's worktree.
pub fn git_dir_of_worktree(home: &Path, cwd: &Path) -> Option<PathBuf> {
    WorkspaceRecord::load_all(home).into_iter().find_map(|record| {
        let worktree = Path::new(&record.worktree);
        let same = worktree == cwd || worktree.canonicalize().is_ok_and(|real| real == cwd);
        same.then(|| record.git_dir.map(PathBuf::from)).flatten()
    })
}
