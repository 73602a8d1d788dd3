//! What a repository says of itself: its checkouts and git directories,
//! refs and branches, and how a checkout stands against a target.

use std::path::{Path, PathBuf};

use super::{GitError, Place, git, run};

/// The top of the checkout `dir` is in, or `None` when it is in none.
pub async fn toplevel(dir: &Path) -> Option<PathBuf> {
    let out = git(dir, &["rev-parse", "--show-toplevel"]).await.ok()?;
    Some(PathBuf::from(out.trim()))
}

/// The repository's main checkout: the first worktree git lists (the one
/// whose git-dir is the common dir).
pub async fn main_checkout(dir: &Path) -> Result<PathBuf, GitError> {
    let list = git(dir, &["worktree", "list", "--porcelain"]).await?;
    list.lines()
        .find_map(|line| line.strip_prefix("worktree "))
        .map(PathBuf::from)
        .ok_or(GitError::NoMainCheckout)
}

/// The repository's common git directory (absolute), as git finds it from
/// `dir`.
pub async fn common_dir(dir: &Path) -> Result<PathBuf, GitError> {
    let out = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"]).await?;
    Ok(PathBuf::from(out.trim()))
}

/// The git directory the repository at `common` records for its linked
/// worktree at `work_tree`: the directory under `worktrees/` whose `gitdir`
/// file names `work_tree/.git`. Read from the repository, never from the
/// worktree.
pub fn linked_git_dir(common: &Path, work_tree: &Path) -> Option<PathBuf> {
    let dot_git = work_tree.join(".git");
    std::fs::read_dir(common.join("worktrees")).ok()?.flatten().map(|entry| entry.path()).find(
        |admin| named_in(&admin.join("gitdir"), admin).is_some_and(|named| same(&named, &dot_git)),
    )
}

/// How a linked worktree stands with the git directory it was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Its `.git` is a file (not a link, not a directory) naming that git
    /// directory, which names it back.
    Intact,
    /// The repository still records it, but its `.git` names something
    /// else, or is no longer a plain file.
    Relinked,
    /// The repository no longer records it there (pruned, or moved), or
    /// it has no `.git` at all: git cannot read it as a checkout.
    Unrecorded,
}

/// How the worktree at `work_tree` stands with `git_dir`.
pub fn link(work_tree: &Path, git_dir: &Path) -> Link {
    let dot_git = work_tree.join(".git");
    if named_in(&git_dir.join("gitdir"), git_dir).is_none_or(|named| !same(&named, &dot_git)) {
        return Link::Unrecorded;
    }
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else { return Link::Unrecorded };
    let is_file = meta.is_file();
    let says = std::fs::read_to_string(&dot_git).is_ok_and(|text| {
        text.strip_prefix("gitdir: ").is_some_and(|named| {
            same(&relative_to(named.trim_end_matches(['\n', '\r']), work_tree), git_dir)
        })
    });
    if is_file && says { Link::Intact } else { Link::Relinked }
}

/// The path a git administrative file holds (one line; relative to `base`
/// when not absolute).
fn named_in(file: &Path, base: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    Some(relative_to(text.trim_end_matches(['\n', '\r']), base))
}

fn relative_to(path: &str, base: &Path) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() { path.to_path_buf() } else { base.join(path) }
}

/// Whether two paths name the same place (each resolved when it exists).
fn same(one: &Path, other: &Path) -> bool {
    let resolve = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    one == other || resolve(one) == resolve(other)
}

/// The commit `rev` names, or why not (an unborn HEAD, a bad ref).
pub async fn commit_of<'a>(place: impl Into<Place<'a>>, rev: &str) -> Result<String, GitError> {
    let spec = format!("{rev}^{{commit}}");
    git(place, &["rev-parse", "--verify", "--quiet", "--end-of-options", &spec])
        .await
        .map(|out| out.trim().to_owned())
        .map_err(|_| GitError::NoCommit { rev: rev.to_owned() })
}

/// The full name of branch `name`: every branch operation names it so,
/// because a short name can mean another ref (`heads/main` is `main`; a
/// tag of the same name hides a branch).
pub fn branch_ref(name: &str) -> String {
    format!("refs/heads/{name}")
}

