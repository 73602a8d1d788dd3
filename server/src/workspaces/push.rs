//! `workspace.push`: the workspace's branch to the one remote the daemon's
//! `config.toml` names (`[workspaces] push_remote`), under the same name
//! there. Never forced: a remote branch with commits this one lacks is
//! refused before git is asked, and git refuses one that gained them since.
//! The remote is asked what it has (`git ls-remote`) for the preview and
//! again for the push, each within [`NETWORK_TIMEOUT`], with no prompt and
//! no hook.
//!
//! Both go through a [`Courier`]: a bare repository of the daemon's own
//! that borrows the repository's objects and knows the remote by its URL
//! alone, so that nothing in the repository's config (which an agent's
//! tools can write) chooses where the push goes or what runs for it: no
//! `pushurl`, no `insteadOf`, no `uploadpack`/`receivepack`, no
//! `sshCommand`, no credential helper of the repository's. The user's own
//! git config is followed as always, and the preview names the exact URL
//! that results, which the push's fingerprint holds.

use std::path::{Path, PathBuf};
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
    /// The exact URL the push goes to.
    url: String,
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
        let (plan, courier) = self.plan_push(&record).await?;
        drop(courier);
        let branch = escaped(&record.branch);
        let url = shown_url(&plan.url);
        let summary = if plan.new_there {
            format!(
                "Pushes branch `{branch}` to `{}` at `{}`, where it is new: {} it does not have.",
                plan.remote,
                escaped(&url),
                plural(plan.commits, "commit")
            )
        } else {
            format!(
                "Pushes {} of branch `{branch}` to `{}` at `{}` (a fast-forward there).",
                plural(plan.commits, "commit"),
                plan.remote,
                escaped(&url),
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
            remote_url: Some(url),
        })
    }

    /// `workspace.push`: the push the preview showed, or a refusal.
    pub async fn push(&self, request: WorkspaceAction) -> Result<WorkspaceActed, WorkspaceError> {
        let asked = asked_fingerprint(&request, "push")?;
        // No lock held while the network is waited for: a push changes
        // nothing the daemon records, and git locks the refs it writes.
        let record = self.acting_on(&request.workspace_id).await?;
        let (plan, courier) = self.plan_push(&record).await?;
        same_state(&asked, &plan.fingerprint, "push")?;
        // The exact commit to the branch's name there, without `+`: never
        // forced; no tags or submodules along (the preview did not show
        // them).
        let refspec = format!("{}:{}", plan.tip, plan.branch);
        let mut args = vec!["push", "--porcelain", "--no-follow-tags", "--recurse-submodules=no"];
        let receive_pack;
        if is_local(&plan.url) {
            // A repository on this machine is pushed to by a git started
            // here, which would run that repository's hooks.
            receive_pack = format!("--receive-pack=git {} receive-pack", pinned_arguments());
            args.push(&receive_pack);
        }
        args.extend([REMOTE, refspec.as_str()]);
        let pushed = courier
            .git()
            .run(&args)
            .await
            .map_err(|source| push_failed("push to", &plan.remote, source))?;
        // `--porcelain`: one line per ref, `!` when it was refused.
        let refused = pushed.text.lines().any(|line| {
            line.starts_with('!') && line.split('\t').nth(1).is_some_and(|it| it == refspec)
        });
        drop(courier);
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
        // What a push of the remote by name would have recorded: where
        // the remote's branch now is.
        let tracking = format!("refs/remotes/{}/{}", plan.remote, record.branch);
        let repository = Path::new(&record.repository_cwd);
        if let Err(error) = git::git(repository, &["update-ref", &tracking, &plan.tip]).await {
            tracing::info!(%error, "pushed, but the remote-tracking branch was not updated");
        }
        let workspace = self.detail(&record).await;
        Ok(WorkspaceActed { summary, commit: plan.tip, workspace })
    }

    /// Everything a push depends on, read afresh (the remote asked again):
    /// refused without a configured remote the repository has, without a
    /// branch, with nothing to push, or when the remote's branch has
    /// commits this one lacks.
    async fn plan_push(&self, record: &WorkspaceRecord) -> Result<(Plan, Courier), WorkspaceError> {
        super::not_relinked(record).await?;
        let config = shard_platform::config::Config::load(&self.home).map_err(|source| {
            tracing::warn!(error = %format!("{source:#}"), "workspace push: cannot read config.toml");
            WorkspaceError::Config { source }
        })?;
        let remote = config.workspaces.push_remote.ok_or(WorkspaceError::NoPushRemote)?;
        let repository = Path::new(&record.repository_cwd);
        let configured = remote_url(repository, &remote).await?;
        let courier = Courier::open(&self.home, repository, &remote, &configured).await?;
        let url = courier.url.clone();
        let branch = git::branch_ref(&record.branch);
        let tip = git::commit_of(repository, &branch)
            .await
            .map_err(|_| WorkspaceError::NoBranch { branch: record.branch.clone() })?;
        let there = remote_tip(&courier, &remote, &branch).await?;
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
            fingerprint("push", &[&remote, &url, &branch, &tip, there.as_deref().unwrap_or("new")]);
        let plan =
            Plan { remote, url, branch, tip, new_there: there.is_none(), commits, fingerprint };
        Ok((plan, courier))
    }
}

