//! One agent's host: an actor that owns the agent's process generations,
//! its open questions and the projection of its state for `sync` and the
//! registry, and multiplexes its events to every attached connection
//! (PROTOCOL.md §6, §10.1).
//!
//! The host routes; its parts decide. Each part owns its state and its
//! rules and is sans-IO: it takes an input and the time and says what to
//! do ([`out::Out`], or a small answer of its own), and the [`Host`] — its
//! `impl` in this file, but for its command table beside the commands in
//! [`handle`] — carries that out on the agent's process, its connections,
//! its journal and the daemon's shared books. Everything
//! about one agent happens in this one task, in order, so the attach
//! sequence is exact: the `response`, then the `sync`, then every later
//! event once.
//!
//! The parts: [`process`] (generations, deadlines, reaping, shutdown),
//! [`link`] (the process's input, commands in flight, waiting work),
//! [`questions`] (§6.3), [`projection`] (status, `AgentInfo`, `sync`),
//! [`run`] (§10.3), [`budget`] (the hold and its question); [`lines`]
//! reads the agent's lines; [`io`] is what else the host touches
//! (connections, [`journal`], the daemon's books); [`handle`] is its
//! commands, their table and its async shell. docs/ARCHITECTURE.md draws
//! how they fit.

mod attachments;
mod budget;
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
mod streaming;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use shard_protocol::agent::PendingKind;
use shard_protocol::approvals::Answerer;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AttachResult, AttachRole};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub use self::handle::{
    Context, Dormancy, HOST_QUEUE, HostCommand, HostHandle, ShutdownMode, wake,
};
use self::io::Io;
pub use self::journal::JournalLimits;
use self::lines::Line;
use self::link::Waiting;
use self::out::Out;
use self::out::Then;
use self::process::Due;
pub use self::questions::{Verdict, fingerprint};
use super::error::AgentError;
use super::manifest::Manifest;
use super::{Sub, SubscriberId, Wire};
use crate::agents::runtime::{ChildEvent, NotTaken, SessionRecord, stdio};

