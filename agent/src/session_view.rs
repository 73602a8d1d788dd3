//! What a supervisor may know of an agent's session, and the only door
//! through which the daemon touches one: create a session for a new agent,
//! check that an existing one can be adopted, and follow a running agent's
//! log to project its live window for `sync` (PROTOCOL.md §6.4). The log's
//! format, its entries and the window rules stay inside this crate.

use std::path::Path;

use shard_protocol::agent::LiveWindow;

use crate::conversation::{self, Conversation};
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

/// A running agent's log, read as it grows.
pub struct SessionView {
    tail: LogTail,
}

impl SessionView {
    pub fn open(home: &Path, session_id: &str) -> Result<Self, SessionError> {
        let dir = find_session(home, session_id)?;
        Ok(Self { tail: LogTail::open(&dir.join("session.jsonl"))? })
    }

    /// The live window as the agent would put it in its own `sync`, after
    /// reading whatever was appended since the last call. A read problem
    /// leaves the window as last read.
    pub fn live_window(&mut self) -> (LiveWindow, Option<SessionError>) {
        let problem = self.tail.refresh().err();
        let entries = self.tail.entries();
        let window = LiveWindow {
            messages: conversation::live_messages_of(entries),
            compaction_index: conversation::compaction_index_of(entries),
        };
        (window, problem)
    }

    /// The model the session last recorded, if any.
    pub fn model(&self) -> Option<String> {
        conversation::settings_of(self.tail.entries()).model
    }
}
