//! The hub's record of a node's agent's session: what the runtime seam asks
//! of every runtime (`runtime::record`), written here from what the node
//! tells, so that the hub's own `sync`, search and usage read it as they
//! read any session's. The node keeps the session itself; this is a copy,
//! under the same entry ids, so that anything a hub client names by entry
//! (a fork, a recall) means the same on the node.
//!
//! A `sync` from the node replaces the copy whole (written beside it, then
//! renamed over it, so that a reader sees one or the other); each recorded event after it adds its entry. Two
//! things are not copied: a compaction (its event carries no summary, so
//! the copy keeps the messages it summarized, and a hub client sees more
//! history than the node's own window), and a reply still streaming (its
//! `message_complete` records it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use shard_platform::session_log::{Entry, EntryBody, Writer, find_session, read_log};
use shard_protocol::ServerMessage;
use shard_protocol::agent::Sync;
use shard_protocol::types::{ContentBlock, Message, Role};

/// The most tool calls whose names are remembered for their results.
const TOOL_NAMES: usize = 4096;

pub struct Mirror {
    path: PathBuf,
    writer: Option<Writer>,
    /// The name of each tool call seen, for its result's entry.
    tools: HashMap<String, String>,
    /// The model the copy names on the replies it records.
    model: String,
}

impl Mirror {
    /// The copy `session_id` of `home` (the registry wrote its header).
    pub fn open(home: &Path, session_id: &str) -> std::io::Result<Self> {
        let dir = find_session(home, session_id).map_err(std::io::Error::other)?;
        Ok(Self {
            path: dir.join("session.jsonl"),
            writer: None,
            tools: HashMap::new(),
            model: String::new(),
        })
    }

    /// The node's whole live window, as its `sync` carries it, becomes the
    /// copy: nothing it held before stays.
    pub async fn replace(&mut self, sync: &Sync, model: Option<&str>) -> std::io::Result<()> {
        self.writer = None;
        let path = self.path.clone();
        let header = tokio::task::spawn_blocking(move || read_log(&path))
            .await
            .map_err(std::io::Error::other)?
            .map_err(std::io::Error::other)?
            .into_iter()
            .find(|entry| matches!(entry.body, EntryBody::Header { .. }))
            .ok_or_else(|| std::io::Error::other("the copy has no header"))?;
        let Entry { id, ts, body: EntryBody::Header { version, session_id, cwd, created_at, .. } } =
            header
        else {
            unreachable!("found a header")
        };
        if let Some(model) = model {
            model.clone_into(&mut self.model);
        }
        let header = EntryBody::Header {
            version,
            session_id,
            cwd,
            created_at,
            model: self.model.clone(),
            mode: sync.mode.clone(),
        };
        let mut lines = line(&Entry { id, ts, body: header })?;
        let settled = sync.live_window.messages.iter().filter(|message| !message.streaming);
        for message in settled {
            if let Some(body) = self.entry_of(message) {
                lines.extend(line(&Entry { id: message.id.clone(), ts: now(), body })?);
            }
        }
        let path = self.path.clone();
        // Atomically: a reader sees the old copy or the new one, never half.
        tokio::task::spawn_blocking(move || crate::home::write_private(&path, &lines))
            .await
            .map_err(std::io::Error::other)??;
        Ok(())
    }

    /// Records what `message` adds to the session, if anything.
    pub async fn observe(&mut self, message: &ServerMessage) -> std::io::Result<()> {
        let (id, body) = match message {
            ServerMessage::UserMessage(said) => {
                let text = said.text.clone();
                let body = EntryBody::User { text, images: Vec::new(), queued_entry_id: None };
                (said.entry_id.clone(), body)
            }
            ServerMessage::MessageComplete(complete) => {
                let Some(body) = self.entry_of(&complete.message) else { return Ok(()) };
                (complete.message.id.clone(), body)
            }
            ServerMessage::ToolCall(call) => {
                self.remember(&call.tool_call_id, &call.name);
                return Ok(());
            }
            ServerMessage::ToolResult(result) => {
                let body = EntryBody::ToolResult {
                    tool_call_id: result.tool_call_id.clone(),
                    tool_name: self.tools.remove(&result.tool_call_id).unwrap_or_default(),
                    content: result.content.clone(),
                    is_error: result.is_error,
                    exit_code: result.exit_code,
                };
                (format!("r-{}", crate::id::random_hex()), body)
            }
            ServerMessage::ModeChanged(changed) => {
                let mode = Some(changed.mode.clone());
                (settings_id(), EntryBody::Settings { mode, model: None, reasoning_level: None })
            }
            ServerMessage::ModelChanged(changed) => {
                changed.active.id.clone_into(&mut self.model);
                let model = Some(changed.active.id.clone());
                (settings_id(), EntryBody::Settings { mode: None, model, reasoning_level: None })
            }
            _ => return Ok(()),
        };
        self.append(Entry { id, ts: now(), body }).await
    }

    async fn append(&mut self, entry: Entry) -> std::io::Result<()> {
        if self.writer.is_none() {
            self.writer = Some(Writer::open(&self.path).await?);
        }
        match &self.writer {
            Some(writer) => writer.append(&entry).await,
            None => Ok(()),
        }
    }

    /// The entry a message of the window is recorded as.
    fn entry_of(&mut self, message: &Message) -> Option<EntryBody> {
        match message.role {
            Role::Assistant => {
                for block in &message.content {
                    if let ContentBlock::ToolCall { id, name, .. } = block {
                        self.remember(id, name);
                    }
                }
                Some(EntryBody::Assistant {
                    content: message.content.clone(),
                    model: self.model.clone(),
                    thinking_signatures: Vec::new(),
                    usage: None,
                    aborted: message.aborted,
                })
            }
            Role::User => match message.content.as_slice() {
                [ContentBlock::ToolResult { tool_call_id, content, is_error }] => {
                    Some(EntryBody::ToolResult {
                        tool_call_id: tool_call_id.clone(),
                        tool_name: self.tools.remove(tool_call_id).unwrap_or_default(),
                        content: content.clone(),
                        is_error: is_error.unwrap_or(false),
                        exit_code: None,
                    })
                }
                blocks => {
                    let text = blocks.iter().filter_map(|block| match block {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    });
                    let text = text.collect::<Vec<_>>().join("\n");
                    Some(EntryBody::User { text, images: Vec::new(), queued_entry_id: None })
                }
            },
            _ => None,
        }
    }

    fn remember(&mut self, tool_call_id: &str, name: &str) {
        if self.tools.len() >= TOOL_NAMES {
            self.tools.clear();
        }
        self.tools.insert(tool_call_id.to_owned(), name.to_owned());
    }
}

fn now() -> u64 {
    crate::clock::now_ms()
}

fn settings_id() -> String {
    format!("s-{}", crate::id::random_hex())
}

fn line(entry: &Entry) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}
