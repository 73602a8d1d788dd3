//! Starting and stopping a real daemon for a test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a daemon may take to print its address. Generous: on a loaded
/// 2-core CI machine a cold start can be slow, and a hang still fails.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A `shard daemon` child with its own `$SHARD_HOME` and working directory.
/// Killed when dropped.
pub struct Daemon {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// The enrollment URL printed at start.
    pub enroll_url: String,
    /// Stdout lines after the announcement.
    pub stdout: mpsc::UnboundedReceiver<String>,
    pub home: PathBuf,
    _home_dir: Option<TempDir>,
    /// The daemon's working directory: empty, so anything served comes from
    /// the binary itself.
    pub cwd: TempDir,
}

impl Daemon {
    pub async fn start(extra_args: &[&str]) -> Daemon {
        let home = TempDir::new().expect("temp home");
        let mut daemon = Self::start_in(home.path(), extra_args).await;
        daemon._home_dir = Some(home);
        daemon
    }

    /// Starts a daemon on an existing `$SHARD_HOME` (a restart).
    pub async fn start_in(home: &Path, extra_args: &[&str]) -> Daemon {
        Self::start_with(home, extra_args, &[], None).await
    }

    /// Starts a daemon with extra environment, its stderr kept in a file.
    pub async fn start_with(
        home: &Path,
        extra_args: &[&str],
        env: &[(&str, &str)],
        stderr: Option<&Path>,
    ) -> Daemon {
        let cwd = TempDir::new().expect("temp cwd");
        let port: &[&str] = if extra_args.contains(&"--port") { &[] } else { &["--port", "0"] };
        let stderr = match stderr {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("stderr file")),
            None if std::env::var_os("SHARD_TEST_STDERR").is_some() => Stdio::inherit(),
            None => Stdio::null(),
        };
        let mut child = shard(home, cwd.path())
            .arg("daemon")
            .args(port)
            .args(extra_args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn shard daemon");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = async || {
            tokio::time::timeout(STARTUP_TIMEOUT, lines.next_line())
                .await
                .expect("daemon printed nothing in time")
                .expect("read daemon stdout")
                .expect("daemon closed stdout before announcing")
        };
        let first = next().await;
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first stdout line is not the announcement: {first:?}"))
            .to_owned();
        let second = next().await;
        let enroll_url = second
            .strip_prefix("enroll: ")
            .unwrap_or_else(|| panic!("second stdout line is not an enrollment URL: {second:?}"))
            .to_owned();
        let (sender, stdout) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Daemon { child, base, enroll_url, stdout, home: home.to_owned(), _home_dir: None, cwd }
    }

    /// Keeps `home` (the daemon's `$SHARD_HOME`) until the daemon is dropped.
    pub fn keep_home(&mut self, home: TempDir) {
        self._home_dir = Some(home);
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        self.base.trim_start_matches("http://").to_owned()
    }

    pub fn socket(&self) -> PathBuf {
        self.home.join("daemon.sock")
    }

    /// The code in the enrollment URL printed at start.
    pub fn enroll_code(&self) -> String {
        self.enroll_url.split("#enroll=").nth(1).expect("a code").to_owned()
    }

    /// Sends a signal and waits for the exit status.
    pub async fn signal(&mut self, signal: &str) -> std::process::ExitStatus {
        self.send_signal(signal);
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("daemon did not stop in time")
            .expect("wait for daemon")
    }

    /// Sends a signal without waiting for the daemon to exit.
    pub fn send_signal(&self, signal: &str) {
        let pid = self.child.id().expect("daemon still running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Sends SIGTERM and waits for the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("TERM").await
    }
}

/// A dropped daemon is killed and reaped before the drop returns, so a
/// restart on the same home never meets the old one still listening.
impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.start_kill().is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Polls `check` every 50 ms until it holds; fails after 15 s.
pub async fn wait_until(what: &str, check: impl FnMut() -> bool) {
    wait_until_within(what, Duration::from_secs(15), check).await;
}

/// Polls `check` every 50 ms until it holds; fails after `limit`.
pub async fn wait_until_within(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !check() {
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether process `pid` is alive: there, and not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Live processes whose command line matches `pattern` (`pgrep -f`), as
/// `pgrep -a` lists them.
pub fn running(pattern: &str) -> Vec<String> {
    let output =
        std::process::Command::new("pgrep").args(["-a", "-f", pattern]).output().expect("pgrep");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| {
            line.split_whitespace().next().and_then(|pid| pid.parse().ok()).is_some_and(alive)
        })
        .map(str::to_owned)
        .collect()
}

/// The `shard` binary under test: the one cargo built with the suite, or
/// the one `SHARD_TEST_BIN` names (to show a test failing on another
/// build, the one before a fix).
pub fn binary() -> std::ffi::OsString {
    std::env::var_os("SHARD_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_shard").into())
}

/// The `shard` binary under test, run from `cwd` with `SHARD_HOME=home`.
pub fn shard(home: &Path, cwd: &Path) -> Command {
    let mut command = Command::new(binary());
    command.env("SHARD_HOME", home).current_dir(cwd).kill_on_drop(true);
    command
}

/// `shard` as [`shard`] runs it, whose files cannot grow past `bytes`: a
/// write past the limit fails part-way, as it does when a disk fills up
/// (EFBIG instead of ENOSPC), with no privileges or small filesystem needed.
/// The shell ignores SIGXFSZ, which would kill the process instead; an
/// ignored signal stays ignored across exec.
pub fn shard_with_file_limit(home: &Path, cwd: &Path, bytes: u64) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", r#"trap '' XFSZ; exec prlimit --fsize="$0" -- "$@""#])
        .arg(format!("{bytes}:{bytes}"))
        .arg(binary())
        .env("SHARD_HOME", home)
        .current_dir(cwd)
        .kill_on_drop(true);
    command
}

/// A port free on `ip` right now.
pub fn free_port(ip: &str) -> u16 {
    let probe = std::net::TcpListener::bind((ip, 0)).expect("probe");
    probe.local_addr().expect("addr").port()
}

/// The pids of `shard agent` processes whose command line mentions `marker`:
/// the agents themselves, not the sandbox's bubblewrap and first process
/// that start them (whose command lines name the agent's too).
pub fn agent_pids(marker: &str) -> Vec<u32> {
    let output = std::process::Command::new("pgrep")
        .args(["-f", &format!("^[^ ]+ agent --stdio --cwd {marker}")])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// A figure of the daemon's `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub fn memory_kib(daemon: &Daemon, field: &str) -> u64 {
    let pid = daemon.child.id().expect("running");
    proc_kib(pid, "status", field).unwrap_or_else(|| panic!("no {field}"))
}

/// A figure in KiB of `/proc/<pid>/<file>` (`status`, `smaps_rollup`):
/// none when the process is gone or the file does not hold it.
pub fn proc_kib(pid: u32, file: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `shard SUBCOMMAND` with no daemon running: it must exit at once, its
/// stdin still open, with an error saying how to start one, and write
/// nothing on stdout (the channel its client reads).
pub async fn refuses_without_a_daemon(subcommand: &str) {
    let home = TempDir::new().expect("home");
    let output = shard(home.path(), home.path())
        .arg(subcommand)
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
    assert!(output.stdout.is_empty(), "nothing on stdout: {:?}", output.stdout);
}
