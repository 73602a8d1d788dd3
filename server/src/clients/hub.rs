//! Every open connection, and which browser session (if any) it belongs
//! to: registry events go to all of them ([`Broadcast`]), and logout,
//! revocation and shutdown close them by session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::outbox::Outbox;
use crate::agents::{Broadcast, SubscriberId, Wire};

/// Each connection's outbox and, for a browser, its session id.
type Connections = HashMap<SubscriberId, (Arc<Outbox>, Option<String>)>;

#[derive(Default)]
pub struct Hub {
    next_id: AtomicU64,
    connections: Mutex<Connections>,
}

impl Hub {
    pub fn next_id(&self) -> SubscriberId {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn register(&self, outbox: Arc<Outbox>, session: Option<String>) {
        self.connections().insert(outbox.id(), (outbox, session));
    }

    pub fn unregister(&self, id: SubscriberId) {
        self.connections().remove(&id);
    }

    /// The browser sessions with a connection open, each once.
    pub fn browser_sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> =
            self.connections().values().filter_map(|(_, owner)| owner.clone()).collect();
        sessions.sort_unstable();
        sessions.dedup();
        sessions
    }

    /// Closes every connection of a browser session (logout, revocation).
    pub fn close_session(&self, session: &str, reason: &str) {
        self.close_browsers(Some(session), reason);
    }

    /// Closes browser connections: one session's, or every browser's.
    /// Returns how many.
    pub fn close_browsers(&self, session: Option<&str>, reason: &str) -> u32 {
        let mut closed = 0;
        for (outbox, owner) in self.connections().values() {
            let matches = match (owner.as_deref(), session) {
                (Some(owner), Some(session)) => owner == session,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if matches {
                outbox.close(reason);
                closed += 1;
            }
        }
        closed
    }

    /// Open connections of a browser session.
    pub fn session_connections(&self, session: &str) -> u32 {
        let count = self
            .connections()
            .values()
            .filter(|(_, owner)| owner.as_deref() == Some(session))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    pub fn close_all(&self, reason: &str) {
        for (outbox, _) in self.connections().values() {
            outbox.close(reason);
        }
    }

    pub fn count(&self) -> usize {
        self.connections().len()
    }
}

impl Broadcast for Hub {
    /// Sends the same bytes to every connection.
    fn broadcast(&self, bytes: &Wire) {
        for (outbox, _) in self.connections().values() {
            outbox.push(bytes.clone());
        }
    }
}
