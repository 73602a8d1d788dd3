//! The index itself: one SQLite file (`$SHARD_HOME/search.db`, 0600) with
//! an FTS5 table of message texts beside a table of what each text is (its
//! agent, session, entry, role and time) and a table of how far each
//! session's log has been read. Only the search thread ([`super`]) holds
//! it. It is derived data: a file that cannot be used (corrupt, another
//! schema) is removed and built again from the session logs.
//!
//! Bounds: each message's text is cut to [`MESSAGE_BYTES`]; past
//! `limits.messages` messages or `limits.bytes` bytes of text, the oldest
//! messages (by the time they were written) are evicted, in the same
//! transaction that added the newer ones.

use std::collections::HashMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use shard_platform::session_view::MessagesRead;
use shard_protocol::search::SnippetPart;
use shard_protocol::types::Role;

use super::error::SearchError;
use super::words;

/// The most text of one message indexed: a long reply is found by its
/// first 16 KiB, and one pasted log does not crowd out a thousand others.
pub const MESSAGE_BYTES: usize = 16 * 1024;

/// The schema's version (`PRAGMA user_version`); another one is rebuilt.
const SCHEMA: i64 = 1;

/// Messages evicted per statement batch.
const EVICT_BATCH: i64 = 512;

/// How large the index may grow.
#[derive(Debug, Clone, Copy)]
pub struct SearchLimits {
    /// Messages indexed at most.
    pub messages: u64,
    /// Bytes of message text indexed at most (the file is about twice as
    /// large: the full-text index beside the text).
    pub bytes: u64,
}

impl Default for SearchLimits {
    fn default() -> Self {
        Self { messages: 200_000, bytes: 256 * 1024 * 1024 }
    }
}

/// One match, as the index has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub agent_id: String,
    pub session_id: String,
    pub entry_id: String,
    pub role: Role,
    pub at: u64,
    pub snippet: Vec<SnippetPart>,
}

pub struct Index {
    conn: Connection,
    limits: SearchLimits,
    /// Messages and bytes of text indexed now.
    count: u64,
    bytes: u64,
}

impl Index {
    /// Opens (or makes) the index at `path`. One that SQLite cannot use is
    /// removed and made again: everything in it comes from the logs.
    pub fn open(path: &Path, limits: SearchLimits) -> Result<Self, SearchError> {
        match Self::open_as_is(path, limits) {
            Ok(index) => Ok(index),
            Err(problem) => {
                tracing::warn!(%problem, path = %path.display(), "rebuilding the search index");
                remove(path);
                Self::open_as_is(path, limits)
            }
        }
    }

