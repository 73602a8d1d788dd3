//! The daemon's HTTP surface (CONTRACT.md "HTTP routes"): the Leptos app and
//! its bundle, `/enroll`, `/bootstrap`, `/logout`, `/pair` ([`pair`]) and
//! the `/ws` upgrade, with what guards them: [`auth`] (enrollment, sessions,
//! tickets), [`limiter`] (rate limits), [`audit`] (the audit log),
//! [`config`] (loopback, direct and proxy modes, validated before binding),
//! [`assets`] (the embedded bundle) and [`ws`] (the upgrade; the socket is
//! then `clients`').
//!
//! Every request passes [`guard`] first: the Host must be exactly the
//! expected one (DNS rebinding), and state-changing requests and `/ws` must
//! come from an allowed Origin (another site's page in the same browser).
//! Either failure is a 400 before anything else is looked at.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, FromRef, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use leptos::prelude::LeptosOptions;
use serde_json::json;
use shard_app::{OUTPUT_NAME, not_found_shell, shell};
use shard_protocol::web::{
    BROWSER_SECRET_HEADER, Bootstrap, EnrollAnswer, EnrollRequest, normalize_origin,
};
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use tower_http::set_header::SetResponseHeaderLayer;

pub mod answer;
pub mod assets;
pub mod audit;
pub mod auth;
pub mod config;
mod guard;
pub mod limiter;
pub mod pair;
pub mod passkey;
pub mod push;
pub mod ws;

use self::audit::Audit;
use self::auth::{Auth, EnrollError, Enrolled, Refused, Session, TICKET_TTL};
use self::config::WebConfig;
use self::limiter::{ClientKey, Limiter};
use crate::clients::Limits;
use crate::clients::hub::Hub;
use crate::commands::Daemon;

/// The policy of every answer but the dashboard's page, which adds its
/// script ([`page_policy`]): nothing runs, nothing frames it (clickjacking a
/// permission dialog is the attack `frame-ancestors` stops).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'none'; \
    object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The dashboard's policy: scripts from this origin and the page's one
/// inline loader, which carries this response's `nonce`; WebAssembly from the
/// bundle (`wasm-unsafe-eval` allows compiling it, not `eval`); connections
/// (the WebSocket included) to this origin only.
fn page_policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}
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
    /// The origin enrollment links name: the public one (remote) or
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    /// Browser connection slots (`--max-connections`); local clients have
    /// their own.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// How often WebSocket clients are pinged.
    pub ping_interval: std::time::Duration,
    /// Outbox budget and write deadline of each connection.
    pub limits: Limits,
    /// Presentations of a dead credential (an unknown, revoked or expired
    /// cookie at `/bootstrap`, a bad ticket at `/ws`) per client a minute.
    pub credential_failures: Limiter<ClientKey>,
    /// Open WebSockets per browser session (`--max-session-connections`).
    pub session_sockets: ws::SessionSockets,
    /// The daemon's Web Push identity and rules.
    pub push: push::Push,
    /// Where test pushes are queued.
    pub notifier: Arc<push::notify::Notifier>,
    /// The live Allow and Deny tokens of notifications.
    pub actions: Arc<push::actions::Actions>,
    /// WebAuthn for step-up approvals, where the daemon has a host name.
    pub passkeys: passkey::Passkeys,
}

/// How a request reached the daemon, decided once by [`guard`]: the scheme
/// the browser used (https only through a trusted proxy), the TCP peer, and
/// the client that failures are counted against.
#[derive(Debug, Clone)]
pub struct Effective {
    pub https: bool,
    pub peer: SocketAddr,
    /// The peer, or, for a request from the trusted upstream, the last
    /// address of its `X-Forwarded-For`: the one the upstream appended.
    pub client: IpAddr,
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
    let mut router = Router::new();
    for file in assets::PUBLIC {
        router = router.route(&format!("/{file}"), get(assets::public));
    }
    router
        // The page is rendered per response (its script nonce), so it is
        // compressed as it is sent; the files under /pkg are precompressed.
        // It holds no secret and nothing of the request, so compressing it
        // gives a BREACH-style observer nothing to learn (docs/SECURITY.md).
        .route("/", get(home).layer(CompressionLayer::new().quality(CompressionLevel::Best)))
        .route("/pkg/{*path}", get(assets::pkg))
        .route("/enroll", post(enroll))
        .route("/bootstrap", post(bootstrap))
        .route("/logout", post(logout))
        .route("/pair", post(pair::pair))
        .route("/push/key", get(push::key))
        .route("/push/subscribe", post(push::subscribe))
        .route("/push/unsubscribe", post(push::unsubscribe))
        .route("/push/choices", get(push::choices).post(push::choose))
        .route("/push/test", post(push::test))
        .route("/push/act", post(push::act))
        .route("/passkey/register/start", post(passkey::register_start))
        .route("/passkey/register/finish", post(passkey::register_finish))
        .route("/passkey/approve/start", post(passkey::approve_start))
        .route("/passkey/approve/finish", post(passkey::approve_finish))
        .route("/ws", get(ws::upgrade))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(web, guard::guard))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        ))
        .with_state(state)
}

