//! Delegation never widens what an agent may do (docs/SECURITY.md,
//! "Delegation"): a child's tools are within its parent's, its mode no
//! wider than the parent's current one at create, relaunch and steer, and
//! every orchestrator command about one agent follows that agent's
//! attachment and role rule.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("none")
}

/// `command` about `agent` (as `parent_agent_id` for the §10.3 ones).
fn about(agent: &str, kind: &str, extra: Value) -> Value {
    let mut body = extra;
    body["type"] = json!(kind);
    let field = if kind.starts_with("subagent.") { "parent_agent_id" } else { "agent_id" };
    body[field] = json!(agent);
    body
}

/// Waits for `run_id` to reach `state`.
async fn run_reaches(client: &mut Client, run_id: &str, state: &str) {
    let reached = |m: &Value| {
        m["type"] == "subagent_run_changed" && m["run_id"] == run_id && m["state"] == state
    };
    if !client.seen.iter().any(reached) {
        client.until(reached).await;
    }
}

#[tokio::test]
async fn orchestrator_commands_follow_the_attachment_and_role_rule() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut owner = Client::unix(&daemon.socket()).await;
    let lead = owner.create(project.path(), "lead").await;
    owner.attach(&lead, "interactive").await;
    let job = owner
        .call("c", about(&lead, "subagent.create", json!({"name": "kid", "task": "hello"})))
        .await;
    assert_eq!(job["success"], true, "{job}");
    let job_id = job["data"]["job_id"].as_str().unwrap().to_owned();
    let waited =
        owner.call("w", about(&lead, "subagent.wait", json!({"handles": [job_id.clone()]}))).await;
    assert_eq!(waited["data"]["runs"][0]["final_text"], "You said: hello", "{waited}");
    // Refused before the session is even looked at.
    let session = "any-session";

    let changes = [
        about(&lead, "session.activate", json!({"session_id": session})),
        about(&lead, "subagent.create", json!({"name": "more", "task": "x"})),
        about(&lead, "subagent.steer", json!({"target": "kid", "message": "x"})),
        about(&lead, "subagent.relaunch", json!({"target": "kid", "task": "x"})),
        about(&lead, "subagent.stop", json!({"handle": job_id})),
    ];
    let reads = [
        about(&lead, "approval.list", json!({})),
        about(&lead, "subagent.wait", json!({"handles": [job_id], "timeout": 0})),
    ];
    // Not attached at all: nothing, and a read neither.
    let mut stranger = Client::unix(&daemon.socket()).await;
    for command in changes.iter().chain(&reads) {
        let answer = stranger.call("x", command.clone()).await;
        assert_eq!(code(&answer), "NOT_ATTACHED", "{command}: {answer}");
    }
    // `subagent.status` tells a stranger what every connection is told
    // (states, names, usage), not what the runs said.
    let status = stranger.call("s", about(&lead, "subagent.status", json!({}))).await;
    assert_eq!(status["data"]["jobs"][0]["runs"][0]["state"], "completed", "{status}");
    assert!(!status.to_string().contains("You said"), "{status}");

    // An observer reads, and changes nothing.
    let mut observer = Client::unix(&daemon.socket()).await;
    observer.attach(&lead, "observer").await;
    for command in &changes {
        let answer = observer.call("x", command.clone()).await;
        assert_eq!(code(&answer), "PERMISSION_DENIED", "{command}: {answer}");
    }
    for command in &reads {
        let answer = observer.call("x", command.clone()).await;
        assert_eq!(answer["success"], true, "{command}: {answer}");
    }
    let status = observer.call("s", about(&lead, "subagent.status", json!({}))).await;
    assert!(status.to_string().contains("You said: hello"), "{status}");
    // Nothing the observer sent started anything.
    let listed = owner.call("l", about(&lead, "subagent.status", json!({}))).await;
    assert_eq!(listed["data"]["jobs"].as_array().unwrap().len(), 1, "{listed}");

    // The agent itself still delegates through its own tools.
    // The job's completion report may still be ending a turn of its own
    // (it is delivered to the lead as a prompt): this prompt follows it if
    // so, and the turn wanted is the one with the tool call.
    let prompt = json!({"type": "prompt", "agent_id": lead, "message": "spawn: helper: hi",
                        "streaming_behavior": "follow_up"});
    let accepted = owner.call("p", prompt).await;
    assert_eq!(accepted["success"], true, "{accepted}");
    let mut result = None;
    for _ in 0..3 {
        let turn = owner.until_agent(&lead, |m| m["type"] == "turn_end").await;
        result = turn.into_iter().find(|m| m["type"] == "tool_result");
        if result.is_some() {
            break;
        }
    }
    let result = result.expect("a turn with the subagent tool's result");
    assert_ne!(result["is_error"], true, "{result}");
    assert!(result.to_string().contains("job-"), "{result}");
}

