//! The transcript of the agent on screen, shaped so that rendering it stays
//! cheap at any length:
//!
//! - it is a list of [`Row`]s, each with a key that never changes, so the view
//!   (a keyed `<For>`) creates a row's DOM once and keeps it;
//! - what changes inside a row lives in its own signals: a `message_delta`
//!   appends to the last chunk of one block of one message and notifies
//!   nothing else; the list itself changes only when a row is added;
//! - streamed text is held in chunks of at most [`row::CHUNK_BYTES`], so a delta
//!   rewrites one small text node however long the message grows;
//! - a message's markdown is parsed once, when it is complete;
//! - a `sync` is reconciled into the rows already there (same message, same
//!   key), so a reconnect keeps the DOM, the scroll position and every open
//!   `<details>`; a line is the same only if it holds the same, because
//!   entry and tool call ids are numbered per session (after a switch to a
//!   fork, its `e-4` is another line than the original's `e-4`).
//!
//! [`Item`] is the same transcript as plain data: what a `sync` describes,
//! and what tests compare.

mod item;
mod row;

use std::collections::{HashMap, VecDeque};

use leptos::prelude::{GetUntracked, Set, Update, With, WithUntracked};
use serde_json::Value;
use shard_protocol::agent::{DeltaKind, ToolResult};
use shard_protocol::types::{ContentBlock, Message as WireMessage, ToolResultContent};

pub use item::{Block, Item, from_sync};
use item::{blocks_of, tool_item};
pub use row::{Message, Row, RowKind, TextBlock, Tool, ToolCall};
use row::{next_key, set_if_changed};

/// The transcript's operations, on the rows signal. Each looks rows up from
/// the end, where the streaming message and running tools are, so finding
/// them costs nothing at any length.
pub type Rows = leptos::prelude::RwSignal<Vec<Row>>;

pub fn push(rows: Rows, item: Item) {
    rows.update(|rows| rows.push(Row::new(item)));
}

/// Whether `row` is a prompt of this tab with `text` that has not landed
/// in the session yet (no entry).
fn unlanded(row: &Row, text: &str) -> bool {
    match &row.kind {
        RowKind::User { entry_id, text: said } => {
            **said == *text && entry_id.with_untracked(Option::is_none)
        }
        _ => false,
    }
}

/// A queued prompt taken back (`recall_steer`): its row goes, the newest
/// one with that text that has not landed in the session yet.
pub fn take_back(rows: Rows, text: &str) {
    let at = rows.with_untracked(|rows| rows.iter().rposition(|row| unlanded(row, text)));
    if let Some(at) = at {
        rows.update(|rows| {
            rows.remove(at);
        });
    }
}

/// Queued prompts an `abort` dropped (`turn_end.dropped`): for each text,
/// the oldest row of this tab with it that never landed goes. What went,
/// in order: the prompts this tab had queued.
pub fn unsent(rows: Rows, dropped: &[String]) -> Vec<String> {
    let mut gone = Vec::new();
    rows.update(|rows| {
        for text in dropped {
            let at = rows.iter().position(|row| unlanded(row, text));
            if let Some(at) = at {
                rows.remove(at);
                gone.push(text.clone());
            }
        }
    });
    gone
}

/// The entry just before the user message `entry_id`: where a session that
/// edits that message forks. `None` for the first message, one not shown,
/// or one that follows a tool's result.
pub fn entry_before(rows: Rows, entry_id: &str) -> Option<String> {
    rows.with_untracked(|rows| {
        let at = rows.iter().position(|row| match &row.kind {
            RowKind::User { entry_id: entry, .. } => {
                entry.with_untracked(|entry| entry.as_deref() == Some(entry_id))
            }
            _ => false,
        })?;
        // The nearest message before it. A tool's result there (a turn cut
        // off between a call and its reply) is no place to fork: the
        // model would be asked to go on from a call it made.
        let before = rows[..at].iter().rev().find(|row| {
            matches!(row.kind, RowKind::User { .. } | RowKind::Assistant(_) | RowKind::Tool(_))
        })?;
        match &before.kind {
            RowKind::User { entry_id, .. } => entry_id.get_untracked(),
            RowKind::Assistant(message) => message.entry_id.get_untracked(),
            _ => None,
        }
    })
}

