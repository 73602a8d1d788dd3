//! One line of the transcript as the page holds it: a key it keeps for its
//! whole life, and what changes in it (streamed text, a tool's result, an
//! open `<details>`) as signals of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use leptos::prelude::{ArcRwSignal, GetUntracked, Set, Update, WithUntracked};
use serde_json::Value;
use shard_protocol::agent::{DeltaKind, ToolResult};
use shard_protocol::types::RenderDescriptor;

use super::item::{Block, Item};

/// The most text one streamed chunk holds: a delta rewrites at most this
/// much of the page.
pub const CHUNK_BYTES: usize = 2048;

pub(super) fn next_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One line of the transcript, with the key it keeps for its whole life.
#[derive(Clone)]
pub struct Row {
    pub key: u64,
    pub kind: RowKind,
}

#[derive(Clone)]
pub enum RowKind {
    /// A prompt; its session entry once known (a `sync` tells it, and the
    /// row then offers a fork there).
    User {
        entry_id: ArcRwSignal<Option<String>>,
        text: Arc<str>,
    },
    Assistant(Message),
    Tool(Tool),
    Compaction {
        index: u64,
        tokens_before: u64,
        tokens_after: u64,
    },
    Notice {
        text: Arc<str>,
        error: bool,
        retry: Option<Arc<str>>,
    },
}

/// An assistant message, streaming or complete.
#[derive(Clone)]
pub struct Message {
    /// The id its deltas carry (for a synced message, its entry id).
    pub message_id: Arc<str>,
    /// The session entry it became, once complete.
    pub entry_id: ArcRwSignal<Option<String>>,
    pub blocks: ArcRwSignal<Vec<TextBlock>>,
    /// An abort cut it off (known once it is complete).
    pub aborted: ArcRwSignal<bool>,
}

/// One text or thinking block of a message.
#[derive(Clone)]
pub struct TextBlock {
    /// Unique: a message whose blocks are replaced renders the new ones.
    pub key: u64,
    pub thinking: bool,
    /// The text as streamed, in chunks of at most [`CHUNK_BYTES`].
    pub chunks: ArcRwSignal<Vec<ArcRwSignal<String>>>,
    /// The whole text once the message is complete: rendered once.
    pub done: ArcRwSignal<Option<Arc<str>>>,
    /// Whether the user opened it (a thinking block's `<details>`); kept
    /// across a completion and a resync.
    pub open: ArcRwSignal<bool>,
}

/// A tool call and, once it has one, its result.
#[derive(Clone)]
pub struct Tool {
    pub tool_call_id: Arc<str>,
    pub call: ArcRwSignal<ToolCall>,
    /// Whether the user opened its raw output.
    pub open: ArcRwSignal<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub args: Value,
    pub read_only: Option<bool>,
    pub start: Option<RenderDescriptor>,
    pub result: Option<ToolResult>,
}

/// Sets `signal` only when the value differs, so nothing re-renders for an
/// update that changes nothing (a resync of what is already shown).
pub(super) fn set_if_changed<T: PartialEq + Send + Sync + 'static>(
    signal: &ArcRwSignal<T>,
    value: T,
) {
    if signal.with_untracked(|current| *current != value) {
        signal.set(value);
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary, as a length.
fn boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max).rev().find(|&at| text.is_char_boundary(at)).unwrap_or(0)
}

/// Where to end a chunk of at most `max` bytes of `text`: after its last
/// line break or space if it has one (each chunk is its own box on the
/// page, so a chunk ends a line), else at `max` on a character boundary.
fn break_before(text: &str, max: usize) -> usize {
    let fits = boundary(text, max);
    if fits == text.len() {
        return fits;
    }
    match text[..fits].rfind(['\n', ' ']) {
        Some(at) => at + 1,
        None => fits,
    }
}

impl TextBlock {
    pub(super) fn streaming(thinking: bool, text: String) -> Self {
        Self {
            key: next_key(),
            thinking,
            chunks: ArcRwSignal::new(vec![ArcRwSignal::new(text)]),
            done: ArcRwSignal::new(None),
            open: ArcRwSignal::new(false),
        }
    }

