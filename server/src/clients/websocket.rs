//! The WebSocket transport (§2.2) after the upgrade: one JSON message per
//! text message, pings from the server, and a client that stops answering
//! them is dropped. The upgrade itself (ticket, Host, Origin) is the web
//! folder's.
//!
//! A message larger than [`FRAGMENT`] goes out in fragments of that size
//! (RFC 6455 §5.4; browsers reassemble them): the socket's write buffer then
//! never holds more than a fragment and a batch, however large the message
//! (a long `message_complete`, a `sync` of a long session). Sent whole, it
//! would grow to the largest message the connection ever carried, and stay
//! that size as long as the connection lives.

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::Frame as WireFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};

use super::writer::{Frame, FrameSink, Goodbye};
use super::{FrameSource, Incoming, Setup};

/// Close code for a policy close (too slow, logged out, revoked).
const POLICY: u16 = 1008;
/// Close code for a daemon shutting down, and for a client that went
/// silent (RFC 6455 §7.4.1: an endpoint going away).
const GOING_AWAY: u16 = 1001;
/// Close reasons must fit a control frame (123 bytes).
const MAX_REASON_CHARS: usize = 120;
/// The largest frame written: larger messages are fragmented. 16 KiB made
/// S6's 851 KB `sync` take twice as long at its worst (53 fragments, max
/// 53–59 ms against 29 ms whole); 64 KiB costs nothing measurable there
/// and still bounds a connection's write buffer to about 100 KiB.
pub const FRAGMENT: usize = 64 * 1024;

/// An upgraded socket.
pub type Socket =
    tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// Serves an upgraded socket until it ends.
pub async fn serve(socket: Socket, setup: Setup) {
    let (sink, stream) = socket.split();
    super::serve(Frames(stream), Sink(sink), setup).await;
}

struct Frames(SplitStream<Socket>);

impl FrameSource for Frames {
    async fn next(&mut self) -> Incoming {
        match self.0.next().await {
            Some(Ok(Message::Text(text))) => Incoming::Text(text.as_str().to_owned()),
            Some(Ok(Message::Binary(_))) => {
                Incoming::Invalid("binary frames are not used; send JSON text frames".to_owned())
            }
            Some(Ok(Message::Pong(_))) => Incoming::Pong,
            // Pings are answered by tungstenite itself; raw frames never come
            // out of a reader.
            Some(Ok(Message::Ping(_) | Message::Frame(_))) => Incoming::Nothing,
            Some(Ok(Message::Close(_)) | Err(_)) | None => Incoming::End,
        }
    }
}

struct Sink(SplitSink<Socket, Message>);

fn lost(error: tokio_tungstenite::tungstenite::Error) -> std::io::Error {
    std::io::Error::other(error)
}

impl FrameSink for Sink {
    async fn feed(&mut self, frame: Frame) -> std::io::Result<()> {
        let text = match frame {
            Frame::Data(text) => text,
            Frame::Ping => return self.0.feed(Message::Ping(Bytes::new())).await.map_err(lost),
        };
        // Every message is one serialized message, so always UTF-8.
        if text.len() <= FRAGMENT {
            return self.0.feed(Message::Text(text)).await.map_err(lost);
        }
        let bytes = Bytes::from(text);
        let mut start = 0;
        while start < bytes.len() {
            let end = (start + FRAGMENT).min(bytes.len());
            let opcode = if start == 0 { Data::Text } else { Data::Continue };
            let fragment = WireFrame::message(
                bytes.slice(start..end),
                OpCode::Data(opcode),
                end == bytes.len(),
            );
            self.0.feed(Message::Frame(fragment)).await.map_err(lost)?;
            start = end;
        }
        Ok(())
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().await.map_err(lost)
    }

    async fn close(&mut self, goodbye: Goodbye) -> std::io::Result<()> {
        let (code, reason) = match goodbye {
            Goodbye::Policy(reason) => (POLICY, reason.chars().take(MAX_REASON_CHARS).collect()),
            Goodbye::GoingAway(reason) => {
                (GOING_AWAY, reason.chars().take(MAX_REASON_CHARS).collect())
            }
            Goodbye::Silent => (GOING_AWAY, "no pong".to_owned()),
        };
        let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
        self.0.send(Message::Close(Some(frame))).await.map_err(lost)?;
        self.0.close().await.map_err(lost)
    }
}
