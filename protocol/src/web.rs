//! The bodies of the browser's two JSON HTTP routes (CONTRACT.md): what the
//! page posts to `/enroll` and what it answers, and what `/bootstrap`
//! answers. Shared like every other message, so the page and the daemon
//! cannot disagree on them either.

use serde::{Deserialize, Serialize};

/// `POST /enroll`: the single-use code from an enrollment link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollRequest {
    pub code: String,
}

/// `POST /enroll`'s answer. The browser secret is shown this once: the page
/// keeps it in its origin's storage and sends it to `/bootstrap` in the
/// [`BROWSER_SECRET_HEADER`] (docs/SECURITY.md, "A cookie read on another
/// port").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollAnswer {
    pub principal_id: String,
    pub browser_secret: String,
}

/// The request header that carries the browser secret to `/bootstrap`.
pub const BROWSER_SECRET_HEADER: &str = "shard-browser-secret";

/// `POST /bootstrap`'s answer: a short-lived, single-use WebSocket ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootstrap {
    pub ticket: String,
    pub expires_in_ms: u64,
    /// The WebSocket subprotocol to offer with the ticket.
    pub protocol: String,
}
