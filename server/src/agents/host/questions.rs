//! Permission and UI questions (PROTOCOL.md §6.3): each goes to every
//! attachment of the agent and to whoever answers for it (its own
//! interactive clients, else the nearest interactive ancestor's); the first
//! valid answer wins and is forwarded, later ones are dropped. With nobody
//! to answer anywhere in the hierarchy a question resolves at once to deny
//! (`source: "headless"`); one left open when the last responder leaves
//! waits `--headless-timeout`, then resolves the same way (CONTRACT.md).

use serde_json::Value;
use shard_protocol::agent::{
    ChoiceIntent, Decision, PendingKind, PermissionAnswer, PermissionResolved, PermissionResponse,
    UiResolved, UiResponse,
};
use shard_protocol::approvals::{Answerer, ApprovalKind, ApprovalRecord};
use shard_protocol::orchestrator::HeadlessPolicy;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::time::Instant;

pub(super) use self::rules::Rules;
use super::out::{Out, Then};
use crate::agents::approvals::bounded_prompt;
use crate::agents::error::AgentError;
use crate::agents::{Wire, now_ms};

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
    /// The agent's node cannot be reached now: answer again once it is
    /// back, when the question is shown again.
    Unreachable,
}

impl Verdict {
    /// The daemon's acknowledgement of an answer from a connection: it
    /// failed only when it may be given again (the input was full, a
    /// passkey is needed); an answer that lost, or was not one, is not an
    /// error either (§9.5).
    pub fn response(self, command: &str) -> shard_protocol::message::Response {
        use shard_protocol::message::Response;
        match self {
            Verdict::Busy => Response::failed(command, AgentError::AnswerQueueFull.into()),
            Verdict::StepUp => Response::failed(command, AgentError::StepUpRequired.into()),
            Verdict::Unreachable => Response::failed(command, AgentError::AnswerNodeOffline.into()),
            _ => Response::accepted(command),
        }
    }
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
struct Pending {
    request: PendingKind,
    /// Where the answer goes when the daemon itself asked (`None`: the
    /// agent asked, and its answer goes to the agent).
    asker: Option<Answer>,
    /// The question as it was sent, tagged: re-sent when the responders
    /// change (a delegated child's question moving up to an ancestor).
    announcement: Wire,
    /// Set when every responder left: answer headless at this instant.
    headless_at: Option<Instant>,
    /// Never answered headless: it waits for a person however long
    /// (the daemon's own question to raise a budget).
    for_a_person: bool,
    /// Who answered, once the daemon forwarded an answer.
    source: Option<Answerer>,
}

/// What the rest of the host knows when a question is raised.
pub(super) struct Raising {
    /// Nobody anywhere in the hierarchy can answer.
    pub nobody: bool,
    /// The agent's sandbox answers what it holds (`allow_inside`).
    pub allow_inside: bool,
    /// It waits for a person, never answered headless: nobody attached now
    /// may be a person on their phone, told by a push.
    pub for_a_person: bool,
}

pub(super) use crate::agents::runtime::Answer;

/// An answer that may be passed on: when it is `for_agent`, the host sends
/// `message` and, once it is queued for the agent, calls
/// [`Questions::won`]; else it calls that at once.
pub(super) struct Accepted {
    pub request_id: String,
    pub message: ClientMessage,
    pub answerer: Answerer,
    pub for_agent: bool,
}

/// The agent's open questions, in the order asked, and the rules they are
/// answered by. A question stays open until the agent says it is settled,
/// even once answered.
pub(super) struct Questions {
    open: Vec<Pending>,
    rules: Rules,
}

impl Questions {
    pub fn new(rules: Rules) -> Self {
        Self { open: Vec::new(), rules }
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether the question `request_id` is open.
    pub fn is_open(&self, request_id: &str) -> bool {
        self.get(request_id).is_some()
    }

    fn get(&self, request_id: &str) -> Option<&Pending> {
        self.open.iter().find(|pending| pending.request.request_id() == request_id)
    }

    fn get_mut(&mut self, request_id: &str) -> Option<&mut Pending> {
        self.open.iter_mut().find(|pending| pending.request.request_id() == request_id)
    }

    fn requests(&self) -> Vec<PendingKind> {
        self.open.iter().map(|pending| pending.request.clone()).collect()
    }

    /// The questions nobody has answered yet.
    fn unanswered(&self) -> impl Iterator<Item = &Pending> {
        self.open.iter().filter(|pending| pending.source.is_none())
    }

    /// What nobody has answered yet, as asked (for `sync`).
    pub fn pending_requests(&self) -> Vec<shard_protocol::agent::PendingRequest> {
        let unanswered = self.unanswered().map(|pending| pending.request.clone());
        unanswered
            .map(|request| shard_protocol::agent::PendingRequest { agent_id: None, request })
            .collect()
    }

    /// When the next headless answer is due.
    pub fn next_headless(&self) -> Option<Instant> {
        self.open.iter().filter_map(|pending| pending.headless_at).min()
    }

    /// Gives back the room the list grew to (a host going dormant).
    pub fn shed(&mut self) {
        self.open = Vec::new();
    }

    /// A question, announced as `announcement` (the host has numbered it):
    /// record it, send it, and answer it at once when the sandbox holds it
    /// or nobody anywhere can. The agent asked it, or the daemon did
    /// (`asker`: where its answer goes).
    pub fn raise(
        &mut self,
        request: PendingKind,
        asker: Option<Answer>,
        announcement: Wire,
        now: Raising,
    ) -> Vec<Out> {
        let request_id = request.request_id().to_owned();
        let mut out = vec![Out::Asked(asked_record(&request))];
        // The sandbox holds the agent's own calls, never what the daemon asks.
        let held = match now.allow_inside && asker.is_none() {
            true => self.rules.sandbox_holds(&request),
            false => None,
        };
        let announced = announcement.clone();
        let for_a_person = now.for_a_person;
        let pending =
            Pending { request, asker, announcement, headless_at: None, for_a_person, source: None };
        self.open.push(pending);
        out.push(Out::Pending(self.requests()));
        out.push(Out::Deliver(announced));
        if let Some(answer) = held {
            out.extend(self.answer_as(
                &request_id,
                "sandbox",
                rules::held_answer(&request_id, answer),
            ));
            return out;
        }
        if now.nobody && !for_a_person && self.rules.headless != Some(HeadlessPolicy::Queue) {
            out.extend(self.answer_headless(&request_id));
        }
        // One that waits for a person is told to those away (web::push).
        if let Some(pending) = self.get(&request_id).filter(|open| open.source.is_none()) {
            out.push(Out::Waiting(pending.request.clone()));
        }
        out
    }

    /// The agent says a question is closed: the resolution to send, with
    /// who answered it, and the history's record of it.
    pub fn resolved(&mut self, message: ServerMessage, line: &str) -> Vec<Out> {
        let mut out = Vec::new();
        let line = match message {
            ServerMessage::PermissionResolved(mut resolved) => {
                let outcome = self.outcome_of(&resolved.request_id, &resolved.answer);
                let network = self.get(&resolved.request_id).is_some_and(|pending| {
                    matches!(&pending.request, PendingKind::Permission(request)
                        if request.tool_name == shard_protocol::sandbox::NETWORK_TOOL)
                });
                if network {
                    // An "always" answer is among the agent's grants now.
                    out.push(Out::RefreshSandbox);
                }
                let answerer = self.settle(&resolved.request_id, &mut out);
                // Who answered as the daemon knows it; else as the agent
                // says (an abort, a rule).
                let answerer = answerer.unwrap_or_else(|| Answerer {
                    source: resolved.source.clone().unwrap_or_else(|| "agent".to_owned()),
                    ..Answerer::default()
                });
                resolved.source.get_or_insert_with(|| answerer.source.clone());
                let request_id = resolved.request_id.clone();
                out.push(Out::Resolved { request_id, outcome, by: answerer });
                Envelope::new(ServerMessage::PermissionResolved(resolved)).to_json()
            }
            ServerMessage::UiResolved(resolved) => {
                let answerer = self.settle(&resolved.request_id, &mut out).unwrap_or_else(|| {
                    Answerer { source: "agent".to_owned(), ..Answerer::default() }
                });
                let outcome = if resolved.value.is_null() { "dismissed" } else { "answered" };
                let request_id = resolved.request_id.clone();
                out.push(Out::Resolved { request_id, outcome: outcome.into(), by: answerer });
                line.to_owned()
            }
            _ => return out,
        };
        out.push(Out::Question(line));
        out
    }

    /// What an answer decided, for the history: the decision, or for a
    /// structured choice what its intent means (`allow`, `allow_always`,
    /// `deny`), else the choice's id.
    fn outcome_of(&self, request_id: &str, answer: &PermissionAnswer) -> String {
        let choice = match answer {
            PermissionAnswer::Decision(decision) => return decision_name(*decision).to_owned(),
            PermissionAnswer::Choice(choice) => choice,
        };
        let intent = self.get(request_id).and_then(|pending| match &pending.request {
            PendingKind::Permission(request) => {
                request.choices.iter().flatten().find(|known| known.id == *choice)
            }
            PendingKind::Ui(_) => None,
        });
        match intent.map(|known| known.intent) {
            Some(ChoiceIntent::Allow) => "allow".to_owned(),
            Some(ChoiceIntent::Persist) => "allow_always".to_owned(),
            Some(ChoiceIntent::Deny) => "deny".to_owned(),
            _ => choice.clone(),
        }
    }

    /// Removes a settled question; who answered it, if known.
    fn settle(&mut self, request_id: &str, out: &mut Vec<Out>) -> Option<Answerer> {
        let at = self.open.iter().position(|pending| pending.request.request_id() == request_id)?;
        let pending = self.open.remove(at);
        out.push(Out::Settled(request_id.to_owned()));
        out.push(Out::Pending(self.requests()));
        out.push(Out::Activity);
        pending.source
    }

    /// The headless answer: deny, or a null UI value (CONTRACT.md).
    fn answer_headless(&mut self, request_id: &str) -> Vec<Out> {
        let Some(pending) = self.get(request_id).filter(|pending| pending.source.is_none()) else {
            return Vec::new();
        };
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
        self.answer_as(request_id, "headless", message)
    }

    /// The daemon answers a question itself, as `source`.
    fn answer_as(&mut self, request_id: &str, source: &str, message: ClientMessage) -> Vec<Out> {
        let answerer = Answerer { source: source.to_owned(), ..Answerer::default() };
        let mut out = self.won(request_id, answerer, &message);
        if self.get(request_id).is_some_and(|pending| pending.asker.is_none()) {
            out.push(Out::Send(message, Then::Nothing));
        }
        out
    }

    /// Judges an answer from a person (§6.3, §9.5): an answer to an open,
    /// unanswered question that it accepts may be passed on; bound to a
    /// `fingerprint`, only to exactly that call (a notification's action).
    /// An allow from away that `[step_up]` guards needs `stepped_up`.
    pub fn judge(
        &self,
        message: ClientMessage,
        answerer: Answerer,
        fingerprint: Option<&str>,
        stepped_up: bool,
    ) -> Result<Accepted, Verdict> {
        let request_id = match &message {
            ClientMessage::PermissionResponse(response) => response.request_id.clone(),
            ClientMessage::UiResponse(response) => response.request_id.clone(),
            _ => return Err(Verdict::Invalid),
        };
        let Some(pending) = self.get(&request_id) else {
            return Err(Verdict::Unknown);
        };
        if pending.source.is_some() {
            return Err(Verdict::Answered);
        }
        let for_agent = pending.asker.is_none();
        match (&pending.request, &message) {
            (PendingKind::Permission(request), ClientMessage::PermissionResponse(answer)) => {
                if fingerprint.is_some_and(|expected| expected != self::fingerprint(request)) {
                    return Err(Verdict::Changed);
                }
                if !request.accepts(&answer.answer) {
                    return Err(Verdict::Invalid);
                }
                if !stepped_up && self.rules.needs_step_up(request, &answer.answer, &answerer) {
                    return Err(Verdict::StepUp);
                }
            }
            (PendingKind::Ui(_), ClientMessage::UiResponse(_)) if fingerprint.is_none() => {}
            _ => return Err(Verdict::Invalid),
        }
        Ok(Accepted { request_id, message, answerer, for_agent })
    }

    /// `message` answered the question: it went to the agent, or goes now
    /// to the daemon's own asker. No later answer wins. The daemon's own
    /// question is closed at once (its answer goes to its asker first);
    /// the agent closes its own.
    pub fn won(
        &mut self,
        request_id: &str,
        answerer: Answerer,
        message: &ClientMessage,
    ) -> Vec<Out> {
        let Some(pending) = self.get_mut(request_id) else { return Vec::new() };
        pending.source = Some(answerer);
        pending.headless_at = None;
        let Some(asker) = pending.asker.take() else { return Vec::new() };
        let answer = match message {
            ClientMessage::PermissionResponse(response) => response.answer.clone(),
            _ => PermissionAnswer::Decision(Decision::Deny),
        };
        self.close_own(request_id, asker, answer, None)
    }

    /// An answer that won never reached the agent (its node went offline
    /// on the way): the question is open again, shown again to whoever
    /// answers for the agent, and answered once the node is back.
    pub fn reopen(&mut self, request_id: &str) -> Vec<Out> {
        let Some(pending) = self.get_mut(request_id).filter(|pending| pending.source.is_some())
        else {
            return Vec::new();
        };
        pending.source = None;
        let announcement = pending.announcement.clone();
        vec![Out::Pending(self.requests()), Out::Deliver(announcement)]
    }

    /// Closes a question the daemon asked: `answer` to its asker, then the
    /// question told closed (with `source`, when not who answered).
    fn close_own(
        &mut self,
        request_id: &str,
        asker: Answer,
        answer: PermissionAnswer,
        source: Option<&str>,
    ) -> Vec<Out> {
        let resolved = PermissionResolved {
            request_id: request_id.to_owned(),
            answer: answer.clone(),
            source: source.map(str::to_owned),
        };
        let mut out = vec![Out::Answer(asker, answer)];
        out.extend(self.resolved(ServerMessage::PermissionResolved(resolved), ""));
        out
    }

    /// A question the daemon asked is moot (its connection went): closed
    /// everywhere as a deny from `withdrawn`, unless already answered.
    pub fn withdraw(&mut self, request_id: &str) -> Vec<Out> {
        let Some(pending) = self.get_mut(request_id).filter(|pending| pending.source.is_none())
        else {
            return Vec::new();
        };
        let Some(asker) = pending.asker.take() else { return Vec::new() };
        pending.source = Some(Answerer { source: WITHDRAWN.to_owned(), ..Answerer::default() });
        let deny = PermissionAnswer::Decision(Decision::Deny);
        self.close_own(request_id, asker, deny, Some(WITHDRAWN))
    }

    /// The agent's process is gone: every open question ends, as denied or
    /// dismissed by `runtime_exited`, or unconfirmed when an answer had
    /// already gone to it.
    pub fn orphaned(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        for pending in std::mem::take(&mut self.open) {
            let request_id = pending.request.request_id().to_owned();
            // An answer already passed on may or may not have been acted
            // on: the history keeps who gave it, unconfirmed.
            let (outcome, by) = match pending.source {
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
            let outcome = outcome.to_owned();
            out.push(Out::Resolved { request_id: request_id.clone(), outcome, by });
            out.push(Out::Settled(request_id.clone()));
            out.push(Out::Question(resolution(&pending.request, &request_id, "runtime_exited")));
        }
        out.push(Out::Pending(Vec::new()));
        out
    }

    /// After a responder came or left: questions nobody can answer any more
    /// start their headless timeout; those that can be answered again stop
    /// it.
    pub fn responders_changed(&mut self, nobody: bool, now: Instant) {
        let wait = self.rules.headless_wait();
        let headless = |pending: &&mut Pending| pending.source.is_none() && !pending.for_a_person;
        for pending in self.open.iter_mut().filter(headless) {
            pending.headless_at = match wait {
                Some(timeout) if nobody => Some(pending.headless_at.unwrap_or(now + timeout)),
                _ => None,
            };
        }
    }

    /// Open questions, to go again to whoever answers them now (an
    /// interactive ancestor once the agent's own client left, §6.3);
    /// clients dedupe by request id.
    pub fn reannounce(&self) -> Vec<Out> {
        self.unanswered().map(|pending| Out::Reannounce(pending.announcement.clone())).collect()
    }

    /// The headless answers due at `now`.
    pub fn timers(&mut self, now: Instant) -> Vec<Out> {
        let due: Vec<String> = self
            .open
            .iter()
            .filter(|pending| pending.headless_at.is_some_and(|at| now >= at))
            .map(|pending| pending.request.request_id().to_owned())
            .collect();
        due.iter().flat_map(|request_id| self.answer_headless(request_id)).collect()
    }
}

/// The `source` of a daemon's question closed because it became moot.
const WITHDRAWN: &str = crate::sandbox::gate::WITHDRAWN;

/// The end of a question the agent can no longer close itself.
fn resolution(request: &PendingKind, request_id: &str, source: &str) -> String {
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
    Envelope::new(message).to_json()
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

mod rules;
#[cfg(test)]
mod tests;
