//! Client connections as the rest of the daemon sees them: each has an
//! [`Outbox`], a queue bounded in bytes that never blocks the sender. A
//! connection that falls behind is closed with a reason; it never slows an
//! agent or another client (STYLE.md, PROTOCOL.md P2). The [`Hub`] knows every
//! connection, for registry events that go to all of them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Default bytes a client may have queued before it is dropped: several
/// seconds of a fast stream, far more than a healthy tab ever holds.
pub const DEFAULT_OUTBOX_BYTES: usize = 4 * 1024 * 1024;

pub type ConnId = u64;

/// The sending side of one connection's queue. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    pub id: ConnId,
    sender: mpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// Cancelled when the connection must close (slow, logged out, shutdown).
    pub closing: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

/// The receiving side, owned by the connection's writer.
pub struct OutboxReceiver {
    receiver: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
}

impl OutboxReceiver {
    pub fn is_empty(&self) -> bool {
        self.receiver.is_empty()
    }

    pub async fn recv(&mut self) -> Option<Bytes> {
        let bytes = self.receiver.recv().await?;
        self.queued.fetch_sub(bytes.len(), Ordering::AcqRel);
        Some(bytes)
    }
}

pub fn outbox(id: ConnId, limit: usize) -> (Outbox, OutboxReceiver) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let outbox = Outbox {
        id,
        sender,
        queued: queued.clone(),
        limit,
        closing: CancellationToken::new(),
        reason: Arc::new(Mutex::new(None)),
    };
    (outbox, OutboxReceiver { receiver, queued })
}

impl Outbox {
    /// Queues one serialized message. Returns `false` (and closes the
    /// connection) when the client is too far behind.
    pub fn push(&self, bytes: Bytes) -> bool {
        if self.closing.is_cancelled() {
            return false;
        }
        let size = bytes.len();
        let before = self.queued.fetch_add(size, Ordering::AcqRel);
        if before + size > self.limit {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            self.close(format!(
                "client too slow: more than {} bytes queued; reconnect and re-attach to resync",
                self.limit
            ));
            return false;
        }
        self.sender.send(bytes).is_ok()
    }

    /// Asks the connection to close, keeping the first reason given.
    pub fn close(&self, reason: impl Into<String>) {
        let mut current = self.reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.is_none() {
            *current = Some(reason.into());
        }
        self.closing.cancel();
    }

    pub fn close_reason(&self) -> Option<String> {
        self.reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// Every open connection, and which browser session (if any) it belongs to.
#[derive(Default)]
pub struct Hub {
    next_id: AtomicU64,
    connections: Mutex<HashMap<ConnId, (Outbox, Option<String>)>>,
}

impl Hub {
    pub fn next_id(&self) -> ConnId {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<ConnId, (Outbox, Option<String>)>> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn register(&self, outbox: Outbox, session: Option<String>) {
        self.connections().insert(outbox.id, (outbox, session));
    }

    pub fn unregister(&self, id: ConnId) {
        self.connections().remove(&id);
    }

    /// Sends the same bytes to every connection.
    pub fn broadcast(&self, bytes: &Bytes) {
        for (outbox, _) in self.connections().values() {
            outbox.push(bytes.clone());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_outbox_closes_the_connection_instead_of_blocking() {
        let (outbox, mut receiver) = outbox(1, 10);
        assert!(outbox.push(Bytes::from_static(b"12345")));
        assert!(outbox.push(Bytes::from_static(b"12345")));
        assert!(!outbox.push(Bytes::from_static(b"1")), "over the budget");
        assert!(outbox.closing.is_cancelled());
        assert!(outbox.close_reason().unwrap_or_default().contains("too slow"));
        assert_eq!(receiver.recv().await.as_deref(), Some(&b"12345"[..]));
    }

    #[tokio::test]
    async fn draining_frees_the_budget() {
        let (outbox, mut receiver) = outbox(1, 10);
        for _ in 0..10 {
            assert!(outbox.push(Bytes::from_static(b"1234567")));
            receiver.recv().await;
        }
        assert!(!outbox.closing.is_cancelled());
    }
}