pub struct Host {
    manifest: Manifest,
    process: process::Supervision,
    link: link::Link,
    questions: questions::Questions,
    projection: projection::Projection,
    runs: run::Runs,
    budget: budget::Budget,
    io: Io,
    /// What the fleet was last told: awake, idle.
    told_fleet: std::cell::Cell<(bool, bool)>,
    /// A node's agent: what its node last said of it (its status there,
    /// whether its process runs there), shown once the hub stops
    /// listening.
    at_node: Option<(AgentStatus, RuntimeState)>,
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
        let io = Io::new(context.clone(), &manifest);
        let mut projection = projection::Projection::new(&manifest);
        projection.sandbox = io.sandbox(&manifest);
        let parent = manifest.identity.parent_agent_id.as_deref();
        context.delegation.set_parent(&manifest.agent_id, parent);
        context.budgets.set_parent(&manifest.agent_id, parent);
        let host = Self {
            process: process::Supervision::new(context.idle_timeout, now),
            questions: questions::Questions::new(questions::Rules::of(&manifest, &context)),
            io,
            manifest,
            link: link::Link::default(),
            projection,
            runs: run::Runs::default(),
            budget: budget::Budget::default(),
            told_fleet: std::cell::Cell::new((false, false)),
            at_node: None,
        };
        // Listed with what it has spent, though no process ran since the
        // daemon started (the usage book was loaded from its ledger).
        host.publish();
        host
    }

    pub fn agent_id(&self) -> &str {
        &self.manifest.agent_id
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
            && self.settled()
            && self.next_deadline().is_none()
    }

    /// No question open, no command in flight or waiting, no run.
    fn settled(&self) -> bool {
        self.questions.is_empty() && self.link.is_empty() && !self.runs.is_running()
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
            && self.settled()
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
            due.log(self.agent_id());
            self.link.control(Some(due.control()));
            if due == Due::NotReady {
                self.fail_waiting(AgentError::NotReady.into());
            }
        }
        let headless = self.questions.timers(now);
        self.apply(headless);
        if self.runs.overdue(now) {
            tracing::warn!(agent = %self.agent_id(), "a stopped run did not end its turn; terminating the agent");
            let stop = self.process.kill(false, now);
            self.link.control(stop);
        }
    }

    pub fn child_event(&mut self, event: ChildEvent, now: Instant) {
        match event {
            // A superseded generation's lines and exit are history.
            ChildEvent::Lines { epoch, .. }
            | ChildEvent::Exited { epoch, .. }
            | ChildEvent::Ask { epoch, .. }
            | ChildEvent::Withdraw { epoch, .. }
                if !self.process.is_current(epoch) => {}
            ChildEvent::Lines { lines, .. } => {
                for line in lines::readable(lines, &self.manifest.agent_id) {
                    self.child_line(line, now);
                }
            }
            ChildEvent::Exited { code, description, .. } => {
                self.process_exited(code, description, now)
            }
            // The daemon's own question: shown like the agent's, and
            // answered to the daemon.
            ChildEvent::Ask { asked, .. } => {
                let (request, line) = lines::asked(asked.request);
                self.raise(request, Some(asked.answer), &line);
            }
            ChildEvent::Withdraw { request_id, .. } => {
                let withdrawn = self.questions.withdraw(&request_id);
                self.apply(withdrawn);
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
                let refused = self.link.forward(subscriber, id, *message);
                if refused.is_none() {
                    self.process.touch(now);
                }
                self.apply(refused);
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
        let resumed = missed.is_some().then_some(true);
        let result =
            AttachResult { status: self.projection.status, info: self.current_info(), resumed };
        let catch_up = missed.unwrap_or_else(|| vec![self.sync_bytes(after_seq.is_some())]);
        self.io.join(subscriber, role, id, result, catch_up);
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
            || !self.settled()
            || self.runs.any()
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
            let stop = self.process.stop(now);
            self.link.control(stop);
        } else if !self.io.attached_nobody() {
            self.ensure_process(now);
        }
        Ok(previous)
    }

    fn child_line(&mut self, line: String, now: Instant) {
        let up = self.process.up();
        match lines::read(line, up, self.agent_id()) {
            Line::Delta(delta, line) => {
                self.process.touch(now);
                let activity = self.projection.streamed(&delta);
                return self.apply(activity.into_iter().chain([Out::Event(line)]));
            }
            Line::Hello(capabilities) => {
                self.projection.capabilities = Some(capabilities);
                return self.process.hello();
            }
            Line::Sync(sync) if self.process.saw_hello() => return self.ready(&sync, now),
            Line::Refused(why) => return self.fail_waiting(why.into()),
            Line::Sync(_) | Line::Nothing => return,
            Line::Response(id, response) => self.child_response(id, response),
            Line::Question(request, line) => self.raise(request, None, &line),
            Line::Resolved(message, line) => {
                let resolved = self.questions.resolved(message, &line);
                self.apply(resolved);
            }
            Line::Event(message, line) => {
                self.observe(&message, now);
                self.apply([Out::Event(line)]);
                // Told it paused, then asked why.
                if matches!(&message, ServerMessage::Status(s) if s.status == AgentStatus::Paused) {
                    self.ask_budget();
                }
            }
        }
        self.process.touch(now);
        self.drive_run();
    }

    /// A question, numbered and put to the questions part; `asker`: the
    /// daemon asked it, and its answer goes there.
    fn raise(&mut self, request: PendingKind, asker: Option<questions::Answer>, line: &str) {
        self.raise_as(request, asker, line, false);
    }

    /// [`Self::raise`], of a question that waits for a person however long
    /// (`for_a_person`) or not.
    fn raise_as(
        &mut self,
        request: PendingKind,
        asker: Option<questions::Answer>,
        line: &str,
        for_a_person: bool,
    ) {
        let announcement = self.io.stamp(line);
        // What a node's agent's sandbox holds is for its node to answer,
        // and it asks only what it did not: the hub answers none of it.
        let sandbox = self.projection.sandbox.as_ref().filter(|_| self.manifest.remote.is_none());
        let raising = questions::Raising {
            nobody: self.io.no_responders(),
            allow_inside: sandbox.is_some_and(|sandbox| sandbox.allow_inside),
            for_a_person,
        };
        let raised = self.questions.raise(request, asker, announcement, raising);
        self.apply(raised);
    }

    /// One of the agent's events, for the parts that follow it and the
    /// daemon's books.
    fn observe(&mut self, message: &ServerMessage, now: Instant) {
        let booked = self.io.books(&self.manifest.session_id, message);
        let seen = self.projection.observe(message);
        self.apply(seen.into_iter().chain(booked));
        if matches!(message, ServerMessage::Usage(_)) {
            self.review_budget();
        }
        if matches!(message, ServerMessage::Status(_)) && !self.projection.status.is_active() {
            self.link.turn_settled();
            let stop = self.process.inactive(now);
            self.link.control(stop);
        }
        self.runs.observe(message);
    }

    /// A new process's `sync`, after its `hello`: it is ready, and what
    /// waited for it goes ahead.
    fn ready(&mut self, sync: &shard_protocol::agent::Sync, now: Instant) {
        let record = SessionRecord::new(&self.io.context.home, &self.manifest.session_id);
        self.projection.synced(sync, record.view().ok());
        self.review_budget();
        let resync = self.process.became_ready(now);
        let mut running = self.projection.set_runtime_state(RuntimeState::Running);
        running.extend(self.projection.activity_of_status());
        self.apply(running);
        if resync {
            let sync = self.sync_bytes(false);
            self.io.fan_out(&sync);
        }
        self.drive_run();
        for waiting in self.link.take_waiting() {
            self.when_ready(waiting, now);
        }
    }

    fn child_response(&mut self, id: Option<String>, response: Response) {
        let active = self.projection.status.is_active();
        let Some(inflight) = id.and_then(|id| self.link.answered(&id, &response, active)) else {
            return;
        };
        match inflight.then {
            Then::Answer { request_id } => {
                let offline = shard_protocol::error::ErrorCode::NodeOffline;
                if matches!(&response.outcome, Err(error) if error.code == offline) {
                    let reopened = self.questions.reopen(&request_id);
                    self.apply(reopened);
                }
            }
            then => self.runs.answered(then, &response),
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
        let message = accepted.message;
        if accepted.for_agent {
            let then = Then::Answer { request_id: accepted.request_id.clone() };
            match self.link.own(message.clone(), then) {
                Ok(()) => {}
                Err((_, NotTaken::Full)) => return Verdict::Busy,
                Err((_, NotTaken::Unreachable(_))) => return Verdict::Unreachable,
            }
        }
        let won = self.questions.won(&accepted.request_id, accepted.answerer, &message);
        self.apply(won);
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
        // A node's agent runs there, under the node's own limits: the
        // hub's generation of it is a listener, not a process.
        let local = self.manifest.remote.is_none();
        if local && let Err(full) = self.io.context.fleet.admit(self.agent_id()) {
            return self.fail_waiting(AgentError::FleetFull(full).into());
        }
        let epoch = self.process.next_epoch();
        let log_from = stdio::log_length(&self.io.context.home, self.agent_id());
        let spawner = self.io.context.spawner.as_ref();
        if let Err(error) = self.link.spawn(
            spawner,
            &crate::agents::runtime::SpawnRequest::of(&self.io.context.home, &self.manifest, epoch),
        ) {
            let failed = self.projection.set_runtime_state(RuntimeState::Failed);
            self.apply(failed);
            return self.fail_waiting(error.into());
        }
        self.refresh_sandbox();
        self.budget.process_started();
        self.process.started(epoch, now, log_from);
        let starting = self.projection.set_runtime_state(RuntimeState::Starting);
        self.apply(starting);
    }

    fn process_exited(&mut self, code: Option<i32>, description: String, now: Instant) {
        let Some((ended, because)) = self.process.exited() else { return };
        let description = stdio::ended(&self.io.context.home, self.agent_id(), ended, description);
        if !ended.ready {
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
        let down = self.projection.exited(ended.expected, because, description, code);
        self.apply(down);
        // The hub stopped listening to a node's agent, which goes on there:
        // shown as its node last said, not as stopped.
        if let Some((status, state)) = self.at_node.filter(|_| ended.expected) {
            let said = self.projection.node_said(status, state);
            self.apply(said);
        }
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

    /// Holds the agent's model calls while a budget over it is reached, and
    /// lets them go once none is.
    fn review_budget(&mut self) {
        let budgets = &self.io.context.budgets;
        let agent_id = &self.manifest.agent_id;
        let review = self.budget.review(budgets, agent_id, self.process.ready());
        self.apply(review);
    }

    /// The agent paused at a budget: a person is asked to raise it, and
    /// only a person answers (never the headless rule: the one who can is
    /// often away, told by a push).
    fn ask_budget(&mut self) {
        let budgets = &self.io.context.budgets;
        let open = |request_id: &str| self.questions.is_open(request_id);
        if let Some(asked) = self.budget.ask(budgets, &self.manifest.agent_id, open) {
            let (request, line) = lines::asked(asked.request);
            self.raise_as(request, Some(asked.answer), &line, true);
        }
    }

    /// Sends the run's task once the agent is ready and idle.
    fn drive_run(&mut self) {
        let idle = self.process.ready() && !self.projection.status.is_active();
        let task = self.runs.drive(idle);
        self.apply(task);
    }

    /// Describes the agent's sandbox again (config.toml, its grants).
    fn refresh_sandbox(&mut self) {
        let changed = self.projection.set_sandbox(self.io.sandbox(&self.manifest));
        self.apply(changed);
    }

    /// The `sync` as sent; `reset` when it answers a cursor the journal no
    /// longer covers.
    fn sync_bytes(&mut self, reset: bool) -> Wire {
        let mut pending = self.questions.pending_requests();
        pending.extend(self.io.context.delegation.delegated_pending(self.agent_id()));
        let (epoch, seq) = (self.process.epoch(), self.io.last_seq());
        let mut sync = self.projection.sync(pending, epoch, seq);
        sync.reset = reset.then_some(true);
        Wire::from(Envelope::new(ServerMessage::Sync(sync)).for_agent(self.agent_id()).to_json())
    }

    fn current_info(&self) -> AgentInfo {
        let usage = self.io.context.usage.total(self.agent_id()).map(|total| total.as_usage());
        self.projection.info(&self.manifest, usage)
    }

    fn publish(&self) {
        self.projection.publish(self.current_info());
        let (awake, idle) = self.for_fleet();
        self.io.context.fleet.said(self.agent_id(), awake, idle);
        self.told_fleet.set((awake, idle));
    }

    /// Awake (a process starting or running, not told to stop), and
    /// idle, as the fleet counts the agent. A node's agent is never awake
    /// here: its process is the node's.
    fn for_fleet(&self) -> (bool, bool) {
        let local = self.manifest.remote.is_none();
        (local && self.process.running() && !self.process.stopping(), self.reapable())
    }

    /// Tells the fleet how the agent is when that changed since it was
    /// told: not everything that changes it publishes (the `agent.create`
    /// that waited for the process is answered after the process's `sync`
    /// published it, and then nothing is left to do; a process told to
    /// hibernate goes, and another is not hibernated for it meanwhile).
    pub(super) fn tell_fleet(&self) {
        let now = self.for_fleet();
        if self.told_fleet.replace(now) != now {
            self.io.context.fleet.now_is(self.agent_id(), now.0, now.1);
        }
    }

    fn fail_waiting(&mut self, error: WireError) {
        let failed = self.link.fail_waiting(error);
        self.apply(failed);
    }

    /// Carries out what a part decided, in order.
    fn apply(&mut self, outs: impl IntoIterator<Item = Out>) {
        for out in outs {
            match self.io.perform(out) {
                Some(Out::Send(message, then)) => {
                    if let Err((then, _)) = self.link.own(message, then) {
                        self.runs.unsent(then);
                    }
                }
                Some(Out::Publish) => self.publish(),
                Some(Out::Activity) => {
                    let activity = self.projection.activity_of_status();
                    self.apply(activity);
                }
                Some(Out::RefreshSandbox) => self.refresh_sandbox(),
                Some(Out::Withdraw(request_id)) => {
                    let withdrawn = self.questions.withdraw(&request_id);
                    self.apply(withdrawn);
                }
                Some(_) | None => {}
            }
        }
    }
}
