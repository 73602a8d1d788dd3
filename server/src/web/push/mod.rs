//! Web Push from the daemon itself (RFC 8030, encrypted per RFC 8291, signed
//! per RFC 8292; docs/NOTIFICATIONS.md): no relay, no app store, the
//! daemon speaks to the browser's push service.
//!
//! Here: the daemon's VAPID key pair, made once into `$SHARD_HOME/push.json`
//! (0600) and kept across restarts (a browser's subscription is bound to
//! it); the routes by which an enrolled browser learns the public key and
//! subscribes or unsubscribes (`GET /push/key`, `POST /push/subscribe`,
//! `POST /push/unsubscribe`, with the checks of `/pair`); and the rules a
//! subscription must follow. Its endpoint must be `https` to a host by name
//! or a public address: never loopback, a private or link-local network, or
//! a name of this machine, where a push would be a request into the user's
//! own network. Only `--insecure-push-endpoints` (for tests, with a fake
//! push service on loopback) lifts that.
//!
//! - [`notify`]: what is pushed, and to which browsers;
//! - [`lock_screen`]: what a push may show, secrets masked;
//! - [`address`]: which addresses a push may go to;
//! - [`send`]: encrypting, signing and delivering it;
//! - [`actions`]: the single-use Allow and Deny of a notification, taken
//!   at `POST /push/act`.

pub mod actions;
pub mod address;
pub mod lock_screen;
pub mod notify;
pub mod send;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::json;
use web_push_native::jwt_simple::algorithms::{ECDSAP256PublicKeyLike, ES256KeyPair};
use web_push_native::p256::PublicKey;

use super::answer::{no_store, refused};
use super::auth::{PushChoices, PushSubscription, random_token};
use super::{AppState, Effective, EnrolledRequest, authenticated, credential_failed};

const KEY_FILE_VERSION: u32 = 1;
/// The longest endpoint kept (push services' are a few hundred bytes).
const MAX_ENDPOINT: usize = 2048;

/// The daemon's push identity.
pub struct Push {
    /// Its public key, uncompressed, base64url: the page's
    /// `applicationServerKey`.
    public_key: String,
    /// Its private key, ready to sign with.
    key: Arc<ES256KeyPair>,
    /// `--insecure-push-endpoints`: plain http and local addresses allowed.
    pub insecure_endpoints: bool,
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    version: u32,
    vapid_private_key: String,
    created_at: u64,
}

