//! The Shard agent runtime (`shard agent --stdio`): one coding agent per
//! process, speaking the per-agent protocol (PROTOCOL.md §9) as JSONL on
//! stdio. The daemon spawns one per agent; it also runs headless on its own.
//! See docs/AGENT.md.
//!
//! - [`agent`]: the controller that answers every command: its life in
//!   `agent.rs`, then `commands` (decoding and routing), `inputs` (prompts and
//!   steers queued behind a turn), `settings` (mode, model, reasoning level),
//!   `session` (`session_op`), `answers` (permission and UI answers) and
//!   `refusal` (why a command is refused, as the wire says it).
//! - [`shared`]: what the controller and the running turn share.
//! - [`turn`]: the turn loop in `turn.rs`, then `stream` (one model call),
//!   `tool_calls`, `questions` (the permission gate's and `ask`'s), `recall`
//!   and `compaction`.
//! - [`provider`]: the built-in demo models, OpenAI-compatible and Anthropic,
//!   and [`provider::ProviderError`], why a call failed.
//! - [`tools`]: read, write, edit, bash, grep, find, ls (recall and ask in `turn`),
//!   and [`tools::ToolError`], why one failed.
//! - [`permission`]: the gate in front of every tool call.
//! - [`keys`]: provider keys out of every tool's reach; [`stdio`].
//!
//! The session log and conversation, private files, the process tree,
//! `config.toml` and modes are `shard_platform`'s, shared with the daemon.

pub mod agent;
pub mod keys;
pub mod permission;
pub mod provider;
pub mod shared;
pub mod stdio;
pub mod tools;
pub mod turn;

// What the agent shares with the daemon, from the crate they both stand on.
pub(crate) use shard_platform::{config, conversation, modes, process_tree, session_log, util};

use std::path::PathBuf;

use anyhow::Context;
use shard_protocol::agent::{ErrorEvent, Hello};
use shard_protocol::{Envelope, ErrorCode, ServerMessage, diagnostic};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, Exit, Startup};
use crate::config::Config;
use crate::conversation::Conversation;
use crate::session_log::SessionError;

/// How the agent was started (`shard agent --stdio …`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub mode: Option<String>,
    /// Resume this session instead of starting a new one.
    pub session: Option<String>,
    /// Offer only these tools (a manager's allowlist).
    pub tools: Option<Vec<String>>,
    /// A manager's instructions, appended to the system prompt.
    pub system_prompt_file: Option<PathBuf>,
    /// Offer the subagent tools, speaking to the daemon's socket in
    /// `$SHARD_HOME` as this agent id.
    pub delegate_as: Option<String>,
}

/// The most bytes of a manager's instructions (`--system-prompt-file`).
pub const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// Why the agent process ends, as an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// stdin closed and the work was done, or a signal.
    Clean,
    /// The session could not be opened (SESSION_CORRUPT / NOT_FOUND).
    SessionRefused,
}

/// Runs one agent on stdin/stdout until stdin closes or a signal arrives.
pub async fn run_stdio(options: Options) -> anyhow::Result<Ending> {
    die_with_parent()?;
    // Whatever a tool leaves behind is re-parented here, not to init, so the
    // exit below can find and kill it (CONTRACT.md "Process lifetime").
    process_tree::become_subreaper().context("cannot become a subreaper")?;
    tokio::spawn(reap_orphans());
    let ending = serve(options).await;
    let killed = process_tree::kill_tree(std::process::id(), false);
    if killed > 0 {
        tracing::info!(killed, "killed processes the agent's tools left behind");
    }
    ending
}

/// The agent itself, from the session's opening to the last flush.
async fn serve(options: Options) -> anyhow::Result<Ending> {
    let home = config::shard_home()?;
    let config = Config::load(&home)?;
    let cwd = working_dir(&options, &config)?;
    let instructions = read_instructions(options.system_prompt_file.as_deref())?;
    let delegate = options
        .delegate_as
        .clone()
        .map(|agent_id| tools::subagent::Delegate { socket: home.join("daemon.sock"), agent_id });
    let toolset = tools::Toolset::new(options.tools.clone(), delegate);

    let stop = CancellationToken::new();
    let (out, outbound) = mpsc::channel(agent::OUTBOUND_QUEUE);
    let writer = tokio::spawn(stdio::write_messages(tokio::io::stdout(), outbound, stop.clone()));

    let opened = match &options.session {
        Some(id) => Conversation::resume(&home, id).await,
        None => {
            let model = options.model.clone().unwrap_or_else(|| config.default_model.clone());
            let mode = options.mode.clone().unwrap_or_else(|| modes::BUILD.to_owned());
            Conversation::create(&home, &cwd.display().to_string(), &model, &mode).await
        }
    };
    let conversation = match opened {
        Ok(conversation) => conversation,
        Err(problem) => {
            refuse(&out, &problem).await;
            drop(out);
            let _ = writer.await;
            return Ok(Ending::SessionRefused);
        }
    };
    let recorded = conversation.settings();
    let mode = options.mode.or(recorded.mode).unwrap_or_else(|| modes::BUILD.to_owned());
    let model = options
        .model
        .or(recorded.model)
        .filter(|model| config.model(model).is_some())
        .unwrap_or_else(|| config.default_model.clone());
    let reasoning_level = recorded
        .reasoning_level
        .filter(|level| config.model(&model).is_some_and(|known| known.level(level).is_some()))
        .or_else(|| config.model(&model).and_then(config::ModelConfig::default_level));
    let cwd = if options.session.is_some() { PathBuf::from(&conversation.cwd) } else { cwd };
    tracing::info!(session = %conversation.session_id, cwd = %cwd.display(), "agent ready");

    let start = Startup { config, cwd, home, mode, model, reasoning_level, toolset, instructions };
    let mut agent = Agent::new(start, conversation, out);
    agent.greet().await;
    let (lines, inbound) = mpsc::channel(stdio::INBOUND_QUEUE);
    tokio::spawn(stdio::read_lines(tokio::io::stdin(), lines));
    tokio::spawn(stop_on_signal(stop.clone()));
    let shared = agent.shared().clone();
    let exit = agent.run(inbound, stop.clone()).await;
    if let Err(problem) = shared.conversation.lock().await.flush().await {
        tracing::error!(%problem, "could not flush the session log");
    }
    drop(shared);
    match exit {
        Exit::InputClosed | Exit::Stopped => {}
    }
    // Every sender is gone once the agent is dropped: the writer drains and ends.
    let _ = writer.await;
    Ok(Ending::Clean)
}

