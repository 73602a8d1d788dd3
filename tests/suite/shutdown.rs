//! A daemon told to stop by its service manager (SIGTERM) stops at once and
//! cleanly, whatever its agents are doing: mid-stream or waiting for a
//! permission, it exits 0 within a few seconds, leaves no agent process
//! behind, keeps each agent's session and questions for the next start, and
//! tells every client it is going the moment the stop begins (a WebSocket
//! close frame 1001, a last error line on the unix socket).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::live_texts;
use super::client::{Browser, Client, Ended};
use super::support::{Daemon, agent_pids, alive};

/// How long a SIGTERM'd daemon may take, at most. It takes well under a
/// second; this only keeps a loaded machine from failing the test, and stays
/// below the 10 s a service manager (docker stop) waits before SIGKILL.
const PROMPT_EXIT: Duration = Duration::from_secs(5);
/// How long after the SIGTERM a client may wait to learn the daemon is going.
const PROMPT_CLOSE: Duration = Duration::from_secs(2);

/// An agent on the demo model in `project`, attached interactively over the
/// unix socket, running `prompt` until `busy` matches one of its events.
async fn busy_agent(
    daemon: &Daemon,
    project: &TempDir,
    prompt: &str,
    busy: impl Fn(&Value) -> bool,
) -> (Client, String, Vec<u32>) {
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "busy").await;
    client.attach(&agent, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": prompt})).await;
    client.until_agent(&agent, busy).await;
    let pids = agent_pids(&marker);
    assert_eq!(pids.len(), 1, "one agent process: {pids:?}");
    (client, agent, pids)
}

/// Sends SIGTERM and waits for the daemon's exit; returns how long it took.
async fn sigterm(daemon: &mut Daemon) -> Duration {
    let started = Instant::now();
    daemon.send_signal("TERM");
    let status = tokio::time::timeout(Duration::from_secs(30), daemon.child.wait())
        .await
        .expect("the daemon exits after SIGTERM")
        .expect("wait for the daemon");
    let took = started.elapsed();
    assert!(status.success(), "exit status after SIGTERM: {status}");
    took
}

/// The agent as a restarted daemon on the same home shows it: listed,
/// stopped, and its transcript (the sync after an attach).
async fn restored(home: &TempDir, agent: &str) -> (Daemon, Client, Value) {
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().expect("agents");
    let info = agents.iter().find(|info| info["agent_id"] == agent).expect("the agent is listed");
    assert_eq!(info["runtime_state"], "stopped", "{info}");
    let sync = client.attach(agent, "interactive").await;
    (daemon, client, sync)
}

#[tokio::test]
async fn a_sigterm_mid_stream_stops_the_daemon_at_once_and_keeps_the_session() {
    let home = TempDir::new().expect("home");
    let project = TempDir::new().expect("project");
    let mut daemon = Daemon::start_in(home.path(), &[]).await;
    // 30 s of streaming: far longer than any grace.
    let (client, agent, pids) =
        busy_agent(&daemon, &project, "stream: 3000", |message| message["type"] == "message_delta")
            .await;
    let cursor = client.seen.last().and_then(|delta| delta["seq"].as_u64()).expect("a seq");

    let took = sigterm(&mut daemon).await;
    println!("SIGTERM mid-stream: the daemon exited after {took:?}");
    assert!(took < PROMPT_EXIT, "the daemon took {took:?} to stop");
    assert!(pids.iter().all(|&pid| !alive(pid)), "no agent process left: {pids:?}");

    let (daemon, _client, sync) = restored(&home, &agent).await;
    let texts = live_texts(&sync);
    assert_eq!(texts.first(), Some(&"stream: 3000"), "the prompt is kept: {sync}");
    let reply = texts.get(1).copied().unwrap_or_default();
    assert!(reply.starts_with("tick-1 "), "what was streamed is kept: {sync}");
    assert_eq!(sync["status"], "idle", "{sync}");
    // The journal was closed cleanly: a client that dropped at the signal
    // resumes from its cursor with the end of the interrupted turn.
    let mut resumed = Client::unix(&daemon.socket()).await;
    let response = resumed
        .call(
            "resume",
            json!({"type": "agent.attach", "agent_id": agent, "role": "observer", "after_seq": cursor}),
        )
        .await;
    assert_eq!(response["data"]["resumed"], true, "no reset after a clean stop: {response}");
    resumed.until_agent(&agent, |message| message["type"] == "turn_end").await;
}

