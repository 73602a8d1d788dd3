//! `workspace.push`: the workspace's branch to the one remote the daemon's
//! `config.toml` names (`[workspaces] push_remote`), under the same name
//! there. Never forced: a remote branch with commits this one lacks is
//! refused before git is asked, and git refuses one that gained them since.
//! The remote is asked what it has (`git ls-remote`) for the preview and
//! again for the push, each within [`NETWORK_TIMEOUT`], with no prompt and
//! no hook.

use std::path::Path;
use std::time::Duration;

use shard_protocol::display::escaped;
use shard_protocol::workspace::{WorkspaceActed, WorkspaceAction, WorkspacePreview};

use super::actions::{
    asked_fingerprint, commit_count, failed, fingerprint, is_ancestor, plural, same_state,
};
use super::git::{self, Git};
use super::records::WorkspaceRecord;
use super::{WorkspaceError, Workspaces};

/// How long git may take to ask the remote, or to push to it.
const NETWORK_TIMEOUT: Duration = Duration::from_secs(120);

/// A push worked out, not yet made.
struct Plan {
    remote: String,
    /// The branch's exact ref (the same on both sides) and its commit.
    branch: String,
    tip: String,
    /// Whether the remote has the branch yet.
    new_there: bool,
    commits: u32,
    fingerprint: String,
}

impl Workspaces {
    /// `workspace.push` with `dry_run`: where the branch would go, and
    /// how many commits.
    pub async fn preview_push(
        &self,
        request: WorkspaceAction,
    ) -> Result<WorkspacePreview, WorkspaceError> {
        let record = self.acting_on(&request.workspace_id).await?;
        let plan = self.plan_push(&record).await?;
        let branch = escaped(&record.branch);
        let summary = if plan.new_there {
            format!(
                "Pushes branch `{branch}` to `{}`, where it is new: {} it does not have.",
                plan.remote,
                plural(plan.commits, "commit")
            )
        } else {
            format!(
                "Pushes {} of branch `{branch}` to `{}` (a fast-forward there).",
                plural(plan.commits, "commit"),
                plan.remote
            )
        };
        Ok(WorkspacePreview {
            workspace_id: record.workspace_id.clone(),
            summary,
            fingerprint: plan.fingerprint,
            branch: record.branch.clone(),
            files: Vec::new(),
            file_count: 0,
            commits: Some(plan.commits),
            merge: None,
            target: None,
            conflicts: Vec::new(),
            remote: Some(plan.remote),
            remote_branch: Some(record.branch.clone()),
        })
    }

    /// `workspace.push`: the push the preview showed, or a refusal.
    pub async fn push(&self, request: WorkspaceAction) -> Result<WorkspaceActed, WorkspaceError> {
        let asked = asked_fingerprint(&request, "push")?;
        // No lock held while the network is waited for: a push changes
        // nothing the daemon records, and git locks the refs it writes.
        let record = self.acting_on(&request.workspace_id).await?;
        let plan = self.plan_push(&record).await?;
        same_state(&asked, &plan.fingerprint, "push")?;
        let repository = Path::new(&record.repository_cwd);
        // The exact branch to the same name, without `+`: never forced; no
        // tags or submodules along (the preview did not show them).
        let refspec = format!("{0}:{0}", plan.branch);
        let args = [
            "push",
            "--porcelain",
            "--no-follow-tags",
            "--recurse-submodules=no",
            &plan.remote,
            &refspec,
        ];
        let pushed = Git::new(repository)
            .hooks_off()
            .limit(NETWORK_TIMEOUT)
            .run(&args)
            .await
            .map_err(|source| push_failed("push to", &plan.remote, source))?;
        // `--porcelain`: one line per ref, `!` when it was refused.
        let refused = pushed.text.lines().any(|line| {
            line.starts_with('!') && line.split('\t').nth(1).is_some_and(|it| it == refspec)
        });
        if refused {
            let source = git::GitError::Failed {
                command: "push".to_owned(),
                stderr: pushed.text.lines().take(5).collect::<Vec<_>>().join(" | "),
            };
            return Err(push_failed("push to", &plan.remote, source));
        }
        let summary = format!(
            "Pushed {} of branch `{}` to `{}`.",
            plural(plan.commits, "commit"),
            escaped(&record.branch),
            plan.remote
        );
        let workspace = self.detail(&record).await;
        Ok(WorkspaceActed { summary, commit: plan.tip, workspace })
    }

    /// Everything a push depends on, read afresh (the remote asked again):
    /// refused without a configured remote the repository has, without a
    /// branch, with nothing to push, or when the remote's branch has
    /// commits this one lacks.
    async fn plan_push(&self, record: &WorkspaceRecord) -> Result<Plan, WorkspaceError> {
        let config = shard_agent::config::Config::load(&self.home).map_err(|source| {
            tracing::warn!(error = %format!("{source:#}"), "workspace push: cannot read config.toml");
            WorkspaceError::Config { source }
        })?;
        let remote = config.workspaces.push_remote.ok_or(WorkspaceError::NoPushRemote)?;
        let repository = Path::new(&record.repository_cwd);
        let remotes =
            git::git(repository, &["remote"]).await.map_err(failed("list the remotes"))?;
        if !remotes.lines().any(|line| line == remote) {
            return Err(WorkspaceError::UnknownRemote { remote });
        }
        let branch = git::branch_ref(&record.branch);
        let tip = git::commit_of(repository, &branch)
            .await
            .map_err(|_| WorkspaceError::NoBranch { branch: record.branch.clone() })?;
        let there = remote_tip(repository, &remote, &branch).await?;
        let commits = match &there {
            Some(there) if *there == tip => {
                return Err(WorkspaceError::NothingToPush {
                    remote,
                    branch: record.branch.clone(),
                });
            }
            Some(there) => {
                // Known here and in the branch's history, or the push
                // would need force.
                let behind = || WorkspaceError::NotFastForward {
                    remote: remote.clone(),
                    branch: record.branch.clone(),
                };
                let known = git::commit_of(repository, there).await.is_ok();
                if !known || !is_ancestor(repository, there, &tip).await.unwrap_or(false) {
                    return Err(behind());
                }
                let range = format!("{there}..{tip}");
                commit_count(repository, &[&range]).await
            }
            // New there: the commits of no branch of that remote known here.
            None => {
                let known = format!("--remotes={remote}");
                commit_count(repository, &[&tip, "--not", &known]).await
            }
        }
        .map_err(failed("count the commits"))?;
        let fingerprint =
            fingerprint("push", &[&remote, &branch, &tip, there.as_deref().unwrap_or("new")]);
        Ok(Plan { remote, branch, tip, new_there: there.is_none(), commits, fingerprint })
    }
}

/// The commit `remote` has at `branch` (an exact ref), or `None`.
async fn remote_tip(
    repository: &Path,
    remote: &str,
    branch: &str,
) -> Result<Option<String>, WorkspaceError> {
    let listed = Git::new(repository)
        .limit(NETWORK_TIMEOUT)
        .run(&["ls-remote", "--heads", remote, branch])
        .await
        .map_err(|source| push_failed("reach", remote, source))?;
    Ok(listed.text.lines().find_map(|line| {
        let (commit, name) = line.split_once('\t')?;
        (name == branch).then(|| commit.to_owned())
    }))
}

fn push_failed(what: &'static str, remote: &str, source: git::GitError) -> WorkspaceError {
    tracing::warn!(error = %source, remote, "workspace push: git could not {what} the remote");
    WorkspaceError::PushFailed { what, remote: remote.to_owned(), source }
}
