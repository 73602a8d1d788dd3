//! The seam between an agent's host and the agent's process: the one
//! interface through which the host starts a generation, sends it
//! per-agent commands, hears its per-agent events and its exit, and stops
//! it (docs/ARCHITECTURE.md, "The runtime seam").
//!
//! What a runtime owes the host, all of it:
//!
//! 1. **Lines.** It speaks PROTOCOL.md's per-agent protocol (§9) as lines:
//!    the host sends each command as one JSONL line ([`Runtime::send`])
//!    and reads each event as one line ([`ChildEvent::Lines`]), `hello`
//!    then `sync` once the agent is ready, every command answered.
//! 2. **The session record** ([`SessionRecord`]): every message, tool
//!    result, change of settings and queued follow-up written to Shard's
//!    record of the session before its event reaches the host, which
//!    builds a new process's `sync` from it (search, usage and the
//!    registry read it too). Resuming a session is starting a generation
//!    on its record ([`SpawnRequest::record`]).
//! 3. **Its exit, once and last** ([`ChildEvent::Exited`], after its last
//!    line), and its stop on [`Runtime::close_input`], `terminate` or `kill`.
//! 4. **The daemon's own questions** it raises for the agent (a sandbox's
//!    network question) as [`ChildEvent::Ask`], never as the agent's lines,
//!    and [`ChildEvent::Withdraw`] when one no longer stands.
//! 5. **Its own refusals** as its own error type, mapped to the wire where
//!    it answers.
//!
//! Shard's own agent (`shard agent --stdio`, [`stdio::ProcessSpawner`])
//! speaks §9 natively and writes the record in its own process. A runtime
//! for an agent that speaks another protocol ([`acp`]) translates at this
//! seam, in both directions, and writes the record in the daemon; the host
//! (its fan-out, questions, journal and ledger) stays as it is.
//!
//! - [`stdio`]: Shard's own agent process, its stdin queue bounded in
//!   bytes, its stdout reader, and the wait that reports its exit last.
//! - [`record`]: the session record.
//! - [`remote`]: a node's agent, reached through the node's link; its
//!   record is the hub's copy of the node's.

pub mod acp;
pub mod event;
pub mod record;
pub mod remote;
pub mod stdio;

pub use self::event::{Answer, Asked, ChildEvent};
pub use self::record::SessionRecord;

use bytes::Bytes;
use tokio::sync::mpsc;

/// What a new generation is started with.
pub struct SpawnRequest<'a> {
    pub agent_id: &'a str,
    /// The runtime to run: `shard` (the built-in agent) or a configured
    /// runtime's id.
    pub runtime: &'a str,
    pub cwd: &'a str,
    /// The session it goes on, and the record it keeps of it.
    pub record: SessionRecord,
    pub epoch: u64,
    /// The tools its model is offered (all when `None`).
    pub tools: Option<&'a [String]>,
    /// Whether it gets a manager's instructions (`system_prompt.txt`).
    pub instructed: bool,
    /// Whether it may launch subagents (the `subagent_*` tools).
    pub delegates: bool,
    /// How `agent.create` narrowed its sandbox.
    pub sandbox: Option<shard_protocol::sandbox::SandboxRequest>,
    /// A node's agent: where it lives ([`remote`]).
    pub remote: Option<&'a crate::agents::manifest::Remote>,
}

impl<'a> SpawnRequest<'a> {
    /// What generation `epoch` of the agent `manifest` describes is
    /// started with.
    pub fn of(
        home: &std::path::Path,
        manifest: &'a crate::agents::manifest::Manifest,
        epoch: u64,
    ) -> Self {
        Self {
            agent_id: &manifest.agent_id,
            runtime: manifest.runtime_id(),
            cwd: &manifest.cwd,
            record: SessionRecord::new(home, &manifest.session_id),
            epoch,
            tools: manifest.tools.as_deref(),
            instructed: manifest.system_prompt.is_some(),
            delegates: manifest.may_delegate(),
            sandbox: manifest.sandbox,
            remote: manifest.remote.as_ref(),
        }
    }
}

