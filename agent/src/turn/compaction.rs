//! Compacting the live window on demand, at the threshold after a turn or
//! when it fills the model's context mid-turn: the entry made durable, then
//! the `compaction` event.

use std::sync::Arc;

use shard_protocol::ServerMessage;
use shard_protocol::agent::Compaction;
use shard_protocol::types::AgentStatus;

use crate::conversation::summary_heading;
use crate::session_log::EntryBody;
use crate::shared::{LogFailed, Shared};

/// Why the window was not compacted (INTERNAL_ERROR, §9.2 `compact`).
#[derive(Debug, thiserror::Error)]
pub enum CompactionFailed {
    #[error("compaction produced an empty summary")]
    EmptySummary,
    #[error(transparent)]
    Log(#[from] LogFailed),
}

/// Compacts the live window now: status `compacting`, then a `compaction`
/// event on success. The caller restores the status it wants afterwards.
/// `Ok(None)`: nothing could be cut.
pub async fn compact(
    shared: &Arc<Shared>,
    keep_recent_tokens: u64,
) -> Result<Option<Compaction>, CompactionFailed> {
    shared.set_status(AgentStatus::Compacting).await;
    let mut conversation = shared.conversation.lock().await;
    let Some(plan) = conversation.plan_compaction(keep_recent_tokens) else { return Ok(None) };
    if plan.summary.trim().is_empty() {
        return Err(CompactionFailed::EmptySummary);
    }
    let index = conversation.compaction_index().unwrap_or(0) + 1;
    let compaction = Compaction {
        index,
        tokens_before: plan.tokens_before,
        tokens_after: plan.tokens_after,
        first_kept_entry_id: plan.first_kept_entry_id.clone(),
        message_range: plan.message_range.clone(),
    };
    let written = async {
        conversation
            .push(EntryBody::Compaction {
                index,
                summary: plan.summary,
                first_kept_entry_id: plan.first_kept_entry_id,
                message_range: plan.message_range,
                tokens_before: plan.tokens_before,
                tokens_after: plan.tokens_after,
            })
            .await?;
        conversation.flush().await
    };
    written.await.map_err(LogFailed)?;
    drop(conversation);
    tracing::info!(index, heading = %summary_heading(index), "compacted");
    shared.emit(ServerMessage::Compaction(compaction.clone())).await;
    Ok(Some(compaction))
}
