//! The Shard daemon: supervises one agent process per agent, multiplexes each
//! agent's events to every attached client, and serves the web client
//! (docs/ARCHITECTURE.md).
//!
//! - [`cli`]: the `shard` command line (CONTRACT.md).
//! - [`daemon`]: startup, the listeners, shutdown.
//! - [`home`]: `$SHARD_HOME`, its lock, private files.
//! - [`config`]: loopback, direct and proxy modes, validated before binding.
//! - [`auth`]: enrollment, sessions, tickets; [`http`]: routes and checks;
//!   [`limiter`]: per-peer rate limits; [`audit`]: the audit log.
//! - [`ws`], [`unix`]: the two daemon transports; [`connection`]: the
//!   protocol session both share; [`hub`]: bounded outboxes and broadcast.
//! - [`registry`], [`manifest`]: durable agents; [`host`]: one agent's
//!   processes, projection and fan-out; [`delegation`]: who answers whom.
//! - [`assets`]: the browser bundle embedded at build time.
//! - [`enroll`]: `shard enroll`.

// The web client's view types (rendered here for SSR) nest deeply.
#![recursion_limit = "512"]

pub mod assets;
pub mod audit;
pub mod auth;
pub mod cli;
pub mod config;
pub mod connection;
pub mod daemon;
pub mod delegation;
pub mod enroll;
pub mod home;
pub mod host;
pub mod http;
pub mod hub;
pub mod limiter;
pub mod manifest;
pub mod registry;
pub mod unix;
pub mod ws;
