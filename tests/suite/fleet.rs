//! The fleet (CONTRACT.md, "Fleet limits and budgets"; docs/PROTOCOL-NOTES.md,
//! "The fleet"): what each agent's whole process tree uses, in
//! `AgentInfo.resources` and to the connections that watch it.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

pub(super) fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("not a number: {value}"))
}

/// The agent's entry in a fleet snapshot, if it is listed.
pub(super) fn entry<'a>(fleet: &'a Value, agent_id: &str) -> Option<&'a Value> {
    let agents = fleet["agents"].as_array().expect("agents");
    agents.iter().find(|agent| agent["agent_id"] == agent_id).map(|agent| &agent["resources"])
}

pub(super) fn listed(list: &Value, agent_id: &str) -> Value {
    let agents = list["data"]["agents"].as_array().expect("agents");
    agents.iter().find(|agent| agent["agent_id"] == agent_id).cloned().expect("listed")
}

#[tokio::test]
async fn what_an_agents_processes_use_is_listed_and_told_to_watchers() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    let mut other = Client::unix(&daemon.socket()).await;

    let now = watcher.call("w", json!({"type": "fleet.watch"})).await;
    assert_eq!(now["success"], true, "{now}");
    assert_eq!(now["data"]["agents"], json!([]), "nothing runs yet: {now}");
    assert!(now["data"]["daemon"].is_object(), "{now}");

    // The agent's process runs from its creation; a command keeps a child
    // of it alive, so its tree is more than the agent.
    let agent = other.create(project.path(), "measured").await;
    other.attach(&agent, "interactive").await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "run: sleep 20"});
    assert_eq!(other.call("p", prompt).await["success"], true);
    allow_next(&mut other, &agent).await;

    let told = watcher
        .until(|event| event["type"] == "fleet_updated" && entry(event, &agent).is_some())
        .await
        .pop()
        .unwrap();
    let resources = entry(&told, &agent).unwrap().clone();
    let (rss, pss) = (number(&resources["rss_bytes"]), number(&resources["pss_bytes"]));
    assert!(rss > 2 * 1024 * 1024, "the agent is resident: {told}");
    assert!(pss > 0 && pss <= rss, "{told}");
    assert!(resources["cpu_percent"].as_f64().is_some(), "{told}");
    assert!(number(&told["agents_total"]["rss_bytes"]) >= rss, "{told}");
    assert!(number(&told["daemon"]["rss_bytes"]) > 1024 * 1024, "{told}");

    // agent.list says the same of the agent; the client that did not ask
    // to watch was told nothing of it.
    let list = other.call("l", json!({"type": "agent.list"})).await;
    let info = listed(&list, &agent);
    assert!(number(&info["resources"]["rss_bytes"]) > 2 * 1024 * 1024, "{info}");
    assert!(!other.seen.iter().any(|event| event["type"] == "fleet_updated"));

    let kill = other.call("k", json!({"type": "agent.kill", "agent_id": agent})).await;
    assert_eq!(kill["success"], true, "{kill}");
    watcher.until(|event| event["type"] == "fleet_updated" && entry(event, &agent).is_none()).await;
    let list = other.call("l2", json!({"type": "agent.list"})).await;
    assert!(listed(&list, &agent).get("resources").is_none(), "stopped: nothing runs");

    // Unwatched, the connection hears no more of it, though the agent
    // starts again (a change every watcher is told).
    let off = watcher.call("w2", json!({"type": "fleet.watch", "watch": false})).await;
    assert_eq!(off["success"], true, "{off}");
    let from = watcher.seen.len();
    let again = other.call("p2", json!({"type": "prompt", "agent_id": agent, "message": "hi"}));
    assert_eq!(again.await["success"], true);
    other.until_agent(&agent, |event| event["type"] == "turn_end").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let heard = watcher.call("l3", json!({"type": "agent.list"})).await;
    assert_eq!(heard["success"], true);
    let late = watcher.seen[from..].iter().find(|event| event["type"] == "fleet_updated");
    assert!(late.is_none(), "told after it stopped watching: {late:?}");
}

/// The daemon's budget for `period` in a fleet snapshot's `spend`.
fn spend<'a>(fleet: &'a Value, period: &str) -> &'a Value {
    let spend = fleet["spend"].as_array().expect("spend");
    let daemon = |budget: &&Value| budget["scope"] == "daemon" && budget["period"] == period;
    spend.iter().find(daemon).unwrap_or_else(|| panic!("no {period} in {fleet}"))
}

