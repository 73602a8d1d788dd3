//! `workspace.*`: git worktree workspaces (docs/WORKSPACES.md), each run as
//! a task of its own since git may take a while.

use std::sync::Arc;

use shard_protocol::ClientMessage;

use super::{Daemon, Outcome, ok};
use crate::agents::nodes::workspaces as nodes;

/// `afar`: the caller is a browser of a daemon in a remote mode.
pub fn run(daemon: &Arc<dyn Daemon>, message: ClientMessage, afar: bool) -> Outcome {
    let workspaces = daemon.workspaces().clone();
    if let Some(node) = nodes::node_of(&message).map(str::to_owned) {
        let daemon = daemon.clone();
        return Outcome::Later(Box::pin(async move {
            nodes::run(daemon.registry(), &node, message, afar).await
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
                listed.workspaces.extend(nodes::listed(daemon.registry(), &request).await);
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
