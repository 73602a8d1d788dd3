//! The `shard` command line, as CONTRACT.md pins it. Subcommands arrive with
//! the issue that implements them, so nothing here is a placeholder.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "shard", version, about = "Run and supervise many coding agents from a browser")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the daemon: serves the web client on loopback.
    Daemon(DaemonArgs),
    /// Ask the running daemon for a new browser enrollment URL.
    Enroll,
    /// Run one headless agent speaking the per-agent protocol on stdio.
    Agent(AgentArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Speak JSONL on stdin/stdout (the only transport an agent has).
    #[arg(long, required = true)]
    pub stdio: bool,
    /// The working directory (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// A model id from the catalog (default: config.toml's, else `demo`).
    #[arg(long)]
    pub model: Option<String>,
    /// `build` (default) or `plan`.
    #[arg(long)]
    pub mode: Option<String>,
    /// Resume this session instead of starting a new one.
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DaemonArgs {
    /// TCP port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Stop an agent's process after this many seconds idle (or in error);
    /// it is restored on attach or new work.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub idle_runtime_timeout: u64,
    /// How long a question stays open once nobody is attached to answer it,
    /// before it is denied.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub headless_timeout: u64,
}

impl DaemonArgs {
    pub fn bind_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    init_logging();
    match cli.command {
        Command::Daemon(args) => {
            let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
            runtime.block_on(crate::daemon::serve(args))
        }
        Command::Enroll => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the runtime")?;
            let url = runtime.block_on(crate::enroll::request())?;
            println!("enroll: {url}");
            Ok(())
        }
        Command::Agent(args) => {
            // One thread is plenty for one agent, and keeps each agent process
            // small when a daemon runs many of them.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the runtime")?;
            let options = shard_agent::Options {
                cwd: args.cwd,
                model: args.model,
                mode: args.mode,
                session: args.session,
            };
            match runtime.block_on(shard_agent::run_stdio(options))? {
                shard_agent::Ending::Clean => Ok(()),
                shard_agent::Ending::SessionRefused => {
                    anyhow::bail!("the session could not be opened (see the error event)")
                }
            }
        }
    }
}

/// Logs go to stderr (stdout carries the lines CONTRACT.md pins), filtered by
/// `SHARD_LOG` (e.g. `SHARD_LOG=debug`), `info` by default.
fn init_logging() {
    let filter = EnvFilter::try_from_env("SHARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // A second init (tests calling `run` twice) is harmless: keep the first.
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
