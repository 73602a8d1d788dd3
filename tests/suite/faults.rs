//! Injected faults, black-box: an agent SIGKILLed mid-stream and mid-tool,
//! the daemon SIGKILLed with a question open, a steer or follow-up queued
//! when the daemon or its agent dies, the disk full under a session log, and
//! a client flooding tiny frames. In each, nothing is lost that was complete
//! or accepted, nothing half-done is stored as complete, and whoever is
//! waiting gets a clear answer.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::{AgentProc, Workspace, live_texts, streamed_text};
use super::client::{Browser, Client, connect_ws};
use super::lifecycle::sigkill_agent;
use super::support::{Daemon, agent_pids, shard_with_file_limit, wait_until};

/// Prompts an agent that is not running: the daemon restores it. Returns the
/// fresh `sync` (which comes before the response) and the turn.
async fn restore_with(client: &mut Client, agent: &str, message: &str) -> (Value, Vec<Value>) {
    let before = client.seen.len();
    client.call("restore", json!({"type": "prompt", "agent_id": agent, "message": message})).await;
    let turn = client.until_agent(agent, |message| message["type"] == "turn_end").await;
    let sync = client.seen[before..]
        .iter()
        .find(|message| message["type"] == "sync")
        .expect("a fresh sync")
        .clone();
    (sync, turn)
}

async fn attached_agent(daemon: &Daemon, project: &TempDir, name: &str) -> (Client, String) {
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), name).await;
    client.attach(&agent, "interactive").await;
    (client, agent)
}

fn canonical(project: &TempDir) -> String {
    project.path().canonicalize().expect("path").display().to_string()
}

#[tokio::test]
async fn an_agent_killed_mid_stream_is_restored_without_its_partial_reply() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent) = attached_agent(&daemon, &project, "streaming").await;
    client.call("p1", json!({"type": "prompt", "agent_id": agent, "message": "finished"})).await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;

    client.call("p2", json!({"type": "prompt", "agent_id": agent, "message": "stream: 400"})).await;
    // Well into the reply: several deltas out, hundreds to come.
    for _ in 0..5 {
        client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    }
    sigkill_agent(&mut client, &agent, &canonical(&project)).await;

    let (sync, turn) = restore_with(&mut client, &agent, "and now?").await;
    assert_eq!(sync["runtime_epoch"], 1);
    // The prompt was taken, and its reply was never finished: no assistant
    // message, partial or whole, stands for it.
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{messages:#?}");
    assert_eq!(live_texts(&sync), ["finished", "You said: finished", "stream: 400"]);
    assert!(sync["pending_requests"].as_array().expect("list").is_empty());
    assert_eq!(streamed_text(&turn), "You said: and now?");
}

