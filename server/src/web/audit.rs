//! The audit log, `$SHARD_HOME/audit.log`: one JSON object per line (0600)
//! for every security-relevant event: enrollments (with the session whose
//! pairing link it was, if any), pairing links issued, sessions created, revoked
//! and expired, rejected requests and upgrades with the reason, forwarded
//! headers ignored, the startup mode and its warnings.
//!
//! It never holds a credential: no code, cookie, ticket or token, at most a
//! short hash prefix to tell two apart. Callers pass ids and reasons only.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::limiter::{ClientKey, Limiter};

/// Past this size the log is moved to `audit.log.1` (one generation kept).
const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// Events anyone can cause at will, by sending garbage: recorded up to
/// [`NOISE_PER_CLIENT`] a minute from one client and [`NOISE_IN_ALL`] from
/// everyone, so that noise cannot rotate the evidence of an attack out of
/// the log (at the ceiling a 10 MB generation lasts over an hour).
const NOISY: &[&str] = &[
    "request_rejected",
    "upgrade_rejected",
    "forwarded_headers_ignored",
    "enroll_failed",
    "rate_limited",
];
const NOISE_PER_CLIENT: usize = 60;
const NOISE_IN_ALL: usize = 600;
const NOISE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

pub struct Audit {
    path: PathBuf,
    file: Mutex<Option<File>>,
    noise: Limiter<ClientKey>,
    all_noise: Limiter<()>,
    /// One "suppressed" line per client a minute, and one in all.
    told: Limiter<ClientKey>,
    told_all: Limiter<()>,
}

impl Audit {
    pub fn open(home: &Path) -> std::io::Result<Self> {
        let path = home.join("audit.log");
        let file = Self::open_file(&path)?;
        Ok(Self {
            path,
            file: Mutex::new(Some(file)),
            noise: Limiter::new(NOISE_PER_CLIENT, NOISE_WINDOW),
            all_noise: Limiter::new(NOISE_IN_ALL, NOISE_WINDOW),
            told: Limiter::new(1, NOISE_WINDOW),
            told_all: Limiter::new(1, NOISE_WINDOW),
        })
    }

    fn open_file(path: &Path) -> std::io::Result<File> {
        let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        shard_platform::private::tighten(path, 0o600)?;
        Ok(file)
    }

    /// Whether a noisy event of `fields`' client may be written; when not,
    /// the first refusal of a minute writes a line saying so instead.
    fn admit(&self, event: &str, fields: &Value) -> bool {
        if !NOISY.contains(&event) {
            return true;
        }
        let client = fields["peer"].as_str().and_then(|peer| peer.parse::<std::net::IpAddr>().ok());
        let client = client.map(ClientKey::from);
        let mine = client.is_none_or(|client| self.noise.fail(client).is_ok());
        if mine && self.all_noise.fail(()).is_ok() {
            return true;
        }
        let (tell, scope) = match client {
            Some(client) if !mine => (self.told.fail(client).is_ok(), "this client"),
            _ => (self.told_all.fail(()).is_ok(), "all clients"),
        };
        if tell {
            self.write(
                "audit_suppressed",
                json!({"peer": fields["peer"], "scope": scope,
                       "reason": "too many rejected requests a minute; the rest of this minute's are not recorded"}),
            );
        }
        false
    }

    /// Appends one event. Never fails the caller: an audit write error is
    /// logged and the request goes on.
    pub fn record(&self, event: &str, fields: Value) {
        if self.admit(event, &fields) {
            self.write(event, fields);
        }
    }

    fn write(&self, event: &str, fields: Value) {
        let mut line = Map::new();
        line.insert("ts".into(), json!(crate::clock::now_ms()));
        line.insert("event".into(), json!(event));
        if let Value::Object(fields) = fields {
            line.extend(fields);
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let too_big = std::fs::metadata(&self.path).is_ok_and(|meta| meta.len() > MAX_BYTES);
        if too_big {
            let _ = std::fs::rename(&self.path, self.path.with_extension("log.1"));
            *file = Self::open_file(&self.path).ok();
        }
        let written = file.as_mut().map(|file| file.write_all(text.as_bytes()));
        if !matches!(written, Some(Ok(()))) {
            tracing::error!(event, "cannot write the audit log");
        }
    }
}

/// A short, non-reversible tag for a secret: enough to correlate two log
/// lines, useless to an attacker.
pub fn tag(secret: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(secret.as_bytes());
    crate::id::hex(&digest[..4])
}
