//! The security store (`$SHARD_HOME/security.json`, 0600, versioned):
//! principals and sessions, each with its push subscription and passkeys:
//! ids, hashes and times, never a raw credential.

use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::STORE_VERSION;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Principal {
    pub(super) principal_id: String,
    pub(super) created_at: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SessionRecord {
    pub(super) session_id: String,
    pub(super) principal_id: String,
    pub(super) token_sha256: String,
    pub(super) created_at: u64,
    /// Last `/bootstrap` (ms); idle expiry counts from here.
    #[serde(default)]
    pub(super) last_seen_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) revoked_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) expired_at: Option<u64>,
    /// SHA-256 of the browser secret handed out at enrollment; absent for
    /// sessions enrolled before there was one (they enroll again to use
    /// loopback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) secret_sha256: Option<String>,
    /// The session's Web Push subscription (docs/NOTIFICATIONS.md); it
    /// ends with the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) push: Option<PushSubscription>,
    /// The session's passkeys, for step-up approvals (docs/SECURITY.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) passkeys: Vec<webauthn_rs::prelude::Passkey>,
    /// The session whose `/pair` link enrolled this one; `None` for a code
    /// from `shard enroll`. A paired session never counts as freshly
    /// enrolled by the owner (its first passkey, docs/SECURITY.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) paired_by: Option<String>,
}

/// Where a browser's push service takes messages for it, and the keys they
/// are encrypted to (RFC 8291): what `PushSubscription.toJSON()` gives the
/// page, checked (`web::push`). The endpoint is a capability and `auth` a
/// secret: neither is ever logged or listed whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushSubscription {
    pub endpoint: String,
    /// The browser's P-256 public key, base64url (65 bytes, uncompressed).
    pub p256dh: String,
    /// The shared authentication secret, base64url (16 bytes).
    pub auth: String,
    pub created_at: u64,
    /// What this browser wants pushed.
    #[serde(default)]
    pub choices: PushChoices,
}

/// What a browser wants pushed (docs/NOTIFICATIONS.md): each kind on or
/// off, and agents it does not want to hear of at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushChoices {
    /// Questions (permission and UI requests), and their ends.
    pub questions: bool,
    /// Turns that failed.
    pub errors: bool,
    /// Agents left out, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub muted: Vec<String>,
}

impl Default for PushChoices {
    fn default() -> Self {
        Self { questions: true, errors: true, muted: Vec::new() }
    }
}

/// The most passkeys one browser session keeps.
pub const MAX_PASSKEYS: usize = 8;

/// The most agents one browser may mute (a bound on the session file).
pub const MAX_MUTED: usize = 256;

impl PushSubscription {
    /// The push service, as a person is shown it: the endpoint's host only
    /// (the rest of the URL is the subscription's capability).
    pub fn service(&self) -> String {
        url::Url::parse(&self.endpoint)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_else(|| "?".to_owned())
    }
}

impl SessionRecord {
    pub(super) fn live(&self) -> bool {
        self.revoked_at.is_none() && self.expired_at.is_none()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Store {
    pub(super) version: u32,
    pub(super) principals: Vec<Principal>,
    pub(super) sessions: Vec<SessionRecord>,
}

/// The record of `session_id` while it is live (not revoked, not expired).
impl Store {
    /// Reads the store at `path` (absent: empty). A store of another
    /// version, or one not this user's own regular file, is refused.
    pub(super) fn read(path: &Path) -> anyhow::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::read(path) {
            Ok(bytes) => {
                let meta = std::fs::symlink_metadata(path)?;
                if meta.file_type().is_symlink() || meta.uid() != nix::unistd::getuid().as_raw() {
                    bail!("{} is not a regular file of this user", path.display());
                }
                shard_platform::private::tighten(path, 0o600)?;
                let store: Store = serde_json::from_slice(&bytes)
                    .with_context(|| format!("{} is not a valid security store", path.display()))?;
                if store.version != STORE_VERSION {
                    bail!(
                        "{} has version {}, this daemon reads {STORE_VERSION}",
                        path.display(),
                        store.version
                    );
                }
                Ok(store)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Ok(Store { version: STORE_VERSION, ..Store::default() })
            }
            Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Writes it, private to this user.
    pub(super) fn write(&mut self, path: &Path) -> std::io::Result<()> {
        // A session that ended takes its push subscription and passkeys
        // with it, whichever way it ended: dropped here, before any write.
        for record in self.sessions.iter_mut().filter(|record| !record.live()) {
            record.push = None;
            record.passkeys.clear();
        }
        let bytes = serde_json::to_vec_pretty(&*self).map_err(std::io::Error::other)?;
        crate::home::write_private(path, &bytes)
    }
}

pub(super) fn live_record<'a>(
    store: &'a mut Store,
    session_id: &str,
) -> Option<&'a mut SessionRecord> {
    store.sessions.iter_mut().find(|record| record.session_id == session_id && record.live())
}