    fn open_as_is(path: &Path, limits: SearchLimits) -> Result<Self, SearchError> {
        create_private(path).map_err(|error| SearchError::Unavailable(error.to_string()))?;
        let conn = Connection::open(path)?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if version != 0 && version != SCHEMA {
            return Err(SearchError::Unavailable(format!("schema {version}, not {SCHEMA}")));
        }
        // Free pages go back to the file system as evictions free them;
        // set before the first table (later it would need a VACUUM).
        pragma(&conn, "PRAGMA auto_vacuum = INCREMENTAL")?;
        pragma(&conn, "PRAGMA journal_mode = WAL")?;
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS sessions (
                 session_id TEXT PRIMARY KEY,
                 agent_id TEXT NOT NULL,
                 read_to INTEGER NOT NULL
             ) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS messages (
                 id INTEGER PRIMARY KEY,
                 session_id TEXT NOT NULL,
                 entry_id TEXT NOT NULL,
                 agent_id TEXT NOT NULL,
                 role TEXT NOT NULL,
                 at INTEGER NOT NULL,
                 bytes INTEGER NOT NULL,
                 UNIQUE (session_id, entry_id)
             );
             CREATE INDEX IF NOT EXISTS messages_by_age ON messages (at, id);
             CREATE VIRTUAL TABLE IF NOT EXISTS texts
                 USING fts5 (text, tokenize = 'unicode61 remove_diacritics 2');",
        )?;
        conn.pragma_update(None, "user_version", SCHEMA)?;
        // SQLite makes its `-wal` and `-shm` files with the database's
        // mode; one left looser by hand is narrowed like every home file.
        for companion in ["-wal", "-shm"] {
            let _ = shard_platform::private::tighten(&with_suffix(path, companion), 0o600);
        }
        let mut index = Self { conn, limits, count: 0, bytes: 0 };
        index.count_again()?;
        Ok(index)
    }

    fn count_again(&mut self) -> Result<(), SearchError> {
        let (count, bytes): (i64, i64) = self.conn.query_row(
            "SELECT count(*), coalesce(sum(bytes), 0) FROM messages",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        self.count = u64::try_from(count).unwrap_or(0);
        self.bytes = u64::try_from(bytes).unwrap_or(0);
        Ok(())
    }

    /// Messages and bytes of text indexed now.
    #[cfg(test)]
    pub fn size(&self) -> (u64, u64) {
        (self.count, self.bytes)
    }

    /// Every session indexed, and the agent its messages are listed under.
    pub fn sessions(&self) -> Result<HashMap<String, String>, SearchError> {
        let mut statement = self.conn.prepare("SELECT session_id, agent_id FROM sessions")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// How far `session_id`'s log has been read (0: not at all).
    pub fn read_to(&self, session_id: &str) -> Result<u64, SearchError> {
        let read: Option<i64> = self
            .conn
            .query_row("SELECT read_to FROM sessions WHERE session_id = ?1", [session_id], |row| {
                row.get(0)
            })
            .optional()?;
        Ok(read.and_then(|read| u64::try_from(read).ok()).unwrap_or(0))
    }

    /// Adds what was read of `session_id`'s log, listed under `agent_id`
    /// (the session's messages indexed before move to it: a session is
    /// listed under the agent that ran it last), and evicts the oldest
    /// messages past the limits; in one transaction.
    pub fn add(
        &mut self,
        session_id: &str,
        agent_id: &str,
        read: &MessagesRead,
    ) -> Result<(), SearchError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE messages SET agent_id = ?2 WHERE session_id = ?1 AND agent_id != ?2",
            params![session_id, agent_id],
        )?;
        tx.execute(
            "INSERT INTO sessions (session_id, agent_id, read_to) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id) DO UPDATE SET agent_id = ?2, read_to = ?3",
            params![session_id, agent_id, i64::try_from(read.offset).unwrap_or(i64::MAX)],
        )?;
        let (mut count, mut bytes) = (self.count, self.bytes);
        {
            let mut message = tx.prepare_cached(
                "INSERT OR IGNORE INTO messages (session_id, entry_id, agent_id, role, at, bytes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut text = tx.prepare_cached("INSERT INTO texts (rowid, text) VALUES (?1, ?2)")?;
            for said in &read.messages {
                let indexed = cut(&words::indexable(&said.text), MESSAGE_BYTES).to_owned();
                let size = indexed.len() as u64;
                let role = match said.role {
                    Role::Assistant => "assistant",
                    _ => "user",
                };
                let at = i64::try_from(said.at).unwrap_or(i64::MAX);
                let added = message.execute(params![
                    session_id,
                    said.entry_id,
                    agent_id,
                    role,
                    at,
                    size as i64
                ])?;
                if added == 1 {
                    text.execute(params![tx.last_insert_rowid(), indexed])?;
                    count += 1;
                    bytes += size;
                }
            }
        }
        let evicted = evict(&tx, self.limits, &mut count, &mut bytes)?;
        tx.commit()?;
        (self.count, self.bytes) = (count, bytes);
        if evicted {
            self.reclaim();
        }
        Ok(())
    }

    /// Removes every message of `session_id` and what was read of it.
    pub fn forget(&mut self, session_id: &str) -> Result<(), SearchError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM texts WHERE rowid IN (SELECT id FROM messages WHERE session_id = ?1)",
            [session_id],
        )?;
        tx.execute("DELETE FROM messages WHERE session_id = ?1", [session_id])?;
        tx.execute("DELETE FROM sessions WHERE session_id = ?1", [session_id])?;
        tx.commit()?;
        self.count_again()?;
        self.reclaim();
        Ok(())
    }

    /// Gives the pages evictions freed back to the file system.
    fn reclaim(&self) {
        if let Err(problem) = pragma(&self.conn, "PRAGMA incremental_vacuum") {
            tracing::warn!(%problem, "cannot shrink the search index");
        }
    }

    /// The best `limit` matches of the FTS5 expression `expression`
    /// (crate::search::words), of `agent_id`'s messages only if given.
    pub fn query(
        &self,
        expression: &str,
        agent_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Found>, SearchError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT m.agent_id, m.session_id, m.entry_id, m.role, m.at,
                    snippet(texts, 0, char(2), char(3), '…', 16)
             FROM texts JOIN messages m ON m.id = texts.rowid
             WHERE texts MATCH ?1 AND (?2 IS NULL OR m.agent_id = ?2)
             ORDER BY bm25(texts), m.at DESC
             LIMIT ?3",
        )?;
        let rows = statement.query_map(params![expression, agent_id, limit], |row| {
            let role: String = row.get(3)?;
            let at: i64 = row.get(4)?;
            let snippet: String = row.get(5)?;
            Ok(Found {
                agent_id: row.get(0)?,
                session_id: row.get(1)?,
                entry_id: row.get(2)?,
                role: if role == "assistant" { Role::Assistant } else { Role::User },
                at: u64::try_from(at).unwrap_or(0),
                snippet: words::snippet_parts(&snippet),
            })
        });
        let found = rows.and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        found.map_err(|error| match error {
            // Every word is quoted, so this is a query FTS5 still took
            // for syntax: the user's text, not the index, is at fault.
            rusqlite::Error::SqliteFailure(_, Some(message)) if message.starts_with("fts5:") => {
                SearchError::Refused(message)
            }
            other => SearchError::Database(other),
        })
    }
}

