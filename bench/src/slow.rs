//! S3 slow client: one agent's paced turn (S2's, [`crate::latency`]) to
//! `clients` readers, with and without one more client that never reads.
//! The readers must not notice it; the daemon must drop it, and its memory
//! must stay bounded meanwhile. The relay runs the same rounds for the
//! readers' figures alone (it stops feeding a full client but never closes
//! one).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::Args;
use crate::conn::{Conn, next_loopback};
use crate::latency::{Figures, Load, figures, read_all};
use crate::procfs;
use crate::relay::{Relay, leave};
use crate::report::median;
use crate::shard::{Shard, attach};

/// S3: rounds without and with a stalled client, Shard against the relay.
/// Returns what broke (a reader that missed deltas, a stalled client the
/// daemon kept).
pub async fn run(args: &Args) -> Result<Vec<String>> {
    let (clients, rate, seconds) = if args.short { (10, 20_000, 2.0) } else { (50, 5_000, 12.0) };
    let load = Load { agents: 1, clients, rate, seconds };
    let daemon = Shard::start(&args.shard, clients + 64, None).await?;
    println!();
    println!(
        "S3 slow client: one agent's `pace: {} {rate}` to {clients} readers, without and with one more client that never reads",
        load.per_agent()
    );
    // One run's p99 on two shared cores swings with a single scheduling
    // hiccup (a 100 ms stall is 500 late deltas), so the comparison is of
    // medians over rounds, each with both variants back to back.
    let rounds = if args.short { 1 } else { 5 };
    let measured = Rounds::measure(&daemon, &args.shard, load, rounds).await?;
    daemon.stop().await?;
    measured.print_readers();
    measured.print_stalled();
    Ok(measured.broken())
}

/// Every round's runs, without (calm) and with (stormy) the stalled
/// client, through Shard and through the relay.
struct Rounds {
    calm: Vec<SlowRun>,
    stormy: Vec<SlowRun>,
    relay_calm: Vec<Figures>,
    relay_stormy: Vec<Figures>,
}

/// The readers' figures over the rounds: the medians, and each round's p99.
struct Medians {
    rate: f64,
    p99: f64,
    each: Vec<f64>,
}

impl Medians {
    fn of<'a>(readers: impl Iterator<Item = &'a Figures> + Clone) -> Medians {
        let mut rates: Vec<f64> = readers.clone().map(|readers| readers.per_client).collect();
        let each: Vec<f64> = readers.map(|readers| readers.p99_ms).collect();
        Medians { rate: median(&mut rates), p99: median(&mut each.clone()), each }
    }
}

impl Rounds {
    async fn measure(
        daemon: &Shard,
        bin: &std::path::Path,
        load: Load,
        rounds: usize,
    ) -> Result<Rounds> {
        let (mut calm, mut stormy, mut relay_calm, mut relay_stormy) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            calm.push(slow_shard(daemon, load, false).await?);
            stormy.push(slow_shard(daemon, load, true).await?);
            relay_calm.push(slow_relay(bin, load, false).await?);
            relay_stormy.push(slow_relay(bin, load, true).await?);
        }
        Ok(Rounds { calm, stormy, relay_calm, relay_stormy })
    }

    /// The readers' throughput and p99 each way, and what the stalled
    /// client changed for them through Shard.
    fn print_readers(&self) {
        let shard = |runs: &[SlowRun]| Medians::of(runs.iter().map(|run| &run.readers));
        let (calm, stormy) = (shard(&self.calm), shard(&self.stormy));
        let (relay_calm, relay_stormy) =
            (Medians::of(self.relay_calm.iter()), Medians::of(self.relay_stormy.iter()));
        println!(
            "{:>18} | {:>14} | {:>10} | {:>14} | {:>10} | each round's p99 (Shard)",
            "", "shard deltas/s", "p99 ms", "relay deltas/s", "p99 ms"
        );
        for (name, shard, relay) in
            [("without", &calm, &relay_calm), ("with the stalled", &stormy, &relay_stormy)]
        {
            let each: Vec<String> = shard.each.iter().map(|p99| format!("{p99:.1}")).collect();
            println!(
                "{name:>18} | {:>14.0} | {:>10.2} | {:>14.0} | {:>10.2} | {}",
                shard.rate,
                shard.p99,
                relay.rate,
                relay.p99,
                each.join(", ")
            );
        }
        let change =
            |with: f64, without: f64| 100.0 * (with - without) / without.max(f64::MIN_POSITIVE);
        println!(
            "  shard readers with the stalled client (medians of {}): throughput {:+.1} %, p99 {:+.1} % (target: within 10 %)",
            self.calm.len(),
            change(stormy.rate, calm.rate),
            change(stormy.p99, calm.p99),
        );
    }

    /// Whether the daemon dropped the stalled client every round.
    fn dropped(&self) -> bool {
        self.stormy.iter().all(|run| run.stalled == Some(Stalled::Dropped))
    }

    /// How the stalled client ended, and the daemon's memory meanwhile.
    fn print_stalled(&self) {
        let rss = |runs: &[SlowRun]| {
            runs.iter().map(|run| run.rss_peak as f64 - run.rss_before as f64).fold(0.0, f64::max)
        };
        println!(
            "  the stalled client: {}; daemon RSS {:.1} MB before the first round, at most {:+.1} MB during one with it (its outbox is capped at 4 MiB), {:+.1} MB without it",
            if self.dropped() { "dropped every round" } else { "NOT dropped" },
            self.stormy[0].rss_before as f64 / 1e6,
            rss(&self.stormy) / 1e6,
            rss(&self.calm) / 1e6,
        );
    }

    fn broken(&self) -> Vec<String> {
        let mut broken = Vec::new();
        if self.calm.iter().chain(&self.stormy).any(|run| run.readers.short > 0) {
            broken.push("S3: a reader missed deltas".to_owned());
        }
        if !self.dropped() {
            let stalled: Vec<_> = self.stormy.iter().map(|run| run.stalled).collect();
            broken.push(format!("S3: the stalled client was not dropped ({stalled:?})"));
        }
        broken
    }
}

