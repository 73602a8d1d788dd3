//! What a generation's reader and waiter tell its host: its lines, then its
//! exit. A leaf of the runtime seam, so that what injects lines of its own
//! among an agent's (the sandbox's network questions) needs nothing else of
//! it.

use shard_protocol::jsonl::LineError;

/// Lines and the exit of a generation, as its reader and waiter see them.
pub enum ChildEvent {
    /// The lines one read of the child's stdout completed, in order.
    Lines {
        epoch: u64,
        lines: Vec<Result<String, LineError>>,
    },
    Exited {
        epoch: u64,
        code: Option<i32>,
        description: String,
    },
}