/// The dashboard's first paint, and the script that loads the app; its
/// policy names the nonce Leptos gave that script for this response.
async fn home(State(options): State<LeptosOptions>, request: Request) -> Response {
    let policy = || {
        let nonce = leptos::nonce::use_nonce();
        let response = leptos::prelude::use_context::<leptos_axum::ResponseOptions>();
        if let (Some(nonce), Some(response)) = (nonce, response)
            && let Ok(value) = HeaderValue::from_str(&page_policy(&nonce))
        {
            response.insert_header(header::CONTENT_SECURITY_POLICY, value);
        }
    };
    let render =
        leptos_axum::render_app_to_stream_with_context(policy, move || shell(options.clone()));
    render(request).await.into_response()
}

/// Any other path: a plain not-found page, answered as a 404. Rendered to
/// a string, not streamed: a stream carries inline scripts of its own,
/// which this page's policy (`script-src 'none'`) refuses, each refusal an
/// error in the browser's console.
async fn not_found() -> Response {
    use leptos::prelude::{Owner, RenderHtml};
    let html = Owner::new().with(|| not_found_shell().to_html());
    (StatusCode::NOT_FOUND, axum::response::Html(html)).into_response()
}

/// How often open browser sockets are checked against their session.
const EXPIRY_SWEEP: std::time::Duration = std::time::Duration::from_secs(1);

/// Closes, within [`EXPIRY_SWEEP`], every browser socket whose session has
/// ended since it opened: past its idle or absolute lifetime, or revoked by
/// any path. A socket does not count as use; `/bootstrap` does.
pub async fn enforce_expiry(web: Arc<Web>, stop: tokio_util::sync::CancellationToken) {
    let mut sweep = tokio::time::interval(EXPIRY_SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = sweep.tick() => {}
        }
        for session_id in web.hub.browser_sessions() {
            match web.auth.check(&session_id) {
                Ok(()) => {}
                Err(Refused::Expired(_)) => session_expired(&web, &session_id),
                Err(Refused::Unknown) => web.hub.close_session(&session_id, "session revoked"),
            }
        }
    }
}

/// A session found past its lifetime: recorded once, its sockets closed.
fn session_expired(web: &Web, session_id: &str) {
    web.audit.record("session_expired", json!({"session_id": session_id}));
    web.hub.close_session(session_id, "session expired");
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
/// SameSite=Strict, Path=/, never Domain (CONTRACT.md). It lives `lifetime`
/// (whole seconds, rounded down, so never past the session's end): a
/// browser keeps it across restarts, and `/bootstrap` sets it again as the
/// idle window moves.
fn session_cookie(https: bool, token: &str, lifetime: std::time::Duration) -> HeaderValue {
    let name = if https { SECURE_COOKIE } else { COOKIE };
    let seconds = i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX);
    let cookie = cookie::Cookie::build((name, token.to_owned()))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .secure(https)
        .path("/")
        .max_age(cookie::time::Duration::seconds(seconds));
    HeaderValue::from_str(&cookie.build().to_string())
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The tokens of every session cookie of the name the scheme expects
/// (`__Host-shard_session` over https, `shard_session` over http), in the
/// order sent. A cookie of the other name, which a page on another port of
/// the same host could have planted, is never looked at.
pub fn cookie_tokens(headers: &HeaderMap, https: bool) -> Vec<String> {
    let expected = if https { SECURE_COOKIE } else { COOKIE };
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .flatten()
        .filter(|cookie| cookie.name() == expected)
        .map(|cookie| cookie.value().to_owned())
        .collect()
}

/// A live session and the cookie token that named it.
struct Presented {
    session: Session,
    token: String,
}

/// The session behind the cookie the scheme expects (a Secure-form cookie
/// over http never counts, §4.1.2 D4). Of several with that name, the first
/// live one wins, so a planted one shadows nothing.
fn cookie_session(web: &Web, headers: &HeaderMap, effective: &Effective) -> Option<Presented> {
    for token in cookie_tokens(headers, effective.https) {
        match web.auth.session(&token) {
            Ok(session) => return Some(Presented { session, token }),
            Err(Refused::Expired(session_id)) => session_expired(web, &session_id),
            Err(Refused::Unknown) => {}
        }
    }
    None
}

/// Whether the request carries the session's browser secret, as it must on
/// loopback: there the cookie also reaches every other port of 127.0.0.1
/// (cookies ignore ports), while the secret lives in the storage of this
/// origin only. In remote modes the `__Host-` cookie over TLS stands alone,
/// and a secret sent anyway must still be the right one.
fn browser_secret_holds(web: &Web, headers: &HeaderMap, session: &Session) -> bool {
    let presented = headers.get(BROWSER_SECRET_HEADER).and_then(|value| value.to_str().ok());
    match presented {
        Some(secret) => web.auth.browser_secret_matches(&session.session_id, secret),
        None => web.config.mode != config::Mode::Loopback,
    }
}

/// The live session a request presents with all this mode asks for: its
/// cookie, and on loopback the session's browser secret.
fn authenticated(web: &Web, headers: &HeaderMap, effective: &Effective) -> Option<Presented> {
    cookie_session(web, headers, effective)
        .filter(|presented| browser_secret_holds(web, headers, &presented.session))
}

/// An enrolled browser's JSON request to one of Shard's own routes
/// (`/pair`, `/push/*`, `/passkey/*`), as a handler's last argument: a JSON
/// body (or none, where `EMPTY_OK`), then the live session presented with
/// all this mode asks for. The guard has already checked Host and Origin.
/// A request that fails is answered here: a dead credential counts as one
/// at `/bootstrap` does.
pub struct EnrolledRequest<const EMPTY_OK: bool> {
    pub session: Session,
    pub effective: Effective,
    pub body: Bytes,
}

impl<const EMPTY_OK: bool> axum::extract::FromRequest<AppState> for EnrolledRequest<EMPTY_OK> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
        let route = request.uri().path().to_owned();
        let Some(effective) = request.extensions().get::<Effective>().cloned() else {
            return Err(StatusCode::INTERNAL_SERVER_ERROR.into_response());
        };
        let headers = request.headers().clone();
        let body =
            Bytes::from_request(request, state).await.map_err(IntoResponse::into_response)?;
        let web = &state.web;
        check_json(&headers, &body, EMPTY_OK).map_err(IntoResponse::into_response)?;
        match authenticated(web, &headers, &effective) {
            Some(Presented { session, .. }) => Ok(Self { session, effective, body }),
            None => {
                let refusal =
                    (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
                Err(credential_failed(web, &effective, &route, refusal))
            }
        }
    }
}

