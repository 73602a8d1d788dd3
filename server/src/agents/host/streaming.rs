//! The reply streaming now, as its deltas built it. A client that attaches
//! mid-reply (a tab opened, an editor joining through `shard acp`) gets it
//! as the last message of its `sync`'s live window, marked `streaming`, so
//! that it shows the turn so far and the deltas that follow go on from
//! there (docs/PROTOCOL-NOTES.md, "`Message` `streaming`").
//!
//! The session's record holds every message once it is complete; this
//! holds only the one that is not, and only its text and thinking (a tool
//! call's arguments are not JSON until they are whole, and its
//! `message_complete` and `tool_call` follow).

use shard_protocol::agent::DeltaKind;
use shard_protocol::types::{ContentBlock, Message, Role};

/// The most text a reply streaming now is kept with. A reply past it is
/// not given in `sync` (a client attaching then sees what follows, as
/// before this part existed); no model's reply comes near it.
pub(super) const MAX_BYTES: usize = 4 << 20;

/// One streamed delta, as the host reads it without decoding the line.
pub(super) struct Delta {
    pub kind: DeltaKind,
    pub message_id: String,
    pub block_index: u32,
    pub text: Option<String>,
}

struct Block {
    index: u32,
    thinking: bool,
    text: String,
}

#[derive(Default)]
pub(super) struct Streaming {
    message_id: Option<String>,
    blocks: Vec<Block>,
    bytes: usize,
    /// Grew past [`MAX_BYTES`]: not given any more.
    given_up: bool,
}

impl Streaming {
    /// A delta of the agent's: its message grows (or a new one starts).
    pub fn delta(&mut self, delta: &Delta) {
        if self.message_id.as_deref() != Some(delta.message_id.as_str()) {
            *self = Self { message_id: Some(delta.message_id.clone()), ..Self::default() };
        }
        let thinking = match delta.kind {
            DeltaKind::Text => false,
            DeltaKind::Thinking => true,
            DeltaKind::ToolCall | DeltaKind::Unknown => return,
        };
        let Some(text) = delta.text.as_deref().filter(|text| !text.is_empty()) else { return };
        if self.given_up {
            return;
        }
        self.bytes += text.len();
        if self.bytes > MAX_BYTES {
            self.blocks = Vec::new();
            self.given_up = true;
            return;
        }
        let index = delta.block_index;
        match self.blocks.iter_mut().rev().find(|block| block.index == index) {
            Some(block) if block.thinking == thinking => block.text.push_str(text),
            _ => self.blocks.push(Block { index, thinking, text: text.to_owned() }),
        }
    }

    /// `message_id`'s `message_complete`: it is in the record now.
    pub fn completed(&mut self, message_id: &str) {
        if self.message_id.as_deref() == Some(message_id) {
            self.ended();
        }
    }

    /// The turn ended, or the process did: nothing streams.
    pub fn ended(&mut self) {
        *self = Self::default();
    }

    /// The reply so far, to end a `sync`'s live window with; `None` when
    /// nothing streams, or when `window` (read from the record) already
    /// ends on it: the record can be ahead of the events the host has
    /// read, and a reply recorded whole is not given twice.
    pub fn message(&self, window: &[Message]) -> Option<Message> {
        let id = self.message_id.as_ref().filter(|_| !self.given_up && !self.blocks.is_empty())?;
        let content: Vec<ContentBlock> = self
            .blocks
            .iter()
            .map(|block| match block.thinking {
                true => ContentBlock::Thinking { text: block.text.clone() },
                false => ContentBlock::Text { text: block.text.clone() },
            })
            .collect();
        if window.last().is_some_and(|last| recorded_as(last, &content)) {
            return None;
        }
        Some(Message {
            id: id.clone(),
            role: Role::Assistant,
            content,
            aborted: false,
            streaming: true,
        })
    }
}

