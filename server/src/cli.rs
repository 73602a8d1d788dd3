//! The `shard` command line, as CONTRACT.md pins it. Subcommands arrive with
//! the issue that implements them, so nothing here is a placeholder.

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
    Daemon(crate::daemon::DaemonArgs),
    /// Ask the running daemon for a new browser enrollment URL.
    Enroll,
    /// List or revoke browser sessions of the running daemon.
    #[command(subcommand)]
    Sessions(crate::admin::SessionsCommand),
    /// Run one headless agent speaking the per-agent protocol on stdio.
    Agent(AgentArgs),
    /// Be an ACP agent on stdio for an editor, each session one of the
    /// running daemon's agents (docs/EDITORS.md).
    Acp(crate::editors::AcpArgs),
    /// Join stdin/stdout to the running daemon's socket, for a hub that
    /// reaches this machine over ssh or kubectl (docs/NODES.md).
    Bridge(crate::bridge::BridgeArgs),
    /// Internal: how the daemon runs an agent that is not Shard's own.
    #[command(hide = true)]
    Guard(crate::guard::GuardArgs),
    /// Internal: the first process inside an agent's sandbox.
    #[command(hide = true)]
    Contain(crate::sandbox::inside::ContainArgs),
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
    /// Offer the model only these tools (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "TOOL,...")]
    pub tools: Option<Vec<String>>,
    /// Append this file's text (at most 64 KiB) to the system prompt.
    #[arg(long, value_name = "PATH")]
    pub system_prompt_file: Option<PathBuf>,
    /// Offer the subagent tools, asking the daemon listening in
    /// $SHARD_HOME to run jobs for this agent id (the daemon sets this).
    #[arg(long, value_name = "AGENT_ID")]
    pub delegate_as: Option<String>,
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    init_logging();
    match cli.command {
        Command::Daemon(args) => {
            seal_keys()?;
            let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
            runtime.block_on(crate::daemon::serve(args))
        }
        Command::Enroll => {
            let runtime = single_threaded()?;
            let url = runtime.block_on(crate::admin::request())?;
            println!("enroll: {url}");
            Ok(())
        }
        Command::Sessions(command) => {
            let runtime = single_threaded()?;
            runtime.block_on(crate::admin::sessions(command))
        }
        Command::Acp(args) => {
            let runtime = single_threaded()?;
            let served = runtime.block_on(crate::editors::run(args));
            // The SDK reads stdin on a blocking thread that only ends when
            // the editor writes or closes: do not wait for it.
            runtime.shutdown_background();
            served
        }
        // The stdin reader blocks its thread until the other side writes
        // or closes: the bridge ends without waiting for it.
        Command::Bridge(args) => crate::bridge::run(args),
        Command::Guard(args) => std::process::exit(crate::guard::run(args)?),
        Command::Contain(args) => std::process::exit(crate::sandbox::inside::run(args)?),
        Command::Agent(args) => {
            seal_keys()?;
            let runtime = single_threaded()?;
            let options = shard_agent::Options {
                cwd: args.cwd,
                model: args.model,
                mode: args.mode,
                session: args.session,
                tools: args.tools,
                system_prompt_file: args.system_prompt_file,
                delegate_as: args.delegate_as,
            };
            let ending = runtime.block_on(shard_agent::run_stdio(options));
            // The log is flushed and the tree killed: do not wait for the
            // blocking stdin read, which only ends when the other side
            // writes or closes (a SIGTERM would otherwise hang here).
            runtime.shutdown_background();
            match ending? {
                shard_agent::Ending::Clean => Ok(()),
                shard_agent::Ending::SessionRefused => {
                    anyhow::bail!("the session could not be opened (see the error event)")
                }
            }
        }
    }
}

/// Takes the keys and every other variable hidden from tools out of this
/// process's environment, before any thread starts (see `shard_agent::keys`).
/// A configuration that cannot be read still hides the usual key names; the
/// daemon or agent then says what is wrong with it.
fn seal_keys() -> anyhow::Result<()> {
    let config = shard_platform::config::shard_home()
        .and_then(|home| shard_platform::config::Config::load(&home))
        .unwrap_or_else(|_| shard_platform::config::Config::builtin());
    shard_agent::keys::seal(&config.hidden_env)
}

/// A one-thread runtime: enough for a command-line client or one agent, and
/// it keeps each agent process small when a daemon runs many of them.
fn single_threaded() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

/// Logs go to stderr (stdout carries the lines CONTRACT.md pins), filtered by
/// `SHARD_LOG` (e.g. `SHARD_LOG=debug`), `info` by default.
fn init_logging() {
    let mut filter =
        EnvFilter::try_from_env("SHARD_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Log hygiene: the HTTP and WebSocket stacks can print request headers
    // (Cookie, Set-Cookie, Sec-WebSocket-Protocol with its ticket) at their
    // most verbose levels; they never get past `info`, whatever SHARD_LOG says.
    for directive in [
        "hyper=info",
        "hyper_util=info",
        "h2=info",
        "tungstenite=info",
        "tokio_tungstenite=info",
        "axum=info",
        "tower_http=info",
        "reqwest=info",
    ] {
        if let Ok(directive) = directive.parse() {
            filter = filter.add_directive(directive);
        }
    }
    // A second init (tests calling `run` twice) is harmless: keep the first.
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
