//! Browser authentication (PROTOCOL.md §4.1, CONTRACT.md): enrollment codes,
//! principals and sessions in the security store, and WebSocket tickets.
//!
//! - Enrollment codes are ≥128-bit, single-use, valid 10 minutes, kept only in
//!   memory and only as argon2id hashes (a person copies them: they get the
//!   slow hash), never written to disk or logs. A pairing code (`/pair`) is
//!   one of them, minted for an enrolled session: each session holds at most
//!   one, and it dies with that session.
//! - Session tokens and tickets are 256-bit random; only their SHA-256 is kept
//!   (high entropy needs no slow hash). Every comparison is constant-time.
//! - The store (`$SHARD_HOME/security.json`, 0600, versioned) holds principals
//!   and sessions: ids, hashes and times, never a raw credential.
//! - Tickets live at most [`TICKET_TTL`], are single-use, and are bound to the
//!   principal, the session and the exact Origin of the `/bootstrap` request.
//!
//! Its parts: [`codes`] (enrollment codes and the rate of guessing them),
//! [`tickets`], and [`store`] (principals and sessions, with their push
//! subscriptions and passkeys); [`Auth`] holds them and keeps sessions.

mod codes;
mod store;
mod tickets;

pub use self::codes::CODE_TTL;
pub use self::store::{MAX_MUTED, MAX_PASSKEYS, PushChoices, PushSubscription};
pub use self::tickets::TICKET_TTL;

use self::codes::Codes;
use self::store::{Principal, SessionRecord, Store, live_record};
use self::tickets::Tickets;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::limiter::ClientKey;

pub const STORE_VERSION: u32 = 1;
/// Live sessions one principal may hold; the oldest goes first.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 8;
/// Ended sessions are kept this long in the store (for the audit trail),
/// then dropped so the store stays small.
const KEEP_ENDED: Duration = Duration::from_secs(30 * 24 * 3600);

/// A session as `shard sessions list` shows it (no secret in it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionView {
    pub session_id: String,
    pub principal_id: String,
    pub created_at: u64,
    pub last_seen_at: u64,
    /// When it expires unless used again (the earlier of idle and absolute).
    pub expires_at: u64,
    /// The host of its push service, when it subscribed to Web Push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
}

/// A valid browser session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub session_id: String,
    pub principal_id: String,
}

/// Why a cookie does not open a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Unknown,
    /// It was live until now: its idle or absolute lifetime ran out.
    Expired(String),
}

/// A new enrollment's session and the two secrets its browser holds.
pub struct Enrolled {
    pub session: Session,
    /// For the cookie.
    pub token: String,
    /// For the page's storage, sent to `/bootstrap` beside the cookie.
    pub browser_secret: String,
    /// How long the session lives unless used again: the cookie's lifetime.
    pub lifetime: Duration,
    /// The session whose pairing link this was, if it was one.
    pub paired_by: Option<String>,
}

#[derive(Debug)]
pub enum EnrollError {
    /// Wrong, used or expired.
    Invalid,
    /// Too many wrong codes from this peer; retry after this long.
    RateLimited(Duration),
    Store(String),
}

