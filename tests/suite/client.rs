//! Protocol clients of a running daemon: over the unix socket (JSONL) and
//! over `/ws` after the full browser flow (enroll, bootstrap, ticket). Both
//! deliver decoded JSON messages through a channel, so tests read them the
//! same way.

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::header::{CONTENT_TYPE, COOKIE, HOST, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::support::Daemon;

const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Why and how a connection ended.
#[derive(Debug, Clone)]
pub enum Ended {
    /// A WebSocket close frame with its code and reason.
    Closed(u16, String),
    /// The stream just ended.
    Eof,
}

pub struct Client {
    outgoing: mpsc::UnboundedSender<String>,
    incoming: mpsc::UnboundedReceiver<Result<Value, Ended>>,
    /// Set while the test pretends to be a stalled client.
    pub seen: Vec<Value>,
}

impl Client {
    /// A unix-socket client; reads and checks `hello`.
    pub async fn unix(socket: &Path) -> Client {
        Self::unix_paced(socket, None).await
    }

    /// A unix client that stops reading after `stall_after` messages until
    /// the returned gate is opened (for backpressure tests).
    pub async fn unix_paced(
        socket: &Path,
        stall: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Client {
        let stream = UnixStream::connect(socket).await.expect("connect to daemon.sock");
        let (reader, writer) = stream.into_split();
        Self::lines(reader, writer, stall).await
    }

    /// A client speaking JSONL over any byte stream (the unix socket, or
    /// `shard bridge`'s stdio); reads and checks `hello`.
    pub async fn lines(
        reader: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        mut writer: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
        stall: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Client {
        let (outgoing, mut to_send) = mpsc::unbounded_channel::<String>();
        let (deliver, incoming) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(line) = to_send.recv().await {
                if writer.write_all(line.as_bytes()).await.is_err()
                    || writer.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            let mut stall = stall;
            loop {
                if let Some(gate) = stall.as_mut() {
                    while !*gate.borrow() {
                        if gate.changed().await.is_err() {
                            return;
                        }
                    }
                }
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        let value = serde_json::from_str(&line).unwrap_or(Value::Null);
                        if deliver.send(Ok(value)).is_err() {
                            return;
                        }
                    }
                    _ => {
                        let _ = deliver.send(Err(Ended::Eof));
                        return;
                    }
                }
            }
        });
        let mut client = Client { outgoing, incoming, seen: Vec::new() };
        let hello = client.expect("hello").await;
        assert_eq!(
            hello["capabilities"],
            json!(["unix", "streaming-deltas", "event-seq", "workspace-actions"])
        );
        client
    }

    /// A WebSocket client holding `ticket`; reads and checks `hello`.
    pub async fn websocket(daemon: &Daemon, ticket: &str) -> Client {
        let socket =
            connect_ws(daemon, Some(ticket), &daemon.base).await.expect("websocket upgrade");
        Self::over(socket).await
    }

    /// A client on an upgraded WebSocket; reads and checks `hello`.
    pub async fn over(
        socket: tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) -> Client {
        let (mut sink, mut stream) = socket.split();
        let (outgoing, mut to_send) = mpsc::unbounded_channel::<String>();
        let (deliver, incoming) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(text) = to_send.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                match message {
                    Ok(Message::Text(text)) => {
                        let value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                        if deliver.send(Ok(value)).is_err() {
                            return;
                        }
                    }
                    Ok(Message::Close(frame)) => {
                        let ended = frame.map_or(Ended::Eof, |frame| {
                            Ended::Closed(frame.code.into(), frame.reason.to_string())
                        });
                        let _ = deliver.send(Err(ended));
                        return;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            let _ = deliver.send(Err(Ended::Eof));
        });
        let mut client = Client { outgoing, incoming, seen: Vec::new() };
        let hello = client.expect("hello").await;
        assert_eq!(
            hello["capabilities"],
            json!(["websocket", "streaming-deltas", "event-seq", "workspace-actions"])
        );
        client
    }

    pub fn send(&self, message: Value) {
        let _ = self.outgoing.send(message.to_string());
    }

    pub fn send_raw(&self, text: &str) {
        let _ = self.outgoing.send(text.to_owned());
    }

    pub async fn next(&mut self) -> Value {
        match tokio::time::timeout(EVENT_TIMEOUT, self.incoming.recv()).await {
            Ok(Some(Ok(value))) => {
                self.seen.push(value.clone());
                value
            }
            Ok(Some(Err(ended))) => {
                panic!("connection ended ({ended:?}); seen: {:#?}", self.tail())
            }
            Ok(None) => panic!("connection gone; seen: {:#?}", self.tail()),
            Err(_) => panic!("no message within {EVENT_TIMEOUT:?}; seen: {:#?}", self.tail()),
        }
    }

    fn tail(&self) -> Vec<String> {
        self.seen.iter().rev().take(10).rev().map(Value::to_string).collect()
    }

    /// Waits for the connection to end; returns how.
    pub async fn ended(&mut self) -> Ended {
        loop {
            match tokio::time::timeout(EVENT_TIMEOUT, self.incoming.recv()).await {
                Ok(Some(Ok(value))) => self.seen.push(value),
                Ok(Some(Err(ended))) => return ended,
                Ok(None) => return Ended::Eof,
                Err(_) => panic!("the connection did not end"),
            }
        }
    }

    pub async fn expect(&mut self, kind: &str) -> Value {
        let message = self.next().await;
        assert_eq!(message["type"], kind, "expected {kind}, got {message}");
        message
    }

    /// Reads until `matches`; returns everything read, the match last.
    pub async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut read = Vec::new();
        loop {
            let message = self.next().await;
            let done = matches(&message);
            read.push(message);
            if done {
                return read;
            }
        }
    }

    /// Sends a command with `id`; returns its response (events before it are
    /// kept in `seen`).
    pub async fn call(&mut self, id: &str, mut command: Value) -> Value {
        command["id"] = json!(id);
        self.send(command);
        let read = self.until(|message| message["type"] == "response" && message["id"] == id).await;
        read.last().cloned().expect("response")
    }

    /// [`Client::call`] for a command that may take up to `within` to
    /// answer, with nothing else arriving meanwhile.
    pub async fn call_within(&mut self, id: &str, mut command: Value, within: Duration) -> Value {
        command["id"] = json!(id);
        self.send(command);
        let answer = async {
            loop {
                match self.incoming.recv().await {
                    Some(Ok(value)) if value["type"] == "response" && value["id"] == id => {
                        return value;
                    }
                    Some(Ok(value)) => self.seen.push(value),
                    other => panic!("connection ended: {other:?}"),
                }
            }
        };
        tokio::time::timeout(within, answer).await.expect("an answer in time")
    }

    pub async fn silent_for(&mut self, millis: u64) {
        if let Ok(Some(message)) =
            tokio::time::timeout(Duration::from_millis(millis), self.incoming.recv()).await
        {
            panic!("expected silence, got {message:?}");
        }
    }

    /// Creates an agent in `cwd`; returns its id.
    pub async fn create(&mut self, cwd: &Path, name: &str) -> String {
        let response = self
            .call(
                "create",
                json!({"type": "agent.create", "cwd": cwd.display().to_string(), "name": name}),
            )
            .await;
        assert_eq!(response["success"], true, "{response}");
        response["data"]["agent_id"].as_str().expect("agent id").to_owned()
    }

    /// Attaches and reads the response and the sync; returns the sync.
    /// Nothing of `agent_id` may come between them (§6.4); another agent this
    /// connection is attached to may go on streaming meanwhile.
    pub async fn attach(&mut self, agent_id: &str, role: &str) -> Value {
        let response = self
            .call("attach", json!({"type": "agent.attach", "agent_id": agent_id, "role": role}))
            .await;
        assert_eq!(response["success"], true, "{response}");
        loop {
            let message = self.next().await;
            if message["agent_id"] == agent_id || message["agent_id"].is_null() {
                assert_eq!(message["type"], "sync", "expected sync, got {message}");
                return message;
            }
        }
    }

    /// Events of `agent_id` only, until one matches.
    pub async fn until_agent(
        &mut self,
        agent_id: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Vec<Value> {
        self.until(|message| message["agent_id"] == agent_id && matches(message)).await
    }

    /// Reads until a permission request of `agent_id` arrives; returns it.
    pub async fn permission_request(&mut self, agent_id: &str) -> Value {
        let read = self.until_agent(agent_id, |message| message["type"] == "permission_request");
        read.await.pop().expect("a permission request")
    }
}

