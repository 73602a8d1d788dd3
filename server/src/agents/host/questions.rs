//! Permission and UI questions (PROTOCOL.md §6.3): each goes to every
//! attachment of the agent and to whoever answers for it (its own
//! interactive clients, else the nearest interactive ancestor's); the first
//! valid answer wins and is forwarded, later ones are dropped. With nobody
//! to answer anywhere in the hierarchy a question resolves at once to deny
//! (`source: "headless"`); one left open when the last responder leaves
//! waits `--headless-timeout`, then resolves the same way (CONTRACT.md).

use std::collections::HashSet;

use serde_json::Value;
use shard_protocol::agent::{
    ChoiceIntent, Decision, PendingKind, PermissionAnswer, PermissionResolved, PermissionResponse,
    UiResolved, UiResponse,
};
use shard_protocol::approvals::{Answerer, ApprovalKind, ApprovalRecord};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::HeadlessPolicy;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::time::Instant;

use super::projection::respond;
use super::{Host, Inflight};
use crate::agents::approvals::bounded_prompt;
use crate::agents::error::AgentError;
use crate::agents::{Sub, Wire, now_ms};

/// What came of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first valid answer: passed on to the agent.
    Won,
    /// Someone answered first.
    Answered,
    /// No such question is open (never asked, or closed).
    Unknown,
    /// The question with that id is not the call the answer was for.
    Changed,
    /// Not an answer the question takes.
    Invalid,
    /// The agent's input is full: try again.
    Busy,
    /// An allow from away that needs a passkey assertion first (`[step_up]`).
    StepUp,
}

/// What names one call exactly: its tool and its arguments, hashed. An
/// answer bound to a fingerprint is refused for any other call, even one
/// under the same request id.
pub fn fingerprint(request: &shard_protocol::agent::PermissionRequest) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(request.tool_name.as_bytes());
    hash.update([0]);
    hash.update(request.input.to_string().as_bytes());
    crate::id::hex(&hash.finalize())
}

/// One open question of this agent.
pub(super) struct Pending {
    request: PendingKind,
    /// The question as it was sent, tagged: re-sent when the responders
    /// change (a delegated child's question moving up to an ancestor).
    announcement: Wire,
    /// Set when every responder left: answer headless at this instant.
    headless_at: Option<Instant>,
    /// Who answered, once the daemon forwarded an answer.
    source: Option<Answerer>,
}

/// The agent's open questions, in the order asked. A question stays open
/// until the agent says it is settled, even once answered.
#[derive(Default)]
pub(super) struct OpenQuestions {
    open: Vec<Pending>,
}

impl OpenQuestions {
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn ask(&mut self, request: PendingKind, announcement: Wire) {
        self.open.push(Pending { request, announcement, headless_at: None, source: None });
    }

    fn get(&self, request_id: &str) -> Option<&Pending> {
        self.open.iter().find(|pending| pending.request.request_id() == request_id)
    }

    fn get_mut(&mut self, request_id: &str) -> Option<&mut Pending> {
        self.open.iter_mut().find(|pending| pending.request.request_id() == request_id)
    }

    /// Removes a settled question.
    fn settle(&mut self, request_id: &str) -> Option<Pending> {
        let at = self.open.iter().position(|pending| pending.request.request_id() == request_id)?;
        Some(self.open.remove(at))
    }

    /// Every open question, removed (their process is gone).
    fn take_all(&mut self) -> Vec<Pending> {
        std::mem::take(&mut self.open)
    }

    fn requests(&self) -> Vec<PendingKind> {
        self.open.iter().map(|pending| pending.request.clone()).collect()
    }

    /// The questions nobody has answered yet.
    fn unanswered(&self) -> impl Iterator<Item = &Pending> {
        self.open.iter().filter(|pending| pending.source.is_none())
    }

    /// What nobody has answered yet, as asked (for `sync`).
    pub fn unanswered_requests(&self) -> impl Iterator<Item = &PendingKind> {
        self.unanswered().map(|pending| &pending.request)
    }

    fn unanswered_mut(&mut self) -> impl Iterator<Item = &mut Pending> {
        self.open.iter_mut().filter(|pending| pending.source.is_none())
    }