/// The working directory, made canonical, once every name the options give
/// (model, mode, tools) is known to exist.
fn working_dir(options: &Options, config: &Config) -> anyhow::Result<PathBuf> {
    let cwd = match &options.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().context("no working directory")?,
    };
    let cwd = cwd
        .canonicalize()
        .with_context(|| format!("cannot use {} as the working directory", cwd.display()))?;
    if let Some(model) = &options.model {
        anyhow::ensure!(config.model(model).is_some(), "unknown model `{model}`");
    }
    if let Some(mode) = &options.mode {
        anyhow::ensure!(modes::is_known(mode), "unknown mode `{mode}` (build or plan)");
    }
    if let Some(unknown) = options.tools.iter().flatten().find(|name| !tools::is_known(name)) {
        anyhow::bail!("unknown tool `{unknown}` in --tools");
    }
    Ok(cwd)
}

/// A manager's instructions (`--system-prompt-file`), at most
/// [`MAX_INSTRUCTIONS`] bytes.
fn read_instructions(path: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let Some(path) = path else { return Ok(None) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    anyhow::ensure!(
        text.len() <= MAX_INSTRUCTIONS,
        "{} is over {MAX_INSTRUCTIONS} bytes",
        path.display()
    );
    Ok(Some(text))
}

/// A session that cannot be opened: `hello`, then a fatal error naming why.
async fn refuse(out: &mpsc::Sender<Envelope<ServerMessage>>, problem: &SessionError) {
    let code = match problem {
        SessionError::NotFound(_) => ErrorCode::NotFound,
        SessionError::Corrupt { .. } | SessionError::Io(_) => ErrorCode::SessionCorrupt,
    };
    tracing::error!(%problem, "cannot open the session");
    let hello = Hello {
        protocol_version: shard_protocol::PROTOCOL_VERSION.to_owned(),
        server_version: format!("shard {}", env!("CARGO_PKG_VERSION")),
        capabilities: Vec::new(),
    };
    let _ = out.send(Envelope::new(ServerMessage::Hello(hello))).await;
    let error = ErrorEvent { code, message: diagnostic(&problem.to_string()), fatal: Some(true) };
    let _ = out.send(Envelope::new(ServerMessage::Error(error))).await;
}

pub use shard_platform::PARENT_PID_ENV;

/// A daemon's child must not outlive it, even when the daemon is SIGKILLed:
/// ask the kernel to send SIGTERM when the parent dies (SIGTERM, not
/// SIGKILL, so that the agent still kills its tools' processes on the way
/// out), then make sure the parent did not already die before that request.
fn die_with_parent() -> anyhow::Result<()> {
    let Some(parent) = std::env::var(PARENT_PID_ENV).ok().and_then(|pid| pid.parse::<i32>().ok())
    else {
        return Ok(());
    };
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
        .context("cannot ask to die with the daemon")?;
    anyhow::ensure!(nix::unistd::getppid().as_raw() == parent, "the daemon is already gone");
    Ok(())
}

/// After SIGTERM, how long the agent may take to abort its turn and flush
/// its log before it kills its tree and exits regardless. An abort takes
/// milliseconds; this only bounds a wedged disk or a bug.
const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

async fn stop_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    stop.cancel();
    // A plain thread, so it fires even if the runtime is stuck.
    std::thread::spawn(|| {
        std::thread::sleep(STOP_DEADLINE);
        tracing::error!("the agent did not stop in time after a signal; exiting");
        process_tree::kill_tree(std::process::id(), false);
        std::process::exit(1);
    });
}

/// Collects the orphans this subreaper inherits as they exit, so that a
/// long-lived agent does not pile up zombies.
async fn reap_orphans() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut exits) = signal(SignalKind::child()) else { return };
    while exits.recv().await.is_some() {
        process_tree::reap_orphans();
    }
}
