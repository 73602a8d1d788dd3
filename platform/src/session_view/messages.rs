//! What a search index may read of the session logs: every log on disk
//! with the lineage it belongs to, and the user and assistant messages of
//! one log from a byte offset on, so that an index reads each line once
//! however often it catches up. The log's format stays in this crate.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use shard_protocol::types::{ContentBlock, Role};

use crate::session_log::{Entry, EntryBody, SessionError, find_session, sessions_root};

/// One user or assistant message of a session log: its entry, who said
/// it, when, and its text. An assistant's text is its text blocks; its
/// thinking, tool calls and their results are not what a person looks for
/// in a conversation (and a file a tool read is not the conversation).
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedMessage {
    pub entry_id: String,
    pub role: Role,
    pub text: String,
    /// Milliseconds since the Unix epoch.
    pub at: u64,
}

/// What [`read_messages`] found.
#[derive(Debug, Default, PartialEq)]
pub struct MessagesRead {
    pub messages: Vec<LoggedMessage>,
    /// Where the next read starts: the end of the last whole line read.
    pub offset: u64,
    /// Whole lines were left unread: the budget was spent first.
    pub more: bool,
    /// The log is shorter than the offset asked for, so it is not the file
    /// read before: read it again from the start.
    pub shrunk: bool,
}

/// The user and assistant messages of `session_id`'s log from byte
/// `offset` on (0, or an offset a read returned), reading whole lines
/// until about `budget` bytes are read. A line the writer has not finished
/// is left for the next read; a line that is not an entry is passed over
/// (the agent that owns the log reports that, not a reader).
pub fn read_messages(
    home: &Path,
    session_id: &str,
    offset: u64,
    budget: u64,
) -> Result<MessagesRead, SessionError> {
    let dir = find_session(home, session_id)?;
    read_messages_at(&dir.join("session.jsonl"), offset, budget)
}

fn read_messages_at(path: &Path, offset: u64, budget: u64) -> Result<MessagesRead, SessionError> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len < offset {
        return Ok(MessagesRead { shrunk: true, more: true, ..MessagesRead::default() });
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut reader = BufReader::new(file);
    let mut read = MessagesRead { offset, ..MessagesRead::default() };
    let mut line = Vec::new();
    loop {
        if read.offset - offset >= budget {
            read.more = read.offset < len;
            break;
        }
        line.clear();
        let count = reader.read_until(b'\n', &mut line)?;
        if count == 0 || line.last() != Some(&b'\n') {
            break;
        }
        read.offset += count as u64;
        if let Some(message) = logged_message(&line[..count - 1]) {
            read.messages.push(message);
        }
    }
    Ok(read)
}

/// The message a log line holds, if it is a user or assistant entry with
/// text. Only the entry's kind is read of any other line.
fn logged_message(line: &[u8]) -> Option<LoggedMessage> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
    }
    let kind: Kind = serde_json::from_slice(line).ok()?;
    if !matches!(&*kind.kind, "user" | "assistant") {
        return None;
    }
    let entry: Entry = serde_json::from_slice(line).ok()?;
    let (role, text) = match entry.body {
        EntryBody::User { text, .. } => (Role::User, text),
        EntryBody::Assistant { content, .. } => {
            let texts: Vec<String> = content
                .into_iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } => Some(text),
                    _ => None,
                })
                .collect();
            (Role::Assistant, texts.join("\n\n"))
        }
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(LoggedMessage {
        entry_id: entry.id,
        role,
        text,
        at: entry.ts,
    })
}

/// A session log on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub session_id: String,
    /// The first session of its lineage (itself, unless it is a fork):
    /// what `session.activate` may switch between.
    pub lineage: String,
}

/// What [`stored_sessions`] found.
#[derive(Debug, Default)]
pub struct StoredSessions {
    pub sessions: Vec<StoredSession>,
    /// The walk stopped at its limit: sessions not listed may exist.
    pub partial: bool,
}

/// Every session log under `home`, first sessions and their forks at any
/// depth, each with its lineage; at most `limit`.
pub fn stored_sessions(home: &Path, limit: usize) -> StoredSessions {
    let mut found = StoredSessions::default();
    let Ok(roots) = std::fs::read_dir(sessions_root(home)) else { return found };
    for root in roots.flatten() {
        let path = root.path();
        let Some(lineage) = session_dir_id(&path) else { continue };
        // Depth first through `forks/` folders; bounded by what exists.
        let mut stack = vec![path];
        while let Some(dir) = stack.pop() {
            let Some(session_id) = session_dir_id(&dir) else { continue };
            if found.sessions.len() >= limit {
                found.partial = true;
                return found;
            }
            found.sessions.push(StoredSession { session_id, lineage: lineage.clone() });
            if let Ok(forks) = std::fs::read_dir(dir.join("forks")) {
                stack.extend(forks.flatten().map(|fork| fork.path()));
            }
        }
    }
    found
}

