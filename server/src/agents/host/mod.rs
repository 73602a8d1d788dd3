//! One agent's host: an actor that owns the agent's process generations,
//! its open questions and the projection of its state for `sync` and the
//! registry, and multiplexes its events to every attached connection
//! (PROTOCOL.md §6, §10.1).
//!
//! The host routes; its parts decide. Each part owns its state and its
//! rules and is sans-IO: it takes an input and the time and says what to
//! do ([`out::Out`], or a small answer of its own), and the [`Host`] — the
//! one `impl` in this file — carries that out on the agent's process, its
//! connections, its journal and the daemon's shared books. Everything
//! about one agent happens in this one task, in order, so the attach
//! sequence is exact: the `response`, then the `sync`, then every later
//! event once.
//!
//! - [`process`]: the process's generations, their epochs, start and stop
//!   deadlines, idle reaping and the daemon's shutdown.
//! - [`link`]: the process's input, the commands in flight through it, and
//!   work that waits for a ready process.
//! - [`questions`]: permission and UI requests, first answer wins (§6.3),
//!   headless answers, step-up, and what the sandbox answers itself.
//! - [`projection`]: status, runtime state, activity, `AgentInfo`, `sync`.
//! - [`journal`] and [`attachments`]: every event numbered and kept for
//!   resumes, and the connections it goes to.
//! - [`run`]: a supervised run and the one queued behind it (§10.3).
//! - [`handle`]: the commands a host takes and the async shell around it.
//! - [`io`]: what else the host touches (the connections, the journal, the
//!   daemon's books); it carries out and decides nothing.

mod attachments;
mod handle;
mod io;
mod journal;
mod lines;
mod link;
mod out;
pub mod process;
mod projection;
mod questions;
pub mod run;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use shard_agent::session_view::SessionView;
use shard_protocol::agent::{Empty, PendingKind, PendingRequest, Prompt, Steer, UiKind};
use shard_protocol::approvals::Answerer;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AttachResult, AttachRole, TerminateResult};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};
use shard_protocol::usage::AgentUsage;
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

pub use self::handle::{
    Context, Dormancy, HOST_QUEUE, HostCommand, HostHandle, ShutdownMode, wake,
};
use self::io::Io;
pub use self::journal::JournalLimits;
use self::link::{Then, Waiting};
use self::out::Out;
use self::process::{Due, Shutting};
pub use self::questions::{Verdict, fingerprint};
use super::error::AgentError;
use super::manifest::Manifest;
use super::{Sub, SubscriberId, Wire};
use crate::agents::runtime::{ChildEvent, stdio};

