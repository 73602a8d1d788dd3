//! `session_op` (§9.2): listing the session's lineage, compacting on
//! demand and forking, the last two only between turns.

use shard_protocol::agent::{CompactResult, SessionListResult, SessionOp};
use shard_protocol::types::AgentStatus;

use super::{Agent, Refusal, ok, to_response};
use crate::session_log::SessionError;

impl Agent {
    /// `session_op` sends its own response: `compact` must put its idle
    /// status after the response (§9.2 lifecycle).
    pub(super) async fn session_op(&self, op: SessionOp, id: Option<String>, command: &str) {
        let busy = self.turn.is_some() || !self.shared.state().follow_ups.is_empty();
        let result = match op {
            SessionOp::List => {
                let conversation = self.shared.conversation.lock().await;
                ok(SessionListResult {
                    active: conversation.session_id.clone(),
                    sessions: conversation.list_sessions(),
                })
            }
            SessionOp::Compact { .. } | SessionOp::Fork { .. } if busy => Err(Refusal::SessionBusy),
            SessionOp::Compact { keep_recent_tokens } => {
                let keep =
                    keep_recent_tokens.unwrap_or(self.shared.config.compaction.keep_recent_tokens);
                let response = match crate::turn::compact(&self.shared, keep).await {
                    Ok(Some(compaction)) => ok(CompactResult::Compacted(compaction)),
                    Ok(None) => ok(CompactResult::Skipped { reason: "no_safe_cut".to_owned() }),
                    Err(problem) => Err(Refusal::Compaction(problem)),
                };
                self.shared.respond(id, to_response(command, response)).await;
                self.shared.set_status(AgentStatus::Idle).await;
                return;
            }
            SessionOp::Fork { from_entry_id } => {
                let conversation = self.shared.conversation.lock().await;
                match conversation.fork(&from_entry_id).await {
                    Ok(result) => ok(result),
                    Err(SessionError::NotFound(id)) => Err(Refusal::NoEntry(id)),
                    Err(problem) => Err(Refusal::Fork(problem)),
                }
            }
        };
        self.shared.respond(id, to_response(command, result)).await;
    }
}
