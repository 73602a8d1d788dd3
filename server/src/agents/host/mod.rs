//! One agent's host: an actor that owns the agent's process generations,
//! its open questions and the projection of its state for `sync` and the
//! registry, and multiplexes its events to every attached connection
//! (PROTOCOL.md §6, §10.1).
//!
//! The host is a synchronous state machine run by a thin async shell
//! ([`run`]): every decision (who answers a question, when one resolves
//! headless, when a runtime is reaped or killed, what `sync` holds) is a
//! plain method of [`Host`] that takes the current time, so unit tests drive
//! it with an injected clock and fake processes ([`crate::agents::runtime::Spawner`]).
//! Everything about one agent happens in this one task, in order, so the
//! attach sequence is exact: the `response`, then the `sync`, then every
//! later event once.
//!
//! - [`dispatch`]: commands from connections and lines from the process.
//! - [`process`]: starting, feeding, stopping and killing a generation.
//! - [`questions`]: permission and UI requests, first answer wins (§6.3).
//! - [`projection`]: `sync`, `AgentInfo`, status and activity events.

mod attachments;
mod dispatch;
mod journal;
pub mod process;
mod projection;
mod questions;
pub mod run;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shard_agent::session_view::SessionView;
use shard_protocol::ClientMessage;
use shard_protocol::WireError;
use shard_protocol::approvals::Answerer;
use shard_protocol::orchestrator::{AttachRole, TerminateResult};
use shard_protocol::types::AgentInfo;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub use self::journal::JournalLimits;
pub use self::questions::{Verdict, fingerprint};
use super::approvals::ApprovalLog;
use super::delegation::Delegation;
use super::error::AgentError;
use super::manifest::Manifest;
use super::usage::UsageBook;
use super::{Broadcast, Sub, SubscriberId};
use crate::agents::runtime::{ChildEvent, Spawner};

/// Commands queued for a host. A connection that finds it full gets an
/// error instead of waiting: hosts answer in microseconds, so a full queue
/// means a flood, and waiting would stall that client's reader.
pub const HOST_QUEUE: usize = 256;
/// Reads of the child's stdout (each at most 64 KiB of lines, or one longer
/// line) buffered between its reader and the host: about 4 MiB. A full
/// buffer pushes back on the agent's stdout, never grows.
const CHILD_READS: usize = 64;
/// Reads handled in one turn of the host's loop before it looks at its
/// commands and deadlines again.
const CHILD_BATCH: usize = 8;

/// What hosts share: the daemon's home, how processes start, where registry
/// events go, and the delegation map.
pub struct Context {
    pub home: PathBuf,
    pub spawner: Arc<dyn Spawner>,
    pub broadcast: Arc<dyn Broadcast>,
    pub delegation: Arc<Delegation>,
    pub idle_timeout: Duration,
    pub headless_timeout: Duration,
    /// How much of each agent's event history is kept for resumes.
    pub journal: JournalLimits,
    /// Every agent's usage rollups.
    pub usage: Arc<UsageBook>,
    /// Which agent each running agent process is (by pid).
    pub processes: Arc<super::Processes>,
    /// The search index, told when a session's log has grown.
    pub search: Arc<crate::search::Search>,
    /// Where questions, their ends and failed turns are told, for pushes.
    pub notices: Arc<dyn super::Notices>,
    /// Which allows from a browser or a notification need a passkey first;
    /// `None`: none do.
    pub step_up: Option<super::approvals::StepUp>,
    /// What agents are contained with (docs/SANDBOX.md).
    pub sandbox: Arc<crate::sandbox::Sandbox>,
}

