//! Supervision that leaves nothing behind and backpressure that cannot leak
//! (CONTRACT.md "Process lifetime", revised 2026-12-01): graceful and forced
//! kills answer promptly, nothing an agent's `bash` starts outlives the agent
//! however it ends, a client that stops reading is let go with its socket,
//! local administration keeps working when browsers hold every slot, and a
//! browser cannot stop the daemon.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::live_texts;
use super::client::{Browser, Client, connect_ws};
use super::lifecycle::sigkill_agent;
use super::support::{Daemon, agent_pids, running, shard, wait_until};

/// A number no other test's `sleep` uses, so `pgrep` finds only ours.
fn unique_seconds() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let salt = u64::from(std::process::id() % 1000) * 1000;
    7_000_000 + salt + NEXT.fetch_add(10, Ordering::Relaxed)
}

/// A command that leaves three processes behind: one in its own process
/// group, one in a new session (`setsid`), one `nohup`ed, and keeps a fourth
/// running in the foreground.
fn escaping_command(base: u64) -> String {
    format!(
        "run: sleep {a} & setsid sleep {b} & nohup sleep {c} >/dev/null 2>&1 & sleep {d}",
        a = base,
        b = base + 1,
        c = base + 2,
        d = base + 3
    )
}

fn pattern(base: u64) -> String {
    format!("sleep {}", base / 10)
}

/// Starts the escaping command on an attached agent and waits until all of
/// its processes run.
async fn start_escaping_command(client: &mut Client, agent: &str, base: u64) {
    client
        .call(
            "run",
            json!({"type": "prompt", "agent_id": agent, "message": escaping_command(base)}),
        )
        .await;
    let asked = client.permission_request(agent).await;
    let answer = json!({"type": "permission_response", "agent_id": agent,
                        "request_id": asked["request_id"], "decision": "allow"});
    client.call("allow", answer).await;
    let expected = 4;
    wait_until("every process of the command to start", || {
        running(&pattern(base))
            .iter()
            .filter(|line| line.split_whitespace().nth(1) == Some("sleep"))
            .count()
            >= expected
    })
    .await;
}

async fn agent_with_client(daemon: &Daemon, project: &TempDir) -> (Client, String, String) {
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "supervised").await;
    client.attach(&agent, "interactive").await;
    (client, agent, marker)
}

#[tokio::test]
async fn a_graceful_kill_of_an_idle_agent_answers_at_once() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "hello"})).await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let started = Instant::now();
    let killed = client.call("k", json!({"type": "agent.kill", "agent_id": agent})).await;
    let took = started.elapsed();
    assert_eq!(killed["success"], true, "{killed}");
    assert!(took < Duration::from_secs(2), "a graceful kill of an idle agent took {took:?}");
    assert!(agent_pids(&marker).is_empty(), "gone when kill answers");
    // Its log was flushed: the history is there on restore.
    let sync = client.attach(&agent, "interactive").await;
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{sync}");
}

#[tokio::test]
async fn nothing_bash_started_survives_a_graceful_kill() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, _) = agent_with_client(&daemon, &project).await;
    let base = unique_seconds();
    start_escaping_command(&mut client, &agent, base).await;
    let killed = client.call("k", json!({"type": "agent.kill", "agent_id": agent})).await;
    assert_eq!(killed["success"], true, "{killed}");
    wait_until("every process of the command to die", || running(&pattern(base)).is_empty()).await;
}

#[tokio::test]
async fn nothing_bash_started_survives_a_forced_kill() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    let base = unique_seconds();
    start_escaping_command(&mut client, &agent, base).await;
    let killed =
        client.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    assert_eq!(killed["success"], true, "{killed}");
    assert!(agent_pids(&marker).is_empty(), "the agent is gone when kill answers");
    assert_eq!(running(&pattern(base)), Vec::<String>::new(), "gone when kill answers");
}

#[tokio::test]
async fn nothing_bash_left_in_the_background_survives_the_agent_stopping() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    let base = unique_seconds();
    // This time the foreground part ends, and with it its process group:
    // only what left the group (a new session) is still running.
    let command = format!("run: setsid sleep {base} & sleep 0.5; echo left");
    client.call("run", json!({"type": "prompt", "agent_id": agent, "message": command})).await;
    let asked = client.permission_request(&agent).await;
    client
        .call(
            "allow",
            json!({"type": "permission_response", "agent_id": agent,
                              "request_id": asked["request_id"], "decision": "allow"}),
        )
        .await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    // It outlives its command (the agent is a subreaper) ...
    tokio::time::sleep(Duration::from_millis(300)).await;
    let escaped = running(&pattern(base));
    assert_eq!(escaped.len(), 1, "the escaped process outlives its command: {escaped:?}");
    // ... but not the agent's exit (terminate: stdin closes, the agent exits).
    let terminated = client.call("t", json!({"type": "agent.terminate", "agent_id": agent})).await;
    assert_eq!(terminated["data"]["deferred"], false, "{terminated}");
    wait_until("the agent to exit", || agent_pids(&marker).is_empty()).await;
    wait_until("the escaped process to die", || running(&pattern(base)).is_empty()).await;
}

