//! `/ws`: the WebSocket upgrade (§2.2). It carries two subprotocols,
//! `shard.v1` and `shard.ticket.<TICKET>`; the ticket is consumed by this
//! presentation whatever follows. The upgraded socket is served by
//! `clients::websocket`.

use std::sync::Arc;

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shard_protocol::{WS_SUBPROTOCOL, WS_TICKET_PREFIX};

use super::auth::Session;
use super::{AppState, Effective, Web, normalize_origin};
use crate::clients::Setup;
use crate::clients::connection::Transport;

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
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let web = state.web.clone();
    let peer = effective.peer.ip().to_string();
    if let Some(wait) = web.upgrade_limit.take(effective.peer.ip()) {
        web.audit.record("rate_limited", json!({"route": "/ws", "peer": peer}));
        return super::too_many(wait);
    }
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|protocol| protocol.trim().to_owned())
        .collect();
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
        return (StatusCode::UNAUTHORIZED, "a valid, unused ticket is required").into_response();
    };
    if !offered.iter().any(|protocol| protocol == WS_SUBPROTOCOL) {
        return (StatusCode::BAD_REQUEST, "the shard.v1 subprotocol is required").into_response();
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let Ok(permit) = web.connections.clone().try_acquire_owned() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "too many connections").into_response();
    };
    upgrade
        .protocols([WS_SUBPROTOCOL])
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        // tungstenite's default read buffer is a zeroed 128 KiB per
        // connection, the most of an idle connection's memory; browsers send
        // small frames, and larger ones are still read whole, in more reads.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .on_upgrade(move |socket| async move {
            serve(socket, web, session).await;
            drop(permit);
        })
}

async fn serve(socket: WebSocket, web: Arc<Web>, session: Session) {
    let setup = Setup {
        daemon: web.daemon.clone(),
        hub: web.hub.clone(),
        transport: Transport::WebSocket,
        session: Some(session.session_id),
        limits: web.limits,
        ping_interval: Some(web.ping_interval),
    };
    crate::clients::websocket::serve(socket, setup).await;
}