pub struct Auth {
    path: PathBuf,
    store: Mutex<Store>,
    codes: Codes,
    tickets: Tickets,
    idle: Duration,
    max_age: Duration,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `bytes` random bytes as base64url without padding.
pub fn random_token(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    // The OS generator failing is not recoverable: refuse to mint a guessable token.
    if let Err(error) = getrandom::fill(&mut buffer) {
        panic!("the operating system's random generator failed: {error}");
    }
    URL_SAFE_NO_PAD.encode(buffer)
}

fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl Auth {
    /// Loads `home/security.json` (absent: empty). A store of another version
    /// or readable by others is refused.
    pub fn load(home: &Path, idle: Duration, max_age: Duration) -> anyhow::Result<Self> {
        let path = home.join("security.json");
        let store = Store::read(&path)?;
        Ok(Self {
            path,
            store: Mutex::new(store),
            codes: Codes::new(),
            tickets: Tickets::default(),
            idle,
            max_age,
        })
    }

    /// Codes live `ttl` instead of [`CODE_TTL`] (never longer).
    pub fn with_code_ttl(mut self, ttl: Duration) -> Self {
        self.codes.set_ttl(ttl);
        self
    }

    /// How long a code minted now stays valid.
    pub fn code_ttl(&self) -> Duration {
        self.codes.ttl()
    }

    fn save(&self, store: &mut Store) -> std::io::Result<()> {
        store.write(&self.path)
    }

    /// Mints a new enrollment code (returned in clear once, kept hashed).
    pub fn new_code(&self) -> String {
        self.codes.mint(None)
    }

    /// Mints a pairing code for `session` (`/pair`): an enrollment code like
    /// any other, except that it replaces the session's previous one and
    /// dies with the session. So one enrolled browser holds one live link,
    /// and cannot push every other code out of the table.
    pub fn pair_code(&self, session: &Session) -> String {
        self.codes.mint(Some(session.session_id.clone()))
    }

    /// Consumes a code and creates a principal and a session: returns the
    /// session, its token for the cookie and the browser secret.
    pub fn enroll(&self, code: &str, client: ClientKey) -> Result<Enrolled, EnrollError> {
        let taken = self.codes.take(code, client)?;
        // A pairing link dies with the session that made it.
        if let Some(issuer) = &taken.issued_by
            && self.check(issuer).is_err()
        {
            return Err(EnrollError::Invalid);
        }
        let paired_by = taken.succeeded();
        let now = crate::clock::now_ms();
        let principal_id = format!("principal-{}", crate::id::random_hex());
        let session_id = format!("session-{}", crate::id::random_hex());
        let token = random_token(32);
        let browser_secret = random_token(32);
        let mut store = lock(&self.store);
        store.principals.push(Principal { principal_id: principal_id.clone(), created_at: now });
        store.sessions.push(SessionRecord {
            session_id: session_id.clone(),
            principal_id: principal_id.clone(),
            token_sha256: crate::id::hex(&sha256(&token)),
            created_at: now,
            last_seen_at: now,
            revoked_at: None,
            expired_at: None,
            secret_sha256: Some(crate::id::hex(&sha256(&browser_secret))),
            push: None,
            passkeys: Vec::new(),
            paired_by: paired_by.clone(),
        });
        let lifetime =
            store.sessions.last().map_or(Duration::ZERO, |record| self.left(record, now));
        Self::cap_sessions(&mut store, &principal_id, now);
        let keep_after =
            now.saturating_sub(u64::try_from(KEEP_ENDED.as_millis()).unwrap_or(u64::MAX));
        store.sessions.retain(|record| {
            record.live()
                || record.revoked_at.or(record.expired_at).is_some_and(|ended| ended > keep_after)
        });
        self.save(&mut store).map_err(|error| EnrollError::Store(error.to_string()))?;
        Ok(Enrolled {
            session: Session { session_id, principal_id },
            token,
            browser_secret,
            lifetime,
            paired_by,
        })
    }

    /// Revokes a principal's oldest live sessions beyond the cap.
    fn cap_sessions(store: &mut Store, principal_id: &str, now: u64) {
        let mut live: Vec<usize> = (0..store.sessions.len())
            .filter(|&at| {
                store.sessions[at].principal_id == principal_id && store.sessions[at].live()
            })
            .collect();
        live.sort_by_key(|&at| store.sessions[at].created_at);
        while live.len() > MAX_SESSIONS_PER_PRINCIPAL {
            let oldest = live.remove(0);
            store.sessions[oldest].revoked_at = Some(now);
        }
    }

    /// Whether `record` is live and within its lifetimes at `now`.
    fn current(&self, record: &SessionRecord, now: u64) -> bool {
        record.live() && self.expires_at(record) > now
    }

    fn expires_at(&self, record: &SessionRecord) -> u64 {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let seen = record.last_seen_at.max(record.created_at);
        seen.saturating_add(millis(self.idle))
            .min(record.created_at.saturating_add(millis(self.max_age)))
    }

    /// What is left of a session's life at `now`: the cookie lasts as long,
    /// and never past the session's absolute end.
    fn left(&self, record: &SessionRecord, now: u64) -> Duration {
        Duration::from_millis(self.expires_at(record).saturating_sub(now))
    }

    /// The live session a cookie token names. A session past its idle or
    /// absolute lifetime is marked expired (once) and refused.
    pub fn session(&self, token: &str) -> Result<Session, Refused> {
        let digest = crate::id::hex(&sha256(token));
        let mut store = lock(&self.store);
        let mut found = None;
        for (at, record) in store.sessions.iter().enumerate() {
            let equal: bool = record.token_sha256.as_bytes().ct_eq(digest.as_bytes()).into();
            if equal {
                found = Some(at);
            }
        }
        let Some(at) = found else { return Err(Refused::Unknown) };
        self.still_live(&mut store, at)?;
        let record = &store.sessions[at];
        Ok(Session {
            session_id: record.session_id.clone(),
            principal_id: record.principal_id.clone(),
        })
    }

    /// Whether the session is live: neither revoked nor past its idle or
    /// absolute lifetime. One found past it is marked expired, once.
    pub fn check(&self, session_id: &str) -> Result<(), Refused> {
        let mut store = lock(&self.store);
        let at = store.sessions.iter().position(|record| record.session_id == session_id);
        self.still_live(&mut store, at.ok_or(Refused::Unknown)?)
    }

    fn still_live(&self, store: &mut Store, at: usize) -> Result<(), Refused> {
        if !store.sessions[at].live() {
            return Err(Refused::Unknown);
        }
        let now = crate::clock::now_ms();
        if now < self.expires_at(&store.sessions[at]) {
            return Ok(());
        }
        store.sessions[at].expired_at = Some(now);
        let session_id = store.sessions[at].session_id.clone();
        if let Err(error) = self.save(store) {
            tracing::error!(%error, "cannot write the security store");
        }
        Err(Refused::Expired(session_id))
    }

    /// Whether `presented` is the browser secret of the session, compared in
    /// constant time; a session without one matches nothing.
    pub fn browser_secret_matches(&self, session_id: &str, presented: &str) -> bool {
        let digest = crate::id::hex(&sha256(presented));
        let store = lock(&self.store);
        let record = store.sessions.iter().find(|record| record.session_id == session_id);
        record
            .and_then(|record| record.secret_sha256.as_deref())
            .is_some_and(|expected| expected.as_bytes().ct_eq(digest.as_bytes()).into())
    }

    /// Notes a use of the session: its idle window starts again. Returns
    /// what is left of its life from now on (the renewed cookie's lifetime).
    pub fn touch(&self, session_id: &str) -> Duration {
        let mut store = lock(&self.store);
        let now = crate::clock::now_ms();
        let mut left = Duration::ZERO;
        if let Some(record) =
            store.sessions.iter_mut().find(|record| record.session_id == session_id)
        {
            record.last_seen_at = now;
            left = self.left(record, now);
        }
        if let Err(error) = self.save(&mut store) {
            tracing::error!(%error, "cannot write the security store");
        }
        left
    }

    /// Every live session, for `shard sessions list`.
    pub fn list(&self) -> Vec<SessionView> {
        let store = lock(&self.store);
        let now = crate::clock::now_ms();
        store
            .sessions
            .iter()
            .filter(|record| self.current(record, now))
            .map(|record| SessionView {
                session_id: record.session_id.clone(),
                principal_id: record.principal_id.clone(),
                created_at: record.created_at,
                last_seen_at: record.last_seen_at.max(record.created_at),
                expires_at: self.expires_at(record),
                push: record.push.as_ref().map(PushSubscription::service),
            })
            .collect()
    }

    /// Keeps `subscription` as `session_id`'s (replacing one before);
    /// false if the session is not live.
    /// The session's choices carry over to a new subscription.
    pub fn subscribe(
        &self,
        session_id: &str,
        mut subscription: PushSubscription,
    ) -> std::io::Result<bool> {
        self.change_push(session_id, |push| {
            if let Some(before) = push.take() {
                subscription.choices = before.choices;
            }
            *push = Some(subscription);
        })
    }

    /// Forgets `session_id`'s subscription; false if it had none.
    pub fn unsubscribe(&self, session_id: &str) -> std::io::Result<bool> {
        self.change_push(session_id, |push| *push = None)
    }

    /// Forgets `session_id`'s subscription if it is still the one at
    /// `endpoint` (its push service said it is gone); false if not.
    pub fn subscription_gone(&self, session_id: &str, endpoint: &str) -> std::io::Result<bool> {
        self.change_push(session_id, |push| {
            if push.as_ref().is_some_and(|push| push.endpoint == endpoint) {
                *push = None;
            }
        })
    }

    /// Changes the choices of `session_id`'s subscription; its choices
    /// after, or `None` when it has no subscription.
    pub fn choose(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut PushChoices),
    ) -> std::io::Result<Option<PushChoices>> {
        let mut chosen = None;
        self.change_push(session_id, |push| {
            if let Some(push) = push {
                change(&mut push.choices);
                chosen = Some(push.choices.clone());
            }
        })?;
        Ok(chosen)
    }