#[tokio::test]
async fn an_agent_killed_mid_tool_is_restored_with_the_call_marked_interrupted() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent) = attached_agent(&daemon, &project, "tooling").await;
    let witness = project.path().join("finished");
    // A command that would leave a mark if it ever completed.
    let seconds = 6_100_000 + u64::from(std::process::id() % 100_000);
    let command = format!("run: sleep {seconds}; touch {}", witness.display());
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": command})).await;
    let asked = client.permission_request(&agent).await;
    let allow = json!({"type": "permission_response", "agent_id": agent,
                       "request_id": asked["request_id"], "decision": "allow"});
    client.call("allow", allow).await;
    let sleeping = format!("sleep {seconds}");
    wait_until("the command to run", || !pids_of(&sleeping).is_empty()).await;

    sigkill_agent(&mut client, &agent, &canonical(&project)).await;
    wait_until("the command to die with its agent", || pids_of(&sleeping).is_empty()).await;

    let (sync, turn) = restore_with(&mut client, &agent, "what happened?").await;
    // The call stands, answered by an error that says it was cut short: not
    // a result of a command that ran to its end.
    let window = &sync["live_window"]["messages"];
    let results: Vec<&Value> = window
        .as_array()
        .expect("messages")
        .iter()
        .flat_map(|message| message["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 1, "{window:#}");
    assert_eq!(results[0]["is_error"], true, "{window:#}");
    let text = results[0].to_string();
    assert!(text.contains("interrupted"), "{text}");
    assert!(!witness.exists(), "the command never finished");
    assert_eq!(streamed_text(&turn), "You said: what happened?");
}

/// Live processes whose command line is exactly `command`.
fn pids_of(command: &str) -> Vec<String> {
    let output =
        std::process::Command::new("pgrep").args(["-x", "-f", command]).output().expect("pgrep");
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
}

#[tokio::test]
async fn a_daemon_killed_with_a_question_open_restarts_whole_and_the_question_is_withdrawn() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = canonical(&project);
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "asking").await;
    web.attach(&agent, "interactive").await;
    web.call("p1", json!({"type": "prompt", "agent_id": agent, "message": "kept"})).await;
    web.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let witness = project.path().join("approved");
    let command = format!("run: touch {}", witness.display());
    web.call("p2", json!({"type": "prompt", "agent_id": agent, "message": command})).await;
    let asked = web.permission_request(&agent).await;

    daemon.signal("KILL").await;
    wait_until("the agent to stop with its daemon", || agent_pids(&marker).is_empty()).await;

    let restarted = Daemon::start_in(&daemon.home, &[]).await;
    // The enrolled browser's session survived, and so did the agent.
    let mut web = browser.connect(&restarted).await;
    let listed = web.call("l", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1, "{listed}");
    assert_eq!(agents[0]["agent_id"], agent.as_str());
    assert_eq!(agents[0]["runtime_state"], "stopped");
    let sync = web.attach(&agent, "interactive").await;
    // The question is withdrawn, never answered for the user: nothing is
    // re-shown, the call is recorded as not run, and the command never ran.
    assert_eq!(sync["pending_requests"], json!([]), "{sync}");
    let texts = live_texts(&sync);
    assert_eq!(texts[..3], ["kept", "You said: kept", command.as_str()], "{texts:?}");
    let window = sync["live_window"].to_string();
    assert!(window.contains("\"is_error\":true"), "{window}");
    assert!(!witness.exists(), "a question nobody answered let the command run");
    // A late answer to the old question is dropped (§9.5: acknowledged,
    // then discarded) and starts nothing.
    let late = json!({"type": "permission_response", "agent_id": agent,
                      "request_id": asked["request_id"], "decision": "allow"});
    let acknowledged = web.call("late", late).await;
    assert_eq!(acknowledged["success"], true, "{acknowledged}");
    web.silent_for(300).await;
    assert!(!witness.exists());
    // And the agent goes on.
    web.call("p3", json!({"type": "prompt", "agent_id": agent, "message": "still here"})).await;
    let turn = web.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert_eq!(streamed_text(&turn), "You said: still here");
}

/// A steer or follow-up accepted during a long reply, then the daemon
/// stopped by `signal` (its agents die with it): once restarted, the first
/// attach restores the agent, whose `sync` already shows the queued message
/// as the user message of the turn it runs now; the reply follows, and a
/// page loaded afterwards shows the message once, answered.
async fn a_queued_input_outlives_its_daemon(signal: &str, behavior: &str) {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = canonical(&project);
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "queueing").await;
    web.attach(&agent, "interactive").await;
    web.call("p1", json!({"type": "prompt", "agent_id": agent, "message": "stream: 3000"})).await;
    web.until_agent(&agent, |message| message["type"] == "message_delta").await;
    let text = format!("a {behavior} sent before SIG{signal}");
    let queued = json!({"type": "prompt", "agent_id": agent, "message": text,
                        "streaming_behavior": behavior});
    let accepted = web.call("q", queued).await;
    assert_eq!(accepted["success"], true, "{accepted}");

    daemon.signal(signal).await;
    wait_until("the agent to stop with its daemon", || agent_pids(&marker).is_empty()).await;

    let restarted = Daemon::start_in(&daemon.home, &[]).await;
    let mut web = browser.connect(&restarted).await;
    let sync = web.attach(&agent, "interactive").await;
    let answer = format!("You said: {text}");
    let texts = live_texts(&sync);
    // The restored agent runs the message at once: the sync shows it either
    // as the turn under way, or (the demo replies fast) already answered.
    if texts.last() == Some(&answer.as_str()) {
        assert_eq!(texts[texts.len() - 2], text, "{sync:#}");
    } else {
        assert_eq!(texts.last(), Some(&text.as_str()), "{sync:#}");
        assert_eq!(sync["status"], "streaming", "{sync:#}");
        let turn = web.until_agent(&agent, |message| message["type"] == "turn_end").await;
        assert_eq!(streamed_text(&turn), answer);
    }

    // A page loaded once the reply is in: it shows the message once,
    // answered (a page loaded a moment earlier gets the reply as events
    // after its sync).
    let mut texts = Vec::new();
    let mut reloaded = browser.connect(&restarted).await;
    for _ in 0..50 {
        let sync = reloaded.attach(&agent, "observer").await;
        texts = live_texts(&sync).into_iter().map(str::to_owned).collect();
        if sync["status"] == "idle" && texts.last() == Some(&answer) {
            break;
        }
        let detach = json!({"type": "agent.detach", "agent_id": agent});
        assert_eq!(reloaded.call("d", detach).await["success"], true);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert_eq!(texts.iter().filter(|said| **said == text).count(), 1, "{texts:?}");
    assert_eq!(texts.last(), Some(&answer.as_str()), "{texts:?}");
}

