//! S5 spawn and S6 attach-resync.
//!
//! - S5: `agent.create` until the agent is ready (the daemon answers once its
//!   process has said hello), against spawning the bare `shard agent --stdio`
//!   and reading its `hello` line: the floor any daemon pays.
//! - S6: a client attaching to an agent whose session holds many messages:
//!   the time from `agent.attach` to the end of its `sync`, and the sync's
//!   size on the wire. Compaction is off in that daemon's configuration so
//!   the whole session is the live window the sync carries.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::Args;
use crate::report::ms;
use crate::shard::{Shard, attach, scratch};

/// The value at quantile `q` (0..=1) of `samples`.
pub fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples.get(index).copied().unwrap_or_default()
}

pub struct Spawn {
    pub create: Vec<Duration>,
    pub bare: Vec<Duration>,
}

pub async fn spawn(shard: &Shard, bin: &Path, agents: usize) -> Result<Spawn> {
    let mut control = shard.unix().await?;
    let mut create = Vec::with_capacity(agents);
    let mut ids = Vec::with_capacity(agents);
    for _ in 0..agents {
        let started = Instant::now();
        ids.push(shard.create_agent(&mut control).await?);
        create.push(started.elapsed());
    }
    for (index, id) in ids.iter().enumerate() {
        let kill = json!({"type": "agent.kill", "agent_id": id, "force": true});
        control.call(kill, &format!("kill-{index}")).await?;
    }
    let mut bare = Vec::with_capacity(agents);
    for _ in 0..agents {
        let home = scratch("bare")?;
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(["agent", "--stdio", "--cwd"])
            .arg(&home)
            .env("SHARD_HOME", &home)
            .env("SHARD_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("stdout")?;
        let line = BufReader::new(stdout).lines().next_line().await?;
        bare.push(started.elapsed());
        if !line.is_some_and(|line| line.contains("\"hello\"")) {
            bail!("the bare agent did not say hello");
        }
        let _ = child.kill().await;
        let _ = std::fs::remove_dir_all(&home);
    }
    Ok(Spawn { create, bare })
}

/// S5: `agent.create` until ready against the bare spawn, p50 and p99.
pub async fn run_spawn(args: &Args) -> Result<()> {
    let agents = if args.short { 10 } else { 100 };
    // The daemon's own part, against the bare spawn: without the sandbox,
    // whose cost the `sandbox` scenario measures against this same start.
    let config = "[sandbox]\nmode = \"off\"\n";
    let daemon = Shard::start(&args.shard, 64, Some(config)).await?;
    let mut spawn = spawn(&daemon, &args.shard, agents).await?;
    daemon.stop().await?;
    let (create50, create99) =
        (quantile(&mut spawn.create, 0.5), quantile(&mut spawn.create, 0.99));
    let (bare50, bare99) = (quantile(&mut spawn.bare, 0.5), quantile(&mut spawn.bare, 0.99));
    println!();
    println!(
        "S5 spawn: {agents} agents, until ready (p50 / p99; sandbox off, which `sandbox` measures)"
    );
    println!("  shard agent.create:           {:>7.1} ms / {:>7.1} ms", ms(create50), ms(create99));
    println!("  bare `shard agent --stdio`:   {:>7.1} ms / {:>7.1} ms", ms(bare50), ms(bare99));
    println!(
        "  p50 over the bare spawn: {:+.1} ms (target: at most +5 ms)",
        ms(create50) - ms(bare50)
    );
    Ok(())
}

pub struct Resync {
    pub messages: usize,
    pub fill: Duration,
    pub attach: Vec<Duration>,
    pub sync_bytes: usize,
}

/// Fills one agent with `turns` turns (two messages each), then attaches a
/// fresh client `attaches` times.
pub async fn resync(shard: &Shard, turns: usize, attaches: usize) -> Result<Resync> {
    let mut control = shard.unix().await?;
    let agent = shard.create_agent(&mut control).await?;
    attach(&mut control, &agent, "interactive").await?;
    let filling = Instant::now();
    for turn in 0..turns {
        let prompt =
            json!({"type": "prompt", "agent_id": agent, "message": format!("message {turn}")});
        control.call(prompt, &format!("p-{turn}")).await?;
        control.until(|message| message["type"] == "status" && message["status"] == "idle").await?;
    }
    let fill = filling.elapsed();
    let mut times = Vec::with_capacity(attaches);
    let mut sync_bytes = 0;
    let mut messages = 0;
    for round in 0..attaches {
        let mut client = shard.unix().await?;
        let started = Instant::now();
        let command = json!({"type": "agent.attach", "agent_id": agent, "role": "observer", "id": format!("a-{round}")});
        client.send(&command).await?;
        loop {
            let text = client.recv().await?;
            if text.contains("\"type\":\"sync\"") {
                times.push(started.elapsed());
                sync_bytes = text.len();
                let sync: serde_json::Value = serde_json::from_str(&text)?;
                messages = sync["live_window"]["messages"].as_array().map_or(0, Vec::len);
                break;
            }
        }
    }
    if messages < turns * 2 {
        bail!("the sync held {messages} messages of {}", turns * 2);
    }
    Ok(Resync { messages, fill, attach: times, sync_bytes })
}

/// S6: attaching to a long session, to the end of its sync.
pub async fn run_resync(args: &Args) -> Result<()> {
    let turns = if args.short { 250 } else { 5_000 };
    let quiet = Shard::start(&args.shard, 64, Some("[compaction]\nenabled = false\n")).await?;
    let mut resync = resync(&quiet, turns, 20).await?;
    println!();
    println!(
        "S6 attach-resync: a session of {} messages (filled in {:.1} s)",
        resync.messages,
        resync.fill.as_secs_f64()
    );
    println!(
        "  attach to the end of sync: p50 {:.1} ms, max {:.1} ms (target: under 30 ms for 10,000); sync {:.1} KB on the wire",
        ms(quantile(&mut resync.attach, 0.5)),
        ms(quantile(&mut resync.attach, 1.0)),
        resync.sync_bytes as f64 / 1024.0,
    );
    quiet.stop().await
}
