//! Client connections: one [`connection`]'s protocol state, its bounded
//! [`outbox`], the [`hub`] of every open connection, the two transports
//! ([`unix`] and [`websocket`]) and the one [`writer`] both use.
//!
//! A transport only adapts its socket: a [`FrameSource`] that yields what
//! the client sent and a [`writer::FrameSink`] that sends. [`serve`] runs
//! the rest the same way for both: `hello`, frames in, the writer out, and
//! on any ending (the client left, it was too slow, it stopped reading, it
//! was logged out, the daemon stops) the hosts are told, the connection is
//! unregistered and the socket released.

pub mod connection;
pub mod hub;
pub mod outbox;
pub mod unix;
pub mod websocket;
pub mod writer;

use std::sync::Arc;
use std::time::Duration;

use self::connection::{Connection, Transport};
use self::hub::Hub;
use self::outbox::outbox;
use self::writer::{FrameSink, Liveness};
use crate::commands::Daemon;

/// One thing a client sent.
pub enum Incoming {
    /// A text frame or a JSONL line.
    Text(String),
    /// Something that is not a frame (binary, over-long, not UTF-8): why.
    Invalid(String),
    /// A WebSocket pong: the client is alive.
    Pong,
    /// Nothing for the protocol (a ping, answered by the transport).
    Nothing,
    /// The client closed, or the socket failed.
    End,
}

/// A transport's receiving half.
pub trait FrameSource: Send {
    fn next(&mut self) -> impl Future<Output = Incoming> + Send;
}

/// How connections are served: budgets and deadlines.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes a client may have queued before it is dropped as too slow.
    pub outbox_bytes: usize,
    /// How long one write may wait for the client.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { outbox_bytes: outbox::DEFAULT_OUTBOX_BYTES, write_timeout: writer::WRITE_TIMEOUT }
    }
}

/// Everything a connection needs besides its socket.
pub struct Setup {
    pub daemon: Arc<dyn Daemon>,
    pub hub: Arc<Hub>,
    pub transport: Transport,
    /// The browser session behind a WebSocket (for logout and revocation).
    pub session: Option<String>,
    /// Who is connecting, for the record of the answers it gives.
    pub peer: connection::Peer,
    pub limits: Limits,
    /// WebSocket pings: how often, and the client is dropped after 2.5
    /// silent intervals.
    pub ping_interval: Option<Duration>,
}

/// Serves one connection until it ends, whatever ends it.
pub async fn serve(mut source: impl FrameSource, sink: impl FrameSink + 'static, setup: Setup) {
    let Setup { daemon, hub, transport, session, peer, limits, ping_interval } = setup;
    let _served = hub.serving();
    let (outbox, queue) = outbox(hub.next_id(), limits.outbox_bytes);
    hub.register(outbox.clone(), session);
    let mut connection = Connection::new(outbox.clone(), daemon, transport, peer);
    connection.hello();
    let liveness = ping_interval.map(Liveness::new);
    let writer = tokio::spawn(writer::run(
        sink,
        queue,
        outbox.clone(),
        limits.write_timeout,
        liveness.clone(),
    ));
    loop {
        let incoming = tokio::select! {
            biased;
            () = outbox.closed() => break,
            incoming = source.next() => incoming,
        };
        match incoming {
            Incoming::Text(text) => connection.frame(&text),
            Incoming::Invalid(why) => connection.frame_error(&why),
            Incoming::Pong => {
                if let Some(liveness) = &liveness {
                    liveness.pong();
                }
            }
            Incoming::Nothing => {}
            Incoming::End => break,
        }
    }
    connection.closed().await;
    hub.unregister(outbox.id());
    // What was already answered still goes out (a CLI may close its half
    // and wait for the answer); nothing new is queued. Bounded: every write
    // has its deadline.
    outbox.seal();
    let _ = writer.await;
    drop(source);
}