/// Whether the exact ref `reference` exists.
async fn ref_exists(dir: &Path, reference: &str) -> bool {
    git(dir, &["show-ref", "--verify", "--quiet", reference]).await.is_ok()
}

/// Whether branch `name` exists.
pub async fn branch_exists(dir: &Path, name: &str) -> bool {
    ref_exists(dir, &branch_ref(name)).await
}

/// What `name` means, as an exact ref, resolved once: a full ref as it
/// is, else a branch, a remote-tracking branch or a tag of that name (a
/// branch first, so that a tag never hides it), else a full commit id.
pub async fn exact_ref(dir: &Path, name: &str) -> Option<String> {
    if name.starts_with("refs/") {
        return ref_exists(dir, name).await.then(|| name.to_owned());
    }
    for space in ["refs/heads/", "refs/remotes/", "refs/tags/"] {
        let candidate = format!("{space}{name}");
        if ref_exists(dir, &candidate).await {
            return Some(candidate);
        }
    }
    let full_id = matches!(name.len(), 40 | 64) && name.bytes().all(|b| b.is_ascii_hexdigit());
    if full_id && commit_of(dir, name).await.is_ok_and(|commit| commit == name) {
        return Some(name.to_owned());
    }
    None
}

/// The full ref `dir`'s HEAD is on (`refs/heads/…`), or `None` when it is
/// detached or cannot be read.
pub async fn head_ref<'a>(place: impl Into<Place<'a>>) -> Option<String> {
    let out = git(place, &["symbolic-ref", "--quiet", "HEAD"]).await.ok()?;
    let reference = out.trim();
    (!reference.is_empty()).then(|| reference.to_owned())
}

/// Whether `name` is a valid new branch name.
pub async fn valid_branch_name(dir: &Path, name: &str) -> bool {
    !name.starts_with('-') && git(dir, &["check-ref-format", "--branch", name]).await.is_ok()
}

/// Paths with changes (staged, unstaged or untracked, ignored files aside).
pub async fn dirty_count<'a>(place: impl Into<Place<'a>>) -> Result<u32, GitError> {
    let args = ["status", "--porcelain=v1", "--untracked-files=all", "--ignore-submodules=all"];
    let out = git(place, &args).await?;
    Ok(u32::try_from(out.lines().filter(|line| !line.is_empty()).count()).unwrap_or(u32::MAX))
}

/// Commits on `branch` not on `target` (both exact refs), and the other
/// way round.
pub async fn ahead_behind<'a>(
    place: impl Into<Place<'a>>,
    branch: &str,
    target: &str,
) -> Result<(u32, u32), GitError> {
    let range = format!("{target}...{branch}");
    let out =
        git(place, &["rev-list", "--left-right", "--count", "--end-of-options", &range]).await?;
    let mut numbers = out.split_whitespace().map(|number| number.parse::<u32>().unwrap_or(0));
    let behind = numbers.next().unwrap_or(0);
    let ahead = numbers.next().unwrap_or(0);
    Ok((ahead, behind))
}

/// Whether `commit` is contained in `target`'s history: `true` only when
/// git says so.
pub async fn contains<'a>(
    place: impl Into<Place<'a>>,
    target: &str,
    commit: &str,
) -> Result<bool, GitError> {
    let place = place.into();
    let target_commit = commit_of(place, target).await?;
    let args = ["merge-base", "--is-ancestor", commit, &target_commit];
    // 0: contained; 1: not; anything else failed (and is an error).
    Ok(run(place, &args, &[0, 1], 0).await?.code == Some(0))
}

/// Whether the tip of `branch_ref` (an exact ref) is contained in
/// `target` (an exact ref or commit id).
pub async fn merged<'a>(
    place: impl Into<Place<'a>>,
    branch_ref: &str,
    target: &str,
) -> Result<bool, GitError> {
    let place = place.into();
    let tip = commit_of(place, branch_ref).await?;
    contains(place, target, &tip).await
}

/// Deletes branch ref `reference` only if it still points at `tip`, the
/// commit whose safety was proven: a branch that moved since is kept.
pub async fn delete_ref(dir: &Path, reference: &str, tip: &str) -> Result<(), GitError> {
    git(dir, &["update-ref", "-d", reference, tip]).await.map(|_| ())
}