/// A browser: enrolls with `code` and keeps its cookie.
pub struct Browser {
    /// `shard_session=…`, as the browser would send it back.
    pub cookie: String,
    /// The browser secret `/enroll` answered with, which the page keeps in
    /// its origin's storage and sends to `/bootstrap`.
    pub secret: String,
}

/// The `name=value` of the cookie an answer sets (an enrollment's).
pub fn session_cookie(response: &reqwest::Response) -> String {
    let set_cookie = response.headers()[SET_COOKIE].to_str().expect("ascii");
    set_cookie.split(';').next().expect("cookie").to_owned()
}

impl Browser {
    pub async fn enroll(daemon: &Daemon, code: &str) -> Browser {
        let response = post(daemon, "/enroll", Some(json!({"code": code})), None).await;
        assert_eq!(response.status(), 200, "enrollment");
        let cookie = session_cookie(&response);
        let answer: Value = response.json().await.expect("json");
        let secret = answer["browser_secret"].as_str().expect("browser_secret").to_owned();
        Browser { cookie, secret }
    }

    /// `POST /bootstrap` as the page sends it: the cookie and the secret.
    pub async fn bootstrap(&self, daemon: &Daemon) -> reqwest::Response {
        reqwest::Client::new()
            .post(daemon.url("/bootstrap"))
            .header(ORIGIN, &daemon.base)
            .header(COOKIE, &self.cookie)
            .header("shard-browser-secret", &self.secret)
            .send()
            .await
            .expect("POST")
    }

