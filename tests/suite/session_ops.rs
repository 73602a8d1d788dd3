//! Session operations through the daemon (docs/PROTOCOL-NOTES.md, "Session
//! operations"): list an agent's sessions, fork from a message, switch the
//! agent to another session of its lineage (`session.activate`) and back,
//! and compact on demand; with the refusals a user meets (mid-turn,
//! another lineage, a session another agent runs).

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

fn data(response: &Value) -> &Value {
    assert_eq!(response["success"], true, "{response}");
    &response["data"]
}

/// The texts of a `sync`'s live window, in order.
fn texts(sync: &Value) -> Vec<String> {
    sync["live_window"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|block| block["text"].as_str().map(str::to_owned))
        .collect()
}

async fn say(client: &mut Client, agent: &str, message: &str) {
    let response =
        client.call("say", json!({"type": "prompt", "agent_id": agent, "message": message})).await;
    assert_eq!(response["success"], true, "{response}");
    client.until_agent(agent, |m| m["type"] == "turn_end").await;
}

async fn session_op(client: &mut Client, agent: &str, op: Value) -> Value {
    let mut command = json!({"type": "session_op", "agent_id": agent});
    for (key, value) in op.as_object().expect("op") {
        command[key] = value.clone();
    }
    client.call("op", command).await
}

async fn activate(client: &mut Client, agent: &str, session: &str) -> Value {
    let command = json!({"type": "session.activate", "agent_id": agent, "session_id": session});
    client.call("activate", command).await
}

fn entries_in(home: &std::path::Path, session: &str) -> usize {
    let found = walk(&home.join("sessions"), session).expect("the session's folder");
    std::fs::read_to_string(found.join("session.jsonl")).expect("log").lines().count()
}

fn walk(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|file| file == name) {
                return Some(path);
            }
            if let Some(found) = walk(&path, name) {
                return Some(found);
            }
        }
    }
    None
}

#[tokio::test]
async fn an_agent_forks_switches_to_the_fork_and_back_and_compacts() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "brancher").await;
    client.attach(&agent, "interactive").await;
    say(&mut client, &agent, "first question").await;
    say(&mut client, &agent, "second question").await;

    let listed = session_op(&mut client, &agent, json!({"op": "list"})).await;
    let root = data(&listed)["active"].as_str().unwrap().to_owned();

    // Fork at the first reply: the fork holds the first exchange only.
    let mut watcher = Client::unix(&daemon.socket()).await;
    let sync = watcher.attach(&agent, "observer").await;
    let messages = sync["live_window"]["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 4, "{sync}");
    let first_reply = messages[1]["id"].as_str().unwrap().to_owned();
    let forked = session_op(
        &mut client,
        &agent,
        json!({"op": "fork", "args": {"from_entry_id": first_reply}}),
    )
    .await;
    let fork = data(&forked)["session_id"].as_str().unwrap().to_owned();
    let listed = session_op(&mut client, &agent, json!({"op": "list"})).await;
    let sessions: Vec<&str> = data(&listed)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["session_id"].as_str().unwrap())
        .collect();
    assert!(sessions.contains(&root.as_str()) && sessions.contains(&fork.as_str()), "{listed}");
    let root_entries = entries_in(home.path(), &root);

    // Switch to the fork: every attachment gets the fork's transcript.
    let switched = activate(&mut client, &agent, &fork).await;
    assert_eq!(data(&switched)["previous_session_id"], root.as_str());
    assert_eq!(data(&switched)["session_id"], fork.as_str());
    let sync = watcher.until_agent(&agent, |m| m["type"] == "sync").await.pop().unwrap();
    let shown = texts(&sync);
    assert!(shown.iter().any(|text| text == "first question"), "{shown:?}");
    assert!(!shown.iter().any(|text| text == "second question"), "{shown:?}");
    let listed = session_op(&mut client, &agent, json!({"op": "list"})).await;
    assert_eq!(data(&listed)["active"], fork.as_str());

    // The conversation goes on in the fork; the first session is untouched.
    say(&mut client, &agent, "on the fork").await;
    assert_eq!(entries_in(home.path(), &root), root_entries);
    let sync = Client::unix(&daemon.socket()).await.attach(&agent, "observer").await;
    let shown = texts(&sync);
    assert!(shown.iter().any(|text| text == "on the fork"), "{shown:?}");
    assert!(!shown.iter().any(|text| text == "second question"));

    // A cursor from before the switch resets: its events tell of the other
    // conversation.
    let cursor = sync["seq"].as_u64().unwrap();
    let back = activate(&mut client, &agent, &root).await;
    assert_eq!(data(&back)["previous_session_id"], fork.as_str());
    let mut late = Client::unix(&daemon.socket()).await;
    let response = late
        .call(
            "a",
            json!({"type": "agent.attach", "agent_id": agent, "role": "observer", "after_seq": cursor}),
        )
        .await;
    assert!(data(&response).get("resumed").is_none(), "{response}");
    let sync = late.until(|m| m["type"] == "sync").await.pop().unwrap();
    assert_eq!(sync["reset"], true);
    let shown = texts(&sync);
    assert!(shown.iter().any(|text| text == "second question"), "back on the first: {shown:?}");
    assert!(!shown.iter().any(|text| text == "on the fork"));

    // Activating the session already active changes nothing.
    let same = activate(&mut client, &agent, &root).await;
    assert_eq!(data(&same)["previous_session_id"], root.as_str());

    // Manual compaction, with its result and the compaction event.
    let compacted = session_op(
        &mut client,
        &agent,
        json!({"op": "compact", "args": {"keep_recent_tokens": 1}}),
    )
    .await;
    let result = data(&compacted).clone();
    assert_eq!(result["compacted"], true, "{result}");
    assert_eq!(result["message_range"].as_array().map(Vec::len), Some(2), "{result}");
    let event = late.until_agent(&agent, |m| m["type"] == "compaction").await.pop().unwrap();
    assert_eq!(event["index"], result["index"]);

    // The switch survives a restart: the agent runs the session it was on.
    activate(&mut client, &agent, &fork).await;
    drop((client, watcher, late));
    assert!(daemon.terminate().await.success());
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let sync = client.attach(&agent, "interactive").await;
    assert!(texts(&sync).iter().any(|text| text == "on the fork"), "{sync}");
}