    /// When each question due a headless answer gets it.
    pub fn next_headless(&self) -> impl Iterator<Item = Instant> + '_ {
        self.open.iter().filter_map(|pending| pending.headless_at)
    }

    /// The questions whose headless answer is due at `now`.
    fn due(&self, now: Instant) -> Vec<String> {
        let due =
            self.open.iter().filter(|pending| pending.headless_at.is_some_and(|at| now >= at));
        due.map(|pending| pending.request.request_id().to_owned()).collect()
    }

    /// Gives back the room the list grew to (a host going dormant).
    pub fn shed(&mut self) {
        self.open = Vec::new();
    }
}

impl Host {
    /// A question from the agent: announce it, and answer it headless at
    /// once if nobody anywhere can.
    pub(super) fn raise(&mut self, request: PendingKind, line: &str) {
        let request_id = request.request_id().to_owned();
        self.approvals.asked(asked_record(&request));
        let announcement = self.stamp(line);
        let held = self.sandbox_holds(&request);
        self.questions.ask(request, announcement.clone());
        self.publish_pending();
        self.deliver_question(announcement);
        if let Some(answer) = held {
            self.answer_as_sandbox(&request_id, answer);
            return;
        }
        if self.context.delegation.responders(self.id()).is_empty() && !self.queues_questions() {
            self.answer_headless(&request_id);
        }
        // One that waits for a person is told to those away (web::push).
        if let Some(pending) = self.questions.get(&request_id).filter(|open| open.source.is_none())
        {
            self.context.notices.asked(&self.notice_agent(), &pending.request);
        }
    }

