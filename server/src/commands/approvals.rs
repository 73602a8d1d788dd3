//! `approval.list`: an agent's recorded answers (docs/SECURITY.md), read
//! from its private history file.

use shard_protocol::approvals::{ApprovalList, ApprovalListResult};

use super::{CommandError, Outcome, ok};
use crate::agents::approvals::KEPT;
use crate::agents::registry::Registry;

pub fn list(registry: &Registry, query: ApprovalList) -> Outcome {
    let home = registry.context.home.clone();
    let limit = query.limit.map_or(KEPT, |limit| limit as usize).min(KEPT);
    Outcome::Later(Box::pin(async move {
        let agent_id = query.agent_id;
        let approvals = tokio::task::spawn_blocking({
            let agent_id = agent_id.clone();
            move || crate::agents::approvals::list(&home, &agent_id, limit)
        })
        .await
        .map_err(|_| CommandError::History)?;
        ok(ApprovalListResult { agent_id, approvals })
    }))
}
