//! The transcript's rows under a stream, a completion and a resync: what
//! changes, and above all what does not.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use leptos::prelude::{ArcMemo, Get, GetUntracked, RwSignal, Set, With, WithUntracked};
use shard_protocol::agent::DeltaKind;
use shard_protocol::types::ContentBlock;

use super::row::CHUNK_BYTES;
use super::{Block, Item, Row, RowKind, Rows, complete, delta, items, reconcile};

fn rows() -> Rows {
    let owner = leptos::prelude::Owner::new_root(None);
    owner.set();
    std::mem::forget(owner);
    RwSignal::new(Vec::new())
}

/// How many times `read` was evaluated so far: a memo over it re-runs only
/// when something it read was notified.
fn watch(read: impl Fn() -> usize + Send + Sync + 'static) -> (ArcMemo<usize>, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let memo = ArcMemo::new(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
        read()
    });
    memo.get();
    (memo, runs)
}

fn text(content: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text { text: content.to_owned() }]
}

fn message(rows: Rows, at: usize) -> super::Message {
    rows.with_untracked(|rows| match &rows[at].kind {
        RowKind::Assistant(message) => message.clone(),
        _ => panic!("row {at} is not a message"),
    })
}

/// A complete reply, as `message_complete` carries it.
fn reply(entry_id: &str, content: Vec<ContentBlock>) -> shard_protocol::types::Message {
    shard_protocol::types::Message {
        id: entry_id.to_owned(),
        role: shard_protocol::types::Role::Assistant,
        content,
        aborted: false,
        streaming: false,
    }
}

fn synced(items: &[(&str, &str)]) -> Vec<Item> {
    items
        .iter()
        .map(|(id, said)| match id.strip_prefix("u-") {
            Some(_) => Item::User { entry_id: Some((*id).to_owned()), text: (*said).to_owned() },
            None => Item::Assistant {
                message_id: (*id).to_owned(),
                entry_id: Some((*id).to_owned()),
                blocks: vec![Block::Text((*said).to_owned())],
                aborted: false,
            },
        })
        .collect()
}

#[test]
fn a_delta_touches_one_block_of_one_message_and_nothing_else() {
    let rows = rows();
    reconcile(rows, synced(&[("u-1", "hi"), ("e-1", "earlier answer")]));
    delta(rows, "m-2", DeltaKind::Text, "tick-1 ");
    let earlier = message(rows, 1);
    let streaming = message(rows, 2);
    let (list, list_runs) = watch(move || rows.with(Vec::len));
    let other = earlier.blocks.clone();
    let (_, other_runs) = watch(move || other.with(Vec::len));
    let blocks = streaming.blocks.clone();
    let (_, block_runs) = watch(move || blocks.with(Vec::len));
    for index in 2..=2_000 {
        delta(rows, "m-2", DeltaKind::Text, &format!("tick-{index} "));
    }
    assert_eq!(list.get(), 3);
    assert_eq!(list_runs.load(Ordering::Relaxed), 1, "the row list was never notified");
    assert_eq!(other_runs.load(Ordering::Relaxed), 1, "another message was never notified");
    assert_eq!(block_runs.load(Ordering::Relaxed), 1, "no block was added to the message");
    let block = streaming.blocks.with_untracked(|blocks| blocks[0].clone());
    let chunks = block.chunks.get_untracked();
    assert!(chunks.len() > 1, "long text is split into chunks");
    for chunk in &chunks {
        assert!(chunk.with_untracked(String::len) < CHUNK_BYTES + 16, "a chunk stays small");
    }
    let expected: String = (1..=2_000).map(|index| format!("tick-{index} ")).collect();
    assert_eq!(block.text(), expected, "nothing lost or reordered across chunks");
}

