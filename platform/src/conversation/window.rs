//! The live window: what the model sees and what `sync` shows, the latest
//! compaction summary (if any) followed by every message since that
//! compaction's first kept entry; its wire form, and what it weighs in
//! tokens.

use shard_protocol::types::{ContentBlock, Message, Role, ToolResultContent};

use super::history::Conversation;
use crate::session_log::{Entry, EntryBody};

/// Rough tokens of a text: four bytes a token, the usual estimate for English
/// and code. Only used to decide when to compact, never billed.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

impl Conversation {
    /// The live window as of entry position `end` (exclusive).
    pub(super) fn window_until(&self, end: usize) -> Vec<&Entry> {
        window_of(&self.entries()[..end])
    }

    /// The live window now.
    pub fn window(&self) -> Vec<&Entry> {
        window_of(self.entries())
    }

    /// The index of the latest compaction, if any.
    pub fn compaction_index(&self) -> Option<u64> {
        compaction_index_of(self.entries())
    }

    /// The live window as wire messages (for `sync`).
    pub fn live_messages(&self) -> Vec<Message> {
        live_messages_of(self.entries())
    }

    pub fn window_tokens(&self) -> u64 {
        self.window().into_iter().map(entry_tokens).sum()
    }
}

/// The live window of a log: the latest compaction (if any), then every
/// message from its first kept entry on.
pub fn window_of(entries: &[Entry]) -> Vec<&Entry> {
    let (summary, start) = match window_bounds(entries) {
        Some((at, start)) => (Some(&entries[at]), start),
        None => (None, 0),
    };
    summary.into_iter().chain(entries[start..].iter().filter(|entry| is_message(entry))).collect()
}

/// Where the live window starts: the latest compaction's position and that
/// of the first entry it kept (none before the first compaction).
fn window_bounds(entries: &[Entry]) -> Option<(usize, usize)> {
    let at =
        entries.iter().rposition(|entry| matches!(entry.body, EntryBody::Compaction { .. }))?;
    let EntryBody::Compaction { first_kept_entry_id, .. } = &entries[at].body else {
        unreachable!("rposition matched a compaction")
    };
    let start = entries.iter().position(|entry| &entry.id == first_kept_entry_id).unwrap_or(at);
    Some((at, start))
}

/// How many leading entries no live window will read again: everything
/// before the latest compaction's first kept entry (and before the
/// compaction itself). A later compaction only keeps entries after it.
pub fn forgettable_prefix(entries: &[Entry]) -> usize {
    window_bounds(entries).map_or(0, |(at, start)| at.min(start))
}

/// The live window as wire messages (what `sync` carries).
pub fn live_messages_of(entries: &[Entry]) -> Vec<Message> {
    window_of(entries).into_iter().filter_map(to_wire_message).collect()
}

pub fn compaction_index_of(entries: &[Entry]) -> Option<u64> {
    entries.iter().rev().find_map(|entry| match entry.body {
        EntryBody::Compaction { index, .. } => Some(index),
        _ => None,
    })
}

/// Entries that are part of the conversation the model sees.
pub fn is_message(entry: &Entry) -> bool {
    matches!(
        entry.body,
        EntryBody::User { .. } | EntryBody::Assistant { .. } | EntryBody::ToolResult { .. }
    )
}

fn content_text(content: &ToolResultContent) -> String {
    match content {
        ToolResultContent::Text { text } => text.clone(),
        ToolResultContent::Json { value } => value.to_string(),
        ToolResultContent::Error { message } => message.clone(),
        ToolResultContent::Unknown => String::new(),
    }
}

/// The text a provider sees for a tool result: the content, then the exit
/// code as `[exit code: N]` (PROTOCOL.md §9.4: injected at history assembly).
pub fn tool_result_text(content: &ToolResultContent, exit_code: Option<i64>) -> String {
    let text = content_text(content);
    match exit_code {
        Some(code) if text.trim_end().is_empty() => format!("[exit code: {code}]"),
        Some(code) => format!("{}\n[exit code: {code}]", text.trim_end_matches(['\n', '\r'])),
        None => text,
    }
}

pub fn entry_tokens(entry: &Entry) -> u64 {
    // A few tokens of framing per message, as providers count them.
    4 + match &entry.body {
        EntryBody::User { text, .. } => estimate_tokens(text),
        EntryBody::Assistant { content, .. } => content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text } | ContentBlock::Thinking { text } => {
                    estimate_tokens(text)
                }
                ContentBlock::ToolCall { name, args, .. } => {
                    estimate_tokens(name)
                        + estimate_tokens(&serde_json::Value::Object(args.clone()).to_string())
                }
                _ => 0,
            })
            .sum(),
        EntryBody::ToolResult { content, exit_code, .. } => {
            estimate_tokens(&tool_result_text(content, *exit_code))
        }
        EntryBody::Compaction { summary, .. } => estimate_tokens(summary),
        _ => 0,
    }
}

/// The header that opens a compaction summary in the model's context.
pub fn summary_heading(index: u64) -> String {
    format!(
        "[Summary of earlier conversation (compaction {index}); the exact messages \
         can be read with the recall tool, index {index}]"
    )
}

/// The wire form of a window entry.
pub fn to_wire_message(entry: &Entry) -> Option<Message> {
    let (role, content) = match &entry.body {
        EntryBody::User { text, .. } => {
            (Role::User, vec![ContentBlock::Text { text: text.clone() }])
        }
        EntryBody::Assistant { content, .. } => (Role::Assistant, content.clone()),
        EntryBody::ToolResult { tool_call_id, content, is_error, .. } => (
            Role::User,
            vec![ContentBlock::ToolResult {
                tool_call_id: tool_call_id.clone(),
                content: content.clone(),
                is_error: Some(*is_error),
            }],
        ),
        EntryBody::Compaction { index, summary, .. } => (
            Role::User,
            vec![ContentBlock::Text { text: format!("{}\n{summary}", summary_heading(*index)) }],
        ),
        _ => return None,
    };
    let aborted = matches!(entry.body, EntryBody::Assistant { aborted: true, .. });
    Some(Message { id: entry.id.clone(), role, content, aborted, streaming: false })
}
