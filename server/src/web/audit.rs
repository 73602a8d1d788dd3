//! The audit log, `$SHARD_HOME/audit.log`: one JSON object per line (0600)
//! for every security-relevant event: enrollments, sessions created, revoked
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

/// Past this size the log is moved to `audit.log.1` (one generation kept).
const MAX_BYTES: u64 = 10 * 1024 * 1024;

pub struct Audit {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl Audit {
    pub fn open(home: &Path) -> std::io::Result<Self> {
        let path = home.join("audit.log");
        let file = Self::open_file(&path)?;
        Ok(Self { path, file: Mutex::new(Some(file)) })
    }

    fn open_file(path: &Path) -> std::io::Result<File> {
        OpenOptions::new().create(true).append(true).mode(0o600).open(path)
    }

    /// Appends one event. Never fails the caller: an audit write error is
    /// logged and the request goes on.
    pub fn record(&self, event: &str, fields: Value) {
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
    digest.iter().take(4).map(|byte| format!("{byte:02x}")).collect()
}
