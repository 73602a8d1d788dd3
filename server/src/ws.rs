//! `/ws`: the WebSocket transport (§2.2). The upgrade carries two
//! subprotocols, `shard.v1` and `shard.ticket.<TICKET>`; the ticket is
//! consumed by this presentation whatever follows. One JSON message per text
//! frame; pings every 30 s, and a client that stops answering is dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use shard_protocol::{WS_SUBPROTOCOL, WS_TICKET_PREFIX};

use crate::auth::Session;
use crate::connection::Connection;
use crate::http::{AppState, Effective, Web, normalize_origin};
use crate::hub::{DEFAULT_OUTBOX_BYTES, outbox};

/// How often the server pings by default (§2.2: every 30 s).
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A client that has answered no ping for this many intervals is dead: one
/// missed pong may be a busy tab, two and a half are not.
const PONG_INTERVALS: f64 = 2.5;
/// The largest message accepted from a client: a prompt with a few images.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

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
        return crate::http::too_many(wait);
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
        .on_upgrade(move |socket| async move {
            serve(socket, web, session).await;
            drop(permit);
        })
}

fn now_ms() -> u64 {
    crate::host::now_ms()
}

async fn serve(socket: WebSocket, web: Arc<Web>, session: Session) {
    let (mut sink, mut stream) = socket.split();
    let (outbox, mut queue) = outbox(web.hub.next_id(), DEFAULT_OUTBOX_BYTES);
    web.hub.register(outbox.clone(), Some(session.session_id.clone()));
    let mut connection = Connection::new(outbox.clone(), web.daemon.clone(), "web", false);
    connection.hello("websocket");
    let last_pong = Arc::new(AtomicU64::new(now_ms()));
    let interval = web.ping_interval;
    let writer = {
        let outbox = outbox.clone();
        let last_pong = last_pong.clone();
        tokio::spawn(async move {
            let deadline =
                u64::try_from(interval.mul_f64(PONG_INTERVALS).as_millis()).unwrap_or(u64::MAX);
            let mut ping = tokio::time::interval(interval);
            ping.tick().await;
            loop {
                tokio::select! {
                    bytes = queue.recv() => {
                        let Some(bytes) = bytes else { break };
                        let Ok(text) = Utf8Bytes::try_from(bytes) else { continue };
                        if sink.send(Message::Text(text)).await.is_err() {
                            break;
                        }
                    }
                    () = outbox.closing.cancelled() => {
                        let reason = outbox.close_reason().unwrap_or_else(|| "closing".to_owned());
                        // 1008: policy (too slow, logged out); reasons fit 123 bytes.
                        let reason: String = reason.chars().take(120).collect();
                        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1008, reason: reason.into() }))).await;
                        break;
                    }
                    _ = ping.tick() => {
                        let silent = now_ms().saturating_sub(last_pong.load(Ordering::Relaxed));
                        if silent > deadline {
                            tracing::info!("dropping a websocket client that stopped answering pings");
                            let _ = sink.send(Message::Close(Some(CloseFrame { code: 1001, reason: "no pong".into() }))).await;
                            break;
                        }
                        if sink.send(Message::Ping(Default::default())).await.is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = sink.close().await;
        })
    };
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = outbox.closing.cancelled() => break,
        };
        match message {
            Some(Ok(Message::Text(text))) => connection.frame(text.as_str()).await,
            Some(Ok(Message::Binary(_))) => {
                connection.frame_error("binary frames are not used; send JSON text frames")
            }
            Some(Ok(Message::Pong(_))) => last_pong.store(now_ms(), Ordering::Relaxed),
            Some(Ok(Message::Ping(_))) => {}
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
        }
    }
    connection.closed().await;
    web.hub.unregister(outbox.id);
    outbox.close("connection closed");
    let _ = writer.await;
}