pub enum HostCommand {
    Attach {
        subscriber: Sub,
        role: AttachRole,
        id: Option<String>,
        /// The client's cursor (`agent.attach`'s `after_seq`).
        after_seq: Option<u64>,
    },
    Detach {
        subscriber: Sub,
        id: Option<String>,
    },
    /// A per-agent command (not an answer) to forward to the agent.
    Forward {
        subscriber: Sub,
        id: Option<String>,
        message: ClientMessage,
    },
    /// A `permission_response` or `ui_response`, and who sent it.
    Answer {
        subscriber: Sub,
        id: Option<String>,
        message: ClientMessage,
        answerer: Answerer,
    },
    /// An answer from a notification's action: only to the call
    /// `fingerprint` names, with what came of it.
    AnswerChecked {
        message: ClientMessage,
        answerer: Answerer,
        fingerprint: String,
        /// A fresh passkey assertion was verified for this very call.
        stepped_up: bool,
        reply: oneshot::Sender<Verdict>,
    },
    Disconnected {
        subscriber: SubscriberId,
    },
    /// Start a process now (a new agent); replies once it is ready or failed.
    Start {
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    Terminate {
        reply: oneshot::Sender<TerminateResult>,
    },
    /// Replies once the process has exited (at once when there is none).
    Kill {
        force: bool,
        reply: oneshot::Sender<()>,
    },
    /// Carry out one supervised run (PROTOCOL.md §10.3): the task as a
    /// prompt once the agent is idle, its turn followed on `events`.
    /// Refused (CONFLICT) while another run is not being stopped.
    Run {
        task: String,
        events: mpsc::Sender<run::RunEvent>,
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    /// A strict steer into the run's turn; replies with its turn id once
    /// delivered, or CONFLICT.
    SteerRun {
        message: String,
        reply: oneshot::Sender<Result<String, WireError>>,
    },
    /// Stop the run: abort its turn, then SIGTERM, then SIGKILL.
    StopRun,
    /// `session.activate`: run `session_id` from now on (the registry has
    /// checked it). Replies with the session it replaces, or CONFLICT while
    /// the agent has work in hand.
    Activate {
        session_id: String,
        reply: oneshot::Sender<Result<String, AgentError>>,
    },
    /// `sandbox.revoke`: a host allowed always, taken back.
    RevokeHost {
        host: shard_agent::sandbox::HostPort,
        reply: oneshot::Sender<Result<shard_protocol::sandbox::SandboxInfo, AgentError>>,
    },
    /// Daemon shutdown: stop the process as `mode` says; replies once it
    /// has exited. A later, stronger mode takes over.
    Shutdown {
        mode: ShutdownMode,
        reply: oneshot::Sender<()>,
    },
}

/// How the daemon's shutdown stops an agent's process, gentlest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShutdownMode {
    /// `daemon.shutdown`: the turn in hand finishes, then input is closed.
    Drain,
    /// SIGTERM/SIGINT: the agent aborts its turn, flushes its session log
    /// and exits; its tree is killed if it has not after
    /// [`process::KILL_GRACE`].
    Terminate,
    /// A second signal or `force`: the tree is killed at once.
    Kill,
}

/// The registry's handle to a host.
#[derive(Clone)]
pub struct HostHandle {
    pub commands: mpsc::Sender<HostCommand>,
    info: Arc<Mutex<AgentInfo>>,
}

impl HostHandle {
    /// The agent as `agent.list` shows it, as of the host's last change.
    pub fn info(&self) -> AgentInfo {
        self.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// A command forwarded to the agent, waiting for its response.
struct Inflight {
    /// `None`: the daemon's own command (its response is swallowed).
    subscriber: Option<Sub>,
    client_id: Option<String>,
    command: &'static str,
    then: Then,
}

/// What the host itself does with a response.
enum Then {
    Nothing,
    /// The answer to a run's task prompt.
    RunPrompt,
    /// The answer to a strict steer into `turn_id`.
    Steer {
        turn_id: String,
        reply: oneshot::Sender<Result<String, WireError>>,
    },
}

impl Inflight {
    /// The daemon's own command.
    fn internal(command: &'static str, then: Then) -> Self {
        Self { subscriber: None, client_id: None, command, then }
    }
}

/// Deferred work that needs a ready process.
enum Waiting {
    Attach { subscriber: Sub, role: AttachRole, id: Option<String>, after_seq: Option<u64> },
    Forward { subscriber: Sub, id: Option<String>, message: Box<ClientMessage> },
    Start { reply: oneshot::Sender<Result<(), WireError>> },
}

pub struct Host {
    context: Arc<Context>,
    manifest: Manifest,
    projection: projection::Projection,
    /// The agent's process: its generations, stops and who waits on them.
    process: process::Supervision,
    session: Option<SessionView>,
    questions: questions::OpenQuestions,
    attached: attachments::Attachments,
    inflight: HashMap<String, Inflight>,
    next_internal: u64,
    waiting: Vec<Waiting>,
    terminate_when_inactive: bool,
    last_active: Instant,
    /// Where this host's processes send their lines and exits; none while
    /// it is dormant.
    events: Option<mpsc::Sender<ChildEvent>>,
    /// The supervised run in progress, and one waiting behind a run that
    /// is being stopped.
    run: Option<run::Supervised>,
    next_run: Option<run::Supervised>,
    /// Every per-agent event, numbered and kept for resumes.
    journal: journal::Journal,
    /// Every question asked and who answered it.
    approvals: ApprovalLog,
    /// `session.activate` switched the session: once a process runs it,
    /// every attachment gets the new session's `sync`.
    resync_when_ready: bool,
    /// A prompt or steer went to the agent and its work has not settled
    /// (the agent has not reported `idle` since): the agent answers a
    /// prompt before it says it is streaming, and a session switch must
    /// not slip into that gap.
    turn_expected: bool,
}

impl Host {
    /// A host for `manifest` whose process is stopped until needed, and
    /// the receiver its processes' events arrive on.
    pub fn new(
        context: Arc<Context>,
        manifest: Manifest,
        now: Instant,
    ) -> (Self, mpsc::Receiver<ChildEvent>) {
        let mut host = Self::dormant(context, manifest, now);
        let child_events = host.wire();
        (host, child_events)
    }

    /// A host for `manifest` with no process and no queues: what a listed
    /// agent is until something is asked of it.
    pub fn dormant(context: Arc<Context>, manifest: Manifest, now: Instant) -> Self {
        let mut projection = projection::Projection::new(&manifest);
        projection.sandbox =
            context.sandbox.describe(&manifest.agent_id, manifest.runtime_id(), manifest.sandbox);
        context.delegation.set_parent(&manifest.agent_id, manifest.parent_agent_id.as_deref());
        let journal = journal::Journal::new(
            super::manifest::agent_dir(&context.home, &manifest.agent_id),
            context.journal,
        );
        let approvals = ApprovalLog::new(&context.home, &manifest.agent_id);
        let host = Self {
            context,
            manifest,
            projection,
            process: process::Supervision::default(),
            session: None,
            questions: questions::OpenQuestions::default(),
            attached: attachments::Attachments::default(),
            inflight: HashMap::new(),
            next_internal: 0,
            waiting: Vec::new(),
            terminate_when_inactive: false,
            last_active: now,
            events: None,
            run: None,
            next_run: None,
            journal,
            approvals,
            resync_when_ready: false,
            turn_expected: false,
        };
        // Listed with what it has spent, though no process ran since the
        // daemon started (the usage book was loaded from its ledger).
        host.publish_info();
        host
    }

    /// A fresh queue for this host's processes' events.
    fn wire(&mut self) -> mpsc::Receiver<ChildEvent> {
        let (events, child_events) = mpsc::channel(CHILD_READS);
        self.events = Some(events);
        child_events
    }

    fn id(&self) -> &str {
        &self.manifest.agent_id
    }

    pub fn agent_id(&self) -> &str {
        self.id()
    }

    /// The agent as `agent.list` shows it.
    pub fn info(&self) -> AgentInfo {
        self.projection.published()
    }

    /// Nothing running, nobody attached, nothing open, waiting or due: the
    /// host may go dormant, to be woken by the next command.
    pub fn idle_for_good(&self) -> bool {
        self.process.current.is_none()
            && self.attached.is_empty()
            && self.questions.is_empty()
            && self.inflight.is_empty()
            && self.waiting.is_empty()
            && self.process.kill_waiters.is_empty()
            && self.process.shutdown.is_none()
            && !self.terminate_when_inactive
            && self.run.is_none()
            && self.next_deadline().is_none()
    }

    /// Gives back what only an awake host needs: its queue's sender and the
    /// room its maps and lists grew to.
    pub(super) fn shed(&mut self) {
        self.journal.close();
        self.context.usage.forget_turns(self.id());
        self.events = None;
        self.attached.shed();
        self.inflight = HashMap::new();
        self.questions.shed();
        self.waiting = Vec::new();
        self.process.kill_waiters = Vec::new();
    }

    /// The next instant at which [`Host::timers`] has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut deadlines = Vec::new();
        if let Some(generation) = &self.process.current {
            if !generation.ready {
                deadlines.push(generation.started + process::START_TIMEOUT);
            } else if self.reapable() {
                deadlines.push(self.last_active + self.context.idle_timeout);
            }
            deadlines.extend(generation.kill_at);
        }
        deadlines.extend(self.questions.next_headless());
        deadlines.extend(self.run_deadline());
        deadlines.into_iter().min()
    }

    /// Everything due at `now`: start timeouts, kill grace, idle reaping,
    /// headless answers.
    pub fn timers(&mut self, now: Instant) {
        self.process_timers(now);
        self.question_timers(now);
        self.run_timers(now);
    }
}

/// Where a host with nothing left to do goes dormant: the registry's table
/// of hosts, which hands it back when a command raced in.
pub trait Dormancy: Send + Sync + 'static {
    /// Keeps `host` dormant unless `inbox` holds a command or may get one;
    /// otherwise hands it back to stay awake.
    fn retire(&self, host: Box<Host>, inbox: &mpsc::Receiver<HostCommand>)
    -> Result<(), Box<Host>>;
}

/// Starts the actor of a dormant host; it goes dormant again through
/// `hosts` once it has nothing left to do.
pub fn wake(mut host: Box<Host>, hosts: Arc<dyn Dormancy>) -> HostHandle {
    let child_events = host.wire();
    let (commands, inbox) = mpsc::channel(HOST_QUEUE);
    let handle = HostHandle { commands, info: host.projection.shared() };
    tokio::spawn(run(host, inbox, child_events, hosts));
    handle
}

/// The async shell: waits for a command, a line from the process or the
/// next deadline, and hands it to the synchronous host with the time.
async fn run(
    mut host: Box<Host>,
    mut inbox: mpsc::Receiver<HostCommand>,
    mut child: mpsc::Receiver<ChildEvent>,
    hosts: Arc<dyn Dormancy>,
) {
    loop {
        if host.idle_for_good() {
            match hosts.retire(host, &inbox) {
                Ok(()) => return,
                Err(awake) => host = awake,
            }
        }
        let deadline = host.next_deadline();
        tokio::select! {
            command = inbox.recv() => match command {
                Some(command) => host.command(command, Instant::now()),
                None => break,
            },
            Some(event) = child.recv() => {
                // A burst is handled in one go: one wake-up, one clock
                // read and one new deadline per batch, not per line.
                let now = Instant::now();
                host.child_event(event, now);
                for _ in 1..CHILD_BATCH {
                    let Ok(event) = child.try_recv() else { break };
                    host.child_event(event, now);
                }
            }
            () = crate::clock::sleep_until(deadline) => host.timers(Instant::now()),
        }
        // What this turn of the loop sent is on disk before the next.
        host.journal.flush();
    }
    host.abandon();
    host.journal.close();
}
