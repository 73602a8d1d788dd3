//! Workspaces (PROTOCOL.md §10.1a) with real git repositories in temp
//! dirs: create, list, status, typed refusals that leave nothing behind,
//! durability across a restart, a worktree removed by hand, and two
//! creates racing for one branch.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

/// Runs git in `dir`; its trimmed stdout. Panics on failure.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("run git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A repository with one commit on `main`.
pub(super) fn repository() -> TempDir {
    let repo = TempDir::new().expect("repo");
    git(repo.path(), &["init", "--quiet", "-b", "main"]);
    std::fs::write(repo.path().join("README"), "hello\n").expect("file");
    git(repo.path(), &["add", "README"]);
    git(repo.path(), &["commit", "--quiet", "-m", "first"]);
    repo
}

pub(super) fn canonical(path: &Path) -> String {
    path.canonicalize().expect("canonical").display().to_string()
}

pub(super) async fn create(client: &mut Client, body: Value) -> Value {
    let mut body = body;
    body["type"] = json!("workspace.create");
    client.call("ws", body).await
}

#[tokio::test]
async fn create_list_and_status_with_real_git() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let mut client = Client::unix(&daemon.socket()).await;
    let cwd = canonical(repo.path());
    let made =
        create(&mut client, json!({"cwd": cwd, "label": "Fix the Parser!", "name": "fixer"})).await;
    assert_eq!(made["success"], true, "{made}");
    let data = &made["data"];
    assert!(data["agent_id"].as_str().unwrap().starts_with("agent-"));
    assert!(!data["session_id"].as_str().unwrap().is_empty());
    let workspace = &data["workspace"];
    assert_eq!(workspace["branch"], "shard/fix-the-parser", "a branch from the label");
    assert_eq!(workspace["repository_cwd"], cwd.as_str());
    assert_eq!(workspace["integration_target"], "main");
    assert_eq!(workspace["lifecycle"], "active");
    assert!(!made.to_string().contains(".git"), "no git-dir paths: {made}");
    let worktree = workspace["cwd"].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(Path::new(&worktree).join("README")).unwrap(), "hello\n");
    assert_eq!(git(Path::new(&worktree), &["branch", "--show-current"]), "shard/fix-the-parser");
    // The agent works in the worktree.
    let info =
        client.call("i", json!({"type": "agent.status", "agent_id": data["agent_id"]})).await;
    assert_eq!(info["data"]["agents"][0]["cwd"], worktree.as_str());

    let named = create(&mut client, json!({"cwd": cwd, "branch": "feature/two"})).await;
    assert_eq!(named["data"]["workspace"]["branch"], "feature/two", "{named}");

    let listed = client.call("l", json!({"type": "workspace.list", "cwd": worktree})).await;
    let rows = listed["data"]["workspaces"].as_array().expect("rows").clone();
    assert_eq!(rows.len(), 2, "listed by repository, from a worktree too: {listed}");
    let elsewhere = repository();
    let none = client
        .call("l2", json!({"type": "workspace.list", "cwd": canonical(elsewhere.path())}))
        .await;
    assert_eq!(none["data"]["workspaces"], json!([]));

    // Status follows commits and edits in the worktree.
    let id = workspace["workspace_id"].as_str().unwrap().to_owned();
    std::fs::write(Path::new(&worktree).join("parser.rs"), "fn main() {}\n").unwrap();
    git(Path::new(&worktree), &["add", "parser.rs"]);
    git(Path::new(&worktree), &["commit", "--quiet", "-m", "parser"]);
    std::fs::write(Path::new(&worktree).join("README"), "changed\n").unwrap();
    std::fs::write(Path::new(&worktree).join("notes.txt"), "new\n").unwrap();
    let status = client.call("s", json!({"type": "workspace.status", "workspace_id": id})).await;
    let detail = &status["data"]["workspace"];
    assert_eq!(detail["ahead"], 1, "{status}");
    assert_eq!(detail["behind"], 0);
    assert_eq!(detail["dirty_files"], 2);
    assert_eq!(detail["merged"], false);
    assert_eq!(detail["agent_ids"][0], data["agent_id"]);
    assert_eq!(detail["live"], true);
    // The diff against the integration target: committed, uncommitted,
    // and new files git does not track yet, ignored ones aside.
    std::fs::write(Path::new(&worktree).join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(Path::new(&worktree).join("build.log"), "noise\n").unwrap();
    let status = client
        .call("d", json!({"type": "workspace.status", "workspace_id": id, "include_diff": true}))
        .await;
    let files = status["data"]["workspace"]["diff"]["files"].as_array().expect("diff").clone();
    let paths: Vec<&str> = files.iter().filter_map(|file| file["path"].as_str()).collect();
    assert_eq!(paths, ["README", "parser.rs", ".gitignore", "notes.txt"], "{status}");
    assert_eq!(files[0]["hunks"][0]["lines"], json!(["-hello", "+changed"]));
    assert_eq!(files[1]["hunks"][0]["new_lines"], 1);
    assert_eq!(files[3]["hunks"][0]["lines"], json!(["+new"]), "an untracked file, whole");
    let dirty = git(Path::new(&worktree), &["status", "--porcelain"]);
    assert!(dirty.contains("?? notes.txt"), "the index is untouched: {dirty}");
    // Merged once main has the commit.
    git(repo.path(), &["merge", "--quiet", "--ff-only", "shard/fix-the-parser"]);
    let status = client.call("s2", json!({"type": "workspace.status", "workspace_id": id})).await;
    assert_eq!(status["data"]["workspace"]["merged"], true, "{status}");
    assert_eq!(status["data"]["workspace"]["ahead"], 0);
}