/// The session id of a session's folder: its name, when it holds a log.
fn session_dir_id(dir: &Path) -> Option<String> {
    let name = dir.file_name()?.to_str()?;
    (name.starts_with("sess-") && dir.join("session.jsonl").is_file()).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session_log::FORMAT_VERSION;

    fn line(id: &str, ts: u64, body: EntryBody) -> String {
        let entry = Entry { id: id.to_owned(), ts, body };
        format!("{}\n", serde_json::to_string(&entry).expect("json"))
    }

    fn user(id: &str, text: &str) -> String {
        line(
            id,
            10,
            EntryBody::User { text: text.to_owned(), images: Vec::new(), queued_entry_id: None },
        )
    }

    fn header(session_id: &str) -> String {
        line(
            "e-0",
            1,
            EntryBody::Header {
                version: FORMAT_VERSION,
                session_id: session_id.to_owned(),
                cwd: "/".into(),
                created_at: 1,
                model: "demo".into(),
                mode: "build".into(),
            },
        )
    }

    #[test]
    fn messages_are_read_once_from_an_offset_and_a_torn_line_waits() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("session.jsonl");
        let assistant = line(
            "e-2",
            20,
            EntryBody::Assistant {
                content: vec![
                    ContentBlock::Thinking { text: "hidden".into() },
                    ContentBlock::Text { text: "one".into() },
                    ContentBlock::ToolCall {
                        id: "c-1".into(),
                        name: "bash".into(),
                        args: serde_json::Map::new(),
                    },
                    ContentBlock::Text { text: "two".into() },
                ],
                model: "demo".into(),
                thinking_signatures: Vec::new(),
                usage: None,
                aborted: false,
            },
        );
        let torn = user("e-3", "not yet");
        let torn = &torn[..torn.len() / 2];
        let text = format!("{}{}{}{torn}", header("sess-1"), user("e-1", "hello"), assistant);
        std::fs::write(&path, &text).expect("write");

        let read = read_messages_at(&path, 0, u64::MAX).expect("read");
        let said: Vec<(&str, &str, Role)> = read
            .messages
            .iter()
            .map(|message| (message.entry_id.as_str(), message.text.as_str(), message.role))
            .collect();
        assert_eq!(said, [("e-1", "hello", Role::User), ("e-2", "one\n\ntwo", Role::Assistant)]);
        assert_eq!(read.offset as usize, text.len() - torn.len(), "the torn line waits");
        assert!(!read.more);

        // The writer finishes the line: only it is read.
        std::fs::write(
            &path,
            format!("{}{}", &text[..text.len() - torn.len()], user("e-3", "now")),
        )
        .expect("write");
        let next = read_messages_at(&path, read.offset, u64::MAX).expect("read");
        assert_eq!(next.messages.len(), 1);
        assert_eq!(next.messages[0].text, "now");

        // A budget stops between whole lines; a shorter file is another one.
        let first = read_messages_at(&path, 0, 1).expect("read");
        assert!(first.more && first.messages.is_empty(), "the header alone");
        let gone = read_messages_at(&path, u64::MAX / 2, 10).expect("read");
        assert!(gone.shrunk);
    }

    #[test]
    fn every_log_is_found_with_its_lineage() {
        let home = tempfile::tempdir().expect("home");
        let root = sessions_root(home.path());
        let fork = root.join("sess-a").join("forks").join("sess-b");
        let deeper = fork.join("forks").join("sess-c");
        for (dir, id) in [(root.join("sess-a"), "sess-a"), (fork, "sess-b"), (deeper, "sess-c")] {
            std::fs::create_dir_all(&dir).expect("dir");
            std::fs::write(dir.join("session.jsonl"), header(id)).expect("log");
        }
        std::fs::create_dir_all(root.join("sess-empty")).expect("no log in it");
        let mut found = stored_sessions(home.path(), 100).sessions;
        found.sort_by(|a, b| a.session_id.cmp(&b.session_id));
        let found: Vec<(&str, &str)> =
            found.iter().map(|s| (s.session_id.as_str(), s.lineage.as_str())).collect();
        assert_eq!(found, [("sess-a", "sess-a"), ("sess-b", "sess-a"), ("sess-c", "sess-a")]);
        let limited = stored_sessions(home.path(), 2);
        assert!(limited.partial);
        assert_eq!(limited.sessions.len(), 2);
    }
}
