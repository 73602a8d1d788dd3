//! The [`Conversation`] type: one session's entries in memory and the log
//! writer behind them. Opening a session (new or resumed, its dangling tool
//! calls closed), appending and flushing, and reading back what the log
//! records; the other modules of `conversation` derive the rest from the
//! entries.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use shard_protocol::diagnostic;
use shard_protocol::types::{ContentBlock, ToolResultContent};

use super::recorded::{RecordedSettings, Undelivered, settings_of, undelivered_of};
use crate::session_log::{
    self, Entry, EntryBody, FORMAT_VERSION, SessionError, Writer, find_session, read_log,
};
use crate::util::{new_id, now_ms};

pub struct Conversation {
    pub session_id: String,
    pub dir: PathBuf,
    pub cwd: String,
    entries: Vec<Entry>,
    writer: Writer,
    next_seq: u64,
}

impl Conversation {
    /// Starts a new session under `home`.
    pub async fn create(
        home: &Path,
        cwd: &str,
        model: &str,
        mode: &str,
    ) -> Result<Self, SessionError> {
        let session_id = format!("sess-{}", new_id());
        let dir = session_log::sessions_root(home).join(&session_id);
        Self::start(dir, session_id, cwd, model, mode, Vec::new()).await
    }

    pub(super) async fn start(
        dir: PathBuf,
        session_id: String,
        cwd: &str,
        model: &str,
        mode: &str,
        rest: Vec<EntryBody>,
    ) -> Result<Self, SessionError> {
        create_private_dir(&dir)?;
        let writer = Writer::open(&dir.join("session.jsonl")).await?;
        let mut conversation = Self {
            session_id: session_id.clone(),
            dir,
            cwd: cwd.to_owned(),
            entries: Vec::new(),
            writer,
            next_seq: 0,
        };
        let now = now_ms();
        conversation
            .push(EntryBody::Header {
                version: FORMAT_VERSION,
                session_id,
                cwd: cwd.to_owned(),
                created_at: now,
                model: model.to_owned(),
                mode: mode.to_owned(),
            })
            .await?;
        for body in rest {
            conversation.push(body).await?;
        }
        conversation.flush().await?;
        Ok(conversation)
    }

    /// Reopens an existing session for appending.
    pub async fn resume(home: &Path, session_id: &str) -> Result<Self, SessionError> {
        let dir = find_session(home, session_id)?;
        let path = dir.join("session.jsonl");
        let entries = read_log(&path)?;
        let Some(Entry { body: EntryBody::Header { session_id: recorded, cwd, .. }, .. }) =
            entries.first()
        else {
            return Err(SessionError::Corrupt { path, why: "no header".into() });
        };
        if recorded != session_id {
            return Err(SessionError::Corrupt {
                path,
                why: format!("the header names session `{recorded}`"),
            });
        }
        let cwd = cwd.clone();
        let next_seq = entries
            .iter()
            .filter_map(|entry| entry.id.strip_prefix("e-")?.parse::<u64>().ok())
            .max()
            .map_or(0, |max| max + 1);
        create_private_dir(&dir)?;
        let writer = Writer::open(&path).await?;
        let mut conversation =
            Self { session_id: session_id.to_owned(), dir, cwd, entries, writer, next_seq };
        conversation.close_dangling_tool_calls().await?;
        Ok(conversation)
    }

    /// Appends an entry in memory and queues it for the log.
    pub async fn push(&mut self, body: EntryBody) -> std::io::Result<&Entry> {
        let entry = Entry { id: format!("e-{}", self.next_seq), ts: now_ms(), body };
        self.next_seq += 1;
        self.writer.append(&entry).await?;
        self.entries.push(entry);
        Ok(self.entries.last().unwrap_or_else(|| unreachable!("just pushed")))
    }

    /// Makes every queued entry durable (a turn boundary).
    pub async fn flush(&self) -> std::io::Result<()> {
        self.writer.flush().await
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn head_entry_id(&self) -> Option<&str> {
        self.entries.last().map(|entry| entry.id.as_str())
    }

    /// A crash between an assistant's tool calls and their results leaves calls
    /// without results, which no provider accepts. Close them (appending, never
    /// rewriting) so the conversation can go on.
    async fn close_dangling_tool_calls(&mut self) -> std::io::Result<()> {
        let answered: HashSet<String> = self
            .entries
            .iter()
            .filter_map(|entry| match &entry.body {
                EntryBody::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let dangling: Vec<(String, String)> = self
            .entries
            .iter()
            .filter_map(|entry| match &entry.body {
                EntryBody::Assistant { content, .. } => Some(content),
                _ => None,
            })
            .flatten()
            .filter_map(|block| match block {
                ContentBlock::ToolCall { id, name, .. } if !answered.contains(id) => {
                    Some((id.clone(), name.clone()))
                }
                _ => None,
            })
            .collect();
        if dangling.is_empty() {
            return Ok(());
        }
        for (tool_call_id, tool_name) in dangling {
            self.push(EntryBody::ToolResult {
                tool_call_id,
                tool_name,
                content: ToolResultContent::Error {
                    message: diagnostic("interrupted: the agent stopped before this tool finished"),
                },
                is_error: true,
                exit_code: None,
            })
            .await?;
        }
        self.flush().await
    }

    /// Steers and follow-ups accepted but neither delivered nor taken back,
    /// oldest first: what a resumed agent still owes.
    pub fn undelivered(&self) -> Vec<Undelivered> {
        undelivered_of(&self.entries)
    }

    /// Mode, model and reasoning level as last recorded.
    pub fn settings(&self) -> RecordedSettings {
        settings_of(&self.entries)
    }

    /// `(tool_name, fingerprint)` of every `allow_always` grant.
    pub fn grants(&self) -> HashSet<(String, String)> {
        self.entries
            .iter()
            .filter_map(|entry| match &entry.body {
                EntryBody::Grant { tool_name, fingerprint } => {
                    Some((tool_name.clone(), fingerprint.clone()))
                }
                _ => None,
            })
            .collect()
    }

    pub(super) fn position(&self, id: &str) -> Option<usize> {
        self.entries.iter().position(|entry| entry.id == id)
    }

    pub fn has_entry(&self, id: &str) -> bool {
        self.position(id).is_some()
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    crate::private::tighten(dir, 0o700)
}
