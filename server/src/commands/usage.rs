//! `usage.*`: the daemon's rollups of tokens and cost (docs/USAGE.md).

use shard_protocol::ClientMessage;
use shard_protocol::usage::UsageSessionResult;

use super::{CommandError, Outcome, not_found, ok};
use crate::agents::registry::Registry;

pub fn run(registry: &Registry, message: ClientMessage) -> Outcome {
    match message {
        ClientMessage::UsageGlobal(_) => Outcome::Now(ok(registry.context.usage.global())),
        ClientMessage::UsageAgent(query) => {
            Outcome::Now(match registry.contains(&query.agent_id) {
                true => ok(registry.context.usage.agent(&query.agent_id)),
                false => Err(not_found(&query.agent_id)),
            })
        }
        ClientMessage::UsageSession(query) => {
            let home = registry.context.home.clone();
            let usage = registry.context.usage.clone();
            Outcome::Later(Box::pin(async move {
                let session_id = query.session_id;
                if let Some(found) = usage.session(&session_id) {
                    return ok(found);
                }
                // A session that never spent anything adds up to nothing.
                let known = tokio::task::spawn_blocking({
                    let session_id = session_id.clone();
                    move || shard_platform::session_view::check(&home, &session_id).is_ok()
                })
                .await
                .unwrap_or(false);
                if !known {
                    return Err(CommandError::NoSession(session_id).into());
                }
                ok(UsageSessionResult {
                    session_id,
                    agent_ids: Vec::new(),
                    total: Default::default(),
                    turns: Vec::new(),
                })
            }))
        }
        other => super::run_elsewhere(other),
    }
}
