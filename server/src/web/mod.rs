//! The daemon's HTTP surface (CONTRACT.md "HTTP routes"): the Leptos app and
//! its bundle, `/enroll`, `/bootstrap`, `/logout` and the `/ws` upgrade, with
//! what guards them: [`auth`] (enrollment, sessions, tickets), [`limiter`]
//! (rate limits), [`audit`] (the audit log), [`config`] (loopback, direct
//! and proxy modes, validated before binding), [`assets`] (the embedded
//! bundle) and [`ws`] (the upgrade; the socket is then `clients`').
//!
//! Every request passes [`guard`] first: the Host must be exactly the
//! expected one (DNS rebinding), and state-changing requests and `/ws` must
//! come from an allowed Origin (another site's page in the same browser).
//! Either failure is a 400 before anything else is looked at.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Extension, FromRef, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use leptos::prelude::LeptosOptions;
use serde_json::json;
use shard_app::{OUTPUT_NAME, not_found_shell, shell};
use shard_protocol::web::{Bootstrap, EnrollRequest};
use tower_http::set_header::SetResponseHeaderLayer;

pub mod assets;
pub mod audit;
pub mod auth;
pub mod config;
pub mod limiter;
pub mod ws;

use self::audit::Audit;
use self::auth::{Auth, EnrollError, Refused, Session, TICKET_TTL};
use self::config::WebConfig;
use self::limiter::Limiter;
use crate::clients::Limits;
use crate::clients::connection::Daemon;
use crate::clients::hub::Hub;

/// `frame-ancestors 'none'`: no other site may frame the client (clickjacking
/// a permission dialog is the attack this stops).
const CONTENT_SECURITY_POLICY: &str = "frame-ancestors 'none'";
/// The session cookie on a plain-http origin (loopback).
pub const COOKIE: &str = "shard_session";
/// Its `__Host-` form, which only ever travels over https.
pub const SECURE_COOKIE: &str = "__Host-shard_session";

/// What the web routes need.
pub struct Web {
    pub auth: Arc<Auth>,
    pub hub: Arc<Hub>,
    pub daemon: Arc<dyn Daemon>,
    pub audit: Arc<Audit>,
    pub config: WebConfig,
    /// The Host every request must carry: the pinned public host (remote) or
    /// `127.0.0.1:PORT`.
    pub expected_host: String,
    /// Allowed Origins, normalized.
    pub allowed_origins: Vec<String>,
    /// Browser connection slots (`--max-connections`); local clients have
    /// their own.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// How often WebSocket clients are pinged.
    pub ping_interval: std::time::Duration,
    /// Outbox budget and write deadline of each connection.
    pub limits: Limits,
    /// `/bootstrap` calls per peer per minute.
    pub bootstrap_limit: Limiter,
    /// WebSocket upgrade attempts per peer per minute.
    pub upgrade_limit: Limiter,
}

/// How a request reached the daemon, decided once by [`guard`]: the scheme
/// the browser used (https only through a trusted proxy) and the TCP peer.
#[derive(Debug, Clone)]
pub struct Effective {
    pub https: bool,
    pub peer: SocketAddr,
}

impl Effective {
    pub fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub options: LeptosOptions,
    pub web: Arc<Web>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.options.clone()
    }
}

/// Builds the router for a daemon listening on `local`.
pub fn router(local: SocketAddr, web: Arc<Web>) -> Router {
    let options = LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_pkg_dir("pkg")
        .site_addr(local)
        .build();
    // Server rendering spawns its tasks on whatever executor Leptos is given.
    let _ = any_spawner::Executor::init_tokio();
    let state = AppState { options, web: web.clone() };
    Router::new()
        .route("/", get(home))
        .route("/pkg/{*path}", get(assets::pkg))
        .route("/favicon.ico", get(assets::favicon))
        .route("/enroll", post(enroll))
        .route("/bootstrap", post(bootstrap))
        .route("/logout", post(logout))
        .route("/ws", get(ws::upgrade))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(web, guard))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .with_state(state)
}

/// The dashboard, rendered for the browser to hydrate.
async fn home(State(options): State<LeptosOptions>, request: Request) -> Response {
    let render = leptos_axum::render_app_to_stream(move || shell(options.clone()));
    render(request).await.into_response()
}

/// Any other path: a plain not-found page, answered as a 404.
async fn not_found(request: Request) -> Response {
    let render = leptos_axum::render_app_to_stream(not_found_shell);
    let mut response = render(request).await.into_response();
    if response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NOT_FOUND;
    }
    response
}

/// Lower-cases and drops the scheme's default port, so `HOST:443` over https
/// equals `HOST` (CONTRACT.md).
pub fn normalize_host(host: &str, scheme: &str) -> String {
    let host = host.to_ascii_lowercase();
    let default = if scheme == "https" { ":443" } else { ":80" };
    host.strip_suffix(default).map(str::to_owned).unwrap_or(host)
}

