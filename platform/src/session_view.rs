//! What a supervisor may know of an agent's session, and the only door
//! through which the daemon touches one: create a session for a new agent,
//! check that an existing one can be adopted, and follow a running agent's
//! log to project its live window for `sync` (PROTOCOL.md §6.4), and read
//! the messages of every log for the search index ([`messages`]). The log's
//! format, its entries and the window rules stay inside this crate.

mod messages;

use std::path::Path;

use shard_protocol::agent::LiveWindow;

pub use self::messages::{
    LoggedMessage, MessagesRead, StoredSession, StoredSessions, read_messages, stored_sessions,
};
use crate::conversation::{self, Conversation, RecordedSettings};
pub use crate::session_log::SessionError;
use crate::session_log::{LogTail, find_session, read_log};

/// Starts a new, empty session; returns its id.
pub async fn create(
    home: &Path,
    cwd: &str,
    model: &str,
    mode: &str,
) -> Result<String, SessionError> {
    Ok(Conversation::create(home, cwd, model, mode).await?.session_id)
}

/// Whether `session_id` exists under `home` and its log reads cleanly.
pub fn check(home: &Path, session_id: &str) -> Result<(), SessionError> {
    let dir = find_session(home, session_id)?;
    read_log(&dir.join("session.jsonl")).map(|_| ())
}

/// Whether `a` and `b` belong to one lineage: the same first session, of
/// which the other is a fork (at any depth), or a fork of the same one.
/// This is what an agent may switch between (`session.activate`).
pub fn same_lineage(home: &Path, a: &str, b: &str) -> Result<bool, SessionError> {
    let root = |session| find_session(home, session).map(|dir| conversation::lineage_root(&dir));
    Ok(root(a)? == root(b)?)
}

/// A running agent's log, read as it grows. It holds only what a live
/// window can still show (from the latest compaction on) and the settings
/// the entries before it recorded, so a long session costs the daemon its
/// window, not its history.
pub struct SessionView {
    tail: LogTail,
    /// Folded from the entries already forgotten.
    settings: RecordedSettings,
}

impl SessionView {
    pub fn open(home: &Path, session_id: &str) -> Result<Self, SessionError> {
        let dir = find_session(home, session_id)?;
        let tail = LogTail::open(&dir.join("session.jsonl"))?;
        let mut view = Self { tail, settings: RecordedSettings::default() };
        view.forget_history();
        Ok(view)
    }

    fn forget_history(&mut self) {
        let forgettable = conversation::forgettable_prefix(self.tail.entries());
        for entry in self.tail.forget(forgettable) {
            self.settings.apply(&entry);
        }
    }

    /// The live window as the agent would put it in its own `sync`, after
    /// reading whatever was appended since the last call. A read problem
    /// leaves the window as last read.
    pub fn live_window(&mut self) -> (LiveWindow, Option<SessionError>) {
        let problem = self.tail.refresh().err();
        self.forget_history();
        let entries = self.tail.entries();
        let window = LiveWindow {
            messages: conversation::live_messages_of(entries),
            compaction_index: conversation::compaction_index_of(entries),
        };
        (window, problem)
    }

    /// The model the session last recorded, if any.
    pub fn model(&self) -> Option<String> {
        let mut settings = self.settings.clone();
        for entry in self.tail.entries() {
            settings.apply(entry);
        }
        settings.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session_log::{Entry, EntryBody, FORMAT_VERSION};

    fn entry(id: &str, body: EntryBody) -> Entry {
        Entry { id: id.to_owned(), ts: 1, body }
    }

    fn user(id: &str, text: &str) -> Entry {
        entry(
            id,
            EntryBody::User { text: text.to_owned(), images: Vec::new(), queued_entry_id: None },
        )
    }

    fn compaction(index: u64, first_kept: &str, range: (&str, &str)) -> Entry {
        entry(
            &format!("c-{index}"),
            EntryBody::Compaction {
                index,
                summary: format!("summary {index}"),
                first_kept_entry_id: first_kept.to_owned(),
                message_range: (range.0.to_owned(), range.1.to_owned()),
                tokens_before: 100,
                tokens_after: 10,
            },
        )
    }

    fn append(path: &Path, entries: &[Entry]) {
        use std::io::Write;
        let mut file =
            std::fs::OpenOptions::new().create(true).append(true).open(path).expect("log");
        for entry in entries {
            writeln!(file, "{}", serde_json::to_string(entry).expect("json")).expect("write");
        }
    }

    /// What the whole log's window is, read from scratch.
    fn whole_window(path: &Path) -> LiveWindow {
        let entries = read_log(path).expect("log");
        LiveWindow {
            messages: conversation::live_messages_of(&entries),
            compaction_index: conversation::compaction_index_of(&entries),
        }
    }

    #[test]
    fn a_view_keeps_only_the_live_window_and_shows_what_the_whole_log_does() {
        let home = tempfile::tempdir().expect("home");
        let dir = home.path().join("sessions").join("sess-1");
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("session.jsonl");
        let header = EntryBody::Header {
            version: FORMAT_VERSION,
            session_id: "sess-1".into(),
            cwd: "/".into(),
            created_at: 1,
            model: "demo".into(),
            mode: "build".into(),
        };
        let switched =
            EntryBody::Settings { mode: None, model: Some("other".into()), reasoning_level: None };
        append(
            &path,
            &[
                entry("e-0", header),
                entry("e-1", switched),
                user("e-2", "one"),
                user("e-3", "two"),
                user("e-4", "three"),
                compaction(1, "e-4", ("e-2", "e-3")),
                user("e-5", "four"),
            ],
        );
        let mut view = SessionView::open(home.path(), "sess-1").expect("view");
        assert_eq!(view.tail.entries().len(), 3, "from the first kept entry on");
        let (window, problem) = view.live_window();
        assert!(problem.is_none());
        assert_eq!(window, whole_window(&path));
        assert_eq!(view.model().as_deref(), Some("other"), "a setting from before the window");

        // A second compaction: what the first kept goes too.
        append(
            &path,
            &[user("e-6", "five"), compaction(2, "e-6", ("e-4", "e-5")), user("e-7", "six")],
        );
        let (window, _) = view.live_window();
        assert_eq!(window, whole_window(&path));
        assert_eq!(window.compaction_index, Some(2));
        assert_eq!(view.tail.entries().len(), 3, "e-6, the compaction and e-7");
        assert_eq!(view.model().as_deref(), Some("other"));
    }
}
