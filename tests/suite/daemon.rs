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
