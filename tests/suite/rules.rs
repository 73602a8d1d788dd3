//! The command table (server/src/commands): for every rule, a command of it
//! sent by an observer and by a client not attached at all, through the
//! real daemon. What a rule refuses is refused the same way for every
//! command under it.

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::{Browser, Client};
use super::support::Daemon;
use super::workspaces::canonical;

/// Commands that change an agent: an interactive attachment, nothing less.
fn acts(agent: &str) -> Vec<Value> {
    vec![
        json!({"type": "prompt", "agent_id": agent, "message": "hi"}),
        json!({"type": "steer", "agent_id": agent, "message": "hi"}),
        json!({"type": "abort", "agent_id": agent}),
        json!({"type": "set_mode", "agent_id": agent, "mode": "plan"}),
        json!({"type": "set_model", "agent_id": agent, "model": "demo"}),
        json!({"type": "set_reasoning_level", "agent_id": agent, "model": "demo", "effort": "low"}),
        json!({"type": "recall_steer", "agent_id": agent}),
        json!({"type": "session_op", "agent_id": agent, "op": "compact"}),
        json!({"type": "subagent.create", "parent_agent_id": agent, "strategy": "single",
               "tasks": [{"name": "one", "task": "hello"}]}),
        json!({"type": "subagent.steer", "parent_agent_id": agent, "target": "one", "message": "x"}),
        json!({"type": "subagent.relaunch", "parent_agent_id": agent, "target": "one", "task": "x"}),
        json!({"type": "subagent.stop", "parent_agent_id": agent, "handle": "one"}),
        json!({"type": "session.activate", "agent_id": agent, "session_id": "nope"}),
    ]
}

/// Answers to an agent's questions: interactive only.
fn answers(agent: &str) -> Vec<Value> {
    vec![
        json!({"type": "permission_response", "agent_id": agent, "request_id": "r", "decision": "allow"}),
        json!({"type": "ui_response", "agent_id": agent, "request_id": "r", "value": "x"}),
    ]
}

/// Reads: any attachment.
fn watches(agent: &str) -> Vec<Value> {
    vec![
        json!({"type": "list_modes", "agent_id": agent}),
        json!({"type": "list_models", "agent_id": agent}),
        json!({"type": "list_reasoning_levels", "agent_id": agent}),
        json!({"type": "session_op", "agent_id": agent, "op": "list"}),
        json!({"type": "subagent.wait", "parent_agent_id": agent, "handles": ["one"], "timeout": 0}),
        json!({"type": "approval.list", "agent_id": agent}),
    ]
}

/// Every `daemon.*` command (server/src/commands/daemon.rs): local only,
/// each with a body that would do the most harm if it were taken.
fn local_only() -> Vec<Value> {
    vec![
        json!({"type": "daemon.enroll"}),
        json!({"type": "daemon.sessions"}),
        json!({"type": "daemon.stats"}),
        json!({"type": "daemon.revoke_session", "all": true}),
        json!({"type": "daemon.disconnect", "all": true}),
        json!({"type": "daemon.shutdown", "force": true}),
    ]
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("none")
}

#[tokio::test]
async fn every_rule_refuses_observers_and_unattached_clients_alike() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut owner = Client::unix(&daemon.socket()).await;
    let made = owner
        .call(
            "c",
            json!({"type": "agent.create", "cwd": canonical(project.path()), "name": "ruled"}),
        )
        .await;
    let agent = made["data"]["agent_id"].as_str().expect("created").to_owned();
    let mut observer = Client::unix(&daemon.socket()).await;
    observer.attach(&agent, "observer").await;
    let mut stranger = Client::unix(&daemon.socket()).await;

    for command in acts(&agent).into_iter().chain(answers(&agent)) {
        let seen = observer.call("x", command.clone()).await;
        assert_eq!(code(&seen), "PERMISSION_DENIED", "observer, {command}: {seen}");
        let seen = stranger.call("x", command.clone()).await;
        assert_eq!(code(&seen), "NOT_ATTACHED", "unattached, {command}: {seen}");
    }
    for command in watches(&agent) {
        let seen = observer.call("x", command.clone()).await;
        assert!(
            !matches!(code(&seen), "PERMISSION_DENIED" | "NOT_ATTACHED"),
            "an observer reads, {command}: {seen}"
        );
        let seen = stranger.call("x", command.clone()).await;
        assert_eq!(code(&seen), "NOT_ATTACHED", "unattached, {command}: {seen}");
    }
    // `subagent.status` answers everyone; only what runs said is withheld.
    let status = json!({"type": "subagent.status", "parent_agent_id": agent});
    let seen = stranger.call("x", status).await;
    assert_eq!(seen["success"], true, "{seen}");

    // Administration is local: a browser is refused, whatever it is
    // attached to.
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    web.attach(&agent, "interactive").await;
    for command in local_only() {
        let seen = web.call("x", command.clone()).await;
        assert_eq!(code(&seen), "PERMISSION_DENIED", "{command}: {seen}");
    }
    // Nothing of it happened: the browser's own session was neither
    // revoked nor disconnected, and the daemon still runs.
    let seen = web.call("x", json!({"type": "agent.list"})).await;
    assert_eq!(seen["success"], true, "still connected: {seen}");
    let seen = owner.call("x", json!({"type": "daemon.stats"})).await;
    assert_eq!(seen["success"], true, "a local client administers: {seen}");
}