#[tokio::test]
async fn a_sigterm_while_a_permission_is_asked_stops_at_once_and_keeps_the_question() {
    let home = TempDir::new().expect("home");
    let project = TempDir::new().expect("project");
    let mut daemon = Daemon::start_in(home.path(), &[]).await;
    let (client, agent, pids) = busy_agent(&daemon, &project, "run: echo never", |message| {
        message["type"] == "permission_request"
    })
    .await;
    let asked = client.seen.last().cloned().expect("the permission request");

    let took = sigterm(&mut daemon).await;
    println!("SIGTERM while a permission is asked: the daemon exited after {took:?}");
    assert!(took < PROMPT_EXIT, "the daemon took {took:?} to stop");
    assert!(pids.iter().all(|&pid| !alive(pid)), "no agent process left: {pids:?}");

    let (_daemon, mut client, sync) = restored(&home, &agent).await;
    // The transcript says what was asked and that the turn ended there.
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["content"][0]["text"], "run: echo never", "{sync}");
    assert_eq!(messages[1]["content"][0]["name"], "bash", "{sync}");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{sync}");
    assert_eq!(result["content"]["message"], "aborted while waiting for permission", "{sync}");
    assert_eq!(sync["pending_requests"], json!([]), "the process that asked is gone");
    // The question is in the agent's history: what was asked, and that the
    // agent withdrew it as it stopped on the daemon's SIGTERM.
    let history = client.call("h", json!({"type": "approval.list", "agent_id": agent})).await;
    let approvals = history["data"]["approvals"].as_array().expect("approvals");
    let question = approvals
        .iter()
        .find(|record| record["request_id"] == asked["request_id"])
        .unwrap_or_else(|| panic!("the question is kept: {history}"));
    assert_eq!(question["tool_name"], "bash", "{question}");
    assert_eq!(question["outcome"], "deny", "{question}");
    assert_eq!(question["answered_by"]["source"], "abort", "{question}");
}

#[tokio::test]
async fn every_client_learns_at_once_that_the_daemon_is_going() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut local, agent, _) =
        busy_agent(&daemon, &project, "stream: 3000", |message| message["type"] == "message_delta")
            .await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    web.attach(&agent, "interactive").await;
    web.until_agent(&agent, |message| message["type"] == "message_delta").await;

    let started = Instant::now();
    daemon.send_signal("TERM");
    let ended = web.ended().await;
    let web_closed = started.elapsed();
    let Ended::Closed(code, reason) = ended else {
        panic!("the page got no close frame: {ended:?}");
    };
    local.ended().await;
    let local_closed = started.elapsed();
    let last = local.seen.last().cloned().unwrap_or_default();
    println!(
        "SIGTERM: WebSocket closed ({code} {reason:?}) after {web_closed:?}, unix socket after {local_closed:?}"
    );
    assert_eq!(code, 1001, "going away: {reason}");
    assert!(reason.contains("shutting down"), "{reason}");
    assert!(web_closed < PROMPT_CLOSE, "the close frame came {web_closed:?} after SIGTERM");
    assert!(local_closed < PROMPT_CLOSE, "the unix client ended {local_closed:?} after SIGTERM");
    assert_eq!(last["type"], "error", "the unix client's last line says why: {last}");
    assert_eq!(last["fatal"], true, "{last}");
    assert!(last["message"].as_str().is_some_and(|message| message.contains("shutting down")));
    let status = tokio::time::timeout(Duration::from_secs(30), daemon.child.wait())
        .await
        .expect("the daemon exits")
        .expect("wait");
    assert!(status.success(), "{status}");
}
