//! The daemon protocol over real sockets: registry commands, attach order,
//! fan-out, first-answer-wins, resync with a pending question, headless
//! answers and backpressure (PROTOCOL.md §6, §10; CONTRACT.md ordering).

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::streamed_text;
use super::client::{Browser, Client, Ended};
use super::support::Daemon;

fn kinds(messages: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for message in messages {
        let kind = message["type"].as_str().unwrap_or("?").to_owned();
        if kind == "message_delta" && kinds.last().is_some_and(|last| last == "message_delta") {
            continue;
        }
        kinds.push(kind);
    }
    kinds
}

#[tokio::test]
async fn create_list_attach_and_prompt_over_the_unix_socket() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut watcher = Client::unix(&daemon.socket()).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "worker").await;
    assert!(agent.starts_with("agent-"));

    // Every connection hears about it, attached or not.
    let spawned = watcher.until(|message| message["type"] == "agent_spawned").await;
    let spawned = spawned.last().expect("spawned");
    assert_eq!(spawned["agent_id"], agent.as_str());
    assert_eq!(spawned["info"]["name"], "worker");
    assert!(spawned.get("agent_id").is_some() && spawned["info"]["cwd"].is_string());

    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["runtime_state"], "running");
    assert_eq!(agents[0]["status"], "idle");
    assert_eq!(agents[0]["model"], "demo");
    assert_eq!(agents[0]["mode"], "build");
    let one = client.call("s", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(one["data"]["agents"][0]["agent_id"], agent.as_str());
    let missing = client.call("m", json!({"type": "agent.status", "agent_id": "agent-nope"})).await;
    assert_eq!(missing["error"]["code"], "NOT_FOUND");

    // Not attached yet: per-agent commands are refused.
    let refused =
        client.call("p0", json!({"type": "prompt", "agent_id": agent, "message": "hi"})).await;
    assert_eq!(refused["error"]["code"], "NOT_ATTACHED");

    // Attach: the response, then the sync, nothing in between.
    client.send(json!({"id": "a", "type": "agent.attach", "agent_id": agent}));
    let response = client.until(|message| message["id"] == "a").await;
    let response = response.last().expect("response");
    assert_eq!(response["data"]["status"], "idle");
    assert_eq!(response["data"]["info"]["agent_id"], agent.as_str());
    assert!(response.get("agent_id").is_none(), "an orchestrator response has no routing tag");
    let sync = client.expect("sync").await;
    assert_eq!(sync["agent_id"], agent.as_str());
    assert_eq!(sync["runtime_epoch"], 0);
    assert!(sync["capabilities"].to_string().contains("mode-switch"));
    assert_eq!(sync["pending_requests"], json!([]));

    let accepted = client
        .call("p1", json!({"type": "prompt", "agent_id": agent, "message": "hello daemon"}))
        .await;
    assert_eq!(accepted["success"], true);
    assert_eq!(
        accepted["agent_id"],
        agent.as_str(),
        "a per-agent response carries the routing tag"
    );
    let turn = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    // Registry events (agent_status_changed, agent_activity) name the agent
    // in their payload; the agent's own stream is everything else.
    let own: Vec<Value> = turn
        .into_iter()
        .filter(|message| message["agent_id"] == agent.as_str())
        .filter(|message| !message["type"].as_str().unwrap_or("").starts_with("agent_"))
        .collect();
    assert_eq!(
        kinds(&own),
        vec![
            "turn_start",
            "status",
            "user_message",
            "message_delta",
            "message_complete",
            "usage",
            "turn_end"
        ]
    );
    let text: String = own.iter().filter_map(|message| message["text_delta"].as_str()).collect();
    assert_eq!(text, "You said: hello daemon");

    // A watcher that never attached sees the sanitized overview only.
    let overview = watcher
        .until(|message| message["type"] == "agent_activity" && message["phase"] == "streaming")
        .await;
    let activity = overview.last().expect("activity");
    let keys: Vec<&String> = activity.as_object().expect("object").keys().collect();
    for key in keys {
        assert!(
            ["type", "agent_id", "timestamp", "phase", "status", "tool_name"]
                .contains(&key.as_str()),
            "{activity}"
        );
    }
    assert!(
        watcher.seen.iter().all(|message| message["type"] != "message_delta"),
        "no transcript for the unattached"
    );
}

