//! Bytes through the egress proxy (docs/SANDBOX.md, "Network"): `curl`
//! pulls a blob from a local HTTP sink, directly on the host, and from
//! inside an agent's sandbox, where its connection goes to `shard contain`'s
//! forwarder on the sandbox's loopback, through the unix socket to the
//! daemon's proxy for that agent, and on to the sink. The agent runs it as
//! its demo model's `run:` (the bash question answered over the same
//! connection); the sink's host is in `allow_hosts`, so no network question
//! is asked, and the daemon finds it with `--egress-resolve`. The same
//! `curl` command pulls the same blob both ways; its own `speed_download`
//! is the figure, and `times` after it gives its CPU.
//!
//! CPU time is read for each process on the path over each pull (the
//! daemon, `contain`, the sink in this process), so that the figures say
//! which part costs what.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::process::Command;

use crate::Args;
use crate::conn::Conn;
use crate::procfs;
use crate::report::ratio;
use crate::shard::{Shard, attach, scratch};

/// The name the agent's `curl` asks the proxy for; the daemon resolves it
/// to the sink.
pub const SINK_HOST: &str = "sink.test";
/// What the sink writes per call: large enough that the relay's copies, not
/// the sink, set the pace.
const CHUNK: usize = 1024 * 1024;
/// The most bytes of a request head the sink reads.
const MAX_HEAD: usize = 16 * 1024;

/// One pull: `curl`'s own rate and the CPU each process spent on it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pull {
    pub bytes_per_second: f64,
    pub cpu: Cpu,
}

/// CPU time over one pull, by process, in nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub curl: u64,
    /// This process: the sink (and the controller's few messages).
    pub sink: u64,
    /// The forwarder in the sandbox's first process (0 directly).
    pub contain: u64,
    /// The daemon: the proxy's relay (0 directly).
    pub daemon: u64,
}

impl Cpu {
    pub fn total(&self) -> u64 {
        self.curl + self.sink + self.contain + self.daemon
    }
}

/// An HTTP server on loopback that answers every request with `size` bytes
/// (with their `Content-Length`), then closes; its port.
pub async fn sink(size: u64) -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let body: Arc<[u8]> = vec![b'x'; CHUNK].into();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut chunk = [0u8; 4096];
                while !head.windows(4).any(|end| end == b"\r\n\r\n") && head.len() < MAX_HEAD {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&chunk[..read]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n"
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                let mut left = size;
                while left > 0 {
                    let part = left.min(body.len() as u64) as usize;
                    if stream.write_all(&body[..part]).await.is_err() {
                        return;
                    }
                    left -= part as u64;
                }
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(port)
}

/// The command both pulls run: the blob to nowhere, then `curl`'s rate and
/// size, then the CPU of the shell's children (`times`' second line).
fn curl(host: &str, port: u16) -> String {
    format!(
        "curl -sS --max-time 300 -o /dev/null -w 'speed=%{{speed_download}} size=%{{size_download}}\\n' http://{host}:{port}/blob; times"
    )
}