#[tokio::test]
async fn bad_input_gets_a_typed_refusal_and_leaves_nothing_behind() {
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let plain = TempDir::new().unwrap();
    let refused = create(&mut client, json!({"cwd": canonical(plain.path())})).await;
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
    assert_eq!(refused["error"]["data"]["kind"], "not_a_repository");

    let unborn = TempDir::new().unwrap();
    git(unborn.path(), &["init", "--quiet", "-b", "main"]);
    let refused = create(&mut client, json!({"cwd": canonical(unborn.path())})).await;
    assert_eq!(refused["error"]["data"]["kind"], "unborn_base", "{refused}");

    let repo = repository();
    let cwd = canonical(repo.path());
    git(repo.path(), &["branch", "taken"]);
    for (body, code, kind) in [
        (json!({"cwd": cwd, "branch": "taken"}), "CONFLICT", "branch_exists"),
        (json!({"cwd": cwd, "branch": "bad..name"}), "INVALID_REQUEST", "bad_branch"),
        (json!({"cwd": cwd, "base_ref": "no-such-ref"}), "INVALID_REQUEST", "bad_base_ref"),
        (
            json!({"cwd": cwd, "integration_target": "nope"}),
            "INVALID_REQUEST",
            "bad_integration_target",
        ),
        (json!({"cwd": "relative/path"}), "INVALID_REQUEST", "bad_cwd"),
    ] {
        let refused = create(&mut client, body.clone()).await;
        assert_eq!(refused["error"]["code"], code, "{body}: {refused}");
        assert_eq!(refused["error"]["data"]["kind"], kind, "{body}: {refused}");
    }
    std::fs::write(repo.path().join("README"), "edited\n").unwrap();
    let refused = create(&mut client, json!({"cwd": cwd})).await;
    assert_eq!(refused["error"]["data"]["kind"], "dirty_base", "{refused}");
    // With an explicit base the dirty checkout does not matter.
    let based =
        create(&mut client, json!({"cwd": cwd, "base_ref": "main", "branch": "from-main"})).await;
    assert_eq!(based["success"], true, "{based}");
    // Nothing half-made: one worktree besides the main one, one new branch.
    let worktrees = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 2, "{worktrees}");
    let branches = git(repo.path(), &["branch", "--format=%(refname:short)"]);
    let mut branches: Vec<&str> = branches.lines().collect();
    branches.sort_unstable();
    assert_eq!(branches, ["from-main", "main", "taken"]);
}