    /// Runs `change` on a live session's subscription and saves the store
    /// if it changed; whether it did.
    fn change_push(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut Option<PushSubscription>),
    ) -> std::io::Result<bool> {
        let mut store = lock(&self.store);
        let Some(record) = live_record(&mut store, session_id) else { return Ok(false) };
        let before = record.push.clone();
        change(&mut record.push);
        let changed = record.push != before;
        if changed {
            self.save(&mut store)?;
        }
        Ok(changed)
    }

    /// The passkeys of a live session.
    pub fn passkeys(&self, session_id: &str) -> Vec<webauthn_rs::prelude::Passkey> {
        let mut store = lock(&self.store);
        live_record(&mut store, session_id)
            .map(|record| record.passkeys.clone())
            .unwrap_or_default()
    }

    /// Whether a live session with no passkey may add its first without
    /// proving one (docs/SECURITY.md, "Passkey step-up"): it was enrolled
    /// with a code from `shard enroll`, which only the daemon's machine
    /// prints, less than a code's lifetime ago. A session enrolled through
    /// a `/pair` link (which any enrolled cookie can mint) never is.
    pub fn freshly_enrolled(&self, session_id: &str) -> bool {
        let mut store = lock(&self.store);
        let now = crate::clock::now_ms();
        let lifetime = u64::try_from(self.codes.ttl().as_millis()).unwrap_or(u64::MAX);
        live_record(&mut store, session_id).is_some_and(|record| {
            record.paired_by.is_none()
                && record.passkeys.is_empty()
                && now.saturating_sub(record.created_at) < lifetime
        })
    }

    /// Keeps a new passkey for a live session that still has `had`
    /// passkeys (what its registration was allowed on); false if the
    /// session is not live, has [`MAX_PASSKEYS`] already, or changed since.
    pub fn add_passkey(
        &self,
        session_id: &str,
        passkey: webauthn_rs::prelude::Passkey,
        had: usize,
    ) -> std::io::Result<bool> {
        let mut store = lock(&self.store);
        let Some(record) = live_record(&mut store, session_id) else { return Ok(false) };
        if record.passkeys.len() >= MAX_PASSKEYS || record.passkeys.len() != had {
            return Ok(false);
        }
        record.passkeys.push(passkey);
        self.save(&mut store)?;
        Ok(true)
    }

    /// Records a use of one of the session's passkeys (its counter, its
    /// backup state), when the authenticator says it changed.
    pub fn passkey_used(
        &self,
        session_id: &str,
        used: &webauthn_rs::prelude::AuthenticationResult,
    ) -> std::io::Result<()> {
        let mut store = lock(&self.store);
        let mut changed = false;
        if let Some(record) =
            store.sessions.iter_mut().find(|record| record.session_id == session_id)
        {
            for passkey in &mut record.passkeys {
                changed |= passkey.update_credential(used) == Some(true);
            }
        }
        if changed {
            self.save(&mut store)?;
        }
        Ok(())
    }

    /// The subscription of one live session.
    pub fn subscription(&self, session_id: &str) -> Option<PushSubscription> {
        let mut store = lock(&self.store);
        let record = live_record(&mut store, session_id)?;
        self.current(record, crate::clock::now_ms()).then(|| record.push.clone()).flatten()
    }

    /// The subscription of every live session, with its session.
    pub fn subscriptions(&self) -> Vec<(Session, PushSubscription)> {
        let store = lock(&self.store);
        let now = crate::clock::now_ms();
        store
            .sessions
            .iter()
            .filter(|record| self.current(record, now))
            .filter_map(|record| {
                let session = Session {
                    session_id: record.session_id.clone(),
                    principal_id: record.principal_id.clone(),
                };
                Some((session, record.push.clone()?))
            })
            .collect()
    }

    /// Revokes every live session; returns their ids.
    pub fn revoke_all(&self) -> std::io::Result<Vec<String>> {
        let mut store = lock(&self.store);
        let now = crate::clock::now_ms();
        let mut revoked = Vec::new();
        for record in store.sessions.iter_mut().filter(|record| record.live()) {
            record.revoked_at = Some(now);
            revoked.push(record.session_id.clone());
        }
        self.save(&mut store)?;
        Ok(revoked)
    }

    /// Revokes one session; `false` when there is no such live session.
    pub fn revoke(&self, session_id: &str) -> std::io::Result<bool> {
        let mut store = lock(&self.store);
        let now = crate::clock::now_ms();
        let mut found = false;
        for record in &mut store.sessions {
            if record.session_id == session_id && record.live() {
                record.revoked_at = Some(now);
                found = true;
            }
        }
        self.save(&mut store)?;
        Ok(found)
    }

    /// A single-use ticket for one WebSocket upgrade from `origin`.
    pub fn issue_ticket(&self, session: &Session, origin: &str) -> String {
        self.tickets.issue(session, origin)
    }

    /// Consumes a ticket, whatever the outcome, and returns its session if it
    /// was valid for `origin` and its session is still live.
    pub fn redeem_ticket(&self, ticket: &str, origin: &str) -> Option<Session> {
        let session = self.tickets.redeem(ticket, origin)?;
        let store = lock(&self.store);
        let now = crate::clock::now_ms();
        let live = store
            .sessions
            .iter()
            .any(|record| record.session_id == session.session_id && self.current(record, now));
        live.then_some(session)
    }
}