#[tokio::test]
async fn nothing_bash_started_survives_a_sigkilled_daemon() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    let base = unique_seconds();
    start_escaping_command(&mut client, &agent, base).await;
    daemon.signal("KILL").await;
    wait_until("the agent to die with the daemon", || agent_pids(&marker).is_empty()).await;
    wait_until("every process of the command to die", || running(&pattern(base)).is_empty()).await;
}

/// The daemon's open file descriptors.
fn open_fds(daemon: &Daemon) -> usize {
    let pid = daemon.child.id().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd table").count()
}

#[tokio::test]
async fn clients_that_stop_reading_are_closed_and_released_while_a_reader_gets_everything() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut reader, agent, _) = agent_with_client(&daemon, &project).await;
    // A first turn opens what an awake agent holds (its event journal).
    reader.call("p0", json!({"type": "prompt", "agent_id": agent, "message": "hello"})).await;
    reader.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let baseline = open_fds(&daemon);

    // A unix client and a browser that attach, then never read again.
    let (stop_unix, gate) = tokio::sync::watch::channel(true);
    let mut stalled_unix = Client::unix_paced(&daemon.socket(), Some(gate)).await;
    stalled_unix.attach(&agent, "observer").await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let ticket = browser.ticket(&daemon).await;
    let mut stalled_ws = connect_ws(&daemon, Some(&ticket), &daemon.base).await.expect("upgrade");
    {
        use futures_util::{SinkExt, StreamExt};
        let attach =
            json!({"id": "a", "type": "agent.attach", "agent_id": agent, "role": "observer"});
        stalled_ws
            .send(tokio_tungstenite::tungstenite::Message::text(attach.to_string()))
            .await
            .expect("send attach");
        // Read up to the sync, then never again.
        loop {
            let message = stalled_ws.next().await.expect("a message").expect("ok");
            if message.to_text().is_ok_and(|text| text.contains("\"sync\"")) {
                break;
            }
        }
    }
    stop_unix.send(false).expect("stall the unix client");
    assert!(open_fds(&daemon) >= baseline + 2, "two more sockets");

    // Far more than any socket buffer plus the outbox budget, at a pace a
    // reading client keeps up with on a loaded machine: a reader that falls
    // more than the budget behind is dropped too, by design (PROTOCOL P2), and
    // an unpaced burst outruns a JSON-parsing test client under CI's load.
    let deltas = 100_000;
    let rate = 30_000;
    reader
        .call(
            "p",
            json!({"type": "prompt", "agent_id": agent, "message": format!("pace: {deltas} {rate}")}),
        )
        .await;
    let turn = reader.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let received = turn.iter().filter(|message| message["type"] == "message_delta").count();
    assert_eq!(received, deltas, "the reading client got every delta");
    let complete =
        turn.iter().find(|message| message["type"] == "message_complete").expect("complete");
    let text = complete["message"]["content"][0]["text"].as_str().unwrap_or("");
    let streamed: String = turn
        .iter()
        .filter(|message| message["type"] == "message_delta")
        .filter_map(|message| message["text_delta"].as_str())
        .collect();
    assert_eq!(streamed, text, "in order, none lost");

    // Both stalled sockets are closed by the daemon and their descriptors
    // released, though neither client ever reads again.
    wait_until("the daemon to release both stalled sockets", || open_fds(&daemon) <= baseline)
        .await;
    drop(stalled_ws);
    drop(stalled_unix);
    // The daemon still serves.
    let listed = reader.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);
}

#[tokio::test]
async fn local_administration_works_when_browsers_hold_every_slot() {
    let daemon = Daemon::start(&["--max-connections", "2"]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let _first = browser.connect(&daemon).await;
    let _second = browser.connect(&daemon).await;
    let ticket = browser.ticket(&daemon).await;
    let refused = connect_ws(&daemon, Some(&ticket), &daemon.base).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503, "the cap holds for browsers");
        }
        other => panic!("a third browser socket must be refused: {:?}", other.map(|_| ())),
    }
    let output = shard(&daemon.home, daemon.cwd.path())
        .args(["sessions", "list"])
        .output()
        .await
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let listing = String::from_utf8_lossy(&output.stdout);
    assert!(listing.contains("2 open"), "{listing}");
    let output = shard(&daemon.home, daemon.cwd.path()).arg("enroll").output().await.expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test]
