//! The conversation of one session: its entries in memory, the log writer, and
//! what is derived from them. The *live window* is what the model sees and what
//! `sync` shows: the latest compaction summary (if any) followed by every
//! message since that compaction's first kept entry.
//!
//! Compaction here is deterministic (no model call): the summarized range is
//! replaced by an extractive summary naming each request, tool call and answer,
//! and the exact messages stay in the log, where `recall` pages through them.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use shard_protocol::agent::{ForkOrigin, ForkResult, SessionSummary, StreamingBehavior};
use shard_protocol::diagnostic;
use shard_protocol::types::{ContentBlock, Image, Message, Role, ToolResultContent};

use crate::session_log::{
    self, Entry, EntryBody, FORMAT_VERSION, SessionError, Writer, find_session, read_log,
};
use crate::util::{new_id, now_ms, truncate_chars};

/// At most this many sessions in `session_op list`. Each is a log read
/// whole; a lineage forked more often than this is an accident, and a list
/// a person cannot scan anyway.
const MAX_LISTED_SESSIONS: usize = 256;

/// Characters of a session's title (its first line), `…` included.
const TITLE_CHARS: usize = 80;

/// Rough tokens of a text: four bytes a token, the usual estimate for English
/// and code. Only used to decide when to compact, never billed.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

pub struct Conversation {
    pub session_id: String,
    pub dir: PathBuf,
    pub cwd: String,
    entries: Vec<Entry>,
    writer: Writer,
    next_seq: u64,
}

/// A planned compaction: everything before `cut` in the window is summarized.
pub struct CompactionPlan {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub message_range: (String, String),
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// A steer or follow-up the log holds as accepted and not yet delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Undelivered {
    /// Its `queued` entry.
    pub entry_id: String,
    pub text: String,
    pub images: Vec<Image>,
    pub behavior: StreamingBehavior,
    pub pinned: bool,
}

/// The mode, model and reasoning level recorded in the log.
#[derive(Debug, Clone, Default)]
pub struct RecordedSettings {
    pub mode: Option<String>,
    pub model: Option<String>,
    pub reasoning_level: Option<String>,
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