#[tokio::test]
async fn switching_sessions_is_refused_mid_turn_across_lineages_and_onto_another_agents_session() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut client = Client::unix(&daemon.socket()).await;
    let one = client.create(project.path(), "one").await;
    let other = client.create(project.path(), "other").await;
    client.attach(&one, "interactive").await;
    client.attach(&other, "interactive").await;
    say(&mut client, &one, "hello").await;
    say(&mut client, &other, "hello").await;
    let listed = session_op(&mut client, &other, json!({"op": "list"})).await;
    let others_session = data(&listed)["active"].as_str().unwrap().to_owned();
    let sync = Client::unix(&daemon.socket()).await.attach(&one, "observer").await;
    let reply = sync["live_window"]["messages"][1]["id"].as_str().unwrap().to_owned();
    let forked =
        session_op(&mut client, &one, json!({"op": "fork", "args": {"from_entry_id": reply}}))
            .await;
    let fork = data(&forked)["session_id"].as_str().unwrap().to_owned();

    // Another agent's lineage.
    let refused = activate(&mut client, &one, &others_session).await;
    assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");
    // No such session, no such agent.
    let refused = activate(&mut client, &one, "sess-missing").await;
    assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");
    let refused = activate(&mut client, "agent-missing", &fork).await;
    assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");

    // Mid-turn.
    client.call("s", json!({"type": "prompt", "agent_id": one, "message": "stream: 300"})).await;
    client.until_agent(&one, |m| m["type"] == "message_delta").await;
    let refused = activate(&mut client, &one, &fork).await;
    assert_eq!(refused["error"]["code"], "CONFLICT", "{refused}");
    client.send(json!({"type": "abort", "agent_id": one}));
    client.until_agent(&one, |m| m["type"] == "turn_end").await;

    // The fork adopted by a new agent is that agent's now.
    let adopted = client
        .call(
            "adopt",
            json!({"type": "agent.create", "cwd": project.path().display().to_string(), "session_id": fork}),
        )
        .await;
    let adopter = data(&adopted)["agent_id"].as_str().unwrap().to_owned();
    let refused = activate(&mut client, &one, &fork).await;
    assert_eq!(refused["error"]["code"], "CONFLICT", "{refused}");
    assert_eq!(refused["error"]["data"]["agent_id"], adopter.as_str());
    // And the first agent still runs its own session, whole.
    let listed = session_op(&mut client, &one, json!({"op": "list"})).await;
    assert_ne!(data(&listed)["active"], fork.as_str());
}

#[tokio::test]
async fn every_attached_client_learns_a_prompt_and_its_entry_as_it_lands() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "announcer").await;
    client.attach(&agent, "interactive").await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    watcher.attach(&agent, "observer").await;
    say(&mut client, &agent, "where does this land?").await;

    // The other client sees the prompt between `turn_start` and the reply.
    let seen = watcher.until_agent(&agent, |m| m["type"] == "turn_end").await;
    let kinds: Vec<&str> = seen.iter().filter_map(|m| m["type"].as_str()).collect();
    let at = |kind: &str| kinds.iter().position(|seen| *seen == kind).expect(kind);
    assert!(at("turn_start") < at("user_message"), "{kinds:?}");
    assert!(at("user_message") < at("message_complete"), "{kinds:?}");
    let said = &seen[at("user_message")];
    assert_eq!(said["text"], "where does this land?", "{said}");
    assert_eq!(said["turn_id"], seen[at("turn_start")]["turn_id"], "{said}");
    // Its entry is the one a sync names, and a fork can start there.
    let entry = said["entry_id"].as_str().expect("entry id").to_owned();
    let mut late = Client::unix(&daemon.socket()).await;
    let sync = late.attach(&agent, "observer").await;
    assert_eq!(sync["live_window"]["messages"][0]["id"], entry.as_str(), "{sync}");
    let forked =
        session_op(&mut client, &agent, json!({"op": "fork", "args": {"from_entry_id": entry}}))
            .await;
    assert!(data(&forked)["session_id"].as_str().is_some(), "{forked}");
}
