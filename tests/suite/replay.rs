//! A local HTTP server that plays recorded provider streams back, one per
//! request, and keeps every request it received for the test to inspect.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;

/// One canned answer.
pub enum Reply {
    /// A `text/event-stream` body, from `tests/fixtures/providers/`.
    Stream(&'static str),
    /// A plain HTTP error.
    Status(u16, &'static str),
    /// A `text/event-stream` body the test made (too large or too hostile
    /// for a fixture file).
    Body(String),
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    captured: Vec<Captured>,
}

pub struct ReplayServer {
    pub base: String,
    script: Arc<Mutex<Script>>,
}

pub fn fixture(name: &str) -> String {
    let path = format!("{}/../tests/fixtures/providers/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

impl ReplayServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Mutex::new(Script { replies: replies.into(), captured: Vec::new() }));
        let app = Router::new().fallback(answer).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { base, script }
    }

    pub fn captured(&self) -> Vec<Captured> {
        self.script.lock().expect("lock").captured.clone()
    }
}

async fn answer(
    State(script): State<Arc<Mutex<Script>>>,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let reply = {
        let mut script = script.lock().expect("lock");
        script.captured.push(Captured { path: uri.path().to_owned(), headers, body });
        script.replies.pop_front()
    };
    let (status, content_type, text) = match reply {
        Some(Reply::Stream(name)) => (200, "text/event-stream", fixture(name)),
        Some(Reply::Status(status, text)) => (status, "application/json", text.to_owned()),
        Some(Reply::Body(text)) => (200, "text/event-stream", text),
        None => (500, "text/plain", "the replay script ran out of replies".to_owned()),
    };
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", content_type)
        .body(Body::from(text))
        .expect("response")
}