#[test]
fn a_frame_of_deltas_appended_at_once_still_leaves_every_chunk_small() {
    let rows = rows();
    delta(rows, "m-1", DeltaKind::Text, "start ");
    // What a frame holds in a burst: thousands of deltas as one text, with
    // characters of several bytes that a cut must not split.
    let frame: String = (0..3_000).map(|index| format!("é{index}→ ")).collect();
    delta(rows, "m-1", DeltaKind::Text, &frame);
    delta(rows, "m-1", DeltaKind::Text, "end");
    let block = message(rows, 0).blocks.with_untracked(|blocks| blocks[0].clone());
    let chunks = block.chunks.get_untracked();
    assert!(chunks.len() > 10, "the frame's text is spread over chunks");
    for chunk in &chunks {
        assert!(chunk.with_untracked(String::len) <= CHUNK_BYTES, "a chunk stays small");
    }
    // Each chunk is a box of its own on the page: it ends between words.
    for chunk in &chunks[..chunks.len() - 1] {
        assert!(chunk.with_untracked(|chunk| chunk.ends_with(' ')), "a chunk ends after a space");
    }
    assert_eq!(block.text(), format!("start {frame}end"), "nothing lost or reordered");
}

#[test]
fn completing_a_streamed_message_keeps_its_row_and_blocks() {
    let rows = rows();
    delta(rows, "m-1", DeltaKind::Thinking, "let me ");
    delta(rows, "m-1", DeltaKind::Thinking, "think");
    delta(rows, "m-1", DeltaKind::Text, "**done**");
    let streamed = message(rows, 0);
    let keys: Vec<u64> =
        streamed.blocks.with_untracked(|blocks| blocks.iter().map(|b| b.key).collect());
    // The user opened the thinking block while it streamed.
    streamed.blocks.with_untracked(|blocks| blocks[0].open.set(true));
    let key = rows.with_untracked(|rows| rows[0].key);
    let content = vec![
        ContentBlock::Thinking { text: "let me think".to_owned() },
        ContentBlock::Text { text: "**done**".to_owned() },
    ];
    complete(rows, "m-1", &reply("e-1", content));
    assert_eq!(rows.with_untracked(|rows| (rows.len(), rows[0].key)), (1, key));
    let finished = message(rows, 0);
    let after: Vec<u64> =
        finished.blocks.with_untracked(|blocks| blocks.iter().map(|b| b.key).collect());
    assert_eq!(after, keys, "same blocks, so the same DOM");
    finished.blocks.with_untracked(|blocks| {
        assert!(blocks[0].open.get_untracked(), "the open thinking block stays open");
        assert_eq!(blocks[1].done.get_untracked().as_deref(), Some("**done**"));
        assert!(blocks[1].chunks.with_untracked(Vec::is_empty), "the streamed chunks are freed");
    });
    assert_eq!(finished.entry_id.get_untracked().as_deref(), Some("e-1"));
}

#[test]
fn a_resync_keeps_the_rows_it_already_shows() {
    let rows = rows();
    // Live: a prompt shown on acceptance (no entry id yet), a streamed reply.
    super::push(rows, Item::User { entry_id: None, text: "hi".to_owned() });
    delta(rows, "m-1", DeltaKind::Text, "You said");
    complete(rows, "m-1", &reply("e-2", text("You said: hi")));
    let before: Vec<u64> = rows.with_untracked(|rows| rows.iter().map(|row| row.key).collect());
    let (list, list_runs) = watch(move || rows.with(Vec::len));
    // A reconnect's sync holds the same two lines.
    reconcile(rows, synced(&[("u-1", "hi"), ("e-2", "You said: hi")]));
    let after: Vec<u64> = rows.with_untracked(|rows| rows.iter().map(|row| row.key).collect());
    assert_eq!(after, before, "same rows, same keys");
    list.get();
    assert_eq!(list_runs.load(Ordering::Relaxed), 1, "nothing to re-render");
    // A longer one adds only what is new, after them.
    reconcile(rows, synced(&[("u-1", "hi"), ("e-2", "You said: hi"), ("u-3", "more")]));
    let grown: Vec<u64> = rows.with_untracked(|rows| rows.iter().map(|row| row.key).collect());
    assert_eq!(&grown[..2], &before[..]);
    assert_eq!(grown.len(), 3);
    // One that no longer holds a line drops it and keeps the rest.
    reconcile(rows, synced(&[("e-2", "You said: hi"), ("u-3", "more")]));
    let kept: Vec<u64> = rows.with_untracked(|rows| rows.iter().map(|row| row.key).collect());
    assert_eq!(kept, &grown[1..]);
    assert_eq!(items(rows).len(), 2);
}

