//! `budget.*`: the budgets, listed and set (docs/PROTOCOL-NOTES.md,
//! "Budgets"). A change is told to every client (`budget_updated`), and the
//! agents it holds or lets go hear of it, by the budgets' watcher.

use shard_protocol::budget::{BudgetListResult, BudgetScope, BudgetSet, BudgetSetResult};
use shard_protocol::{ClientMessage, WireError};

use super::{Caller, Outcome, not_found, ok};
use crate::agents::approvals::from_away;
use crate::agents::budgets::BudgetError;

pub fn run(caller: &Caller<'_>, message: ClientMessage) -> Outcome {
    let registry = caller.daemon.registry();
    match message {
        ClientMessage::BudgetList(query) => {
            if let Some(agent_id) = query.agent_id.as_deref()
                && !registry.contains(agent_id)
            {
                return Outcome::Now(Err(not_found(agent_id)));
            }
            let now = crate::clock::now_ms();
            let budgets = registry.context.budgets.list(query.agent_id.as_deref(), now);
            Outcome::Now(ok(BudgetListResult { budgets }))
        }
        ClientMessage::BudgetSet(request) => set(caller, request),
        other => super::run_elsewhere(other),
    }
}

/// `budget.set`: from a browser where `[step_up]` guards allows from away,
/// a raise is refused (the paused agent's question, with its passkey, is
/// the way); a cut never is.
fn set(caller: &Caller<'_>, request: BudgetSet) -> Outcome {
    let daemon = caller.daemon.clone();
    let guarded = from_away(caller.source) && daemon.registry().context.step_up.is_some();
    Outcome::Later(Box::pin(async move {
        let registry = daemon.registry();
        let workspace_known = match (request.scope, request.workspace_id.as_deref()) {
            (BudgetScope::Workspace, Some(workspace_id)) => {
                daemon.workspaces().exists(workspace_id).await
            }
            _ => true,
        };
        let known =
            |key: &shard_protocol::budget::BudgetKey| match (&key.agent_id, &key.workspace_id) {
                (Some(agent_id), _) if !registry.contains(agent_id) => {
                    Err(BudgetError::NoAgent(agent_id.clone()))
                }
                (_, Some(workspace_id)) if !workspace_known => {
                    Err(BudgetError::NoWorkspace(workspace_id.clone()))
                }
                _ => Ok(()),
            };
        let budgets = &registry.context.budgets;
        // Every client is told by the budgets' watcher.
        let budget = budgets
            .set(&request, known, guarded, crate::clock::now_ms())
            .map_err(WireError::from)?;
        ok(BudgetSetResult { budget })
    }))
}
