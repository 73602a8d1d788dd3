//! `daemon.*`: the daemon's own controls, for local clients only
//! (CONTRACT.md; [`super::Reach::Local`]).

use std::sync::Arc;

use shard_protocol::ClientMessage;
use shard_protocol::orchestrator::{DisconnectResult, EnrollResult, RevokeResult, SessionsResult};

use super::{Daemon, Outcome, ok};

pub fn run(daemon: &Arc<dyn Daemon>, message: ClientMessage) -> Outcome {
    Outcome::Now(match message {
        ClientMessage::DaemonShutdown(shutdown) => {
            return Outcome::ThenShutDown { force: shutdown.force.unwrap_or(false) };
        }
        ClientMessage::DaemonEnroll(_) => ok(EnrollResult { url: daemon.enroll() }),
        ClientMessage::DaemonSessions(_) => ok(SessionsResult { sessions: daemon.sessions() }),
        ClientMessage::DaemonStats(_) => ok(daemon.stats()),
        ClientMessage::DaemonRevokeSession(target) => {
            daemon.revoke(target).and_then(|revoked| ok(RevokeResult { revoked }))
        }
        ClientMessage::DaemonDisconnect(target) => {
            ok(DisconnectResult { disconnected: daemon.disconnect(target) })
        }
        other => return super::run_elsewhere(other),
    })
}
