//! The questions open to people, until answered or cancelled: the agent's
//! own permission requests (Shard's `permission_request`, with one choice
//! per option the agent offered, answered with the option chosen), and
//! Shard's own before a write the agent asked its file service for
//! (carried out once a person allows it: see `files.rs`). Each answer
//! gives the agent what ACP asks for, and tells every client who answered.

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, PermissionOptionKind, RequestId, RequestPermissionOutcome,
    RequestPermissionResponse, SelectedPermissionOutcome, WriteTextFileRequest,
};
use serde_json::Value;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    ChoiceIntent, Decision, PermissionAnswer, PermissionChoice, PermissionDetail,
    PermissionRequest, PermissionResponse,
};

use super::ids::Ids;
use super::{Out, event, resolved};
use crate::agents::runtime::acp::fs::{self, FsRequest};
use crate::agents::runtime::acp::wire;

/// The choices of a question before a write.
pub(super) const CHOICE_ALLOW: &str = "allow-once";
pub(super) const CHOICE_DENY: &str = "deny";

/// Whether `answer` allows the write; `None` when it picks neither choice.
fn allows(answer: &PermissionAnswer) -> Option<bool> {
    match answer {
        PermissionAnswer::Decision(Decision::Allow | Decision::AllowAlways) => Some(true),
        PermissionAnswer::Decision(Decision::Deny) => Some(false),
        PermissionAnswer::Choice(choice) if choice == CHOICE_ALLOW => Some(true),
        PermissionAnswer::Choice(choice) if choice == CHOICE_DENY => Some(false),
        PermissionAnswer::Choice(_) => None,
    }
}

/// A question open until answered or cancelled: the agent's permission
/// request, or Shard's own before a write the agent asked for.
struct Question {
    /// The agent's request the answer goes to.
    asked: RequestId,
    about: About,
}

enum About {
    /// The agent's own question, answered with one of its options.
    Options {
        /// Shard's choice id → the agent's option id.
        options: HashMap<String, acp::PermissionOptionId>,
        /// The option each legacy decision picks, by its kind.
        decisions: HashMap<Decision, acp::PermissionOptionId>,
    },
    /// A write the file service carries out once a person allows it.
    Write(acp::WriteTextFileRequest),
}

impl Question {
    /// What `answer` gives the agent; the question back (boxed: a write's
    /// may hold megabytes) when it picks none of its choices.
    fn settle(self, answer: &PermissionAnswer) -> Result<Out, Box<Self>> {
        let Self { asked, about } = self;
        match about {
            About::Options { options, decisions } => {
                let option = match answer {
                    PermissionAnswer::Choice(choice) => options.get(choice),
                    PermissionAnswer::Decision(decision) => decisions.get(decision),
                };
                let Some(option) = option.cloned() else {
                    let about = About::Options { options, decisions };
                    return Err(Box::new(Self { asked, about }));
                };
                let selected = SelectedPermissionOutcome::new(option);
                let response = ClientResponse::RequestPermissionResponse(
                    RequestPermissionResponse::new(RequestPermissionOutcome::Selected(selected)),
                );
                Ok(Out::Agent(wire::answer(asked, Ok(response))))
            }
            About::Write(request) => match allows(answer) {
                Some(true) => Ok(Out::Fs(asked, FsRequest::Write(request))),
                Some(false) => {
                    let refused = fs::not_allowed(&request.path);
                    Ok(Out::Agent(wire::answer(asked, Err(refused))))
                }
                None => Err(Box::new(Self { asked, about: About::Write(request) })),
            },
        }
    }

    /// The answer when the turn is aborted: `cancelled`, as ACP requires.
    fn cancel(self) -> Out {
        let answer = match self.about {
            About::Options { .. } => {
                let cancelled = RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled);
                Ok(ClientResponse::RequestPermissionResponse(cancelled))
            }
            About::Write(_) => Err(acp::Error::request_cancelled()),
        };
        Out::Agent(wire::answer(self.asked, answer))
    }
}