/// A `sync` sent mid-reply: the prompt, and the reply so far under the
/// message id its deltas carry.
fn synced_mid_reply(so_far: &[ContentBlock]) -> Vec<Item> {
    let streaming =
        shard_protocol::types::Message { streaming: true, ..reply("m-2", so_far.to_vec()) };
    let asked = shard_protocol::types::Message {
        role: shard_protocol::types::Role::User,
        ..reply("u-1", text("stream: 9"))
    };
    super::from_sync(&[asked, streaming], None)
}

#[test]
fn a_reply_synced_mid_stream_goes_on_in_its_blocks_and_completes_in_place() {
    let rows = rows();
    let so_far = vec![
        ContentBlock::Thinking { text: "counting".to_owned() },
        ContentBlock::Text { text: "tick-1 tick-2 ".to_owned() },
    ];
    reconcile(rows, synced_mid_reply(&so_far));
    let streaming = message(rows, 1);
    assert_eq!(streaming.entry_id.get_untracked(), None, "not complete: no entry yet");
    let keys: Vec<u64> =
        streaming.blocks.with_untracked(|blocks| blocks.iter().map(|b| b.key).collect());
    delta(rows, "m-2", DeltaKind::Text, "tick-3 ");
    delta(rows, "m-2", DeltaKind::Text, "tick-4");
    let after: Vec<u64> =
        streaming.blocks.with_untracked(|blocks| blocks.iter().map(|b| b.key).collect());
    assert_eq!(after, keys, "the deltas go on in the synced text block");
    assert_eq!(
        items(rows)[1],
        Item::Assistant {
            message_id: "m-2".to_owned(),
            entry_id: None,
            blocks: vec![
                Block::Thinking("counting".to_owned()),
                Block::Text("tick-1 tick-2 tick-3 tick-4".to_owned())
            ],
            aborted: false,
        }
    );
    let whole = vec![
        ContentBlock::Thinking { text: "counting".to_owned() },
        ContentBlock::Text { text: "tick-1 tick-2 tick-3 tick-4".to_owned() },
    ];
    complete(rows, "m-2", &reply("e-2", whole));
    assert_eq!(rows.with_untracked(Vec::len), 2, "completed in its row");
    let done: Vec<u64> =
        message(rows, 1).blocks.with_untracked(|blocks| blocks.iter().map(|b| b.key).collect());
    assert_eq!(done, keys, "and in its blocks");
    assert_eq!(message(rows, 1).entry_id.get_untracked().as_deref(), Some("e-2"));
}

#[test]
fn a_resync_mid_reply_keeps_the_streaming_row_and_takes_the_syncs_text() {
    let rows = rows();
    reconcile(rows, synced_mid_reply(&text("tick-1 ")));
    delta(rows, "m-2", DeltaKind::Text, "tick-2 ");
    let key = rows.with_untracked(|rows| rows[1].key);
    let block = message(rows, 1).blocks.with_untracked(|blocks| blocks[0].key);
    // A resync that agrees leaves the row and its block alone.
    reconcile(rows, synced_mid_reply(&text("tick-1 tick-2 ")));
    assert_eq!(rows.with_untracked(|rows| rows[1].key), key);
    assert_eq!(message(rows, 1).blocks.with_untracked(|blocks| blocks[0].key), block);
    // One further on (deltas this tab held were dropped for it) shows its
    // text, in the same row.
    reconcile(rows, synced_mid_reply(&text("tick-1 tick-2 tick-3 ")));
    assert_eq!(rows.with_untracked(|rows| (rows.len(), rows[1].key)), (2, key));
    let Item::Assistant { blocks, entry_id, .. } = &items(rows)[1] else { panic!("a reply") };
    assert_eq!(
        (blocks.as_slice(), entry_id),
        (&[Block::Text("tick-1 tick-2 tick-3 ".into())][..], &None)
    );
    delta(rows, "m-2", DeltaKind::Text, "tick-4");
    let Item::Assistant { blocks, .. } = &items(rows)[1] else { panic!("a reply") };
    assert_eq!(blocks, &[Block::Text("tick-1 tick-2 tick-3 tick-4".into())]);
}

