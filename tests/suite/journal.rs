//! The event journal (docs/PROTOCOL-NOTES.md, "Event sequence numbers and
//! resume"): per-agent `seq`, resume from a cursor with exactly what was
//! missed and no `sync`, a reset `sync` outside retention, and both across
//! a daemon restart.

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

fn seq(message: &Value) -> u64 {
    message["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {message}"))
}

/// Attaches with a cursor; returns the response.
async fn resume(client: &mut Client, agent: &str, after: u64) -> Value {
    let response = client
        .call(
            "resume",
            json!({"type": "agent.attach", "agent_id": agent, "role": "interactive", "after_seq": after}),
        )
        .await;
    assert_eq!(response["success"], true, "{response}");
    response
}

/// The agent's own events (numbered) read until `done` matches one;
/// registry events, which every connection gets, are left out.
async fn read_until(client: &mut Client, agent: &str, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let read = client.until_agent(agent, |message| message.get("seq").is_some() && done(message));
    read.await.into_iter().filter(|message| message.get("seq").is_some()).collect()
}

fn turn_end(message: &Value) -> bool {
    message["type"] == "turn_end"
}

/// Checks that `events` are numbered one after another from `first`.
fn assert_contiguous(events: &[Value], first: u64) {
    for (offset, event) in events.iter().enumerate() {
        assert_eq!(seq(event), first + offset as u64, "in order, none missing: {event}");
    }
}

#[tokio::test]
async fn a_client_that_drops_mid_stream_resumes_with_exactly_what_it_missed() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut watcher = Client::unix(&daemon.socket()).await;
    let agent = watcher.create(project.path(), "journaled").await;
    let sync = watcher.attach(&agent, "interactive").await;
    let start = sync["seq"].as_u64().expect("sync carries the cursor");

    // Another client follows the turn, reads a few deltas, and drops.
    let mut dropped = Client::unix(&daemon.socket()).await;
    dropped.attach(&agent, "observer").await;
    watcher.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 200"})).await;
    let mut seen = Vec::new();
    while seen.iter().filter(|m: &&Value| m["type"] == "message_delta").count() < 20 {
        let message = dropped.next().await;
        if message.get("seq").is_some() {
            seen.push(message);
        }
    }
    let cursor = seq(seen.last().unwrap());
    drop(dropped);

    // The watcher saw every event of the turn, numbered.
    let all = read_until(&mut watcher, &agent, turn_end).await;
    assert_contiguous(&all, start + 1);

    // Back with its cursor: exactly what it missed, once, in order, no sync.
    let mut back = Client::unix(&daemon.socket()).await;
    let response = resume(&mut back, &agent, cursor).await;
    assert_eq!(response["data"]["resumed"], true, "{response}");
    let missed = read_until(&mut back, &agent, turn_end).await;
    assert!(missed.iter().all(|m| m["type"] != "sync"), "no sync on a resume");
    assert_contiguous(&missed, cursor + 1);
    let expected: Vec<&Value> = all.iter().filter(|m| seq(m) > cursor).collect();
    assert_eq!(missed.iter().collect::<Vec<_>>(), expected, "the same events, byte for byte");
    // And the whole reply is what it read before plus what it missed.
    let text: String = seen
        .iter()
        .chain(&missed)
        .filter(|m| m["type"] == "message_delta")
        .filter_map(|m| m["text_delta"].as_str())
        .collect();
    let complete = missed.iter().find(|m| m["type"] == "message_complete").expect("complete");
    assert_eq!(complete["message"]["content"][0]["text"], text.as_str());

    // Live events after the replay carry on the numbering.
    watcher.call("p2", json!({"type": "prompt", "agent_id": agent, "message": "again"})).await;
    let live = read_until(&mut back, &agent, turn_end).await;
    assert_eq!(seq(&live[0]), seq(missed.last().unwrap()) + 1);
    assert_contiguous(&live, seq(&live[0]));
    // A caught-up cursor resumes with nothing to send: the next event it
    // gets is the next live one.
    let newest = seq(live.last().unwrap());
    let mut caught_up = Client::unix(&daemon.socket()).await;
    let response = resume(&mut caught_up, &agent, newest).await;
    assert_eq!(response["data"]["resumed"], true);
    watcher.call("p3", json!({"type": "prompt", "agent_id": agent, "message": "once more"})).await;
    let live = read_until(&mut caught_up, &agent, turn_end).await;
    assert_eq!(seq(&live[0]), newest + 1, "{:?}", live[0]);
}