#[tokio::test]
async fn bad_frames_are_answered_and_the_connection_survives() {
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    client.send_raw("{not json");
    assert_eq!(client.expect("error").await["code"], "INVALID_REQUEST");
    let unknown = client.call("u", json!({"type": "agent.teleport"})).await;
    assert_eq!(
        (unknown["command"].as_str(), unknown["error"]["code"].as_str()),
        (Some("agent.teleport"), Some("INVALID_REQUEST"))
    );
    let wrong = client.call("w", json!({"type": "agent.create", "cwd": 7})).await;
    assert!(wrong["error"]["message"].as_str().unwrap_or("").contains("cwd"));
    let relative = client.call("r", json!({"type": "agent.create", "cwd": "relative/dir"})).await;
    assert_eq!(relative["error"]["code"], "INVALID_REQUEST");
    let project = TempDir::new().unwrap();
    let create = json!({"type": "agent.create", "cwd": project.path(), "model": "gpt-none"});
    let no_model = client.call("n", create).await;
    assert_eq!(no_model["error"]["code"], "NOT_FOUND");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"], json!([]));
}

#[tokio::test]
async fn two_clients_race_a_permission_answer_and_the_first_wins() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let mut local = Client::unix(&daemon.socket()).await;
    let agent = local.create(project.path(), "racer").await;
    local.attach(&agent, "interactive").await;
    web.attach(&agent, "interactive").await;

    local
        .call(
            "p",
            json!({"type": "prompt", "agent_id": agent, "message": "run: echo raced > raced.txt"}),
        )
        .await;
    let request = local.permission_request(&agent).await;
    let seen_by_web = web.permission_request(&agent).await;
    assert_eq!(request["request_id"], seen_by_web["request_id"], "broadcast to both");
    let request_id = request["request_id"].clone();

    // Both answer at once; exactly one answer is applied.
    web.send(json!({"id": "w", "type": "permission_response", "agent_id": agent, "request_id": request_id, "decision": "allow"}));
    local.send(json!({"id": "l", "type": "permission_response", "agent_id": agent, "request_id": request_id, "decision": "deny"}));
    let web_read =
        web.until_agent(&agent, |message| message["type"] == "permission_resolved").await;
    let local_read =
        local.until_agent(&agent, |message| message["type"] == "permission_resolved").await;
    let web_resolved = web_read.last().expect("resolved");
    let local_resolved = local_read.last().expect("resolved");
    assert_eq!(web_resolved["decision"], local_resolved["decision"], "one outcome for all");
    let winner = web_resolved["decision"].as_str().expect("decision").to_owned();
    assert!(winner == "allow" || winner == "deny");
    let source = web_resolved["source"].as_str().expect("source");
    assert!(source == "web" || source == "unix", "{web_resolved}");
    assert_eq!((winner == "allow"), (source == "web"), "the winner's answer and source agree");

    let web_turn = web.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let local_turn = local.until_agent(&agent, |message| message["type"] == "turn_end").await;
    // The agent settles: its idle status follows turn_end.
    local
        .until(|message| {
            message["type"] == "agent_status_changed"
                && message["agent_id"] == agent
                && message["status"] == "idle"
        })
        .await;
    // The loser was not errored: its command got `success: true`. Its
    // acknowledgement may come after the winner's turn has ended: the two
    // connections are read apart, so wait for it rather than expect it by now.
    for (client, id) in [(&mut web, "w"), (&mut local, "l")] {
        let acknowledged = |message: &Value| message["type"] == "response" && message["id"] == id;
        let response = match client.seen.iter().find(|message| acknowledged(message)) {
            Some(response) => response.clone(),
            None => client.until(acknowledged).await.pop().expect("acknowledged"),
        };
        assert_eq!(response["success"], true, "{response}");
    }
    // Each saw the resolution once.
    for turn in [&web_turn, &local_turn] {
        assert_eq!(
            turn.iter().filter(|message| message["type"] == "permission_resolved").count(),
            0,
            "no second resolution"
        );
    }
    assert_eq!(project.path().join("raced.txt").exists(), winner == "allow");

    // A late answer is dropped silently: acknowledged, nothing else happens.
    let late = local
        .call("late", json!({"type": "permission_response", "agent_id": agent, "request_id": request_id, "decision": "allow"}))
        .await;
    assert_eq!(late["success"], true);
    local.silent_for(400).await;
}

