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
    Daemon(DaemonArgs),
    /// Ask the running daemon for a new browser enrollment URL.
    Enroll,
    /// List or revoke browser sessions of the running daemon.
    #[command(subcommand)]
    Sessions(SessionsCommand),
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
    /// TCP port; 0 picks a free one.
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// The address to listen on (an IP literal). Anything but 127.0.0.1 is
    /// remote mode: --public-host and --allowed-origin become required.
    #[arg(long, value_name = "IP")]
    pub web_host: Option<String>,
    /// The HOST:PORT browsers use to reach the daemon (remote modes).
    #[arg(long, value_name = "HOST:PORT")]
    pub public_host: Option<String>,
    /// An origin (scheme://host[:port]) allowed to use the daemon (remote
    /// modes); repeat for several.
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// Accept remote access over plain http: the session cookie can then be
    /// read by anyone on the network path.
    #[arg(long)]
    pub allow_insecure_remote: bool,
    /// Trust X-Forwarded-Proto/-Host from this peer only: `loopback` or one IP.
    #[arg(long, value_name = "UPSTREAM")]
    pub trust_proxy: Option<String>,
    /// The header a trusted proxy sets to the original scheme.
    #[arg(long, value_name = "NAME", default_value = "X-Forwarded-Proto")]
    pub forwarded_proto_header: String,
    /// The header a trusted proxy sets to the original Host.
    #[arg(long, value_name = "NAME", default_value = "X-Forwarded-Host")]
    pub forwarded_host_header: String,
    /// Stop an agent's process after this many seconds idle (or in error);
    /// it is restored on attach or new work.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub idle_runtime_timeout: u64,
    /// How long a question stays open once nobody is attached to answer it,
    /// before it is denied.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub headless_timeout: u64,
    /// Seconds between WebSocket pings; a client silent for 2.5 intervals is
    /// dropped.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_ping_interval: u64,
    /// A browser session unused this long must enroll again (default 7 days).
    #[arg(long, value_name = "SECS", default_value_t = 7 * 24 * 3600)]
    pub session_idle_timeout: u64,
    /// A browser session ends this long after enrollment (default 30 days).
    #[arg(long, value_name = "SECS", default_value_t = 30 * 24 * 3600)]
    pub session_max_age: u64,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the live browser sessions.
    List,
    /// Revoke one session (its open tabs disconnect at once), or all.
    Revoke {
        /// The session id from `shard sessions list`.
        #[arg(required_unless_present = "all")]
        session_id: Option<String>,
        #[arg(long, conflicts_with = "session_id")]
        all: bool,
    },
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    init_logging();
    match cli.command {
        Command::Daemon(args) => {
            let runtime = tokio::runtime::Runtime::new().context("cannot start the runtime")?;
            runtime.block_on(crate::daemon::serve(args))
        }
        Command::Enroll => {
            let runtime = single_threaded()?;
            let url = runtime.block_on(crate::enroll::request())?;
            println!("enroll: {url}");
            Ok(())
        }
        Command::Sessions(command) => {
            let runtime = single_threaded()?;
            runtime.block_on(crate::enroll::sessions(command))
        }
        Command::Agent(args) => {
            let runtime = single_threaded()?;
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