#[tokio::test]
async fn a_cursor_outside_retention_gets_a_reset_sync() {
    let daemon = Daemon::start(&["--journal-events", "10"]).await;
    let project = TempDir::new().unwrap();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "short-memory").await;
    client.attach(&agent, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 60"})).await;
    let turn = read_until(&mut client, &agent, turn_end).await;
    let last = seq(turn.last().unwrap());

    for cursor in [1, last + 5] {
        let mut late = Client::unix(&daemon.socket()).await;
        let response = resume(&mut late, &agent, cursor).await;
        assert!(response["data"].get("resumed").is_none(), "{response}");
        let sync = late.until(|m| m["type"] == "sync").await.pop().unwrap();
        assert_eq!(sync["reset"], true, "cursor {cursor}: {sync}");
        // The turn's last events (its status back to idle) follow turn_end.
        assert!(sync["seq"].as_u64().unwrap() >= last, "the snapshot's own cursor: {sync}");
    }
    // Within the ten kept, a resume.
    let mut recent = Client::unix(&daemon.socket()).await;
    let response = resume(&mut recent, &agent, last - 5).await;
    assert_eq!(response["data"]["resumed"], true);
    let missed = read_until(&mut recent, &agent, turn_end).await;
    assert_contiguous(&missed, last - 4);
    assert_eq!(missed.len(), 5);
}

#[tokio::test]
async fn resume_works_across_a_graceful_restart_and_an_unclean_one_resets() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "lasting").await;
    client.attach(&agent, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 30"})).await;
    let turn = read_until(&mut client, &agent, turn_end).await;
    let cursor = seq(&turn[10]);
    let last = seq(turn.last().unwrap());
    drop(client);
    assert!(daemon.terminate().await.success(), "a graceful stop");

    let mut daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let response = resume(&mut client, &agent, cursor).await;
    assert_eq!(response["data"]["resumed"], true, "{response}");
    let missed = read_until(&mut client, &agent, turn_end).await;
    let expected: Vec<&Value> = turn.iter().filter(|m| seq(m) > cursor).collect();
    assert_eq!(missed.iter().collect::<Vec<_>>(), expected, "kept across the restart");
    // Numbering goes on past what was kept.
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "after"})).await;
    let after = read_until(&mut client, &agent, turn_end).await;
    assert!(seq(&after[0]) > last, "never a number twice");
    let newest = seq(after.last().unwrap());
    drop(client);

    // Killed: what it had not written may be lost, so older cursors reset.
    daemon.signal("KILL").await;
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let response = resume(&mut client, &agent, newest).await;
    assert!(response["data"].get("resumed").is_none(), "{response}");
    let sync = client.until(|m| m["type"] == "sync").await.pop().unwrap();
    assert_eq!(sync["reset"], true);
    assert!(sync["seq"].as_u64().unwrap() > newest, "numbers go on past the reservation");
}

#[tokio::test]
async fn a_tab_resuming_after_a_restart_is_told_of_the_queued_prompt_the_agent_takes_up() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut sender = Client::unix(&daemon.socket()).await;
    let agent = sender.create(project.path(), "carried").await;
    sender.attach(&agent, "interactive").await;
    // Another tab, watching: it never saw the follow-up queued.
    let mut watcher = Client::unix(&daemon.socket()).await;
    watcher.attach(&agent, "observer").await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "stream: 200"});
    sender.call("p", prompt).await;
    let started = read_until(&mut watcher, &agent, |m| m["type"] == "message_delta").await;
    let queued = json!({"type": "prompt", "agent_id": agent, "message": "then this",
                        "streaming_behavior": "follow_up"});
    assert_eq!(sender.call("q", queued).await["success"], true);
    let cursor = seq(started.last().unwrap());
    drop((sender, watcher));
    // A graceful stop: the turn finishes, the follow-up waits in the log.
    assert!(daemon.terminate().await.success());

    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    let response = resume(&mut watcher, &agent, cursor).await;
    assert_eq!(response["data"]["resumed"], true, "{response}");
    // The restored agent takes the follow-up up: the tab, which starts
    // from its cursor and gets no sync, is told of the prompt too.
    let answered = |m: &Value| {
        m["type"] == "message_complete"
            && m["message"]["content"][0]["text"] == "You said: then this"
    };
    let events = read_until(&mut watcher, &agent, answered).await;
    let said: Vec<&Value> = events.iter().filter(|m| m["type"] == "user_message").collect();
    assert_eq!(said.len(), 1, "{events:#?}");
    assert_eq!(said[0]["text"], "then this");
    assert!(said[0]["entry_id"].as_str().is_some_and(|id| !id.is_empty()), "{}", said[0]);
    drop(daemon);
}