    async fn start(
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

    fn position(&self, id: &str) -> Option<usize> {
        self.entries.iter().position(|entry| entry.id == id)
    }

    /// The live window as of entry position `end` (exclusive).
    fn window_until(&self, end: usize) -> Vec<&Entry> {
        window_of(&self.entries[..end])
    }

    /// The live window now.
    pub fn window(&self) -> Vec<&Entry> {
        window_of(&self.entries)
    }

    /// The index of the latest compaction, if any.
    pub fn compaction_index(&self) -> Option<u64> {
        compaction_index_of(&self.entries)
    }

    /// The live window as wire messages (for `sync`).
    pub fn live_messages(&self) -> Vec<Message> {
        live_messages_of(&self.entries)
    }

    pub fn window_tokens(&self) -> u64 {
        self.window().into_iter().map(entry_tokens).sum()
    }

    /// Plans a compaction that keeps at least `keep_recent_tokens` of the most
    /// recent conversation, cutting only before a user prompt so that no tool
    /// call is separated from its result. `None`: no safe cut.
    pub fn plan_compaction(&self, keep_recent_tokens: u64) -> Option<CompactionPlan> {
        let window = self.window();
        let tokens_before: u64 = window.iter().map(|entry| entry_tokens(entry)).sum();
        let is_prompt = |entry: &&Entry| matches!(entry.body, EntryBody::User { .. });
        // Walk back from the newest entry until enough is kept.
        let mut kept = 0;
        let mut reached = None;
        for (at, entry) in window.iter().enumerate().rev() {
            kept += entry_tokens(entry);
            if kept >= keep_recent_tokens {
                reached = Some(at);
                break;
            }
        }
        let reached = reached?;
        // The nearest prompt at or before that point, else the nearest after
        // it; something must stay on each side of the cut.
        let cut = (1..=reached)
            .rev()
            .find(|&at| is_prompt(&window[at]))
            .or_else(|| (reached + 1..window.len()).find(|&at| is_prompt(&window[at])))?;
        let summarized = &window[..cut];
        if !summarized.iter().any(|entry| is_message(entry)) {
            return None;
        }
        let first = match &summarized[0].body {
            EntryBody::Compaction { message_range, .. } => message_range.0.clone(),
            _ => summarized[0].id.clone(),
        };
        let last = summarized.last()?.id.clone();
        let summary = summarize(summarized);
        let tokens_after = estimate_tokens(&summary)
            + window[cut..].iter().map(|entry| entry_tokens(entry)).sum::<u64>();
        Some(CompactionPlan {
            summary,
            first_kept_entry_id: window[cut].id.clone(),
            message_range: (first, last),
            tokens_before,
            tokens_after,
        })
    }

    /// The exact messages a compaction summarized, `limit` at a time.
    pub fn recall(&self, index: u64, offset: usize, limit: usize) -> Option<(Vec<&Entry>, usize)> {
        let (first, last) = self.entries.iter().find_map(|entry| match &entry.body {
            EntryBody::Compaction { index: found, message_range, .. } if *found == index => {
                Some(message_range.clone())
            }
            _ => None,
        })?;
        let (from, to) = (self.position(&first)?, self.position(&last)?);
        let range: Vec<&Entry> =
            self.entries[from..=to].iter().filter(|entry| is_message(entry)).collect();
        let total = range.len();
        Some((range.into_iter().skip(offset).take(limit).collect(), total))
    }

    pub fn has_entry(&self, id: &str) -> bool {
        self.position(id).is_some()
    }

    /// Materializes the live window as it stood at `from_entry_id` into a new
    /// session under this one's `forks/`. This session is not touched.
    pub async fn fork(&self, from_entry_id: &str) -> Result<ForkResult, SessionError> {
        let at = self
            .position(from_entry_id)
            .ok_or_else(|| SessionError::NotFound(from_entry_id.to_owned()))?;
        let fork_id = format!("fork-{}", new_id());
        let session_id = format!("sess-{}", new_id());
        let settings = settings_of(&self.entries[..=at]);
        let mut rest = vec![EntryBody::Fork {
            artifact_kind: "fork".into(),
            fork_id: fork_id.clone(),
            source_session_id: self.session_id.clone(),
            source_entry_id: from_entry_id.to_owned(),
        }];
        for entry in &self.entries[..=at] {
            if let EntryBody::Grant { .. } = entry.body {
                rest.push(entry.body.clone());
            }
        }
        for entry in self.window_until(at + 1) {
            rest.push(match &entry.body {
                EntryBody::Compaction { summary, .. } => EntryBody::User {
                    text: summary.clone(),
                    images: Vec::new(),
                    queued_entry_id: None,
                },
                // What this message delivered was queued in the source.
                EntryBody::User { text, images, .. } => EntryBody::User {
                    text: text.clone(),
                    images: images.clone(),
                    queued_entry_id: None,
                },
                other => other.clone(),
            });
        }
        let dir = self.dir.join("forks").join(&session_id);
        let fork = Self::start(
            dir,
            session_id.clone(),
            &self.cwd,
            settings.model.as_deref().unwrap_or("demo"),
            settings.mode.as_deref().unwrap_or("build"),
            rest,
        )
        .await?;
        let head_entry_id = fork.head_entry_id().unwrap_or_default().to_owned();
        Ok(ForkResult { fork_id, session_id, head_entry_id })
    }

    /// The whole lineage (`session_op list`): the root session above this
    /// one and every fork below the root at any depth, oldest first; at most
    /// [`MAX_LISTED_SESSIONS`], this one always among them. A log that
    /// cannot be read is left out.
    pub fn list_sessions(&self) -> Vec<SessionSummary> {
        // This one from memory: the file may not hold the running turn yet.
        let mut sessions = vec![self.summary()];
        let mut dirs = VecDeque::from([lineage_root(&self.dir)]);
        // Breadth-first, so a bushy lineage shows its older generations.
        while let Some(dir) = dirs.pop_front() {
            if sessions.len() >= MAX_LISTED_SESSIONS {
                break;
            }
            if dir.file_name() != Some(self.session_id.as_ref()) {
                let read = read_log(&dir.join("session.jsonl"));
                if let Some(summary) = read.ok().as_deref().and_then(summary_of) {
                    sessions.push(summary);
                }
            }
            if let Ok(forks) = std::fs::read_dir(dir.join("forks")) {
                let room = MAX_LISTED_SESSIONS.saturating_sub(sessions.len() + dirs.len());
                dirs.extend(forks.flatten().map(|fork| fork.path()).take(room));
            }
        }
        sessions.sort_by(|a, b| (a.created_at, &a.session_id).cmp(&(b.created_at, &b.session_id)));
        sessions
    }

    fn summary(&self) -> SessionSummary {
        summary_of(&self.entries).unwrap_or_else(|| SessionSummary {
            session_id: self.session_id.clone(),
            created_at: 0,
            updated_at: None,
            entries: 0,
            head_entry_id: None,
            title: None,
            forked_from: None,
        })
    }
}

/// The session at the top of `dir`'s lineage. A fork lives at
/// `<source>/forks/<session_id>/`, so each step up is two folders, taken
/// while the folder above is a session.
pub(crate) fn lineage_root(dir: &Path) -> PathBuf {
    let mut root = dir;
    for _ in 0..MAX_LISTED_SESSIONS {
        let source = root
            .parent()
            .filter(|forks| forks.file_name() == Some("forks".as_ref()))
            .and_then(Path::parent)
            .filter(|source| source.join("session.jsonl").is_file());
        match source {
            Some(source) => root = source,
            None => break,
        }
    }
    root.to_owned()
}

/// The first line of the first user message, made safe to show (it is what
/// a person typed, or a model wrote for a subagent), at most [`TITLE_CHARS`].
fn title_of(entries: &[Entry]) -> Option<String> {
    let text = entries.iter().find_map(|entry| match &entry.body {
        EntryBody::User { text, .. } => Some(text),
        _ => None,
    })?;
    let shown = diagnostic(text);
    let line = shown.lines().map(str::trim).find(|line| !line.is_empty())?;
    if line.chars().count() > TITLE_CHARS {
        Some(truncate_chars(line, TITLE_CHARS - 1))
    } else {
        Some(line.to_owned())
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

/// The `queued` entries of a log that no `user` entry delivered and no
/// `unqueued` entry took back, oldest first.
pub fn undelivered_of(entries: &[Entry]) -> Vec<Undelivered> {
    let settled: HashSet<&str> = entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::User { queued_entry_id: Some(id), .. }
            | EntryBody::Unqueued { queued_entry_id: id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    entries
        .iter()
        .filter(|entry| !settled.contains(entry.id.as_str()))
        .filter_map(|entry| match &entry.body {
            EntryBody::Queued { text, images, streaming_behavior, pinned } => Some(Undelivered {
                entry_id: entry.id.clone(),
                text: text.clone(),
                images: images.clone(),
                behavior: *streaming_behavior,
                pinned: *pinned,
            }),
            _ => None,
        })
        .collect()
}

/// The mode, model and reasoning level a log records: the header's, then
/// every later settings change.
pub fn settings_of(entries: &[Entry]) -> RecordedSettings {
    let mut settings = RecordedSettings::default();
    for entry in entries {
        settings.apply(entry);
    }
    settings
}

impl RecordedSettings {
    /// Folds in one entry: the header sets, settings changes override.
    pub fn apply(&mut self, entry: &Entry) {
        match &entry.body {
            EntryBody::Header { model, mode, .. } => {
                self.model = Some(model.clone());
                self.mode = Some(mode.clone());
            }
            EntryBody::Settings { mode, model, reasoning_level } => {
                if mode.is_some() {
                    self.mode.clone_from(mode);
                }
                if model.is_some() {
                    self.model.clone_from(model);
                }
                if reasoning_level.is_some() {
                    self.reasoning_level.clone_from(reasoning_level);
                }
            }
            _ => {}
        }
    }
}

fn summary_of(entries: &[Entry]) -> Option<SessionSummary> {
    let Some(Entry { body: EntryBody::Header { session_id, created_at, .. }, .. }) =
        entries.first()
    else {
        return None;
    };
    let forked_from = entries.iter().find_map(|entry| match &entry.body {
        EntryBody::Fork { source_session_id, source_entry_id, .. } => Some(ForkOrigin {
            session_id: source_session_id.clone(),
            entry_id: source_entry_id.clone(),
        }),
        _ => None,
    });
    Some(SessionSummary {
        session_id: session_id.clone(),
        created_at: *created_at,
        updated_at: entries.iter().map(|entry| entry.ts).max(),
        entries: entries.len() as u64,
        head_entry_id: entries.last().map(|entry| entry.id.clone()),
        title: title_of(entries),
        forked_from,
    })
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

fn summarize(entries: &[&Entry]) -> String {
    const LINE: usize = 240;
    let mut lines = Vec::new();
    for entry in entries {
        match &entry.body {
            EntryBody::Compaction { summary, .. } => lines.push(truncate_chars(summary, 2000)),
            EntryBody::User { text, .. } => {
                lines.push(format!("- user asked: {}", truncate_chars(text, LINE)))
            }
            EntryBody::Assistant { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            lines.push(format!("- assistant said: {}", truncate_chars(text, LINE)))
                        }
                        ContentBlock::ToolCall { name, args, .. } => lines.push(format!(
                            "- assistant called {name} {}",
                            truncate_chars(
                                &serde_json::Value::Object(args.clone()).to_string(),
                                LINE
                            )
                        )),
                        _ => {}
                    }
                }
            }
            EntryBody::ToolResult { tool_name, is_error, exit_code, .. } => {
                let outcome = match (is_error, exit_code) {
                    (_, Some(code)) => format!("exit code {code}"),
                    (true, None) => "error".to_owned(),
                    (false, None) => "ok".to_owned(),
                };
                lines.push(format!("- {tool_name} finished: {outcome}"));
            }
            _ => {}
        }
    }
    lines.join("\n")
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
    Some(Message { id: entry.id.clone(), role, content })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Entry {
        Entry {
            id: new_id(),
            ts: 1,
            body: EntryBody::User {
                text: text.to_owned(),
                images: Vec::new(),
                queued_entry_id: None,
            },
        }
    }

    #[test]
    fn a_title_is_the_first_line_of_the_first_user_message() {
        let entries = [user("\n  Fix the build  \r\nthen the tests"), user("later")];
        assert_eq!(title_of(&entries).as_deref(), Some("Fix the build"));
        assert_eq!(title_of(&[]), None);
    }

    #[test]
    fn a_title_is_safe_to_show_and_at_most_80_characters() {
        let title = title_of(&[user("\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{202e}alert")]);
        assert_eq!(title.as_deref(), Some("red\u{fffd}alert"));
        let exact = "é".repeat(TITLE_CHARS);
        assert_eq!(title_of(&[user(&exact)]), Some(exact));
        let long = title_of(&[user(&"é".repeat(TITLE_CHARS + 1))]).expect("title");
        assert_eq!(long.chars().count(), TITLE_CHARS);
        assert!(long.ends_with("é…"));
    }

    #[test]
    fn the_lineage_root_is_found_above_nested_forks() {
        let home = tempfile::TempDir::new().expect("home");
        let root = home.path().join("sess-root");
        let child = root.join("forks/sess-child");
        let grandchild = child.join("forks/sess-grandchild");
        for dir in [&root, &child, &grandchild] {
            std::fs::create_dir_all(dir).expect("dir");
            std::fs::write(dir.join("session.jsonl"), "{}\n").expect("log");
        }
        assert_eq!(lineage_root(&grandchild), root);
        assert_eq!(lineage_root(&root), root);
    }
}
