//! The host's outside: what hosts share ([`Context`]), the commands a host
//! takes ([`HostCommand`]), the registry's handle to it, and the async
//! shell that feeds it commands, the process's lines and its deadlines.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shard_protocol::ClientMessage;
use shard_protocol::WireError;
use shard_protocol::approvals::Answerer;
use shard_protocol::orchestrator::{AttachRole, TerminateResult};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use shard_protocol::message::Response;

use super::journal::JournalLimits;
use super::link::{self, Waiting};
use super::process::Shutting;
use super::questions::Verdict;
use super::{Host, run};
use crate::agents::delegation::Delegation;
use crate::agents::error::AgentError;
use crate::agents::runtime::{ChildEvent, Spawner};
use crate::agents::usage::UsageBook;
use crate::agents::{Broadcast, Sub, SubscriberId};

/// Commands queued for a host. A connection that finds it full gets an
/// error instead of waiting: hosts answer in microseconds, so a full queue
/// means a flood, and waiting would stall that client's reader.
pub const HOST_QUEUE: usize = 256;
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
    pub processes: Arc<crate::agents::Processes>,
    /// What each agent's processes use, as last looked at.
    pub fleet: Arc<crate::agents::fleet::Fleet>,
    /// What agents may spend, and which are held at a cap.
    pub budgets: Arc<crate::agents::budgets::Budgets>,
    /// The search index, told when a session's log has grown.
    pub search: Arc<crate::search::Search>,
    /// Where questions, their ends and failed turns are told, for pushes.
    pub notices: Arc<dyn crate::agents::Notices>,
    /// Which allows from a browser or a notification need a passkey first;
    /// `None`: none do.
    pub step_up: Option<crate::agents::approvals::StepUp>,
    /// What agents are contained with (docs/SANDBOX.md).
    pub sandbox: Arc<crate::sandbox::Sandbox>,
    /// Other machines' daemons, and their links (docs/NODES.md).
    pub nodes: Arc<crate::agents::nodes::Nodes>,
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
    /// The fleet's limits stop the process (agents::fleet).
    Limit(super::process::Because),
    /// Budgets moved: hold the agent, or let it go, as they say now.
    Budgets,
    /// A node's agent changed status on its node: shown while the hub does
    /// not listen to it (a generation here has the agent's own events).
    NodeSaid {
        status: AgentStatus,
        runtime_state: RuntimeState,
    },
    /// A node's agent's sandbox as its node applies it now.
    NodeSandbox(shard_protocol::sandbox::SandboxInfo),
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
        host: shard_platform::sandbox::HostPort,
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
    pub(super) info: Arc<Mutex<AgentInfo>>,
}

impl HostHandle {
    /// The agent as `agent.list` shows it, as of the host's last change.
    pub fn info(&self) -> AgentInfo {
        self.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
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
    let child_events = host.link.wire();
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
        host.tell_fleet();
        // What this turn of the loop sent is on disk before the next.
        host.io.flush();
    }
    // The host is going away (the daemon is exiting): nothing may outlive it.
    host.link.control(Some(super::process::Control::Kill));
    host.io.close();
}

/// The host's command table: each command routed to the parts it is
/// about, beside the commands themselves.
impl super::Host {
    pub fn command(&mut self, command: HostCommand, now: Instant) {
        match command {
            HostCommand::Attach { subscriber, role, id, after_seq } => {
                let waiting = Waiting::Attach { subscriber, role, id, after_seq };
                self.when_ready(waiting, now);
            }
            HostCommand::Detach { subscriber, id } => {
                self.detach(subscriber.id(), now);
                self.io.respond(&subscriber, id, false, Response::accepted("agent.detach"));
            }
            HostCommand::Forward { subscriber, id, message } => {
                match link::while_stopped(&message).filter(|_| !self.process.running()) {
                    Some(response) => self.io.respond(&subscriber, id, true, response),
                    None => {
                        let message = Box::new(message);
                        self.when_ready(Waiting::Forward { subscriber, id, message }, now)
                    }
                }
            }
            HostCommand::Answer { subscriber, id, message, answerer } => {
                let command = shard_protocol::envelope::MessageSet::type_name(&message);
                let verdict = self.answer(message, answerer, None, false);
                self.io.respond(&subscriber, id, false, verdict.response(command));
            }
            HostCommand::AnswerChecked { message, answerer, fingerprint, stepped_up, reply } => {
                let _ = reply.send(self.answer(message, answerer, Some(&fingerprint), stepped_up));
            }
            HostCommand::Disconnected { subscriber } => self.detach(subscriber, now),
            HostCommand::Start { reply } => self.when_ready(Waiting::Start { reply }, now),
            HostCommand::Budgets => self.review_budget(),
            HostCommand::NodeSaid { status, runtime_state } if self.manifest.remote.is_some() => {
                self.at_node = Some((status, runtime_state));
                if !self.process.running() {
                    let said = self.projection.node_said(status, runtime_state);
                    self.apply(said);
                }
            }
            HostCommand::NodeSaid { .. } => {}
            HostCommand::NodeSandbox(sandbox) => {
                if let Some(remote) = &mut self.manifest.remote {
                    remote.sandbox = Some(sandbox.clone());
                    let told = self.projection.set_sandbox(Some(sandbox));
                    self.apply(told);
                }
            }
            HostCommand::Limit(because) => {
                let stop = self.process.stop_for(because, self.reapable(), now);
                self.link.control(stop);
            }
            HostCommand::Terminate { reply } => {
                let active = self.projection.status.is_active();
                let (deferred, stop) = self.process.terminate(active, now);
                self.link.control(stop);
                let _ = reply.send(TerminateResult { deferred });
            }
            HostCommand::Kill { force, reply } => {
                if self.process.await_exit(reply) {
                    let kill = self.process.kill(force, now);
                    self.link.control(kill);
                }
            }
            HostCommand::Run { task, events, reply } => {
                if self.runs.take(task, events, reply) {
                    self.ensure_process(now);
                    self.drive_run();
                }
            }
            HostCommand::SteerRun { message, reply } => {
                let steer = self.runs.steer(self.process.ready(), message, reply);
                self.apply(steer);
            }
            HostCommand::StopRun => {
                let stop = self.runs.stop(now);
                self.apply(stop);
            }
            HostCommand::Activate { session_id, reply } => {
                let _ = reply.send(self.activate(session_id, now));
            }
            // `sandbox.revoke`: the sandbox as it is once `host` is taken back.
            HostCommand::RevokeHost { host, reply } => {
                let revoked = self.io.revoke(&host).map(|()| self.refresh_sandbox());
                let now = revoked.and_then(|()| {
                    self.projection.sandbox.clone().ok_or(AgentError::NotGranted(host.to_string()))
                });
                let _ = reply.send(now);
            }
            HostCommand::Shutdown { mode, reply } => {
                self.fail_waiting(AgentError::ShuttingDown.into());
                let active = self.projection.status.is_active();
                match self.process.shut_down(mode, reply, active, now) {
                    Shutting::NoProcess => self.io.close(),
                    Shutting::Then(control) => self.link.control(control),
                }
            }
        }
    }
}
