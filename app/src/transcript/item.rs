//! The transcript as plain data: what a `sync` describes, what a row
//! holds at any moment, and what tests compare.

use serde_json::Value;
use shard_protocol::agent::ToolResult;
use shard_protocol::types::{ContentBlock, Message as WireMessage, RenderDescriptor, Role};

/// One piece of an assistant message as it streams.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Block {
    Text(String),
    Thinking(String),
}

/// One line of the transcript.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // short-lived UI state; boxing buys nothing
pub enum Item {
    User {
        /// Its session entry, when known (a `sync` says; a live prompt does not).
        entry_id: Option<String>,
        text: String,
    },
    Assistant {
        /// The id its deltas carried (a `sync` has none: the entry id then).
        message_id: String,
        /// The session entry it became, once complete: a `sync` and a late
        /// `message_complete` name the same message by it.
        entry_id: Option<String>,
        blocks: Vec<Block>,
        /// An abort cut it off: it says where it stopped.
        aborted: bool,
    },
    Tool {
        tool_call_id: String,
        name: String,
        args: Value,
        read_only: Option<bool>,
        start: Option<RenderDescriptor>,
        result: Option<ToolResult>,
    },
    Compaction {
        index: u64,
        tokens_before: u64,
        tokens_after: u64,
    },
    Notice {
        text: String,
        error: bool,
        /// A failed model call's: the prompt to send again.
        retry: Option<String>,
    },
}

/// The text and thinking blocks of a message's content.
pub fn blocks_of(content: &[ContentBlock]) -> Vec<Block> {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(Block::Text(text.clone())),
            ContentBlock::Thinking { text } => Some(Block::Thinking(text.clone())),
            _ => None,
        })
        .collect()
}
/// A tool call as a message's content names it, before it has run.
pub fn tool_item(tool_call_id: &str, name: &str, args: &serde_json::Map<String, Value>) -> Item {
    Item::Tool {
        tool_call_id: tool_call_id.to_owned(),
        name: name.to_owned(),
        args: Value::Object(args.clone()),
        read_only: None,
        start: None,
        result: None,
    }
}
/// The transcript a `sync` window describes.
pub fn from_sync(messages: &[WireMessage], compaction_index: Option<u64>) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(index) = compaction_index {
        items.push(Item::Compaction { index, tokens_before: 0, tokens_after: 0 });
    }
    for message in messages {
        match message.role {
            Role::User => {
                for block in &message.content {
                    match block {
                        ContentBlock::Text { text } => items.push(Item::User {
                            entry_id: Some(message.id.clone()),
                            text: text.clone(),
                        }),
                        ContentBlock::ToolResult { tool_call_id, content, is_error } => {
                            let result = shard_protocol::agent::ToolResult {
                                tool_call_id: tool_call_id.clone(),
                                content: content.clone(),
                                is_error: is_error.unwrap_or(false),
                                exit_code: None,
                                duration_ms: None,
                                render: None,
                            };
                            let call = items.iter_mut().rev().find_map(|item| match item {
                                Item::Tool { tool_call_id: id, result, .. }
                                    if *id == *tool_call_id =>
                                {
                                    Some(result)
                                }
                                _ => None,
                            });
                            if let Some(slot) = call {
                                *slot = Some(result);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                // A reply streaming now has no entry yet: its deltas go on
                // under its id, and its completion gives it one.
                items.push(Item::Assistant {
                    message_id: message.id.clone(),
                    entry_id: (!message.streaming).then(|| message.id.clone()),
                    blocks: blocks_of(&message.content),
                    aborted: message.aborted,
                });
                for block in &message.content {
                    if let ContentBlock::ToolCall { id, name, args } = block {
                        items.push(tool_item(id, name, args));
                    }
                }
            }
        }
    }
    items
}
