//! Starting and stopping a real daemon for a test.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a daemon may take to print its address. Generous: on a loaded
/// 2-core CI machine a cold start can be slow, and a hang still fails.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A `shard daemon` child with its own `$SHARD_HOME` and working directory,
/// both fresh temporary directories. Killed when dropped.
pub struct Daemon {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The daemon's `$SHARD_HOME`, removed when the test ends.
    _home: TempDir,
    /// The daemon's working directory: empty, so anything served comes from
    /// the binary itself.
    pub cwd: TempDir,
}

impl Daemon {
    pub async fn start(extra_args: &[&str]) -> Daemon {
        let home = TempDir::new().expect("temp home");
        let cwd = TempDir::new().expect("temp cwd");
        let mut child = shard(home.path(), cwd.path())
            .arg("daemon")
            .args(["--port", "0"])
            .args(extra_args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn shard daemon");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let first = tokio::time::timeout(STARTUP_TIMEOUT, lines.next_line())
            .await
            .expect("daemon printed nothing in time")
            .expect("read daemon stdout")
            .expect("daemon closed stdout before announcing");
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line is not the announcement: {first:?}"))
            .to_owned();
        // Keep draining stdout so the daemon never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Daemon { child, base, _home: home, cwd }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("daemon still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("daemon did not stop within 10 s of SIGTERM")
            .expect("wait for daemon")
    }
}

/// The `shard` binary under test, run from `cwd` with `SHARD_HOME=home`.
pub fn shard(home: &Path, cwd: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shard"));
    command.env("SHARD_HOME", home).current_dir(cwd).kill_on_drop(true);
    command
}