/// The remote's name in a [`Courier`].
const REMOTE: &str = "shard-push";

/// The URL the repository's config gives remote `remote`: exactly one, as
/// its own config file writes it (a `pushurl` is not followed, nor a file
/// it includes).
async fn remote_url(repository: &Path, remote: &str) -> Result<String, WorkspaceError> {
    let key = format!("remote.{remote}.url");
    let listed = Git::new(repository)
        .accept(&[0, 1])
        .run(&["config", "--local", "--get-all", "--end-of-options", &key])
        .await
        .map_err(failed("read the remote's URL"))?;
    let urls: Vec<&str> = listed.text.lines().filter(|url| !url.is_empty()).collect();
    match urls.as_slice() {
        [] => Err(WorkspaceError::UnknownRemote { remote: remote.to_owned() }),
        [url] => Ok((*url).to_owned()),
        _ => Err(WorkspaceError::UnclearRemote {
            remote: remote.to_owned(),
            why: "it has more than one URL",
        }),
    }
}

/// A bare repository of the daemon's own, under `$SHARD_HOME/scratch/`,
/// that borrows the repository's objects and knows one remote by its URL,
/// rewritten by the user's own git config only. Removed when dropped.
struct Courier {
    dir: PathBuf,
    /// The exact URL a push goes to, and the remote is asked at.
    url: String,
}

impl Courier {
    async fn open(
        home: &Path,
        repository: &Path,
        remote: &str,
        configured: &str,
    ) -> Result<Self, WorkspaceError> {
        let unclear = |why| WorkspaceError::UnclearRemote { remote: remote.to_owned(), why };
        let common = git::common_dir(repository).await.map_err(failed("find the repository"))?;
        let scratch = home.join("scratch");
        crate::home::prepare_dir(&scratch).map_err(super::home)?;
        let dir = scratch.join(format!("push-{}", crate::id::random_hex()));
        crate::home::prepare_dir(&dir).map_err(super::home)?;
        let mut courier = Courier { dir, url: String::new() };
        let git = courier.git();
        git.run(&["init", "--quiet", "--bare", "--template=", "."])
            .await
            .map_err(failed("prepare the push"))?;
        let alternates = courier.dir.join("objects/info/alternates");
        let objects = format!("{}\n", common.join("objects").display());
        if let Some(parent) = alternates.parent() {
            std::fs::create_dir_all(parent).map_err(|error| super::home(error.into()))?;
        }
        std::fs::write(&alternates, objects).map_err(|error| super::home(error.into()))?;
        // The URL as the user's git would push to it, then checked to be
        // one that it rewrites no further, so that asking the remote and
        // pushing to it both reach exactly that URL.
        courier.set_url(configured).await?;
        let url = courier.get_url(true).await?;
        courier.set_url(&url).await?;
        if courier.get_url(false).await? != url || courier.get_url(true).await? != url {
            return Err(unclear("the user's git config rewrites it more than once"));
        }
        courier.url = url;
        Ok(courier)
    }