#[tokio::test]
async fn the_fleet_says_its_limits_and_what_the_daemon_spent_against_its_budgets() {
    let home = TempDir::new().unwrap();
    let config = "[limits]\nmax_awake_agents = 3\nmemory_soft_mb = 4096\nagent_memory_mb = 900\n\
        [prices.demo]\ninput = 1.0\noutput = 2.0\n\
        [[budgets]]\nscope = \"daemon\"\nperiod = \"day\"\nusd = 50.0\n";
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    let mut other = Client::unix(&daemon.socket()).await;

    let now = watcher.call("w", json!({"type": "fleet.watch"})).await;
    assert_eq!(now["success"], true, "{now}");
    let limits = &now["data"]["limits"];
    let expected = json!({"max_awake_agents": 3, "memory_soft_mb": 4096, "memory_hard_mb": 0,
        "agent_memory_mb": 900});
    assert_eq!(limits, &expected, "{now}");
    let day = spend(&now["data"], "day");
    assert_eq!(day["cap_usd"], 50.0, "{now}");
    assert_eq!((day["spent_usd"].as_f64(), &day["state"]), (Some(0.0), &json!("ok")), "{now}");
    let month = spend(&now["data"], "month");
    assert!(month.get("cap_usd").is_none(), "no month cap: {now}");

    // A priced turn: the watcher is told what the daemon spent, without
    // asking, against the same cap.
    let agent = other.create(project.path(), "spender").await;
    other.attach(&agent, "interactive").await;
    let events = turn(&mut other, &agent, "hello there").await;
    let costs = events.iter().filter(|event| event["type"] == "usage");
    let cost: f64 = costs.map(|usage| usage["cost"].as_f64().expect("priced")).sum();
    assert!(cost > 0.0, "{events:?}");
    let spent = |event: &Value| {
        event["type"] == "fleet_updated"
            && spend(event, "day")["spent_usd"]
                .as_f64()
                .is_some_and(|usd| (usd - cost).abs() < 1e-9)
    };
    let told = watcher.until(spent).await.pop().unwrap();
    let day = spend(&told, "day");
    assert_eq!(day["cap_usd"], 50.0, "{told}");
    assert_eq!(spend(&told, "month")["spent_usd"], day["spent_usd"], "{told}");
    assert!(number(&day["spent_tokens"]) > 0, "{told}");
}

/// A prompt answered to its end, every question allowed; the events.
async fn turn(client: &mut Client, agent: &str, message: &str) -> Vec<Value> {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message});
    let response = client.call(&format!("prompt-{message}"), prompt).await;
    assert_eq!(response["success"], true, "{response}");
    let mut read = Vec::new();
    loop {
        let event = client.next().await;
        if event["agent_id"] == agent && event["type"] == "permission_request" {
            client.send(json!({"type": "permission_response", "agent_id": agent,
                "request_id": event["request_id"], "decision": "allow"}));
        }
        let done = event["agent_id"] == agent && event["type"] == "turn_end";
        read.push(event);
        if done {
            return read;
        }
    }
}

/// Waits for `agent_exited` of `agent_id`; returns it.
pub(super) async fn exited(client: &mut Client, agent_id: &str) -> Value {
    let until = |event: &Value| event["type"] == "agent_exited" && event["agent_id"] == agent_id;
    client.until(until).await.pop().expect("agent_exited")
}

/// Allows the agent's next question.
async fn allow_next(client: &mut Client, agent_id: &str) {
    let asked = client.permission_request(agent_id).await;
    client.send(json!({"type": "permission_response", "agent_id": agent_id,
        "request_id": asked["request_id"], "decision": "allow"}));
}

