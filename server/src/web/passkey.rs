//! Passkeys (WebAuthn) for step-up approvals (docs/SECURITY.md, "Passkey
//! step-up"): a browser session registers passkeys; an `allow` that
//! `[step_up]` guards, from a browser or a notification, counts only
//! through `POST /passkey/approve/*`, after a fresh assertion whose
//! challenge was made for that very call (its agent, request id and
//! fingerprint) and that browser session, used once, within two minutes.
//!
//! WebAuthn needs a host name as its relying party: the daemon's public
//! host in the remote modes. On loopback (`127.0.0.1`, an address) there
//! are no passkeys, and the routes say so.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;
use webauthn_rs::prelude::{
    PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential, RegisterPublicKeyCredential,
    Uuid,
};
use webauthn_rs::{Webauthn, WebauthnBuilder};

use super::answer::{no_store, refused};
use super::auth::Session;
use super::{AppState, EnrolledRequest};

/// How long a ceremony waits for the browser.
const CEREMONY_TTL: Duration = Duration::from_secs(120);
/// Ceremonies in flight at once (one per browser session).
const MAX_CEREMONIES: usize = 256;

/// A ceremony a browser session started and has not finished.
enum Ceremony {
    Register {
        registration: PasskeyRegistration,
        /// The assertion of one of the session's passkeys that must come
        /// with the new one; `None` for a first passkey of a fresh session.
        proof: Option<PasskeyAuthentication>,
        /// How many passkeys the session had when it started.
        had: usize,
    },
    Approve {
        agent_id: String,
        request_id: String,
        fingerprint: String,
        state: PasskeyAuthentication,
    },
}

pub struct Passkeys {
    /// `None` where WebAuthn cannot work: no host name to be its relying party.
    webauthn: Option<Webauthn>,
    ceremonies: Mutex<HashMap<String, (Ceremony, Instant)>>,
}

impl Passkeys {
    /// For a daemon whose pages are at `origin` (and `others`), with the
    /// host name `rp_id`; without passkeys when the host is an address.
    pub fn new(rp_id: Option<&str>, origin: &str, others: &[String]) -> Self {
        let webauthn = rp_id.and_then(|rp_id| {
            let origin = url::Url::parse(origin).ok()?;
            let mut builder = WebauthnBuilder::new(rp_id, &origin).ok()?.rp_name("Shard");
            for other in others.iter().filter_map(|other| url::Url::parse(other).ok()) {
                builder = builder.append_allowed_origin(&other);
            }
            builder.build().ok()
        });
        Self { webauthn, ceremonies: Mutex::default() }
    }

    pub fn available(&self) -> bool {
        self.webauthn.is_some()
    }

    fn begin(&self, session_id: &str, ceremony: Ceremony) {
        let now = Instant::now();
        let mut ceremonies =
            self.ceremonies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ceremonies.retain(|_, (_, started)| now.duration_since(*started) < CEREMONY_TTL);
        if ceremonies.len() >= MAX_CEREMONIES && !ceremonies.contains_key(session_id) {
            return;
        }
        ceremonies.insert(session_id.to_owned(), (ceremony, now));
    }

    /// The session's ceremony in flight, taken: each is finished once.
    fn take(&self, session_id: &str) -> Option<Ceremony> {
        let mut ceremonies =
            self.ceremonies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (ceremony, started) = ceremonies.remove(session_id)?;
        (started.elapsed() < CEREMONY_TTL).then_some(ceremony)
    }
}

/// The relying party of a daemon published as `public_host` (`HOST:PORT`):
/// its host, if it is a name.
pub fn rp_id(public_host: Option<&str>) -> Option<String> {
    let host = public_host?;
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    let is_address = name.starts_with('[') || name.parse::<std::net::IpAddr>().is_ok();
    (!is_address && !name.is_empty()).then(|| name.to_ascii_lowercase())
}

fn unavailable() -> Response {
    refused(
        StatusCode::CONFLICT,
        "CONFLICT",
        "passkeys need the daemon's https host name (the remote modes); this daemon has none",
    )
}

/// A stable WebAuthn user handle for a browser principal, naming nothing.
fn user_handle(session: &Session) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("shard-passkey\0{}", session.principal_id));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

