//! The one queue bounded in bytes: pushing never blocks, and a push that
//! would take the bytes queued past the limit is refused, so a consumer that
//! falls behind costs its budget and no more. What to do about a refusal
//! (close a slow client, refuse a command) is the caller's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

/// What a queue holds: anything whose size in bytes is known.
pub trait Measured {
    fn bytes(&self) -> usize;
}

impl Measured for bytes::Bytes {
    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Measured for tokio_tungstenite::tungstenite::Utf8Bytes {
    fn bytes(&self) -> usize {
        self.len()
    }
}

/// A push refused: the queue is over its budget, or its receiver is gone.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    Full,
    Closed,
}

/// The sending side.
pub struct ByteQueue<T> {
    sender: mpsc::UnboundedSender<T>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

/// The receiving side: what it takes out no longer counts.
pub struct ByteReceiver<T> {
    receiver: mpsc::UnboundedReceiver<T>,
    queued: Arc<AtomicUsize>,
}

/// A new queue that holds at most `limit` bytes.
pub fn byte_queue<T: Measured>(limit: usize) -> (ByteQueue<T>, ByteReceiver<T>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (ByteQueue { sender, queued: queued.clone(), limit }, ByteReceiver { receiver, queued })
}

impl<T: Measured> ByteQueue<T> {
    pub fn push(&self, item: T) -> Result<(), Refused> {
        let size = item.bytes();
        let before = self.queued.fetch_add(size, Ordering::AcqRel);
        if before + size > self.limit {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            return Err(Refused::Full);
        }
        self.sender.send(item).map_err(|_| {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            Refused::Closed
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl<T: Measured> ByteReceiver<T> {
    pub fn is_empty(&self) -> bool {
        self.receiver.is_empty()
    }

    /// The next item; `None` once every sender is gone and all is taken.
    pub async fn recv(&mut self) -> Option<T> {
        let item = self.receiver.recv().await?;
        self.queued.fetch_sub(item.bytes(), Ordering::AcqRel);
        Some(item)
    }

    /// The next item, if one is waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        let item = self.receiver.try_recv().ok()?;
        self.queued.fetch_sub(item.bytes(), Ordering::AcqRel);
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[tokio::test]
    async fn a_push_past_the_budget_is_refused_and_taking_frees_it() {
        let (queue, mut receiver) = byte_queue(10);
        assert_eq!(queue.push(Bytes::from_static(b"12345")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"12345")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"1")), Err(Refused::Full));
        assert_eq!(receiver.recv().await.as_deref(), Some(&b"12345"[..]));
        assert_eq!(queue.push(Bytes::from_static(b"1")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"12345")), Err(Refused::Full));
    }

    #[test]
    fn one_item_larger_than_the_budget_never_fits() {
        let (queue, _receiver) = byte_queue(4);
        assert_eq!(queue.push(Bytes::from_static(b"12345")), Err(Refused::Full));
    }

    #[test]
    fn a_push_to_a_gone_receiver_is_refused_and_costs_nothing() {
        let (queue, receiver) = byte_queue::<Bytes>(10);
        drop(receiver);
        assert_eq!(queue.push(Bytes::from_static(b"12345")), Err(Refused::Closed));
        assert_eq!(queue.queued.load(Ordering::Acquire), 0);
    }
}
