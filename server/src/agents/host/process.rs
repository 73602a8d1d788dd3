//! Process generations: each Runtime of a durable agent is one generation
//! of its process (`runtime_epoch` counts them), started through the
//! runtime seam (crate::agents::runtime): the host starts one when work
//! arrives, waits for its `hello` and `sync`, and stops it by closing its
//! input, by SIGTERM, or by a forced kill, escalating on deadlines.

use std::time::Duration;

use bytes::Bytes;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AgentExited;
use shard_protocol::types::{AgentStatus, RuntimeState};
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Host, ShutdownMode, Waiting, projection::encode, projection::respond};
use crate::agents::error::AgentError;
use crate::agents::runtime::{Runtime, SpawnRequest, stdio};

/// How long a new process may take to say `hello` and `sync`: a little
/// longer than an ACP agent gets to answer `initialize` and open its
/// session (CONTRACT.md: 30 s), so that its runtime reports why first.
pub const START_TIMEOUT: Duration = Duration::from_secs(35);
/// After SIGTERM, how long a process may take before its tree is killed.
/// The agent itself exits within a few seconds of SIGTERM whatever it was
/// doing; this only catches one that is wedged.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// The daemon is shutting down: how (the strongest mode asked so far), and
/// who waits for the process to end.
pub(super) struct Shutdown {
    pub(super) mode: ShutdownMode,
    pub(super) waiters: Vec<oneshot::Sender<()>>,
}

/// The agent's process as the host supervises it: the current generation,
/// how many there were, a shutdown in progress, and who waits for the
/// process to end.
#[derive(Default)]
pub(super) struct Supervision {
    /// The running (or starting, or stopping) generation.
    pub(super) current: Option<Generation>,
    /// Generations started so far; the current one's `runtime_epoch` is
    /// this minus one.
    pub(super) generations: u64,
    pub(super) shutdown: Option<Shutdown>,
    pub(super) kill_waiters: Vec<oneshot::Sender<()>>,
}

impl Supervision {
    /// Graceful stop: close the agent's input; it finishes and exits.
    pub(super) fn stop(&mut self) {
        if let Some(generation) = &mut self.current {
            generation.stopping = true;
            generation.runtime.close_input();
        }
    }

    /// SIGTERM with a grace period, or the whole tree at once.
    pub(super) fn kill(&mut self, force: bool, now: Instant) {
        let Some(generation) = &mut self.current else { return };
        generation.stopping = true;
        if force {
            generation.runtime.kill();
        } else {
            generation.runtime.terminate();
            generation.kill_at.get_or_insert(now + KILL_GRACE);
        }
    }

    /// Queues one line for the agent. `false` when there is no process or
    /// its input queue is full.
    pub(super) fn send(&mut self, envelope: &Envelope<ClientMessage>) -> bool {
        let Some(generation) = &mut self.current else { return false };
        let mut line = envelope.to_json().into_bytes();
        line.push(b'\n');
        generation.runtime.send(Bytes::from(line)).is_ok()
    }

    /// A process that is up and not being stopped.
    pub(super) fn ready(&self) -> bool {
        self.current.as_ref().is_some_and(|generation| generation.ready && !generation.stopping)
    }

    /// The daemon is stopping gracefully: stop once the agent is inactive.
    pub(super) fn stopping_when_inactive(&self) -> bool {
        self.shutdown.as_ref().is_some_and(|shutdown| shutdown.mode != ShutdownMode::Kill)
    }
}

/// The host's view of its current generation.
pub(super) struct Generation {
    pub(super) epoch: u64,
    runtime: Box<dyn Runtime>,
    pub(super) ready: bool,
    pub(super) started: Instant,
    /// A stop was asked for (terminate, reap, kill, shutdown): the exit is
    /// expected and the agent stays `stopped`, not `failed`.
    pub(super) stopping: bool,
    pub(super) saw_hello: bool,
    /// When a graceful kill turns into a forced one.
    pub(super) kill_at: Option<Instant>,
    /// Where this generation's lines begin in the agent's log: what it
    /// wrote there says why, if it exits before it is ready.
    log_from: u64,
}