/// The answer to a dead credential: `refusal`, or 429 once this client has
/// presented more than its share of them in the last minute.
pub fn credential_failed(
    web: &Web,
    effective: &Effective,
    route: &str,
    refusal: Response,
) -> Response {
    match web.credential_failures.fail(ClientKey::from(effective.client)) {
        Ok(()) => refusal,
        Err(wait) => {
            web.audit.record(
                "rate_limited",
                json!({"route": route, "peer": effective.client.to_string()}),
            );
            too_many(wait)
        }
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
    let peer = effective.client;
    // argon2 is deliberately slow: keep it off the async workers.
    let result =
        tokio::task::spawn_blocking(move || auth.enroll(&code, ClientKey::from(peer))).await;
    match result {
        Ok(Ok(Enrolled { session, token, browser_secret, lifetime, paired_by })) => {
            tracing::info!(principal = %session.principal_id, "browser enrolled");
            web.audit.record(
                "enrolled",
                json!({"principal_id": session.principal_id, "session_id": session.session_id,
                       "peer": peer.to_string(), "secure_cookie": effective.https,
                       "paired_by": paired_by}),
            );
            // The page whose link this was says so, instead of counting
            // down a link that works no more.
            if let Some(issuer) = &paired_by {
                let used = shard_protocol::web::PairUsed { at: crate::clock::now_ms() };
                let event =
                    shard_protocol::Envelope::new(shard_protocol::ServerMessage::PairUsed(used));
                web.hub.tell_session(issuer, &crate::agents::Wire::from(event.to_json()));
            }
            let answer = EnrollAnswer { principal_id: session.principal_id, browser_secret };
            let mut response = axum::Json(answer).into_response();
            // Over plain http this is never the Secure form.
            response
                .headers_mut()
                .insert(header::SET_COOKIE, session_cookie(effective.https, &token, lifetime));
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
    if let Err(rejection) = check_json(&headers, &body, true) {
        return rejection.into_response();
    }
    let presented = authenticated(web, &headers, &effective);
    let origin = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok());
    let (Some(Presented { session, token }), Some(origin)) = (presented, origin) else {
        let unauthorized = (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
        return credential_failed(web, &effective, "/bootstrap", unauthorized);
    };
    let lifetime = web.auth.touch(&session.session_id);
    let ticket = web.auth.issue_ticket(&session, &normalize_origin(origin));
    let expires_in_ms = u64::try_from(TICKET_TTL.as_millis()).unwrap_or(u64::MAX);
    let answer =
        Bootstrap { ticket, expires_in_ms, protocol: shard_protocol::WS_SUBPROTOCOL.to_owned() };
    let mut response = axum::Json(answer).into_response();
    // Use renews the session: the cookie's lifetime moves with it.
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(effective.https, &token, lifetime));
    response
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
    if let Some(Presented { session, .. }) = cookie_session(web, &headers, &effective) {
        if let Err(error) = web.auth.revoke(&session.session_id) {
            tracing::error!(%error, "cannot write the security store");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        web.hub.close_session(&session.session_id, "logged out");
        web.audit
            .record("session_revoked", json!({"session_id": session.session_id, "by": "logout"}));
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let cleared = session_cookie(effective.https, "", std::time::Duration::ZERO);
    response.headers_mut().insert(header::SET_COOKIE, cleared);
    response
}