pub struct Host {
    manifest: Manifest,
    process: process::Supervision,
    link: link::Link,
    questions: questions::Questions,
    projection: projection::Projection,
    runs: run::Runs,
    io: Io,
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
        let child_events = host.link.wire();
        (host, child_events)
    }

    /// A host for `manifest` with no process and no queues: what a listed
    /// agent is until something is asked of it.
    pub fn dormant(context: Arc<Context>, manifest: Manifest, now: Instant) -> Self {
        let mut projection = projection::Projection::new(&manifest);
        projection.sandbox =
            context.sandbox.describe(&manifest.agent_id, manifest.runtime_id(), manifest.sandbox);
        context.delegation.set_parent(&manifest.agent_id, manifest.parent_agent_id.as_deref());
        let host = Self {
            process: process::Supervision::new(context.idle_timeout, now),
            questions: questions::Questions::new(questions::Rules::of(&manifest, &context)),
            io: Io::new(context, &manifest),
            manifest,
            link: link::Link::default(),
            projection,
            runs: run::Runs::default(),
        };
        // Listed with what it has spent, though no process ran since the
        // daemon started (the usage book was loaded from its ledger).
        host.publish();
        host
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
        self.process.at_rest()
            && self.io.attached_nobody()
            && self.questions.is_empty()
            && self.link.is_empty()
            && !self.runs.is_running()
            && self.next_deadline().is_none()
    }

    /// Gives back what only an awake host needs: its queue's sender and the
    /// room its maps and lists grew to.
    pub(super) fn shed(&mut self) {
        self.io.shed();
        self.link.shed();
        self.questions.shed();
        self.process.shed();
    }

    /// Inactive, nothing open, nothing in flight: the process may be stopped.
    fn reapable(&self) -> bool {
        matches!(self.projection.status, AgentStatus::Idle | AgentStatus::Error)
            && !self.runs.is_running()
            && self.questions.is_empty()
            && self.link.is_empty()
            && self.process.ready()
    }

    /// The next instant at which [`Host::timers`] has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let process = self.process.deadline(self.reapable());
        [process, self.questions.next_headless(), self.runs.deadline()].into_iter().flatten().min()
    }

    /// Everything due at `now`: start timeouts, kill grace, idle reaping,
    /// headless answers, a stopped run's turn that did not end.
    pub fn timers(&mut self, now: Instant) {
        if let Some(due) = self.process.timers(now, self.reapable()) {
            due.log(self.id());
            self.link.control(Some(due.control()));
            match due {
                Due::NotReady => return self.fail_waiting(AgentError::NotReady.into()),
                Due::Unyielding => return,
                Due::Idle => {}
            }
        }
        let headless = self.questions.timers(now);
        self.apply(headless);
        if self.runs.overdue(now) {
            tracing::warn!(agent = %self.id(), "a stopped run did not end its turn; terminating the agent");
            let stop = self.process.kill(false, now);
            self.link.control(stop);
        }
    }

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
            HostCommand::Terminate { reply } => {
                let (deferred, stop) = self.process.terminate(self.projection.status.is_active());
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
                let taken = self.runs.take(task, events);
                let ok = taken.is_ok();
                let _ = reply.send(taken.map_err(WireError::from));
                if ok {
                    self.ensure_process(now);
                    self.drive_run(now);
                }
            }
            HostCommand::SteerRun { message, reply } => self.steer_run(message, reply),
            HostCommand::StopRun => {
                if self.runs.stop(now) == run::StopRun::Abort {
                    let _ = self.link.own(ClientMessage::Abort(Empty {}), Then::Nothing);
                }
            }
            HostCommand::Activate { session_id, reply } => {
                let _ = reply.send(self.activate(session_id, now));
            }
            HostCommand::RevokeHost { host, reply } => {
                let _ = reply.send(self.revoke_host(&host));
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

    pub fn child_event(&mut self, event: ChildEvent, now: Instant) {
        match event {
            // A superseded generation's lines and exit are history.
            ChildEvent::Lines { epoch, .. } | ChildEvent::Exited { epoch, .. }
                if !self.process.is_current(epoch) => {}
            ChildEvent::Lines { lines, .. } => {
                for line in lines {
                    match line {
                        Ok(line) => self.child_line(line, now),
                        Err(problem) => {
                            tracing::warn!(agent = %self.id(), %problem, "bad line from agent")
                        }
                    }
                }
            }
            ChildEvent::Exited { code, description, .. } => {
                self.process_exited(code, description, now)
            }
        }
    }

    /// Work that needs a ready process: done now, or once one is (restore
    /// on demand, §6.4). A process being stopped is let go first.
    fn when_ready(&mut self, work: Waiting, now: Instant) {
        if !self.process.ready() {
            self.link.wait(work);
            if !self.process.stopping() {
                self.ensure_process(now);
            }
            return;
        }
        match work {
            Waiting::Start { reply } => {
                let _ = reply.send(Ok(()));
            }
            Waiting::Attach { subscriber, role, id, after_seq } => {
                self.attach(subscriber, role, id, after_seq, now)
            }
            Waiting::Forward { subscriber, id, message } => {
                self.forward(subscriber, id, *message, now)
            }
        }
    }

    /// §6.4: the response, then the `sync` (or exactly the events missed
    /// since the client's cursor), then live events.
    fn attach(
        &mut self,
        subscriber: Sub,
        role: AttachRole,
        id: Option<String>,
        after_seq: Option<u64>,
        now: Instant,
    ) {
        let missed = self.io.missed(after_seq);
        let result = AttachResult {
            status: self.projection.status,
            info: self.current_info(),
            resumed: missed.is_some().then_some(true),
        };
        self.io.respond(&subscriber, id, false, Response::ok("agent.attach", result));
        match missed {
            Some(events) => events.into_iter().for_each(|event| {
                subscriber.push(event);
            }),
            None => {
                subscriber.push(self.sync_bytes(after_seq.is_some()));
            }
        }
        self.io.attach(subscriber, role);
        self.questions.responders_changed(self.io.no_responders(), now);
    }

    fn detach(&mut self, subscriber: SubscriberId, now: Instant) {
        if let Some(role) = self.io.detach(subscriber) {
            self.questions.responders_changed(self.io.no_responders(), now);
            if role == AttachRole::Interactive {
                // Open questions go to whoever answers them now.
                let again = self.questions.reannounce();
                self.apply(again);
            }
        }
        self.link.detached(subscriber);
    }

    /// Switches the agent to another session. Only between turns: with a
    /// turn, a question, a run or a command in hand, CONFLICT. A running
    /// process is stopped (it holds the old session's log); the next one
    /// runs the new session, at once if someone is watching, and every
    /// attachment then gets its `sync`. Every cursor resets: the events
    /// before tell of the other conversation.
    fn activate(&mut self, session_id: String, now: Instant) -> Result<String, AgentError> {
        let busy = self.projection.status.is_active()
            || self.link.turn_expected()
            || !self.questions.is_empty()
            || self.runs.any()
            || !self.link.is_empty()
            || self.process.stopping();
        if busy {
            return Err(AgentError::WorkInHand);
        }
        // Cursors reset first: a daemon killed between the two writes then
        // resets a cursor for nothing, never resumes one across sessions.
        self.io.start_over();
        let previous = self.manifest.switch_session(&self.io.context.home, session_id)?;
        self.projection.forget_session();
        self.process.switch_session();
        if self.process.running() {
            let stop = self.process.stop();
            self.link.control(stop);
        } else if !self.io.attached_nobody() {
            self.ensure_process(now);
        }
        Ok(previous)
    }

    /// A client's command, to the agent.
    fn forward(
        &mut self,
        subscriber: Sub,
        id: Option<String>,
        message: ClientMessage,
        now: Instant,
    ) {
        let refused = self.link.forward(subscriber, id, message);
        if refused.is_none() {
            self.process.touch(now);
        }
        self.apply(refused);
    }

    fn child_line(&mut self, line: String, now: Instant) {
        let up = self.process.up();
        // Deltas are nearly all of an agent's traffic, and all the host
        // needs of one is its kind: it goes out tagged, never decoded.
        if let Some(kind) = up.then(|| lines::streamed_delta(&line)).flatten() {
            self.process.touch(now);
            let activity = self.projection.delta(kind);
            return self.apply(activity.into_iter().chain([Out::Event(line)]));
        }
        let envelope = match Envelope::<ServerMessage>::from_json(&line) {
            Ok(envelope) => envelope,
            Err(problem) => {
                return tracing::warn!(agent = %self.id(), %problem, "unreadable event from agent");
            }
        };
        if !up {
            return self.startup_message(envelope, now);
        }
        self.process.touch(now);
        match envelope.message {
            ServerMessage::Response(response) => self.child_response(envelope.id, response),
            ServerMessage::Hello(_) | ServerMessage::Sync(_) => {}
            ServerMessage::PermissionRequest(request) => {
                self.raise(PendingKind::Permission(request), envelope.id, line)
            }
            ServerMessage::UiRequest(request) if request.kind != UiKind::Notify => {
                self.raise(PendingKind::Ui(request), envelope.id, line)
            }
            message @ (ServerMessage::PermissionResolved(_) | ServerMessage::UiResolved(_)) => {
                let resolved = self.questions.resolved(message, &line);
                self.apply(resolved);
            }
            other => {
                self.observe(&other);
                self.apply([Out::Event(line)]);
            }
        }
        self.drive_run(now);
    }

    /// A question from the agent, made safe to show, numbered, and put to
    /// the questions part.
    fn raise(&mut self, request: PendingKind, id: Option<String>, line: String) {
        let (request, line) = lines::display_safe(request, id, line);
        let announcement = self.io.stamp(&line);
        let sandbox = self.projection.sandbox.as_ref();
        let raising = questions::Raising {
            nobody: self.io.no_responders(),
            allow_inside: sandbox.is_some_and(|sandbox| sandbox.allow_inside),
        };
        let raised = self.questions.raise(request, announcement, raising);
        self.apply(raised);
    }

    /// One of the agent's events, for the parts that follow it and the
    /// daemon's books.
    fn observe(&mut self, message: &ServerMessage) {
        let usage = self.io.books(&self.manifest.session_id, message);
        let seen = self.projection.observe(message);
        self.apply(seen);
        if let Some(usage) = usage {
            let event = AgentUsage { agent_id: self.id().to_owned(), usage };
            self.apply([Out::Publish, Out::Broadcast(ServerMessage::AgentUsage(event))]);
        }
        if matches!(message, ServerMessage::Status(_)) && !self.projection.status.is_active() {
            self.link.turn_settled();
            let stop = self.process.inactive();
            self.link.control(stop);
        }
        self.runs.observe(message);
    }

    /// `hello` then `sync` from a new process.
    fn startup_message(&mut self, envelope: Envelope<ServerMessage>, now: Instant) {
        match envelope.message {
            ServerMessage::Hello(hello) => {
                self.projection.capabilities = Some(hello.capabilities);
                self.process.hello();
            }
            ServerMessage::Sync(sync) if self.process.saw_hello() => {
                let record = SessionView::open(&self.io.context.home, &self.manifest.session_id);
                self.projection.synced(&sync, record.ok());
                let resync = self.process.became_ready(now);
                let mut running = self.projection.set_runtime_state(RuntimeState::Running);
                running.extend(self.projection.activity_of_status());
                self.apply(running);
                if resync {
                    let sync = self.sync_bytes(false);
                    self.io.fan_out(&sync);
                }
                self.drive_run(now);
                for waiting in self.link.take_waiting() {
                    self.when_ready(waiting, now);
                }
            }
            ServerMessage::Error(error) => {
                tracing::error!(agent = %self.id(), code = %error.code, message = %error.message, "agent refused to start");
                let (code, message) = (error.code, error.message.clone());
                self.fail_waiting(AgentError::StartRefused { code, message }.into());
            }
            _ => {}
        }
    }

    fn child_response(&mut self, id: Option<String>, response: Response) {
        let active = self.projection.status.is_active();
        let Some(inflight) = id.and_then(|id| self.link.answered(&id, &response, active)) else {
            return;
        };
        match inflight.then {
            Then::Nothing => {}
            Then::RunPrompt => self.runs.prompt_answered(&response),
            Then::Steer { turn_id, reply } => {
                let _ = reply.send(response.outcome.clone().map(|_| turn_id));
            }
        }
        if let Some(subscriber) = inflight.subscriber {
            self.io.respond(&subscriber, inflight.client_id, true, response);
        }
    }

    /// A person's answer (§6.3): the first valid one wins and is passed on.
    fn answer(
        &mut self,
        message: ClientMessage,
        answerer: Answerer,
        fingerprint: Option<&str>,
        stepped_up: bool,
    ) -> Verdict {
        let accepted = match self.questions.judge(message, answerer, fingerprint, stepped_up) {
            Ok(accepted) => accepted,
            Err(verdict) => return verdict,
        };
        if self.link.own(accepted.message, Then::Nothing).is_err() {
            return Verdict::Busy;
        }
        self.questions.won(&accepted.request_id, accepted.answerer);
        Verdict::Won
    }

    /// Starts a new generation unless one is running or starting.
    fn ensure_process(&mut self, now: Instant) {
        if self.process.running() {
            return;
        }
        if self.process.shutting_down() {
            return self.fail_waiting(AgentError::ShuttingDown.into());
        }
        if !self.link.awake() {
            return self.fail_waiting(AgentError::HostNotRunning.into());
        }
        let epoch = self.process.next_epoch();
        let log_from = stdio::log_length(&self.io.context.home, self.id());
        let spawner = self.io.context.spawner.as_ref();
        if let Err(error) = self.link.spawn(spawner, &self.manifest.spawn_request(epoch)) {
            let failed = self.projection.set_runtime_state(RuntimeState::Failed);
            self.apply(failed);
            return self.fail_waiting(error.into());
        }
        self.refresh_sandbox();
        self.process.started(epoch, now, log_from);
        let starting = self.projection.set_runtime_state(RuntimeState::Starting);
        self.apply(starting);
    }

    fn process_exited(&mut self, code: Option<i32>, description: String, now: Instant) {
        let Some(exit) = self.process.exited() else { return };
        let ready = exit.generation.ready;
        let ended =
            stdio::Ended { expected: exit.expected, ready, log_from: exit.generation.log_from };
        let description = stdio::ended(&self.io.context.home, self.id(), ended, description);
        if !ready {
            self.fail_waiting(AgentError::ExitedStarting(description.clone()).into());
        }
        let orphaned = self.questions.orphaned();
        self.apply(orphaned);
        self.io.interrupted();
        if self.runs.is_running() {
            self.runs.end(Some(format!("the agent's process ended: {description}")));
        }
        let failed = self.link.process_gone();
        self.apply(failed);
        self.process.answer_kill_waiters();
        let down = self.projection.exited(exit.expected, description, code);
        self.apply(down);
        if self.process.finish_shutdown() {
            return self.io.close();
        }
        // Work that arrived while it was stopping starts the next
        // generation, and so does a switched session someone is watching.
        let resync = self.process.switch_pending() && !self.io.attached_nobody();
        if self.link.anything_waiting() || self.runs.is_running() || resync {
            self.ensure_process(now);
        }
    }

    /// Sends the run's task once the agent is ready and idle.
    fn drive_run(&mut self, now: Instant) {
        if !self.process.ready() || self.projection.status.is_active() {
            return;
        }
        let Some(task) = self.runs.due_task() else { return };
        let prompt = Prompt { message: task, images: None, streaming_behavior: None, pinned: None };
        if self.link.own(ClientMessage::Prompt(prompt), Then::RunPrompt).is_err() {
            return self.runs.end(Some("the agent is not reading its input".to_owned()));
        }
        self.process.touch(now);
    }

    /// `HostCommand::SteerRun`: a strict steer into the run's turn.
    fn steer_run(&mut self, message: String, reply: oneshot::Sender<Result<String, WireError>>) {
        let Some(turn_id) = self.runs.steer_turn().filter(|_| self.process.ready()) else {
            let _ = reply.send(Err(AgentError::NoActiveTurn.into()));
            return;
        };
        let steer = Steer { message, images: None, turn_id: Some(turn_id.clone()) };
        if let Err(Then::Steer { reply, .. }) =
            self.link.own(ClientMessage::Steer(steer), Then::Steer { turn_id, reply })
        {
            let _ = reply.send(Err(AgentError::NotReading.into()));
        }
    }

    /// `sandbox.revoke`: takes `host` back from the agent's grants; the
    /// sandbox as it is then.
    fn revoke_host(
        &mut self,
        host: &shard_agent::sandbox::HostPort,
    ) -> Result<shard_protocol::sandbox::SandboxInfo, AgentError> {
        self.io.revoke(host)?;
        self.refresh_sandbox();
        self.projection.sandbox.clone().ok_or(AgentError::NotGranted(host.to_string()))
    }

    /// Describes the agent's sandbox again (config.toml, its grants).
    fn refresh_sandbox(&mut self) {
        let changed = self.projection.set_sandbox(self.io.sandbox(&self.manifest));
        self.apply(changed);
    }

    /// The `sync` as sent; `reset` when it answers a cursor the journal no
    /// longer covers.
    fn sync_bytes(&mut self, reset: bool) -> Wire {
        let unanswered = self.questions.unanswered_requests().cloned();
        let mut pending: Vec<PendingRequest> =
            unanswered.map(|request| PendingRequest { agent_id: None, request }).collect();
        pending.extend(self.io.context.delegation.delegated_pending(self.id()));
        let (epoch, seq) = (self.process.epoch(), self.io.last_seq());
        let mut sync = self.projection.sync(pending, epoch, seq);
        sync.reset = reset.then_some(true);
        Wire::from(Envelope::new(ServerMessage::Sync(sync)).for_agent(self.id()).to_json())
    }

    fn current_info(&self) -> AgentInfo {
        let usage = self.io.context.usage.total(self.id()).map(|total| total.as_usage());
        self.projection.info(&self.manifest, usage)
    }

    fn publish(&self) {
        self.projection.publish(self.current_info());
    }

    fn fail_waiting(&mut self, error: WireError) {
        let failed = self.link.fail_waiting(error);
        self.apply(failed);
    }

    /// Carries out what a part decided, in order.
    fn apply(&mut self, outs: impl IntoIterator<Item = Out>) {
        for out in outs {
            match self.io.perform(out) {
                Some(Out::Own(message)) => {
                    let _ = self.link.own(message, Then::Nothing);
                }
                Some(Out::Publish) => self.publish(),
                Some(Out::Activity) => {
                    let activity = self.projection.activity_of_status();
                    self.apply(activity);
                }
                Some(Out::RefreshSandbox) => self.refresh_sandbox(),
                Some(_) | None => {}
            }
        }
    }
}
