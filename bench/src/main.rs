//! `shard-bench`: the real `shard` binary against a bare relay, measured in
//! the same run with the same client code (docs/PERFORMANCE.md). Run it with
//! `scripts/bench` (or `scripts/bench --short`, CI's mode). It prints each
//! scenario's figures for both, with their ratio, and fails only when a run
//! breaks (a client missed an event, a process did not start), never on a
//! timing.

mod acp;
mod conn;
mod editor;
mod egress;
mod fanout;
mod fleet;
mod idle;
mod latency;
mod lifecycle;
mod nodes;
mod procfs;
mod relay;
mod report;
mod sandbox;
mod shard;
mod slow;
mod soak;

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Parser;

use fanout::Agent;

#[derive(Parser)]
#[command(about = "Benchmarks of shard against a bare relay, in one run")]
struct Args {
    /// Small counts (CI): the whole run stays well under a minute.
    #[arg(long)]
    short: bool,
    /// The `shard` binary to measure (and whose agent the relay runs).
    #[arg(long, default_value = "target/release/shard")]
    shard: PathBuf,
    /// Run only these scenarios (s1 … s8, acp, bundle, sandbox, egress,
    /// fleet, editor, nodes), comma-separated.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// How long S8, the soak, runs: 1800 s by default, 30 s with --short.
    #[arg(long, value_name = "SECS")]
    soak: Option<u64>,
    /// S1's and ACP's client counts instead of the mode's (for profiling
    /// one point).
    #[arg(long, value_delimiter = ',')]
    clients: Vec<usize>,
    /// Be the scripted ACP agent the ACP scenario runs (on stdin and stdout).
    #[arg(long = "acp-agent", hide = true)]
    acp_agent: bool,
}

impl Args {
    fn wants(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|name| name.eq_ignore_ascii_case(scenario))
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.acp_agent {
        return acp::serve();
    }
    // A thousand clients need more descriptors than the usual soft limit.
    if let Ok((soft, hard)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard);
    }
    let _scratch = shard::ScratchRoot;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(run(args));
    // Every daemon and agent is gone before their directories are.
    drop(runtime);
    result
}

async fn run(args: Args) -> Result<()> {
    let Ok(bin) = args.shard.canonicalize() else {
        bail!("{} is missing: run scripts/build first", args.shard.display());
    };
    let args = Args { shard: bin, ..args };
    println!(
        "shard-bench: {} · {} cores",
        args.shard.display(),
        std::thread::available_parallelism()?
    );
    let mut broken = Vec::new();
    if args.wants("s1") || args.wants("s7") {
        broken.extend(fanout::run(&args, Agent::Shard).await?);
    }
    if args.wants("acp") {
        broken.extend(fanout::run(&args, Agent::Acp).await?);
    }
    if args.wants("s2") {
        broken.extend(latency::run(&args).await?);
    }
    if args.wants("s3") {
        broken.extend(slow::run(&args).await?);
    }
    if args.wants("s5") {
        lifecycle::run_spawn(&args).await?;
    }
    if args.wants("sandbox") {
        sandbox::run(&args).await?;
    }
    if args.wants("egress") {
        egress::run(&args).await?;
    }
    if args.wants("s4") {
        idle::run_scale(&args).await?;
    }
    if args.wants("bundle") {
        idle::run_first_load(&args).await?;
    }
    if args.wants("s6") {
        lifecycle::run_resync(&args).await?;
    }
    if args.wants("fleet") {
        broken.extend(fleet::run(&args).await?);
    }
    if args.wants("editor") {
        broken.extend(editor::run(&args).await?);
    }
    if args.wants("nodes") {
        broken.extend(nodes::run(&args).await?);
    }
    if args.wants("s8") {
        broken.extend(soak::run(&args).await?);
    }
    if !broken.is_empty() {
        bail!("the run is broken: {}", broken.join("; "));
    }
    Ok(())
}
