//! The fleet (CONTRACT.md, "Fleet limits and budgets"; docs/PROTOCOL-NOTES.md,
//! "The fleet"): what each agent's whole process tree uses, in
//! `AgentInfo.resources` and to the connections that watch it.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("not a number: {value}"))
}

/// The agent's entry in a fleet snapshot, if it is listed.
fn entry<'a>(fleet: &'a Value, agent_id: &str) -> Option<&'a Value> {
    let agents = fleet["agents"].as_array().expect("agents");
    agents.iter().find(|agent| agent["agent_id"] == agent_id).map(|agent| &agent["resources"])
}

fn listed(list: &Value, agent_id: &str) -> Value {
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
    let asked = other.permission_request(&agent).await;
    other.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": "allow"}));

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
