//! The daemon's process contract (CONTRACT.md "Command line").

use std::process::Stdio;
use std::time::Duration;

use super::support::{Daemon, shard};

#[tokio::test]
async fn announces_its_loopback_address_on_stdout() {
    let daemon = Daemon::start(&[]).await;
    let port = daemon
        .base
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("not a loopback URL: {}", daemon.base));
    let port: u16 = port.parse().expect("a port number");
    assert_ne!(port, 0, "--port 0 must be resolved to the real port");
    // The announced address accepts connections.
    tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
}

#[tokio::test]
async fn stops_cleanly_on_sigterm() {
    let daemon = Daemon::start(&[]).await;
    let status = daemon.terminate().await;
    assert!(status.success(), "exit status {status}");
}

#[tokio::test]
async fn a_taken_port_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let home = tempfile::TempDir::new().expect("home");
    let output = shard(home.path(), home.path())
        .args(["daemon", "--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(20), output)
        .await
        .expect("daemon exits")
        .expect("run daemon");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "stderr names the address: {stderr}");
    assert!(output.stdout.is_empty(), "nothing announced: {:?}", output.stdout);
}

/// Reads JSON lines from a raw unix socket until one satisfies `done`.
async fn read_until(
    reader: &mut tokio::io::Lines<tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>>,
    done: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), reader.next_line())
            .await
            .expect("an answer in time")
            .expect("read")
            .expect("the daemon kept the connection");
        let value: serde_json::Value = serde_json::from_str(&line).expect("json");
        let finished = done(&value);
        seen.push(value);
        if finished {
            return seen;
        }
    }
}

#[tokio::test]
async fn an_oversized_line_or_half_a_utf8_sequence_is_refused_and_the_connection_goes_on() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let daemon = Daemon::start(&[]).await;
    let stream = tokio::net::UnixStream::connect(daemon.socket()).await.expect("connect");
    let (read, mut write) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(read).lines();
    // One byte over the 16 MiB a line may have, in many writes.
    let mut line = br#"{"id":"big","type":"agent.list","pad":""#.to_vec();
    line.resize(16 * 1024 * 1024 + 1, b'x');
    line.extend_from_slice(b"\"}\n");
    for chunk in line.chunks(1024 * 1024) {
        write.write_all(chunk).await.expect("write");
    }
    let seen = read_until(&mut reader, |value| value["type"] == "error").await;
    let error = seen.last().expect("error");
    assert_eq!(error["code"], "INVALID_REQUEST", "{error}");
    // Half of "€", then a newline.
    write
        .write_all(b"{\"id\":\"half\",\"type\":\"agent.list\",\"x\":\"\xe2\x82\"}\n")
        .await
        .expect("write");
    let seen = read_until(&mut reader, |value| value["type"] == "error").await;
    assert_eq!(seen.last().expect("error")["code"], "INVALID_REQUEST");
    // And the connection still works.
    write.write_all(b"{\"id\":\"ok\",\"type\":\"agent.list\"}\n").await.expect("write");
    let seen = read_until(&mut reader, |value| value["type"] == "response").await;
    let answer = seen.last().expect("response");
    assert_eq!(
        (answer["id"].as_str(), answer["success"].as_bool()),
        (Some("ok"), Some(true)),
        "{answer}"
    );
}