/// How a stalled client ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stalled {
    /// The daemon closed it.
    Dropped,
    /// It got the whole turn: the socket buffers held everything.
    Complete,
    /// Neither: its connection stayed open with nothing more to read.
    Stuck,
}

/// One S3 run: the readers' figures, and with a stalled client, how it
/// ended and the daemon's memory over the run.
#[derive(Debug, Clone, Copy)]
pub struct SlowRun {
    pub readers: Figures,
    pub stalled: Option<Stalled>,
    pub rss_before: u64,
    pub rss_peak: u64,
}

/// S3 through Shard: one agent's paced turn to `load.clients` readers,
/// and, if `stall`, one more client that never reads (with a small kernel
/// buffer, as a frozen tab's socket fills).
pub async fn slow_shard(shard: &Shard, load: Load, stall: bool) -> Result<SlowRun> {
    let mut control = shard.unix().await?;
    let agent = shard.create_agent(&mut control).await?;
    attach(&mut control, &agent, "interactive").await?;
    let mut readers = Vec::with_capacity(load.clients);
    for _ in 0..load.clients {
        let mut conn = shard.websocket(next_loopback()).await?;
        attach(&mut conn, &agent, "observer").await?;
        readers.push(conn);
    }
    let mut stalled = None;
    if stall {
        let mut conn = shard.websocket_with(next_loopback(), Some(4096)).await?;
        attach(&mut conn, &agent, "observer").await?;
        stalled = Some(conn);
    }
    let pid = shard.pid().context("the daemon's pid")?;
    let rss_before = procfs::rss(pid)?;
    let (peak, sampling) = (Arc::new(AtomicU64::new(rss_before)), Arc::new(AtomicBool::new(true)));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Ok(rss) = procfs::rss(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let reading = tokio::spawn(read_all(readers, 1));
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": load.prompt()});
    control.call(prompt, "prompt").await?;
    // The controller leaves once the turn runs: only the readers read.
    control.call(json!({"type": "agent.detach", "agent_id": agent}), "detach").await?;
    let reads = reading.await?;
    let ended = match stalled {
        Some(conn) => Some(stalled_outcome(&mut control, conn).await?),
        None => None,
    };
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    let kill = json!({"type": "agent.kill", "agent_id": agent, "force": true});
    let _ = control.call(kill, "kill").await;
    Ok(SlowRun {
        readers: figures(&reads, load.per_agent()),
        stalled: ended,
        rss_before,
        rss_peak: peak.load(Ordering::Relaxed),
    })
}

/// S3 through the relay, for the readers' figures alone: the relay stops
/// feeding a client whose queue is full but has no deadline to close it.
pub async fn slow_relay(bin: &std::path::Path, load: Load, stall: bool) -> Result<Figures> {
    let relay = Relay::start(bin, 1).await?;
    let mut control = relay.client(None).await?;
    let mut readers = Vec::with_capacity(load.clients);
    for _ in 0..load.clients {
        readers.push(relay.client(None).await?);
    }
    let stalled = if stall { Some(relay.client(Some(4096)).await?) } else { None };
    relay.wait_for(load.clients + 1 + usize::from(stall)).await?;
    let reading = tokio::spawn(read_all(readers, 1));
    control.send(&json!({"type": "prompt", "id": "p", "message": load.prompt()})).await?;
    leave(control, 1).await?;
    let reads = reading.await?;
    drop(stalled);
    relay.stop().await;
    Ok(figures(&reads, load.per_agent()))
}

/// Reads what a stalled client was sent until the daemon's close, or the
/// end of the turn if everything fit in the buffers.
/// Whether the daemon dropped the stalled client, asked of the daemon: the
/// client itself would learn it only after reading what the kernel still
/// holds for it, through a 4 KiB window, which can take minutes. Once the
/// readers are gone, a dropped client leaves only `control` connected.
async fn stalled_outcome(control: &mut Conn, mut stalled: Conn) -> Result<Stalled> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        let stats = control.call(json!({"type": "daemon.stats"}), "stats").await?;
        if stats["data"]["connections"].as_u64() == Some(1) {
            return Ok(Stalled::Dropped);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Still connected: it got the whole turn, or it is stuck.
    Ok(drain(&mut stalled).await)
}

async fn drain(conn: &mut Conn) -> Stalled {
    loop {
        match conn.recv().await {
            Ok(text) if text.contains("\"message_complete\"") => return Stalled::Complete,
            Ok(_) => {}
            Err(error) if error.to_string().starts_with("no message") => return Stalled::Stuck,
            Err(_) => return Stalled::Dropped,
        }
    }
}
