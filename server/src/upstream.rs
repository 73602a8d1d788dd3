//! A connection to a daemon as one of its clients, over any byte stream
//! that carries its JSONL (PROTOCOL.md §2.1): the unix socket for `shard
//! acp`, a node's `shard bridge` for a hub. Commands go out with an id and
//! their responses come back to whoever sent them; every other line is
//! handed on, in order, as the one who reads them makes it ([`Heard`]).
//!
//! Bounded everywhere: at most [`OUTGOING`] lines wait to be written, each
//! write has [`WRITE_DEADLINE`], and the reader waits for whoever takes
//! what it heard rather than holding more: a reader that stops makes the
//! daemon's outbox take the pressure, where its slow-client rules apply.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use shard_protocol::error::{ErrorCode, WireError};
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::message::Response;
use shard_protocol::{ClientMessage, Envelope};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Lines waiting to be written to the daemon.
const OUTGOING: usize = 64;
/// The longest one write to the daemon may take.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// The longest a command waits for its response.
pub const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// What one line from the daemon is, to the one who reads them.
pub enum Heard<T> {
    /// The response to the command sent under this id.
    Answer(String, Response),
    /// Anything else worth handing on.
    Event(T),
    /// Nothing for the reader.
    Nothing,
}

/// A command's response's data, or the daemon's error.
pub type Outcome = Result<Option<serde_json::Value>, WireError>;

/// The command's line could not be queued: too many wait to be written,
/// or the connection ended.
#[derive(Debug)]
pub struct NotQueued;

/// Sends commands to the daemon and waits for their answers.
pub struct Upstream {
    lines: mpsc::Sender<String>,
    calls: Mutex<HashMap<String, oneshot::Sender<Response>>>,
    next: AtomicU64,
    /// What this side's command ids start with.
    prefix: &'static str,
    /// The connection ended (the daemon stopped or dropped it).
    closed: AtomicBool,
    /// Which of its owner's connections this is, counted from 1.
    pub generation: u64,
}

impl Upstream {
    /// Speaks to the daemon at the other end of `reader` and `writer`.
    /// Each line it sends is read by `hear`; what that hands on goes to
    /// `events` in the order the daemon sent it, and `ended` goes last,
    /// when the connection ends.
    pub fn start<R, W, T>(
        (reader, writer): (R, W),
        generation: u64,
        prefix: &'static str,
        hear: impl FnMut(String) -> Heard<T> + Send + 'static,
        events: mpsc::Sender<T>,
        ended: T,
    ) -> Arc<Upstream>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
        T: Send + 'static,
    {
        let (lines, outgoing) = mpsc::channel(OUTGOING);
        let upstream = Arc::new(Upstream {
            lines,
            calls: Mutex::default(),
            next: AtomicU64::new(1),
            prefix,
            closed: AtomicBool::new(false),
            generation,
        });
        tokio::spawn(write_all(writer, outgoing));
        let reading = Reading { upstream: Arc::downgrade(&upstream), events, ended };
        tokio::spawn(read_all(reader, hear, reading));
        upstream
    }

    /// Sends `message` (for `agent`, if it is a per-agent command) and
    /// returns its response's data, or the daemon's error.
    pub async fn call(&self, agent: Option<&str>, message: ClientMessage) -> Outcome {
        self.call_within(agent, message, CALL_DEADLINE).await
    }

    /// [`Upstream::call`], waiting for its answer as long as `deadline`
    /// (a command the daemon may take minutes over, such as a push).
    pub async fn call_within(
        &self,
        agent: Option<&str>,
        message: ClientMessage,
        deadline: Duration,
    ) -> Outcome {
        let gone = || WireError::new(ErrorCode::InternalError, "the daemon's connection closed");
        let (id, answered) = self.register();
        let pending = Pending { upstream: self, id };
        if self.lines.send(self.line(&pending.id, agent, message)).await.is_err() {
            return Err(gone());
        }
        self.outcome(answered, deadline).await
    }

