//! `agent.*`: list and status from the registry, create, attach and detach
//! through the agent's host, terminate and kill answered once done (a
//! node's agent's by its node); and `runtime.list`, what an agent may run
//! (here, or on a node: the node's own list).

use shard_protocol::ClientMessage;
use shard_protocol::orchestrator::{
    AgentCreateResult, AgentKill, AgentTarget, AgentsResult, RuntimeListResult, RuntimeQuery,
};
use tokio::sync::oneshot;

use super::{Caller, Outcome, host_gone, not_found, ok, refused_error};
use crate::agents::error::AgentError;
use crate::agents::host::HostCommand;

pub fn run(caller: Caller<'_>, message: ClientMessage) -> Outcome {
    let registry = caller.daemon.registry();
    match message {
        ClientMessage::AgentList(_) => Outcome::Now(ok(AgentsResult { agents: registry.list() })),
        ClientMessage::AgentStatus(query) => Outcome::Now(match query.agent_id {
            None => ok(AgentsResult { agents: registry.list() }),
            Some(agent_id) => match registry.info(&agent_id) {
                Some(info) => ok(AgentsResult { agents: vec![info] }),
                None => Err(not_found(&agent_id)),
            },
        }),
        ClientMessage::RuntimeList(RuntimeQuery { node: Some(node) }) => {
            let daemon = caller.daemon.clone();
            Outcome::Later(Box::pin(async move {
                let asked = ClientMessage::RuntimeList(RuntimeQuery::default());
                let data = daemon.registry().call_node(&node, asked).await?;
                let listed = serde_json::from_value::<RuntimeListResult>(data.unwrap_or_default())
                    .map_err(|error| AgentError::NodeUnreadable(error.to_string()))?;
                ok(crate::agents::nodes::link::bounded_runtimes(listed))
            }))
        }
        ClientMessage::RuntimeList(_) => runtimes(&caller),
        ClientMessage::AgentCreate(request) => {
            let daemon = caller.daemon.clone();
            let afar = caller.afar();
            Outcome::Later(Box::pin(async move {
                let agent_id = daemon.registry().create(request, afar).await?;
                ok(AgentCreateResult { agent_id })
            }))
        }
        ClientMessage::AgentAttach(attach) => {
            let role = attach.role.unwrap_or_default();
            // The host answers: response, sync, then live events.
            let attaching = HostCommand::Attach {
                subscriber: caller.subscriber,
                role,
                id: caller.id,
                after_seq: attach.after_seq,
            };
            match registry.send(&attach.agent_id, attaching) {
                Ok(()) => {
                    caller.attached.insert(attach.agent_id, role);
                    Outcome::Sent
                }
                Err(refused) => Outcome::Now(Err(refused_error(refused, &attach.agent_id))),
            }
        }
        ClientMessage::AgentDetach(target) => {
            if !registry.contains(&target.agent_id) {
                return Outcome::Now(Err(not_found(&target.agent_id)));
            }
            caller.attached.remove(&target.agent_id);
            let detaching = HostCommand::Detach { subscriber: caller.subscriber, id: caller.id };
            match registry.send(&target.agent_id, detaching) {
                Ok(()) => Outcome::Sent,
                Err(refused) => Outcome::Now(Err(refused_error(refused, &target.agent_id))),
            }
        }
        ClientMessage::AgentTerminate(target) if registry.remote(&target.agent_id).is_some() => {
            let daemon = caller.daemon.clone();
            Outcome::Later(Box::pin(async move {
                let terminate = |agent_id| ClientMessage::AgentTerminate(AgentTarget { agent_id });
                Ok(daemon.registry().on_node(&target.agent_id, terminate).await?)
            }))
        }
        ClientMessage::AgentKill(kill) if registry.remote(&kill.agent_id).is_some() => {
            let daemon = caller.daemon.clone();
            Outcome::Later(Box::pin(async move {
                let force = kill.force;
                let stop = |agent_id| ClientMessage::AgentKill(AgentKill { agent_id, force });
                Ok(daemon.registry().on_node(&kill.agent_id, stop).await?)
            }))
        }
        ClientMessage::AgentTerminate(target) => {
            let (reply, done) = oneshot::channel();
            match registry.send(&target.agent_id, HostCommand::Terminate { reply }) {
                Ok(()) => {
                    Outcome::Later(Box::pin(
                        async move { ok(done.await.map_err(|_| host_gone())?) },
                    ))
                }
                Err(refused) => Outcome::Now(Err(refused_error(refused, &target.agent_id))),
            }
        }
        ClientMessage::AgentKill(kill) => {
            let (reply, done) = oneshot::channel();
            let force = kill.force.unwrap_or(false);
            match registry.send(&kill.agent_id, HostCommand::Kill { force, reply }) {
                // Answers once the process is gone.
                Ok(()) => Outcome::Later(Box::pin(async move {
                    done.await.map_err(|_| host_gone())?;
                    Ok(None)
                })),
                Err(refused) => Outcome::Now(Err(refused_error(refused, &kill.agent_id))),
            }
        }
        other => super::run_elsewhere(other),
    }
}

/// `runtime.list`, read from `config.toml` off the runtime's threads.
fn runtimes(caller: &Caller<'_>) -> Outcome {
    let daemon = caller.daemon.clone();
    Outcome::Later(Box::pin(async move {
        let (runtimes, default_model) =
            tokio::task::spawn_blocking(move || daemon.registry().runtimes())
                .await
                .map_err(|_| crate::agents::error::AgentError::HostGone)??;
        let default_model = Some(default_model);
        ok(RuntimeListResult { runtimes, default_model, suggested_cwd: suggested_cwd() })
    }))
}

/// Where a first agent might work: the directory the daemon was started
/// in, as a user runs it from a project; its user's home when that is the
/// root (a service manager's start).
fn suggested_cwd() -> Option<String> {
    let here = std::env::current_dir().ok().filter(|dir| dir.parent().is_some());
    let dir = here.or_else(|| std::env::var_os("HOME").map(std::path::PathBuf::from))?;
    dir.to_str().map(str::to_owned)
}
