//! `shard acp`'s connection to the daemon: its unix socket, spoken as any
//! local client speaks it (PROTOCOL.md §2.1, JSONL). Commands go out with
//! an id and their responses come back to whoever sent them; every other
//! line that names an agent is handed on, in order, to the pump.
//!
//! Bounded everywhere: at most [`OUTGOING`] lines wait to be written, each
//! write has [`WRITE_DEADLINE`], and the reader waits for the pump (which
//! waits for the editor) rather than holding more than [`EVENTS`] lines:
//! a reader that stops makes the daemon's outbox take the pressure, where
//! its slow-client rules apply.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shard_protocol::error::{ErrorCode, WireError};
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::message::Response;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

/// Lines waiting to be written to the daemon.
const OUTGOING: usize = 64;
/// Agents' events read and not yet taken by the pump.
pub const EVENTS: usize = 256;
/// The longest one write to the daemon may take.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// The longest a command waits for its response.
const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// An event of one agent, as the daemon sent it.
#[derive(Debug)]
pub struct Routed {
    pub agent_id: String,
    pub message: ServerMessage,
}

/// Sends commands to the daemon and waits for their answers.
pub struct Daemon {
    lines: mpsc::Sender<String>,
    calls: Mutex<HashMap<String, oneshot::Sender<Response>>>,
    next: AtomicU64,
    /// The connection ended (the daemon stopped or dropped it).
    closed: AtomicBool,
    /// Which of `shard acp`'s connections this is, counted from 1.
    pub generation: u64,
}

/// What the reader hands on: an agent's event, or the end of the
/// connection of that generation.
pub enum Read {
    Event(Box<Routed>),
    Closed(u64),
}

/// Why `shard acp` cannot reach the daemon, said so that a person who sees
/// it in their editor's log knows what to do.
pub fn unreachable(home: &Path, error: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "no Shard daemon is running for {} ({error}): start one with `shard daemon` \
         (the same SHARD_HOME), then start the agent again",
        home.display()
    )
}

impl Daemon {
    /// Connects to the daemon of `home`. Its agents' events go to `events`
    /// as `wrap` makes them, in the order the daemon sent them, and last
    /// the connection's end.
    pub async fn connect<T: Send + 'static>(
        home: &Path,
        generation: u64,
        events: mpsc::Sender<T>,
        wrap: fn(Read) -> T,
    ) -> anyhow::Result<Arc<Daemon>> {
        let socket = home.join("daemon.sock");
        let stream =
            UnixStream::connect(&socket).await.map_err(|error| unreachable(home, &error))?;
        let (reader, writer) = stream.into_split();
        let (lines, outgoing) = mpsc::channel(OUTGOING);
        let daemon = Arc::new(Daemon {
            lines,
            calls: Mutex::default(),
            next: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            generation,
        });
        tokio::spawn(write_all(writer, outgoing));
        tokio::spawn(read_all(reader, Arc::downgrade(&daemon), generation, events, wrap));
        Ok(daemon)
    }

    /// Sends `message` (for `agent`, if it is a per-agent command) and
    /// returns its response's data, or the daemon's error.
    pub async fn call(
        &self,
        agent: Option<&str>,
        message: ClientMessage,
    ) -> Result<Option<serde_json::Value>, WireError> {
        let id = format!("acp-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (answer, answered) = oneshot::channel();
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).insert(id.clone(), answer);
        let mut envelope = Envelope::new(message).with_id(id.clone());
        if let Some(agent) = agent {
            envelope = envelope.for_agent(agent);
        }
        let gone = || WireError::new(ErrorCode::InternalError, "the daemon's connection closed");
        if self.lines.send(envelope.to_json()).await.is_err() {
            self.forget(&id);
            return Err(gone());
        }
        match tokio::time::timeout(CALL_DEADLINE, answered).await {
            Ok(Ok(response)) => response.outcome,
            Ok(Err(_)) => Err(gone()),
            Err(_) => {
                self.forget(&id);
                Err(WireError::new(ErrorCode::Timeout, "the daemon did not answer in time"))
            }
        }
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

async fn write_all(
    mut writer: tokio::net::unix::OwnedWriteHalf,
    mut lines: mpsc::Receiver<String>,
) {
    while let Some(line) = lines.recv().await {
        let framed = frame(&line);
        match tokio::time::timeout(WRITE_DEADLINE, writer.write_all(&framed)).await {
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

async fn read_all<T>(
    mut reader: tokio::net::unix::OwnedReadHalf,
    daemon: std::sync::Weak<Daemon>,
    generation: u64,
    events: mpsc::Sender<T>,
    wrap: fn(Read) -> T,
) {
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; 64 * 1024];
    loop {
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
            let envelope = match Envelope::<ServerMessage>::from_json(&line) {
                Ok(envelope) => envelope,
                Err(error) => {
                    tracing::debug!(%error, "a line from the daemon this build cannot read");
                    continue;
                }
            };
            match (envelope.id, envelope.agent_id, envelope.message) {
                (Some(id), _, ServerMessage::Response(response)) => {
                    let Some(daemon) = daemon.upgrade() else { return };
                    daemon.answer(&id, response);
                }
                // A new agent, told to every connection: a session's
                // delegated child asks its questions through the session.
                (_, None, message @ ServerMessage::AgentSpawned(_)) => {
                    let ServerMessage::AgentSpawned(spawned) = &message else { continue };
                    let agent_id = spawned.agent_id.clone();
                    let routed = Read::Event(Box::new(Routed { agent_id, message }));
                    let Ok(()) = events.send(wrap(routed)).await else {
                        return;
                    };
                }
                (_, Some(agent_id), message) => {
                    let routed = Read::Event(Box::new(Routed { agent_id, message }));
                    let Ok(()) = events.send(wrap(routed)).await else {
                        return;
                    };
                }
                _ => {}
            }
        }
    }
    // Whoever still waits for an answer learns the connection is gone.
    if let Some(daemon) = daemon.upgrade() {
        daemon.closed.store(true, Ordering::Release);
        daemon.calls.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
    let _ = events.send(wrap(Read::Closed(generation))).await;
}