/// Evicts the oldest messages until the index is within `limits`; whether
/// any went.
fn evict(
    tx: &rusqlite::Transaction<'_>,
    limits: SearchLimits,
    count: &mut u64,
    bytes: &mut u64,
) -> Result<bool, SearchError> {
    let mut evicted = false;
    while *count > limits.messages || *bytes > limits.bytes {
        let oldest: Vec<(i64, i64)> = {
            let mut statement =
                tx.prepare_cached("SELECT id, bytes FROM messages ORDER BY at, id LIMIT ?1")?;
            let rows = statement.query_map([EVICT_BATCH], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        if oldest.is_empty() {
            // The totals drifted from the table: trust the table.
            (*count, *bytes) = (0, 0);
            break;
        }
        let mut message = tx.prepare_cached("DELETE FROM messages WHERE id = ?1")?;
        let mut text = tx.prepare_cached("DELETE FROM texts WHERE rowid = ?1")?;
        for (id, size) in oldest {
            if *count <= limits.messages && *bytes <= limits.bytes {
                break;
            }
            message.execute([id])?;
            text.execute([id])?;
            *count = count.saturating_sub(1);
            *bytes = bytes.saturating_sub(u64::try_from(size).unwrap_or(0));
            evicted = true;
        }
    }
    Ok(evicted)
}

/// Runs a pragma that may answer rows, reading and dropping them.
fn pragma(conn: &Connection, sql: &str) -> Result<(), SearchError> {
    let mut statement = conn.prepare(sql)?;
    let mut rows = statement.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Makes the file 0600 before SQLite opens it (SQLite would use the
/// process's umask), or narrows one made looser by hand.
fn create_private(path: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    shard_platform::private::tighten(path, 0o600)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes the index and its companions.
fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(with_suffix(path, suffix));
    }
}

#[cfg(test)]
mod tests {
    use shard_platform::session_view::LoggedMessage;

    use super::*;

    fn said(entry_id: &str, at: u64, text: &str) -> LoggedMessage {
        LoggedMessage { entry_id: entry_id.to_owned(), role: Role::User, text: text.to_owned(), at }
    }

    fn read(offset: u64, messages: Vec<LoggedMessage>) -> MessagesRead {
        MessagesRead { messages, offset, more: false, shrunk: false }
    }

    fn entries(found: &[Found]) -> Vec<&str> {
        found.iter().map(|found| found.entry_id.as_str()).collect()
    }

    fn search(index: &Index, text: &str) -> Vec<Found> {
        index.query(&words::expression(text).expect("words"), None, 100).expect("query")
    }

    #[test]
    fn messages_are_found_by_words_and_the_oldest_go_past_the_limits() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("search.db");
        let limits = SearchLimits { messages: 3, bytes: 1 << 20 };
        let mut index = Index::open(&path, limits).expect("open");
        let first = vec![said("e-1", 1, "the deploy script"), said("e-2", 2, "naïve café")];
        index.add("sess-1", "agent-1", &read(100, first)).expect("add");
        assert_eq!(entries(&search(&index, "deploy")), ["e-1"]);
        assert_eq!(entries(&search(&index, "cafe naive")), ["e-2"], "diacritics fold");
        assert_eq!(entries(&search(&index, "dep")), ["e-1"], "the last word is a prefix");
        assert!(search(&index, "de script").is_empty(), "other words are whole");
        let hit = &search(&index, "deploy")[0];
        assert!(hit.snippet.iter().any(|part| part.hit && part.text == "deploy"), "{hit:?}");
        assert_eq!(index.read_to("sess-1").expect("read"), 100);

        // Two more: the oldest message goes; a message read again is not doubled.
        let more =
            vec![said("e-2", 2, "naïve café"), said("e-3", 3, "deploy"), said("e-4", 4, "x")];
        index.add("sess-1", "agent-1", &read(200, more)).expect("add");
        assert_eq!(index.size().0, 3);
        assert_eq!(entries(&search(&index, "deploy")), ["e-3"]);

        // Moved to another agent with the session; gone with it.
        index.add("sess-1", "agent-2", &read(200, Vec::new())).expect("move");
        assert!(search(&index, "deploy").iter().all(|found| found.agent_id == "agent-2"));
        index.forget("sess-1").expect("forget");
        assert!(search(&index, "deploy").is_empty());
        assert_eq!(index.size(), (0, 0));
        assert_eq!(index.read_to("sess-1").expect("read"), 0);
        drop(index);

        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_file_that_is_not_an_index_is_made_again() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("search.db");
        std::fs::write(&path, b"this is not a database, and much longer than a header....")
            .expect("write");
        let mut index = Index::open(&path, SearchLimits::default()).expect("open");
        index.add("sess-1", "a", &read(1, vec![said("e-1", 1, "hello")])).expect("add");
        assert_eq!(entries(&search(&index, "hello")), ["e-1"]);
    }
}
