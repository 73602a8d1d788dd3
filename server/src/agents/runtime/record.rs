//! Shard's record of a session: the second thing every runtime owes the
//! host, beside its lines. The host reads it for a new process's `sync`
//! (the live window, the model), and so do search, usage and the registry
//! (forks, switches); a runtime that streamed events without recording them
//! would leave every later client, and every restart, with a transcript
//! that stops where its record does.
//!
//! The record is the session's log in `$SHARD_HOME/sessions/`, in the
//! platform crate's format (`shard_platform::session_log`): every user
//! message, assistant message, tool result, change of settings and queued
//! follow-up, written before its event reaches the host. Shard's own agent
//! writes it in its own process (it owns its conversation); the ACP bridge
//! writes it in the daemon, from the entries its translator gives out.

use std::path::{Path, PathBuf};

use shard_platform::conversation::Conversation;
use shard_platform::session_view::{SessionError, SessionView};

/// One session's record, as a runtime writes it and the host reads it.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    home: PathBuf,
    session_id: String,
}

impl SessionRecord {
    pub fn new(home: &Path, session_id: &str) -> Self {
        Self { home: home.to_owned(), session_id: session_id.to_owned() }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Opened to go on writing it: what it still owes (follow-ups never
    /// delivered) and the settings last set are read from it.
    pub async fn writer(&self) -> Result<Conversation, SessionError> {
        Conversation::resume(&self.home, &self.session_id).await
    }

    /// What it holds, for the host: the live window a `sync` shows, the
    /// model last used.
    pub fn view(&self) -> Result<SessionView, SessionError> {
        SessionView::open(&self.home, &self.session_id)
    }
}