/// What a permission request of the agent's is about, as Shard shows it:
/// the call it would make, as far as the agent said.
pub(super) struct Subject {
    pub tool_name: String,
    /// What the question says: the call's name, and the command it runs.
    pub prompt: String,
    pub input: Value,
    /// What it does and where, for people to read and for the step-up
    /// rule to judge (never its title: the agent's words).
    pub details: Vec<PermissionDetail>,
}

/// The questions open, by Shard's request id.
#[derive(Default)]
pub(super) struct Questions {
    open: HashMap<String, Question>,
}

impl Questions {
    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The agent's permission request about `subject`: Shard's own, with
    /// one choice per option the agent offered (its id kept), and the
    /// legacy decisions by kind.
    pub(super) fn asked(
        &mut self,
        ids: &mut Ids,
        asked: RequestId,
        offered: &[acp::PermissionOption],
        subject: Subject,
    ) -> Out {
        let request_id = ids.fresh("perm");
        let mut options = HashMap::new();
        let mut decisions = HashMap::new();
        let mut choices = Vec::new();
        for (at, option) in offered.iter().enumerate() {
            let (intent, decision) = match option.kind {
                PermissionOptionKind::AllowOnce => (ChoiceIntent::Allow, Some(Decision::Allow)),
                PermissionOptionKind::AllowAlways => {
                    (ChoiceIntent::Persist, Some(Decision::AllowAlways))
                }
                PermissionOptionKind::RejectOnce => (ChoiceIntent::Deny, Some(Decision::Deny)),
                _ => (ChoiceIntent::Deny, None),
            };
            let choice_id = format!("option-{at}");
            options.insert(choice_id.clone(), option.option_id.clone());
            if let Some(decision) = decision {
                decisions.entry(decision).or_insert_with(|| option.option_id.clone());
            }
            choices.push(PermissionChoice {
                id: choice_id,
                label: option.name.clone(),
                description: None,
                accelerator: None,
                intent,
            });
        }
        let Subject { tool_name, prompt, input, details } = subject;
        let shown = PermissionRequest {
            request_id: request_id.clone(),
            tool_name,
            input,
            prompt,
            options: [Decision::Allow, Decision::AllowAlways, Decision::Deny]
                .into_iter()
                .filter(|decision| decisions.contains_key(decision))
                .collect(),
            details: Some(details),
            choices: Some(choices),
        };
        let about = About::Options { options, decisions };
        self.open.insert(request_id, Question { asked, about });
        event(ServerMessage::PermissionRequest(shown))
    }

    /// Shard's own question before the agent's write `request`, as
    /// `shown`: open until a person answers it.
    pub(super) fn write_asked(
        &mut self,
        asked: RequestId,
        request: WriteTextFileRequest,
        shown: PermissionRequest,
    ) -> Out {
        let question = Question { asked, about: About::Write(request) };
        self.open.insert(shown.request_id.clone(), question);
        event(ServerMessage::PermissionRequest(shown))
    }

    /// A person's answer: what it gives the agent, then every client told
    /// who answered. `None` when it settles nothing: the question is
    /// settled already (§9.5), or the answer picks none of its choices
    /// (it stays open).
    pub(super) fn answered(&mut self, answer: PermissionResponse) -> Option<Vec<Out>> {
        let question = self.open.remove(&answer.request_id)?;
        match question.settle(&answer.answer) {
            Ok(to_agent) => Some(vec![to_agent, resolved(answer.request_id, answer.answer, None)]),
            Err(open) => {
                self.open.insert(answer.request_id, *open);
                None
            }
        }
    }

