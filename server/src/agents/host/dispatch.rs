//! The host's dispatch: what each command from a connection and each line
//! from the agent process does. Work that needs a ready process waits in
//! `waiting` and starts one (restore on demand, §6.4); the attach sequence
//! is the `response`, then the `sync`, then live events (CONTRACT.md).

use shard_protocol::agent::{DeltaKind, PendingKind, RecallSteerResult, UiKind};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AttachResult, AttachRole, TerminateResult};
use shard_protocol::types::RuntimeState;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::time::Instant;

use super::process::Shutdown;
use super::projection::respond;
use super::{Host, HostCommand, Inflight, ShutdownMode, Then, Waiting};
use crate::agents::error::AgentError;
use crate::agents::runtime::ChildEvent;
use crate::agents::{Sub, SubscriberId};

/// The most bytes of missed events one resume sends; more, and a `sync`
/// is smaller. Half a connection's default outbox (4 MiB, `clients`), so
/// that live events still fit behind them.
const RESUME_BUDGET: usize = 2 * 1024 * 1024;

impl Host {
    pub fn command(&mut self, command: HostCommand, now: Instant) {
        match command {
            HostCommand::Attach { subscriber, role, id, after_seq } => {
                if self.ready() {
                    self.attach(subscriber, role, id, after_seq, now);
                } else {
                    self.waiting.push(Waiting::Attach { subscriber, role, id, after_seq });
                    self.ensure_process(now);
                }
            }
            HostCommand::Detach { subscriber, id } => {
                self.detach(subscriber.id(), now);
                respond(&subscriber, id, None, Response::accepted("agent.detach"));
            }
            HostCommand::Forward { subscriber, id, message } => {
                self.route(subscriber, id, message, now)
            }
            HostCommand::Answer { subscriber, id, message, answerer } => {
                self.answer(&subscriber, id, message, answerer)
            }
            HostCommand::AnswerChecked { message, answerer, fingerprint, stepped_up, reply } => {
                let verdict = self.answer_checked(message, answerer, &fingerprint, stepped_up);
                let _ = reply.send(verdict);
            }
            HostCommand::Disconnected { subscriber } => self.detach(subscriber, now),
            HostCommand::Start { reply } => {
                if self.ready() {
                    let _ = reply.send(Ok(()));
                } else {
                    self.waiting.push(Waiting::Start { reply });
                    self.ensure_process(now);
                }
            }
            HostCommand::Terminate { reply } => {
                let active = self.projection.status.is_active() && self.process.current.is_some();
                if active {
                    self.terminate_when_inactive = true;
                } else {
                    self.stop_process();
                }
                let _ = reply.send(TerminateResult { deferred: active });
            }
            HostCommand::Kill { force, reply } => {
                if self.process.current.is_none() {
                    let _ = reply.send(());
                    return;
                }
                self.process.kill_waiters.push(reply);
                self.kill_process(force, now);
            }
            HostCommand::Run { task, events, reply } => self.take_run(task, events, reply, now),
            HostCommand::SteerRun { message, reply } => self.steer_run(message, reply),
            HostCommand::StopRun => self.stop_run(now),
            HostCommand::Activate { session_id, reply } => {
                let _ = reply.send(self.activate(session_id, now));
            }
            HostCommand::RevokeHost { host, reply } => {
                let _ = reply.send(self.revoke_host(&host));
            }
            HostCommand::Shutdown { mode, reply } => {
                self.fail_waiting(AgentError::ShuttingDown);
                let shutdown =
                    self.process.shutdown.get_or_insert(Shutdown { mode, waiters: Vec::new() });
                shutdown.mode = shutdown.mode.max(mode);
                if self.process.current.is_none() {
                    self.journal.close();
                    let _ = reply.send(());
                    return;
                }
                shutdown.waiters.push(reply);
                match mode {
                    ShutdownMode::Kill => self.kill_process(true, now),
                    // The agent's own way out: abort, flush, exit (CONTRACT.md
                    // "Process lifetime"), bounded by the kill grace.
                    ShutdownMode::Terminate => self.kill_process(false, now),
                    ShutdownMode::Drain if !self.projection.status.is_active() => {
                        self.stop_process()
                    }
                    ShutdownMode::Drain => {}
                }
            }
        }
    }

