//! `workspace.merge`: the workspace's branch into its integration target,
//! when that is a fast-forward or a merge git makes without a conflict;
//! refused otherwise, with the conflicting paths.
//!
//! Nothing is checked out to find out: `git merge-tree --write-tree` (git
//! 2.38) makes the merged tree in the object store, and the target moves
//! with `git update-ref <ref> <new> <old>`, only if it is still where the
//! preview saw it. Where the target is checked out (the repository's main
//! checkout, usually), that checkout's index and files move with it as a
//! checkout would move them (`git read-tree -m -u`), and uncommitted
//! changes there that the merge would touch refuse the merge first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use shard_protocol::display::escaped;
use shard_protocol::workspace::{
    ChangedPath, MergeKind, WorkspaceActed, WorkspaceAction, WorkspacePreview,
};

use super::actions::{
    MAX_LISTED, active_record, asked_fingerprint, changed_paths, check_identity, check_settled,
    commit_count, count, failed, fingerprint, is_ancestor, plural, same_state,
};
use super::commit::short;
use super::git::{self, Checkout, Git, GitError};
use super::records::WorkspaceRecord;
use super::{WorkspaceError, Workspaces, checkout, not_relinked, target_ref};

/// The oldest git with `merge-tree --write-tree`.
const MERGE_TREE_GIT: (u32, u32) = (2, 38);

/// A merge worked out, not yet made.
struct Plan {
    /// The integration target's exact ref, its commit, and the branch's.
    target: String,
    target_tip: String,
    branch_tip: String,
    kind: MergeKind,
    /// A clean merge's tree.
    tree: Option<String>,
    commits: u32,
    files: Vec<ChangedPath>,
    file_count: u32,
    conflicts: Vec<String>,
    /// Checkouts of the target that move with it.
    checkouts: Vec<Checkout>,
    fingerprint: String,
}

impl Workspaces {
    /// `workspace.merge` with `dry_run`: how the merge would go.
    pub async fn preview_merge(
        &self,
        request: WorkspaceAction,
    ) -> Result<WorkspacePreview, WorkspaceError> {
        let record = self.acting_on(&request.workspace_id).await?;
        let plan = plan(&record).await?;
        let target = record.integration_target.clone();
        let (branch_name, target_name) = (escaped(&record.branch), escaped(&target));
        let commits = plural(plan.commits, "commit");
        let files = plural(plan.file_count, "file");
        let mut summary = match plan.kind {
            MergeKind::FastForward => format!(
                "Fast-forwards `{target_name}` to `{branch_name}`: {commits}, {files} changed."
            ),
            MergeKind::Conflict => format!(
                "`{branch_name}` does not merge cleanly into `{target_name}`: {} in conflict. Nothing can be merged until they are resolved in the workspace (merge `{target_name}` into it there).",
                plural(count(plan.conflicts.len()), "file")
            ),
            _ => format!(
                "Makes a merge commit of `{branch_name}` into `{target_name}`: {commits}, {files} changed."
            ),
        };
        let repository = Path::new(&record.repository_cwd);
        if plan.kind != MergeKind::Conflict {
            for checkout in &plan.checkouts {
                summary.push_str(&format!(
                    " `{target_name}` is checked out in {}: its files there change too.",
                    checkout_name(repository, &checkout.work_tree)
                ));
            }
        }
        if let Ok(worktree) = checkout(&record).await
            && let Ok(dirty @ 1..) = git::dirty_count(&worktree).await
        {
            summary.push_str(&format!(
                " The workspace's {} not merged: only commits are.",
                if dirty == 1 {
                    "uncommitted change is".to_owned()
                } else {
                    format!("{dirty} uncommitted changes are")
                }
            ));
        }
        Ok(WorkspacePreview {
            workspace_id: record.workspace_id.clone(),
            summary,
            fingerprint: plan.fingerprint,
            branch: record.branch.clone(),
            files: plan.files,
            file_count: plan.file_count,
            commits: Some(plan.commits),
            merge: Some(plan.kind),
            target: Some(target),
            conflicts: plan.conflicts,
            remote: None,
            remote_branch: None,
            remote_url: None,
        })
    }

