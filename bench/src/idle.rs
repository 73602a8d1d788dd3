//! S4 idle scale: what idle connections and idle agents cost. The daemon's
//! resident memory (`VmRSS`) before and after opening idle connections, per
//! connection, for browsers' WebSockets and for local clients on the unix
//! socket; and each idle agent process's RSS beside its proportional share
//! (PSS: the executable's pages are one copy for the daemon and every
//! agent, so RSS counts them in full for each), with how much of it is its
//! own (anonymous), then the same summed over the agent's whole sandbox
//! (the daemon's child is the agent's bubblewrap, below it `shard contain`,
//! then the agent).
//! Also the first page load: what a browser transfers for `/` and the
//! assets it names, asking for compression as browsers do.

use std::net::IpAddr;

use anyhow::{Context, Result};
use serde_json::json;

use crate::Args;
use crate::conn::{Conn, next_loopback};
use crate::procfs::{Memory, children, cmdline, descendants, memory, rss};
use crate::shard::Shard;

/// Idle local clients opened: the daemon serves 64 at once
/// (`LOCAL_CONNECTIONS`), and the benchmark's own control connection and
/// the warm one need two of them.
const UNIX_CONNECTIONS: usize = 60;

pub struct Idle {
    pub connections: usize,
    pub per_connection: f64,
    pub unix_connections: usize,
    /// Daemon RSS per idle unix-socket connection, in bytes.
    pub per_unix_connection: f64,
    pub agents: usize,
    /// Each agent process (`shard agent --stdio`) alone.
    pub per_agent: Vec<Memory>,
    /// Each agent with what contains it: every process from the daemon's
    /// child down, summed.
    pub per_sandbox: Vec<Memory>,
}

/// The memory of `top` and every process below it, summed, and that of the
/// agent among them (the process whose command is `shard agent`).
fn tree(top: u32) -> Option<(Memory, Memory)> {
    let mut total = Memory::default();
    let mut agent = None;
    for pid in std::iter::once(top).chain(descendants(top)) {
        let Ok(used) = memory(pid) else { continue };
        total.rss += used.rss;
        total.anon += used.anon;
        total.pss += used.pss;
        if cmdline(pid).get(1).is_some_and(|word| word == "agent") {
            agent = Some(used);
        }
    }
    Some((agent?, total))
}

pub async fn idle(
    shard: &Shard,
    connections: usize,
    agents: usize,
    next_ip: impl Fn() -> IpAddr,
) -> Result<Idle> {
    let pid = shard.pid().context("daemon pid")?;
    // Warm: the first connection pays for one-time allocations.
    let warm = shard.websocket(next_ip()).await?;
    let before = rss(pid)?;
    let mut open = Vec::with_capacity(connections);
    for _ in 0..connections {
        open.push(shard.websocket(next_ip()).await?);
    }
    let after = rss(pid)?;
    let per_connection = after.saturating_sub(before) as f64 / connections as f64;
    drop(open);
    drop(warm);

    let mut control: Conn = shard.unix().await?;
    let mut ids = Vec::with_capacity(agents);
    for _ in 0..agents {
        ids.push(shard.create_agent(&mut control).await?);
    }
    // Measured with all of them up, so that shared pages are shared.
    let (per_agent, per_sandbox) = children(pid).into_iter().filter_map(tree).unzip();
    for (index, id) in ids.iter().enumerate() {
        let kill = json!({"type": "agent.kill", "agent_id": id, "force": true});
        control.call(kill, &format!("idle-kill-{index}")).await?;
    }
    Ok(Idle {
        connections,
        per_connection,
        unix_connections: 0,
        per_unix_connection: 0.0,
        agents,
        per_agent,
        per_sandbox,
    })
}

/// Daemon RSS per idle unix-socket connection, in bytes, over
/// [`UNIX_CONNECTIONS`] of them.
pub async fn idle_unix(shard: &Shard) -> Result<f64> {
    let pid = shard.pid().context("daemon pid")?;
    let warm = shard.unix().await?;
    let before = rss(pid)?;
    let mut open = Vec::with_capacity(UNIX_CONNECTIONS);
    for _ in 0..UNIX_CONNECTIONS {
        open.push(shard.unix().await?);
    }
    let after = rss(pid)?;
    drop((open, warm));
    Ok(after.saturating_sub(before) as f64 / UNIX_CONNECTIONS as f64)
}

