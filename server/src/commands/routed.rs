//! The per-agent commands (§9): handed to the agent's host, which answers
//! them itself; except that a child on a subagent run takes no direct
//! prompt, and a person's steer or abort goes through the run (the lease,
//! docs/JOBS.md).

use shard_protocol::ClientMessage;
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::subagent::SteerStatus;

use shard_protocol::agent::{Decision, PermissionAnswer, PermissionResponse};
use shard_protocol::approvals::Answerer;
use tokio::sync::oneshot;

use super::{Caller, CommandError, Daemon, Door, Outcome, Standing, refused_error};
use crate::agents::host::{HostCommand, Verdict};

pub fn run(caller: Caller<'_>, agent_id: String, message: ClientMessage) -> Outcome {
    let guarded = matches!(
        message,
        ClientMessage::Prompt(_) | ClientMessage::Steer(_) | ClientMessage::Abort(_)
    );
    if guarded && let Some(run_id) = caller.daemon.jobs().lease(&agent_id) {
        return leased(&caller, agent_id, run_id, message);
    }
    let answer =
        matches!(message, ClientMessage::PermissionResponse(_) | ClientMessage::UiResponse(_));
    let (subscriber, id) = (caller.subscriber, caller.id);
    let queued = if answer {
        HostCommand::Answer { subscriber, id, message, answerer: caller.answerer }
    } else {
        HostCommand::Forward { subscriber, id, message }
    };
    match caller.daemon.registry().send(&agent_id, queued) {
        Ok(()) => Outcome::Sent,
        Err(refused) => Outcome::Now(Err(refused_error(refused, &agent_id))),
    }
}

/// The lease guard (§10.3) for a prompt, steer or abort: a child on a run
/// takes no direct prompt; a person's steer goes through the coordinator's
/// strict steer and an abort stops the run, both recorded against it.
fn leased(
    caller: &Caller<'_>,
    agent_id: String,
    run_id: String,
    message: ClientMessage,
) -> Outcome {
    let jobs = caller.daemon.jobs().clone();
    let message = match message {
        ClientMessage::Steer(steer) => steer.message,
        ClientMessage::Prompt(prompt)
            if prompt.streaming_behavior == Some(StreamingBehavior::Steer) =>
        {
            prompt.message
        }
        ClientMessage::Abort(_) => {
            return Outcome::Later(Box::pin(async move {
                jobs.stop_leased(&agent_id).await.map(|_| None).map_err(Into::into)
            }));
        }
        _ => {
            return Outcome::Now(Err(CommandError::OnRun { agent_id, run_id }.into()));
        }
    };
    let source = caller.source;
    Outcome::Later(Box::pin(async move {
        let steered = jobs.steer_leased(&agent_id, message, source).await?;
        if steered.status == SteerStatus::Injected {
            Ok(None)
        } else {
            Err(CommandError::SteerLate.into())
        }
    }))
}

/// An answer given by a route rather than a connection (a notification's
/// Allow or Deny, an allow after a passkey step-up), bound to the call it
/// was shown for.
pub struct Bound {
    pub agent_id: String,
    pub request_id: String,
    pub decision: Decision,
    /// The call it was made for ([`crate::agents::host::fingerprint`]).
    pub fingerprint: String,
    pub answerer: Answerer,
    /// A passkey assertion made for this call was verified.
    pub stepped_up: bool,
}

/// Why a bound answer was not handed to the agent's host.
#[derive(Debug)]
pub enum NotTaken {
    /// The table refused it.
    Refused(CommandError),
    /// No host of the agent takes commands.
    NotRunning,
}

/// Admits `bound` through the table as any answer is, from a browser with
/// a standing bound to one call, and hands it to the agent's host, which
/// takes it only for the call it names: what came of it, when the host
/// says.
pub fn answer_bound(
    daemon: &dyn Daemon,
    bound: Bound,
) -> Result<oneshot::Receiver<Verdict>, NotTaken> {
    let message = ClientMessage::PermissionResponse(PermissionResponse {
        request_id: bound.request_id,
        answer: PermissionAnswer::Decision(bound.decision),
        reason: None,
    });
    let standing = Standing { bound: true, ..Standing::default() };
    super::admit(&message, Door::default(), Some((&bound.agent_id, standing)))
        .map_err(NotTaken::Refused)?;
    let (reply, verdict) = oneshot::channel();
    let command = HostCommand::AnswerChecked {
        message,
        answerer: bound.answerer,
        fingerprint: bound.fingerprint,
        stepped_up: bound.stepped_up,
        reply,
    };
    daemon.registry().send(&bound.agent_id, command).map_err(|_| NotTaken::NotRunning)?;
    Ok(verdict)
}