#[tokio::test]
async fn a_follow_up_queued_before_a_daemon_sigterm_is_delivered_after_the_restart() {
    a_queued_input_outlives_its_daemon("TERM", "follow_up").await;
}

#[tokio::test]
async fn a_follow_up_queued_before_a_daemon_sigkill_is_delivered_after_the_restart() {
    a_queued_input_outlives_its_daemon("KILL", "follow_up").await;
}

#[tokio::test]
async fn a_steer_queued_before_a_daemon_sigterm_is_delivered_after_the_restart() {
    a_queued_input_outlives_its_daemon("TERM", "steer").await;
}

#[tokio::test]
async fn a_steer_queued_before_a_daemon_sigkill_is_delivered_after_the_restart() {
    a_queued_input_outlives_its_daemon("KILL", "steer").await;
}

/// Reads until `agent` has ended `turns` turns counting from `seen[from]`;
/// returns those turns, each up to its `turn_end`.
async fn turns_since(
    client: &mut Client,
    agent: &str,
    from: usize,
    turns: usize,
) -> Vec<Vec<Value>> {
    let ended = |seen: &[Value]| {
        seen.iter()
            .filter(|message| message["agent_id"] == agent && message["type"] == "turn_end")
            .count()
    };
    while ended(&client.seen[from..]) < turns {
        client.next().await;
    }
    let mut split = vec![Vec::new()];
    for message in client.seen[from..].iter().filter(|message| message["agent_id"] == agent) {
        let last = split.last_mut().expect("a turn");
        last.push(message.clone());
        if message["type"] == "turn_end" {
            split.push(Vec::new());
        }
    }
    split.truncate(turns);
    split
}

#[tokio::test]
async fn a_follow_up_queued_before_its_agent_crashed_runs_before_the_prompt_that_restores_it() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent) = attached_agent(&daemon, &project, "crashing").await;
    client
        .call("p1", json!({"type": "prompt", "agent_id": agent, "message": "stream: 3000"}))
        .await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    let queued = json!({"type": "prompt", "agent_id": agent, "message": "queued before the crash",
                        "streaming_behavior": "follow_up"});
    let accepted = client.call("q", queued).await;
    assert_eq!(accepted["success"], true, "{accepted}");
    sigkill_agent(&mut client, &agent, &canonical(&project)).await;

    // New work restores the agent: what it owed runs first, and the prompt
    // (sent to an agent that looked stopped, so without a streaming
    // behavior) waits for it as a follow-up instead of being refused.
    let from = client.seen.len();
    let restored =
        client.call("r", json!({"type": "prompt", "agent_id": agent, "message": "and now?"})).await;
    assert_eq!(restored["success"], true, "{restored}");
    let first = turns_since(&mut client, &agent, from, 1).await;
    assert_eq!(streamed_text(&first[0]), "You said: queued before the crash");
    let turns = turns_since(&mut client, &agent, from, 2).await;
    assert_eq!(streamed_text(&turns[1]), "You said: and now?");
    // The restore's sync shows the owed message as the turn under way, or
    // (the demo replies fast) already answered.
    let sync = first[0].iter().find(|message| message["type"] == "sync").expect("a fresh sync");
    let texts = live_texts(sync);
    let at = texts.iter().position(|said| *said == "queued before the crash");
    assert!(
        at.is_some_and(|at| texts[at + 1..]
            .iter()
            .all(|said| said.starts_with("You said: queued"))),
        "{sync:#}"
    );
}