/// Starts agent processes.
pub trait Spawner: Send + Sync {
    /// Starts generation `request.epoch`; its lines and its exit (exactly
    /// one `Exited`) come back through `events`.
    fn spawn(
        &self,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>>;
}

/// Why a generation did not take a line.
#[derive(Debug)]
pub enum NotTaken {
    /// Its input queue is over its byte budget: try again.
    Full,
    /// It cannot be reached now (its node's link is down): why.
    Unreachable(String),
}

/// A running generation, as the host controls it.
pub trait Runtime: Send {
    /// Queues one line (with its newline) for the process's stdin.
    fn send(&mut self, line: Bytes) -> Result<(), NotTaken>;
    /// Closes stdin: the agent finishes what it is doing and exits.
    fn close_input(&mut self);
    /// SIGTERM: the agent aborts its turn, flushes and exits.
    fn terminate(&mut self);
    /// SIGKILL to the process and everything below it.
    fn kill(&mut self);
}

/// Chooses each agent's runtime: Shard's own agent, or a runtime
/// configured in `config.toml` (read when a process starts, so a runtime
/// changed there applies to the next one), and starts it in its sandbox.
pub struct Spawners {
    pub builtin: stdio::ProcessSpawner,
    pub acp: acp::AcpSpawner,
    pub remote: remote::RemoteSpawner,
    pub home: std::path::PathBuf,
    pub sandbox: std::sync::Arc<crate::sandbox::Sandbox>,
}

impl Spawner for Spawners {
    fn spawn(
        &self,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        // A node's agent runs there, in the node's sandbox, under its
        // configuration: nothing of this machine's applies.
        if let Some(remote) = request.remote {
            return self.remote.spawn(remote, request, events);
        }
        let config = shard_platform::config::Config::load(&self.home)
            .map_err(|error| std::io::Error::other(format!("{error:#}")))?;
        let builtin = request.runtime == shard_platform::runtimes::BUILTIN;
        let runtime = match builtin {
            true => None,
            false => Some(config.runtime(request.runtime).ok_or_else(|| {
                let why = format!("runtime `{}` is no longer in config.toml", request.runtime);
                std::io::Error::other(why)
            })?),
        };
        let instructions = request.instructed.then(|| {
            crate::agents::manifest::agent_dir(&self.home, request.agent_id)
                .join(crate::agents::manifest::INSTRUCTIONS_FILE)
        });
        let start = crate::sandbox::Start {
            agent_id: request.agent_id,
            runtime: request.runtime,
            cwd: std::path::Path::new(request.cwd),
            session_id: request.record.session_id(),
            asked: request.sandbox,
            instructions,
            delegates: request.delegates,
            epoch: request.epoch,
        };
        let asker = std::sync::Arc::new(Asker { events: events.clone(), epoch: request.epoch });
        let jail = self.sandbox.prepare(&config, &start, asker)?;
        let started = match runtime {
            None => self.builtin.spawn(request, jail.as_ref(), events)?,
            Some(runtime) => self.acp.spawn(runtime, request, jail.as_ref(), events)?,
        };
        Ok(match jail.and_then(|jail| jail.proxy) {
            Some(proxy) => Box::new(Contained { inner: started, _proxy: proxy }),
            None => started,
        })
    }
}

/// The sandbox's network questions, asked of the generation's host.
struct Asker {
    events: mpsc::Sender<ChildEvent>,
    epoch: u64,
}

impl crate::sandbox::gate::Asker for Asker {
    fn ask(
        &self,
        request: shard_protocol::agent::PermissionRequest,
        answer: crate::sandbox::gate::Answer,
    ) -> futures_util::future::BoxFuture<'static, bool> {
        let events = self.events.clone();
        let ask = ChildEvent::Ask { epoch: self.epoch, asked: Asked { request, answer } };
        Box::pin(async move { events.send(ask).await.is_ok() })
    }

    fn withdraw(&self, request_id: String) {
        let events = self.events.clone();
        let withdraw = ChildEvent::Withdraw { epoch: self.epoch, request_id };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { events.send(withdraw).await });
        }
    }
}

/// A runtime in a sandbox with an egress proxy: the proxy stops with it.
struct Contained {
    inner: Box<dyn Runtime>,
    _proxy: tokio_util::sync::DropGuard,
}

impl Runtime for Contained {
    fn send(&mut self, line: Bytes) -> Result<(), NotTaken> {
        self.inner.send(line)
    }

    fn close_input(&mut self) {
        self.inner.close_input();
    }

    fn terminate(&mut self) {
        self.inner.terminate();
    }

    fn kill(&mut self) {
        self.inner.kill();
    }
}
