//! The daemon's HTTP surface (CONTRACT.md "HTTP routes"): the Leptos app and
//! its bundle, `/enroll`, `/bootstrap`, `/logout` and the `/ws` upgrade.
//!
//! Every request passes [`guard`] first: the Host must be exactly the
//! expected one (DNS rebinding), and state-changing requests and `/ws` must
//! come from an allowed Origin (another site's page in the same browser).
//! Either failure is a 400 before anything else is looked at.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRef, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use leptos::prelude::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};
use serde_json::json;
use shard_app::{App, OUTPUT_NAME, shell};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::auth::{Auth, EnrollError, TICKET_TTL};
use crate::connection::Daemon;
use crate::hub::Hub;

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
    /// `127.0.0.1:PORT`: the only Host accepted.
    pub expected_host: String,
    /// `http://127.0.0.1:PORT`: the only Origins accepted.
    pub allowed_origins: Vec<String>,
    pub connections: Arc<tokio::sync::Semaphore>,
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
    let routes = generate_route_list(App);
    let state = AppState { options: options.clone(), web: web.clone() };
    Router::new()
        .leptos_routes(&state, routes, {
            let options = options.clone();
            move || shell(options.clone())
        })
        .route("/pkg/{*path}", get(crate::assets::pkg))
        .route("/favicon.ico", get(crate::assets::favicon))
        .route("/enroll", post(enroll))
        .route("/bootstrap", post(bootstrap))
        .route("/logout", post(logout))
        .route("/ws", get(crate::ws::upgrade))
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

/// Any other path: the app renders its not-found view, answered as a 404.
async fn not_found(State(options): State<LeptosOptions>, request: Request) -> Response {
    let render = leptos_axum::render_app_to_stream(move || shell(options.clone()));
    let mut response = render(request).await;
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

fn check_host(request: &Request, web: &Web) -> Result<(), String> {
    if request.uri().scheme().is_some() || request.uri().authority().is_some() {
        return Err("absolute-form request targets are refused".into());
    }
    let host = single(request.headers(), header::HOST)?;
    if normalize_host(host, "http") != normalize_host(&web.expected_host, "http") {
        return Err(format!("unexpected Host {host:?}"));
    }
    Ok(())
}

fn check_origin(request: &Request, web: &Web) -> Result<String, String> {
    let origin = single(request.headers(), header::ORIGIN)
        .map_err(|_| "a single allowed Origin header is required".to_owned())?;
    let normalized = normalize_origin(origin);
    if !web.allowed_origins.iter().any(|allowed| normalize_origin(allowed) == normalized) {
        return Err(format!("Origin {origin:?} is not allowed"));
    }
    Ok(normalized)
}

/// Host first, then Origin for POSTs and `/ws`; `no-store` on the auth routes.
async fn guard(State(web): State<Arc<Web>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let sensitive = matches!(path.as_str(), "/enroll" | "/bootstrap" | "/logout" | "/ws");
    let needs_origin = request.method() == Method::POST || path == "/ws";
    let verdict = check_host(&request, &web).and_then(|()| {
        if needs_origin { check_origin(&request, &web).map(|_| ()) } else { Ok(()) }
    });
    let mut response = match verdict {
        Ok(()) => next.run(request).await,
        Err(why) => {
            tracing::info!(%path, reason = %why, "request rejected");
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

fn session_cookie(token: &str, max_age: Option<i64>) -> HeaderValue {
    let mut cookie = cookie::Cookie::build((COOKIE, token.to_owned()))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
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

#[derive(serde::Deserialize)]
struct EnrollBody {
    code: String,
}

async fn enroll(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(rejection) = check_json(&headers, &body, false) {
        return rejection.into_response();
    }
    let Ok(EnrollBody { code }) = serde_json::from_slice::<EnrollBody>(&body) else {
        return (StatusCode::BAD_REQUEST, "the body must be {\"code\": \"...\"}").into_response();
    };
    let auth = state.web.auth.clone();
    // argon2 is deliberately slow: keep it off the async workers.
    let result = tokio::task::spawn_blocking(move || auth.enroll(&code, peer.ip())).await;
    match result {
        Ok(Ok((principal_id, token))) => {
            tracing::info!(%principal_id, "browser enrolled");
            let mut response = axum::Json(json!({"principal_id": principal_id})).into_response();
            response.headers_mut().insert(header::SET_COOKIE, session_cookie(&token, None));
            response
        }
        Ok(Err(EnrollError::Invalid)) => {
            tracing::info!(peer = %peer.ip(), "wrong enrollment code");
            (StatusCode::UNAUTHORIZED, "invalid, used or expired enrollment code").into_response()
        }
        Ok(Err(EnrollError::RateLimited(wait))) => {
            let mut response =
                (StatusCode::TOO_MANY_REQUESTS, "too many wrong codes; wait").into_response();
            if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Ok(Err(EnrollError::Store(error))) => {
            tracing::error!(%error, "cannot write the security store");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn bootstrap(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(rejection) = check_json(&headers, &body, true) {
        return rejection.into_response();
    }
    let unauthorized = (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
    let Some((token, secure_form)) = cookie_token(&headers) else { return unauthorized };
    // The effective scheme here is http: a Secure-form cookie must not be
    // honored over it (§4.1.2 D4).
    if secure_form {
        return unauthorized;
    }
    let Some(session) = state.web.auth.session(&token) else { return unauthorized };
    let Some(origin) = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()) else {
        return unauthorized;
    };
    let ticket = state.web.auth.issue_ticket(&session, &normalize_origin(origin));
    let expires_in_ms = u64::try_from(TICKET_TTL.as_millis()).unwrap_or(u64::MAX);
    axum::Json(json!({"ticket": ticket, "expires_in_ms": expires_in_ms, "protocol": shard_protocol::WS_SUBPROTOCOL}))
        .into_response()
}

async fn logout(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(rejection) = check_json(&headers, &body, true) {
        return rejection.into_response();
    }
    if let Some(session) =
        cookie_token(&headers).and_then(|(token, _)| state.web.auth.session(&token))
    {
        if let Err(error) = state.web.auth.revoke(&session.session_id) {
            tracing::error!(%error, "cannot write the security store");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        state.web.hub.close_session(&session.session_id, "logged out");
        tracing::info!(session = %session.session_id, "browser session revoked");
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, session_cookie("", Some(0)));
    response
}
