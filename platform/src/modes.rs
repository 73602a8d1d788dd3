//! Modes: `build` (every tool, mutating ones ask first) and `plan` (read-only
//! tools only). The mode controller is mandatory: every runtime has one, so
//! `list_modes` always answers (PROTOCOL.md §9.2).

use shard_protocol::types::ModeDescriptor;

pub const BUILD: &str = "build";
pub const PLAN: &str = "plan";

/// The catalog, in registration order.
pub fn catalog() -> Vec<ModeDescriptor> {
    vec![
        ModeDescriptor {
            name: BUILD.to_owned(),
            description: "All tools. Writes, edits and shell commands ask first.".to_owned(),
        },
        ModeDescriptor {
            name: PLAN.to_owned(),
            description: "Read-only tools only: explore and plan without changing anything."
                .to_owned(),
        },
    ]
}

pub fn is_known(mode: &str) -> bool {
    mode == BUILD || mode == PLAN
}

/// Whether a mutating tool may run at all in `mode`.
pub fn allows_mutation(mode: &str) -> bool {
    mode != PLAN
}
