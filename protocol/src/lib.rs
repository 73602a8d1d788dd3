//! Shard's wire protocol: every message of `PROTOCOL.md` as Rust types.
//!
//! This crate is the one source of truth shared by the daemon (`server`), the
//! agent runtime (`agent`) and the browser client (`app`, compiled to WASM), so
//! it depends on serde alone: no tokio, no axum, nothing that cannot build for
//! `wasm32-unknown-unknown`.
//!
//! - [`envelope`]: the §5 envelope, decoding with field-naming errors, encoding.
//! - [`decode`]: the one decoder of a parsed JSON value, as the wire writes it.
//! - [`message`]: the closed message sets, [`ClientMessage`] and [`ServerMessage`].
//! - [`agent`]: per-agent commands, events and results (§9), one module per
//!   part of the section (`lifecycle`, `drive`, `session`, `turn`,
//!   `permission`, `ui`), all re-exported from `agent`.
//! - [`orchestrator`]: registry commands, events and results (§10.1, §10.2).
//! - [`workspace`]: workspace commands and projections (§10.1a).
//! - [`subagent`]: background job commands and types (§10.3, §11.2).
//! - [`types`]: the shared types of §11.
//! - [`identity`]: who an agent is, declared once for every message and
//!   record that names one.
//! - [`usage`], [`approvals`], [`search`]: the daemon's usage rollups,
//!   approval history and full-text search (Shard extensions).
//! - [`sandbox`]: the sandbox an agent runs in, as asked and as applied.
//! - [`fleet`]: what each agent's processes use.
//! - [`budget`]: caps on what agents spend, and the daemon's hold.
//! - [`node`]: other machines' daemons a hub reaches, and their links.
//! - [`error`]: the §8 error registry and the `{code, message}` shape.
//! - [`diagnostic`]: error text made safe to show and bounded.
//! - [`display`]: text a person decides on, hidden characters made visible.
//! - [`jsonl`]: the §2.1 line framing for stdio and the unix socket.
//! - [`web`]: the bodies of the browser's JSON HTTP routes (`/enroll`, `/bootstrap`).
//!
//! Wire types are forward compatible: unknown fields are ignored, optional
//! fields default, and enums read from a peer keep an `Unknown` arm where a
//! newer peer may add values. Rules the spec states about a message's shape
//! (for example "exactly one of `choice_id` or `decision`") are enforced while
//! decoding, so a value of these types is always a valid message.

pub mod agent;
pub mod approvals;
pub mod budget;
pub mod decode;
pub mod diagnostic;
pub mod display;
pub mod envelope;
pub mod error;
pub mod fleet;
pub mod identity;
pub mod jsonl;
pub mod message;
pub mod node;
pub mod orchestrator;
pub mod sandbox;
pub mod search;
pub mod subagent;
mod tagged;
pub mod types;
pub mod usage;
pub mod web;
pub mod workspace;

pub use diagnostic::{DIAGNOSTIC_LIMIT, diagnostic};
pub use envelope::{DecodeError, Envelope, Scope};
pub use error::{ErrorCode, WireError};
pub use message::{ClientMessage, ServerMessage};

/// The protocol version this build speaks (§7), sent in every `hello`.
pub const PROTOCOL_VERSION: &str = "0.1.0";

/// The WebSocket subprotocol the daemon selects (CONTRACT.md).
pub const WS_SUBPROTOCOL: &str = "shard.v1";

/// Prefix of the subprotocol that carries a one-time WebSocket ticket.
pub const WS_TICKET_PREFIX: &str = "shard.ticket.";