    pub fn child_event(&mut self, event: ChildEvent, now: Instant) {
        let current = |epoch| {
            self.process.current.as_ref().is_some_and(|generation| generation.epoch == epoch)
        };
        match event {
            // A superseded generation's lines and exit are history.
            ChildEvent::Lines { epoch, .. } | ChildEvent::Exited { epoch, .. }
                if !current(epoch) => {}
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

    fn attach(
        &mut self,
        subscriber: Sub,
        role: AttachRole,
        id: Option<String>,
        after_seq: Option<u64>,
        now: Instant,
    ) {
        // A cursor within retention gets exactly the events after it. Not
        // while a descendant's question is open: it lives in that agent's
        // journal, and only a sync carries it.
        let missed = after_seq
            .filter(|_| self.context.delegation.delegated_pending(self.id()).is_empty())
            .and_then(|after| self.journal.since(after, RESUME_BUDGET));
        let result = AttachResult {
            status: self.projection.status,
            info: self.current_info(),
            resumed: missed.is_some().then_some(true),
        };
        // §6.4: the response, then the sync (or what was missed), then live
        // events.
        respond(&subscriber, id, None, Response::ok("agent.attach", result));
        match missed {
            Some(events) => {
                for event in events {
                    subscriber.push(event);
                }
            }
            None => {
                subscriber.push(self.sync_bytes(after_seq.is_some()));
            }
        }
        // Attaching again changes the role: an observer never answers.
        if role == AttachRole::Interactive {
            self.context.delegation.attach(self.id(), &subscriber);
        } else {
            self.context.delegation.detach(self.id(), subscriber.id());
        }
        self.attached.insert(subscriber, role);
        self.responders_changed(now);
    }

    /// Switches the agent to another session. Only between turns: with a
    /// turn, a question, a run or a command in hand, CONFLICT. A running
    /// process is stopped (it holds the old session's log); the next one
    /// runs the new session, at once if someone is watching, and every
    /// attachment then gets its `sync`. Every cursor resets: the events
    /// before tell of the other conversation.
    fn activate(&mut self, session_id: String, now: Instant) -> Result<String, AgentError> {
        let busy = self.projection.status.is_active()
            || self.turn_expected
            || !self.questions.is_empty()
            || self.run.is_some()
            || self.next_run.is_some()
            || !self.waiting.is_empty()
            || !self.inflight.is_empty()
            || self.process.current.as_ref().is_some_and(|generation| generation.stopping);
        if busy {
            return Err(AgentError::WorkInHand);
        }
        // Cursors reset first: a daemon killed between the two writes then
        // resets a cursor for nothing, never resumes one across sessions.
        self.journal.start_over();
        let mut manifest = self.manifest.clone();
        let previous = std::mem::replace(&mut manifest.session_id, session_id);
        if let Err(error) = manifest.save(&self.context.home) {
            tracing::error!(agent = %self.id(), error = %format!("{error:#}"), "cannot write the manifest");
            return Err(AgentError::SwitchUnrecorded);
        }
        self.manifest = manifest;
        self.session = None;
        self.resync_when_ready = true;
        if self.process.current.is_some() {
            self.stop_process();
        } else if !self.attached.is_empty() {
            self.ensure_process(now);
        }
        Ok(previous)
    }

    fn detach(&mut self, subscriber: SubscriberId, now: Instant) {
        if let Some(role) = self.attached.remove(subscriber) {
            self.context.delegation.detach(self.id(), subscriber);
            self.responders_changed(now);
            if role == AttachRole::Interactive {
                self.reannounce();
            }
        }
        self.inflight.retain(|_, inflight| {
            inflight.subscriber.as_ref().is_none_or(|owner| owner.id() != subscriber)
        });
    }

    /// Per-agent commands other than answers.
    fn route(&mut self, subscriber: Sub, id: Option<String>, message: ClientMessage, now: Instant) {
        if self.ready() {
            self.forward(subscriber, id, message, now);
            return;
        }
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        let stopped = self.process.current.is_none();
        match message {
            // Listing never wakes a stopped runtime (§9.2).
            ClientMessage::ListModes(_)
            | ClientMessage::ListModels(_)
            | ClientMessage::ListReasoningLevels(_)
            | ClientMessage::ListCommands(_)
                if stopped =>
            {
                let error = AgentError::RuntimeStopped.into();
                respond(&subscriber, id, Some(self.id()), Response::failed(command, error));
            }
            ClientMessage::Abort(_) if stopped => {
                respond(&subscriber, id, Some(self.id()), Response::accepted(command));
            }
            // A stopped runtime has nothing queued: nothing to take back,
            // and no reason to wake it.
            ClientMessage::RecallSteer(_) if stopped => {
                let nothing = RecallSteerResult { recalled: None };
                respond(&subscriber, id, Some(self.id()), Response::ok(command, nothing));
            }
            message => {
                self.waiting.push(Waiting::Forward { subscriber, id, message: Box::new(message) });
                let stopping =
                    self.process.current.as_ref().is_some_and(|generation| generation.stopping);
                if !stopping {
                    self.ensure_process(now);
                }
            }
        }
    }

    fn forward(
        &mut self,
        subscriber: Sub,
        id: Option<String>,
        message: ClientMessage,
        now: Instant,
    ) {
        let internal = self.internal_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        let work = matches!(message, ClientMessage::Prompt(_) | ClientMessage::Steer(_));
        if !self.send_to_child(&Envelope::new(message).with_id(internal.clone())) {
            let error = AgentError::InputSlow.into();
            respond(&subscriber, id, Some(self.id()), Response::failed(command, error));
            return;
        }
        self.inflight.insert(
            internal,
            Inflight { subscriber: Some(subscriber), client_id: id, command, then: Then::Nothing },
        );
        self.turn_expected |= work;
        self.last_active = now;
    }

    pub(super) fn internal_id(&mut self) -> String {
        self.next_internal += 1;
        format!("d-{}", self.next_internal)
    }

    fn child_line(&mut self, line: String, now: Instant) {
        let ready = self.process.current.as_ref().is_some_and(|generation| generation.ready);
        // Deltas are nearly all of an agent's traffic, and all the host
        // needs of one is its kind: it goes out tagged, never decoded.
        if let Some(kind) = ready.then(|| streamed_delta(&line)).flatten() {
            self.last_active = now;
            self.observe_delta(kind);
            let event = self.stamp(&line);
            self.fan_out(event);
            return;
        }
        let envelope = match Envelope::<ServerMessage>::from_json(&line) {
            Ok(envelope) => envelope,
            Err(problem) => {
                tracing::warn!(agent = %self.id(), %problem, "unreadable event from agent");
                return;
            }
        };
        if !ready {
            self.startup_message(envelope, now);
            return;
        }
        self.last_active = now;
        match envelope.message {
            ServerMessage::Response(response) => self.child_response(envelope.id, response),
            ServerMessage::Hello(_) | ServerMessage::Sync(_) => {}
            ServerMessage::PermissionRequest(request) => {
                let (request, line) =
                    display_safe(PendingKind::Permission(request), envelope.id, line);
                self.raise(request, &line);
            }
            ServerMessage::UiRequest(request) if request.kind != UiKind::Notify => {
                let (request, line) = display_safe(PendingKind::Ui(request), envelope.id, line);
                self.raise(request, &line);
            }
            message @ (ServerMessage::PermissionResolved(_) | ServerMessage::UiResolved(_)) => {
                self.resolved(message, &line);
            }
            other => {
                // A message is in the session log once it completed, and a
                // turn's prompt once the turn ended: the index reads them.
                if matches!(other, ServerMessage::MessageComplete(_) | ServerMessage::TurnEnd(_)) {
                    self.context.search.touch(self.id(), &self.manifest.session_id);
                }
                if let ServerMessage::Error(error) = &other {
                    self.context.notices.failed(&self.notice_agent(), error.code.as_str());
                }
                self.observe(&other);
                self.observe_run(&other);
                let event = self.stamp(&line);
                self.fan_out(event);
            }
        }
        self.drive_run(now);
    }

    /// `hello` then `sync` from a new process.
    fn startup_message(&mut self, envelope: Envelope<ServerMessage>, now: Instant) {
        match envelope.message {
            ServerMessage::Hello(hello) => {
                self.projection.capabilities = Some(hello.capabilities);
                if let Some(generation) = &mut self.process.current {
                    generation.saw_hello = true;
                }
            }
            ServerMessage::Sync(sync)
                if self.process.current.as_ref().is_some_and(|generation| generation.saw_hello) =>
            {
                self.projection.status = sync.status;
                self.projection.mode = Some(sync.mode);
                if sync.capabilities.is_some() {
                    self.projection.capabilities = sync.capabilities;
                }
                self.session = shard_agent::session_view::SessionView::open(
                    &self.context.home,
                    &self.manifest.session_id,
                )
                .ok();
                self.projection.model = self.session.as_ref().and_then(|session| session.model());
                if let Some(generation) = &mut self.process.current {
                    generation.ready = true;
                }
                self.last_active = now;
                self.set_runtime_state(RuntimeState::Running);
                self.emit_activity();
                // §9.1: a replacement generation re-syncs existing
                // attachments, and so does a switched session.
                let switched = std::mem::take(&mut self.resync_when_ready);
                if self.process.generations > 1 || switched {
                    let sync = self.sync_bytes(false);
                    self.fan_out(sync);
                }
                self.drive_run(now);
                for waiting in std::mem::take(&mut self.waiting) {
                    match waiting {
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
            }
            ServerMessage::Error(error) => {
                tracing::error!(agent = %self.id(), code = %error.code, message = %error.message, "agent refused to start");
                let (code, message) = (error.code, error.message.clone());
                self.fail_waiting(AgentError::StartRefused { code, message });
            }
            _ => {}
        }
    }

    fn child_response(&mut self, id: Option<String>, response: Response) {
        let Some(inflight) = id.and_then(|id| self.inflight.remove(&id)) else { return };
        // A refused prompt starts nothing.
        let refused_work = matches!(inflight.command, "prompt" | "steer") && !response.success();
        if refused_work && !self.projection.status.is_active() {
            self.turn_expected = false;
        }
        match inflight.then {
            Then::Nothing => {}
            Then::RunPrompt => self.run_prompt_answered(&response),
            Then::Steer { turn_id, reply } => {
                let _ = reply.send(response.outcome.clone().map(|_| turn_id));
            }
        }
        if let Some(subscriber) = inflight.subscriber {
            respond(&subscriber, inflight.client_id, Some(self.id()), response);
        }
    }
}

/// The kind of a `message_delta` line, read without decoding the rest of
/// it; `None` for any other line (or one that is not even that much JSON),
/// which then takes the full decode.
fn streamed_delta(line: &str) -> Option<DeltaKind> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        type_name: std::borrow::Cow<'a, str>,
        kind: Option<DeltaKind>,
    }
    let head: Head = serde_json::from_str(line).ok()?;
    if head.type_name == "message_delta" { head.kind } else { None }
}

/// A question as every client gets it: the text a person decides on
/// (a permission's tool name, prompt, details and choices; a UI request's
/// title, message and placeholder) with each control and format character
/// written as a visible escape ([`shard_protocol::display`]), and its line
/// written again when that changed anything. What a person must act on
/// exactly (the call's `input`, an option's value, a prefill) is kept as
/// it is (docs/PROTOCOL-NOTES.md, "Text on the wire").
fn display_safe(
    mut request: PendingKind,
    id: Option<String>,
    line: String,
) -> (PendingKind, String) {
    use shard_protocol::display::shown;
    let mut changed = false;
    let mut clean = |text: &mut String| {
        if let std::borrow::Cow::Owned(safe) = shown(text).text {
            *text = safe;
            changed = true;
        }
    };
    match &mut request {
        PendingKind::Permission(permission) => {
            clean(&mut permission.tool_name);
            clean(&mut permission.prompt);
            for detail in permission.details.iter_mut().flatten() {
                detail.label.iter_mut().for_each(&mut clean);
                clean(&mut detail.value);
            }
            for choice in permission.choices.iter_mut().flatten() {
                clean(&mut choice.label);
                choice.description.iter_mut().for_each(&mut clean);
            }
        }
        PendingKind::Ui(ui) => {
            ui.title.iter_mut().for_each(&mut clean);
            ui.message.iter_mut().for_each(&mut clean);
            ui.placeholder.iter_mut().for_each(&mut clean);
        }
    }
    if !changed {
        return (request, line);
    }
    let message = match &request {
        PendingKind::Permission(permission) => ServerMessage::PermissionRequest(permission.clone()),
        PendingKind::Ui(ui) => ServerMessage::UiRequest(ui.clone()),
    };
    let mut envelope = Envelope::new(message);
    envelope.id = id;
    (request, envelope.to_json())
}