pub fn normalize_origin(origin: &str) -> String {
    let origin = origin.to_ascii_lowercase();
    match origin.split_once("://") {
        Some((scheme, host)) => format!("{scheme}://{}", normalize_host(host, scheme)),
        None => origin,
    }
}

/// The one value of a header that must appear exactly once.
fn single(headers: &HeaderMap, name: header::HeaderName) -> Result<&str, String> {
    let mut values = headers.get_all(&name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(format!("exactly one {name} header is required"));
    };
    value.to_str().map_err(|_| format!("malformed {name} header"))
}

fn check_host(request: &Request, web: &Web, scheme: &str) -> Result<(), String> {
    if request.uri().scheme().is_some() || request.uri().authority().is_some() {
        return Err("absolute-form request targets are refused".into());
    }
    let host = single(request.headers(), header::HOST)?;
    if normalize_host(host, scheme) != normalize_host(&web.expected_host, scheme) {
        return Err(format!("unexpected Host {host:?}"));
    }
    Ok(())
}

fn check_origin(request: &Request, web: &Web) -> Result<String, String> {
    let origin = single(request.headers(), header::ORIGIN)
        .map_err(|_| "a single allowed Origin header is required".to_owned())?;
    let normalized = normalize_origin(origin);
    if !web.allowed_origins.contains(&normalized) {
        return Err(format!("Origin {origin:?} is not allowed"));
    }
    Ok(normalized)
}

/// Decides the effective scheme. Forwarded headers count only from the
/// trusted upstream (§4.1.2 D2); from anyone else they are ignored (and
/// audited). `X-Forwarded-For` and `Forwarded` are never read.
fn effective(request: &Request, web: &Web, peer: SocketAddr) -> Result<Effective, String> {
    let config = &web.config;
    let headers = request.headers();
    let present =
        headers.contains_key(&config.proto_header) || headers.contains_key(&config.host_header);
    let trusted = config.trust_proxy.is_some_and(|upstream| upstream.matches(peer.ip()));
    if !trusted {
        if present {
            web.audit.record(
                "forwarded_headers_ignored",
                json!({"peer": peer.ip().to_string(), "path": request.uri().path()}),
            );
        }
        return Ok(Effective { https: false, peer });
    }
    let https = match headers.get_all(&config.proto_header).iter().count() {
        0 => false,
        1 => single(headers, config.proto_header.clone())?.trim().eq_ignore_ascii_case("https"),
        _ => return Err(format!("more than one {} header", config.proto_header)),
    };
    let scheme = if https { "https" } else { "http" };
    if headers.contains_key(&config.host_header) {
        let forwarded = single(headers, config.host_header.clone())?.trim();
        if forwarded.is_empty() || forwarded.contains(',') {
            return Err(format!("{} must be exactly one host", config.host_header));
        }
        let pinned = config.public_host.as_deref().unwrap_or(&web.expected_host);
        // Cross-checked only: the pinned public host is always the expected one.
        if normalize_host(forwarded, scheme) != normalize_host(pinned, scheme) {
            return Err(format!(
                "{} {forwarded:?} does not match the public host",
                config.host_header
            ));
        }
    }
    Ok(Effective { https, peer })
}