impl Host {
    /// Starts a new generation unless one is running or starting.
    pub(super) fn ensure_process(&mut self, now: Instant) {
        if self.process.current.is_some() {
            return;
        }
        if self.process.shutdown.is_some() {
            self.fail_waiting(AgentError::ShuttingDown);
            return;
        }
        // Only a dormant host has no queue, and a dormant host runs nothing.
        let Some(events) = self.events.clone() else {
            self.fail_waiting(AgentError::HostNotRunning);
            return;
        };
        let epoch = self.process.generations;
        self.process.generations += 1;
        let request = SpawnRequest {
            agent_id: &self.manifest.agent_id,
            runtime: self.manifest.runtime_id(),
            cwd: &self.manifest.cwd,
            session_id: &self.manifest.session_id,
            epoch,
            tools: self.manifest.tools.as_deref(),
            instructed: self.manifest.system_prompt.is_some(),
            delegates: self.manifest.may_delegate(),
            sandbox: self.manifest.sandbox,
        };
        let log_from = stdio::log_length(&self.context.home, self.id());
        let runtime = match self.context.spawner.spawn(&request, events) {
            Ok(runtime) => runtime,
            Err(error) => {
                tracing::error!(agent = %self.id(), %error, "cannot start the agent process");
                self.set_runtime_state(RuntimeState::Failed);
                self.fail_waiting(match crate::sandbox::Unavailable::in_io(&error) {
                    Some(why) => AgentError::SandboxUnavailable(why),
                    None if !std::path::Path::new(&self.manifest.cwd).is_dir() => {
                        AgentError::CwdGone(self.manifest.cwd.clone())
                    }
                    None => AgentError::SpawnFailed(error.to_string()),
                });
                return;
            }
        };
        self.refresh_sandbox();
        self.process.current = Some(Generation {
            epoch,
            runtime,
            ready: false,
            started: now,
            stopping: false,
            saw_hello: false,
            kill_at: None,
            log_from,
        });
        self.set_runtime_state(RuntimeState::Starting);
    }

    /// Graceful stop: close stdin; the agent finishes its work and exits.
    pub(super) fn stop_process(&mut self) {
        self.process.stop();
    }

    /// `agent.kill`: SIGTERM with a grace period, or the tree at once.
    pub(super) fn kill_process(&mut self, force: bool, now: Instant) {
        self.process.kill(force, now);
    }

    /// Sends a command to the agent. `false` when its input queue is full.
    pub(super) fn send_to_child(&mut self, envelope: &Envelope<ClientMessage>) -> bool {
        self.process.send(envelope)
    }

    pub(super) fn process_timers(&mut self, now: Instant) {
        let Some(generation) = &mut self.process.current else { return };
        if !generation.ready && now >= generation.started + START_TIMEOUT {
            tracing::warn!(agent = %self.manifest.agent_id, "agent process did not become ready in time");
            generation.stopping = true;
            generation.runtime.kill();
            self.fail_waiting(AgentError::NotReady);
            return;
        }
        if generation.kill_at.is_some_and(|at| now >= at) {
            tracing::warn!(agent = %self.manifest.agent_id, "agent did not exit after SIGTERM; killing it");
            generation.kill_at = None;
            generation.runtime.kill();
            return;
        }
        if self.reapable() && now >= self.last_active + self.context.idle_timeout {
            tracing::info!(agent = %self.id(), "stopping idle runtime");
            self.stop_process();
        }
    }

    /// Inactive, nothing open, nothing in flight: the process may be stopped.
    pub(super) fn reapable(&self) -> bool {
        matches!(self.projection.status, AgentStatus::Idle | AgentStatus::Error)
            && self.run.is_none()
            && self.questions.is_empty()
            && self.inflight.is_empty()
            && self.waiting.is_empty()
            && self.process.ready()
    }

    pub(super) fn ready(&self) -> bool {
        self.process.ready()
    }

    pub(super) fn fail_waiting(&mut self, why: AgentError) {
        self.fail_waiting_with(why.into());
    }

