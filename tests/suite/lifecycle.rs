//! Agent processes come and go; agents, sessions and browsers stay: crash and
//! restore, idle reaping, terminate and kill, daemon restarts (graceful and
//! SIGKILL) with no orphan process, the exclusive home lock and the socket.

use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use super::agent_support::live_texts;
use super::client::{Browser, Client};
use super::support::{Daemon, agent_pids, shard, wait_until};

/// SIGKILLs the one agent process working in `marker`, as the OOM killer
/// would, and returns the `agent_exited` the daemon reports (`failed`).
pub async fn sigkill_agent(client: &mut Client, agent: &str, marker: &str) -> serde_json::Value {
    let pids = agent_pids(marker);
    assert_eq!(pids.len(), 1, "one process per agent: {pids:?}");
    std::process::Command::new("kill")
        .args(["-KILL", &pids[0].to_string()])
        .status()
        .expect("kill");
    let read = client.until(|message| message["type"] == "agent_exited").await;
    let exited = read.last().expect("exited").clone();
    assert_eq!(exited["agent_id"], agent);
    assert_eq!(exited["runtime_state"], "failed", "{exited}");
    exited
}

#[tokio::test]
async fn a_crashed_agent_is_reported_and_restored_with_its_session() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "fragile").await;
    client.attach(&agent, "interactive").await;
    client.call("p1", json!({"type": "prompt", "agent_id": agent, "message": "remember me"})).await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;

    let exited = sigkill_agent(&mut client, &agent, &marker).await;
    assert!(exited["reason"].as_str().unwrap_or("").contains("signal 9"), "{exited}");
    let status = client.call("s", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(status["data"]["agents"][0]["runtime_state"], "failed");

    // New work restores it: a fresh sync with the next epoch and the history.
    let before = client.seen.len();
    client
        .call("p2", json!({"type": "prompt", "agent_id": agent, "message": "still there?"}))
        .await;
    let read = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    // The fresh sync comes as the new process is ready, before the response.
    let sync = client.seen[before..]
        .iter()
        .find(|message| message["type"] == "sync")
        .expect("a fresh sync")
        .clone();
    assert_eq!(sync["runtime_epoch"], 1);
    let texts = live_texts(&sync);
    assert_eq!(texts[..2], ["remember me", "You said: remember me"]);
    let text: String = read
        .iter()
        .filter(|m| m["type"] == "message_delta")
        .filter_map(|m| m["text_delta"].as_str())
        .collect();
    assert_eq!(text, "You said: still there?");
    assert_eq!(agent_pids(&marker).len(), 1);
}

#[tokio::test]
async fn idle_runtimes_are_reaped_and_restored_on_attach() {
    let daemon = Daemon::start(&["--idle-runtime-timeout", "1"]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "sleepy").await;
    let read = client
        .until(|message| {
            message["type"] == "agent_status_changed" && message["runtime_state"] == "stopped"
        })
        .await;
    assert_eq!(read.last().expect("event")["agent_id"], agent.as_str());
    wait_until("the process to exit", || agent_pids(&marker).is_empty()).await;
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["runtime_state"], "stopped", "still listed");
    // Listing modes does not wake it.
    let sync = client.attach(&agent, "interactive").await;
    assert_eq!(sync["runtime_epoch"], 1, "attach restored a new generation");
    assert_eq!(agent_pids(&marker).len(), 1);
}

#[tokio::test]
async fn terminate_waits_for_active_work_and_kill_does_not() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "worker").await;
    client.attach(&agent, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 40"})).await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    let terminated = client.call("t", json!({"type": "agent.terminate", "agent_id": agent})).await;
    assert_eq!(terminated["data"]["deferred"], true);
    let read = client
        .until(|message| {
            message["type"] == "agent_status_changed" && message["runtime_state"] == "stopped"
        })
        .await;
    assert!(read.iter().any(|message| message["type"] == "turn_end"), "the turn finished first");
    let idle = client.call("t2", json!({"type": "agent.terminate", "agent_id": agent})).await;
    assert_eq!(idle["data"]["deferred"], false);

    client.call("p2", json!({"type": "prompt", "agent_id": agent, "message": "stream: 400"})).await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    let killed =
        client.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    assert_eq!(killed["success"], true);
    assert!(agent_pids(&marker).is_empty(), "gone when kill answers");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["runtime_state"], "stopped");
}