#[tokio::test]
async fn records_survive_a_restart_and_a_worktree_removed_by_hand_is_a_tombstone() {
    let home = TempDir::new().unwrap();
    let repo = repository();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let made =
        create(&mut client, json!({"cwd": canonical(repo.path()), "branch": "keepme"})).await;
    let id = made["data"]["workspace"]["workspace_id"].as_str().unwrap().to_owned();
    let worktree = made["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    drop(client);
    drop(daemon);

    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let listed = client.call("l", json!({"type": "workspace.list"})).await;
    assert_eq!(listed["data"]["workspaces"][0]["workspace_id"], id.as_str(), "{listed}");
    let conflicts = |seen: &[Value]| -> Vec<Value> {
        seen.iter().filter(|m| m["type"] == "workspace_conflict").cloned().collect()
    };

    // A branch switched by hand is a conflict, announced once, and ends
    // when the branch is back.
    git(Path::new(&worktree), &["switch", "--quiet", "-c", "elsewhere"]);
    let status = client.call("s", json!({"type": "workspace.status", "workspace_id": id})).await;
    assert_eq!(status["data"]["workspace"]["lifecycle"], "conflict", "{status}");
    assert!(status["data"]["workspace"]["conflict"].as_str().unwrap().contains("keepme"));
    client.call("s2", json!({"type": "workspace.status", "workspace_id": id})).await;
    let seen = conflicts(&client.seen);
    assert_eq!(seen.len(), 1, "one announcement: {seen:?}");
    assert_eq!(seen[0]["workspace"]["lifecycle"], "conflict");
    git(Path::new(&worktree), &["switch", "--quiet", "keepme"]);
    let status = client.call("s3", json!({"type": "workspace.status", "workspace_id": id})).await;
    assert_eq!(status["data"]["workspace"]["lifecycle"], "active", "{status}");

    std::fs::remove_dir_all(&worktree).unwrap();
    let status = client.call("s", json!({"type": "workspace.status", "workspace_id": id})).await;
    assert_eq!(status["success"], true, "{status}");
    assert_eq!(status["data"]["workspace"]["tombstone"], true);
    assert_eq!(status["data"]["workspace"]["lifecycle"], "conflict");
    assert!(!status.to_string().contains("fatal"), "no git output: {status}");
    let seen = conflicts(&client.seen);
    assert_eq!(seen.len(), 2, "{seen:?}");
    let reason = seen[1]["reason"].as_str().unwrap();
    assert!(reason.contains("missing") && !reason.contains('/'), "sanitized: {reason}");
    let listed = client.call("l", json!({"type": "workspace.list"})).await;
    assert_eq!(listed["data"]["workspaces"][0]["lifecycle"], "conflict", "recorded: {listed}");
    // A tombstone retires (git forgets it; the branch is kept as asked).
    let kill = made["data"]["agent_id"].clone();
    client.call("k", json!({"type": "agent.kill", "agent_id": kill, "force": true})).await;
    let retired = client
        .call(
            "r",
            json!({"type": "workspace.retire", "workspace_id": id, "branch_disposition": "keep"}),
        )
        .await;
    assert_eq!(retired["success"], true, "{retired}");
    assert!(git(repo.path(), &["branch", "--list", "keepme"]).contains("keepme"));
    let unknown = client
        .call("u", json!({"type": "workspace.status", "workspace_id": "ws-000000000000"}))
        .await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn two_concurrent_creates_on_one_branch_cannot_both_succeed() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let cwd = canonical(repo.path());
    let mut first = Client::unix(&daemon.socket()).await;
    let mut second = Client::unix(&daemon.socket()).await;
    let body = json!({"type": "workspace.create", "cwd": cwd, "branch": "contested"});
    let (a, b) = tokio::join!(first.call("a", body.clone()), second.call("b", body.clone()));
    let successes = [&a, &b].iter().filter(|answer| answer["success"] == true).count();
    assert_eq!(successes, 1, "{a}\n{b}");
    let loser = if a["success"] == true { &b } else { &a };
    assert_eq!(loser["error"]["data"]["kind"], "branch_exists", "{loser}");
    let worktrees = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 2, "{worktrees}");
}

