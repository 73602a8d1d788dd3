//! The Shard daemon: an axum server on loopback that serves the web client
//! and, as the issues land, supervises agent processes and multiplexes their
//! event streams to every attached client (docs/ARCHITECTURE.md).
//!
//! - [`cli`]: the command line of the `shard` binary (CONTRACT.md).
//! - [`daemon`]: binding, the accept loop and shutdown.
//! - [`http`]: the HTTP routes and the headers every answer carries.
//! - [`assets`]: the browser bundle, embedded into the binary at build time.

pub mod assets;
pub mod cli;
pub mod daemon;
pub mod http;