    /// Every question open, answered `cancelled` as ACP requires when a
    /// turn is aborted, and withdrawn from clients as denied by the abort.
    pub(super) fn cancel_all(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        for (request_id, question) in std::mem::take(&mut self.open) {
            out.push(question.cancel());
            out.push(resolved(
                request_id,
                PermissionAnswer::Decision(Decision::Deny),
                Some("abort"),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{agent_line as agent, host_line as host};
    use super::*;

    fn subject() -> Subject {
        Subject {
            tool_name: "Run".to_owned(),
            prompt: "Run: ls".to_owned(),
            input: json!({"command": "ls"}),
            details: Vec::new(),
        }
    }

    fn offered() -> Vec<acp::PermissionOption> {
        serde_json::from_value(json!([
            {"optionId": "once", "name": "Once", "kind": "allow_once"},
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "never", "name": "Never", "kind": "reject_always"}]))
        .expect("options")
    }

    fn answer(request_id: &Value, answer: PermissionAnswer) -> PermissionResponse {
        let request_id = request_id.as_str().expect("an id").to_owned();
        PermissionResponse { request_id, answer, reason: None }
    }

    fn choice(id: &str) -> PermissionAnswer {
        PermissionAnswer::Choice(id.to_owned())
    }

    #[test]
    fn the_agents_options_are_shards_choices_and_the_one_chosen_goes_back() {
        let (mut ids, mut questions) = (Ids::new("q".to_owned()), Questions::default());
        let shown = host(&questions.asked(&mut ids, RequestId::Number(5), &offered(), subject()));
        assert_eq!(shown["request_id"], "perm-q-1");
        assert_eq!(shown["prompt"], "Run: ls");
        assert_eq!(shown["options"], json!(["allow", "allow_always"]), "no reject_once offered");
        assert_eq!(shown["choices"][2]["id"], "option-2");
        assert!(!questions.is_empty());

        let unknown = answer(&shown["request_id"], choice("option-9"));
        assert!(questions.answered(unknown).is_none(), "no choice of it: still open");
        let denied = answer(&shown["request_id"], PermissionAnswer::Decision(Decision::Deny));
        assert!(questions.answered(denied).is_none(), "no reject_once to give");
        let always = answer(&shown["request_id"], choice("option-1"));
        let settled = questions.answered(always).expect("settled");
        let outcome = &agent(&settled[0])["result"]["outcome"];
        assert_eq!(outcome, &json!({"outcome": "selected", "optionId": "always"}));
        assert_eq!(host(&settled[1])["type"], "permission_resolved");
        assert!(questions.is_empty());
        let late = answer(&shown["request_id"], PermissionAnswer::Decision(Decision::Allow));
        assert!(questions.answered(late).is_none(), "settled already");
    }

    #[test]
    fn a_write_asked_first_is_served_only_when_allowed() {
        let mut questions = Questions::default();
        let write = |path: &str| -> WriteTextFileRequest {
            serde_json::from_value(json!({"sessionId": "s", "path": path, "content": "x"}))
                .expect("a write")
        };
        let shown = |request_id: &str| PermissionRequest {
            request_id: request_id.to_owned(),
            tool_name: "write".to_owned(),
            input: Value::Null,
            prompt: "Write?".to_owned(),
            options: vec![Decision::Allow, Decision::Deny],
            details: None,
            choices: None,
        };
        questions.write_asked(RequestId::Number(1), write("/w/.git/config"), shown("w1"));
        questions.write_asked(RequestId::Number(2), write("/w/.bashrc"), shown("w2"));
        let allowed = questions.answered(answer(&json!("w1"), choice(CHOICE_ALLOW)));
        let served = allowed.expect("settled");
        assert!(matches!(&served[0], Out::Fs(RequestId::Number(1), FsRequest::Write(_))));
        let denied =
            questions.answered(answer(&json!("w2"), PermissionAnswer::Decision(Decision::Deny)));
        let refused = agent(&denied.expect("settled")[0]);
        assert_eq!(refused["id"], 2);
        assert!(refused["error"].is_object(), "{refused}");
    }

    #[test]
    fn an_abort_cancels_every_question_and_withdraws_it() {
        let (mut ids, mut questions) = (Ids::new("q".to_owned()), Questions::default());
        questions.asked(&mut ids, RequestId::Number(5), &offered(), subject());
        let cancelled = questions.cancel_all();
        assert_eq!(agent(&cancelled[0])["result"]["outcome"], json!({"outcome": "cancelled"}));
        let withdrawn = host(&cancelled[1]);
        assert_eq!(
            (withdrawn["request_id"].as_str(), withdrawn["source"].as_str()),
            (Some("perm-q-1"), Some("abort"))
        );
        assert!(questions.is_empty());
        assert!(questions.cancel_all().is_empty());
    }
}