    /// `workspace.merge`: the merge the preview showed, or a refusal with
    /// nothing changed.
    pub async fn merge(&self, request: WorkspaceAction) -> Result<WorkspaceActed, WorkspaceError> {
        let asked = asked_fingerprint(&request, "merge")?;
        let records = self.records.lock().await;
        let record = active_record(&records, &request.workspace_id)?;
        let plan = plan(&record).await?;
        same_state(&asked, &plan.fingerprint, "merge")?;
        let repository = Path::new(&record.repository_cwd);
        let new = match (plan.kind, &plan.tree) {
            (MergeKind::FastForward, _) => plan.branch_tip.clone(),
            (MergeKind::Merge, Some(tree)) => {
                let message =
                    format!("Merge branch '{}' into {}", record.branch, record.integration_target);
                let args = [
                    "commit-tree",
                    tree,
                    "-p",
                    &plan.target_tip,
                    "-p",
                    &plan.branch_tip,
                    "-m",
                    &message,
                ];
                let made = Git::new(repository)
                    .run(&args)
                    .await
                    .map_err(failed("make the merge commit"))?;
                made.text.trim().to_owned()
            }
            _ => {
                return Err(WorkspaceError::MergeConflict {
                    branch: record.branch.clone(),
                    target: record.integration_target.clone(),
                    paths: plan.conflicts,
                });
            }
        };
        move_target(&record, &plan, &new).await?;
        drop(records);
        let summary = match plan.kind {
            MergeKind::FastForward => format!(
                "Fast-forwarded `{}` to `{}` ({}).",
                escaped(&record.integration_target),
                escaped(&record.branch),
                plural(plan.commits, "commit")
            ),
            _ => format!(
                "Merged `{}` into `{}` as {} ({}).",
                escaped(&record.branch),
                escaped(&record.integration_target),
                short(&new),
                plural(plan.commits, "commit")
            ),
        };
        let workspace = self.detail(&record).await;
        Ok(WorkspaceActed { summary, commit: new, workspace })
    }
}

/// Moves the target from the commit planned to `new`: first every checkout
/// of it (as a checkout moves: refused, and nothing changed, when a file
/// there would be overwritten), then the ref itself, only if it is still
/// at the commit planned; if not, the checkouts go back.
async fn move_target(
    record: &WorkspaceRecord,
    plan: &Plan,
    new: &str,
) -> Result<(), WorkspaceError> {
    let repository = Path::new(&record.repository_cwd);
    let mut moved: Vec<&Checkout> = Vec::new();
    for checkout in &plan.checkouts {
        if let Err(source) = check_out(checkout, &plan.target_tip, new).await {
            tracing::warn!(error = %source, "cannot update the target's checkout");
            undo_checkouts(&moved, new, &plan.target_tip).await;
            return Err(WorkspaceError::CheckoutBlocked {
                target: record.integration_target.clone(),
                checkout: checkout_name(repository, &checkout.work_tree),
                source,
            });
        }
        moved.push(checkout);
    }
    let reflog = format!("shard: merge {}", record.branch);
    let args = ["update-ref", "-m", &reflog, &plan.target, new, &plan.target_tip];
    if let Err(error) = Git::new(repository).run(&args).await {
        tracing::info!(%error, "the integration target moved before the merge");
        undo_checkouts(&moved, new, &plan.target_tip).await;
        return Err(WorkspaceError::Stale { action: "merge" });
    }
    Ok(())
}

/// Moves a checkout's index and files from commit `from` to `to`, keeping
/// its uncommitted changes, as `git checkout` would; refused (nothing
/// changed) when a change or an untracked file would be overwritten.
async fn check_out(checkout: &Checkout, from: &str, to: &str) -> Result<(), GitError> {
    // Fresh stats first, or read-tree takes an untouched file for a change
    // (1: some files have changes, which read-tree then judges).
    let refresh = ["update-index", "-q", "--refresh"];
    Git::new(checkout).accept(&[0, 1]).run(&refresh).await?;
    Git::new(checkout).run(&["read-tree", "-m", "-u", from, to]).await.map(|_| ())
}

async fn undo_checkouts(moved: &[&Checkout], new: &str, old: &str) {
    for checkout in moved {
        if let Err(error) = check_out(checkout, new, old).await {
            tracing::error!(%error, "cannot put the target's checkout back");
        }
    }
}

