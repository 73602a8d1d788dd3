//! Full-text search across every agent's sessions (Shard extension, pinned
//! in docs/PROTOCOL-NOTES.md, "Search"): `search.query` and its results.
//! The daemon keeps the index; a result names the message by its agent,
//! session and entry, so a client opens the transcript there.

use serde::{Deserialize, Serialize};

use crate::types::Role;

/// `search.query`: the user's words, searched as plain words (no query
/// syntax: quotes, `*`, `-`, `NEAR` are words or nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchQuery {
    pub query: String,
    /// At most this many results, best first (default 20, at most 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only this agent's messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

/// The data of `search.query`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub results: Vec<SearchHit>,
}

/// One message that matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    pub session_id: String,
    /// Whether `session_id` is the session the agent runs now; else it is
    /// another of its lineage, which `session.activate` switches to.
    #[serde(default)]
    pub active: bool,
    /// The message's entry: its `Message.id` in a `sync`.
    pub entry_id: String,
    pub role: Role,
    /// When the message was written (ms since the Unix epoch).
    pub at: u64,
    /// The matching part of the message, in pieces; the pieces that
    /// matched the query have `hit`. Plain text, never markup.
    pub snippet: Vec<SnippetPart>,
}

/// A piece of a [`SearchHit`]'s snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnippetPart {
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hit: bool,
}
