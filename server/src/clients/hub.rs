//! Every open connection, which browser session (if any) it belongs to,
//! whether it is on screen and whether it watches the fleet: registry
//! events go to all of them ([`Broadcast`]), `fleet_updated` to the
//! watchers, logout, revocation and shutdown close them by session,
//! and a browser with a tab on screen gets no push (web::push). It also counts the
//! connections being served, so that a daemon shutting down can wait for
//! their last words to go out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::task::{TaskTracker, task_tracker::TaskTrackerToken};

use super::outbox::Outbox;
use crate::agents::{Broadcast, SubscriberId, Wire};

/// Each connection's outbox and, for a browser, its session id.
type Connections = HashMap<SubscriberId, Connection>;

struct Connection {
    outbox: Arc<Outbox>,
    session: Option<String>,
    /// What the client last said with `client.presence`; a client that
    /// never said is not on screen.
    visible: bool,
    /// It asked for `fleet_updated` (`fleet.watch`).
    watching_fleet: bool,
}

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
        table.open.insert(
            outbox.id(),
            Connection { outbox, session, visible: false, watching_fleet: false },
        );
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

    /// Records whether a connection's client is on screen.
    pub fn set_visible(&self, id: SubscriberId, visible: bool) {
        if let Some(connection) = self.table().open.get_mut(&id) {
            connection.visible = visible;
        }
    }

    /// Whether any connection of a browser session is on screen.
    pub fn session_visible(&self, session: &str) -> bool {
        self.table()
            .open
            .values()
            .any(|connection| connection.visible && connection.session.as_deref() == Some(session))
    }

    /// The browser sessions with a connection open, each once.
    pub fn browser_sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> = self
            .table()
            .open
            .values()
            .filter_map(|connection| connection.session.clone())
            .collect();
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
        for Connection { outbox, session: owner, .. } in self.table().open.values() {
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

    /// Sends `bytes` to every connection of one browser session.
    pub fn tell_session(&self, session: &str, bytes: &Wire) {
        for connection in self.table().open.values() {
            if connection.session.as_deref() == Some(session) {
                connection.outbox.push(bytes.clone());
            }
        }
    }

    /// Open connections of a browser session.
    pub fn session_connections(&self, session: &str) -> u32 {
        let count = self
            .table()
            .open
            .values()
            .filter(|connection| connection.session.as_deref() == Some(session))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The daemon is going away: closes every connection, and every one
    /// that registers from now on.
    pub fn close_all(&self, reason: &str) {
        let mut table = self.table();
        table.going_away.get_or_insert_with(|| reason.to_owned());
        for connection in table.open.values() {
            connection.outbox.go_away(reason);
        }
    }

    pub fn count(&self) -> usize {
        self.table().open.len()
    }

    /// Whether the connection gets `fleet_updated` from now on.
    pub fn watch_fleet(&self, id: SubscriberId, watch: bool) {
        if let Some(connection) = self.table().open.get_mut(&id) {
            connection.watching_fleet = watch;
        }
    }
}

impl crate::agents::fleet::Watchers for Hub {
    fn tell_watchers(&self, bytes: &Wire) {
        for connection in self.table().open.values().filter(|c| c.watching_fleet) {
            connection.outbox.push(bytes.clone());
        }
    }
}

impl Broadcast for Hub {
    /// Sends the same bytes to every connection.
    fn broadcast(&self, bytes: &Wire) {
        for connection in self.table().open.values() {
            connection.outbox.push(bytes.clone());
        }
    }
}