/// How a checkout is named to the client: the main checkout, or its path.
fn checkout_name(repository: &Path, checkout: &Path) -> String {
    if checkout == repository {
        "the repository's main checkout".to_owned()
    } else {
        format!("the worktree `{}`", escaped(&checkout.display().to_string()))
    }
}

/// Everything the merge depends on, read afresh: refused unless git can
/// make it, the target is a local branch, and the branch has something
/// the target lacks; a conflict is planned (and refused by the action).
async fn plan(record: &WorkspaceRecord) -> Result<Plan, WorkspaceError> {
    not_relinked(record).await?;
    let repository = Path::new(&record.repository_cwd);
    check_git_version(repository).await?;
    let target = target_ref(record).await;
    let not_branch =
        || WorkspaceError::TargetNotBranch { target: record.integration_target.clone() };
    if !target.starts_with("refs/heads/") {
        return Err(not_branch());
    }
    let target_tip = git::commit_of(repository, &target).await.map_err(|_| not_branch())?;
    let branch = git::branch_ref(&record.branch);
    let branch_tip = git::commit_of(repository, &branch)
        .await
        .map_err(|_| WorkspaceError::NoBranch { branch: record.branch.clone() })?;
    let merged = is_ancestor(repository, &branch_tip, &target_tip)
        .await
        .map_err(failed("compare the branch with its target"))?;
    if merged {
        return Err(WorkspaceError::NothingToMerge {
            branch: record.branch.clone(),
            target: record.integration_target.clone(),
        });
    }
    let range = format!("{target_tip}..{branch_tip}");
    let commits = commit_count(repository, &[&range]).await.map_err(failed("count the commits"))?;
    let fingerprint = fingerprint("merge", &[&target, &target_tip, &branch, &branch_tip]);
    let fast_forward = is_ancestor(repository, &target_tip, &branch_tip)
        .await
        .map_err(failed("compare the branch with its target"))?;
    let Merged { kind, tree, conflicts } = if fast_forward {
        Merged { kind: MergeKind::FastForward, tree: None, conflicts: Vec::new() }
    } else {
        merged_tree(repository, &target_tip, &branch_tip).await?
    };
    let mut plan = Plan {
        target,
        target_tip,
        branch_tip,
        kind,
        tree,
        commits,
        files: Vec::new(),
        file_count: 0,
        conflicts,
        checkouts: Vec::new(),
        fingerprint,
    };
    if plan.kind == MergeKind::Conflict {
        return Ok(plan);
    }
    if plan.kind == MergeKind::Merge {
        check_identity(repository).await?;
    }
    let new_tree = plan.tree.clone().unwrap_or_else(|| plan.branch_tip.clone());
    let changes = changed_paths(repository, &plan.target_tip, &new_tree)
        .await
        .map_err(failed("list what the merge changes"))?;
    plan.files = changes.listed;
    plan.file_count = count(changes.all.len());
    plan.checkouts = checkouts_of(repository, &plan.target).await?;
    let changed: HashSet<&str> = changes.all.iter().map(String::as_str).collect();
    for checkout in &plan.checkouts {
        check_checkout(record, repository, checkout, &changed).await?;
    }
    Ok(plan)
}

/// A checkout of the target is settled (no merge or rebase in progress)
/// and has no change of its own in a file the merge changes.
async fn check_checkout(
    record: &WorkspaceRecord,
    repository: &Path,
    checkout: &Checkout,
    changed: &HashSet<&str>,
) -> Result<(), WorkspaceError> {
    let name = checkout_name(repository, &checkout.work_tree);
    check_settled(checkout, &name).await?;
    let touched = dirty_paths(checkout)
        .await
        .map_err(failed("read the target's checkout"))?
        .into_iter()
        .filter(|path| changed.contains(path.as_str()))
        .take(MAX_LISTED)
        .collect::<Vec<_>>();
    if !touched.is_empty() {
        return Err(WorkspaceError::CheckoutDirty {
            target: record.integration_target.clone(),
            checkout: name,
            paths: touched,
        });
    }
    Ok(())
}

/// The merge of two commits as git makes it without a checkout.
struct Merged {
    kind: MergeKind,
    /// A clean merge's tree.
    tree: Option<String>,
    /// A conflicted merge's paths (at most [`MAX_LISTED`]).
    conflicts: Vec<String>,
}