#[cfg(test)]
mod tests {
    use super::codes::{MAX_FAILURES, MAX_FAILURES_IN_ALL};
    use super::*;

    fn auth() -> (tempfile::TempDir, Auth) {
        let dir = tempfile::tempdir().expect("dir");
        let auth = Auth::load(dir.path(), Duration::from_secs(3600), Duration::from_secs(7200))
            .expect("load");
        (dir, auth)
    }

    const PEER: ClientKey = ClientKey::V4([127, 0, 0, 1]);

    #[test]
    fn a_code_enrolls_once_and_is_never_stored_in_clear() {
        let (dir, auth) = auth();
        let code = auth.new_code();
        assert!(code.len() >= 22, "at least 128 bits");
        let token = auth.enroll(&code, PEER).expect("valid code").token;
        assert!(matches!(auth.enroll(&code, PEER), Err(EnrollError::Invalid)), "single use");
        let store = std::fs::read_to_string(dir.path().join("security.json")).expect("store");
        assert!(!store.contains(&code) && !store.contains(&token), "only hashes on disk");
        assert!(auth.session(&token).is_ok());
        assert_eq!(auth.session("not-a-token"), Err(Refused::Unknown));
    }

    #[test]
    fn tickets_are_single_use_and_bound_to_their_origin() {
        let (_dir, auth) = auth();
        let code = auth.new_code();
        let token = auth.enroll(&code, PEER).expect("enroll").token;
        let (session, token) = (auth.session(&token).expect("session"), token);
        let ticket = auth.issue_ticket(&session, "http://127.0.0.1:1");
        assert!(auth.redeem_ticket(&ticket, "http://evil.example").is_none());
        assert!(
            auth.redeem_ticket(&ticket, "http://127.0.0.1:1").is_none(),
            "consumed by the failed try"
        );
        let ticket = auth.issue_ticket(&session, "http://127.0.0.1:1");
        assert_eq!(auth.redeem_ticket(&ticket, "http://127.0.0.1:1"), Some(session.clone()));
        assert!(auth.revoke(&session.session_id).expect("revoke"));
        assert_eq!(auth.session(&token), Err(Refused::Unknown));
        let ticket = auth.issue_ticket(&session, "http://127.0.0.1:1");
        assert!(auth.redeem_ticket(&ticket, "http://127.0.0.1:1").is_none(), "revoked session");
    }