    /// A block streamed so far, as a `sync` sent mid-reply gives it.
    pub(super) fn streamed(block: &Block) -> Self {
        let (Block::Text(text) | Block::Thinking(text)) = block;
        let streamed = Self::streaming(matches!(block, Block::Thinking(_)), String::new());
        streamed.append(text);
        streamed
    }

    pub(super) fn complete(block: &Block) -> Self {
        let (thinking, text) = match block {
            Block::Text(text) => (false, text),
            Block::Thinking(text) => (true, text),
        };
        Self {
            key: next_key(),
            thinking,
            chunks: ArcRwSignal::new(Vec::new()),
            done: ArcRwSignal::new(Some(Arc::from(text.as_str()))),
            open: ArcRwSignal::new(false),
        }
    }

    /// Appends streamed text: to the last chunk as far as it has room, the
    /// rest as new chunks (the only case that changes the chunk list), so
    /// that a frame's worth of deltas appended at once still leaves every
    /// chunk small. Chunks end between words where they can: each is laid
    /// out on its own, so a growing message costs the browser its last
    /// chunk, not the whole text.
    pub(super) fn append(&self, text: &str) {
        let last = self.chunks.with_untracked(|chunks| chunks.last().cloned());
        let room = last
            .as_ref()
            .map_or(0, |last| CHUNK_BYTES.saturating_sub(last.with_untracked(String::len)));
        let head = if text.len() <= room { text.len() } else { break_before(text, room) };
        let (head, mut rest) = text.split_at(head);
        if let Some(last) = last.filter(|_| !head.is_empty()) {
            last.update(|chunk| chunk.push_str(head));
        }
        if rest.is_empty() {
            return;
        }
        let mut fresh = Vec::new();
        while !rest.is_empty() {
            // A chunk holds at least one character, however long.
            let cut = match break_before(rest, CHUNK_BYTES) {
                0 => rest.chars().next().map_or(rest.len(), char::len_utf8),
                cut => cut,
            };
            let (piece, tail) = rest.split_at(cut);
            fresh.push(ArcRwSignal::new(piece.to_owned()));
            rest = tail;
        }
        self.chunks.update(|chunks| chunks.extend(fresh));
    }

    /// The text so far (untracked).
    pub fn text(&self) -> String {
        if let Some(done) = self.done.get_untracked() {
            return done.to_string();
        }
        self.chunks.with_untracked(|chunks| {
            chunks.iter().map(|chunk| chunk.get_untracked()).collect::<String>()
        })
    }

    pub(super) fn as_block(&self) -> Block {
        if self.thinking { Block::Thinking(self.text()) } else { Block::Text(self.text()) }
    }

    /// The block's final text: shown as such from now on, its chunks freed.
    pub(super) fn finish(&self, text: &str) {
        if self.done.with_untracked(|done| done.as_deref() != Some(text)) {
            self.done.set(Some(Arc::from(text)));
        }
        if self.chunks.with_untracked(|chunks| !chunks.is_empty()) {
            self.chunks.set(Vec::new());
        }
    }
}

impl Message {
    pub(super) fn new(message_id: &str, entry_id: Option<String>, blocks: Vec<TextBlock>) -> Self {
        Self {
            message_id: Arc::from(message_id),
            entry_id: ArcRwSignal::new(entry_id),
            blocks: ArcRwSignal::new(blocks),
            aborted: ArcRwSignal::new(false),
        }
    }

    pub(super) fn is(&self, message_id: &str, entry_id: &str) -> bool {
        *self.message_id == *message_id
            || *self.message_id == *entry_id
            || self.entry_id.with_untracked(|entry| entry.as_deref() == Some(entry_id))
    }

    /// The message is complete with `blocks`: a streamed block of the same
    /// kind keeps its DOM (and an open thinking block stays open) and only
    /// switches to the final text.
    pub(super) fn complete(&self, entry_id: &str, blocks: &[Block], aborted: bool) {
        set_if_changed(&self.entry_id, Some(entry_id.to_owned()));
        set_if_changed(&self.aborted, aborted);
        let same_shape = self.blocks.with_untracked(|known| {
            known.len() == blocks.len()
                && known
                    .iter()
                    .zip(blocks)
                    .all(|(known, block)| known.thinking == matches!(block, Block::Thinking(_)))
        });
        if same_shape {
            self.blocks.with_untracked(|known| {
                for (known, block) in known.iter().zip(blocks) {
                    let (Block::Text(text) | Block::Thinking(text)) = block;
                    known.finish(text);
                }
            });
        } else {
            self.blocks.set(blocks.iter().map(TextBlock::complete).collect());
        }
    }