/// A user message landed in the session as `entry_id` (`user_message`):
/// the oldest prompt of this tab with that text that had not landed yet
/// takes the entry, and with it a fork there; a prompt sent from elsewhere
/// joins the transcript. One already known (a sync came first) is left.
pub fn said(rows: Rows, entry_id: &str, text: &str) {
    let (known, waiting) = rows.with_untracked(|rows| {
        let users = rows.iter().filter_map(|row| match &row.kind {
            RowKind::User { entry_id, text } => Some((entry_id, text)),
            _ => None,
        });
        let mut known = false;
        let mut waiting = None;
        for (entry, said) in users {
            match entry.get_untracked() {
                Some(entry) if entry == entry_id => known = true,
                None if waiting.is_none() && **said == *text => waiting = Some(entry.clone()),
                _ => {}
            }
        }
        (known, waiting)
    });
    match (known, waiting) {
        (true, _) => {}
        (false, Some(waiting)) => waiting.set(Some(entry_id.to_owned())),
        (false, None) => {
            push(rows, Item::User { entry_id: Some(entry_id.to_owned()), text: text.to_owned() })
        }
    }
}

/// The text of the newest prompt shown.
pub fn last_prompt(rows: Rows) -> Option<String> {
    find(rows, |kind| match kind {
        RowKind::User { text, .. } => Some(text.to_string()),
        _ => None,
    })
}

fn find<T>(rows: Rows, pick: impl Fn(&RowKind) -> Option<T>) -> Option<T> {
    rows.with_untracked(|rows| rows.iter().rev().find_map(|row| pick(&row.kind)))
}

fn find_message(rows: Rows, message_id: &str, entry_id: &str) -> Option<Message> {
    find(rows, |kind| match kind {
        RowKind::Assistant(message) if message.is(message_id, entry_id) => Some(message.clone()),
        _ => None,
    })
}

fn find_tool(rows: Rows, tool_call_id: &str) -> Option<Tool> {
    find(rows, |kind| match kind {
        RowKind::Tool(tool) if *tool.tool_call_id == *tool_call_id => Some(tool.clone()),
        _ => None,
    })
}

/// A `message_delta`: one block of one message grows.
pub fn delta(rows: Rows, message_id: &str, kind: DeltaKind, text: &str) {
    match find_message(rows, message_id, message_id) {
        Some(message) => message.delta(kind, text),
        None => {
            let thinking = kind == DeltaKind::Thinking;
            let block = TextBlock::streaming(thinking, text.to_owned());
            let message = Message::new(message_id, None, vec![block]);
            rows.update(|rows| {
                rows.push(Row { key: next_key(), kind: RowKind::Assistant(message) })
            });
        }
    }
}

/// Whether the transcript ends on a reply an abort cut off (which says
/// where it stopped).
pub fn ends_cut_off(rows: Rows) -> bool {
    rows.with_untracked(|rows| {
        rows.iter().rev().find_map(|row| match &row.kind {
            RowKind::Assistant(message) => Some(message.aborted.get_untracked()),
            RowKind::User { .. } => Some(false),
            _ => None,
        })
    })
    .unwrap_or(false)
}

/// A complete assistant message: it replaces what streamed under
/// `message_id`, or the message a sync holds as `entry_id`, else joins the
/// transcript; its tool calls follow it.
pub fn complete(rows: Rows, message_id: &str, message: &WireMessage) {
    let (entry_id, content, aborted) = (&message.id, &message.content, message.aborted);
    let blocks = blocks_of(content);
    match find_message(rows, message_id, entry_id) {
        Some(message) => message.complete(entry_id, &blocks, aborted),
        None => push(
            rows,
            Item::Assistant {
                message_id: message_id.to_owned(),
                entry_id: Some(entry_id.to_owned()),
                blocks,
                aborted,
            },
        ),
    }
    for block in content {
        if let ContentBlock::ToolCall { id, name, args } = block
            && find_tool(rows, id).is_none()
        {
            push(rows, tool_item(id, name, args));
        }
    }
}

/// A `tool_call`: the call's row, made or brought up to date.
pub fn tool_call(rows: Rows, call: shard_protocol::agent::ToolCall) {
    match find_tool(rows, &call.tool_call_id) {
        Some(tool) => tool.call.update(|known| {
            known.args = Value::Object(call.args);
            known.read_only = call.read_only;
            known.start = call.render;
        }),
        None => push(
            rows,
            Item::Tool {
                tool_call_id: call.tool_call_id,
                name: call.name,
                args: Value::Object(call.args),
                read_only: call.read_only,
                start: call.render,
                result: None,
            },
        ),
    }
}

