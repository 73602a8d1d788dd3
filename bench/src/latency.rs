//! S2 latency, and the paced turns S3 ([`crate::slow`]) measures with too.
//! Agents stream `pace: N RATE` turns (the demo model stamps each delta
//! with the wall-clock time it made it); every client reads them and takes,
//! per delta, the time from that stamp to its own read. Client and agents
//! share the machine's clock.
//!
//! S2: `agents` agents at a fixed total rate to `clients` clients, each
//! client attached to every agent (a dashboard watching them all).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::json;

use crate::Args;
use crate::conn::{Conn, next_loopback};
use crate::relay::{Relay, leave};
use crate::shard::{Shard, attach};

/// The paced turn one point runs: how many agents, at what total rate, for
/// how long, to how many clients.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub agents: usize,
    pub clients: usize,
    /// Deltas a second, all agents together.
    pub rate: u64,
    pub seconds: f64,
}

impl Load {
    fn per_agent_rate(&self) -> u64 {
        (self.rate / self.agents as u64).max(1)
    }

    /// Deltas each agent streams.
    pub fn per_agent(&self) -> u64 {
        ((self.per_agent_rate() as f64 * self.seconds).round() as u64).max(1)
    }

    pub(crate) fn prompt(&self) -> String {
        format!("pace: {} {}", self.per_agent(), self.per_agent_rate())
    }
}

/// What one client read of the paced turns.
#[derive(Debug, Default)]
pub struct Paced {
    /// Microseconds from each delta's stamp to its read.
    pub latencies: Vec<u32>,
    pub first: Option<Instant>,
    pub last: Option<Instant>,
}

