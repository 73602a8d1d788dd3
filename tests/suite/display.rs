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

#[tokio::test]
async fn a_question_reaches_every_client_with_its_hidden_characters_shown_and_its_input_exact() {
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let project = TempDir::new().unwrap();
    let agent = client.create(project.path(), "asker").await;
    client.attach(&agent, "interactive").await;
    let command = "printf '\u{1b}]0;title\u{7}' # \u{202E}txt.exe";
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
    client.call("p", prompt).await;
    let request = client.permission_request(&agent).await;
    let shown = request["prompt"].as_str().unwrap();
    for hidden in ['\u{1b}', '\u{7}', '\u{202E}'] {
        assert!(!shown.contains(hidden), "{hidden:?} reached the prompt: {shown:?}");
    }
    assert!(shown.contains("\\u{001B}") && shown.contains("\\u{202E}"), "{shown:?}");
    assert_eq!(request["input"]["command"], command, "the call itself is exact");
    let deny = json!({"type": "permission_response", "agent_id": agent,
                      "request_id": request["request_id"], "decision": "deny"});
    client.call("d", deny).await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;

    // A question to the user: its text shown, the same way.
    let ask = json!({"type": "prompt", "agent_id": agent,
                     "message": "ask: which \u{202E}gnp.exe\u{7} file?"});
    client.call("q", ask).await;
    let asked = client.until_agent(&agent, |message| message["type"] == "ui_request").await;
    let asked = asked.last().unwrap();
    let text = format!("{}{}", asked["title"], asked["message"]);
    assert!(!text.contains('\u{202E}') && !text.contains('\u{7}'), "{asked}");
    assert!(text.contains("\\u{202E}"), "{asked}");
    // What a late attach is sent is the same text.
    let mut late = Client::unix(&daemon.socket()).await;
    let synced = late.attach(&agent, "observer").await;
    let pending = synced["pending_requests"].to_string();
    assert!(pending.contains("\\\\u{202E}"), "{pending}");
    assert!(!pending.contains('\u{202E}'), "{pending}");
}