/// Stops every agent bound to a workspace (a live one blocks retirement).
pub(super) async fn stop_agents(client: &mut Client, workspace: &Value) {
    for agent in workspace["agent_ids"].as_array().expect("agents") {
        let killed =
            client.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
        assert_eq!(killed["success"], true, "{killed}");
    }
}

pub(super) async fn retire(client: &mut Client, id: &str, disposition: Option<&str>) -> Value {
    let mut body = json!({"type": "workspace.retire", "workspace_id": id});
    if let Some(disposition) = disposition {
        body["branch_disposition"] = json!(disposition);
    }
    client.call("r", body).await
}

pub(super) fn branches(repo: &Path) -> Vec<String> {
    let mut list: Vec<String> =
        git(repo, &["branch", "--format=%(refname:short)"]).lines().map(str::to_owned).collect();
    list.sort();
    list
}

#[tokio::test]
async fn attach_adds_an_agent_and_retire_is_safe_by_default() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let cwd = canonical(repo.path());
    let mut client = Client::unix(&daemon.socket()).await;
    let made = create(&mut client, json!({"cwd": cwd, "branch": "work"})).await;
    let id = made["data"]["workspace"]["workspace_id"].as_str().unwrap().to_owned();
    let worktree = made["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();

    let attached = client
        .call("a", json!({"type": "workspace.attach", "workspace_id": id, "name": "second"}))
        .await;
    assert_eq!(attached["success"], true, "{attached}");
    let second = attached["data"]["agent_id"].as_str().unwrap().to_owned();
    assert_ne!(second, made["data"]["agent_id"].as_str().unwrap());
    assert_eq!(attached["data"]["workspace"]["agent_count"], 2);
    assert!(
        client
            .seen
            .iter()
            .any(|m| m["type"] == "workspace_attached" && m["agent_id"] == second.as_str())
    );
    let info = client.call("i", json!({"type": "agent.status", "agent_id": second})).await;
    assert_eq!(info["data"]["agents"][0]["cwd"], worktree.as_str());

    // Busy, then live: refused.
    client.attach(&second, "interactive").await;
    let before = client.seen.len();
    client.call("p", json!({"type": "prompt", "agent_id": second, "message": "stream: 300"})).await;
    // Busy is the agent's own report: wait until it says it is streaming.
    let streaming = |m: &Value| {
        m["agent_id"] == second.as_str() && m["type"] == "status" && m["status"] == "streaming"
    };
    if !client.seen[before..].iter().any(streaming) {
        client.until(streaming).await;
    }
    let refused = retire(&mut client, &id, None).await;
    assert_eq!(refused["error"]["data"]["kind"], "busy", "{refused}");
    let before = client.seen.len();
    client.call("ab", json!({"type": "abort", "agent_id": second})).await;
    let ended = |m: &Value| m["agent_id"] == second.as_str() && m["type"] == "turn_end";
    if !client.seen[before..].iter().any(ended) {
        client.until(ended).await;
    }
    let refused = retire(&mut client, &id, None).await;
    assert_eq!(refused["error"]["data"]["kind"], "live", "{refused}");
    let status = client.call("s", json!({"type": "workspace.status", "workspace_id": id})).await;
    stop_agents(&mut client, &status["data"]["workspace"]).await;

    // Dirty: refused, with the count.
    std::fs::write(Path::new(&worktree).join("wip.txt"), "unsaved\n").unwrap();
    let refused = retire(&mut client, &id, None).await;
    assert_eq!(refused["error"]["data"]["kind"], "dirty", "{refused}");
    assert_eq!(refused["error"]["data"]["dirty_files"], 1);
    git(Path::new(&worktree), &["add", "wip.txt"]);
    git(Path::new(&worktree), &["commit", "--quiet", "-m", "wip"]);

    // Unmerged: confirmation required, nothing removed; the retry deletes.
    let refused = retire(&mut client, &id, Some("delete_if_merged")).await;
    let data = &refused["error"]["data"];
    assert_eq!(data["kind"], "confirmation_required", "{refused}");
    assert_eq!(data["workspace_id"], id.as_str());
    assert_eq!(data["confirmation_disposition"], "delete_confirmed");
    assert!(Path::new(&worktree).exists(), "nothing removed on a refusal");
    assert!(branches(repo.path()).contains(&"work".to_owned()));
    // Ignored build output goes with the worktree.
    std::fs::write(Path::new(&worktree).join(".gitignore"), "target/\n").unwrap();
    git(Path::new(&worktree), &["add", ".gitignore"]);
    git(Path::new(&worktree), &["commit", "--quiet", "-m", "ignore"]);
    std::fs::create_dir_all(Path::new(&worktree).join("target/debug")).unwrap();
    std::fs::write(Path::new(&worktree).join("target/debug/big.bin"), vec![0u8; 4096]).unwrap();
    let retired = retire(&mut client, &id, Some("delete_confirmed")).await;
    assert_eq!(retired["success"], true, "{retired}");
    assert_eq!(retired["data"]["workspace"]["lifecycle"], "retired");
    assert!(!Path::new(&worktree).exists(), "the worktree directory is gone");
    assert_eq!(branches(repo.path()), ["main"]);
    assert!(client.seen.iter().any(|m| m["type"] == "workspace_retired"));
    let again = retire(&mut client, &id, None).await;
    assert_eq!(again["error"]["data"]["kind"], "retired");
    let listed = client.call("l", json!({"type": "workspace.list", "cwd": cwd})).await;
    assert_eq!(listed["data"]["workspaces"], json!([]), "retired ones hidden by default");
    let listed = client
        .call("l2", json!({"type": "workspace.list", "cwd": cwd, "include_retired": true}))
        .await;
    assert_eq!(listed["data"]["workspaces"][0]["lifecycle"], "retired", "{listed}");
}

