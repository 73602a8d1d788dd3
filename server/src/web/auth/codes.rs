//! Enrollment codes: minted for `shard enroll` or a session's `/pair`
//! link, kept only in memory and only as argon2id hashes (a person copies
//! them: they get the slow hash), single-use, and guessed at a bounded
//! rate per client and for everyone together.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use super::{EnrollError, lock, random_token};
use crate::web::limiter::{ClientKey, Limiter, Reservation};

/// How long an enrollment code stays valid, by default and at most
/// (`--enroll-code-ttl` may shorten it).
pub const CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// Outstanding enrollment codes kept; older ones are dropped. Bounds memory
/// and the work one wrong guess costs (each is checked against every code).
const MAX_CODES: usize = 16;
/// Wrong enrollment codes a minute from one client (CONTRACT.md).
pub(super) const MAX_FAILURES: usize = 10;
/// Wrong enrollment codes a minute from everyone together: a guess spread
/// over many addresses stays as slow.
pub(super) const MAX_FAILURES_IN_ALL: usize = 100;
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

struct Code {
    phc: String,
    expires: Instant,
    /// The session that asked for it at `/pair`; `None` for `shard enroll`'s.
    issued_by: Option<String>,
}

/// The codes outstanding, and the failures counted against guessing.
pub(super) struct Codes {
    codes: Mutex<Vec<Code>>,
    failures: Arc<Limiter<ClientKey>>,
    all_failures: Arc<Limiter<()>>,
    ttl: Duration,
}

/// A code taken: who issued it, and the attempt, counted as a failure
/// until the enrollment it opens goes through ([`Taken::succeeded`]).
pub(super) struct Taken {
    pub issued_by: Option<String>,
    mine: Reservation<ClientKey>,
    everyone: Reservation<()>,
}

impl Taken {
    /// The enrollment went through: the attempt is not a failure.
    pub fn succeeded(self) -> Option<String> {
        self.mine.give_back();
        self.everyone.give_back();
        self.issued_by
    }
}

impl Codes {
    pub fn new() -> Self {
        Self {
            codes: Mutex::new(Vec::new()),
            failures: Arc::new(Limiter::new(MAX_FAILURES, FAILURE_WINDOW)),
            all_failures: Arc::new(Limiter::new(MAX_FAILURES_IN_ALL, FAILURE_WINDOW)),
            ttl: CODE_TTL,
        }
    }

    /// Codes live `ttl` instead of [`CODE_TTL`] (never longer).
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl.min(CODE_TTL);
    }

    /// How long a code minted now stays valid.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new code, returned in clear once and kept hashed; one `issued_by`
    /// a session replaces that session's previous one.
    pub fn mint(&self, issued_by: Option<String>) -> String {
        let code = random_token(16);
        let mut salt = [0u8; 16];
        if let Err(error) = getrandom::fill(&mut salt) {
            panic!("the operating system's random generator failed: {error}");
        }
        let phc = SaltString::encode_b64(&salt)
            .and_then(|salt| {
                Argon2::default().hash_password(code.as_bytes(), &salt).map(|hash| hash.to_string())
            })
            .unwrap_or_default();
        let mut codes = lock(&self.codes);
        let now = Instant::now();
        codes.retain(|code| {
            code.expires > now && (issued_by.is_none() || code.issued_by != issued_by)
        });
        if codes.len() >= MAX_CODES {
            codes.remove(0);
        }
        codes.push(Code { phc, expires: now + self.ttl, issued_by });
        code
    }

    /// Takes `code` if it is one, whatever comes of the enrollment.
    ///
    /// The attempt counts as a failure of `client`, and of everyone, from
    /// before the code is checked until the enrollment succeeded: attempts
    /// in flight are limited like finished ones.
    pub fn take(&self, code: &str, client: ClientKey) -> Result<Taken, EnrollError> {
        let mine = self.failures.reserve(client).map_err(EnrollError::RateLimited)?;
        let everyone = match self.all_failures.reserve(()) {
            Ok(reservation) => reservation,
            Err(wait) => {
                mine.give_back();
                return Err(EnrollError::RateLimited(wait));
            }
        };
        let mut codes = lock(&self.codes);
        let now = Instant::now();
        codes.retain(|code| code.expires > now);
        // Check every code (no early exit) so timing says nothing about
        // which one matched.
        let mut found = None;
        for (at, candidate) in codes.iter().enumerate() {
            let valid = PasswordHash::new(&candidate.phc).is_ok_and(|hash| {
                Argon2::default().verify_password(code.as_bytes(), &hash).is_ok()
            });
            if valid && found.is_none() {
                found = Some(at);
            }
        }
        let matched = found.map(|at| codes.remove(at)).ok_or(EnrollError::Invalid)?;
        Ok(Taken { issued_by: matched.issued_by, mine, everyone })
    }
}
