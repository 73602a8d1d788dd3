//! Other machines' daemons (CONTRACT.md, "`shard acp` and nodes";
//! docs/NODES.md): `shard bridge`, the byte stream a hub reaches a node
//! through.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tempfile::TempDir;

use super::client::Client;
use super::support::{Daemon, shard};

/// `shard bridge` for `daemon`, its stdio piped.
fn bridge(daemon: &Daemon) -> tokio::process::Child {
    shard(&daemon.home, daemon.cwd.path())
        .arg("bridge")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shard bridge")
}

#[tokio::test]
async fn shard_bridge_is_a_local_client_of_the_daemon_on_its_stdio() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().unwrap();
    let mut child = bridge(&daemon);
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    // The daemon greets it as it greets a client on its socket (`unix`).
    let mut client = Client::lines(stdout, stdin, None).await;
    let agent = client.create(project.path(), "through the bridge").await;
    client.attach(&agent, "interactive").await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "hello"});
    assert_eq!(client.call("p", prompt).await["success"], true);
    let turn = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    let said: String = turn
        .iter()
        .filter(|event| event["type"] == "message_delta")
        .filter_map(|event| event["text_delta"].as_str())
        .collect();
    assert!(!said.is_empty(), "the reply streamed through the bridge: {turn:?}");
    assert!(turn.iter().all(|event| event["seq"].is_u64() || event["type"] != "message_delta"));
    // The other side leaving (its stdin closed) ends the connection, and
    // the daemon's end of it ends the bridge, cleanly.
    drop(client);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the bridge ends with its connection")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn the_daemon_stopping_ends_the_bridge() {
    let daemon = Daemon::start(&[]).await;
    let mut child = bridge(&daemon);
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let _client = Client::lines(stdout, stdin, None).await;
    let status = daemon.terminate().await;
    assert!(status.success(), "{status}");
    // Its stdin is still open: the daemon's close alone ends it.
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the bridge ends when the daemon does")
        .expect("wait");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn without_a_daemon_shard_bridge_exits_at_once_saying_how_to_start_one() {
    let home = TempDir::new().expect("home");
    let output = shard(home.path(), home.path())
        .arg("bridge")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(10), output)
        .await
        .expect("exits without waiting for its stdin")
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no Shard daemon is running"), "{stderr}");
    assert!(stderr.contains("`shard daemon`"), "says how to start one: {stderr}");
    assert!(output.stdout.is_empty(), "nothing on the stream: {:?}", output.stdout);
}