    /// Queues `message` now, behind every line queued before it, without
    /// waiting for room; the future it gives is its response's data, or
    /// the daemon's error (within [`CALL_DEADLINE`]).
    pub fn begin(
        self: &Arc<Self>,
        agent: Option<&str>,
        message: ClientMessage,
    ) -> Result<impl Future<Output = Outcome> + Send + 'static, NotQueued> {
        let (id, answered) = self.register();
        let pending = Pending { upstream: self.clone(), id };
        if self.lines.try_send(self.line(&pending.id, agent, message)).is_err() {
            return Err(NotQueued);
        }
        Ok(async move { pending.upstream.outcome(answered, CALL_DEADLINE).await })
    }

    /// Queues `message` now under `id`, behind every line queued before
    /// it, without waiting for room. Its response is not waited for here:
    /// it is a line like any other, for the one who reads them to hear in
    /// its place among the daemon's events (ids that `hear` knows as its
    /// own, never one of [`Upstream::call`]'s).
    pub fn post(&self, id: String, agent: &str, message: ClientMessage) -> Result<(), NotQueued> {
        self.lines.try_send(self.line(&id, Some(agent), message)).map_err(|_| NotQueued)
    }

    /// Sends `message` without waiting for its response (an answer to a
    /// question: its outcome is the `permission_resolved` every client gets).
    pub fn send(&self, agent: &str, message: ClientMessage) {
        let line = Envelope::new(message).for_agent(agent).to_json();
        if let Err(mpsc::error::TrySendError::Full(line)) = self.lines.try_send(line) {
            let lines = self.lines.clone();
            tokio::spawn(async move { lines.send(line).await });
        }
    }

    /// Whether the connection ended.
    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn register(&self) -> (String, oneshot::Receiver<Response>) {
        let id = format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed));
        let (answer, answered) = oneshot::channel();
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), answer);
        (id, answered)
    }

    fn line(&self, id: &str, agent: Option<&str>, message: ClientMessage) -> String {
        let mut envelope = Envelope::new(message).with_id(id.to_owned());
        if let Some(agent) = agent {
            envelope = envelope.for_agent(agent);
        }
        envelope.to_json()
    }

    async fn outcome(&self, answered: oneshot::Receiver<Response>, deadline: Duration) -> Outcome {
        match tokio::time::timeout(deadline, answered).await {
            Ok(Ok(response)) => response.outcome,
            Ok(Err(_)) => {
                Err(WireError::new(ErrorCode::InternalError, "the daemon's connection closed"))
            }
            Err(_) => Err(WireError::new(ErrorCode::Timeout, "the daemon did not answer in time")),
        }
    }

    fn forget(&self, id: &str) {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }

    fn answer(&self, id: &str, response: Response) {
        let waiting = self.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        if let Some(waiting) = waiting {
            let _ = waiting.send(response);
        }
    }
}

/// A call's place among [`Upstream`]'s, given up however its caller
/// stops waiting: answered, out of time, or gone (a caller with a
/// deadline of its own drops the call), so that none is left behind.
struct Pending<U: std::ops::Deref<Target = Upstream>> {
    upstream: U,
    id: String,
}

impl<U: std::ops::Deref<Target = Upstream>> Drop for Pending<U> {
    fn drop(&mut self) {
        self.upstream.forget(&self.id);
    }
}

async fn write_all(mut writer: impl AsyncWrite + Unpin, mut lines: mpsc::Receiver<String>) {
    while let Some(line) = lines.recv().await {
        let framed = frame(&line);
        let write = async {
            writer.write_all(&framed).await?;
            writer.flush().await
        };
        match tokio::time::timeout(WRITE_DEADLINE, write).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot write to the daemon");
                return;
            }
            Err(_) => {
                tracing::warn!("the daemon took no line for {WRITE_DEADLINE:?}; closing");
                return;
            }
        }
    }
}

/// Where the reader's findings go.
struct Reading<T> {
    upstream: Weak<Upstream>,
    events: mpsc::Sender<T>,
    ended: T,
}

async fn read_all<T>(
    mut reader: impl AsyncRead + Unpin,
    mut hear: impl FnMut(String) -> Heard<T>,
    reading: Reading<T>,
) {
    let Reading { upstream, events, ended } = reading;
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; 64 * 1024];
    'reading: loop {
        let read = match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        decoder.feed(&buffer[..read]);
        while let Some(line) = decoder.next_line() {
            let Ok(line) = line else {
                tracing::warn!("a line from the daemon was too long; skipped");
                continue;
            };
            match hear(line) {
                Heard::Answer(id, response) => {
                    let Some(upstream) = upstream.upgrade() else { return };
                    upstream.answer(&id, response);
                }
                Heard::Event(event) => {
                    if events.send(event).await.is_err() {
                        break 'reading;
                    }
                }
                Heard::Nothing => {}
            }
        }
    }
    // Whoever still waits for an answer learns the connection is gone.
    if let Some(upstream) = upstream.upgrade() {
        upstream.closed.store(true, Ordering::Release);
        upstream.calls.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
    let _ = events.send(ended).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(upstream: &Upstream) -> usize {
        upstream.calls.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    #[tokio::test]
    async fn a_call_given_up_by_its_caller_leaves_nothing_behind() {
        // A daemon that reads every line and never answers.
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(ours);
        let (_their_reader, _their_writer) = tokio::io::split(theirs);
        let (events, _heard) = mpsc::channel::<()>(1);
        let hear = |_: String| Heard::Nothing;
        let upstream = Upstream::start((reader, writer), 1, "t", hear, events, ());
        for _ in 0..3 {
            let call = upstream.call(None, ClientMessage::AgentList(Default::default()));
            let given_up = tokio::time::timeout(Duration::from_millis(10), call).await;
            assert!(given_up.is_err(), "never answered");
        }
        let begun = upstream.begin(None, ClientMessage::AgentList(Default::default()));
        drop(begun.expect("queued"));
        assert_eq!(waiting(&upstream), 0, "every call given up is forgotten");
    }
}
