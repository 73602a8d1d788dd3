//! What the host's parts decide and the host carries out, in order. A part
//! never sends, writes or broadcasts itself: it returns these, so that it
//! is driven in unit tests with plain inputs and a clock, and the host is
//! the one place that touches connections, files and the agent's input.

use shard_protocol::agent::{PendingKind, PermissionAnswer};
use shard_protocol::approvals::{Answerer, ApprovalRecord};
use shard_protocol::message::Response;
use shard_protocol::{ClientMessage, ServerMessage, WireError};
use tokio::sync::oneshot;

use crate::agents::{Sub, Wire};

pub(super) enum Out {
    /// The daemon's own command to the agent, its response handled as
    /// `Then` says (and told so if the agent's input is full).
    Send(ClientMessage, Then),
    /// The answer to a question the daemon asked itself, to its asker.
    Answer(crate::agents::runtime::Answer, PermissionAnswer),
    /// A per-agent event: numbered, journaled, sent to every attachment.
    Event(String),
    /// A question or its end: numbered, journaled, sent to every
    /// attachment and to whoever answers for the agent, each once.
    Question(String),
    /// A question already numbered, sent to every attachment and to
    /// whoever answers for the agent, each once.
    Deliver(Wire),
    /// A question as it was first sent, again to whoever answers for the
    /// agent now.
    Reannounce(Wire),
    /// A response to one connection; `tagged` with the agent's id when it
    /// answers a per-agent command.
    Respond { to: Sub, id: Option<String>, tagged: bool, response: Response },
    /// A registry event, to every connection.
    Broadcast(ServerMessage),
    /// The agent as `agent.list` shows it changed.
    Publish,
    /// The coarse activity follows the status again.
    Activity,
    /// The sandbox's description may have changed (a host granted).
    RefreshSandbox,
    /// The daemon's own question `request_id` is moot: withdrawn.
    Withdraw(String),
    /// The open questions changed: for the delegation map, whose
    /// ancestors' syncs carry them.
    Pending(Vec<PendingKind>),
    /// The history of questions: one asked.
    Asked(ApprovalRecord),
    /// The history of questions: one closed, with what came of it.
    Resolved { request_id: String, outcome: String, by: Answerer },
    /// For those away (Web Push): a question waits for a person.
    Waiting(PendingKind),
    /// For those away: a question is closed.
    Settled(String),
}

/// What the host does with the agent's response to one of its own
/// commands.
pub(super) enum Then {
    Nothing,
    /// A person's answer to the question `request_id`: if it could not
    /// reach the agent (its node went offline on the way), the question is
    /// open again, never silently lost.
    Answer {
        request_id: String,
    },
    /// The answer to a run's task prompt.
    RunPrompt,
    /// The answer to a strict steer into `turn_id`.
    Steer {
        turn_id: String,
        reply: oneshot::Sender<Result<String, WireError>>,
    },
}

#[cfg(test)]
impl Out {
    /// The effect's name, for tests to say what a part decided in order.
    pub fn kind(&self) -> &'static str {
        match self {
            Out::Send(..) => "send",
            Out::Answer(..) => "answer",
            Out::Event(_) => "event",
            Out::Question(_) => "question",
            Out::Deliver(_) => "deliver",
            Out::Reannounce(_) => "reannounce",
            Out::Respond { .. } => "respond",
            Out::Broadcast(_) => "broadcast",
            Out::Publish => "publish",
            Out::Activity => "activity",
            Out::RefreshSandbox => "refresh_sandbox",
            Out::Withdraw(_) => "withdraw",
            Out::Pending(_) => "pending",
            Out::Asked(_) => "asked",
            Out::Resolved { .. } => "resolved",
            Out::Waiting(_) => "waiting",
            Out::Settled(_) => "settled",
        }
    }

    /// The names of `outs`, in order.
    pub fn kinds(outs: &[Out]) -> Vec<&'static str> {
        outs.iter().map(Out::kind).collect()
    }
}