#[tokio::test]
async fn a_pending_question_survives_a_reconnect() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "patient").await;
    web.attach(&agent, "interactive").await;
    web.call(
        "p",
        json!({"type": "prompt", "agent_id": agent, "message": "run: echo kept > kept.txt"}),
    )
    .await;
    let request = web.permission_request(&agent).await;
    drop(web); // the tab goes away mid-question

    let mut again = browser.connect(&daemon).await;
    let sync = again.attach(&agent, "interactive").await;
    assert_eq!(sync["status"], "waiting_for_permission");
    let pending = sync["pending_requests"].as_array().expect("pending");
    assert_eq!(pending.len(), 1, "{sync}");
    assert_eq!(pending[0]["type"], "permission_request");
    assert_eq!(pending[0]["request_id"], request["request_id"]);
    again.send(json!({"type": "permission_response", "agent_id": agent, "request_id": request["request_id"], "choice_id": "allow-once"}));
    let read = again.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved =
        read.iter().find(|message| message["type"] == "permission_resolved").expect("resolved");
    assert_eq!(resolved["choice_id"], "allow-once");
    assert!(project.path().join("kept.txt").exists());
}

#[tokio::test]
async fn nobody_to_answer_is_an_immediate_headless_deny() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut observer = Client::unix(&daemon.socket()).await;
    let mut driver = Client::unix(&daemon.socket()).await;
    let agent = driver.create(project.path(), "alone").await;
    observer.attach(&agent, "observer").await;
    let denied =
        observer.call("o", json!({"type": "prompt", "agent_id": agent, "message": "hi"})).await;
    assert_eq!(denied["error"]["code"], "PERMISSION_DENIED", "observers never prompt");
    driver.attach(&agent, "interactive").await;
    // Prompt and detach in one go: the daemon handles both before the agent
    // can have asked anything.
    driver.send(json!({"id": "p", "type": "prompt", "agent_id": agent, "message": "run: touch headless.txt"}));
    driver.call("d", json!({"type": "agent.detach", "agent_id": agent})).await;
    // Only an observer is left: it sees the question and its headless end.
    let read = observer.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved =
        read.iter().find(|message| message["type"] == "permission_resolved").expect("resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("deny"), Some("headless"))
    );
    let result = read.iter().find(|message| message["type"] == "tool_result").expect("result");
    assert_eq!(result["is_error"], true);
    assert!(!project.path().join("headless.txt").exists());
}

#[tokio::test]
async fn a_question_left_alone_is_denied_after_the_headless_timeout() {
    let daemon = Daemon::start(&["--headless-timeout", "1"]).await;
    let project = TempDir::new().expect("project");
    let mut observer = Client::unix(&daemon.socket()).await;
    let agent = observer.create(project.path(), "waiting").await;
    observer.attach(&agent, "observer").await;
    let mut driver = Client::unix(&daemon.socket()).await;
    driver.attach(&agent, "interactive").await;
    driver
        .call("p", json!({"type": "prompt", "agent_id": agent, "message": "run: touch late.txt"}))
        .await;
    driver.permission_request(&agent).await;
    drop(driver); // the last responder leaves with the question open
    let started = std::time::Instant::now();
    let read =
        observer.until_agent(&agent, |message| message["type"] == "permission_resolved").await;
    let resolved = read.last().expect("resolved");
    assert_eq!(resolved["source"], "headless");
    assert!(started.elapsed() >= std::time::Duration::from_millis(500), "waited for the timeout");
}

#[tokio::test]
async fn a_browser_gets_messages_far_larger_than_a_frame_whole() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "wordy").await;
    web.attach(&agent, "interactive").await;
    // 20,000 deltas: a `message_complete` of some 150 KB, sent in fragments.
    web.call("p", json!({"type": "prompt", "agent_id": agent, "message": "burst: 20000"})).await;
    let turn = web.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let complete =
        turn.iter().find(|message| message["type"] == "message_complete").expect("complete");
    let text = complete["message"]["content"][0]["text"].as_str().expect("text");
    assert!(text.len() > 100_000, "{} bytes", text.len());
    assert_eq!(text, streamed_text(&turn));
    // And a `sync` as large, on a second attach.
    let mut again = browser.connect(&daemon).await;
    let sync = again.attach(&agent, "observer").await;
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    assert_eq!(messages.last().expect("the reply")["content"][0]["text"], text);
}