    #[test]
    fn a_principal_keeps_at_most_the_newest_sessions() {
        let mut store = Store { version: STORE_VERSION, ..Store::default() };
        for at in 0..(MAX_SESSIONS_PER_PRINCIPAL as u64 + 3) {
            store.sessions.push(SessionRecord {
                session_id: format!("session-{at}"),
                principal_id: "principal-1".into(),
                token_sha256: String::new(),
                created_at: at,
                last_seen_at: at,
                revoked_at: None,
                expired_at: None,
                secret_sha256: None,
                push: None,
                passkeys: Vec::new(),
                paired_by: None,
            });
        }
        Auth::cap_sessions(&mut store, "principal-1", 100);
        let live: Vec<&str> = store
            .sessions
            .iter()
            .filter(|record| record.live())
            .map(|record| record.session_id.as_str())
            .collect();
        assert_eq!(live.len(), MAX_SESSIONS_PER_PRINCIPAL);
        assert_eq!(live[0], "session-3", "the three oldest were revoked");
    }

    #[test]
    fn sessions_expire_idle_and_at_their_absolute_age() {
        let dir = tempfile::tempdir().expect("dir");
        let auth = Auth::load(dir.path(), Duration::from_millis(50), Duration::from_secs(3600))
            .expect("load");
        let Enrolled { session, token, .. } = auth.enroll(&auth.new_code(), PEER).expect("enroll");
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(auth.session(&token), Err(Refused::Expired(session.session_id.clone())));
        assert_eq!(
            auth.session(&token),
            Err(Refused::Unknown),
            "expired once, then simply unknown"
        );
        let auth = Auth::load(dir.path(), Duration::from_secs(3600), Duration::from_millis(50))
            .expect("load");
        let token = auth.enroll(&auth.new_code(), PEER).expect("enroll").token;
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(auth.session(&token), Err(Refused::Expired(_))), "absolute age");
    }

    #[test]
    fn wrong_codes_are_rate_limited_per_peer() {
        let (_dir, auth) = auth();
        for _ in 0..MAX_FAILURES {
            assert!(matches!(auth.enroll("wrong", PEER), Err(EnrollError::Invalid)));
        }
        assert!(matches!(auth.enroll("wrong", PEER), Err(EnrollError::RateLimited(_))));
        let other = ClientKey::V4([127, 0, 0, 2]);
        assert!(matches!(auth.enroll("wrong", other), Err(EnrollError::Invalid)));
    }

    #[test]
    fn a_right_code_does_not_count_and_everyone_together_is_limited() {
        let (_dir, auth) = auth();
        for _ in 0..MAX_FAILURES + 5 {
            assert!(auth.enroll(&auth.new_code(), PEER).is_ok(), "successes never count");
        }
        for n in 0..MAX_FAILURES_IN_ALL {
            let client = ClientKey::V4([10, 0, (n / 256) as u8, (n % 256) as u8]);
            assert!(matches!(auth.enroll("wrong", client), Err(EnrollError::Invalid)));
        }
        let fresh = ClientKey::V4([192, 0, 2, 7]);
        assert!(matches!(auth.enroll(&auth.new_code(), fresh), Err(EnrollError::RateLimited(_))));
    }
}