pub(super) fn state_of(list: &Value, agent_id: &str) -> String {
    listed(list, agent_id)["runtime_state"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn over_the_awake_limit_the_least_recently_used_idle_agent_hibernates_and_comes_back() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), "[limits]\nmax_awake_agents = 2\n").unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let mut other = Client::unix(&daemon.socket()).await;

    let older = client.create(project.path(), "older").await;
    let newer = client.create(project.path(), "newer").await;
    client.attach(&older, "interactive").await;
    client.attach(&newer, "interactive").await;
    turn(&mut client, &older, "remember zebra42").await;
    turn(&mut client, &newer, "hello").await;

    // A third start: two are awake, the most allowed; the one used least
    // recently goes, and every client is told why.
    let third = client.create(project.path(), "third").await;
    let gone = exited(&mut other, &older).await;
    assert_eq!(gone["runtime_state"], "hibernated", "{gone}");
    let reason = gone["reason"].as_str().unwrap();
    assert!(reason.contains("max_awake_agents") && reason.contains(&third), "{reason}");
    let list = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &older), "hibernated");
    assert_eq!(state_of(&list, &newer), "running");
    assert_eq!(state_of(&list, &third), "running");
    assert!(listed(&list, &older)["status"] == "idle", "{list}");

    // Its next prompt wakes it with its conversation; to make room the
    // agent now used least recently hibernates in turn.
    let events = turn(&mut client, &older, "hello again").await;
    let said: String = events
        .iter()
        .filter(|event| event["type"] == "message_delta")
        .filter_map(|event| event["text_delta"].as_str())
        .collect();
    assert!(said.contains("hello again"), "{events:?}");
    let gone = exited(&mut other, &newer).await;
    assert_eq!(gone["runtime_state"], "hibernated", "{gone}");
    let sync = other.attach(&older, "observer").await;
    assert!(
        sync["live_window"].to_string().contains("zebra42"),
        "the conversation is kept: {sync}"
    );
    let list = client.call("l2", json!({"type": "agent.list"})).await;
    let awake = [&older, &newer, &third].into_iter().filter(|id| state_of(&list, id) == "running");
    assert_eq!(awake.count(), 2, "{list}");
}

#[tokio::test]
async fn agents_created_and_never_prompted_are_idle_and_make_room() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), "[limits]\nmax_awake_agents = 2\n").unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let mut other = Client::unix(&daemon.socket()).await;

    // Each creation starts a process that then has nothing to do: the
    // third start finds two idle agents, and the older goes.
    let first = client.create(project.path(), "first").await;
    let second = client.create(project.path(), "second").await;
    let third = client.create(project.path(), "third").await;
    let gone = exited(&mut other, &first).await;
    assert_eq!(gone["runtime_state"], "hibernated", "{gone}");
    assert!(gone["reason"].as_str().unwrap().contains(&third), "{gone}");
    let list = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &first), "hibernated", "{list}");
    assert_eq!(state_of(&list, &second), "running", "{list}");
    assert_eq!(state_of(&list, &third), "running", "{list}");
}

#[tokio::test]
async fn at_the_hard_ceiling_with_nobody_idle_a_start_is_refused_saying_who_holds_it() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), "[limits]\nmemory_hard_mb = 1\n").unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    assert_eq!(watcher.call("w", json!({"type": "fleet.watch"})).await["success"], true);

    let busy = client.create(project.path(), "busy").await;
    client.attach(&busy, "interactive").await;
    let prompt = json!({"type": "prompt", "agent_id": busy, "message": "run: sleep 30"});
    assert_eq!(client.call("p", prompt).await["success"], true);
    allow_next(&mut client, &busy).await;
    watcher.until(|event| event["type"] == "fleet_updated" && entry(event, &busy).is_some()).await;

    let create = json!({"type": "agent.create", "cwd": project.path().display().to_string()});
    let refused = client.call("c2", create).await;
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "RUNTIME_START_FAILED", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("limits.memory_hard_mb (1 MB)"), "{message}");
    assert!(message.contains(&format!("{busy} ")), "names who holds it: {message}");
    // The busy agent was not touched.
    let list = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &busy), "running");
}

#[tokio::test]
async fn an_agent_whose_tree_grows_past_its_ceiling_is_stopped_and_every_client_told() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), "[limits]\nagent_memory_mb = 100\n").unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let mut other = Client::unix(&daemon.socket()).await;

    let agent = client.create(project.path(), "hog").await;
    client.attach(&agent, "interactive").await;
    turn(&mut client, &agent, "remember zebra42").await;
    let hog = "run: python3 -c \"import time; x = b'x' * (300 * 1024 * 1024); time.sleep(60)\"";
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": hog});
    assert_eq!(client.call("p", prompt).await["success"], true);
    allow_next(&mut client, &agent).await;

    let gone = exited(&mut other, &agent).await;
    assert_eq!(gone["runtime_state"], "stopped", "{gone}");
    let reason = gone["reason"].as_str().unwrap();
    assert!(reason.contains("over its ceiling of 100 MB (limits.agent_memory_mb)"), "{reason}");
    let list = other.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed(&list, &agent)["status"], "error", "{list}");
    assert!(super::support::running("x' \\* \\(300").is_empty(), "its whole tree is gone");

    // Nothing is lost from its record: it starts again with its conversation.
    let sync = other.attach(&agent, "observer").await;
    assert!(sync["live_window"].to_string().contains("zebra42"), "{sync}");
    let events = turn(&mut client, &agent, "hello again").await;
    assert!(events.iter().any(|event| event["type"] == "turn_end"));
}