#[tokio::test]
async fn a_child_never_gets_a_tool_its_parent_lacks() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    std::fs::write(project.path().join("secret.txt"), "the-secret-words\n").unwrap();
    let mut client = Client::unix(&daemon.socket()).await;
    let tools = json!(["ls", "subagent_create", "subagent_wait"]);
    let made = client
        .call(
            "a",
            json!({"type": "agent.create", "cwd": project.path().display().to_string(),
                   "name": "narrow", "tools": tools}),
        )
        .await;
    let lead = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&lead, "interactive").await;
    let job = client
        .call(
            "c",
            about(&lead, "subagent.create", json!({"name": "reader", "task": "read: secret.txt"})),
        )
        .await;
    let job_id = job["data"]["job_id"].as_str().unwrap().to_owned();
    let child = job["data"]["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    let waited =
        client.call("w", about(&lead, "subagent.wait", json!({"handles": [job_id]}))).await;
    assert!(!waited.to_string().contains("the-secret-words"), "the child read it: {waited}");
    let manifest = daemon.home.join("agents").join(&child).join("manifest.json");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    assert_eq!(manifest["tools"], tools, "the child has its parent's allowlist");

    let wider = client
        .call(
            "b",
            json!({"type": "agent.create", "cwd": project.path().display().to_string(),
                   "parent_agent_id": lead, "tools": ["ls", "read"]}),
        )
        .await;
    assert_eq!(code(&wider), "PERMISSION_DENIED", "{wider}");
}

