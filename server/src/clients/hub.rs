//! Every open connection, and which browser session (if any) it belongs
//! to: registry events go to all of them ([`Broadcast`]), and logout,
//! revocation and shutdown close them by session. It also counts the
//! connections being served, so that a daemon shutting down can wait for
//! their last words to go out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

use super::outbox::Outbox;
use crate::agents::{Broadcast, SubscriberId, Wire};

/// Each connection's outbox and, for a browser, its session id.
type Connections = HashMap<SubscriberId, (Arc<Outbox>, Option<String>)>;

/// The open connections, and whether the daemon is going away (one lock,
/// so that no connection registers unseen by [`Hub::close_all`]).
#[derive(Default)]
struct Table {
    open: Connections,
    /// Set by [`Hub::close_all`]: a connection registered from then on is
    /// closed at once, with this reason.
    going_away: Option<String>,
}

#[derive(Default)]
pub struct Hub {
    next_id: AtomicU64,
    table: Mutex<Table>,
    /// Every connection being served, until its socket is released.
    served: TaskTracker,
}

impl Hub {
    pub fn next_id(&self) -> SubscriberId {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn register(&self, outbox: Arc<Outbox>, session: Option<String>) {
        let mut table = self.table();
        if let Some(reason) = &table.going_away {
            outbox.go_away(reason.clone());
        }
        table.open.insert(outbox.id(), (outbox, session));
    }

    pub fn unregister(&self, id: SubscriberId) {
        self.table().open.remove(&id);
    }

    /// Held by a connection while it is served, from its start until its
    /// socket is released.
    pub fn serving(&self) -> TaskTrackerToken {
        self.served.token()
    }

    /// Completes once every connection served has ended. Only for the
    /// daemon's end: no connection may be served after it.
    pub async fn all_closed(&self) {
        self.served.close();
        self.served.wait().await;
    }

    /// The browser sessions with a connection open, each once.
    pub fn browser_sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> =
            self.table().open.values().filter_map(|(_, owner)| owner.clone()).collect();
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
        for (outbox, owner) in self.table().open.values() {
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
            .table()
            .open
            .values()
            .filter(|(_, owner)| owner.as_deref() == Some(session))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The daemon is going away: closes every connection, and every one
    /// that registers from now on.
    pub fn close_all(&self, reason: &str) {
        let mut table = self.table();
        table.going_away.get_or_insert_with(|| reason.to_owned());
        for (outbox, _) in table.open.values() {
            outbox.go_away(reason);
        }
    }

    pub fn count(&self) -> usize {
        self.table().open.len()
    }
}

impl Broadcast for Hub {
    /// Sends the same bytes to every connection.
    fn broadcast(&self, bytes: &Wire) {
        for (outbox, _) in self.table().open.values() {
            outbox.push(bytes.clone());
        }
    }
}
