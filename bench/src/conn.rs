//! One client connection, over WebSocket or the unix socket: send a JSON
//! value, read the next message as text. Both carry one JSON message per
//! frame or line, so the scenarios read them the same way.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpSocket, TcpStream, UnixStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// A loopback address for the next browser connection. The daemon limits
/// bootstraps and upgrades per client address (CONTRACT.md), as it should;
/// a benchmark that opens a thousand tabs spreads them over 127.0.0.0/8 the
/// way a thousand browsers would come from their own addresses.
pub fn next_loopback() -> IpAddr {
    static OPENED: AtomicUsize = AtomicUsize::new(0);
    let index = OPENED.fetch_add(1, Ordering::Relaxed) / 40;
    let [b, c] = [(index / 250) as u8, (index % 250) as u8 + 2];
    IpAddr::V4(Ipv4Addr::new(127, 1 + b, 0, c))
}

/// How long any one read may wait before the run is called broken.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

pub enum Conn {
    Ws(Box<WebSocketStream<TcpStream>>),
    Unix { lines: BufReader<OwnedReadHalf>, writer: OwnedWriteHalf, line: String },
}

impl Conn {
    /// A WebSocket to `addr` from the local address `from` (spreading many
    /// clients over loopback addresses), offering `protocols`, with the
    /// `Origin` and `Host` a page of `origin` would send. `receive_buffer`
    /// shrinks the socket's kernel buffer (a stalled client that should be
    /// noticed soon, not after megabytes).
    pub async fn websocket(
        addr: SocketAddr,
        from: IpAddr,
        protocols: Option<&str>,
        origin: Option<&str>,
        receive_buffer: Option<u32>,
    ) -> Result<Conn> {
        let socket = TcpSocket::new_v4()?;
        if let Some(bytes) = receive_buffer {
            socket.set_recv_buffer_size(bytes)?;
        }
        socket.bind(SocketAddr::new(from, 0))?;
        let stream = socket.connect(addr).await.context("connecting")?;
        stream.set_nodelay(true)?;
        let mut request = format!("ws://{addr}/ws").into_client_request()?;
        let headers = request.headers_mut();
        if let Some(protocols) = protocols {
            headers.insert("sec-websocket-protocol", protocols.parse()?);
        }
        if let Some(origin) = origin {
            headers.insert("origin", origin.parse()?);
        }
        let (socket, _) =
            tokio_tungstenite::client_async(request, stream).await.context("WebSocket upgrade")?;
        Ok(Conn::Ws(Box::new(socket)))
    }

    pub async fn unix(path: &Path) -> Result<Conn> {
        let stream = UnixStream::connect(path).await.context("connecting to the unix socket")?;
        let (reader, writer) = stream.into_split();
        Ok(Conn::Unix { lines: BufReader::new(reader), writer, line: String::new() })
    }

    pub async fn send(&mut self, value: &Value) -> Result<()> {
        let text = value.to_string();
        match self {
            Conn::Ws(socket) => socket.send(Message::text(text)).await?,
            Conn::Unix { writer, .. } => {
                writer.write_all(text.as_bytes()).await?;
                writer.write_all(b"\n").await?;
            }
        }
        Ok(())
    }

    /// The next message's text; an error when the peer closed or went quiet.
    pub async fn recv(&mut self) -> Result<String> {
        match tokio::time::timeout(READ_TIMEOUT, self.next()).await {
            Ok(result) => result,
            Err(_) => bail!("no message for {} s", READ_TIMEOUT.as_secs()),
        }
    }

    async fn next(&mut self) -> Result<String> {
        match self {
            Conn::Ws(socket) => loop {
                match socket.next().await {
                    Some(Ok(Message::Text(text))) => return Ok(text.as_str().to_owned()),
                    Some(Ok(Message::Close(frame))) => bail!("closed: {frame:?}"),
                    Some(Ok(_)) => continue,
                    Some(Err(error)) => return Err(error.into()),
                    None => bail!("closed"),
                }
            },
            Conn::Unix { lines, line, .. } => {
                line.clear();
                if lines.read_line(line).await? == 0 {
                    bail!("closed");
                }
                Ok(line.trim_end().to_owned())
            }
        }
    }

    /// Reads until a message `matches`; returns it parsed.
    pub async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> Result<Value> {
        loop {
            let text = self.recv().await?;
            let value: Value = serde_json::from_str(&text).context("a message that is not JSON")?;
            if matches(&value) {
                return Ok(value);
            }
        }
    }

    /// Sends a command with `id` and waits for its successful response.
    pub async fn call(&mut self, mut command: Value, id: &str) -> Result<Value> {
        command["id"] = Value::from(id);
        self.send(&command).await?;
        let response =
            self.until(|message| message["type"] == "response" && message["id"] == id).await?;
        if response["success"] != true {
            bail!("{} failed: {}", command["type"], response["error"]);
        }
        Ok(response)
    }
}

/// What one reader saw of a `burst:` turn.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub deltas: u64,
    /// Bytes of the delta messages as received (frame payloads or lines).
    pub delta_bytes: u64,
    /// Whether every delta came, in order.
    pub in_order: bool,
    /// When the first delta arrived.
    pub first: Option<std::time::Instant>,
}

/// How a turn's stream reads, for [`read_ticks`]: what marks a delta, the
/// field its text is in, and what marks the turn's end.
struct Ticks {
    delta: &'static str,
    field: &'static str,
    end: &'static str,
}

/// Reads one `burst:` turn to its complete message, checking the deltas
/// `tick-1 `, `tick-2 `, … arrive in order. Looks at the text rather than
/// parsing each message, so that the reader is never what is measured.
pub async fn read_burst(conn: &mut Conn) -> Result<Seen> {
    let shard = Ticks {
        delta: "\"message_delta\"",
        field: "\"text_delta\":\"",
        end: "\"message_complete\"",
    };
    read_ticks(conn, &shard).await
}

/// Reads one `burst:` turn of an ACP agent, its lines as the relay passes
/// them on, to the prompt's answer (`stopReason`), checking the chunks'
/// text `tick-1 `, `tick-2 `, … arrive in order; like [`read_burst`], by
/// looking at the text.
pub async fn read_acp_burst(conn: &mut Conn) -> Result<Seen> {
    let acp =
        Ticks { delta: "\"agent_message_chunk\"", field: "\"text\":\"", end: "\"stopReason\"" };
    read_ticks(conn, &acp).await
}

async fn read_ticks(conn: &mut Conn, ticks: &Ticks) -> Result<Seen> {
    let mut seen = Seen { in_order: true, ..Seen::default() };
    let mut expected = String::new();
    loop {
        let text = conn.recv().await?;
        if text.contains(ticks.delta) {
            seen.first.get_or_insert_with(std::time::Instant::now);
            seen.deltas += 1;
            seen.delta_bytes += text.len() as u64;
            expected.clear();
            expected.push_str(ticks.field);
            expected.push_str("tick-");
            expected.push_str(&seen.deltas.to_string());
            expected.push_str(" \"");
            if !text.contains(expected.as_str()) {
                seen.in_order = false;
            }
        } else if text.contains(ticks.end) {
            return Ok(seen);
        }
    }
}
