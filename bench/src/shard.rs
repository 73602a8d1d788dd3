//! The system under test: the real `shard daemon`, in a home of its own,
//! reached as a browser reaches it (enroll, bootstrap, single-use ticket,
//! `/ws`) and as a local tool does (the unix socket).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::conn::Conn;

/// The daemon's default `--max-connections`.
const DAEMON_MAX_CONNECTIONS: usize = 1024;

pub struct Shard {
    child: Child,
    home: PathBuf,
    addr: SocketAddr,
    base: String,
    cookie: String,
    /// The browser secret `/enroll` answered with, sent with every `/bootstrap`.
    secret: String,
}

/// This run's folder under the system's temporary one: every scratch
/// directory (daemon homes, agents' working directories) goes in it, and
/// [`ScratchRoot`] removes it when the run ends.
fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("shard-bench-{}", std::process::id()))
}

/// A fresh directory in this run's scratch folder.
pub fn scratch(what: &str) -> Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    let dir = scratch_root().join(format!("{what}-{nanos}"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Removes this run's scratch folder when dropped, however the run ended.
pub struct ScratchRoot;

impl Drop for ScratchRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(scratch_root());
    }
}

impl Shard {
    /// Starts the daemon on a free loopback port and enrolls one browser;
    /// `max_connections` of `None` keeps the daemon's default.
    pub async fn start(
        bin: &Path,
        max_connections: impl Into<Option<usize>>,
        config: Option<&str>,
    ) -> Result<Shard> {
        Self::start_with(bin, max_connections, config, &[]).await
    }

    /// The same, with more flags for `shard daemon` (`--egress-resolve`).
    pub async fn start_with(
        bin: &Path,
        max_connections: impl Into<Option<usize>>,
        config: Option<&str>,
        flags: &[&str],
    ) -> Result<Shard> {
        let home = scratch("home")?;
        if let Some(config) = config {
            std::fs::write(home.join("config.toml"), config)?;
        }
        let mut command = Command::new(bin);
        command.args(["daemon", "--port", "0"]).args(flags);
        let max_connections = max_connections.into();
        if let Some(max) = max_connections {
            command.args(["--max-connections", &max.to_string()]);
        }
        // One enrolled session stands for every browser here, so it may hold
        // every slot (the daemon's default is 32 per session).
        let slots = max_connections.unwrap_or(DAEMON_MAX_CONNECTIONS);
        command.args(["--max-session-connections", &slots.to_string()]);
        let mut child = command
            .env("SHARD_HOME", &home)
            .env("SHARD_LOG", "error")
            .current_dir(&home)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let (mut base, mut code) = (None, None);
        while base.is_none() || code.is_none() {
            let Some(line) = lines.next_line().await? else { bail!("the daemon exited at start") };
            if let Some(url) = line.strip_prefix("listening on ") {
                base = Some(url.trim().to_owned());
            }
            if let Some(url) = line.strip_prefix("enroll: ") {
                code = url.split("#enroll=").nth(1).map(str::to_owned);
            }
        }
        // Keep reading so the daemon never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let base = base.context("listening line")?;
        let addr: SocketAddr = base.trim_start_matches("http://").parse()?;
        let mut shard =
            Shard { child, home, addr, base, cookie: String::new(), secret: String::new() };
        (shard.cookie, shard.secret) = shard.enroll(&code.context("enroll line")?).await?;
        Ok(shard)
    }

    /// The session cookie and the browser secret.
    async fn enroll(&self, code: &str) -> Result<(String, String)> {
        let response = reqwest::Client::new()
            .post(format!("{}/enroll", self.base))
            .header("origin", &self.base)
            .header("content-type", "application/json")
            .body(json!({ "code": code }).to_string())
            .send()
            .await?;
        if response.status() != 200 {
            bail!("enrollment answered {}", response.status());
        }
        let cookie = response
            .headers()
            .get("set-cookie")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.split(';').next())
            .context("no session cookie")?
            .to_owned();
        let answer: Value = response.json().await?;
        let secret = answer["browser_secret"].as_str().context("no browser secret")?.to_owned();
        Ok((cookie, secret))
    }

    /// A browser's WebSocket: a ticket from `/bootstrap`, then `/ws` with
    /// it, from the loopback address `from`.
    pub async fn websocket(&self, from: IpAddr) -> Result<Conn> {
        self.websocket_with(from, None).await
    }

    /// The same, with a kernel receive buffer of `receive_buffer` bytes.
    pub async fn websocket_with(&self, from: IpAddr, receive_buffer: Option<u32>) -> Result<Conn> {
        let response = reqwest::Client::builder()
            .local_address(from)
            .build()?
            .post(format!("{}/bootstrap", self.base))
            .header("origin", &self.base)
            .header("cookie", &self.cookie)
            .header("shard-browser-secret", &self.secret)
            .send()
            .await?;
        if response.status() != 200 {
            bail!("bootstrap answered {}", response.status());
        }
        let body: Value = response.json().await?;
        let ticket = body["ticket"].as_str().context("no ticket")?;
        let protocols = format!("shard.v1, shard.ticket.{ticket}");
        let mut conn =
            Conn::websocket(self.addr, from, Some(&protocols), Some(&self.base), receive_buffer)
                .await?;
        conn.until(|message| message["type"] == "hello").await?;
        Ok(conn)
    }

    /// A local tool's connection.
    pub async fn unix(&self) -> Result<Conn> {
        let mut conn = Conn::unix(&self.home.join("daemon.sock")).await?;
        conn.until(|message| message["type"] == "hello")
            .await
            .context("waiting for hello on the unix socket")?;
        Ok(conn)
    }

    /// A new agent working in a fresh directory; its id.
    pub async fn create_agent(&self, control: &mut Conn) -> Result<String> {
        self.create_agent_on(control, None).await
    }

    /// The same on `runtime` (one configured in the daemon's
    /// `config.toml`), or Shard's own agent for `None`.
    pub async fn create_agent_on(
        &self,
        control: &mut Conn,
        runtime: Option<&str>,
    ) -> Result<String> {
        let cwd = scratch("cwd")?;
        let mut create = json!({"type": "agent.create", "cwd": cwd, "name": "bench"});
        if let Some(runtime) = runtime {
            create["runtime"] = Value::from(runtime);
        }
        let response = control.call(create, "create").await?;
        Ok(response["data"]["agent_id"].as_str().context("agent_id")?.to_owned())
    }

    /// Replaces the daemon's `config.toml`, which it reads again at each
    /// agent's start.
    pub fn configure(&self, config: &str) -> Result<()> {
        std::fs::write(self.home.join("config.toml"), config).context("writing config.toml")
    }

    /// The daemon's home (`shard acp --home`).
    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn stop(mut self) -> Result<()> {
        if let Some(pid) = self.child.id() {
            // SIGTERM: the daemon stops its agents and exits.
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(15), self.child.wait()).await;
        let _ = self.child.kill().await;
        let _ = std::fs::remove_dir_all(&self.home);
        Ok(())
    }
}

/// Attaches `conn` to `agent_id` and waits for its sync.
pub async fn attach(conn: &mut Conn, agent_id: &str, role: &str) -> Result<()> {
    let command = json!({"type": "agent.attach", "agent_id": agent_id, "role": role});
    conn.call(command, "attach").await?;
    conn.until(|message| message["type"] == "sync").await?;
    Ok(())
}