#[tokio::test]
async fn a_stopped_agent_resumed_with_its_session_delivers_what_it_had_queued() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let listed = agent.call("l", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    agent.call("p1", json!({"type": "prompt", "message": "stream: 3000"})).await;
    agent.expect("turn_start").await;
    for (id, command) in [
        ("s", json!({"type": "steer", "message": "steered before the stop"})),
        (
            "f",
            json!({"type": "prompt", "message": "followed up before the stop",
                   "streaming_behavior": "follow_up"}),
        ),
    ] {
        let (accepted, _) = agent.call_during(id, command).await;
        assert_eq!(accepted["success"], true, "{accepted}");
    }
    // SIGTERM, as `agent.kill` and a dying daemon send it: the turn is
    // aborted, and what was queued for later is kept for later.
    let pid = agent.child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(killed.success());
    assert!(agent.wait_exit().await.success());

    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    assert_eq!(sync["status"], "streaming", "{sync:#}");
    assert_eq!(live_texts(&sync).last(), Some(&"steered before the stop"), "{sync:#}");
    let first = resumed.until("turn_end").await;
    assert_eq!(streamed_text(&first), "You said: steered before the stop");
    let second = resumed.until("turn_end").await;
    assert_eq!(streamed_text(&second), "You said: followed up before the stop");
    assert_eq!(resumed.expect("status").await["status"], "idle");
    resumed.close_stdin();
    assert!(resumed.wait_exit().await.success());

    // Delivered once: a later resume owes nothing.
    let mut again = workspace.start(&["--session", &session]).await;
    again.expect("hello").await;
    let sync = again.expect("sync").await;
    assert_eq!(sync["status"], "idle", "{sync:#}");
    again.silent_for(300).await;
}

#[tokio::test]
async fn a_queued_input_taken_back_or_aborted_is_not_delivered_after_a_resume() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let listed = agent.call("l", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    agent.call("p1", json!({"type": "prompt", "message": "stream: 3000"})).await;
    agent.expect("turn_start").await;
    let follow_up =
        |text: &str| json!({"type": "prompt", "message": text, "streaming_behavior": "follow_up"});
    let (accepted, _) = agent.call_during("f1", follow_up("taken back")).await;
    assert_eq!(accepted["success"], true, "{accepted}");
    let (recalled, _) = agent.call_during("r", json!({"type": "recall_steer"})).await;
    assert_eq!(recalled["data"]["recalled"]["message"], "taken back", "{recalled}");
    let (accepted, _) = agent.call_during("f2", follow_up("dropped by the abort")).await;
    assert_eq!(accepted["success"], true, "{accepted}");
    let (aborted, _) = agent.call_during("a", json!({"type": "abort"})).await;
    assert_eq!(aborted["success"], true, "{aborted}");
    agent.child.kill().await.expect("SIGKILL");

    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    assert_eq!(sync["status"], "idle", "{sync:#}");
    resumed.silent_for(500).await;
    let texts = live_texts(&sync);
    assert!(
        !texts.contains(&"taken back") && !texts.contains(&"dropped by the abort"),
        "{texts:?}"
    );
}

/// The largest file the agent of the disk-full test may write: its header
/// and a short turn fit, a long prompt does not.
const FILE_LIMIT: u64 = 8 * 1024;

/// An agent whose files cannot grow past [`FILE_LIMIT`] bytes.
fn agent_on_a_full_disk(workspace: &Workspace, args: &[&str]) -> AgentProc {
    let base = shard_with_file_limit(workspace.home.path(), workspace.project.path(), FILE_LIMIT);
    AgentProc::from_command(AgentProc::stdio(base, args))
}

#[tokio::test]
async fn a_full_disk_fails_the_turn_clearly_and_the_log_still_loads() {
    let workspace = Workspace::new();
    let mut agent = agent_on_a_full_disk(&workspace, &[]);
    agent.expect("hello").await;
    agent.expect("sync").await;
    agent.turn("fits").await;
    let listed = agent.call("l", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();

    // A prompt too long for the room left: its line is cut short on disk.
    let long = "words ".repeat(2_000);
    let turn = agent.turn(&long).await;
    let error = turn.iter().find(|message| message["type"] == "error").expect("an error");
    assert_eq!(error["code"], "INTERNAL_ERROR", "{error}");
    let text = error["message"].as_str().unwrap_or("");
    assert!(text.contains("session log") && text.contains("large"), "{text}");
    assert!(turn.iter().all(|message| message["type"] != "message_complete"), "not answered");

    // The log on disk is whole: every line parses, the last one ends.
    let log = find_log(workspace.home.path(), &session);
    let bytes = std::fs::read(&log).expect("log");
    assert!(bytes.len() as u64 <= FILE_LIMIT);
    assert_eq!(bytes.last(), Some(&b'\n'), "no torn line left");
    for line in bytes.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()) {
        serde_json::from_slice::<Value>(line).expect("every line is JSON");
    }
    // Space came back for a short turn: the same process goes on.
    let after = agent.turn("short again").await;
    assert_eq!(streamed_text(&after), "You said: short again");
    agent.close_stdin();
    agent.wait_exit().await;

    // Resumed with room to spare, the log loads with what was written.
    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    assert_eq!(
        live_texts(&sync),
        ["fits", "You said: fits", "short again", "You said: short again"]
    );
}