/// `POST /passkey/register/start`: options for `navigator.credentials.create`.
///
/// Who may add one (docs/SECURITY.md, "Passkey step-up"): a session that
/// has passkeys proves one of them, so the answer then also carries
/// `prove`, options for `navigator.credentials.get` whose assertion comes
/// back with the new credential; a session without one only while it is
/// freshly enrolled with a code from `shard enroll`. A cookie alone never
/// adds a passkey.
pub async fn register_start(
    State(state): State<AppState>,
    EnrolledRequest { session, .. }: EnrolledRequest<true>,
) -> Response {
    let web = state.web.clone();
    let Some(webauthn) = &web.passkeys.webauthn else { return unavailable() };
    let known = web.auth.passkeys(&session.session_id);
    if known.len() >= super::auth::MAX_PASSKEYS {
        return refused(
            StatusCode::CONFLICT,
            "CONFLICT",
            "this browser has as many passkeys as it may",
        );
    }
    if known.is_empty() && !web.auth.freshly_enrolled(&session.session_id) {
        return refused(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            "a browser adds its first passkey only just after it was enrolled with a code \
             from `shard enroll` on the daemon's machine: enroll it that way, then add one",
        );
    }
    let exclude = known.iter().map(|passkey| passkey.cred_id().clone()).collect();
    let name =
        format!("Shard browser {}", &session.principal_id.chars().take(8).collect::<String>());
    let started =
        webauthn.start_passkey_registration(user_handle(&session), &name, "Shard", Some(exclude));
    let (options, registration) = match started {
        Ok(started) => started,
        Err(error) => {
            tracing::warn!(%error, "cannot start a passkey registration");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut answer = serde_json::to_value(options).unwrap_or_default();
    let mut proof = None;
    if !known.is_empty() {
        let (prove, state) = match webauthn.start_passkey_authentication(&known) {
            Ok(started) => started,
            Err(error) => {
                tracing::warn!(%error, "cannot start a passkey assertion");
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
        };
        if let Some(answer) = answer.as_object_mut() {
            answer.insert("prove".to_owned(), serde_json::to_value(prove).unwrap_or_default());
        }
        proof = Some(state);
    }
    let ceremony = Ceremony::Register { registration, proof, had: known.len() };
    web.passkeys.begin(&session.session_id, ceremony);
    no_store(axum::Json(answer).into_response())
}

/// What `/passkey/register/finish` takes: the new credential, with an
/// assertion of one the session has when the start asked to `prove` one.
#[derive(Deserialize)]
#[serde(untagged)]
enum NewPasskey {
    Proven { credential: RegisterPublicKeyCredential, assertion: Box<PublicKeyCredential> },
    Alone(RegisterPublicKeyCredential),
}

/// `POST /passkey/register/finish`: the new credential, kept with the session.
pub async fn register_finish(
    State(state): State<AppState>,
    EnrolledRequest { session, effective, body }: EnrolledRequest<false>,
) -> Response {
    let web = state.web.clone();
    let Some(webauthn) = &web.passkeys.webauthn else { return unavailable() };
    let Ok(new) = serde_json::from_slice::<NewPasskey>(&body) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "the body is not a passkey credential",
        );
    };
    let Some(Ceremony::Register { registration, proof, had }) =
        web.passkeys.take(&session.session_id)
    else {
        return refused(
            StatusCode::CONFLICT,
            "CONFLICT",
            "no registration is in progress; start again",
        );
    };
    let (credential, assertion) = match new {
        NewPasskey::Proven { credential, assertion } => (credential, Some(assertion)),
        NewPasskey::Alone(credential) => (credential, None),
    };
    if let Some(proof) = proof {
        match prove(webauthn, &proof, assertion) {
            Ok(used) => {
                if let Err(error) = web.auth.passkey_used(&session.session_id, &used) {
                    tracing::warn!(%error, "cannot record a passkey's use");
                }
            }
            Err(why) => {
                web.audit.record(
                    "passkey_refused",
                    json!({"principal_id": session.principal_id,
                           "session_id": session.session_id,
                           "peer": effective.client.to_string()}),
                );
                return refused(
                    StatusCode::FORBIDDEN,
                    "PERMISSION_DENIED",
                    &format!("adding a passkey to a browser that has one needs that one: {why}"),
                );
            }
        }
    }
    let passkey = match webauthn.finish_passkey_registration(&credential, &registration) {
        Ok(passkey) => passkey,
        Err(error) => {
            return refused(
                StatusCode::BAD_REQUEST,
                "PERMISSION_DENIED",
                &format!("the passkey was not accepted: {error}"),
            );
        }
    };
    keep(&web, &session, &effective, passkey, had)
}

/// Why a browser that has a passkey did not prove one while adding another.
#[derive(Debug, thiserror::Error)]
enum NotProven {
    #[error("it needs an assertion of a passkey this browser has")]
    NoAssertion,
    #[error("the assertion was not accepted: {0}")]
    Refused(webauthn_rs::prelude::WebauthnError),
}

/// Checks `assertion` against the `proof` the registration's start asked for.
fn prove(
    webauthn: &Webauthn,
    proof: &PasskeyAuthentication,
    assertion: Option<Box<PublicKeyCredential>>,
) -> Result<webauthn_rs::prelude::AuthenticationResult, NotProven> {
    let assertion = assertion.ok_or(NotProven::NoAssertion)?;
    webauthn.finish_passkey_authentication(&assertion, proof).map_err(NotProven::Refused)
}

/// Keeps a registered `passkey` with the session, if it still has room.
fn keep(
    web: &super::Web,
    session: &Session,
    effective: &super::Effective,
    passkey: webauthn_rs::prelude::Passkey,
    had: usize,
) -> Response {
    match web.auth.add_passkey(&session.session_id, passkey, had) {
        Ok(true) => {
            web.audit.record(
                "passkey_registered",
                json!({"principal_id": session.principal_id, "session_id": session.session_id,
                       "peer": effective.client.to_string()}),
            );
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => refused(
            StatusCode::CONFLICT,
            "CONFLICT",
            "this browser session cannot take another passkey",
        ),
        Err(error) => {
            tracing::error!(%error, "cannot keep a passkey");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    agent_id: String,
    request_id: String,
}

/// `POST /passkey/approve/start` `{agent_id, request_id}`: options for
/// `navigator.credentials.get`, its challenge bound to that open call.
pub async fn approve_start(
    State(state): State<AppState>,
    EnrolledRequest { session, body, .. }: EnrolledRequest<false>,
) -> Response {
    use shard_protocol::agent::PendingKind;
    let web = state.web.clone();
    let Some(webauthn) = &web.passkeys.webauthn else { return unavailable() };
    let Ok(ApproveRequest { agent_id, request_id }) = serde_json::from_slice(&body) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "the body must be {\"agent_id\", \"request_id\"}",
        );
    };
    let passkeys = web.auth.passkeys(&session.session_id);
    if passkeys.is_empty() {
        return refused(
            StatusCode::CONFLICT,
            "CONFLICT",
            "this browser has no passkey: add one first",
        );
    }
    let open = web.daemon.registry().context.delegation.pending_of(&agent_id);
    let call = open.iter().find_map(|pending| match pending {
        PendingKind::Permission(request) if request.request_id == request_id => Some(request),
        _ => None,
    });
    let Some(call) = call else {
        return refused(StatusCode::CONFLICT, "CONFLICT", "no such question is open");
    };
    let fingerprint = crate::agents::host::fingerprint(call);
    match webauthn.start_passkey_authentication(&passkeys) {
        Ok((options, state)) => {
            let ceremony = Ceremony::Approve { agent_id, request_id, fingerprint, state };
            web.passkeys.begin(&session.session_id, ceremony);
            no_store(axum::Json(options).into_response())
        }
        Err(error) => {
            tracing::warn!(%error, "cannot start a passkey assertion");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `POST /passkey/approve/finish`: the assertion; if it holds, the call it
/// was made for is allowed, through the first-answer-wins path.
pub async fn approve_finish(
    State(state): State<AppState>,
    EnrolledRequest { session, effective, body }: EnrolledRequest<false>,
) -> Response {
    use shard_protocol::agent::Decision;
    use shard_protocol::approvals::Answerer;

    use super::answer::{answer, reply};
    use crate::commands::routed::Bound;

    let web = state.web.clone();
    let Some(webauthn) = &web.passkeys.webauthn else { return unavailable() };
    let Ok(credential) = serde_json::from_slice::<PublicKeyCredential>(&body) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
            "the body is not a passkey assertion",
        );
    };
    let Some(Ceremony::Approve { agent_id, request_id, fingerprint, state }) =
        web.passkeys.take(&session.session_id)
    else {
        return refused(
            StatusCode::CONFLICT,
            "CONFLICT",
            "no approval is in progress; start again",
        );
    };
    let record = |outcome: &str| {
        web.audit.record(
            "passkey_approval",
            json!({"principal_id": session.principal_id, "session_id": session.session_id,
                   "agent_id": agent_id, "request_id": request_id, "outcome": outcome,
                   "peer": effective.client.to_string()}),
        );
    };
    let used = match webauthn.finish_passkey_authentication(&credential, &state) {
        Ok(used) => used,
        Err(error) => {
            record("assertion_refused");
            return refused(
                StatusCode::FORBIDDEN,
                "PERMISSION_DENIED",
                &format!("the passkey assertion was not accepted: {error}"),
            );
        }
    };
    if let Err(error) = web.auth.passkey_used(&session.session_id, &used) {
        tracing::warn!(%error, "cannot record a passkey's use");
    }
    let bound = Bound {
        agent_id: agent_id.clone(),
        request_id: request_id.clone(),
        decision: Decision::Allow,
        fingerprint,
        answerer: Answerer {
            source: "web".to_owned(),
            principal_id: Some(session.principal_id.clone()),
            address: Some(effective.client.to_string()),
        },
        stepped_up: true,
    };
    let verdict = match answer(&web, bound).await {
        Ok(verdict) => verdict,
        Err(refusal) => {
            record("not_taken");
            return refusal;
        }
    };
    record(&format!("{verdict:?}").to_lowercase());
    reply(verdict, Decision::Allow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relying_party_is_the_public_host_name_never_an_address() {
        assert_eq!(rp_id(Some("shard.example.com")).as_deref(), Some("shard.example.com"));
        assert_eq!(rp_id(Some("Shard.Example.com:8443")).as_deref(), Some("shard.example.com"));
        assert_eq!(rp_id(Some("localhost:4000")).as_deref(), Some("localhost"));
        assert_eq!(rp_id(Some("10.0.0.5:4000")), None);
        assert_eq!(rp_id(Some("[::1]:4000")), None);
        assert_eq!(rp_id(None), None);
        assert!(Passkeys::new(Some("localhost"), "https://localhost:4000", &[]).available());
        assert!(!Passkeys::new(None, "http://127.0.0.1:4000", &[]).available());
    }
}