/// A `tool_result`, onto its call.
pub fn tool_result(rows: Rows, result: ToolResult) {
    if let Some(tool) = find_tool(rows, &result.tool_call_id) {
        tool.call.update(|call| call.result = Some(result));
    }
}

/// What says two rows are the same line of the conversation. Entry ids and
/// tool call ids are numbered per session (a fork's `e-4` or `call-2` is
/// another line than the original's), so a line of the log is known by its
/// id together with what it holds: within a session a line never changes,
/// and a line of another session that holds the same shows the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Identity {
    User {
        entry_id: String,
        text: String,
    },
    Assistant {
        entry_id: String,
        blocks: Vec<Block>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        args: String,
    },
    /// A prompt shown before its entry id was known.
    Said(String),
    /// A reply still streaming, by its message id.
    Streaming(String),
    Compaction(u64),
}

fn tool_identity(tool_call_id: &str, name: &str, args: &Value) -> Identity {
    Identity::Tool {
        tool_call_id: tool_call_id.to_owned(),
        name: name.to_owned(),
        args: args.to_string(),
    }
}

/// What a row already shown is. A message still streaming has no entry
/// yet: a `sync` (which holds only complete messages) never matches it.
fn identity(row: &Row) -> Option<Identity> {
    match &row.kind {
        RowKind::User { entry_id, text } => Some(match entry_id.get_untracked() {
            Some(entry_id) => Identity::User { entry_id, text: text.to_string() },
            None => Identity::Said(text.to_string()),
        }),
        RowKind::Assistant(message) => {
            let Some(entry_id) = message.entry_id.get_untracked() else {
                return Some(Identity::Streaming(message.message_id.to_string()));
            };
            let blocks = message
                .blocks
                .with_untracked(|blocks| blocks.iter().map(TextBlock::as_block).collect());
            Some(Identity::Assistant { entry_id, blocks })
        }
        RowKind::Tool(tool) => tool
            .call
            .with_untracked(|call| Some(tool_identity(&tool.tool_call_id, &call.name, &call.args))),
        RowKind::Compaction { index, .. } => Some(Identity::Compaction(*index)),
        RowKind::Notice { .. } => None,
    }
}

/// What a line of a `sync` may be among the rows shown, best first.
fn wanted(item: &Item) -> Vec<Identity> {
    match item {
        Item::User { entry_id, text } => entry_id
            .iter()
            .map(|entry_id| Identity::User { entry_id: entry_id.clone(), text: text.clone() })
            .chain([Identity::Said(text.clone())])
            .collect(),
        Item::Assistant { entry_id: None, message_id, .. } => {
            vec![Identity::Streaming(message_id.clone())]
        }
        Item::Assistant { entry_id: Some(entry_id), blocks, .. } => {
            vec![Identity::Assistant { entry_id: entry_id.clone(), blocks: blocks.clone() }]
        }
        Item::Tool { tool_call_id, name, args, .. } => {
            vec![tool_identity(tool_call_id, name, args)]
        }
        Item::Compaction { index, .. } => vec![Identity::Compaction(*index)],
        Item::Notice { .. } => Vec::new(),
    }
}

/// Brings `row` (the same line as `item`) up to date with it, keeping its
/// key and signals.
fn refresh(row: &Row, item: Item) -> Row {
    match (&row.kind, item) {
        (RowKind::Assistant(message), Item::Assistant { entry_id, blocks, aborted, .. }) => {
            match entry_id {
                Some(entry_id) => message.complete(&entry_id, &blocks, aborted),
                None => message.streamed(&blocks),
            }
            row.clone()
        }
        (RowKind::Tool(tool), Item::Tool { name, args, read_only, start, result, .. }) => {
            // A sync knows less of a call than its live events did (how it
            // was shown, its exit code and duration): what they said stays
            // where the sync agrees. Whether it has a result is the sync's.
            let known = tool.call.get_untracked();
            let same = |known: &ToolResult, synced: &ToolResult| {
                known.content == synced.content && known.is_error == synced.is_error
            };
            let result = match (known.result, result) {
                (Some(known), Some(synced)) if same(&known, &synced) => Some(known),
                (_, synced) => synced,
            };
            let call = ToolCall {
                name,
                args,
                read_only: read_only.or(known.read_only),
                start: start.or(known.start),
                result,
            };
            set_if_changed(&tool.call, call);
            row.clone()
        }
        (RowKind::User { entry_id: known, .. }, Item::User { entry_id, .. }) => {
            set_if_changed(known, entry_id);
            row.clone()
        }
        (_, item) => Row::new(item),
    }
}