/// Forwarded scheme and host, then Host, then Origin for POSTs and `/ws`;
/// `no-store` on the auth routes. Every rejection is a 400, audited.
async fn guard(
    State(web): State<Arc<Web>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let sensitive = matches!(path.as_str(), "/enroll" | "/bootstrap" | "/logout" | "/ws");
    let needs_origin = request.method() == Method::POST || path == "/ws";
    let verdict = effective(&request, &web, peer).and_then(|effective| {
        check_host(&request, &web, effective.scheme())?;
        if needs_origin {
            check_origin(&request, &web)?;
        }
        Ok(effective)
    });
    let mut response = match verdict {
        Ok(effective) => {
            request.extensions_mut().insert(effective);
            next.run(request).await
        }
        Err(why) => {
            tracing::info!(%path, reason = %why, "request rejected");
            let event = if path == "/ws" { "upgrade_rejected" } else { "request_rejected" };
            web.audit.record(
                event,
                json!({"path": path, "status": 400, "reason": why, "peer": peer.ip().to_string()}),
            );
            (StatusCode::BAD_REQUEST, why).into_response()
        }
    };
    if sensitive {
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// `POST` bodies are JSON; `/bootstrap` and `/logout` may be empty.
fn check_json(
    headers: &HeaderMap,
    body: &Bytes,
    empty_ok: bool,
) -> Result<(), (StatusCode, &'static str)> {
    if empty_ok && body.is_empty() {
        return Ok(());
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if json { Ok(()) } else { Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, "a JSON body is required")) }
}

/// The session cookie: `__Host-shard_session; Secure` iff the effective
/// scheme is https, `shard_session` otherwise; always HttpOnly,
/// SameSite=Strict, Path=/, never Domain (CONTRACT.md).
fn session_cookie(https: bool, token: &str, max_age: Option<i64>) -> HeaderValue {
    let name = if https { SECURE_COOKIE } else { COOKIE };
    let mut cookie = cookie::Cookie::build((name, token.to_owned()))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(https)
        .path("/");
    if let Some(seconds) = max_age {
        cookie = cookie.max_age(cookie::time::Duration::seconds(seconds));
    }
    HeaderValue::from_str(&cookie.build().to_string())
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The session cookie's token, and whether it came in the `__Host-` form.
pub fn cookie_token(headers: &HeaderMap) -> Option<(String, bool)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .flatten()
        .find_map(|cookie| match cookie.name() {
            COOKIE => Some((cookie.value().to_owned(), false)),
            SECURE_COOKIE => Some((cookie.value().to_owned(), true)),
            _ => None,
        })
}

/// The session behind the cookie, if the cookie's form fits the scheme: a
/// Secure-form cookie over http is refused (§4.1.2 D4), and over https only
/// the Secure form counts.
fn cookie_session(web: &Web, headers: &HeaderMap, effective: &Effective) -> Option<Session> {
    let (token, secure_form) = cookie_token(headers)?;
    if secure_form != effective.https {
        return None;
    }
    match web.auth.session(&token) {
        Ok(session) => Some(session),
        Err(Refused::Expired(session_id)) => {
            web.audit.record("session_expired", json!({"session_id": session_id}));
            web.hub.close_session(&session_id, "session expired");
            None
        }
        Err(Refused::Unknown) => None,
    }
}

pub fn too_many(wait: std::time::Duration) -> Response {
    let mut response = (StatusCode::TOO_MANY_REQUESTS, "too many requests; wait").into_response();
    if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

async fn enroll(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(rejection) = check_json(&headers, &body, false) {
        return rejection.into_response();
    }
    let Ok(EnrollRequest { code }) = serde_json::from_slice::<EnrollRequest>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body must be {\"code\": \"...\"}").into_response();
    };
    let web = state.web.clone();
    let auth = web.auth.clone();
    let peer = effective.peer.ip();
    // argon2 is deliberately slow: keep it off the async workers.
    let result = tokio::task::spawn_blocking(move || auth.enroll(&code, peer)).await;
    match result {
        Ok(Ok((session, token))) => {
            tracing::info!(principal = %session.principal_id, "browser enrolled");
            web.audit.record(
                "enrolled",
                json!({"principal_id": session.principal_id, "session_id": session.session_id,
                       "peer": peer.to_string(), "secure_cookie": effective.https}),
            );
            let mut response =
                axum::Json(json!({"principal_id": session.principal_id})).into_response();
            // Over plain http this is never the Secure form.
            response
                .headers_mut()
                .insert(header::SET_COOKIE, session_cookie(effective.https, &token, None));
            response
        }
        Ok(Err(EnrollError::Invalid)) => {
            web.audit.record(
                "enroll_failed",
                json!({"peer": peer.to_string(), "reason": "invalid, used or expired code"}),
            );
            (StatusCode::UNAUTHORIZED, "invalid, used or expired enrollment code").into_response()
        }
        Ok(Err(EnrollError::RateLimited(wait))) => {
            web.audit.record("rate_limited", json!({"route": "/enroll", "peer": peer.to_string()}));
            too_many(wait)
        }
        Ok(Err(EnrollError::Store(error))) => {
            tracing::error!(%error, "cannot write the security store");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn bootstrap(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let web = &state.web;
    if let Some(wait) = web.bootstrap_limit.take(effective.peer.ip()) {
        web.audit.record(
            "rate_limited",
            json!({"route": "/bootstrap", "peer": effective.peer.ip().to_string()}),
        );
        return too_many(wait);
    }
    if let Err(rejection) = check_json(&headers, &body, true) {
        return rejection.into_response();
    }
    let unauthorized = (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
    let Some(session) = cookie_session(web, &headers, &effective) else { return unauthorized };
    let Some(origin) = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()) else {
        return unauthorized;
    };
    web.auth.touch(&session.session_id);
    let ticket = web.auth.issue_ticket(&session, &normalize_origin(origin));
    let expires_in_ms = u64::try_from(TICKET_TTL.as_millis()).unwrap_or(u64::MAX);
    let answer =
        Bootstrap { ticket, expires_in_ms, protocol: shard_protocol::WS_SUBPROTOCOL.to_owned() };
    axum::Json(answer).into_response()
}

async fn logout(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let web = &state.web;
    if let Err(rejection) = check_json(&headers, &body, true) {
        return rejection.into_response();
    }
    if let Some(session) = cookie_session(web, &headers, &effective) {
        if let Err(error) = web.auth.revoke(&session.session_id) {
            tracing::error!(%error, "cannot write the security store");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        web.hub.close_session(&session.session_id, "logged out");
        web.audit
            .record("session_revoked", json!({"session_id": session.session_id, "by": "logout"}));
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, session_cookie(effective.https, "", Some(0)));
    response
}