/// S4: idle connections' and idle agents' memory, in fresh daemons.
pub async fn run_scale(args: &Args) -> Result<()> {
    let (connections, idle_agents) = if args.short { (100, 10) } else { (1_000, 200) };
    // A daemon of its own, fresh: one that served other runs keeps their
    // freed memory, which idle connections would reuse unseen. With its
    // default connection cap, which must fit this.
    let fresh = Shard::start(&args.shard, None, None).await?;
    let mut idle = idle(&fresh, connections, idle_agents, next_loopback).await?;
    fresh.stop().await?;
    // Local clients in a daemon of their own too, for the same reason.
    let fresh = Shard::start(&args.shard, None, None).await?;
    idle.per_unix_connection = idle_unix(&fresh).await?;
    idle.unix_connections = UNIX_CONNECTIONS;
    fresh.stop().await?;
    let mean_of = |all: &[Memory], of: fn(&Memory) -> u64| {
        all.iter().map(|memory| of(memory) as f64 / 1e6).sum::<f64>() / all.len().max(1) as f64
    };
    let mean = |of: fn(&Memory) -> u64| mean_of(&idle.per_agent, of);
    let most = idle.per_agent.iter().map(|memory| memory.rss as f64 / 1e6).fold(0.0, f64::max);
    println!();
    println!("S4 idle scale");
    println!(
        "  {} idle WebSocket connections: {:.1} KB of daemon RSS each (target: at most 16 KB)",
        idle.connections,
        idle.per_connection / 1024.0
    );
    println!(
        "  {} idle unix-socket connections: {:.1} KB of daemon RSS each (target: at most 16 KB)",
        idle.unix_connections,
        idle.per_unix_connection / 1024.0
    );
    println!(
        "  {} idle agents: {:.1} MB RSS each on average ({:.1} MB at most), {:.2} MB PSS (target: PSS at most 2 MB)",
        idle.agents,
        mean(|memory| memory.rss),
        most,
        mean(|memory| memory.pss)
    );
    println!(
        "    of which their own (anonymous) {:.2} MB; the rest of RSS is the executable's and libraries' pages, shared by all",
        mean(|memory| memory.anon)
    );
    println!(
        "  with its sandbox (bubblewrap and `shard contain` too): {:.1} MB RSS, {:.2} MB PSS each on average",
        mean_of(&idle.per_sandbox, |memory| memory.rss),
        mean_of(&idle.per_sandbox, |memory| memory.pss)
    );
    Ok(())
}

/// Bytes on the wire for a first page load: (raw, as transferred). The
/// page's files, and the modules its scripts import as they load
/// (`from "./x.js"`); not what a script fetches later, on demand (the
/// chunks of panels not yet opened).
pub async fn first_load(shard: &Shard) -> Result<Vec<(String, u64, u64, String)>> {
    let client = reqwest::Client::new();
    let page = client.get(format!("{}/", shard.base())).send().await?.text().await?;
    let mut paths = vec!["/".to_owned()];
    for marker in ["href=\"/", "src=\"/", "from \"/", "import(\"/", "'/pkg/"] {
        for piece in page.split(marker).skip(1) {
            let end = piece.find(['"', '\'', ' ', '>']).unwrap_or(piece.len());
            let path = format!("/{}", &piece[..end]);
            if !paths.contains(&path) && !fetched_apart(&path) {
                paths.push(path);
            }
        }
    }
    let mut next = 0;
    while next < paths.len() {
        let path = paths[next].clone();
        next += 1;
        if !path.ends_with(".js") {
            continue;
        }
        let script = client.get(format!("{}{path}", shard.base())).send().await?.text().await?;
        let folder = &path[..path.rfind('/').map_or(0, |slash| slash + 1)];
        for marker in ["from \"./", "from './"] {
            for piece in script.split(marker).skip(1) {
                let end = piece.find(['"', '\'']).unwrap_or(piece.len());
                let imported = format!("{folder}{}", &piece[..end]);
                if !paths.contains(&imported) {
                    paths.push(imported);
                }
            }
        }
    }
    let mut sizes = Vec::new();
    for path in paths {
        let url = format!("{}{path}", shard.base());
        let raw = client.get(&url).send().await?.bytes().await?.len() as u64;
        let response = client.get(&url).header("accept-encoding", "br, gzip").send().await?;
        let encoding = response
            .headers()
            .get("content-encoding")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("identity")
            .to_owned();
        let wire = response.bytes().await?.len() as u64;
        sizes.push((path, raw, wire, encoding));
    }
    Ok(sizes)
}

/// The first page load: each file's bytes, raw and on the wire.
pub async fn run_first_load(args: &Args) -> Result<()> {
    let daemon = Shard::start(&args.shard, 64, None).await?;
    println!();
    println!("First page load (asking for br, gzip as a browser does)");
    let mut total = (0, 0);
    for (path, raw, wire, encoding) in first_load(&daemon).await? {
        println!(
            "  {path:<24} {:>8.1} KB raw, {:>8.1} KB on the wire ({encoding})",
            raw as f64 / 1024.0,
            wire as f64 / 1024.0
        );
        total = (total.0 + raw, total.1 + wire);
    }
    println!(
        "  total                    {:>8.1} KB raw, {:>8.1} KB on the wire (target: at most 300 KB)",
        total.0 as f64 / 1024.0,
        total.1 as f64 / 1024.0
    );
    daemon.stop().await
}

/// What a browser fetches apart from showing the page, so not part of its
/// first load: the icons and the app's manifest (asked for when the browser
/// checks whether the page installs as an app).
fn fetched_apart(path: &str) -> bool {
    path.contains("favicon") || path.ends_with(".png") || path.ends_with(".webmanifest")
}