#[tokio::test]
async fn a_sigkilled_daemon_leaves_no_agent_behind_and_restarts_whole() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut client = browser.connect(&daemon).await;
    let agent = client.create(project.path(), "durable").await;
    client.attach(&agent, "interactive").await;
    client
        .call("p", json!({"type": "prompt", "agent_id": agent, "message": "before the crash"}))
        .await;
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert_eq!(agent_pids(&marker).len(), 1);

    daemon.signal("KILL").await;
    wait_until("the agent to die with the daemon", || agent_pids(&marker).is_empty()).await;

    // Same home: the stale socket is reclaimed, agents and browsers remain.
    let home = daemon.home.clone();
    let restarted = Daemon::start_in(&home, &[]).await;
    let mut client = Client::unix(&restarted.socket()).await;
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["agent_id"], agent.as_str());
    assert_eq!(agents[0]["runtime_state"], "stopped");
    let sync = client.attach(&agent, "interactive").await;
    let texts = live_texts(&sync);
    assert_eq!(texts, ["before the crash", "You said: before the crash"]);
    // The browser's session survived: a new ticket, a new socket.
    let response = browser.bootstrap(&restarted).await;
    assert_eq!(response.status(), 200, "the enrolled browser's session survived");
    drop(daemon);
}

#[tokio::test]
async fn an_enrolled_browser_survives_a_restart_on_the_same_port() {
    let home = TempDir::new().expect("home");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port().to_string()
    };
    let mut daemon = Daemon::start_in(home.path(), &["--port", &port]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    daemon.signal("KILL").await;
    let restarted = Daemon::start_in(home.path(), &["--port", &port]).await;
    let mut web = browser.connect(&restarted).await;
    let listed = web.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);
}

#[tokio::test]
async fn port_zero_takes_back_the_port_its_home_last_listened_on() {
    // The page keeps its browser secret per origin, port included: a daemon
    // that came back on another port would leave every browser un-enrolled.
    let home = TempDir::new().expect("home");
    let daemon = Daemon::start_in(home.path(), &["--port", "0"]).await;
    let first = daemon.base.clone();
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    daemon.terminate().await;
    let daemon = Daemon::start_in(home.path(), &["--port", "0"]).await;
    assert_eq!(daemon.base, first, "the same origin as before");
    let mut web = browser.connect(&daemon).await;
    assert_eq!(web.call("l", json!({"type": "agent.list"})).await["success"], true);
    drop(web);
    daemon.terminate().await;

    // Taken meanwhile: `--port 0` still picks a free port, and it works.
    let squatter = std::net::TcpListener::bind(first.trim_start_matches("http://")).expect("take");
    let daemon = Daemon::start_in(home.path(), &["--port", "0"]).await;
    assert_ne!(daemon.base, first, "another port, since that one is taken");
    let other = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = other.connect(&daemon).await;
    assert_eq!(web.call("l", json!({"type": "agent.list"})).await["success"], true);
    drop(web);
    let second = daemon.base.clone();
    daemon.terminate().await;
    // The home now remembers the port it last listened on.
    let daemon = Daemon::start_in(home.path(), &["--port", "0"]).await;
    assert_eq!(daemon.base, second);
    drop(squatter);
}

#[tokio::test]
async fn daemon_shutdown_lets_the_turn_finish_and_stops_every_agent() {
    let mut daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "finisher").await;
    client.attach(&agent, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": "stream: 30"})).await;
    client.until_agent(&agent, |message| message["type"] == "message_delta").await;
    let response = client.call("x", json!({"type": "daemon.shutdown"})).await;
    assert_eq!(response["success"], true);
    let read = client.until(|message| message["type"] == "turn_end").await;
    assert!(read.iter().any(|message| message["type"] == "message_complete"), "the turn completed");
    let status = tokio::time::timeout(Duration::from_secs(20), daemon.child.wait())
        .await
        .expect("exits")
        .expect("status");
    assert!(status.success(), "{status}");
    assert!(agent_pids(&marker).is_empty(), "no agent left");
    assert!(!daemon.socket().exists(), "socket removed");
}

#[tokio::test]
async fn one_daemon_per_home_and_foreign_socket_paths_are_left_alone() {
    let daemon = Daemon::start(&[]).await;
    let second = shard(&daemon.home, daemon.cwd.path())
        .args(["daemon", "--port", "0"])
        .output()
        .await
        .expect("run");
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    // A regular file where the socket goes is refused and kept.
    let home = TempDir::new().expect("home");
    std::fs::write(home.path().join("daemon.sock"), "not a socket").expect("write");
    let refused = shard(home.path(), home.path())
        .args(["daemon", "--port", "0"])
        .output()
        .await
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a socket"));
    assert_eq!(
        std::fs::read_to_string(home.path().join("daemon.sock")).expect("kept"),
        "not a socket"
    );
}

#[tokio::test]
async fn the_home_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let home = TempDir::new().expect("home");
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
    };
    assert_eq!(mode(home.path()), 0o700);
    assert_eq!(mode(&daemon.socket()), 0o600);
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let _ = browser;
    assert_eq!(mode(&home.path().join("security.json")), 0o600);

    let link_target = TempDir::new().expect("target");
    let link = link_target.path().join("link");
    std::os::unix::fs::symlink(home.path(), &link).expect("symlink");
    let refused = shard(&link, link_target.path())
        .args(["daemon", "--port", "0"])
        .output()
        .await
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("symlink"));
}