/// Switches `agent` to `mode` and waits until the registry says so.
async fn switch_mode(client: &mut Client, agent: &str, mode: &str) {
    let answer =
        client.call("m", json!({"type": "set_mode", "agent_id": agent, "mode": mode})).await;
    assert_eq!(answer["success"], true, "{answer}");
    for _ in 0..100 {
        let info = client.call("i", json!({"type": "agent.status", "agent_id": agent})).await;
        if info["data"]["agents"][0]["mode"] == mode {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{agent} never reported mode {mode}");
}

#[tokio::test]
async fn a_plan_mode_parent_never_gets_work_done_by_a_wider_child() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut client = Client::unix(&daemon.socket()).await;
    let lead = client.create(project.path(), "lead").await;
    client.attach(&lead, "interactive").await;
    let kid = client
        .call("c", about(&lead, "subagent.create", json!({"name": "kid", "task": "hello"})))
        .await;
    let kid_job = kid["data"]["job_id"].as_str().unwrap().to_owned();
    client.call("w", about(&lead, "subagent.wait", json!({"handles": [kid_job]}))).await;
    let runner = client
        .call(
            "c2",
            about(&lead, "subagent.create", json!({"name": "runner", "task": "stream: 1500"})),
        )
        .await;
    let runner_run = runner["data"]["runs"][0]["run_id"].as_str().unwrap().to_owned();
    run_reaches(&mut client, &runner_run, "active").await;

    // The person switches the parent to plan: its build-mode children may
    // no longer be put to work for it.
    switch_mode(&mut client, &lead, "plan").await;
    let relaunch =
        about(&lead, "subagent.relaunch", json!({"target": "kid", "task": "write: x.txt\nhi"}));
    let relaunched = client.call("r", relaunch).await;
    assert_eq!(code(&relaunched), "PERMISSION_DENIED", "{relaunched}");
    let steered = client
        .call("s", about(&lead, "subagent.steer", json!({"target": "runner", "message": "more"})))
        .await;
    assert_eq!(code(&steered), "PERMISSION_DENIED", "{steered}");
    assert!(!project.path().join("x.txt").exists());
    // A new child inherits plan.
    let planned = client
        .call("c3", about(&lead, "subagent.create", json!({"name": "scout", "task": "hi"})))
        .await;
    let scout = planned["data"]["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    let info = client.call("i", json!({"type": "agent.status", "agent_id": scout})).await;
    assert_eq!(info["data"]["agents"][0]["mode"], "plan", "{info}");

    // The parent's own gate: reading jobs runs, starting work asks.
    client.call("p", json!({"type": "prompt", "agent_id": lead, "message": "status:"})).await;
    let turn = client.until_agent(&lead, |m| m["type"] == "turn_end").await;
    assert!(!turn.iter().any(|m| m["type"] == "permission_request"), "{turn:?}");
    client
        .call("p2", json!({"type": "prompt", "agent_id": lead, "message": "relaunch: kid: hello"}))
        .await;
    let request = client.permission_request(&lead).await;
    assert_eq!(request["tool_name"], "subagent_relaunch", "{request}");
}

#[tokio::test]
async fn jobs_are_capped_per_parent_and_in_all_and_old_records_make_room() {
    let daemon = Daemon::start(&[
        "--subagent-max-active-per-parent",
        "2",
        "--subagent-max-active",
        "3",
        "--subagent-max-jobs-per-parent",
        "3",
    ])
    .await;
    let project = TempDir::new().unwrap();
    let mut client = Client::unix(&daemon.socket()).await;
    let first = client.create(project.path(), "first").await;
    let second = client.create(project.path(), "second").await;
    client.attach(&first, "interactive").await;
    client.attach(&second, "interactive").await;
    let long = |name: &str| json!({"name": name, "task": "stream: 1500"});
    let pair = client
        .call(
            "a",
            about(
                &first,
                "subagent.create",
                json!({"strategy": "parallel",
            "tasks": [long("one"), long("two")]}),
            ),
        )
        .await;
    assert_eq!(pair["success"], true, "{pair}");
    let over = client.call("b", about(&first, "subagent.create", long("three"))).await;
    assert_eq!(code(&over), "CONFLICT", "two at once per parent: {over}");
    assert!(over["error"]["message"].as_str().unwrap().contains("at most 2"), "{over}");
    let other = client.call("c", about(&second, "subagent.create", long("four"))).await;
    assert_eq!(other["success"], true, "{other}");
    let over = client.call("d", about(&second, "subagent.create", long("five"))).await;
    assert_eq!(code(&over), "CONFLICT", "three at once in all: {over}");

    // Stopped, the pair is an ended record; three quick jobs later the
    // oldest record makes room and is gone, its file too.
    let pair_job = pair["data"]["job_id"].as_str().unwrap().to_owned();
    let stopped =
        client.call("s", about(&first, "subagent.stop", json!({"handle": pair_job}))).await;
    assert_eq!(stopped["success"], true, "{stopped}");
    client.call("w", about(&first, "subagent.wait", json!({"handles": [pair_job.clone()]}))).await;
    let secret = "task-words-7713";
    for n in 0..3 {
        let quick = json!({"name": format!("q{n}"), "task": format!("{secret} {n}")});
        let made = client.call("q", about(&first, "subagent.create", quick)).await;
        assert_eq!(made["success"], true, "{made}");
        let job = made["data"]["job_id"].clone();
        client.call("w", about(&first, "subagent.wait", json!({"handles": [job]}))).await;
    }
    let status = client.call("st", about(&first, "subagent.status", json!({}))).await;
    let jobs = status["data"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3, "{status}");
    assert!(jobs.iter().all(|job| job["job_id"] != pair_job.as_str()), "{status}");
    let records = daemon.home.join("jobs");
    assert!(!records.join(format!("{pair_job}.json")).exists());
    // A run that has its task keeps no copy of it.
    for entry in std::fs::read_dir(&records).unwrap().flatten() {
        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
        for run in record["runs"].as_array().unwrap() {
            assert_eq!(run["task"], "", "a started run's task was kept: {record}");
        }
    }
}
