//! Acting on a workspace's result (docs/WORKSPACES.md): `workspace.commit`,
//! `workspace.merge` and `workspace.push`, each previewed by a dry run that
//! changes nothing, and each refused, with nothing changed, when the state
//! moved since its preview, when a merge would conflict or overwrite
//! uncommitted work, or when no remote is configured. Real git
//! repositories in temp dirs; no hook ever runs.

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;
use super::workspaces::{canonical, create, git, repository};

/// A repository on `main` with an identity for commits, and hooks that
/// leave a mark in `marks` if git ever runs one.
fn repository_with_hooks(marks: &Path) -> TempDir {
    let repo = repository();
    git(repo.path(), &["config", "user.name", "Shard Test"]);
    git(repo.path(), &["config", "user.email", "test@example.invalid"]);
    let hooks = repo.path().join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in ["pre-commit", "commit-msg", "post-commit", "reference-transaction", "pre-push"] {
        let path = hooks.join(hook);
        let script = format!("#!/bin/sh\necho {hook} >> '{}'\n", marks.display());
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    repo
}

/// The test's own git, with hooks off: only the daemon's would mark.
pub(super) fn own_git(dir: &Path, args: &[&str]) -> String {
    git(dir, &[&["-c", "core.hooksPath=/dev/null"], args].concat())
}

/// Commits `file` with `text` in `dir` (hooks off).
pub(super) fn commit_in(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    own_git(dir, &["add", file]);
    own_git(dir, &["commit", "--quiet", "-m", file]);
}

/// A workspace on `branch`; its id and worktree.
pub(super) async fn workspace(client: &mut Client, repo: &Path, branch: &str) -> (String, String) {
    let made = create(client, json!({"cwd": canonical(repo), "branch": branch})).await;
    assert_eq!(made["success"], true, "{made}");
    let workspace = &made["data"]["workspace"];
    (
        workspace["workspace_id"].as_str().unwrap().to_owned(),
        workspace["cwd"].as_str().unwrap().to_owned(),
    )
}

/// `workspace.<action>` with `fields`.
pub(super) async fn act(client: &mut Client, action: &str, id: &str, fields: Value) -> Value {
    let mut body = fields;
    body["type"] = json!(format!("workspace.{action}"));
    body["workspace_id"] = json!(id);
    client.call(action, body).await
}

/// A dry run that must succeed: its preview.
pub(super) async fn preview(client: &mut Client, action: &str, id: &str) -> Value {
    let answer = act(client, action, id, json!({"dry_run": true})).await;
    assert_eq!(answer["success"], true, "{action} preview: {answer}");
    answer["data"].clone()
}

/// Everything a dry run must leave as it was: every ref, the status of
/// both checkouts, and both index files byte for byte (read without
/// letting `git status` refresh them).
fn state(repo: &Path, worktree: &Path) -> Vec<String> {
    let index = |dir: &Path| {
        let path = git(dir, &["rev-parse", "--path-format=absolute", "--git-path", "index"]);
        format!("{:?}", std::fs::read(path).unwrap())
    };
    let status = ["--no-optional-locks", "status", "--porcelain", "--untracked-files=all"];
    vec![
        git(repo, &["for-each-ref"]),
        git(repo, &status),
        git(worktree, &status),
        index(repo),
        index(worktree),
    ]
}

fn paths(files: &Value) -> Vec<String> {
    files
        .as_array()
        .expect("a list")
        .iter()
        .map(|file| {
            format!("{} {}", file["status"].as_str().unwrap(), file["path"].as_str().unwrap())
        })
        .collect()
}

#[tokio::test]
async fn commit_then_a_fast_forward_merge_and_dry_runs_change_nothing() {
    let daemon = Daemon::start(&[]).await;
    let marks = TempDir::new().unwrap();
    let marks = marks.path().join("hooks-ran");
    let repo = repository_with_hooks(&marks);
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, repo.path(), "feature").await;
    let worktree = Path::new(&worktree);
    // Another client (another tab) watching: it learns what actions change.
    let mut watching = Client::unix(&daemon.socket()).await;
    let updated = |message: &Value| message["type"] == "workspace_updated";

    // Nothing to commit yet.
    let refused = act(&mut client, "commit", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "nothing_to_commit", "{refused}");

    // An edit, a new file, an ignored file and a deletion.
    std::fs::write(worktree.join("README"), "hello, again\n").unwrap();
    std::fs::write(worktree.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(worktree.join("build.log"), "noise\n").unwrap();
    std::fs::create_dir_all(worktree.join("src")).unwrap();
    std::fs::write(worktree.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
    let before = state(repo.path(), worktree);
    let shown = preview(&mut client, "commit", &id).await;
    assert_eq!(paths(&shown["files"]), ["A .gitignore", "M README", "A src/lib.rs"], "{shown}");
    assert_eq!(shown["file_count"], 3);
    assert_eq!(shown["branch"], "feature");
    assert!(shown["summary"].as_str().unwrap().contains("3 changed files"), "{shown}");
    assert_eq!(state(repo.path(), worktree), before, "a dry run changes nothing");

    // The action needs the fingerprint and a message.
    let refused = act(&mut client, "commit", &id, json!({"message": "Add the answer"})).await;
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    assert_eq!(refused["error"]["data"]["kind"], "fingerprint_required");
    let fingerprint = shown["fingerprint"].clone();
    let refused =
        act(&mut client, "commit", &id, json!({"fingerprint": fingerprint, "message": " \n"}))
            .await;
    assert_eq!(refused["error"]["data"]["kind"], "bad_message", "{refused}");
    assert_eq!(state(repo.path(), worktree), before, "refusals change nothing");

    let done = act(
        &mut client,
        "commit",
        &id,
        json!({"fingerprint": fingerprint, "message": "Add the answer\n\nAnd say hello again."}),
    )
    .await;
    assert_eq!(done["success"], true, "{done}");
    let commit = done["data"]["commit"].as_str().unwrap().to_owned();
    assert_eq!(git(worktree, &["rev-parse", "feature"]), commit);
    assert_eq!(
        git(worktree, &["log", "-1", "--format=%B"]),
        "Add the answer\n\nAnd say hello again."
    );
    assert_eq!(git(worktree, &["log", "-1", "--format=%an"]), "Shard Test");
    assert_eq!(
        git(worktree, &["status", "--porcelain", "--untracked-files=all"]),
        "",
        "everything committed, the index caught up, the ignored file left out"
    );
    assert!(worktree.join("build.log").exists());
    assert_eq!(done["data"]["workspace"]["ahead"], 1, "{done}");
    assert_eq!(done["data"]["workspace"]["dirty_files"], 0);
    let told = watching.until(updated).await;
    assert!(!told.iter().take(told.len() - 1).any(updated), "a dry run tells nobody: {told:?}");
    let told = told.last().expect("the update");
    assert_eq!(told["workspace"]["workspace_id"], id.as_str(), "{told}");
    assert_eq!(told["workspace"]["cwd"], done["data"]["workspace"]["cwd"], "{told}");

    // The merge: a fast-forward of main, checked out (clean) in the
    // repository's main checkout, whose files follow.
    let main_before = git(repo.path(), &["rev-parse", "main"]);
    let before = state(repo.path(), worktree);
    let shown = preview(&mut client, "merge", &id).await;
    assert_eq!(shown["merge"], "fast_forward", "{shown}");
    assert_eq!(shown["target"], "main");
    assert_eq!(shown["commits"], 1);
    assert_eq!(paths(&shown["files"]), ["A .gitignore", "M README", "A src/lib.rs"]);
    assert!(shown["summary"].as_str().unwrap().contains("main checkout"), "{shown}");
    assert_eq!(state(repo.path(), worktree), before, "a dry run changes nothing");
    let done = act(&mut client, "merge", &id, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(done["data"]["commit"], commit.as_str());
    assert_ne!(git(repo.path(), &["rev-parse", "main"]), main_before);
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), commit);
    assert_eq!(std::fs::read_to_string(repo.path().join("README")).unwrap(), "hello, again\n");
    assert!(repo.path().join("src/lib.rs").exists(), "the main checkout's files followed");
    assert_eq!(git(repo.path(), &["status", "--porcelain", "--untracked-files=all"]), "");
    assert_eq!(done["data"]["workspace"]["merged"], true, "{done}");
    let told = watching.until(updated).await;
    assert_eq!(told.last().expect("the update")["workspace"]["workspace_id"], id.as_str());

    let refused = act(&mut client, "merge", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "nothing_to_merge", "{refused}");
    assert!(!marks.exists(), "no hook ran: {:?}", std::fs::read_to_string(&marks));
}

#[tokio::test]
async fn a_clean_merge_makes_a_merge_commit_and_a_conflict_or_dirty_checkout_is_refused() {
    let daemon = Daemon::start(&[]).await;
    let marks = TempDir::new().unwrap();
    let marks = marks.path().join("hooks-ran");
    let repo = repository_with_hooks(&marks);
    let repo_path = repo.path();
    let mut client = Client::unix(&daemon.socket()).await;
    let (clean, clean_tree) = workspace(&mut client, repo_path, "clean").await;
    let (clash, clash_tree) = workspace(&mut client, repo_path, "clash").await;
    let (touchy, touchy_tree) = workspace(&mut client, repo_path, "touchy").await;
    commit_in(Path::new(&clean_tree), "a.txt", "from the workspace\n");
    commit_in(Path::new(&clash_tree), "README", "the workspace's hello\n");
    commit_in(Path::new(&touchy_tree), "c.txt", "the workspace's c\n");
    // Meanwhile main moves on: another file, and the README.
    commit_in(repo_path, "b.txt", "from main\n");
    commit_in(repo_path, "README", "main's hello\n");

    // A clean merge: a merge commit with both parents, the checkout follows.
    let shown = preview(&mut client, "merge", &clean).await;
    assert_eq!(shown["merge"], "merge", "{shown}");
    assert_eq!(paths(&shown["files"]), ["A a.txt"]);
    let main_before = git(repo_path, &["rev-parse", "main"]);
    let done =
        act(&mut client, "merge", &clean, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(done["success"], true, "{done}");
    let merge = git(repo_path, &["rev-parse", "main"]);
    assert_eq!(done["data"]["commit"], merge.as_str());
    let parents = git(repo_path, &["log", "-1", "--format=%P", "main"]);
    let branch_tip = git(repo_path, &["rev-parse", "clean"]);
    assert_eq!(parents, format!("{main_before} {branch_tip}"));
    assert_eq!(
        git(repo_path, &["log", "-1", "--format=%s", "main"]),
        "Merge branch 'clean' into main"
    );
    assert_eq!(std::fs::read_to_string(repo_path.join("a.txt")).unwrap(), "from the workspace\n");
    assert_eq!(git(repo_path, &["status", "--porcelain", "--untracked-files=all"]), "");

    // A conflict: previewed with its paths; the merge is refused, and
    // nothing changes, in the refs or in the main checkout.
    let shown = preview(&mut client, "merge", &clash).await;
    assert_eq!(shown["merge"], "conflict", "{shown}");
    assert_eq!(shown["conflicts"], json!(["README"]));
    let before = state(repo_path, Path::new(&clash_tree));
    let refused =
        act(&mut client, "merge", &clash, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(refused["error"]["code"], "CONFLICT", "{refused}");
    assert_eq!(refused["error"]["data"]["kind"], "merge_conflict");
    assert_eq!(refused["error"]["data"]["paths"], json!(["README"]));
    assert!(refused["error"]["message"].as_str().unwrap().contains("README"), "{refused}");
    assert_eq!(state(repo_path, Path::new(&clash_tree)), before, "nothing changed");
    assert!(!repo_path.join(".git/MERGE_HEAD").exists());
    // Resolving it in the workspace is the way; a commit in the middle of
    // that merge is refused (it would lose the merge's second parent).
    let clash_path = Path::new(&clash_tree);
    let merging = std::process::Command::new("git")
        .args(["-C", &clash_tree, "-c", "core.hooksPath=/dev/null", "merge", "--quiet", "main"])
        .output()
        .unwrap();
    assert!(!merging.status.success(), "a conflict");
    let refused = act(&mut client, "commit", &clash, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "in_progress", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("a merge"), "{refused}");
    own_git(clash_path, &["merge", "--abort"]);

    // Uncommitted work in the main checkout that the merge would touch
    // refuses it, with the paths; work elsewhere in it is carried along.
    std::fs::write(repo_path.join("c.txt"), "main's own c, not committed\n").unwrap();
    let refused = act(&mut client, "merge", &touchy, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "checkout_dirty", "{refused}");
    assert_eq!(refused["error"]["data"]["paths"], json!(["c.txt"]));
    assert!(refused["error"]["message"].as_str().unwrap().contains("main checkout"));
    std::fs::remove_file(repo_path.join("c.txt")).unwrap();
    std::fs::write(repo_path.join("b.txt"), "edited in main, not committed\n").unwrap();
    let shown = preview(&mut client, "merge", &touchy).await;
    let done =
        act(&mut client, "merge", &touchy, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(std::fs::read_to_string(repo_path.join("c.txt")).unwrap(), "the workspace's c\n");
    assert_eq!(
        git(repo_path, &["status", "--porcelain", "--untracked-files=all"]),
        "M b.txt",
        "the main checkout's own change is kept"
    );
    assert!(!marks.exists(), "no hook ran: {:?}", std::fs::read_to_string(&marks));
}

#[tokio::test]
async fn a_stale_fingerprint_or_a_busy_agent_is_refused_and_nothing_changes() {
    let daemon = Daemon::start(&[]).await;
    let marks = TempDir::new().unwrap();
    let repo = repository_with_hooks(&marks.path().join("hooks-ran"));
    let mut client = Client::unix(&daemon.socket()).await;
    let made =
        create(&mut client, json!({"cwd": canonical(repo.path()), "branch": "moving"})).await;
    let id = made["data"]["workspace"]["workspace_id"].as_str().unwrap().to_owned();
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    let worktree = made["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    let worktree = Path::new(&worktree);

    // A file written after the preview: the commit is refused as stale.
    std::fs::write(worktree.join("one.txt"), "1\n").unwrap();
    let shown = preview(&mut client, "commit", &id).await;
    std::fs::write(worktree.join("two.txt"), "2\n").unwrap();
    let before = state(repo.path(), worktree);
    let refused = act(
        &mut client,
        "commit",
        &id,
        json!({"fingerprint": shown["fingerprint"], "message": "one"}),
    )
    .await;
    assert_eq!(refused["error"]["data"]["kind"], "stale", "{refused}");
    assert_eq!(state(repo.path(), worktree), before, "nothing changed");
    let shown = preview(&mut client, "commit", &id).await;
    assert_eq!(shown["file_count"], 2);
    let done = act(
        &mut client,
        "commit",
        &id,
        json!({"fingerprint": shown["fingerprint"], "message": "one and two"}),
    )
    .await;
    assert_eq!(done["success"], true, "{done}");

    // The branch moves after the merge's preview: refused as stale.
    let shown = preview(&mut client, "merge", &id).await;
    commit_in(worktree, "three.txt", "3\n");
    let main_before = git(repo.path(), &["rev-parse", "main"]);
    let refused =
        act(&mut client, "merge", &id, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(refused["error"]["data"]["kind"], "stale", "{refused}");
    assert_eq!(git(repo.path(), &["rev-parse", "main"]), main_before, "main stayed");
    assert!(!repo.path().join("one.txt").exists());

    // While the agent works, a commit is refused.
    std::fs::write(worktree.join("four.txt"), "4\n").unwrap();
    client.attach(&agent, "interactive").await;
    let before = client.seen.len();
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 300"})).await;
    let streaming = |m: &Value| {
        m["agent_id"] == agent.as_str() && m["type"] == "status" && m["status"] == "streaming"
    };
    if !client.seen[before..].iter().any(streaming) {
        client.until(streaming).await;
    }
    let refused = act(&mut client, "commit", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "busy", "{refused}");
    client.call("ab", json!({"type": "abort", "agent_id": agent})).await;
}

#[tokio::test]
async fn push_goes_only_to_the_configured_remote_and_never_forces() {
    let daemon = Daemon::start(&[]).await;
    let marks = TempDir::new().unwrap();
    let marks = marks.path().join("hooks-ran");
    let repo = repository_with_hooks(&marks);
    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, repo.path(), "shard/pushed").await;
    let worktree = Path::new(&worktree);
    commit_in(worktree, "work.txt", "work\n");

    // No remote in config.toml: refused.
    let refused = act(&mut client, "push", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "no_push_remote", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("push_remote"));
    // Configured (read afresh: no restart), but the repository lacks it.
    std::fs::write(daemon.home.join("config.toml"), "[workspaces]\npush_remote = \"origin\"\n")
        .unwrap();
    let refused = act(&mut client, "push", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "unknown_remote", "{refused}");

    let bare = TempDir::new().unwrap();
    git(bare.path(), &["init", "--quiet", "--bare"]);
    git(repo.path(), &["remote", "add", "origin", &bare.path().display().to_string()]);
    let before = state(repo.path(), worktree);
    let shown = preview(&mut client, "push", &id).await;
    assert_eq!(shown["remote"], "origin", "{shown}");
    assert_eq!(shown["remote_branch"], "shard/pushed");
    assert_eq!(shown["commits"], 2, "new there: main's commit and the branch's");
    let url = bare.path().display().to_string();
    assert_eq!(shown["remote_url"], url.as_str(), "the exact URL it goes to: {shown}");
    assert_eq!(state(repo.path(), worktree), before, "a dry run changes nothing");
    assert!(git(bare.path(), &["for-each-ref"]).is_empty());

    let refused = act(&mut client, "push", &id, json!({"fingerprint": "0123"})).await;
    assert_eq!(refused["error"]["data"]["kind"], "stale", "{refused}");
    let done = act(&mut client, "push", &id, json!({"fingerprint": shown["fingerprint"]})).await;
    assert_eq!(done["success"], true, "{done}");
    let tip = git(worktree, &["rev-parse", "HEAD"]);
    assert_eq!(git(bare.path(), &["rev-parse", "refs/heads/shard/pushed"]), tip);
    assert_eq!(done["data"]["commit"], tip.as_str());
    assert!(
        git(bare.path(), &["for-each-ref", "--format=%(refname)"])
            .lines()
            .eq(["refs/heads/shard/pushed"])
    );
    let refused = act(&mut client, "push", &id, json!({"dry_run": true})).await;
    assert_eq!(refused["error"]["data"]["kind"], "nothing_to_push", "{refused}");

    // One more commit: a fast-forward there, one commit.
    commit_in(worktree, "more.txt", "more\n");
    let shown = preview(&mut client, "push", &id).await;
    assert_eq!(shown["commits"], 1, "{shown}");

    // Someone else's commit on the remote's branch: never overwritten.
    let other = TempDir::new().unwrap();
    git(other.path(), &["clone", "--quiet", &bare.path().display().to_string(), "."]);
    git(other.path(), &["switch", "--quiet", "shard/pushed"]);
    std::fs::write(other.path().join("theirs.txt"), "theirs\n").unwrap();
    git(other.path(), &["add", "theirs.txt"]);
    git(other.path(), &["commit", "--quiet", "-m", "theirs"]);
    git(other.path(), &["push", "--quiet", "origin", "shard/pushed"]);
    let theirs = git(other.path(), &["rev-parse", "HEAD"]);
    for body in [json!({"fingerprint": shown["fingerprint"]}), json!({"dry_run": true})] {
        let refused = act(&mut client, "push", &id, body).await;
        assert_eq!(refused["error"]["data"]["kind"], "not_fast_forward", "{refused}");
    }
    assert_eq!(git(bare.path(), &["rev-parse", "refs/heads/shard/pushed"]), theirs);
    assert!(!marks.exists(), "no hook ran: {:?}", std::fs::read_to_string(&marks));
}

/// The objects of the git directory `git_dir`: loose, and packs.
fn objects(git_dir: &Path) -> (usize, usize) {
    let objects = git_dir.join("objects");
    let fanned = std::fs::read_dir(&objects).unwrap().filter_map(Result::ok);
    let dirs = fanned.filter(|entry| entry.file_name().len() == 2);
    let loose = dirs.map(|dir| std::fs::read_dir(dir.path()).unwrap().count()).sum();
    let packs = std::fs::read_dir(objects.join("pack")).map_or(0, |dir| {
        let packs = dir.filter_map(Result::ok);
        packs.filter(|entry| entry.path().extension().is_some_and(|ext| ext == "pack")).count()
    });
    (loose, packs)
}

/// Has the repository of `dir` ask for a collection at its first loose
/// objects, in the foreground (where the daemon's git would wait for it,
/// or its killer of orphans cut a detached one short), and gives it
/// thousands.
fn ripe_for_collection(dir: &Path) {
    git(dir, &["config", "gc.auto", "1"]);
    git(dir, &["config", "gc.autoDetach", "false"]);
    let blobs = TempDir::new().unwrap();
    let mut names = String::new();
    for n in 0..3000 {
        let path = blobs.path().join(n.to_string());
        std::fs::write(&path, format!("blob {n}\n")).unwrap();
        names.push_str(&format!("{}\n", path.display()));
    }
    let list = blobs.path().join("list");
    std::fs::write(&list, names).unwrap();
    let written = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("git hash-object -w --stdin-paths < '{}' > /dev/null", list.display()))
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(written.success());
}

#[tokio::test]
async fn the_daemons_git_never_collects_garbage_here_or_in_a_remote_it_pushes_to() {
    let daemon = Daemon::start(&[]).await;
    let marks = TempDir::new().unwrap();
    let repo = repository_with_hooks(&marks.path().join("hooks-ran"));
    let bare = TempDir::new().unwrap();
    git(bare.path(), &["init", "--quiet", "--bare"]);
    git(repo.path(), &["remote", "add", "origin", &bare.path().display().to_string()]);
    std::fs::write(daemon.home.join("config.toml"), "[workspaces]\npush_remote = \"origin\"\n")
        .unwrap();
    ripe_for_collection(repo.path());
    ripe_for_collection(bare.path());
    let (here, there) = (objects(&repo.path().join(".git")), objects(bare.path()));
    assert!(here.0 >= 3000 && there.0 >= 3000, "{here:?} {there:?}");

    let mut client = Client::unix(&daemon.socket()).await;
    let (id, worktree) = workspace(&mut client, repo.path(), "feature").await;
    std::fs::write(Path::new(&worktree).join("README"), "collected?\n").unwrap();
    for action in ["commit", "merge", "push"] {
        let shown = preview(&mut client, action, &id).await;
        let fields = json!({"fingerprint": shown["fingerprint"], "message": "No collection"});
        let done = act(&mut client, action, &id, fields).await;
        assert_eq!(done["success"], true, "{action}: {done}");
    }
    // Nothing was collected: every loose object is still there (the
    // remote keeps what it received as a pack of its own).
    let (after_here, after_there) = (objects(&repo.path().join(".git")), objects(bare.path()));
    assert!(after_here.0 > here.0 && after_here.1 == 0, "collected here: {after_here:?}");
    assert!(after_there.0 >= there.0, "collected there: {after_there:?}");
}
