//! `shard acp`'s connection to the daemon: its unix socket, spoken as any
//! local client speaks it ([`crate::upstream`]). Every line that names an
//! agent is handed on, in order, to the pump, which waits for the editor:
//! at most [`EVENTS`] lines are read and not yet taken.

use std::path::Path;
use std::sync::Arc;

use shard_protocol::{Envelope, ServerMessage};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

pub use crate::upstream::Upstream as Daemon;
use crate::upstream::{Heard, Upstream};

/// Agents' events read and not yet taken by the pump.
pub const EVENTS: usize = 256;

/// An event of one agent, as the daemon sent it.
#[derive(Debug)]
pub struct Routed {
    pub agent_id: String,
    pub message: ServerMessage,
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

/// Connects to the daemon of `home`. Its agents' events go to `events` as
/// `wrap` makes them, in the order the daemon sent them, and last the
/// connection's end.
pub async fn connect<T: Send + 'static>(
    home: &Path,
    generation: u64,
    events: mpsc::Sender<T>,
    wrap: fn(Read) -> T,
) -> anyhow::Result<Arc<Daemon>> {
    let socket = home.join("daemon.sock");
    let stream = UnixStream::connect(&socket).await.map_err(|error| unreachable(home, &error))?;
    let hear = move |line: String| hear(&line, wrap);
    let ended = wrap(Read::Closed(generation));
    Ok(Upstream::start(stream.into_split(), generation, "acp", hear, events, ended))
}

/// What the pump takes of a line: every agent's events, and the new agents
/// (a session's delegated child asks its questions through the session).
fn hear<T>(line: &str, wrap: fn(Read) -> T) -> Heard<T> {
    let envelope = match Envelope::<ServerMessage>::from_json(line) {
        Ok(envelope) => envelope,
        Err(error) => {
            tracing::debug!(%error, "a line from the daemon this build cannot read");
            return Heard::Nothing;
        }
    };
    match (envelope.id, envelope.agent_id, envelope.message) {
        (Some(id), _, ServerMessage::Response(response)) => Heard::Answer(id, response),
        (_, None, message @ ServerMessage::AgentSpawned(_)) => {
            let ServerMessage::AgentSpawned(spawned) = &message else { return Heard::Nothing };
            let agent_id = spawned.agent_id.clone();
            Heard::Event(wrap(Read::Event(Box::new(Routed { agent_id, message }))))
        }
        (_, Some(agent_id), message) => {
            Heard::Event(wrap(Read::Event(Box::new(Routed { agent_id, message }))))
        }
        _ => Heard::Nothing,
    }
}