#[tokio::test]
async fn a_stalled_client_is_dropped_while_a_fast_one_keeps_up() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut fast = Client::unix(&daemon.socket()).await;
    let agent = fast.create(project.path(), "firehose").await;
    let (open_gate, gate) = tokio::sync::watch::channel(true);
    let mut slow = Client::unix_paced(&daemon.socket(), Some(gate)).await;
    slow.attach(&agent, "observer").await;
    fast.attach(&agent, "interactive").await;
    open_gate.send(false).expect("stall"); // the slow client stops reading
    // Paced so that the fast client keeps up on a loaded machine: one that
    // falls the whole budget behind an unpaced burst is dropped too (P2).
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "pace: 60000 20000"});
    fast.call("p", prompt).await;
    // The daemon queues each delta for both clients before the fast one
    // reads it, so once the fast one has read 5 MB (4 MiB of outbox and a
    // socket buffer, and a margin) the slow one is over its budget. It
    // reads again then, soon enough for the daemon's last words to reach it.
    let tick = |message: &Value| {
        let text = message["text_delta"].as_str().unwrap_or("");
        text.strip_prefix("tick-")
            .and_then(|rest| rest.split('@').next())
            .and_then(|index| index.parse::<u64>().ok())
    };
    let mut turn = fast.until_agent(&agent, |message| tick(message) >= Some(31_000)).await;
    open_gate.send(true).expect("resume");
    turn.extend(fast.until_agent(&agent, |message| message["type"] == "turn_end").await);
    let deltas = turn.iter().filter(|message| message["type"] == "message_delta").count();
    assert_eq!(deltas, 60000, "the fast client got every delta");
    // The slow one was disconnected with a reason, after what it had queued.
    match slow.ended().await {
        Ended::Eof => {}
        other => panic!("{other:?}"),
    }
    let last = slow.seen.last().expect("a final message");
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["fatal"], true);
    assert!(last["message"].as_str().unwrap_or("").contains("too slow"), "{last}");
    // It may come back and resync.
    let mut back = Client::unix(&daemon.socket()).await;
    let sync = back.attach(&agent, "observer").await;
    assert_eq!(sync["status"], "idle");
}

#[tokio::test]
async fn a_delegated_childs_question_goes_to_the_nearest_interactive_ancestor() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut parent_client = Client::unix(&daemon.socket()).await;
    let parent = parent_client.create(project.path(), "parent").await;
    let created = parent_client
        .call("c", json!({"type": "agent.create", "cwd": project.path().display().to_string(), "name": "child", "parent_agent_id": parent}))
        .await;
    let child = created["data"]["agent_id"].as_str().expect("child id").to_owned();
    parent_client.attach(&parent, "interactive").await;
    let mut driver = Client::unix(&daemon.socket()).await;
    driver.attach(&child, "interactive").await;
    // Prompt and detach in one go: the daemon handles both before the agent
    // can have asked anything.
    driver.send(json!({"id": "p", "type": "prompt", "agent_id": child, "message": "run: touch delegated.txt"}));
    driver.call("d", json!({"type": "agent.detach", "agent_id": child})).await;
    // The parent's client gets the child's question, under the child's id.
    let read = parent_client.until(|message| message["type"] == "permission_request").await;
    let request = read.last().expect("request").clone();
    assert_eq!(request["agent_id"], child.as_str());
    // It is re-shown in the parent's sync on re-attach.
    let sync = parent_client.attach(&parent, "interactive").await;
    let pending = sync["pending_requests"].as_array().expect("pending");
    assert_eq!(pending.len(), 1, "{sync}");
    assert_eq!(pending[0]["agent_id"], child.as_str());
    // And it answers for the child without being attached to it.
    parent_client.send(json!({"type": "permission_response", "agent_id": child, "request_id": request["request_id"], "decision": "allow"}));
    let read = parent_client.until(|message| message["type"] == "permission_resolved").await;
    assert_eq!(read.last().expect("resolved")["decision"], "allow");
    let started = std::time::Instant::now();
    while !project.path().join("delegated.txt").exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the child ran the command"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // An unrelated connection may not answer.
    let stranger = Client::unix(&daemon.socket()).await;
    let mut stranger = stranger;
    let refused = stranger
        .call("x", json!({"type": "permission_response", "agent_id": child, "request_id": "perm-9", "decision": "allow"}))
        .await;
    assert_eq!(refused["error"]["code"], "NOT_ATTACHED");
}