    /// This agent, as a notice names it.
    pub(super) fn notice_agent(&self) -> crate::agents::NoticeAgent<'_> {
        crate::agents::NoticeAgent { agent_id: self.id(), name: self.manifest.name.as_deref() }
    }

    /// `headless_policy: queue`: a question nobody can answer waits for
    /// someone, however long, instead of being denied.
    fn queues_questions(&self) -> bool {
        self.manifest.headless_policy == Some(HeadlessPolicy::Queue)
    }

    /// How long a question stays open once nobody can answer it: the
    /// daemon's timeout, nothing under `deny` and `allow_if_rule_matches`
    /// (the runtime already ran whatever a rule allows), forever under
    /// `queue`.
    fn headless_wait(&self) -> Option<std::time::Duration> {
        match self.manifest.headless_policy {
            None => Some(self.context.headless_timeout),
            Some(HeadlessPolicy::Deny | HeadlessPolicy::AllowIfRuleMatches) => {
                Some(std::time::Duration::ZERO)
            }
            Some(HeadlessPolicy::Queue) => None,
        }
    }

    /// Sends a question (or its resolution) to every attachment of this agent
    /// and to the responders it is delegated to, each connection once.
    pub(super) fn deliver_question(&self, bytes: Wire) {
        let mut sent = HashSet::new();
        let responders = self.context.delegation.responders(self.id());
        for subscriber in self.attached.subscribers().chain(responders.iter()) {
            if sent.insert(subscriber.id()) {
                subscriber.push(bytes.clone());
            }
        }
    }

    /// The agent says a question is closed: forward the resolution with who
    /// answered it.
    pub(super) fn resolved(&mut self, message: ServerMessage, line: &str) {
        let bytes = match message {
            ServerMessage::PermissionResolved(mut resolved) => {
                let outcome = self.outcome_of(&resolved.request_id, &resolved.answer);
                let network = self.questions.get(&resolved.request_id).is_some_and(|pending| {
                    matches!(&pending.request, PendingKind::Permission(request)
                        if request.tool_name == shard_protocol::sandbox::NETWORK_TOOL)
                });
                if network {
                    // An "always" answer is among the agent's grants now.
                    self.refresh_sandbox();
                }
                let answerer = self.settle(&resolved.request_id);
                // Who answered as the daemon knows it; else as the agent
                // says (an abort, a rule).
                let answerer = answerer.unwrap_or_else(|| Answerer {
                    source: resolved.source.clone().unwrap_or_else(|| "agent".to_owned()),
                    ..Answerer::default()
                });
                resolved.source.get_or_insert_with(|| answerer.source.clone());
                self.approvals.resolved(&resolved.request_id, now_ms(), outcome, answerer);
                self.stamp(&Envelope::new(ServerMessage::PermissionResolved(resolved)).to_json())
            }
            ServerMessage::UiResolved(resolved) => {
                let answerer = self.settle(&resolved.request_id).unwrap_or_else(|| Answerer {
                    source: "agent".to_owned(),
                    ..Answerer::default()
                });
                let outcome = if resolved.value.is_null() { "dismissed" } else { "answered" };
                self.approvals.resolved(&resolved.request_id, now_ms(), outcome.into(), answerer);
                self.stamp(line)
            }
            _ => return,
        };
        self.deliver_question(bytes);
    }

    /// What an answer decided, for the history: the decision, or for a
    /// structured choice what its intent means (`allow`, `allow_always`,
    /// `deny`), else the choice's id.
    fn outcome_of(&self, request_id: &str, answer: &PermissionAnswer) -> String {
        let choice = match answer {
            PermissionAnswer::Decision(decision) => return decision_name(*decision).to_owned(),
            PermissionAnswer::Choice(choice) => choice,
        };
        let intent = self.questions.get(request_id).and_then(|pending| match &pending.request {
            PendingKind::Permission(request) => {
                request.choices.iter().flatten().find(|known| known.id == *choice)
            }
            PendingKind::Ui(_) => None,
        });
        let intent = intent.map(|known| known.intent);
        match intent {
            Some(ChoiceIntent::Allow) => "allow".to_owned(),
            Some(ChoiceIntent::Persist) => "allow_always".to_owned(),
            Some(ChoiceIntent::Deny) => "deny".to_owned(),
            _ => choice.clone(),
        }
    }

    /// Removes a settled question; returns who answered it, if known.
    fn settle(&mut self, request_id: &str) -> Option<Answerer> {
        let pending = self.questions.settle(request_id)?;
        self.context.notices.settled(self.id(), request_id);
        self.publish_pending();
        self.emit_activity();
        pending.source
    }

    fn publish_pending(&self) {
        self.context.delegation.set_pending(self.id(), self.questions.requests());
    }

    /// The headless answer: deny, or a null UI value (CONTRACT.md).
    pub(super) fn answer_headless(&mut self, request_id: &str) {
        let Some(pending) = self.questions.get_mut(request_id) else {
            return;
        };
        if pending.source.is_some() {
            return;
        }
        pending.source = Some(Answerer { source: "headless".to_owned(), ..Answerer::default() });
        pending.headless_at = None;
        let message = match &pending.request {
            PendingKind::Permission(_) => ClientMessage::PermissionResponse(PermissionResponse {
                request_id: request_id.to_owned(),
                answer: PermissionAnswer::Decision(Decision::Deny),
                reason: Some("no interactive client is attached".to_owned()),
            }),
            PendingKind::Ui(_) => ClientMessage::UiResponse(UiResponse {
                request_id: request_id.to_owned(),
                value: None,
            }),
        };
        self.forward_own(message);
    }

    /// The allow `request` gets without asking, if the agent's sandbox
    /// holds what it would do (`allow_inside`, docs/SANDBOX.md "Fewer
    /// questions"): a command, which runs inside the sandbox, or writes
    /// that all land in the agent's own directory. Never a network
    /// question, a write that names no file or leaves the directory, or a
    /// call whose effect is not known.
    fn sandbox_holds(&self, request: &PendingKind) -> Option<PermissionAnswer> {
        use crate::agents::effect::{self, Effect};
        let PendingKind::Permission(request) = request else { return None };
        let sandbox = self.projection.sandbox.as_ref()?;
        if !sandbox.allow_inside || request.tool_name == shard_protocol::sandbox::NETWORK_TOOL {
            return None;
        }
        let cwd = std::path::Path::new(&self.manifest.cwd);
        let held = match Effect::of(request, self.manifest.runtime_id()) {
            Effect::Runs => true,
            Effect::Writes(paths) => {
                !paths.is_empty()
                    && paths.iter().all(|path| {
                        effect::inside(cwd, path)
                            && effect::inside(cwd, &effect::resolved(&cwd.join(path)))
                    })
            }
            Effect::Looks | Effect::Delegates | Effect::Unknown => false,
        };
        if !held {
            return None;
        }
        let allow = PermissionAnswer::Decision(Decision::Allow);
        if request.accepts(&allow) {
            return Some(allow);
        }
        let choice =
            request.choices.iter().flatten().find(|choice| choice.intent == ChoiceIntent::Allow)?;
        Some(PermissionAnswer::Choice(choice.id.clone()))
    }

    /// Answers a question the sandbox holds (`source: "sandbox"`).
    fn answer_as_sandbox(&mut self, request_id: &str, answer: PermissionAnswer) {
        let Some(pending) = self.questions.get_mut(request_id) else { return };
        pending.source = Some(Answerer { source: "sandbox".to_owned(), ..Answerer::default() });
        pending.headless_at = None;
        let message = ClientMessage::PermissionResponse(PermissionResponse {
            request_id: request_id.to_owned(),
            answer,
            reason: Some("the agent's sandbox holds it (allow_inside)".to_owned()),
        });
        self.forward_own(message);
    }

    /// Sends the daemon's own command to the agent; its response is dropped.
    fn forward_own(&mut self, message: ClientMessage) -> bool {
        let id = self.internal_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        self.inflight.insert(id.clone(), Inflight::internal(command, super::Then::Nothing));
        let sent = self.send_to_child(&Envelope::new(message).with_id(id.clone()));
        if !sent {
            self.inflight.remove(&id);
        }
        sent
    }

    /// A client's answer: the first valid one wins and is forwarded; later or
    /// invalid ones are dropped silently (§6.3, §9.5). The daemon
    /// acknowledges every answer itself.
    pub(super) fn answer(
        &mut self,
        subscriber: &Sub,
        id: Option<String>,
        message: ClientMessage,
        answerer: Answerer,
    ) {
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        match self.try_answer(message, answerer, None, false) {
            Verdict::Busy => {
                let error = AgentError::AnswerQueueFull.into();
                respond(subscriber, id, None, Response::failed(command, error));
            }
            Verdict::StepUp => {
                let error = AgentError::StepUpRequired.into();
                respond(subscriber, id, None, Response::failed(command, error));
            }
            // Won; or unknown, already answered, or not a valid choice: not
            // an answer, and not an error either.
            _ => respond(subscriber, id, None, Response::accepted(command)),
        }
    }

    /// An answer that must be to exactly the call `fingerprint` names
    /// ([`fingerprint`]): an action from a notification. Says what came of it.
    pub(super) fn answer_checked(
        &mut self,
        message: ClientMessage,
        answerer: Answerer,
        fingerprint: &str,
        stepped_up: bool,
    ) -> Verdict {
        self.try_answer(message, answerer, Some(fingerprint), stepped_up)
    }

    fn try_answer(
        &mut self,
        message: ClientMessage,
        answerer: Answerer,
        fingerprint: Option<&str>,
        stepped_up: bool,
    ) -> Verdict {
        let request_id = match &message {
            ClientMessage::PermissionResponse(response) => response.request_id.clone(),
            ClientMessage::UiResponse(response) => response.request_id.clone(),
            _ => return Verdict::Invalid,
        };
        let Some(pending) = self.questions.get(&request_id) else {
            return Verdict::Unknown;
        };
        if pending.source.is_some() {
            return Verdict::Answered;
        }
        let valid = match (&pending.request, &message) {
            (PendingKind::Permission(request), ClientMessage::PermissionResponse(answer)) => {
                if fingerprint.is_some_and(|expected| expected != self::fingerprint(request)) {
                    return Verdict::Changed;
                }
                if !request.accepts(&answer.answer) {
                    return Verdict::Invalid;
                }
                if !stepped_up && self.needs_step_up(request, &answer.answer, &answerer) {
                    return Verdict::StepUp;
                }
                true
            }
            (PendingKind::Ui(_), ClientMessage::UiResponse(_)) => fingerprint.is_none(),
            _ => false,
        };
        if !valid {
            return Verdict::Invalid;
        }
        if !self.forward_own(message) {
            return Verdict::Busy;
        }
        if let Some(pending) = self.questions.get_mut(&request_id) {
            pending.source = Some(answerer);
            pending.headless_at = None;
        }
        Verdict::Won
    }

    /// Whether `answer` to `request` from `answerer` is an allow from away
    /// (a browser or a notification) that `[step_up]` guards.
    fn needs_step_up(
        &self,
        request: &shard_protocol::agent::PermissionRequest,
        answer: &PermissionAnswer,
        answerer: &Answerer,
    ) -> bool {
        let Some(rule) = &self.context.step_up else { return false };
        let from_away = matches!(answerer.source.as_str(), "web" | "push");
        let allows = match answer {
            PermissionAnswer::Decision(decision) => *decision != Decision::Deny,
            PermissionAnswer::Choice(id) => request
                .choices
                .iter()
                .flatten()
                .find(|choice| choice.id == *id)
                .is_some_and(|choice| choice.intent != ChoiceIntent::Deny),
        };
        let cwd = std::path::Path::new(&self.manifest.cwd);
        from_away && allows && rule.requires(request, cwd, self.manifest.runtime_id())
    }

    /// Resolutions for every open question of a process that is gone.
    pub(super) fn questions_orphaned(&mut self) {
        for pending in self.questions.take_all() {
            let request_id = pending.request.request_id().to_owned();
            // An answer already passed on may or may not have been acted
            // on: the history keeps who gave it, unconfirmed.
            let (outcome, answerer) = match pending.source {
                Some(answerer) => ("unconfirmed", answerer),
                None => {
                    let outcome = match pending.request {
                        PendingKind::Permission(_) => "deny",
                        PendingKind::Ui(_) => "dismissed",
                    };
                    let exited = "runtime_exited".to_owned();
                    (outcome, Answerer { source: exited, ..Answerer::default() })
                }
            };
            self.approvals.resolved(&request_id, now_ms(), outcome.to_owned(), answerer);
            self.context.notices.settled(self.id(), &request_id);
            self.broadcast_resolution(&pending.request, &request_id, "runtime_exited");
        }
        self.publish_pending();
    }

    fn broadcast_resolution(&mut self, request: &PendingKind, request_id: &str, source: &str) {
        let message = match request {
            PendingKind::Permission(_) => ServerMessage::PermissionResolved(PermissionResolved {
                request_id: request_id.to_owned(),
                answer: PermissionAnswer::Decision(Decision::Deny),
                source: Some(source.to_owned()),
            }),
            PendingKind::Ui(_) => ServerMessage::UiResolved(UiResolved {
                request_id: request_id.to_owned(),
                value: Value::Null,
            }),
        };
        let event = self.stamp(&Envelope::new(message).to_json());
        self.deliver_question(event);
    }

    /// After a responder came or left: questions nobody can answer any more
    /// start their headless timeout; those that can be answered again stop
    /// it.
    pub(super) fn responders_changed(&mut self, now: Instant) {
        let nobody = self.context.delegation.responders(self.id()).is_empty();
        let wait = self.headless_wait();
        for pending in self.questions.unanswered_mut() {
            pending.headless_at = match wait {
                Some(timeout) if nobody => Some(pending.headless_at.unwrap_or(now + timeout)),
                _ => None,
            };
        }
    }

    /// Open questions go again to whoever answers them now (an interactive
    /// ancestor once the agent's own client left, §6.3); clients dedupe by
    /// request id.
    pub(super) fn reannounce(&self) {
        let responders = self.context.delegation.responders(self.id());
        for pending in self.questions.unanswered() {
            for subscriber in &responders {
                subscriber.push(pending.announcement.clone());
            }
        }
    }

    pub(super) fn question_timers(&mut self, now: Instant) {
        for request_id in self.questions.due(now) {
            self.answer_headless(&request_id);
        }
    }
}

/// The history's record of a question as it is asked.
fn asked_record(request: &PendingKind) -> ApprovalRecord {
    let (kind, tool_name, prompt) = match request {
        PendingKind::Permission(request) => {
            (ApprovalKind::Permission, Some(request.tool_name.clone()), request.prompt.clone())
        }
        PendingKind::Ui(request) => {
            let parts = [request.title.as_deref(), request.message.as_deref()];
            let text: Vec<&str> = parts.into_iter().flatten().collect();
            (ApprovalKind::Ui, None, text.join(": "))
        }
    };
    ApprovalRecord {
        request_id: request.request_id().to_owned(),
        kind,
        tool_name,
        prompt: bounded_prompt(&prompt),
        asked_at: now_ms(),
        resolved_at: None,
        outcome: None,
        answered_by: None,
    }
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::AllowAlways => "allow_always",
        Decision::Deny => "deny",
    }
}
