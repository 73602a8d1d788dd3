//! The per-agent commands (§9): handed to the agent's host, which answers
//! them itself; except that a child on a subagent run takes no direct
//! prompt, and a person's steer or abort goes through the run (the lease,
//! docs/JOBS.md).

use shard_protocol::ClientMessage;
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::subagent::SteerStatus;

use super::{Caller, CommandError, Outcome, refused_error};
use crate::agents::host::HostCommand;

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
