//! A question of an ACP agent's, open until answered or cancelled: the
//! agent's own permission request (answered with one of its options), or
//! Shard's before a write the agent asked its file service for (carried
//! out once a person allows it), and what each answer gives the agent.

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, RequestId, RequestPermissionOutcome, RequestPermissionResponse,
    SelectedPermissionOutcome,
};
use shard_protocol::agent::{Decision, PermissionAnswer};

use super::Out;
use crate::agents::runtime::acp::fs::{self, FsRequest};
use crate::agents::runtime::acp::wire;

/// The choices of a question before a write.
pub(super) const CHOICE_ALLOW: &str = "allow-once";
pub(super) const CHOICE_DENY: &str = "deny";

/// Whether `answer` allows the write; `None` when it picks neither choice.
pub(super) fn allows(answer: &PermissionAnswer) -> Option<bool> {
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
pub(super) struct Question {
    /// The agent's request the answer goes to.
    pub asked: RequestId,
    pub about: About,
}

pub(super) enum About {
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
    pub(super) fn settle(self, answer: &PermissionAnswer) -> Result<Out, Box<Self>> {
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
    pub(super) fn cancel(self) -> Out {
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