    /// A `sync` sent mid-reply says what streamed so far: a block that
    /// already shows it is left as it is, any other shows it afresh.
    pub(super) fn streamed(&self, blocks: &[Block]) {
        let same = self.blocks.with_untracked(|known| {
            known.len() == blocks.len()
                && known.iter().zip(blocks).all(|(known, block)| {
                    known.done.with_untracked(Option::is_none) && known.as_block() == *block
                })
        });
        if !same {
            self.blocks.set(blocks.iter().map(TextBlock::streamed).collect());
        }
    }

    pub(super) fn delta(&self, kind: DeltaKind, text: &str) {
        let thinking = kind == DeltaKind::Thinking;
        let last = self.blocks.with_untracked(|blocks| blocks.last().cloned());
        match last {
            Some(block)
                if block.thinking == thinking && block.done.with_untracked(Option::is_none) =>
            {
                block.append(text)
            }
            _ => self
                .blocks
                .update(|blocks| blocks.push(TextBlock::streaming(thinking, text.to_owned()))),
        }
    }
}

impl Tool {
    pub(super) fn new(tool_call_id: &str, call: ToolCall) -> Self {
        Self {
            tool_call_id: Arc::from(tool_call_id),
            call: ArcRwSignal::new(call),
            open: ArcRwSignal::new(false),
        }
    }
}

impl Row {
    pub fn new(item: Item) -> Self {
        let kind = match item {
            Item::User { entry_id, text } => {
                RowKind::User { entry_id: ArcRwSignal::new(entry_id), text: Arc::from(text) }
            }
            Item::Assistant { message_id, entry_id, blocks, aborted } => {
                // Without an entry, the reply streams still: its text goes
                // on from here.
                let block = match entry_id {
                    Some(_) => TextBlock::complete,
                    None => TextBlock::streamed,
                };
                let blocks = blocks.iter().map(block).collect();
                let message = Message::new(&message_id, entry_id, blocks);
                message.aborted.set(aborted);
                RowKind::Assistant(message)
            }
            Item::Tool { tool_call_id, name, args, read_only, start, result } => RowKind::Tool(
                Tool::new(&tool_call_id, ToolCall { name, args, read_only, start, result }),
            ),
            Item::Compaction { index, tokens_before, tokens_after } => {
                RowKind::Compaction { index, tokens_before, tokens_after }
            }
            Item::Notice { text, error, retry } => {
                RowKind::Notice { text: Arc::from(text), error, retry: retry.map(Arc::from) }
            }
        };
        Self { key: next_key(), kind }
    }

    /// The row as plain data, as it is now (untracked).
    pub fn item(&self) -> Item {
        match &self.kind {
            RowKind::User { entry_id, text } => {
                Item::User { entry_id: entry_id.get_untracked(), text: text.to_string() }
            }
            RowKind::Assistant(message) => Item::Assistant {
                message_id: message.message_id.to_string(),
                entry_id: message.entry_id.get_untracked(),
                blocks: message
                    .blocks
                    .with_untracked(|blocks| blocks.iter().map(TextBlock::as_block).collect()),
                aborted: message.aborted.get_untracked(),
            },
            RowKind::Tool(tool) => {
                let call = tool.call.get_untracked();
                Item::Tool {
                    tool_call_id: tool.tool_call_id.to_string(),
                    name: call.name,
                    args: call.args,
                    read_only: call.read_only,
                    start: call.start,
                    result: call.result,
                }
            }
            RowKind::Compaction { index, tokens_before, tokens_after } => Item::Compaction {
                index: *index,
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
            },
            RowKind::Notice { text, error, retry } => {
                let retry = retry.as_deref().map(str::to_owned);
                Item::Notice { text: text.to_string(), error: *error, retry }
            }
        }
    }
}