#[tokio::test]
async fn a_merged_branch_is_deleted_and_keep_keeps_it() {
    let daemon = Daemon::start(&[]).await;
    let repo = repository();
    let cwd = canonical(repo.path());
    let mut client = Client::unix(&daemon.socket()).await;
    let merged = create(&mut client, json!({"cwd": cwd, "branch": "done"})).await;
    let kept = create(&mut client, json!({"cwd": cwd, "branch": "later"})).await;
    for made in [&merged, &kept] {
        stop_agents(&mut client, &made["data"]["workspace"]).await;
    }
    let worktree = merged["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    std::fs::write(Path::new(&worktree).join("feature.txt"), "x\n").unwrap();
    git(Path::new(&worktree), &["add", "feature.txt"]);
    git(Path::new(&worktree), &["commit", "--quiet", "-m", "feature"]);
    git(repo.path(), &["merge", "--quiet", "--ff-only", "done"]);
    let id = merged["data"]["workspace"]["workspace_id"].as_str().unwrap();
    let retired = retire(&mut client, id, None).await;
    assert_eq!(retired["success"], true, "merged: deleted without asking: {retired}");
    assert_eq!(branches(repo.path()), ["later", "main"]);

    let id = kept["data"]["workspace"]["workspace_id"].as_str().unwrap();
    let worktree = kept["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    std::fs::write(Path::new(&worktree).join("more.txt"), "y\n").unwrap();
    git(Path::new(&worktree), &["add", "more.txt"]);
    git(Path::new(&worktree), &["commit", "--quiet", "-m", "more"]);
    let retired = retire(&mut client, id, Some("keep")).await;
    assert_eq!(retired["success"], true, "{retired}");
    assert!(!Path::new(&worktree).exists());
    assert_eq!(branches(repo.path()), ["later", "main"], "the unmerged branch is kept");
    assert_eq!(git(repo.path(), &["log", "-1", "--format=%s", "later"]), "more");
}