fn find_log(home: &std::path::Path, session: &str) -> std::path::PathBuf {
    let path = home.join("sessions").join(session).join("session.jsonl");
    assert!(path.is_file(), "{}", path.display());
    path
}

/// The daemon's resident memory in KiB.
fn rss_kib(daemon: &Daemon) -> u64 {
    super::support::memory_kib(daemon, "VmRSS")
}

/// Frames a second each flooding browser sends, and for how long.
const FLOOD_RATE: usize = 10_000;
const FLOOD_SECONDS: usize = 3;

/// Sends tiny frames at [`FLOOD_RATE`] a second, in batches every 10 ms.
/// Returns how many went out before the daemon closed the socket.
async fn flood<S>(sink: &mut S, frame: impl Fn(usize) -> String) -> usize
where
    S: futures_util::Sink<tokio_tungstenite::tungstenite::Message> + Unpin,
{
    use futures_util::SinkExt;
    let batch = FLOOD_RATE / 100;
    let mut ticks = tokio::time::interval(Duration::from_millis(10));
    let mut sent = 0;
    for _ in 0..FLOOD_SECONDS * 100 {
        ticks.tick().await;
        for _ in 0..batch {
            let message = tokio_tungstenite::tungstenite::Message::text(frame(sent));
            if sink.feed(message).await.is_err() {
                return sent;
            }
            sent += 1;
        }
        if sink.flush().await.is_err() {
            return sent;
        }
    }
    sent
}

#[tokio::test]
async fn browsers_flooding_tiny_frames_are_served_in_bounded_memory_while_others_work() {
    use futures_util::StreamExt;
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut worker, agent) = attached_agent(&daemon, &project, "busy").await;
    worker.call("warm", json!({"type": "prompt", "agent_id": agent, "message": "warm"})).await;
    worker.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let rss_before = rss_kib(&daemon);

    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    // One flooder reads every answer; the other never reads at all.
    let reading = connect_ws(&daemon, Some(&browser.ticket(&daemon).await), &daemon.base)
        .await
        .expect("upgrade");
    let (mut reading_sink, mut reading_stream) = reading.split();
    let deaf = connect_ws(&daemon, Some(&browser.ticket(&daemon).await), &daemon.base)
        .await
        .expect("upgrade");
    let (mut deaf_sink, _deaf_stream) = deaf.split();
    let expected = FLOOD_RATE * FLOOD_SECONDS;
    let answers = tokio::spawn(async move {
        let mut answered = 0usize;
        while answered < expected {
            let Some(Ok(message)) = reading_stream.next().await else { break };
            if message.to_text().is_ok_and(|text| text.contains("\"response\"")) {
                answered += 1;
            }
        }
        answered
    });
    let reader_flood = tokio::spawn(async move {
        let sent =
            flood(&mut reading_sink, |n| format!(r#"{{"id":"{n}","type":"agent.list"}}"#)).await;
        (sent, reading_sink)
    });
    // Not even JSON: each frame costs the daemon an error event.
    let deaf_flood = tokio::spawn(async move { flood(&mut deaf_sink, |_| "x".to_owned()).await });

    // Meanwhile a turn streams to the local client, every delta in order,
    // and the local socket answers.
    worker.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 200"})).await;
    let turn = worker.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let deltas = turn.iter().filter(|message| message["type"] == "message_delta").count();
    assert_eq!(deltas, 200);
    let listed = worker.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);

    let (sent, _reading_sink) = reader_flood.await.expect("flood");
    let deaf_sent = deaf_flood.await.expect("flood");
    let rss_during = rss_kib(&daemon);
    assert_eq!(sent, expected, "the reading flooder was never cut off");
    let answered = tokio::time::timeout(Duration::from_secs(30), answers)
        .await
        .expect("the daemon answers the backlog")
        .expect("reader");
    assert_eq!(answered, sent, "every request of a reading client answered");
    println!(
        "flood: {sent} + {deaf_sent} frames; daemon RSS {rss_before} KiB before, \
         {rss_during} KiB after"
    );
    // Bounded: the deaf client's unread errors are capped by its outbox.
    assert!(rss_during < rss_before + 64 * 1024, "{rss_before} -> {rss_during} KiB");
}