/// `curl` on the host, as a tool run by hand would pull the blob.
pub async fn direct(port: u16, size: u64) -> Result<Pull> {
    let before = procfs::cpu_ns(std::process::id());
    let out = Command::new("bash")
        .args(["-c", &curl("127.0.0.1", port)])
        // Straight to the sink, whatever this machine's own proxy is.
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .await
        .context("running curl")?;
    let sink = procfs::cpu_ns(std::process::id()).saturating_sub(before);
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("curl failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    }
    let (bytes_per_second, curl) = read_pull(&text, size)?;
    Ok(Pull { bytes_per_second, cpu: Cpu { curl, sink, ..Cpu::default() } })
}

/// An agent whose sandbox reaches the sink through the proxy.
pub struct Puller {
    control: Conn,
    agent: String,
    daemon: u32,
    contain: u32,
    turns: usize,
}

impl Puller {
    /// Creates the agent (the daemon's `config.toml` allows the sink) and
    /// attaches to it.
    pub async fn new(shard: &Shard) -> Result<Puller> {
        let mut control = shard.unix().await?;
        let cwd = scratch("cwd")?;
        let create = json!({"type": "agent.create", "cwd": cwd, "name": "puller"});
        let response = control.call(create, "create").await?;
        let agent = response["data"]["agent_id"].as_str().context("agent_id")?.to_owned();
        attach(&mut control, &agent, "interactive").await?;
        let daemon = shard.pid().context("daemon pid")?;
        let contain = procfs::descendants(daemon)
            .into_iter()
            .find(|&pid| {
                let argv = procfs::cmdline(pid);
                // `shard contain`, not the bubblewrap that started it.
                argv.get(1).is_some_and(|part| part == "contain")
            })
            .context("no `shard contain` below the daemon")?;
        Ok(Puller { control, agent, daemon, contain, turns: 0 })
    }

    /// One pull through the proxy: a `run:` turn, its bash question allowed.
    pub async fn pull(&mut self, port: u16, size: u64) -> Result<Pull> {
        self.turns += 1;
        let turn = self.turns;
        let before = (
            procfs::cpu_ns(std::process::id()),
            procfs::cpu_ns(self.contain),
            procfs::cpu_ns(self.daemon),
        );
        let message = format!("run: {}", curl(SINK_HOST, port));
        let prompt = json!({"type": "prompt", "agent_id": self.agent, "message": message});
        self.control.call(prompt, &format!("pull-{turn}")).await?;
        let mut output = None;
        loop {
            let message = self
                .control
                .until(|message| {
                    message["agent_id"] == self.agent.as_str()
                        && matches!(
                            message["type"].as_str(),
                            Some("permission_request" | "tool_result" | "turn_end")
                        )
                })
                .await?;
            match message["type"].as_str() {
                Some("permission_request") => {
                    if message["tool_name"] != "bash" {
                        bail!("the agent asked for {}: {message}", message["tool_name"]);
                    }
                    let allow = json!({"type": "permission_response", "agent_id": self.agent,
                                       "request_id": message["request_id"], "decision": "allow"});
                    self.control.send(&allow).await?;
                }
                Some("tool_result") => output = Some(message),
                _ => break,
            }
        }
        let cpu = Cpu {
            sink: procfs::cpu_ns(std::process::id()).saturating_sub(before.0),
            contain: procfs::cpu_ns(self.contain).saturating_sub(before.1),
            daemon: procfs::cpu_ns(self.daemon).saturating_sub(before.2),
            curl: 0,
        };
        let output = output.context("the turn ran no tool")?;
        let text = tool_text(&output);
        let (bytes_per_second, curl) =
            read_pull(text, size).with_context(|| format!("through the proxy: {output}"))?;
        Ok(Pull { bytes_per_second, cpu: Cpu { curl, ..cpu } })
    }
}

fn tool_text(result: &Value) -> &str {
    result["content"]["text"].as_str().unwrap_or_default()
}

/// `curl`'s rate (bytes a second) and the CPU of its run (nanoseconds),
/// from what [`curl`]'s command printed; an error unless all `size` bytes
/// came.
fn read_pull(text: &str, size: u64) -> Result<(f64, u64)> {
    let field = |name: &str| {
        text.split_whitespace()
            .find_map(|word| word.strip_prefix(name))
            .with_context(|| format!("no {name} in {text:?}"))
    };
    let speed: f64 = field("speed=")?.parse()?;
    let got: u64 = field("size=")?.parse()?;
    if got != size {
        bail!("curl got {got} bytes of {size}: {text:?}");
    }
    // `times`: the shell's user and system time, then its children's, as
    // `0m1.234s 0m0.567s`.
    let children = text
        .lines()
        .filter(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.len() == 2 && words.iter().all(|word| minutes_seconds(word).is_ok())
        })
        .nth(1)
        .with_context(|| format!("no `times` in {text:?}"))?;
    let cpu = children.split_whitespace().map(minutes_seconds).sum::<Result<f64>>()?;
    Ok((speed, (cpu * 1e9) as u64))
}

/// `1m2.345s` in seconds.
fn minutes_seconds(text: &str) -> Result<f64> {
    let (minutes, seconds) = text
        .trim_end_matches('s')
        .split_once('m')
        .with_context(|| format!("not a `times` figure: {text}"))?;
    Ok(minutes.parse::<f64>()? * 60.0 + seconds.parse::<f64>()?)
}

/// Where `curl` is, for the scenario's heading.
pub fn curl_version() -> String {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).map(str::to_owned)
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// Bytes through the egress proxy, against `curl` on the host.
pub async fn run(args: &Args) -> Result<()> {
    let (mib, runs) = if args.short { (32, 3) } else { (256, 5) };
    let size: u64 = mib << 20;
    let port = sink(size).await?;
    let config = format!("[sandbox]\nallow_hosts = [\"{SINK_HOST}:{port}\"]\n");
    let resolve = format!("{SINK_HOST}=127.0.0.1");
    let flags = ["--egress-resolve", resolve.as_str()];
    let daemon = Shard::start_with(&args.shard, 64, Some(&config), &flags).await?;
    let mut puller = Puller::new(&daemon).await?;
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(self::direct(port, size).await?);
        proxied.push(puller.pull(port, size).await?);
    }
    daemon.stop().await?;
    let median = |mut pulls: Vec<Pull>| {
        pulls.sort_by(|a, b| a.bytes_per_second.total_cmp(&b.bytes_per_second));
        pulls[pulls.len() / 2]
    };
    let (direct, proxied) = (median(direct), median(proxied));
    println!();
    println!(
        "Egress: curl {} pulls {mib} MiB over HTTP from a sink on loopback, on the host and from an agent's sandbox through the egress proxy (curl's own rate, the median of {runs})",
        curl_version()
    );
    let rate = |pull: &Pull| pull.bytes_per_second / 1e6;
    println!("  direct:                     {:>8.0} MB/s", rate(&direct));
    println!("  through the egress proxy:   {:>8.0} MB/s", rate(&proxied));
    println!(
        "  ratio: {} (target: at least 0.8x)",
        ratio(proxied.bytes_per_second, direct.bytes_per_second)
    );
    println!("  CPU per GiB pulled (s, of the median runs), by process:");
    println!(
        "  {:>8} | {:>6} | {:>6} | {:>7} | {:>6} | {:>6}",
        "", "curl", "sink", "contain", "daemon", "total"
    );
    let gib = size as f64 / (1u64 << 30) as f64;
    for (name, pull) in [("direct", &direct), ("proxied", &proxied)] {
        let per = |ns: u64| ns as f64 / 1e9 / gib;
        println!(
            "  {name:>8} | {:>6.2} | {:>6.2} | {:>7.2} | {:>6.2} | {:>6.2}",
            per(pull.cpu.curl),
            per(pull.cpu.sink),
            per(pull.cpu.contain),
            per(pull.cpu.daemon),
            per(pull.cpu.total()),
        );
    }
    Ok(())
}