#[tokio::test]
async fn shard_enroll_asks_the_running_daemon() {
    let mut daemon = Daemon::start(&[]).await;
    let output = shard(&daemon.home, daemon.cwd.path()).arg("enroll").output().await.expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let url = line.strip_prefix("enroll: ").expect("an enroll line");
    assert!(url.starts_with(&format!("{}/#enroll=", daemon.base)));
    let printed = tokio::time::timeout(Duration::from_secs(5), daemon.stdout.recv())
        .await
        .expect("printed")
        .expect("line");
    assert_eq!(printed, line, "the daemon prints the same line");
    let code = url.split("#enroll=").nth(1).expect("code");
    assert!(code.len() >= 22);
    Browser::enroll(&daemon, code).await;
    // Without a daemon it says so.
    let home = TempDir::new().expect("home");
    let output = shard(home.path(), home.path()).arg("enroll").output().await.expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("no daemon"));
}

#[tokio::test]
async fn a_failed_start_keeps_the_agent_for_a_retry() {
    let daemon = Daemon::start(&[]).await;
    let parent = TempDir::new().expect("parent");
    let project = parent.path().join("project");
    std::fs::create_dir(&project).expect("mkdir");
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(&project, "homeless").await;
    client.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    std::fs::remove_dir(&project).expect("rmdir");
    let failed = client.call("a", json!({"type": "agent.attach", "agent_id": agent})).await;
    assert_eq!(failed["error"]["code"], "RUNTIME_START_FAILED", "{failed}");
    let message = failed["error"]["message"].as_str().expect("message");
    assert!(message.contains(project.to_str().expect("utf-8")), "names the directory: {message}");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["agent_id"], agent.as_str(), "identity kept");
    std::fs::create_dir(&project).expect("mkdir again");
    let sync = client.attach(&agent, "interactive").await;
    assert_eq!(sync["status"], "idle", "the retry works");
}

#[tokio::test]
async fn a_config_broken_while_the_daemon_runs_is_named_when_an_agent_starts() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "misconfigured").await;
    client.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    std::fs::write(daemon.home.join("config.toml"), "[models\n").expect("config");
    let failed = client.call("a", json!({"type": "agent.attach", "agent_id": agent})).await;
    assert_eq!(failed["error"]["code"], "RUNTIME_START_FAILED", "{failed}");
    let message = failed["error"]["message"].as_str().expect("message");
    assert!(message.contains("config.toml: TOML parse error at line 1"), "{message}");
    std::fs::remove_file(daemon.home.join("config.toml")).expect("mended");
    let sync = client.attach(&agent, "interactive").await;
    assert_eq!(sync["status"], "idle", "mended, it starts");
}

#[tokio::test]
async fn a_corrupt_security_store_stops_the_daemon_and_is_never_overwritten() {
    use std::os::unix::fs::PermissionsExt;
    let home = TempDir::new().expect("home");
    let home = home.path().join("home");
    std::fs::create_dir(&home).expect("dir");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let store = home.join("security.json");
    let torn = br#"{"version": 1, "principals": [], "sessions": [{"session_id": "sess"#;
    std::fs::write(&store, torn).expect("store");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let cwd = TempDir::new().expect("cwd");
    let run = super::support::shard(&home, cwd.path()).args(["daemon", "--port", "0"]).output();
    let output =
        tokio::time::timeout(Duration::from_secs(20), run).await.expect("exits").expect("run");
    assert!(!output.status.success(), "a daemon started on a corrupt store");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("security.json") && stderr.contains("not a valid security store"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&store).expect("store"), torn, "never overwritten");
}

#[tokio::test]
async fn only_the_built_in_models_are_listed_as_built_in() {
    let home = TempDir::new().expect("home");
    // A configured model whose id merely starts like the built-in one's.
    std::fs::write(
        home.path().join("config.toml"),
        "[[models]]\nid = \"demo-remote\"\nprovider = \"openai\"\nmodel = \"some-model\"\n\
         base_url = \"http://127.0.0.1:9\"\n",
    )
    .expect("config");
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "modelled").await;
    client.attach(&agent, "interactive").await;
    for (model, provider) in
        [("demo", "builtin"), ("demo-remote", "configured"), ("demo-think", "builtin")]
    {
        let set =
            client.call("m", json!({"type": "set_model", "agent_id": agent, "model": model})).await;
        assert_eq!(set["success"], true, "{set}");
        let mut listed = json!(null);
        for _ in 0..100 {
            listed = client.call("l", json!({"type": "agent.list"})).await;
            if listed["data"]["agents"][0]["model"] == model {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let info = &listed["data"]["agents"][0];
        assert_eq!(
            (info["model"].as_str(), info["provider"].as_str()),
            (Some(model), Some(provider)),
            "{info}"
        );
    }
}
