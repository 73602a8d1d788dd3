//! `shard-bench`: the real `shard` binary against a bare relay, measured in
//! the same run with the same client code (docs/PERFORMANCE.md). Run it with
//! `scripts/bench` (or `scripts/bench --short`, CI's mode). It prints each
//! scenario's figures for both, with their ratio, and fails only when a run
//! breaks (a client missed an event, a process did not start), never on a
//! timing.

mod conn;
mod fanout;
mod idle;
mod lifecycle;
mod relay;
mod shard;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;

use fanout::Transport;

#[derive(Parser)]
#[command(about = "Benchmarks of shard against a bare relay, in one run")]
struct Args {
    /// Small counts (CI): the whole run stays well under a minute.
    #[arg(long)]
    short: bool,
    /// The `shard` binary to measure (and whose agent the relay runs).
    #[arg(long, default_value = "target/release/shard")]
    shard: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

fn ratio(shard: f64, baseline: f64) -> String {
    if baseline > 0.0 { format!("{:.2}x", shard / baseline) } else { "-".to_owned() }
}

fn ms(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn per_second(value: f64) -> String {
    if value >= 1e6 { format!("{:.2} M/s", value / 1e6) } else { format!("{:.0} k/s", value / 1e3) }
}

async fn run(args: Args) -> Result<()> {
    let Ok(bin) = args.shard.canonicalize() else {
        bail!("{} is missing: run scripts/build first", args.shard.display());
    };
    let args = Args { shard: bin, ..args };
    let (counts, deltas): (&[usize], u64) =
        if args.short { (&[1, 10, 50], 2_000) } else { (&[1, 10, 100, 1_000], 10_000) };
    let max_clients = counts.iter().copied().max().unwrap_or(1);
    let daemon = shard::Shard::start(&args.shard, 2 * max_clients + 64, None).await?;
    println!(
        "shard-bench: {} · {} cores",
        args.shard.display(),
        std::thread::available_parallelism()?
    );
    println!();
    println!(
        "S1 fan-out: one agent's `burst: {deltas}` turn to N clients (deliveries/s, the median of 3; every client must get every delta)"
    );
    println!(
        "{:>6} | {:>12} | {:>12} | {:>12} | {:>6} | all delivered",
        "N", "shard ws", "relay ws", "shard unix", "ratio"
    );
    let mut broken = false;
    let mut wire = None;
    for &clients in counts {
        // Each point is the median of three turns: one turn is noisy.
        let (mut ws_runs, mut unix_runs, mut relay_runs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..3 {
            ws_runs.push(fanout::shard(&daemon, clients, deltas, Transport::WebSocket).await?);
            // The daemon takes at most 64 local connections (one is the
            // controller's): beyond that the unix column stays empty.
            if clients < 64 {
                unix_runs.push(fanout::shard(&daemon, clients, deltas, Transport::Unix).await?);
            }
            relay_runs.push(fanout::relay(&args.shard, clients, deltas).await?);
        }
        let over_ws = fanout::median(ws_runs).context("runs")?;
        let over_unix = fanout::median(unix_runs);
        let baseline = fanout::median(relay_runs).context("runs")?;
        let unix_complete = over_unix.is_none_or(|outcome| outcome.complete);
        let all = over_ws.complete && unix_complete && baseline.complete;
        broken |= !all;
        println!(
            "{clients:>6} | {:>12} | {:>12} | {:>12} | {:>6} | {}",
            per_second(over_ws.deliveries_per_second()),
            per_second(baseline.deliveries_per_second()),
            over_unix.map_or("-".to_owned(), |outcome| per_second(outcome.deliveries_per_second())),
            ratio(over_ws.deliveries_per_second(), baseline.deliveries_per_second()),
            if all {
                "yes".to_owned()
            } else {
                let unix = over_unix.map_or(0, |outcome| outcome.short);
                format!("NO: {} / {} / {unix} short", over_ws.short, baseline.short)
            },
        );
        if let Some(over_unix) = over_unix {
            wire.get_or_insert((over_ws, over_unix, baseline));
        }
    }
    if let Some((over_ws, over_unix, baseline)) = wire {
        println!();
        println!("S7 wire: bytes per delta as a client reads it, against the agent's own line");
        println!("  agent line (what the relay sends): {:.1} B", baseline.bytes_per_delta);
        println!(
            "  shard over WebSocket: {:.1} B ({})",
            over_ws.bytes_per_delta,
            ratio(over_ws.bytes_per_delta, baseline.bytes_per_delta)
        );
        println!(
            "  shard over unix:      {:.1} B ({})",
            over_unix.bytes_per_delta,
            ratio(over_unix.bytes_per_delta, baseline.bytes_per_delta)
        );
    }

    let agents = if args.short { 10 } else { 100 };
    let mut spawn = lifecycle::spawn(&daemon, &args.shard, agents).await?;
    let (create50, create99) =
        (lifecycle::quantile(&mut spawn.create, 0.5), lifecycle::quantile(&mut spawn.create, 0.99));
    let (bare50, bare99) =
        (lifecycle::quantile(&mut spawn.bare, 0.5), lifecycle::quantile(&mut spawn.bare, 0.99));
    println!();
    println!("S5 spawn: {agents} agents, until ready (p50 / p99)");
    println!("  shard agent.create:           {:>7.1} ms / {:>7.1} ms", ms(create50), ms(create99));
    println!("  bare `shard agent --stdio`:   {:>7.1} ms / {:>7.1} ms", ms(bare50), ms(bare99));
    println!(
        "  p50 over the bare spawn: {:+.1} ms (target: at most +5 ms)",
        ms(create50) - ms(bare50)
    );

    let (connections, idle_agents) = if args.short { (100, 10) } else { (1_000, 200) };
    // A daemon of its own: one that served the runs above keeps their
    // freed memory, which idle connections would reuse unseen.
    let fresh = shard::Shard::start(&args.shard, connections + 64, None).await?;
    let idle = idle::idle(&fresh, connections, idle_agents, fanout::next_loopback).await?;
    fresh.stop().await?;
    let agent_rss: Vec<f64> = idle.per_agent.iter().map(|bytes| *bytes as f64 / 1e6).collect();
    let mean = agent_rss.iter().sum::<f64>() / agent_rss.len().max(1) as f64;
    let most = agent_rss.iter().copied().fold(0.0, f64::max);
    println!();
    println!("S4 idle scale");
    println!(
        "  {} idle WebSocket connections: {:.1} KB of daemon RSS each (target: at most 16 KB)",
        idle.connections,
        idle.per_connection / 1024.0
    );
    println!(
        "  {} idle agents: {:.1} MB RSS each on average, {:.1} MB at most (target: at most 8 MB)",
        idle.agents, mean, most
    );

    println!();
    println!("First page load (asking for br, gzip as a browser does)");
    let mut total = (0, 0);
    for (path, raw, wire, encoding) in idle::first_load(&daemon).await? {
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
    daemon.stop().await?;

    let turns = if args.short { 250 } else { 5_000 };
    let quiet =
        shard::Shard::start(&args.shard, 64, Some("[compaction]\nenabled = false\n")).await?;
    let mut resync = lifecycle::resync(&quiet, turns, 20).await?;
    println!();
    println!(
        "S6 attach-resync: a session of {} messages (filled in {:.1} s)",
        resync.messages,
        resync.fill.as_secs_f64()
    );
    println!(
        "  attach to the end of sync: p50 {:.1} ms, max {:.1} ms (target: under 30 ms for 10,000); sync {:.1} KB on the wire",
        ms(lifecycle::quantile(&mut resync.attach, 0.5)),
        ms(lifecycle::quantile(&mut resync.attach, 1.0)),
        resync.sync_bytes as f64 / 1024.0,
    );
    quiet.stop().await?;
    if broken {
        bail!("a client missed events: the run is broken");
    }
    Ok(())
}
