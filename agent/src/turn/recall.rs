//! The `recall` tool: pages through the exact messages a compaction
//! summarized, which stay in the session log.

use std::sync::Arc;

use serde_json::Value;
use shard_protocol::types::{ContentBlock, JsonObject, Message, Role, ToolResultContent};

use crate::shared::Shared;
use crate::tools::ToolOutput;

/// Messages `recall` returns per page by default.
const RECALL_PAGE: usize = 20;

pub(super) async fn recall(shared: &Arc<Shared>, args: &JsonObject) -> ToolOutput {
    let index = args.get("index").and_then(Value::as_u64).unwrap_or(0);
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(RECALL_PAGE, |limit| limit as usize)
        .clamp(1, 200);
    let conversation = shared.conversation.lock().await;
    let Some((entries, total)) = conversation.recall(index, offset, limit) else {
        return ToolOutput::error(format!("there is no compaction {index} in this session"));
    };
    let mut text = format!(
        "Compaction {index}: messages {} to {} of {total}\n",
        offset + 1,
        offset + entries.len()
    );
    for entry in &entries {
        if let Some(message) = crate::conversation::to_wire_message(entry) {
            text.push_str(&format!("[{}] {}\n", entry.id, describe(&message)));
        }
    }
    if offset + entries.len() < total {
        text.push_str(&format!("[more: recall with offset {}]\n", offset + entries.len()));
    }
    ToolOutput::text(text)
}

fn describe(message: &Message) -> String {
    let role = match message.role {
        Role::User => "user",
        _ => "assistant",
    };
    let parts: Vec<String> = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Thinking { text } => format!("(thinking) {text}"),
            ContentBlock::ToolCall { name, args, .. } => {
                format!("(calls {name} {})", Value::Object(args.clone()))
            }
            ContentBlock::ToolResult { content, .. } => format!(
                "(result) {}",
                match content {
                    ToolResultContent::Text { text } => text.clone(),
                    ToolResultContent::Json { value } => value.to_string(),
                    ToolResultContent::Error { message } => message.clone(),
                    ToolResultContent::Unknown => String::new(),
                }
            ),
            ContentBlock::Unknown => String::new(),
        })
        .collect();
    format!("{role}: {}", parts.join(" "))
}