    /// Answers every piece of work that was waiting for a ready process.
    pub(super) fn fail_waiting_with(&mut self, error: WireError) {
        for waiting in std::mem::take(&mut self.waiting) {
            match waiting {
                Waiting::Start { reply } => {
                    let _ = reply.send(Err(error.clone()));
                }
                Waiting::Attach { subscriber, id, .. } => {
                    let failed = Response::failed("agent.attach", error.clone());
                    respond(&subscriber, id, None, failed);
                }
                Waiting::Forward { subscriber, id, message } => {
                    let command = shard_protocol::envelope::MessageSet::type_name(message.as_ref());
                    let failed = Response::failed(command, error.clone());
                    respond(&subscriber, id, Some(self.id()), failed);
                }
            }
        }
    }

    pub(super) fn process_exited(&mut self, code: Option<i32>, description: String, now: Instant) {
        let Some(generation) = self.process.current.take() else { return };
        // A process that never became ready says why in its log: that goes
        // to the clients with the exit (the waiting requests, the agent's
        // row). The daemon's own log names the file and quotes none of it:
        // what an agent prints is its own, and may hold what it was given.
        let exited = description.clone();
        let description = match generation.ready {
            true => description,
            false => match stdio::log_since(&self.context.home, self.id(), generation.log_from) {
                Some(said) => format!("{description}; it said: {said}"),
                None => description,
            },
        };
        // The session's entries are read again when a process next starts:
        // a stopped agent holds none of them (a daemon lists many).
        self.session = None;
        let expected = generation.stopping || self.process.shutdown.is_some();
        if !generation.ready {
            self.fail_waiting(AgentError::ExitedStarting(description.clone()));
            // A switched session that cannot start is not started again
            // and again for its watchers: the next work or attach retries.
            self.resync_when_ready = false;
        }
        self.turn_expected = false;
        self.questions_orphaned();
        let interrupted = shard_protocol::usage::TurnState::Interrupted;
        self.context.usage.turn_ended(self.id(), None, interrupted, crate::agents::now_ms());
        if self.run.is_some() {
            self.end_run(Some(format!("the agent's process ended: {description}")));
        }
        for (_, inflight) in std::mem::take(&mut self.inflight) {
            if let Some(subscriber) = inflight.subscriber {
                let error = AgentError::ProcessExited.into();
                let failed = Response::failed(inflight.command, error);
                respond(&subscriber, inflight.client_id, Some(self.id()), failed);
            }
        }
        for waiter in self.process.kill_waiters.drain(..) {
            let _ = waiter.send(());
        }
        if expected {
            tracing::info!(agent = %self.id(), %description, "agent process stopped");
            self.projection.status = AgentStatus::Idle;
            self.set_runtime_state(RuntimeState::Stopped);
        } else {
            let log = stdio::agent_log(&self.context.home, self.id());
            let log = log.display();
            tracing::warn!(agent = %self.id(), description = %exited, %log, "agent process exited");
            self.projection.status = AgentStatus::Error;
            self.set_runtime_state(RuntimeState::Failed);
            let exited = AgentExited {
                agent_id: self.id().to_owned(),
                runtime_state: RuntimeState::Failed,
                reason: description,
                exit_code: code,
            };
            self.context
                .broadcast
                .broadcast(&encode(&Envelope::new(ServerMessage::AgentExited(exited))));
        }
        self.emit_activity();
        self.terminate_when_inactive = false;
        if let Some(shutdown) = self.process.shutdown.as_mut() {
            self.journal.close();
            for waiter in shutdown.waiters.drain(..) {
                let _ = waiter.send(());
            }
            return;
        }
        // Work that arrived while it was stopping starts the next
        // generation, and so does a switched session someone is watching.
        let resync = self.resync_when_ready && !self.attached.is_empty();
        if !self.waiting.is_empty() || self.run.is_some() || resync {
            self.ensure_process(now);
        }
    }

    /// The host is going away (the daemon is exiting): nothing may outlive it.
    pub(super) fn abandon(&mut self) {
        if let Some(generation) = &mut self.process.current {
            generation.runtime.kill();
        }
    }
}
