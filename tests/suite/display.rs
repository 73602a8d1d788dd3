//! What a person reads to decide hides nothing (docs/SECURITY.md, "What a
//! person approves is what they see"): names and aliases with control or
//! invisible formatting characters are refused where they are chosen, and
//! reasons built from names git holds show such characters as escapes.

use std::path::Path;

use serde_json::json;
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;
use super::workspaces::{canonical, create, git, repository, retire, stop_agents};

/// Characters that change how text reads without being seen.
const HIDDEN: [char; 6] = ['\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}', '\u{1b}', '\u{feff}'];

#[tokio::test]
async fn names_and_aliases_with_hidden_characters_are_refused() {
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let project = TempDir::new().unwrap();
    let cwd = canonical(project.path());
    for hidden in HIDDEN {
        let name = format!("build{hidden}er");
        let body = json!({"type": "agent.create", "cwd": cwd, "name": name});
        let refused = client.call("c", body).await;
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{hidden:?}: {refused}");
        let body = json!({"type": "agent.create", "cwd": cwd, "names": ["scout", name]});
        let refused = client.call("c", body).await;
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{hidden:?}: {refused}");
    }
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"], json!([]), "nothing was created: {listed}");
    // A name with nothing hidden, in any script, is fine.
    let body =
        json!({"type": "agent.create", "cwd": cwd, "name": "構築 naïve ✓", "names": ["éclair"]});
    let made = client.call("c", body).await;
    assert_eq!(made["success"], true, "{made}");

    let repo = repository();
    let cwd = canonical(repo.path());
    for field in ["label", "branch"] {
        let refused = create(&mut client, json!({"cwd": cwd, field: "fix\u{202E}txt"})).await;
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{field}: {refused}");
    }
    let worktrees = git(repo.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 1, "none was made: {worktrees}");
}

#[tokio::test]
async fn a_reason_naming_a_branch_shows_its_hidden_characters_as_escapes() {
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let repo = repository();
    // A branch made outside Shard, which git allows, as the target.
    let target = "release\u{202E}main";
    git(repo.path(), &["branch", target]);
    let made = create(
        &mut client,
        json!({"cwd": canonical(repo.path()), "branch": "work", "integration_target": target}),
    )
    .await;
    assert_eq!(made["success"], true, "{made}");
    let workspace = &made["data"]["workspace"];
    stop_agents(&mut client, workspace).await;
    let worktree = workspace["cwd"].as_str().unwrap();
    std::fs::write(Path::new(worktree).join("new.txt"), "new\n").unwrap();
    git(Path::new(worktree), &["add", "new.txt"]);
    git(Path::new(worktree), &["commit", "--quiet", "-m", "new"]);

    let id = workspace["workspace_id"].as_str().unwrap();
    let refused = retire(&mut client, id, None).await;
    let data = &refused["error"]["data"];
    assert_eq!(data["kind"], "confirmation_required", "{refused}");
    for text in [&data["reason"], &refused["error"]["message"]] {
        let text = text.as_str().unwrap();
        assert!(text.contains("release\\u{202E}main"), "{text}");
        assert!(!text.contains('\u{202E}'), "{text:?}");
    }
}
