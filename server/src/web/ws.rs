//! `/ws`: the WebSocket upgrade (§2.2). It carries two subprotocols,
//! `shard.v1` and `shard.ticket.<TICKET>`; the ticket is consumed by this
//! presentation whatever follows. The upgraded socket is served by
//! `clients::websocket`.
//!
//! The handshake (RFC 6455 §4.2) is done here rather than by axum's
//! extractor so that the socket is tokio-tungstenite's own stream: axum's
//! wrapper sends whole messages only, and a socket's write buffer then grows
//! to the largest message it ever sent and stays that size; ours sends large
//! messages in fragments (`clients::websocket`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use shard_protocol::web::normalize_origin;
use shard_protocol::{WS_SUBPROTOCOL, WS_TICKET_PREFIX};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::auth::Session;

use super::{AppState, Effective, Web};
use crate::clients::Setup;
use crate::clients::connection::{Peer, Transport};
use crate::clients::websocket::Socket;

/// The largest message accepted from a client: a prompt with a few images.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Bytes read from a socket at a time (see the upgrade below).
const READ_BUFFER: usize = 4 * 1024;
/// Outgoing bytes buffered before a write reaches the socket; the writer
/// flushes whenever its outbox is empty anyway (clients::writer).
const WRITE_BUFFER: usize = 32 * 1024;

pub async fn upgrade(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    mut request: Request,
) -> Response {
    let headers = request.headers();
    let web = state.web.clone();
    let peer = effective.client.to_string();
    let offered = offered_protocols(headers);
    let tickets: Vec<&str> =
        offered.iter().filter_map(|protocol| protocol.strip_prefix(WS_TICKET_PREFIX)).collect();
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .map(normalize_origin)
        .unwrap_or_default();
    // Redeem first: the ticket is used up even if the upgrade then fails.
    let session = match tickets.as_slice() {
        [ticket] => web.auth.redeem_ticket(ticket, &origin),
        _ => None,
    };
    let Some(session) = session else {
        tracing::info!("websocket upgrade without a valid ticket");
        let reason = if tickets.is_empty() {
            "no ticket"
        } else {
            "invalid, used, expired or mismatched ticket"
        };
        web.audit.record(
            "upgrade_rejected",
            json!({"path": "/ws", "status": 401, "reason": reason, "peer": peer}),
        );
        let unauthorized =
            (StatusCode::UNAUTHORIZED, "a valid, unused ticket is required").into_response();
        return super::credential_failed(&web, &effective, "/ws", unauthorized);
    };
    if !offered.iter().any(|protocol| protocol == WS_SUBPROTOCOL) {
        return (StatusCode::BAD_REQUEST, "the shard.v1 subprotocol is required").into_response();
    }
    let accept = match handshake(request.method(), headers) {
        Ok(accept) => accept,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(on_upgrade) = request.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return (StatusCode::UPGRADE_REQUIRED, "this connection cannot be upgraded")
            .into_response();
    };
    let Some(slot) = web.session_sockets.open(&session.session_id) else {
        return (StatusCode::SERVICE_UNAVAILABLE, "this browser session has too many connections")
            .into_response();
    };
    let Ok(permit) = web.connections.clone().try_acquire_owned() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many connections").into_response();
    };
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE))
            // tungstenite's default read buffer is a zeroed 128 KiB per
            // connection, the most of an idle connection's memory; browsers
            // send small frames, and larger ones are still read whole, in
            // more reads.
            .read_buffer_size(READ_BUFFER)
            .write_buffer_size(WRITE_BUFFER);
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        serve(socket, web, session, peer).await;
        drop((permit, slot));
    });
    switching_protocols(accept)
}

/// Every subprotocol the client offered, tickets included.
fn offered_protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|protocol| protocol.trim().to_owned())
        .collect()
}

/// The `101` that completes the handshake, naming only `shard.v1`.
fn switching_protocols(accept: String) -> Response {
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(WS_SUBPROTOCOL));
    // Base64, so always a valid header value.
    if let Ok(accept) = HeaderValue::try_from(accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// The checks of an opening handshake (RFC 6455 §4.2.1); the
/// `Sec-WebSocket-Accept` it is answered with.
fn handshake(method: &Method, headers: &HeaderMap) -> Result<String, (StatusCode, &'static str)> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|value| value.split(',').any(|part| part.trim().eq_ignore_ascii_case(token)))
    };
    if method != Method::GET {
        return Err((StatusCode::METHOD_NOT_ALLOWED, "a WebSocket upgrade is a GET"));
    }
    if !has_token(header::CONNECTION, "upgrade") {
        return Err((StatusCode::BAD_REQUEST, "`Connection` must include `upgrade`"));
    }
    if !has_token(header::UPGRADE, "websocket") {
        return Err((StatusCode::BAD_REQUEST, "`Upgrade` must be `websocket`"));
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).is_none_or(|version| version != "13") {
        return Err((StatusCode::BAD_REQUEST, "`Sec-WebSocket-Version` must be 13"));
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return Err((StatusCode::BAD_REQUEST, "`Sec-WebSocket-Key` is missing"));
    };
    Ok(derive_accept_key(key.as_bytes()))
}

async fn serve(socket: Socket, web: Arc<Web>, session: Session, address: String) {
    let setup = Setup {
        daemon: web.daemon.clone(),
        hub: web.hub.clone(),
        transport: Transport::WebSocket,
        peer: Peer { principal_id: Some(session.principal_id), address: Some(address), pid: None },
        session: Some(session.session_id),
        limits: web.limits,
        ping_interval: Some(web.ping_interval),
    };
    crate::clients::websocket::serve(socket, setup).await;
}

/// How many WebSockets each browser session has open, against a cap.
pub struct SessionSockets {
    limit: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One session's open socket, counted until dropped.
pub struct SessionSocket {
    open: Arc<Mutex<HashMap<String, usize>>>,
    session_id: String,
}

impl SessionSockets {
    pub fn new(limit: usize) -> Self {
        Self { limit, open: Arc::default() }
    }

    /// A slot for one more socket of `session_id`, unless it has its limit.
    pub fn open(&self, session_id: &str) -> Option<SessionSocket> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(session_id.to_owned()).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(SessionSocket { open: self.open.clone(), session_id: session_id.to_owned() })
    }
}

impl Drop for SessionSocket {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.session_id) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.session_id);
            }
        }
    }
}