    pub async fn ticket(&self, daemon: &Daemon) -> String {
        let response = self.bootstrap(daemon).await;
        assert_eq!(response.status(), 200, "bootstrap");
        let body: Value = response.json().await.expect("json");
        body["ticket"].as_str().expect("ticket").to_owned()
    }

    pub async fn connect(&self, daemon: &Daemon) -> Client {
        let ticket = self.ticket(daemon).await;
        Client::websocket(daemon, &ticket).await
    }
}

/// The `Max-Age` of a `Set-Cookie`, in seconds, if it has one.
pub fn max_age(set_cookie: &str) -> Option<i64> {
    set_cookie.split(';').find_map(|attribute| {
        let (name, value) = attribute.trim().split_once('=')?;
        name.eq_ignore_ascii_case("max-age").then(|| value.parse().ok()).flatten()
    })
}

/// A `POST` as a same-origin page would send it.
pub async fn post(
    daemon: &Daemon,
    path: &str,
    body: Option<Value>,
    cookie: Option<&str>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(daemon.url(path)).header(ORIGIN, &daemon.base);
    if let Some(body) = body {
        request = request.header(CONTENT_TYPE, "application/json").body(body.to_string());
    }
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    request.send().await.expect("POST")
}

/// A raw WebSocket upgrade with an optional ticket and a chosen Origin.
pub async fn connect_ws(
    daemon: &Daemon,
    ticket: Option<&str>,
    origin: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    tokio_tungstenite::tungstenite::Error,
> {
    let mut request = format!("ws://{}/ws", daemon.host()).into_client_request().expect("request");
    let protocols = match ticket {
        Some(ticket) => format!("shard.v1, shard.ticket.{ticket}"),
        None => "shard.v1".to_owned(),
    };
    let headers = request.headers_mut();
    headers.insert("sec-websocket-protocol", protocols.parse().expect("header"));
    headers.insert(ORIGIN, origin.parse().expect("header"));
    headers.insert(HOST, daemon.host().parse().expect("header"));
    tokio_tungstenite::connect_async(request).await.map(|(socket, response)| {
        assert_eq!(response.headers()["sec-websocket-protocol"], "shard.v1");
        socket
    })
}
