//! `workspace.create`: a new worktree on a new branch, recorded, and a
//! fresh agent in it. The request is checked, then its base and
//! integration target resolved, before git is touched; under the records'
//! lock the branch and the directory are checked free, the worktree is
//! made, the record written, and the agent launched. A step that fails
//! after the worktree exists takes back what this create made.

use std::path::{Path, PathBuf};

use shard_protocol::ServerMessage;
use shard_protocol::display::has_hidden;
use shard_protocol::workspace::{
    WorkspaceCreate, WorkspaceEvent, WorkspaceLaunchResult, WorkspaceLifecycle,
};

use super::launch::Launched;
use super::records::{RECORD_VERSION, WorkspaceRecord};
use super::{WorkspaceError, Workspaces, git, home, repository_of};

/// The longest label (characters).
const MAX_LABEL: usize = 100;

/// Where a new workspace comes from, resolved before git is touched: the
/// checkout asked from and its repository's main checkout, the commit it
/// starts at, and the target it integrates into.
struct Origin {
    toplevel: PathBuf,
    repository: PathBuf,
    base_ref: String,
    base_commit: String,
    integration_target: String,
    /// `integration_target` as an exact ref, or the commit it named.
    integration_ref: String,
}

impl Workspaces {
    /// `workspace.create`: a worktree on a new branch, recorded, and a fresh
    /// agent in it.
    /// `afar`: asked by a browser of a daemon in a remote mode.
    pub async fn create(
        &self,
        request: WorkspaceCreate,
        afar: bool,
    ) -> Result<WorkspaceLaunchResult, WorkspaceError> {
        let cwd = check_request(&request)?;
        // Its agent's sandbox first: a launch this daemon refuses leaves
        // no worktree or branch behind.
        let launch = &request.launch;
        self.registry
            .launchable(launch.runtime.clone(), launch.sandbox, afar)
            .map_err(|error| WorkspaceError::Launch(error.into()))?;
        let origin = Origin::resolve(cwd, &request).await?;
        let workspace_id = format!("ws-{}", crate::id::random_hex());
        let branch = origin.branch(&request, &workspace_id).await?;

        let mut records = self.records.lock().await;
        let worktree = self.make_worktree(&origin, &workspace_id, &branch).await?;
        let mut record =
            origin.record(workspace_id.clone(), request.label.clone(), branch, &worktree).await;
        if let Err(source) = record.save(&self.home) {
            undo(&origin.toplevel, &worktree, Some(&record.branch)).await;
            return Err(WorkspaceError::NotRecorded { source });
        }
        let Launched { agent_id, session_id } =
            match self.launch(&record, &request.launch, afar).await {
                Ok(launched) => launched,
                Err(error) => {
                    // The workspace stays (it is real and recorded); the agent's
                    // identity, if made, is in the error's data.
                    self.broadcast_created(&record);
                    records.insert(workspace_id, record);
                    return Err(error);
                }
            };
        record.agent_ids.push(agent_id.clone());
        record.updated_at = Some(crate::clock::now_ms());
        record.save(&self.home).map_err(home)?;
        self.broadcast_created(&record);
        let workspace = self.detail(&record).await;
        records.insert(workspace_id, record);
        Ok(WorkspaceLaunchResult { agent_id, session_id, workspace })
    }

    /// Under the records' lock: the branch and the directory are free, and
    /// git makes the worktree on the new branch at the base commit. A
    /// failed add leaves nothing behind.
    async fn make_worktree(
        &self,
        origin: &Origin,
        workspace_id: &str,
        branch: &str,
    ) -> Result<PathBuf, WorkspaceError> {
        let toplevel = &origin.toplevel;
        if git::branch_exists(toplevel, branch).await {
            return Err(WorkspaceError::BranchExists { branch: branch.to_owned() });
        }
        let worktree = self.home.join("worktrees").join(workspace_id);
        if worktree.exists() {
            return Err(WorkspaceError::PathCollision);
        }
        crate::home::prepare_dir(&self.home.join("worktrees")).map_err(home)?;
        let path = worktree.display().to_string();
        let add = ["worktree", "add", "--quiet", "-b", branch, &path, &origin.base_commit];
        if let Err(source) = git::git(toplevel, &add).await {
            tracing::warn!(error = %source, "cannot add the worktree");
            // A failed `worktree add -b` makes no branch: only the directory.
            undo(toplevel, &worktree, None).await;
            return Err(WorkspaceError::WorktreeNotAdded { source });
        }
        Ok(worktree)
    }

    fn broadcast_created(&self, record: &WorkspaceRecord) {
        self.broadcast(ServerMessage::WorkspaceCreated(WorkspaceEvent {
            workspace: record.summary(),
        }));
    }
}

