//! `workspace.*`: git worktree workspaces (docs/WORKSPACES.md), each run as
//! a task of its own since git may take a while.

use std::sync::Arc;

use shard_protocol::ClientMessage;

use super::{Daemon, Outcome, ok};

/// `afar`: the caller is a browser of a daemon in a remote mode.
pub fn run(daemon: &Arc<dyn Daemon>, message: ClientMessage, afar: bool) -> Outcome {
    let workspaces = daemon.workspaces().clone();
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
        ClientMessage::WorkspaceList(request) => {
            Outcome::Later(Box::pin(async move { ok(workspaces.list(request).await?) }))
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
