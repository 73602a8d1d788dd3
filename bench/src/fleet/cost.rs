//! What a fleet costs, read from `/proc` by the benchmark: the memory of
//! the daemon and of every process below it, their CPU over an idle
//! stretch, and what the daemon's sampling costs, measured by running the
//! same code (`shard_platform::resources`) here against the live processes.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use shard_platform::resources::Snapshot;

use super::watch::Held;
use crate::procfs::{children, cpu_ns, descendants, memory};

/// How often the daemon looks at its agents' processes
/// (`SAMPLE_EVERY` in server/src/agents/fleet/mod.rs).
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// The daemon's own memory, and every process below it summed.
pub fn held(daemon: u32) -> Result<(Held, Held, usize)> {
    let own = memory(daemon).context("the daemon's smaps_rollup")?;
    let mut agents = Held::default();
    let below = descendants(daemon);
    for pid in &below {
        // A process that ended between the two reads counts for nothing.
        let Ok(used) = memory(*pid) else { continue };
        agents.rss += used.rss;
        agents.pss += used.pss;
    }
    Ok((Held { rss: own.rss, pss: own.pss }, agents, below.len()))
}

/// CPU time so far: the daemon's from `/proc/<pid>/stat` (ticks, as the
/// fleet's own figures are taken) and from the scheduler (`schedstat`,
/// nanoseconds), and every process below it (scheduler).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    pub daemon_stat: Duration,
    pub daemon: Duration,
    pub agents: Duration,
}

impl Cpu {
    pub fn now(daemon: u32) -> Cpu {
        let below: u64 = descendants(daemon).into_iter().map(cpu_ns).sum();
        Cpu {
            daemon_stat: stat_time(daemon),
            daemon: Duration::from_nanos(cpu_ns(daemon)),
            agents: Duration::from_nanos(below),
        }
    }

    /// What was used from `before` to `self`.
    pub fn since(self, before: Cpu) -> Cpu {
        Cpu {
            daemon_stat: self.daemon_stat.saturating_sub(before.daemon_stat),
            daemon: self.daemon.saturating_sub(before.daemon),
            agents: self.agents.saturating_sub(before.agents),
        }
    }
}

/// `utime` + `stime` of `/proc/<pid>/stat`.
fn stat_time(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // After the command's closing parenthesis, `utime` and `stime` are the
    // 12th and 13th fields.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12].iter().filter_map(|&at| fields.get(at)?.parse::<u64>().ok()).sum();
    let per_second = shard_platform::resources::ticks_per_second();
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// What one look costs: the fleet's `Snapshot::take()` and a usage lookup
/// of each tree the daemon started, and of the daemon itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Look {
    pub looks: u32,
    /// This thread's CPU per look, and of it: `Snapshot::take()` (every
    /// process's `stat`), the trees' usage (`smaps_rollup` of each process
    /// in them), the daemon's own.
    pub cpu: Duration,
    pub take: Duration,
    pub trees_cpu: Duration,
    pub daemon: Duration,
    pub wall: Duration,
    /// The trees looked at (the daemon's children) and the live processes
    /// in them.
    pub trees: usize,
    pub processes: u32,
    /// Every process the snapshot read.
    pub machine: usize,
}

impl Look {
    /// CPU per second per agent, in microseconds, if the daemon looked every
    /// [`SAMPLE_EVERY`] with `agents` agents.
    pub fn per_agent_second(&self, agents: usize) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / SAMPLE_EVERY.as_secs_f64() / agents.max(1) as f64
    }
}

/// Takes the daemon's look at its fleet again and again, for at least
/// `at_least` and `looks` times, on a thread of its own so that its CPU
/// time is this work's alone.
pub async fn look(daemon: u32, looks: u32, at_least: Duration) -> Result<Look> {
    let measured = tokio::task::spawn_blocking(move || -> Result<Look> {
        let roots = children(daemon);
        let machine = std::fs::read_dir("/proc")?
            .filter(|entry| {
                entry.as_ref().is_ok_and(|entry| {
                    entry.file_name().to_str().is_some_and(|name| name.parse::<u32>().is_ok())
                })
            })
            .count();
        let mut processes = 0;
        // Once before, so that the page cache and the allocator are warm.
        let _ = Snapshot::take();
        let (cpu_before, wall_before) = (thread_cpu()?, Instant::now());
        let mut done = 0;
        // Each part's CPU, then one look's in all.
        let mut parts = [Duration::ZERO; 3];
        while done < looks || wall_before.elapsed() < at_least {
            let started = thread_cpu()?;
            let snapshot = Snapshot::take();
            let taken = thread_cpu()?;
            processes = 0;
            for &root in &roots {
                if let Some(usage) = snapshot.usage(root) {
                    processes += usage.processes;
                }
            }
            let looked = thread_cpu()?;
            std::hint::black_box(snapshot.process(daemon));
            let ended = thread_cpu()?;
            for (part, [from, to]) in
                parts.iter_mut().zip([[started, taken], [taken, looked], [looked, ended]])
            {
                *part += to - from;
            }
            done += 1;
        }
        let (cpu, wall) = (thread_cpu()? - cpu_before, wall_before.elapsed());
        let [take, trees_cpu, own] = parts.map(|part| part / done);
        Ok(Look {
            looks: done,
            cpu: cpu / done,
            take,
            trees_cpu,
            daemon: own,
            wall: wall / done,
            trees: roots.len(),
            processes,
            machine,
        })
    });
    measured.await?
}

/// This thread's CPU time so far, user and system.
fn thread_cpu() -> Result<Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_THREAD)?;
    let of = |time: nix::sys::time::TimeVal| {
        Duration::from_secs(time.tv_sec() as u64) + Duration::from_micros(time.tv_usec() as u64)
    };
    Ok(of(usage.user_time()) + of(usage.system_time()))
}
