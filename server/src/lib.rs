//! The Shard daemon: supervises one agent process per agent, multiplexes each
//! agent's events to every attached client, and serves the web client
//! (docs/ARCHITECTURE.md). Folders, from the bottom up (each uses only those
//! before it; a test keeps it so):
//!
//! - [`home`], [`clock`], [`id`], [`queue`]: `$SHARD_HOME` and its private
//!   files, time, opaque ids, the one queue bounded in bytes.
//! - [`upstream`]: a connection to a daemon as its client, over any byte
//!   stream (`shard acp`'s, a hub's to its nodes).
//! - [`search`]: the full-text index of every agent's sessions, kept by a
//!   thread of its own from the session logs.
//! - [`agents`]: the registry of durable agents, one host actor per agent
//!   (process generations, questions, the `sync` projection), delegation.
//! - [`jobs`], [`workspaces`]: background subagent jobs; git worktree
//!   workspaces.
//! - [`commands`]: every command a client may send, the table of who may
//!   run it, and the commands themselves by family.
//! - [`clients`]: one connection's protocol state, its bounded outbox, the
//!   unix and WebSocket transports and the one writer both use.
//! - [`web`]: HTTP routes, the WebSocket upgrade, authentication, limits,
//!   audit, assets and the web configuration.
//! - [`daemon`]: startup, the listeners, signals and shutdown.
//! - [`admin`]: `shard enroll` and `shard sessions`, clients of the socket.
//! - [`bridge`]: `shard bridge`, the socket joined to stdin/stdout for a hub
//!   on another machine.
//! - [`cli`]: the `shard` command line.

// The web client's view types (rendered here for SSR) nest deeply.
#![recursion_limit = "512"]

pub mod admin;
pub mod agents;
pub mod bridge;
pub mod children;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod commands;
pub mod daemon;
pub mod editors;
pub mod guard;
pub mod home;
pub mod id;
pub mod jobs;
pub mod queue;
pub mod sandbox;
pub mod search;
pub mod upstream;
pub mod web;
pub mod workspaces;

#[cfg(test)]
mod layout;