#[tokio::test]
async fn recall_steer_is_routed_to_the_agent_and_refused_to_observers() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let mut observer = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "recaller").await;
    client.attach(&agent, "interactive").await;
    observer.attach(&agent, "observer").await;

    let accepted = client
        .call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 200"}))
        .await;
    assert_eq!(accepted["success"], true, "{accepted}");
    client.until_agent(&agent, |message| message["type"] == "turn_start").await;
    let steered = client
        .call("s", json!({"type": "steer", "agent_id": agent, "message": "never mind"}))
        .await;
    assert_eq!(steered["success"], true, "{steered}");

    let denied = observer.call("o", json!({"type": "recall_steer", "agent_id": agent})).await;
    assert_eq!(denied["error"]["code"], "PERMISSION_DENIED", "{denied}");
    // The client's own id comes back, with the routing tag.
    let recalled = client.call("mine", json!({"type": "recall_steer", "agent_id": agent})).await;
    assert_eq!(recalled["command"], "recall_steer");
    assert_eq!(recalled["agent_id"], agent.as_str());
    assert_eq!(
        recalled["data"],
        json!({"recalled": {"message": "never mind", "streaming_behavior": "steer"}})
    );
    let again = client.call("again", json!({"type": "recall_steer", "agent_id": agent})).await;
    assert_eq!(again["data"], json!({"recalled": null}));
    let turn = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert!(!streamed_text(&turn).contains("never mind"));

    // A stopped runtime has nothing queued, and is not woken to say so.
    let stopped = client.call("t", json!({"type": "agent.terminate", "agent_id": agent})).await;
    assert_eq!(stopped["success"], true, "{stopped}");
    client
        .until(|message| {
            message["type"] == "agent_status_changed" && message["runtime_state"] == "stopped"
        })
        .await;
    let nothing = client.call("late", json!({"type": "recall_steer", "agent_id": agent})).await;
    assert_eq!(nothing["data"], json!({"recalled": null}), "{nothing}");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["runtime_state"], "stopped");
}

/// The text of a message's text blocks, joined.
fn message_text(message: &Value) -> String {
    let blocks = message["content"].as_array().map(Vec::as_slice).unwrap_or_default();
    blocks
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_client_that_attaches_mid_reply_gets_the_reply_so_far_and_the_rest_goes_on_from_it() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "talker").await;
    client.attach(&agent, "interactive").await;
    let accepted = client
        .call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 150"}))
        .await;
    assert_eq!(accepted["success"], true, "{accepted}");
    client
        .until_agent(&agent, |message| {
            message["type"] == "message_delta" && message["text_delta"] == "tick-20 "
        })
        .await;

    // Another client joins mid-reply: its sync ends with the reply so far.
    let mut late = Client::unix(&daemon.socket()).await;
    let sync = late.attach(&agent, "observer").await;
    assert_eq!(sync["status"], "streaming", "{sync}");
    let window = sync["live_window"]["messages"].as_array().expect("messages");
    let so_far = window.last().expect("a message");
    assert_eq!(so_far["streaming"], true, "{so_far}");
    assert_eq!(so_far["role"], "assistant");
    let shown = message_text(so_far);
    assert!(shown.starts_with("tick-1 tick-2 ") && shown.contains("tick-20 "), "{shown}");
    let asked = &window[window.len() - 2];
    assert_eq!(
        (asked["role"].as_str(), message_text(asked).as_str()),
        (Some("user"), "stream: 150")
    );

    // What streams after goes on under its id, and the two make the whole.
    let rest = late.until_agent(&agent, |message| message["type"] == "message_complete").await;
    let complete = rest.last().expect("complete");
    assert_eq!(complete["message_id"], so_far["id"], "{complete}");
    let deltas = rest.iter().filter(|message| message["type"] == "message_delta");
    assert!(deltas.clone().all(|delta| delta["message_id"] == so_far["id"]));
    assert!(deltas.count() > 0, "joined before the end, it saw the rest stream");
    let whole = message_text(&complete["message"]);
    assert_eq!(format!("{shown}{}", streamed_text(&rest)), whole);
    assert!(whole.ends_with("tick-150 ") || whole.ends_with("tick-150"), "{whole}");
    assert!(complete["message"].get("streaming").is_none(), "{complete}");

    // Once it is recorded, a sync gives it once, as a message like any other.
    late.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let mut later = Client::unix(&daemon.socket()).await;
    let sync = later.attach(&agent, "observer").await;
    let window = sync["live_window"]["messages"].as_array().expect("messages");
    assert_eq!(window.len(), 2, "{sync}");
    assert!(window.iter().all(|message| message.get("streaming").is_none()), "{sync}");
    assert_eq!(message_text(&window[1]), whole);
}