impl Paced {
    fn rate(&self) -> f64 {
        match (self.first, self.last) {
            (Some(first), Some(last)) if last > first => {
                self.latencies.len() as f64 / (last - first).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_micros() as u64)
}

/// The stamp of a `tick-I@MICROS ` delta.
fn stamp(text: &str) -> Option<u64> {
    let start = text.find("\"text_delta\":\"tick-")?;
    let rest = &text[start..];
    let at = rest.find('@')?;
    let digits = &rest[at + 1..];
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Reads until `turns` messages are complete.
pub async fn read_paced(conn: &mut Conn, turns: usize) -> Result<Paced> {
    let mut paced = Paced::default();
    let mut complete = 0;
    while complete < turns {
        let text = conn.recv().await?;
        if text.contains("\"message_delta\"") {
            let now = now_micros();
            let at = Instant::now();
            let stamp = stamp(&text).context("a paced delta without its stamp")?;
            paced.latencies.push(now.saturating_sub(stamp).min(u64::from(u32::MAX)) as u32);
            paced.first.get_or_insert(at);
            paced.last = Some(at);
        } else if text.contains("\"message_complete\"") {
            complete += 1;
        } else if text.contains("\"fatal\":true") {
            anyhow::bail!("the daemon closed the connection: {text}");
        }
    }
    Ok(paced)
}

/// One point's figures, over every reading client.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The median client's deltas a second.
    pub per_client: f64,
    /// Clients that got fewer deltas than were sent (or were cut off).
    pub short: usize,
}

pub(crate) fn figures(reads: &[Option<Paced>], expected: u64) -> Figures {
    let mut all: Vec<u32> =
        reads.iter().flatten().flat_map(|paced| paced.latencies.iter().copied()).collect();
    all.sort_unstable();
    let at = |q: f64| {
        all.get(((all.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0) as f64 / 1e3
    };
    let mut rates: Vec<f64> = reads.iter().flatten().map(Paced::rate).collect();
    rates.sort_by(f64::total_cmp);
    let short = reads
        .iter()
        .filter(|read| read.as_ref().is_none_or(|paced| paced.latencies.len() as u64 != expected))
        .count();
    Figures {
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
        per_client: rates.get(rates.len() / 2).copied().unwrap_or(0.0),
        short,
    }
}

pub(crate) async fn read_all(readers: Vec<Conn>, turns: usize) -> Vec<Option<Paced>> {
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|mut conn| tokio::spawn(async move { read_paced(&mut conn, turns).await.ok() }))
        .collect();
    let mut reads = Vec::with_capacity(tasks.len());
    for task in tasks {
        reads.push(task.await.ok().flatten());
    }
    reads
}

/// S2 through Shard: `load.clients` browsers, each attached to every agent.
pub async fn shard(shard: &Shard, load: Load) -> Result<Figures> {
    let mut control = shard.unix().await?;
    let mut agents = Vec::with_capacity(load.agents);
    for _ in 0..load.agents {
        let agent = shard.create_agent(&mut control).await?;
        attach(&mut control, &agent, "interactive").await?;
        agents.push(agent);
    }
    let mut readers = Vec::with_capacity(load.clients);
    for _ in 0..load.clients {
        let mut conn = shard.websocket(next_loopback()).await?;
        for agent in &agents {
            attach(&mut conn, agent, "observer").await.context("attaching a reader")?;
        }
        readers.push(conn);
    }
    let reading = tokio::spawn(read_all(readers, load.agents));
    for agent in &agents {
        let prompt = json!({"type": "prompt", "agent_id": agent, "message": load.prompt()});
        control.call(prompt, "prompt").await.context("prompting")?;
    }
    // The controller leaves once the turns run: only the readers read.
    for agent in &agents {
        let detach = json!({"type": "agent.detach", "agent_id": agent});
        control.call(detach, "detach").await.context("detaching the controller")?;
    }
    let reads = reading.await?;
    for agent in &agents {
        let kill = json!({"type": "agent.kill", "agent_id": agent, "force": true});
        let _ = control.call(kill, "kill").await;
    }
    Ok(figures(&reads, load.per_agent() * load.agents as u64))
}

/// S2 through the bare relay: one relay of `load.agents` children.
pub async fn relay(bin: &std::path::Path, load: Load) -> Result<Figures> {
    let relay = Relay::start(bin, load.agents).await?;
    let mut control = relay.client(None).await?;
    let mut readers = Vec::with_capacity(load.clients);
    for _ in 0..load.clients {
        readers.push(relay.client(None).await?);
    }
    relay.wait_for(load.clients + 1).await?;
    let reading = tokio::spawn(read_all(readers, load.agents));
    for agent in 0..load.agents {
        let prompt = json!({"type": "prompt", "id": format!("p{agent}"), "agent": agent, "message": load.prompt()});
        control.send(&prompt).await?;
    }
    // As through Shard, the controller leaves: only the readers read.
    leave(control, load.agents).await?;
    let reads = reading.await?;
    relay.stop().await;
    Ok(figures(&reads, load.per_agent() * load.agents as u64))
}

/// S2: latency at three total rates, Shard against the relay, one row
/// each. Returns what broke (a client that missed deltas).
pub async fn run(args: &Args) -> Result<Vec<String>> {
    let (clients, seconds) = if args.short { (10, 1.0) } else { (100, 5.0) };
    let agents = 20;
    let daemon = Shard::start(&args.shard, clients + 64, None).await?;
    println!();
    println!(
        "S2 latency: {agents} agents at a fixed total rate for {seconds} s to {clients} clients, each attached to all (ms from the agent making a delta to a client reading it, over every delivery)"
    );
    println!(
        "{:>8} | {:>22} | {:>22} | {:>16} | all delivered",
        "rate/s", "shard p50 / p99 / max", "relay p50 / p99 / max", "p99 over relay"
    );
    let mut broken = Vec::new();
    // 10,000 a second to 100 clients is a million deliveries a second, one
    // message at a time: beyond what these two cores do with the clients on
    // them, for the relay too (docs/PERFORMANCE.md); 3,000 shows the knee.
    for rate in [1_000, 3_000, 10_000] {
        let load = Load { agents, clients, rate, seconds };
        let over_shard = shard(&daemon, load).await?;
        let baseline = relay(&args.shard, load).await?;
        let all = over_shard.short == 0 && baseline.short == 0;
        if !all {
            broken.push(format!("S2 at {rate}/s: a client missed deltas"));
        }
        let triple = |figures: &Figures| {
            format!("{:.2} / {:.2} / {:.1}", figures.p50_ms, figures.p99_ms, figures.max_ms)
        };
        println!(
            "{rate:>8} | {:>22} | {:>22} | {:>13.2} ms | {}",
            triple(&over_shard),
            triple(&baseline),
            over_shard.p99_ms - baseline.p99_ms,
            if all {
                "yes".to_owned()
            } else {
                format!("NO: {} / {} short", over_shard.short, baseline.short)
            }
        );
    }
    println!("  target: p99 within the relay's p99 + 1 ms at 10,000/s");
    daemon.stop().await?;
    Ok(broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_read_from_the_delta_text() {
        let line = r#"{"agent_id":"a","type":"message_delta","message_id":"m","block_index":0,"kind":"text","text_delta":"tick-12@1764600000123456 "}"#;
        assert_eq!(stamp(line), Some(1_764_600_000_123_456));
        assert_eq!(stamp(r#"{"type":"message_delta","text_delta":"hello"}"#), None);
    }
}