async fn a_browser_cannot_shut_the_daemon_down() {
    let mut daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    for force in [false, true] {
        let refused = web.call("x", json!({"type": "daemon.shutdown", "force": force})).await;
        assert_eq!(refused["success"], false, "{refused}");
        assert_eq!(refused["error"]["code"], "PERMISSION_DENIED", "{refused}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(daemon.child.try_wait().expect("status").is_none(), "the daemon keeps running");
    let listed = web.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);
}

/// Reads until the response to `id`; panics if it does not come.
async fn response_to(client: &mut Client, id: &str) -> Value {
    client
        .until(|message| message["type"] == "response" && message["id"] == id)
        .await
        .pop()
        .expect("response")
}

#[tokio::test]
async fn an_abort_the_instant_streaming_starts_is_answered_and_the_agent_settles() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, _) = agent_with_client(&daemon, &project).await;
    for round in 0..10 {
        let prompt = format!("p{round}");
        client.send(
            json!({"id": prompt, "type": "prompt", "agent_id": agent, "message": "stream: 3000"}),
        );
        client
            .until_agent(&agent, |message| {
                message["type"] == "status" && message["status"] == "streaming"
            })
            .await;
        let abort = format!("a{round}");
        client.send(json!({"id": abort, "type": "abort", "agent_id": agent}));
        let before = client.seen.len();
        let answered = response_to(&mut client, &abort).await;
        assert_eq!(answered["success"], true, "{answered}");
        // The agent winds the turn down, settles idle, then answers.
        let settled = client.seen[before..].iter().any(|message| {
            message["type"] == "status"
                && message["status"] == "idle"
                && message["agent_id"] == agent
        });
        assert!(settled, "idle before the abort's answer: {:#?}", &client.seen[before..]);
    }
    let status = client.call("s", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(status["data"]["agents"][0]["status"], "idle", "{status}");
}

#[tokio::test]
async fn a_signal_stops_a_draining_daemon_without_waiting_for_turns() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 3000"})).await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    // `daemon.shutdown` lets the 30 s turn run on (for up to 10 s) ...
    let response = client.call("x", json!({"type": "daemon.shutdown"})).await;
    assert_eq!(response["success"], true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(daemon.child.try_wait().expect("status").is_none(), "draining: still finishing");
    assert_eq!(agent_pids(&marker).len(), 1, "the turn still runs");
    // ... a signal stops everything now; a second one would kill.
    let started = Instant::now();
    let status = daemon.signal("TERM").await;
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < Duration::from_secs(5), "stopped, not after the drain");
    assert!(agent_pids(&marker).is_empty(), "no agent left");
}

#[tokio::test]
async fn a_second_signal_kills_at_once() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 3000"})).await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    daemon.send_signal("TERM");
    let status = daemon.signal("TERM").await;
    assert!(status.success(), "{status}");
    assert!(agent_pids(&marker).is_empty(), "no agent left");
}

#[tokio::test]
async fn daemon_stats_count_what_the_daemon_holds_and_are_local_only() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut local, agent, _) = agent_with_client(&daemon, &project).await;
    let stats = |response: &Value| response["data"].clone();
    let before = stats(&local.call("s1", json!({"type": "daemon.stats"})).await);
    assert_eq!(before["agents"], 1, "{before}");
    assert_eq!(before["running_agents"], 1, "{before}");
    assert!(before["tasks"].as_u64().expect("tasks") > 0, "{before}");
    let connections = before["connections"].as_u64().expect("connections");

    // A browser connects: one more connection. It may not ask.
    let mut web = Browser::enroll(&daemon, &daemon.enroll_code()).await.connect(&daemon).await;
    let refused = web.call("s", json!({"type": "daemon.stats"})).await;
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED");
    let with_web = stats(&local.call("s2", json!({"type": "daemon.stats"})).await);
    assert_eq!(with_web["connections"].as_u64(), Some(connections + 1), "{with_web}");

    // The agent killed: still listed, no longer running.
    local.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    let killed = stats(&local.call("s3", json!({"type": "daemon.stats"})).await);
    assert_eq!(killed["agents"], 1, "{killed}");
    assert_eq!(killed["running_agents"], 0, "{killed}");
}