/// A `sync`'s transcript, reconciled into the rows already shown: a line
/// that is already there keeps its row (its key, DOM and open state), in
/// the sync's order; the rest are new; rows the sync no longer holds go.
pub fn reconcile(rows: Rows, items: Vec<Item>) {
    let old = rows.with_untracked(Clone::clone);
    let mut at: HashMap<Identity, VecDeque<usize>> = HashMap::new();
    for (index, row) in old.iter().enumerate() {
        if let Some(identity) = identity(row) {
            at.entry(identity).or_default().push_back(index);
        }
    }
    // Matches only move forward, so every row before `next` is taken.
    let mut next = 0;
    let mut reconciled = Vec::with_capacity(items.len());
    for item in items {
        // The first row after the last match that is this line.
        let mut matched = None;
        for identity in wanted(&item) {
            if let Some(queue) = at.get_mut(&identity) {
                while queue.front().is_some_and(|&index| index < next) {
                    queue.pop_front();
                }
                matched = queue.front().copied();
            }
            if matched.is_some() {
                break;
            }
        }
        match matched {
            Some(index) => {
                next = index + 1;
                reconciled.push(refresh(&old[index], item));
            }
            None => reconciled.push(Row::new(item)),
        }
    }
    let unchanged = reconciled.len() == old.len()
        && reconciled.iter().zip(&old).all(|(new, old)| new.key == old.key);
    if !unchanged {
        rows.set(reconciled);
    }
}

/// The rows as plain data (untracked), for tests.
#[cfg(test)]
pub fn items(rows: Rows) -> Vec<Item> {
    rows.with_untracked(|rows| rows.iter().map(Row::item).collect())
}

/// The most rows in the DOM at once (the view renders a window of them).
pub const WINDOW_ROWS: usize = 300;
/// How far "Show earlier" and "Show later" move the window.
pub const PAGE_ROWS: usize = 100;

/// The rows in the DOM of `len`: from `start`, or the last
/// [`WINDOW_ROWS`] while the view follows the end (`None`).
pub fn shown(start: Option<usize>, len: usize) -> std::ops::Range<usize> {
    match start {
        None => len.saturating_sub(WINDOW_ROWS)..len,
        Some(first) => {
            let first = first.min(len);
            first..(first + WINDOW_ROWS).min(len)
        }
    }
}

/// Where the window must start for row `index` of `len` to be in it: as
/// it is if the row is shown, else with the row in its middle.
pub fn showing(start: Option<usize>, index: usize, len: usize) -> Option<usize> {
    if shown(start, len).contains(&index) {
        start
    } else {
        Some(index.saturating_sub(WINDOW_ROWS / 2))
    }
}

/// The session entry a row shows, once known.
pub fn entry_of(row: &Row) -> Option<String> {
    match &row.kind {
        RowKind::User { entry_id, .. } => entry_id.get_untracked(),
        RowKind::Assistant(message) => message.entry_id.get_untracked(),
        _ => None,
    }
}

/// The text a row holds, for finding in the transcript: what was said
/// (not an assistant's thinking), a tool's name, arguments and output,
/// a notice. Untracked.
pub fn text_of(row: &Row) -> String {
    match &row.kind {
        RowKind::User { text, .. } | RowKind::Notice { text, .. } => text.to_string(),
        RowKind::Assistant(message) => message.blocks.with_untracked(|blocks| {
            let said: Vec<String> =
                blocks.iter().filter(|block| !block.thinking).map(TextBlock::text).collect();
            said.join("\n")
        }),
        RowKind::Tool(tool) => tool.call.with_untracked(|call| {
            let output = match call.result.as_ref().map(|result| &result.content) {
                Some(ToolResultContent::Text { text }) => text.clone(),
                Some(ToolResultContent::Json { value }) => value.to_string(),
                Some(ToolResultContent::Error { message }) => message.clone(),
                Some(ToolResultContent::Unknown) | None => String::new(),
            };
            format!("{} {}\n{output}", call.name, call.args)
        }),
        RowKind::Compaction { .. } => String::new(),
    }
}

/// Tracks `rows` and returns the ones in `range`.
pub fn window(rows: Rows, range: std::ops::Range<usize>) -> Vec<Row> {
    rows.with(|rows| {
        let end = range.end.min(rows.len());
        rows[range.start.min(end)..end].to_vec()
    })
}

#[cfg(test)]
mod tests;