async fn merged_tree(
    repository: &Path,
    target_tip: &str,
    branch_tip: &str,
) -> Result<Merged, WorkspaceError> {
    let args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        "-z",
        target_tip,
        branch_tip,
    ];
    // 0: clean; 1: conflicts; anything else failed.
    let out = Git::new(repository)
        .accept(&[0, 1])
        .run(&args)
        .await
        .map_err(failed("merge the branch"))?;
    let mut fields = out.text.split('\0');
    let tree = fields.next().unwrap_or_default().trim().to_owned();
    if out.code == Some(0) {
        return Ok(Merged { kind: MergeKind::Merge, tree: Some(tree), conflicts: Vec::new() });
    }
    let mut conflicts: Vec<String> =
        fields.filter(|path| !path.is_empty()).map(str::to_owned).collect();
    conflicts.dedup();
    conflicts.truncate(MAX_LISTED);
    Ok(Merged { kind: MergeKind::Conflict, tree: None, conflicts })
}

/// The checkouts (worktrees, the main one included) that have `target`
/// checked out and are there, each with the git directory the repository
/// records for it (a linked worktree's own `.git` is not read: its agent
/// can write it).
async fn checkouts_of(repository: &Path, target: &str) -> Result<Vec<Checkout>, WorkspaceError> {
    let common = git::common_dir(repository).await.map_err(failed("find the repository"))?;
    let list = git::git(repository, &["worktree", "list", "--porcelain", "-z"])
        .await
        .map_err(failed("list the worktrees"))?;
    let mut found = Vec::new();
    let mut first = true;
    let mut path: Option<&str> = None;
    let mut on_target = false;
    let mut gone = false;
    // Each worktree is a run of fields, and an empty field ends it.
    for field in list.split('\0') {
        if field.is_empty() {
            if let (Some(path), true, false) = (path, on_target, gone) {
                let work_tree = PathBuf::from(path);
                // The first is the main checkout, whose git directory is
                // the common one.
                let git_dir = if first {
                    Some(common.clone())
                } else {
                    git::linked_git_dir(&common, &work_tree)
                };
                match git_dir {
                    Some(git_dir) => found.push(Checkout { work_tree, git_dir }),
                    None => return Err(WorkspaceError::UnreadableCheckout),
                }
            }
            first = false;
            (path, on_target, gone) = (None, false, false);
        } else if let Some(at) = field.strip_prefix("worktree ") {
            path = Some(at);
        } else if let Some(branch) = field.strip_prefix("branch ") {
            on_target = branch == target;
        } else if field == "bare" || field.starts_with("prunable") {
            gone = true;
        }
    }
    Ok(found)
}

/// The paths of a checkout with uncommitted changes, untracked files
/// included (they block a checkout that would write them).
async fn dirty_paths(checkout: &Checkout) -> Result<Vec<String>, GitError> {
    let args = [
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=all",
    ];
    let out = git::git(checkout, &args).await?;
    Ok(out
        .split('\0')
        .filter_map(|entry| entry.get(3..))
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Refuses a git older than `merge-tree --write-tree`.
async fn check_git_version(dir: &Path) -> Result<(), WorkspaceError> {
    let out = git::git(dir, &["version"]).await.map_err(failed("tell its version"))?;
    let version = out.trim().trim_start_matches("git version ").to_owned();
    if version_at_least(&version, MERGE_TREE_GIT) {
        Ok(())
    } else {
        Err(WorkspaceError::GitTooOld { version })
    }
}

/// Whether `version` (`2.47.3`, `2.39.5 (Apple Git-154)`, `2.45.1.windows.1`)
/// is `minimum` or later.
fn version_at_least(version: &str, minimum: (u32, u32)) -> bool {
    let mut numbers = version
        .split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= minimum
}

#[cfg(test)]
mod tests {
    use super::version_at_least;

    #[test]
    fn git_versions_are_compared_by_major_and_minor() {
        for new_enough in ["2.38.0", "2.47.3", "2.39.5 (Apple Git-154)", "2.45.1.windows.1", "3.0"]
        {
            assert!(version_at_least(new_enough, (2, 38)), "{new_enough}");
        }
        for too_old in ["2.37.9", "2.30.2", "1.99", "", "unknown"] {
            assert!(!version_at_least(too_old, (2, 38)), "{too_old}");
        }
    }
}