/// What can be checked of a create without git: a label of a sensible
/// length, names with nothing hidden in them, and an absolute `cwd` that
/// is a directory (answered).
fn check_request(request: &WorkspaceCreate) -> Result<&Path, WorkspaceError> {
    if request.label.as_ref().is_some_and(|label| label.chars().count() > MAX_LABEL) {
        return Err(WorkspaceError::LabelTooLong { max: MAX_LABEL });
    }
    // A name a person tells apart by reading it: nothing hidden in it.
    for (field, value) in [("label", &request.label), ("branch", &request.branch)] {
        if value.as_deref().is_some_and(has_hidden) {
            return Err(WorkspaceError::HiddenCharacters { field });
        }
    }
    let cwd = Path::new(&request.cwd);
    if !cwd.is_absolute() || !cwd.is_dir() {
        return Err(WorkspaceError::BadCwd);
    }
    Ok(cwd)
}

impl Origin {
    /// The repository `cwd` is in, the base commit (`base_ref`, else a
    /// clean HEAD) and the integration target (the one asked, else the
    /// branch checked out, else the base commit).
    async fn resolve(cwd: &Path, request: &WorkspaceCreate) -> Result<Self, WorkspaceError> {
        let (toplevel, repository) = repository_of(cwd).await?;
        let base_ref = request.base_ref.clone().unwrap_or_else(|| "HEAD".to_owned());
        let base_commit = base_commit(&toplevel, &base_ref).await?;
        let (integration_target, integration_ref) =
            integration(&toplevel, request.integration_target.as_deref(), &base_commit).await?;
        Ok(Self {
            toplevel,
            repository,
            base_ref,
            base_commit,
            integration_target,
            integration_ref,
        })
    }

    /// The new branch: the one asked, else `shard/` and the label's slug
    /// (else the workspace id); refused unless git takes it as a name.
    async fn branch(
        &self,
        request: &WorkspaceCreate,
        workspace_id: &str,
    ) -> Result<String, WorkspaceError> {
        let branch = match &request.branch {
            Some(branch) => branch.clone(),
            None => {
                let piece = request.label.as_deref().map(slug).filter(|slug| !slug.is_empty());
                format!("shard/{}", piece.unwrap_or_else(|| workspace_id.to_owned()))
            }
        };
        if !git::valid_branch_name(&self.toplevel, &branch).await {
            return Err(WorkspaceError::BadBranch { branch });
        }
        Ok(branch)
    }

    /// The record of a worktree just made: active, with no agent yet, and
    /// the git directory the repository made for it (read now, before any
    /// agent works there).
    async fn record(
        &self,
        workspace_id: String,
        label: Option<String>,
        branch: String,
        worktree: &Path,
    ) -> WorkspaceRecord {
        let worktree = worktree.canonicalize().unwrap_or(worktree.to_path_buf());
        let git_dir = match git::common_dir(&self.toplevel).await {
            Ok(common) => git::linked_git_dir(&common, &worktree),
            Err(error) => {
                tracing::warn!(%error, "cannot find the repository's git directory");
                None
            }
        };
        WorkspaceRecord {
            version: RECORD_VERSION,
            workspace_id,
            label,
            branch,
            base_ref: self.base_ref.clone(),
            base_commit: self.base_commit.clone(),
            integration_target: self.integration_target.clone(),
            integration_ref: Some(self.integration_ref.clone()),
            repository_cwd: self.repository.display().to_string(),
            worktree: worktree.display().to_string(),
            git_dir: git_dir.map(|dir| dir.display().to_string()),
            lifecycle: WorkspaceLifecycle::Active,
            created_at: crate::clock::now_ms(),
            updated_at: None,
            retired_at: None,
            agent_ids: Vec::new(),
        }
    }
}

/// The commit `base_ref` names; from HEAD, only with no uncommitted
/// changes (a new worktree would not have them).
async fn base_commit(toplevel: &Path, base_ref: &str) -> Result<String, WorkspaceError> {
    let Ok(base_commit) = git::commit_of(toplevel, base_ref).await else {
        return Err(if base_ref == "HEAD" {
            WorkspaceError::UnbornBase
        } else {
            WorkspaceError::BadBaseRef { base_ref: base_ref.to_owned() }
        });
    };
    if base_ref == "HEAD" {
        let dirty = git::dirty_count(toplevel).await?;
        if dirty > 0 {
            return Err(WorkspaceError::DirtyBase { dirty });
        }
    }
    Ok(base_commit)
}

/// The integration target as named and as an exact ref: the one asked,
/// else the branch checked out, else the base commit.
async fn integration(
    toplevel: &Path,
    asked: Option<&str>,
    base_commit: &str,
) -> Result<(String, String), WorkspaceError> {
    Ok(match asked {
        Some(target) => {
            let Ok(commit) = git::commit_of(toplevel, target).await else {
                return Err(WorkspaceError::BadIntegrationTarget { target: target.to_owned() });
            };
            // A name that is no ref (`HEAD~2`, a short id) is pinned
            // to the commit it names now.
            let exact = git::exact_ref(toplevel, target).await.unwrap_or(commit);
            (target.to_owned(), exact)
        }
        None => match git::head_ref(toplevel).await {
            Some(head) => match head.strip_prefix("refs/heads/") {
                Some(branch) => (branch.to_owned(), head.clone()),
                None => (base_commit.to_owned(), base_commit.to_owned()),
            },
            None => (base_commit.to_owned(), base_commit.to_owned()),
        },
    })
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