impl Push {
    /// Loads the key pair of `home`, making it the first time.
    pub fn load(home: &Path, insecure_endpoints: bool) -> anyhow::Result<Self> {
        let path = key_path(home);
        let private_key = match std::fs::read(&path) {
            Ok(bytes) => {
                let file: KeyFile = serde_json::from_slice(&bytes)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                anyhow::ensure!(
                    file.version == KEY_FILE_VERSION,
                    "{} is of version {}, this build reads {KEY_FILE_VERSION}",
                    path.display(),
                    file.version
                );
                file.vapid_private_key
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let private_key = new_private_key();
                let file = KeyFile {
                    version: KEY_FILE_VERSION,
                    vapid_private_key: private_key.clone(),
                    created_at: crate::clock::now_ms(),
                };
                let bytes = serde_json::to_vec_pretty(&file)?;
                crate::home::write_private(&path, &bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                private_key
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        let key = vapid_key(&private_key)
            .ok_or_else(|| anyhow::anyhow!("{} holds no VAPID key", path.display()))?;
        let public_key =
            URL_SAFE_NO_PAD.encode(key.public_key().public_key().to_bytes_uncompressed());
        Ok(Self { public_key, key: Arc::new(key), insecure_endpoints })
    }

    /// What pushes are signed with; `origin` is the daemon's, named as the
    /// sender's contact when it is https (a push service may ask for one).
    pub fn signer(&self, origin: &str) -> send::Signer {
        let contact = if origin.starts_with("https://") {
            origin.to_owned()
        } else {
            "mailto:shard@localhost".to_owned()
        };
        send::Signer { key: self.key.clone(), contact }
    }

    pub fn public_key(&self) -> &str {
        &self.public_key
    }

    /// Whether `subscription` may be kept, and why not.
    pub fn check(&self, subscription: &SubscribeRequest) -> Result<(), Unfit> {
        check_endpoint(&subscription.endpoint, self.insecure_endpoints)?;
        check_keys(&subscription.keys)
    }
}

fn key_path(home: &Path) -> PathBuf {
    home.join("push.json")
}

/// A fresh private key: 32 random bytes, drawn again in the rare case they
/// are not a valid P-256 scalar.
fn new_private_key() -> String {
    loop {
        let candidate = random_token(32);
        if vapid_key(&candidate).is_some() {
            return candidate;
        }
    }
}

/// The signing key of `push.json`'s `vapid_private_key`: a P-256 scalar,
/// base64url.
fn vapid_key(private_key: &str) -> Option<ES256KeyPair> {
    let scalar = URL_SAFE_NO_PAD.decode(private_key.trim_end_matches('=')).ok()?;
    ES256KeyPair::from_bytes(&scalar).ok()
}

/// What the page posts to subscribe: `PushSubscription.toJSON()`.
#[derive(Debug, Deserialize)]
pub struct SubscribeRequest {
    pub endpoint: String,
    pub keys: SubscriptionKeys,
}

#[derive(Debug, Deserialize)]
pub struct SubscriptionKeys {
    pub p256dh: String,
    pub auth: String,
}

/// Why a subscription may not be kept, in words for the browser that
/// subscribed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unfit {
    #[error("the endpoint is longer than {MAX_ENDPOINT} bytes")]
    TooLong,
    #[error("the endpoint is not a URL")]
    NotUrl,
    #[error("the endpoint carries credentials")]
    Credentials,
    #[error("the endpoint is not an http(s) URL")]
    NotHttp,
    #[error("the endpoint is not https")]
    NotHttps,
    #[error("the endpoint has no host")]
    NoHost,
    #[error("the endpoint's host `{0}` is not public")]
    NotPublicName(String),
    #[error("the endpoint's address {ip} is not public ({what})")]
    NotPublicAddress { ip: IpAddr, what: &'static str },
    #[error("`keys.{0}` is not base64url")]
    NotBase64(&'static str),
    #[error("`keys.p256dh` is not an uncompressed point of P-256")]
    NotPoint,
    #[error("`keys.auth` is not 16 bytes")]
    NotSixteen,
}

/// Whether a push to `endpoint` stays out of the user's own network.
pub fn check_endpoint(endpoint: &str, insecure: bool) -> Result<(), Unfit> {
    if endpoint.len() > MAX_ENDPOINT {
        return Err(Unfit::TooLong);
    }
    let url = url::Url::parse(endpoint).map_err(|_| Unfit::NotUrl)?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Unfit::Credentials);
    }
    if insecure {
        return match url.scheme() {
            "https" | "http" if url.host().is_some() => Ok(()),
            _ => Err(Unfit::NotHttp),
        };
    }
    if url.scheme() != "https" {
        return Err(Unfit::NotHttps);
    }
    match url.host() {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let local = name == "localhost"
                || !name.contains('.')
                || [".localhost", ".local", ".internal", ".home.arpa", ".lan"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix));
            if local {
                return Err(Unfit::NotPublicName(name));
            }
            Ok(())
        }
        Some(url::Host::Ipv4(ip)) => address::public(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => address::public(IpAddr::V6(ip)),
        None => Err(Unfit::NoHost),
    }
}

/// The keys must be what RFC 8291 uses: an uncompressed point of P-256
/// (on the curve: a push to any other could never be encrypted) and a
/// 16-byte secret.
fn check_keys(keys: &SubscriptionKeys) -> Result<(), Unfit> {
    subscriber_keys(&keys.p256dh, &keys.auth).map(|_| ())
}

/// A subscription's keys, ready to encrypt to.
pub fn subscriber_keys(
    p256dh: &str,
    auth: &str,
) -> Result<(PublicKey, web_push_native::Auth), Unfit> {
    let point = URL_SAFE_NO_PAD
        .decode(p256dh.trim_end_matches('='))
        .map_err(|_| Unfit::NotBase64("p256dh"))?;
    if point.len() != 65 || point[0] != 0x04 {
        return Err(Unfit::NotPoint);
    }
    let point = PublicKey::from_sec1_bytes(&point).map_err(|_| Unfit::NotPoint)?;
    let secret =
        URL_SAFE_NO_PAD.decode(auth.trim_end_matches('=')).map_err(|_| Unfit::NotBase64("auth"))?;
    let secret = <[u8; 16]>::try_from(secret).map_err(|_| Unfit::NotSixteen)?;
    Ok((point, secret.into()))
}

/// `GET /push/key`: the public key a subscription is made for.
pub async fn key(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
) -> Response {
    if authenticated(&state.web, &headers, &effective).is_none() {
        let refusal = (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
        return credential_failed(&state.web, &effective, "/push/key", refusal);
    }
    no_store(axum::Json(json!({"public_key": state.web.push.public_key()})).into_response())
}

/// `POST /push/subscribe`: keeps the session's subscription (replacing one
/// before), once its endpoint and keys pass the rules above.
pub async fn subscribe(
    State(state): State<AppState>,
    EnrolledRequest { session, effective, body }: EnrolledRequest<false>,
) -> Response {
    let web = state.web.clone();
    let request: SubscribeRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return (StatusCode::BAD_REQUEST, format!("not a push subscription: {error}"))
                .into_response();
        }
    };
    if let Err(why) = web.push.check(&request) {
        return (StatusCode::BAD_REQUEST, why.to_string()).into_response();
    }
    let subscription = PushSubscription {
        endpoint: request.endpoint,
        p256dh: request.keys.p256dh,
        auth: request.keys.auth,
        created_at: crate::clock::now_ms(),
        choices: PushChoices::default(),
    };
    let host = subscription.service();
    match web.auth.subscribe(&session.session_id, subscription) {
        Ok(_) => {
            web.audit.record(
                "push_subscribed",
                json!({"principal_id": session.principal_id, "session_id": session.session_id,
                       "service": host, "peer": effective.client.to_string()}),
            );
            no_store(StatusCode::NO_CONTENT.into_response())
        }
        Err(error) => {
            tracing::error!(%error, "cannot keep a push subscription");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `POST /push/unsubscribe`: forgets the session's subscription.
pub async fn unsubscribe(
    State(state): State<AppState>,
    EnrolledRequest { session, .. }: EnrolledRequest<true>,
) -> Response {
    let web = state.web.clone();
    match web.auth.unsubscribe(&session.session_id) {
        Ok(had) => {
            if had {
                web.audit.record(
                    "push_unsubscribed",
                    json!({"principal_id": session.principal_id,
                           "session_id": session.session_id}),
                );
            }
            no_store(StatusCode::NO_CONTENT.into_response())
        }
        Err(error) => {
            tracing::error!(%error, "cannot forget a push subscription");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `GET /push/choices`: whether this browser is subscribed, and what it
/// chose to hear of.
pub async fn choices(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
) -> Response {
    let web = &state.web;
    let Some(presented) = authenticated(web, &headers, &effective) else {
        let refusal = (StatusCode::UNAUTHORIZED, "enroll this browser first").into_response();
        return credential_failed(web, &effective, "/push/choices", refusal);
    };
    let subscription = web.auth.subscription(&presented.session.session_id);
    let body = json!({
        "subscribed": subscription.is_some(),
        "service": subscription.as_ref().map(PushSubscription::service),
        "choices": subscription.map(|push| push.choices).unwrap_or_default(),
    });
    no_store(axum::Json(body).into_response())
}

/// What `POST /push/choices` changes: any of these.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChoiceRequest {
    questions: Option<bool>,
    errors: Option<bool>,
    /// Leave this agent out, or (`unmute`) take it back.
    mute: Option<String>,
    unmute: Option<String>,
}

/// `POST /push/choices`: changes what this browser hears of.
pub async fn choose(
    State(state): State<AppState>,
    EnrolledRequest { session, body, .. }: EnrolledRequest<false>,
) -> Response {
    let web = state.web.clone();
    let request: ChoiceRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            return (StatusCode::BAD_REQUEST, format!("not a choice: {error}")).into_response();
        }
    };
    let chosen = web.auth.choose(&session.session_id, |choices| {
        if let Some(questions) = request.questions {
            choices.questions = questions;
        }
        if let Some(errors) = request.errors {
            choices.errors = errors;
        }
        if let Some(agent_id) = request.unmute {
            choices.muted.retain(|muted| *muted != agent_id);
        }
        if let Some(agent_id) = request.mute
            && !choices.muted.contains(&agent_id)
            && choices.muted.len() < super::auth::MAX_MUTED
        {
            choices.muted.push(agent_id);
        }
    });
    match chosen {
        Ok(Some(choices)) => no_store(axum::Json(json!({"choices": choices})).into_response()),
        Ok(None) => (StatusCode::CONFLICT, "this browser is not subscribed").into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot keep push choices");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `POST /push/test`: a push to this browser now, whatever it chose.
pub async fn test(
    State(state): State<AppState>,
    EnrolledRequest { session, .. }: EnrolledRequest<true>,
) -> Response {
    let web = state.web.clone();
    if web.auth.subscription(&session.session_id).is_none() {
        return (StatusCode::CONFLICT, "this browser is not subscribed").into_response();
    }
    web.notifier.test(&session.session_id);
    no_store(StatusCode::ACCEPTED.into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActRequest {
    token: String,
}

/// `POST /push/act`: a notification's Allow or Deny, sent by the service
/// worker. The session cookie and the single-use token both must hold; the
/// browser secret is not asked for, for a worker cannot read it: the token,
/// which only this browser's push service delivered, encrypted to it, is
/// the proof instead. The answer takes the tabs' first-answer-wins path
/// and is recorded with source `push`.
pub async fn act(
    State(state): State<AppState>,
    Extension(effective): Extension<Effective>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use shard_protocol::approvals::Answerer;

    use super::answer::{answer, reply};
    use crate::commands::routed::Bound;

    let web = state.web.clone();
    if let Err(rejection) = super::check_json(&headers, &body, false) {
        return rejection.into_response();
    }
    let Some(presented) = super::cookie_session(&web, &headers, &effective) else {
        let refusal =
            refused(StatusCode::UNAUTHORIZED, "PERMISSION_DENIED", "enroll this browser first");
        return credential_failed(&web, &effective, "/push/act", refusal);
    };
    let session = presented.session;
    let Ok(ActRequest { token }) = serde_json::from_slice::<ActRequest>(&body) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "the body must be {\"token\": \"...\"}",
        );
    };
    let record = |outcome: &str, grant: Option<&actions::Grant>| {
        web.audit.record(
            "push_action",
            json!({"principal_id": session.principal_id, "session_id": session.session_id,
                   "agent_id": grant.map(|grant| &grant.agent_id),
                   "request_id": grant.map(|grant| &grant.request_id),
                   "outcome": outcome, "peer": effective.client.to_string()}),
        );
    };
    let grant = match web.actions.redeem(&token, &session.session_id) {
        Ok(grant) => grant,
        Err(refusal) => {
            record(&format!("{refusal:?}").to_lowercase(), None);
            let status = match refusal {
                actions::Refusal::OtherSession => StatusCode::FORBIDDEN,
                _ => StatusCode::GONE,
            };
            return refused(status, "CONFLICT", refusal.message());
        }
    };
    let bound = Bound {
        agent_id: grant.agent_id.clone(),
        request_id: grant.request_id.clone(),
        decision: grant.decision,
        fingerprint: grant.fingerprint.clone(),
        answerer: Answerer {
            source: "push".to_owned(),
            principal_id: Some(session.principal_id.clone()),
            address: Some(effective.client.to_string()),
        },
        // A notification cannot show a passkey prompt: a guarded allow
        // from one is refused, and the page takes it from there.
        stepped_up: false,
    };
    let verdict = match answer(&web, bound).await {
        Ok(verdict) => verdict,
        Err(refusal) => {
            record("not_taken", Some(&grant));
            return refusal;
        }
    };
    record(&format!("{verdict:?}").to_lowercase(), Some(&grant));
    reply(verdict, grant.decision)
}

#[cfg(test)]
mod tests {
    use web_push_native::p256::elliptic_curve::sec1::ToEncodedPoint;

    use super::*;

    fn sec1_uncompressed(key: &PublicKey) -> Vec<u8> {
        key.to_encoded_point(false).as_bytes().to_vec()
    }

    #[test]
    fn only_https_to_a_public_host_is_an_endpoint() {
        for good in [
            "https://fcm.googleapis.com/fcm/send/abc",
            "https://updates.push.services.mozilla.com/wpush/v2/x",
            "https://8.8.8.8/x",
            "https://[2606:4700::1111]/x",
        ] {
            assert_eq!(check_endpoint(good, false), Ok(()), "{good}");
        }
        for bad in [
            "http://push.example.com/x",
            "https://127.0.0.1/x",
            "https://127.1.2.3:8443/x",
            "https://10.0.0.7/x",
            "https://172.16.5.4/x",
            "https://192.168.1.1/x",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/x",
            "https://0.0.0.0/x",
            "https://[::1]/x",
            "https://[fd00::1]/x",
            "https://[fe80::1]/x",
            "https://[::ffff:127.0.0.1]/x",
            "https://localhost/x",
            "https://app.localhost/x",
            "https://printer.local/x",
            "https://intranet/x",
            "https://user:pass@push.example.com/x",
            "ftp://push.example.com/x",
            "not a url",
        ] {
            assert!(check_endpoint(bad, false).is_err(), "{bad}");
        }
        // The test flag lets a fake push service on loopback in, and still
        // only over http(s).
        assert_eq!(check_endpoint("http://127.0.0.1:9/push", true), Ok(()));
        assert!(check_endpoint("file:///etc/passwd", true).is_err());
    }

    #[test]
    fn keys_must_be_what_rfc_8291_uses() {
        // A browser's point, and one of the right length off the curve.
        let browser = web_push_native::p256::SecretKey::from_slice(&[5u8; 32]).expect("scalar");
        let point = URL_SAFE_NO_PAD.encode(sec1_uncompressed(&browser.public_key()));
        let off_curve = URL_SAFE_NO_PAD.encode([[4u8].as_slice(), &[7u8; 64]].concat());
        let secret = URL_SAFE_NO_PAD.encode([9u8; 16]);
        let keys = |p256dh: &str, auth: &str| SubscriptionKeys {
            p256dh: p256dh.to_owned(),
            auth: auth.to_owned(),
        };
        assert_eq!(check_keys(&keys(&point, &secret)), Ok(()));
        assert_eq!(check_keys(&keys(&off_curve, &secret)), Err(Unfit::NotPoint));
        assert!(check_keys(&keys(&secret, &secret)).is_err(), "a point is 65 bytes");
        assert!(check_keys(&keys(&point, &point)).is_err(), "a secret is 16 bytes");
        assert!(check_keys(&keys("!!", &secret)).is_err());
    }

    #[test]
    fn the_key_pair_is_made_once_and_kept_private() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("home");
        let first = Push::load(home.path(), false).expect("made");
        let again = Push::load(home.path(), false).expect("loaded");
        assert_eq!(first.public_key(), again.public_key());
        let public = URL_SAFE_NO_PAD.decode(first.public_key()).expect("base64url");
        assert_eq!((public.len(), public[0]), (65, 4), "an uncompressed P-256 point");
        let mode = std::fs::metadata(key_path(home.path())).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = tempfile::tempdir().expect("home");
        assert_ne!(Push::load(other.path(), false).expect("made").public_key(), first.public_key());
    }
}
