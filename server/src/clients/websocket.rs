//! The WebSocket transport (§2.2) after the upgrade: one JSON message per
//! text frame, pings from the server, and a client that stops answering
//! them is dropped. The upgrade itself (ticket, Host, Origin) is the web
//! folder's.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};

use super::writer::{Frame, FrameSink, Goodbye};
use super::{FrameSource, Incoming, Setup};

/// Close code for a policy close (too slow, logged out, shutdown).
const POLICY: u16 = 1008;
/// Close code for a client that went silent.
const GOING_AWAY: u16 = 1001;
/// Close reasons must fit a control frame (123 bytes).
const MAX_REASON_CHARS: usize = 120;

/// Serves an upgraded socket until it ends.
pub async fn serve(socket: WebSocket, setup: Setup) {
    let (sink, stream) = socket.split();
    super::serve(Frames(stream), Sink(sink), setup).await;
}

struct Frames(SplitStream<WebSocket>);

impl FrameSource for Frames {
    async fn next(&mut self) -> Incoming {
        match self.0.next().await {
            Some(Ok(Message::Text(text))) => Incoming::Text(text.as_str().to_owned()),
            Some(Ok(Message::Binary(_))) => {
                Incoming::Invalid("binary frames are not used; send JSON text frames".to_owned())
            }
            Some(Ok(Message::Pong(_))) => Incoming::Pong,
            Some(Ok(Message::Ping(_))) => Incoming::Nothing,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => Incoming::End,
        }
    }
}

struct Sink(SplitSink<WebSocket, Message>);

fn lost(error: axum::Error) -> std::io::Error {
    std::io::Error::other(error)
}

impl FrameSink for Sink {
    async fn feed(&mut self, frame: Frame) -> std::io::Result<()> {
        let message = match frame {
            // Every frame is one serialized message, so always UTF-8.
            Frame::Data(text) => Message::Text(text),
            Frame::Ping => Message::Ping(Default::default()),
        };
        self.0.feed(message).await.map_err(lost)
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().await.map_err(lost)
    }

    async fn close(&mut self, goodbye: Goodbye) -> std::io::Result<()> {
        let (code, reason) = match goodbye {
            Goodbye::Policy(reason) => (POLICY, reason.chars().take(MAX_REASON_CHARS).collect()),
            Goodbye::Silent => (GOING_AWAY, "no pong".to_owned()),
        };
        let frame = CloseFrame { code, reason: reason.into() };
        self.0.send(Message::Close(Some(frame))).await.map_err(lost)?;
        self.0.close().await.map_err(lost)
    }
}
