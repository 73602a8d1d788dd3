//! What a generation's reader and waiter tell its host: its lines, then its
//! exit; and what the daemon itself asks about the generation (its
//! sandbox's network questions). A leaf of the runtime seam, so that the
//! sandbox needs nothing else of it.

use shard_protocol::agent::{PermissionAnswer, PermissionRequest};
use shard_protocol::jsonl::LineError;

/// Lines and the exit of a generation, as its reader and waiter see them,
/// and the daemon's own questions about it.
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
    /// A question the daemon asks about this generation.
    Ask {
        epoch: u64,
        asked: Asked,
    },
    /// A question the daemon asked is moot (the connection it was about
    /// went): it is closed everywhere, as withdrawn.
    Withdraw {
        epoch: u64,
        request_id: String,
    },
}

/// Where the answer to a question the daemon asked itself goes: called
/// once, in the host's task, with the winning answer.
pub type Answer = Box<dyn FnOnce(&PermissionAnswer) + Send>;

/// A question the daemon raises itself (the sandbox's network question):
/// shown, routed, guarded by step-up and answered headless like the
/// agent's own questions, but its answer goes to `answer`, never to the
/// agent.
pub struct Asked {
    pub request: PermissionRequest,
    /// Takes the winning answer, in the host's task, before any client
    /// hears the question closed. Dropped unanswered (its process ended):
    /// the asker hears nothing, which it takes as a deny.
    pub answer: Answer,
}