#[tokio::test]
async fn an_agent_with_nothing_to_do_holds_no_task_and_wakes_when_asked() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut local = Client::unix(&daemon.socket()).await;
    let stats = |response: Value| response["data"].clone();
    // Asked what it holds once its agents are dormant (and their tasks
    // gone), until it says `tasks` (if given; else until its count has held
    // for a second: a killed process's watchers end a while after it) or
    // 15 s have passed.
    async fn settled(local: &mut Client, tasks: Option<&Value>) -> Value {
        let mut now = Value::Null;
        let mut steady = 0;
        for _ in 0..300 {
            let before = now["tasks"].clone();
            now = local.call("s", json!({"type": "daemon.stats"})).await["data"].clone();
            steady = if now["tasks"] == before { steady + 1 } else { 0 };
            let done = match tasks {
                Some(tasks) => &now["tasks"] == tasks,
                None => steady >= 20,
            };
            if now["awake_agents"] == 0 && done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        now
    }
    let cycle = async |local: &mut Client, agent: &str| {
        local.attach(agent, "interactive").await;
        local.call("p", json!({"type": "prompt", "agent_id": agent, "message": "hello"})).await;
        local.until_agent(agent, |message| message["type"] == "turn_end").await;
    };
    let stop = async |local: &mut Client, agent: &str| {
        local.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
        local.call("d", json!({"type": "agent.detach", "agent_id": agent})).await;
    };
    // A first agent's whole life, so that whatever the daemon starts once
    // (its server's own tasks, under a loaded machine only after it said it
    // listens) is in the baseline.
    let first = local.create(project.path(), "zero").await;
    cycle(&mut local, &first).await;
    stop(&mut local, &first).await;
    let idle = settled(&mut local, None).await;
    let mut agents = Vec::new();
    for name in ["one", "two", "three"] {
        let agent = local.create(project.path(), name).await;
        cycle(&mut local, &agent).await;
        agents.push(agent);
    }
    let busy = stats(local.call("s1", json!({"type": "daemon.stats"})).await);
    assert_eq!(busy["awake_agents"], 3, "{busy}");

    // Stopped and left alone, each goes dormant and gives its tasks back.
    for agent in &agents {
        stop(&mut local, agent).await;
    }
    let dormant = settled(&mut local, Some(&idle["tasks"])).await;
    assert_eq!(dormant["awake_agents"], 0, "{dormant}");
    assert_eq!(dormant["agents"], 4, "still listed: {dormant}");
    assert_eq!(dormant["tasks"], idle["tasks"], "every task given back: {idle} {dormant}");
    let listed = local.call("l", json!({"type": "agent.list"})).await;
    let runtime: Vec<&Value> = listed["data"]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| &a["runtime_state"])
        .collect();
    assert!(runtime.iter().all(|state| *state == "stopped"), "{listed}");

    // Asked again, it wakes with everything it had: its transcript, its
    // usage, the count of its generations.
    let status = local.call("st", json!({"type": "agent.status", "agent_id": agents[1]})).await;
    assert_eq!(status["data"]["agents"][0]["name"], "two", "{status}");
    let sync = local.attach(&agents[1], "interactive").await;
    let texts = live_texts(&sync);
    assert_eq!(texts, ["hello", "You said: hello"]);
    local.call("p2", json!({"type": "prompt", "agent_id": agents[1], "message": "again"})).await;
    local.until_agent(&agents[1], |message| message["type"] == "turn_end").await;
    let woken = stats(local.call("s3", json!({"type": "daemon.stats"})).await);
    assert_eq!(woken["awake_agents"], 1, "{woken}");
    assert_eq!(woken["running_agents"], 1, "{woken}");
}

#[tokio::test]
async fn the_daemon_raises_its_open_files_limit_to_fit_its_connections() {
    use tokio::io::AsyncBufReadExt;
    let home = TempDir::new().expect("home");
    // A soft limit of 256, as some systems start services with; the hard
    // limit stays what it is.
    let mut child = tokio::process::Command::new("prlimit")
        .args(["--nofile=256:", "--", env!("CARGO_BIN_EXE_shard"), "daemon", "--port", "0"])
        .env("SHARD_HOME", home.path())
        .current_dir(home.path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("prlimit");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    loop {
        let line = lines.next_line().await.expect("read").expect("the daemon started");
        if line.starts_with("listening on ") {
            break;
        }
    }
    let pid = child.id().expect("pid");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits.lines().find(|line| line.starts_with("Max open files")).expect("row");
    let fields: Vec<u64> = line.split_whitespace().filter_map(|field| field.parse().ok()).collect();
    let (soft, hard) = (fields[0], fields[1]);
    // The default 1,024 browser connections and room for agents and files,
    // as far as the hard limit allows.
    assert_eq!(soft, hard.min(2048), "{line}");
    let _ = child.kill().await;
}

#[tokio::test]
async fn an_agent_killed_from_outside_leaves_no_process_of_its_tools_behind() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let (mut client, agent, marker) = agent_with_client(&daemon, &project).await;
    let base = unique_seconds();
    start_escaping_command(&mut client, &agent, base).await;
    // Not `agent.kill`: the OOM killer, or a stray `kill -9`.
    sigkill_agent(&mut client, &agent, &marker).await;
    wait_until("every process the agent's command started to be gone", || {
        running(&pattern(base)).is_empty()
    })
    .await;
    // The daemon still runs its agents: a restored one works.
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "still here?"})).await;
    let turn = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert!(turn.iter().any(|message| message["type"] == "message_complete"), "{turn:?}");
}