#[test]
fn a_sync_of_another_transcript_replaces_every_row() {
    let rows = rows();
    reconcile(rows, synced(&[("u-1", "hi"), ("e-1", "hello")]));
    let before: Vec<Row> = rows.get_untracked();
    reconcile(rows, synced(&[("u-7", "other"), ("e-8", "agent")]));
    let after = rows.get_untracked();
    assert!(after.iter().all(|row| before.iter().all(|old| old.key != row.key)));
    let texts: Vec<String> = items(rows)
        .into_iter()
        .map(|item| match item {
            Item::User { text, .. } => text,
            Item::Assistant { blocks, .. } => format!("{blocks:?}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["other", "[Text(\"agent\")]"]);
}

fn texts(rows: Rows) -> Vec<String> {
    items(rows)
        .into_iter()
        .map(|item| match item {
            Item::User { text, .. } => format!("user: {text}"),
            Item::Assistant { blocks, .. } => format!("assistant: {blocks:?}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn lines_of_another_session_with_the_same_ids_are_other_lines() {
    let rows = rows();
    // Three live turns: prompts without entry ids, replies completed as
    // e-2, e-4 and e-6 (ids are numbered per session).
    for (turn, said) in ["one", "two", "three"].iter().enumerate() {
        super::push(rows, Item::User { entry_id: None, text: (*said).to_owned() });
        let message_id = format!("msg-{turn}");
        let entry_id = format!("e-{}", 2 * turn + 2);
        complete(rows, &message_id, &reply(&entry_id, text(&format!("You said: {said}"))));
    }
    // A switch to a fork made at the second prompt: its own e-2, e-3, e-4.
    let fork = vec![
        Item::User { entry_id: Some("e-2".to_owned()), text: "one".to_owned() },
        Item::Assistant {
            message_id: "e-3".to_owned(),
            entry_id: Some("e-3".to_owned()),
            blocks: vec![Block::Text("You said: one".to_owned())],
            aborted: false,
        },
        Item::User { entry_id: Some("e-4".to_owned()), text: "two".to_owned() },
    ];
    reconcile(rows, fork.clone());
    assert_eq!(items(rows), fork, "the fork's lines, each once");
    // Back to the original (e-1 … e-6): its six lines.
    let original: Vec<Item> = ["one", "two", "three"]
        .iter()
        .enumerate()
        .flat_map(|(turn, said)| {
            let (asked, answered) = (format!("e-{}", 2 * turn + 1), format!("e-{}", 2 * turn + 2));
            [
                Item::User { entry_id: Some(asked), text: (*said).to_owned() },
                Item::Assistant {
                    message_id: answered.clone(),
                    entry_id: Some(answered),
                    blocks: vec![Block::Text(format!("You said: {said}"))],
                    aborted: false,
                },
            ]
        })
        .collect();
    reconcile(rows, original.clone());
    assert_eq!(items(rows), original);
    assert_eq!(texts(rows).len(), 6);
}

#[test]
fn a_resync_tells_a_prompt_its_entry_and_settles_its_tool_calls() {
    use shard_protocol::agent::ToolResult;
    use shard_protocol::types::ToolResultContent;
    let rows = rows();
    super::push(rows, Item::User { entry_id: None, text: "run it".to_owned() });
    let key = rows.with_untracked(|rows| rows[0].key);
    let entry = rows.with_untracked(|rows| match &rows[0].kind {
        RowKind::User { entry_id, .. } => entry_id.clone(),
        _ => panic!("a user row"),
    });
    let (has_entry, entry_runs) = watch(move || usize::from(entry.with(Option::is_some)));
    let args = serde_json::json!({"command": "echo hi"});
    let call = |id: &str, result: Option<ToolResult>| Item::Tool {
        tool_call_id: id.to_owned(),
        name: "bash".to_owned(),
        args: args.clone(),
        read_only: None,
        start: None,
        result,
    };
    let result = |text: &str, exit_code: Option<i64>| ToolResult {
        tool_call_id: "call-0".to_owned(),
        content: ToolResultContent::Text { text: text.to_owned() },
        is_error: false,
        exit_code,
        duration_ms: None,
        render: None,
    };
    // Live: one call ran (its result with an exit code), one never finished.
    super::push(rows, call("call-0", Some(result("hi", Some(0)))));
    super::push(rows, call("call-1", None));
    let interrupted = ToolResult {
        tool_call_id: "call-1".to_owned(),
        content: ToolResultContent::Error { message: "interrupted".to_owned() },
        is_error: true,
        exit_code: None,
        duration_ms: None,
        render: None,
    };
    reconcile(
        rows,
        vec![
            Item::User { entry_id: Some("e-1".to_owned()), text: "run it".to_owned() },
            call("call-0", Some(result("hi", None))),
            call("call-1", Some(interrupted.clone())),
        ],
    );
    assert_eq!(rows.with_untracked(|rows| rows[0].key), key, "the same row");
    assert_eq!(has_entry.get(), 1, "its fork button follows the entry");
    assert_eq!(entry_runs.load(Ordering::Relaxed), 2);
    let shown = items(rows);
    assert_eq!(
        shown[0],
        Item::User { entry_id: Some("e-1".to_owned()), text: "run it".to_owned() }
    );
    assert_eq!(
        shown[1],
        call("call-0", Some(result("hi", Some(0)))),
        "what the live result said stays"
    );
    assert_eq!(shown[2], call("call-1", Some(interrupted)), "the log's result");
    // The same call id with other arguments (another session's) is another call.
    let elsewhere = Item::Tool {
        tool_call_id: "call-0".to_owned(),
        name: "bash".to_owned(),
        args: serde_json::json!({"command": "ls"}),
        read_only: None,
        start: None,
        result: None,
    };
    reconcile(rows, vec![elsewhere.clone()]);
    assert_eq!(items(rows), [elsewhere]);
}

#[test]
fn a_user_message_tells_this_tabs_prompt_its_entry_and_shows_anothers() {
    let rows = rows();
    let prompt = |text: &str| super::push(rows, Item::User { entry_id: None, text: text.into() });
    // This tab sent the same words twice: the older takes the first entry.
    prompt("again");
    prompt("again");
    let key = rows.with_untracked(|rows| rows[0].key);
    super::said(rows, "e-1", "again");
    let expected = |pairs: &[(Option<&str>, &str)]| -> Vec<Item> {
        pairs
            .iter()
            .map(|(entry, text)| Item::User {
                entry_id: entry.map(str::to_owned),
                text: (*text).to_owned(),
            })
            .collect()
    };
    assert_eq!(items(rows), expected(&[(Some("e-1"), "again"), (None, "again")]));
    assert_eq!(rows.with_untracked(|rows| rows[0].key), key, "the same row, not a new one");
    // Told twice (an event replayed after a sync): nothing changes.
    super::said(rows, "e-1", "again");
    assert_eq!(items(rows), expected(&[(Some("e-1"), "again"), (None, "again")]));
    // Another tab's prompt joins the transcript with its entry.
    super::said(rows, "e-3", "from elsewhere");
    assert_eq!(
        items(rows),
        expected(&[(Some("e-1"), "again"), (None, "again"), (Some("e-3"), "from elsewhere")])
    );
    super::said(rows, "e-5", "again");
    assert_eq!(
        items(rows),
        expected(&[
            (Some("e-1"), "again"),
            (Some("e-5"), "again"),
            (Some("e-3"), "from elsewhere")
        ])
    );
}
