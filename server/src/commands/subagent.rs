//! `subagent.*`: background jobs (docs/JOBS.md), run by the jobs
//! coordinator; each about its parent agent, whose attachment rule the
//! table states.

use shard_protocol::ClientMessage;

use super::{Caller, Grant, Outcome, ok};

pub fn run(caller: &Caller<'_>, message: ClientMessage) -> Outcome {
    let jobs = caller.daemon.jobs().clone();
    let source = caller.source;
    let redact = caller.grant == Grant::Redacted;
    match message {
        ClientMessage::SubagentCreate(request) => {
            Outcome::Later(Box::pin(async move { ok(jobs.create(request).await?) }))
        }
        // A wait only watches: it ends with its connection (the rule).
        ClientMessage::SubagentWait(request) => {
            Outcome::Later(Box::pin(async move { ok(jobs.wait(request).await?) }))
        }
        ClientMessage::SubagentSteer(request) => {
            Outcome::Later(Box::pin(async move { ok(jobs.steer(request, source).await?) }))
        }
        ClientMessage::SubagentRelaunch(request) => {
            Outcome::Later(Box::pin(async move { ok(jobs.relaunch(request).await?) }))
        }
        // The states, names and usage any connection already sees
        // announced; what the runs said only to an attached one.
        ClientMessage::SubagentStatus(request) => Outcome::Later(Box::pin(async move {
            let mut status = jobs.status(request).await?;
            if redact {
                status.redact();
            }
            ok(status)
        })),
        ClientMessage::SubagentStop(request) => {
            Outcome::Later(Box::pin(async move { ok(jobs.stop(request).await?) }))
        }
        other => super::run_elsewhere(other),
    }
}
