//! The Shard agent runtime (`shard agent --stdio`): one coding agent per
//! process, speaking the per-agent protocol (PROTOCOL.md §9) as JSONL on
//! stdio. The daemon spawns one per agent; it also runs headless on its own.
//!
//! The runtime itself (provider, tools, permission gate, modes, session log,
//! compaction, fork) is being built under its own issue; see
//! docs/ARCHITECTURE.md for where each part will live.