/// Whether `last`, the record's last message, is the reply streaming now,
/// already recorded: an assistant message whose text and thinking blocks
/// begin with what streamed, block by block.
fn recorded_as(last: &Message, streamed: &[ContentBlock]) -> bool {
    if last.role != Role::Assistant {
        return false;
    }
    let mut recorded = last
        .content
        .iter()
        .filter(|block| matches!(block, ContentBlock::Text { .. } | ContentBlock::Thinking { .. }));
    streamed.iter().all(|streamed| match (streamed, recorded.next()) {
        (ContentBlock::Text { text: so_far }, Some(ContentBlock::Text { text }))
        | (ContentBlock::Thinking { text: so_far }, Some(ContentBlock::Thinking { text })) => {
            text.starts_with(so_far.as_str())
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(message_id: &str, block_index: u32, kind: DeltaKind, text: &str) -> Delta {
        Delta { kind, message_id: message_id.into(), block_index, text: Some(text.into()) }
    }

    fn texts(message: &Message) -> Vec<(bool, &str)> {
        fn text(block: &ContentBlock) -> (bool, &str) {
            match block {
                ContentBlock::Text { text } => (false, text.as_str()),
                ContentBlock::Thinking { text } => (true, text.as_str()),
                _ => panic!("only text and thinking stream"),
            }
        }
        message.content.iter().map(text).collect()
    }

    #[test]
    fn deltas_build_the_reply_block_by_block_and_a_completion_ends_it() {
        let mut streaming = Streaming::default();
        assert!(streaming.message(&[]).is_none(), "nothing streams yet");
        streaming.delta(&delta("m1", 0, DeltaKind::Thinking, "let me "));
        streaming.delta(&delta("m1", 0, DeltaKind::Thinking, "see"));
        streaming.delta(&delta("m1", 1, DeltaKind::Text, "tick-1 "));
        streaming.delta(&delta("m1", 2, DeltaKind::ToolCall, ""));
        streaming.delta(&delta("m1", 1, DeltaKind::Text, "tick-2"));
        let so_far = streaming.message(&[]).expect("a reply streams");
        assert_eq!(so_far.id, "m1", "its deltas go on under its id");
        assert!(so_far.streaming && !so_far.aborted);
        assert_eq!(texts(&so_far), [(true, "let me see"), (false, "tick-1 tick-2")]);

        streaming.completed("another");
        assert!(streaming.message(&[]).is_some(), "another message's completion leaves it");
        streaming.completed("m1");
        assert!(streaming.message(&[]).is_none(), "complete: the record has it");

        // The next message starts afresh.
        streaming.delta(&delta("m2", 0, DeltaKind::Text, "next"));
        assert_eq!(texts(&streaming.message(&[]).expect("streams")), [(false, "next")]);
        streaming.ended();
        assert!(streaming.message(&[]).is_none());
    }

    #[test]
    fn a_reply_the_record_already_holds_is_not_given_twice() {
        let mut streaming = Streaming::default();
        streaming.delta(&delta("m1", 0, DeltaKind::Text, "tick-1 tick-"));
        let recorded = Message {
            id: "entry-9".into(),
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: "tick-1 tick-2".into() }],
            aborted: false,
            streaming: false,
        };
        assert!(streaming.message(std::slice::from_ref(&recorded)).is_none());
        // The record ending on something else: the reply is given.
        let asked = Message { role: Role::User, id: "entry-8".into(), ..recorded.clone() };
        assert!(streaming.message(&[asked]).is_some());
        let earlier = Message {
            content: vec![ContentBlock::Text { text: "a reply before".into() }],
            ..recorded
        };
        assert!(streaming.message(&[earlier]).is_some());
    }

    #[test]
    fn a_reply_past_the_bound_is_not_kept() {
        let mut streaming = Streaming::default();
        let piece = "x".repeat(64 << 10);
        for _ in 0..MAX_BYTES / piece.len() {
            streaming.delta(&delta("m1", 0, DeltaKind::Text, &piece));
        }
        assert!(streaming.message(&[]).is_some(), "at the bound it is kept");
        streaming.delta(&delta("m1", 0, DeltaKind::Text, "y"));
        assert!(streaming.message(&[]).is_none(), "past it, it is not");
        assert!(streaming.blocks.is_empty(), "and its text is let go");
        streaming.delta(&delta("m2", 0, DeltaKind::Text, "next"));
        assert!(streaming.message(&[]).is_some(), "the next message is kept again");
    }
}
