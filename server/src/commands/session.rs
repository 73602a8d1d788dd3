//! `session.activate`: switch an agent to another of its sessions (a fork,
//! or one resumed), through the registry.

use std::sync::Arc;

use shard_protocol::orchestrator::SessionActivate;

use super::{Daemon, Outcome, ok};

pub fn activate(daemon: &Arc<dyn Daemon>, request: SessionActivate) -> Outcome {
    let daemon = daemon.clone();
    Outcome::Later(Box::pin(async move { ok(daemon.registry().activate(request).await?) }))
}
