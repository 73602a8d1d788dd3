//! A connection's outbox: the queue between everything that sends to one
//! client (hosts, the registry, the connection itself) and its writer. It is
//! bounded in bytes and never blocks the sender: a client that falls behind
//! its budget is closed with a reason, and may reconnect and resync. A slow
//! client never slows an agent or another client (STYLE.md, PROTOCOL.md P2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::agents::{Subscriber, SubscriberId, Wire};
use crate::queue::{ByteQueue, ByteReceiver, Refused, byte_queue};

/// Default bytes a client may have queued before it is dropped: several
/// seconds of a fast stream, far more than a healthy tab ever holds.
pub const DEFAULT_OUTBOX_BYTES: usize = 4 * 1024 * 1024;

/// The sending side of one connection's queue.
pub struct Outbox {
    id: SubscriberId,
    queue: ByteQueue<Wire>,
    /// Cancelled when the connection must close (slow, stalled, logged out,
    /// shutdown); the reader and the writer both watch it.
    closing: CancellationToken,
    /// Cancelled when the client has left: nothing more is queued, and the
    /// writer ends once it has sent what already was.
    sealed: CancellationToken,
    /// Either token is cancelled: checked on every push, which a token
    /// alone would answer under its lock.
    shut: AtomicBool,
    /// Why it closes: the first reason given wins.
    reason: Mutex<Option<(Closing, String)>>,
}

/// Whose end a close is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// The daemon's rule about this connection: too slow, stalled, logged
    /// out, revoked, silent.
    Policy,
    /// The daemon itself is going (shutdown): the client may reconnect
    /// once it is back.
    GoingAway,
}

/// The receiving side, owned by the connection's writer.
pub type OutboxReceiver = ByteReceiver<Wire>;

/// A new outbox of `limit` bytes for connection `id`.
pub fn outbox(id: SubscriberId, limit: usize) -> (Arc<Outbox>, OutboxReceiver) {
    let (queue, receiver) = byte_queue(limit);
    let outbox = Outbox {
        id,
        queue,
        closing: CancellationToken::new(),
        sealed: CancellationToken::new(),
        shut: AtomicBool::new(false),
        reason: Mutex::new(None),
    };
    (Arc::new(outbox), receiver)
}

impl Outbox {
    pub fn id(&self) -> SubscriberId {
        self.id
    }

    /// Queues one serialized message. Returns `false` (and closes the
    /// connection) when the client is too far behind.
    pub fn push(&self, bytes: Wire) -> bool {
        if self.shut.load(Ordering::Acquire) {
            return false;
        }
        match self.queue.push(bytes) {
            Ok(()) => true,
            Err(Refused::Full) => {
                self.close(format!(
                    "client too slow: more than {} bytes queued; reconnect and re-attach to resync",
                    self.queue.limit()
                ));
                false
            }
            Err(Refused::Closed) => false,
        }
    }

    /// Asks the connection to close, keeping the first reason given.
    pub fn close(&self, reason: impl Into<String>) {
        self.close_as(Closing::Policy, reason.into());
    }

    /// Closes the connection because the daemon is going away.
    pub fn go_away(&self, reason: impl Into<String>) {
        self.close_as(Closing::GoingAway, reason.into());
    }

    fn close_as(&self, kind: Closing, reason: String) {
        let mut current = self.reason.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.is_none() {
            *current = Some((kind, reason));
        }
        self.shut.store(true, Ordering::Release);
        self.closing.cancel();
    }

    /// The client left: queue nothing more, send what is queued, then stop.
    pub fn seal(&self) {
        self.shut.store(true, Ordering::Release);
        self.sealed.cancel();
    }

    /// Completes once the outbox is sealed.
    pub async fn sealed(&self) {
        self.sealed.cancelled().await;
    }

    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// Completes once the connection must close.
    pub async fn closed(&self) {
        self.closing.cancelled().await;
    }

    pub fn close_reason(&self) -> String {
        self.closing_as().1
    }

    /// Whose end the close is, and why.
    pub fn closing_as(&self) -> (Closing, String) {
        self.reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| (Closing::Policy, "closing".to_owned()))
    }
}

impl Subscriber for Outbox {
    fn id(&self) -> SubscriberId {
        self.id
    }

    fn push(&self, bytes: Wire) -> bool {
        Outbox::push(self, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_outbox_closes_the_connection_instead_of_blocking() {
        let (outbox, mut receiver) = outbox(1, 10);
        assert!(outbox.push(Wire::from_static("12345")));
        assert!(outbox.push(Wire::from_static("12345")));
        assert!(!outbox.push(Wire::from_static("1")), "over the budget");
        assert!(outbox.is_closing());
        assert!(outbox.close_reason().contains("too slow"));
        assert_eq!(receiver.recv().await.as_deref(), Some("12345"));
    }

    #[tokio::test]
    async fn draining_frees_the_budget() {
        let (outbox, mut receiver) = outbox(1, 10);
        for _ in 0..10 {
            assert!(outbox.push(Wire::from_static("1234567")));
            receiver.recv().await;
        }
        assert!(!outbox.is_closing());
    }
}
