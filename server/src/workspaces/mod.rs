//! Workspaces (PROTOCOL.md §10.1a, docs/WORKSPACES.md): one git worktree
//! per workspace, on its own branch, recorded durably under
//! `$SHARD_HOME/workspaces/`, each launching fresh agents in it. Creation
//! checks everything it can before touching git, holds one lock so that two
//! creates cannot race for a branch, and undoes what it made when a later
//! step fails. What clients see never names a git-dir or common-dir, and
//! never carries git's own output.
//!
//! [`Workspaces`] owns the records and their lock; its commands live one
//! noun to a file: `records.rs` (the durable record), `create.rs`
//! (`workspace.create`: a new worktree), `launch.rs` (an agent in a
//! workspace, and `workspace.attach`), `status.rs` (`workspace.list`,
//! `workspace.status` and what git and the agents say of a worktree now),
//! `retire.rs` (`workspace.retire` and what it proves first), the actions
//! on a workspace's work, each previewed first (`actions.rs` for what they
//! share; `commit.rs`, `merge.rs`, `push.rs`) and `git.rs` (the `git`
//! command itself); `error.rs` holds every reason a command is refused and
//! how it reads on the wire.

mod actions;
mod commit;
mod create;
mod error;
pub mod git;
mod launch;
mod merge;
mod push;
pub mod records;
mod retire;
mod status;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shard_protocol::workspace::{WorkspaceActed, WorkspaceEvent};
use shard_protocol::{Envelope, ServerMessage};

pub use self::error::WorkspaceError;
pub use self::records::{RECORD_VERSION, WorkspaceRecord};
use crate::agents::Wire;
use crate::agents::registry::Registry;

pub struct Workspaces {
    registry: Arc<Registry>,
    home: PathBuf,
    /// Every record, and the lock that makes each change one at a time
    /// (held across the git commands of a create: two creates never race).
    records: tokio::sync::Mutex<BTreeMap<String, WorkspaceRecord>>,
}

fn no_workspace(workspace_id: &str) -> WorkspaceError {
    WorkspaceError::NotFound { workspace_id: workspace_id.to_owned() }
}

/// A write under the daemon's home that failed.
fn home(source: anyhow::Error) -> WorkspaceError {
    WorkspaceError::Home { source }
}

impl Workspaces {
    pub fn load(registry: Arc<Registry>) -> Arc<Self> {
        let home = registry.context.home.clone();
        let records: BTreeMap<String, WorkspaceRecord> = WorkspaceRecord::load_all(&home)
            .into_iter()
            .map(|record| (record.workspace_id.clone(), record))
            .collect();
        for record in records.values() {
            for agent_id in &record.agent_ids {
                registry.context.budgets.set_workspace(agent_id, &record.workspace_id);
            }
        }
        Arc::new(Self { registry, home, records: tokio::sync::Mutex::new(records) })
    }

    /// Whether the workspace `workspace_id` is recorded.
    pub async fn exists(&self, workspace_id: &str) -> bool {
        self.records.lock().await.contains_key(workspace_id)
    }

    /// Tells every client what an action changed (`workspace_updated`),
    /// and hands its answer on.
    pub fn updated(&self, acted: WorkspaceActed) -> WorkspaceActed {
        let workspace = acted.workspace.summary.clone();
        self.broadcast(ServerMessage::WorkspaceUpdated(WorkspaceEvent { workspace }));
        acted
    }

    fn broadcast(&self, message: ServerMessage) {
        let wire = Wire::from(Envelope::new(message).to_json());
        self.registry.context.broadcast.broadcast(&wire);
    }
}

/// The checkout `cwd` is in and its repository's main checkout, or the
/// typed `not_a_repository` refusal.
async fn repository_of(cwd: &Path) -> Result<(PathBuf, PathBuf), WorkspaceError> {
    let toplevel = git::toplevel(cwd).await.ok_or(WorkspaceError::NotARepository)?;
    let repository = git::main_checkout(&toplevel).await.map_err(|error| {
        tracing::warn!(%error, "cannot find the main checkout");
        WorkspaceError::NotARepository
    })?;
    Ok((toplevel, repository))
}

/// The workspace's worktree as git is told of it: its work tree and the
/// git directory it was made with. Refused when the worktree is gone or
/// the repository no longer records it (`missing`), or when its `.git`
/// now points elsewhere (`relinked`): git then runs nowhere in it.
async fn checkout(record: &WorkspaceRecord) -> Result<git::Checkout, WorkspaceError> {
    let work_tree = PathBuf::from(&record.worktree);
    if !std::fs::symlink_metadata(&work_tree).is_ok_and(|meta| meta.is_dir()) {
        return Err(WorkspaceError::Missing);
    }
    let git_dir = match &record.git_dir {
        Some(git_dir) => PathBuf::from(git_dir),
        None => {
            let repository = Path::new(&record.repository_cwd);
            let common = git::common_dir(repository).await.map_err(|error| {
                tracing::warn!(%error, "cannot find the repository's git directory");
                WorkspaceError::Missing
            })?;
            git::linked_git_dir(&common, &work_tree).ok_or(WorkspaceError::Missing)?
        }
    };
    match git::link(&work_tree, &git_dir) {
        git::Link::Intact => Ok(git::Checkout { work_tree, git_dir }),
        git::Link::Relinked => Err(WorkspaceError::Relinked),
        git::Link::Unrecorded => Err(WorkspaceError::Missing),
    }
}

/// Refuses an action on a workspace whose worktree's `.git` points
/// elsewhere: its branch may still be whole, but whoever relinked it is
/// at work there, and the person should see that first. A worktree that is
/// gone is no reason to refuse a merge or push of its branch.
async fn not_relinked(record: &WorkspaceRecord) -> Result<(), WorkspaceError> {
    match checkout(record).await {
        Err(WorkspaceError::Relinked) => Err(WorkspaceError::Relinked),
        _ => Ok(()),
    }
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
