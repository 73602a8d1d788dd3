//! `workspace.*`: git worktree workspaces (docs/WORKSPACES.md), each run as
//! a task of its own since git may take a while.

use std::sync::Arc;

use shard_protocol::ClientMessage;

use serde_json::Value;
use shard_protocol::WireError;
use shard_protocol::node::NodeState;
use shard_protocol::sandbox::SandboxMode;
use shard_protocol::workspace::{WorkspaceList, WorkspaceSummary};

use super::{Answer, Daemon, Outcome, ok};
use crate::agents::error::AgentError;
use crate::agents::nodes::workspaces as nodes;
use crate::agents::registry::{Registry, refused_by};

/// `afar`: the caller is a browser of a daemon in a remote mode.
pub fn run(daemon: &Arc<dyn Daemon>, message: ClientMessage, afar: bool) -> Outcome {
    let workspaces = daemon.workspaces().clone();
    if let Some(node) = nodes::node_of(&message).map(str::to_owned) {
        let daemon = daemon.clone();
        return Outcome::Later(Box::pin(async move {
            on_node(daemon.registry(), &node, message, afar).await
        }));
    }
    match message {
        ClientMessage::WorkspaceCreate(request) => {
            Outcome::Later(Box::pin(async move { ok(workspaces.create(request, afar).await?) }))
        }
        ClientMessage::WorkspaceAttach(request) => {
            Outcome::Later(Box::pin(async move { ok(workspaces.attach(request, afar).await?) }))
        }
        ClientMessage::WorkspaceRetire(request) => {
            Outcome::Later(Box::pin(async move { ok(workspaces.retire(request).await?) }))
        }
        // The hub's own, then its nodes'.
        ClientMessage::WorkspaceList(request) => {
            let daemon = daemon.clone();
            Outcome::Later(Box::pin(async move {
                let mut listed = workspaces.list(request.clone()).await?;
                listed.workspaces.extend(nodes_listed(daemon.registry(), &request).await);
                ok(listed)
            }))
        }
        ClientMessage::WorkspaceStatus(request) => {
            Outcome::Later(Box::pin(async move { ok(workspaces.status(request).await?) }))
        }
        // A dry run answers a preview; the action, what it did.
        ClientMessage::WorkspaceCommit(request) => Outcome::Later(Box::pin(async move {
            if request.dry_run == Some(true) {
                ok(workspaces.preview_commit(request).await?)
            } else {
                ok(workspaces.updated(workspaces.commit(request).await?))
            }
        })),
        ClientMessage::WorkspaceMerge(request) => Outcome::Later(Box::pin(async move {
            if request.dry_run == Some(true) {
                ok(workspaces.preview_merge(request).await?)
            } else {
                ok(workspaces.updated(workspaces.merge(request).await?))
            }
        })),
        ClientMessage::WorkspacePush(request) => Outcome::Later(Box::pin(async move {
            if request.dry_run == Some(true) {
                ok(workspaces.preview_push(request).await?)
            } else {
                ok(workspaces.updated(workspaces.push(request).await?))
            }
        })),
        other => super::run_elsewhere(other),
    }
}

/// `message`, a workspace command for `node` (docs/NODES.md), sent there:
/// its answer, ids made the hub's. One that launches an agent is contained
/// from `afar` as `agent.create` is ([`Registry::ask_node`]), and its agent
/// listed here before the answer goes out.
async fn on_node(registry: &Registry, node: &str, message: ClientMessage, afar: bool) -> Answer {
    let message = nodes::for_the_node(message);
    let launch = nodes::launch(&message);
    let make = |mode: Option<SandboxMode>| match mode {
        None => message.clone(),
        Some(mode) => nodes::with_mode(message.clone(), mode),
    };
    let (afar, asked) = (afar && launch.is_some(), launch.flatten());
    let answered = registry.ask_node(node, afar, asked, make, nodes::DEADLINE).await?;
    // A refusal's data (a retire's confirmation, say) in the hub's ids.
    let mut data = answered.map_err(|error| refused_by(node, error))?;
    if launch.is_some() {
        let launched = data.as_ref().and_then(|data| data.get("agent_id")).and_then(Value::as_str);
        let Some(launched) = launched.map(str::to_owned) else {
            return Err(unreadable("no agent id in a launch's answer".to_owned()));
        };
        registry.list_made(node, &launched).await?;
    }
    if let Some(data) = &mut data {
        nodes::qualify(data, node).map_err(unreadable)?;
    }
    Ok(data)
}

/// Each online node's workspaces, for the hub's `workspace.list`: a node
/// that does not answer in time, or answers what cannot be read, is left
/// out of this answer. A path filter is a path here, nothing on a node.
async fn nodes_listed(registry: &Registry, request: &WorkspaceList) -> Vec<WorkspaceSummary> {
    if request.cwd.is_some() {
        return Vec::new();
    }
    let online = registry.context.nodes.list().into_iter();
    let online = online.filter(|node| node.state == NodeState::Online).map(|node| node.id);
    let asks = online.map(|node| async move {
        let call = registry.call_node(&node, ClientMessage::WorkspaceList(request.clone()));
        let Ok(Ok(Some(mut data))) = tokio::time::timeout(nodes::LIST_DEADLINE, call).await else {
            return Vec::new();
        };
        match data.get_mut("workspaces").map(Value::take) {
            Some(Value::Array(workspaces)) => nodes::kept(workspaces, &node),
            _ => Vec::new(),
        }
    });
    futures_util::future::join_all(asks).await.into_iter().flatten().collect()
}

fn unreadable(why: String) -> WireError {
    AgentError::NodeUnreadable(why).into()
}
