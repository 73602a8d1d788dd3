//! What Shard's daemon and its agent runtime both stand on, so that neither
//! reaches into the other for it:
//!
//! - [`session_log`]: a session's record, the file itself, and
//!   [`conversation`], the session in memory (`history`, `window`,
//!   `compaction`, `lineage` for forks and the session list, `recorded` for
//!   owed inputs and settings). Every runtime writes this record; the
//!   daemon reads it through [`session_view`] for `sync`, search and usage.
//! - [`private`]: owner-only files and folders.
//! - [`process_tree`]: subreaping and killing what an agent started, and
//!   [`resources`]: what a process tree uses.
//! - [`config`]: `config.toml`, with [`runtimes`] (agents that are not
//!   Shard's own), [`sandbox`] (their containment), [`limits`] (the
//!   fleet's) and [`modes`].
//! - [`diff`]: unified-diff hunks as Shard shows an edit.

pub mod config;
pub mod conversation;
pub mod diff;
pub mod limits;
pub mod modes;
pub mod nodes;
pub mod private;
pub mod process_tree;
pub mod resources;
pub mod runtimes;
pub mod sandbox;
pub mod session_log;
pub mod session_view;
pub mod util;

pub use process_tree::PARENT_PID_ENV;
pub use util::truncate_chars;