    /// Git in the courier, with the network.
    fn git(&self) -> Git<'_> {
        Git::new(self.dir.as_path()).network().limit(NETWORK_TIMEOUT)
    }

    async fn set_url(&self, url: &str) -> Result<(), WorkspaceError> {
        let key = format!("remote.{REMOTE}.url");
        self.git()
            .run(&["config", "--end-of-options", &key, url])
            .await
            .map(|_| ())
            .map_err(failed("prepare the push"))
    }

    async fn get_url(&self, push: bool) -> Result<String, WorkspaceError> {
        let mut args = vec!["remote", "get-url"];
        if push {
            args.push("--push");
        }
        args.push(REMOTE);
        let out = self.git().run(&args).await.map_err(failed("prepare the push"))?;
        Ok(out.text.trim_end_matches(['\n', '\r']).to_owned())
    }
}

impl Drop for Courier {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether git reaches `url` by starting a git of its own on this machine
/// (a path, or `file://`), not over a network transport.
fn is_local(url: &str) -> bool {
    if url.starts_with("file://") {
        return true;
    }
    if url.contains("://") {
        return false;
    }
    // `host:path` (scp-like) is ssh; a `:` after the first `/` is a path.
    match (url.find(':'), url.find('/')) {
        (None, _) => true,
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
    }
}

/// The [`git::PINNED`] settings as `-c` arguments for a git started by
/// another (quoted for the shell that starts it).
fn pinned_arguments() -> String {
    git::PINNED.iter().map(|setting| format!("-c '{setting}'")).collect::<Vec<_>>().join(" ")
}

/// `url` as a person is shown it: any user info (a token, a password)
/// masked, but an ssh user name (`git@`) kept.
fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..end].rfind('@') else { return url.to_owned() };
    let user_info = &rest[..at];
    let plain_ssh_user =
        matches!(scheme, "ssh" | "git+ssh" | "ssh+git") && !user_info.contains(':');
    if plain_ssh_user {
        return url.to_owned();
    }
    format!("{scheme}://***@{}", &rest[at + 1..])
}

/// The commit `remote` has at `branch` (an exact ref), or `None`.
async fn remote_tip(
    courier: &Courier,
    remote: &str,
    branch: &str,
) -> Result<Option<String>, WorkspaceError> {
    let mut args = vec!["ls-remote", "--heads"];
    let upload_pack;
    if is_local(&courier.url) {
        upload_pack = format!("--upload-pack=git {} upload-pack", pinned_arguments());
        args.push(&upload_pack);
    }
    args.extend([REMOTE, branch]);
    let listed =
        courier.git().run(&args).await.map_err(|source| push_failed("reach", remote, source))?;
    Ok(listed.text.lines().find_map(|line| {
        let (commit, name) = line.split_once('\t')?;
        (name == branch).then(|| commit.to_owned())
    }))
}

fn push_failed(what: &'static str, remote: &str, source: git::GitError) -> WorkspaceError {
    tracing::warn!(error = %source, remote, "workspace push: git could not {what} the remote");
    WorkspaceError::PushFailed { what, remote: remote.to_owned(), source }
}

#[cfg(test)]
mod tests {
    use super::{is_local, shown_url};

    #[test]
    fn a_url_is_shown_with_its_user_info_masked_but_an_ssh_user_kept() {
        for (url, shown) in [
            ("https://github.com/o/r.git", "https://github.com/o/r.git"),
            ("https://oauth2:ghp_abc@github.com/o/r.git", "https://***@github.com/o/r.git"),
            ("https://ghp_abc@github.com/o/r.git", "https://***@github.com/o/r.git"),
            ("https://host/p?q=a@b", "https://host/p?q=a@b"),
            ("ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"),
            ("ssh://git:pw@host/r.git", "ssh://***@host/r.git"),
            ("git@github.com:o/r.git", "git@github.com:o/r.git"),
            ("/srv/repo.git", "/srv/repo.git"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }

    #[test]
    fn a_path_or_file_url_is_local_and_a_host_is_not() {
        for local in ["/srv/r.git", "./r.git", "r.git", "file:///srv/r.git", "./a:b", "/a:b"] {
            assert!(is_local(local), "{local}");
        }
        for remote in ["https://h/r", "ssh://h/r", "git@h:r.git", "h:r.git", "[::1]:r.git"] {
            assert!(!is_local(remote), "{remote}");
        }
    }
}
