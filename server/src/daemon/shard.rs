//! What commands reach of the daemon ([`Daemon`]): the registry, jobs and
//! workspaces, and its own controls (enrollment, browser sessions,
//! statistics, shutdown).

use std::io::Write;
use std::sync::Arc;

use serde_json::json;
use shard_protocol::WireError;
use shard_protocol::orchestrator::{BrowserSession, RevokeSession, StatsResult};
use shard_protocol::types::RuntimeState;

use super::Stop;
use crate::agents::registry::Registry;
use crate::clients::hub::Hub;
use crate::commands::{CommandError, Daemon};
use crate::jobs::Jobs;
use crate::web::audit::Audit;
use crate::web::auth::Auth;
use crate::workspaces::Workspaces;

/// A line on the daemon's stdout (the address, an enrollment URL).
pub(super) fn announce(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

pub(super) struct Shard {
    pub registry: Arc<Registry>,
    pub jobs: Arc<Jobs>,
    pub workspaces: Arc<Workspaces>,
    pub auth: Arc<Auth>,
    pub hub: Arc<Hub>,
    pub audit: Arc<Audit>,
    /// The origin enrollment URLs are made for.
    pub origin: String,
    /// Cancelled once a shutdown was asked for, and how.
    pub stop: Stop,
}

impl Daemon for Shard {
    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn jobs(&self) -> &Arc<Jobs> {
        &self.jobs
    }

    fn workspaces(&self) -> &Arc<Workspaces> {
        &self.workspaces
    }

    fn enroll(&self) -> String {
        let url = format!("{}/#enroll={}", self.origin, self.auth.new_code());
        announce(&format!("enroll: {url}"));
        url
    }

    fn shutdown(&self, force: bool) {
        if force {
            self.stop.force.cancel();
        } else {
            self.stop.drain.cancel();
        }
    }

    fn sessions(&self) -> Vec<BrowserSession> {
        self.auth
            .list()
            .into_iter()
            .map(|view| BrowserSession {
                connections: self.hub.session_connections(&view.session_id),
                session_id: view.session_id,
                principal_id: view.principal_id,
                created_at: view.created_at,
                last_seen_at: view.last_seen_at,
                expires_at: view.expires_at,
                push: view.push,
            })
            .collect()
    }

    fn stats(&self) -> StatsResult {
        let agents = self.registry.list();
        let running =
            agents.iter().filter(|agent| agent.runtime_state == RuntimeState::Running).count();
        StatsResult {
            tasks: tokio::runtime::Handle::current().metrics().num_alive_tasks() as u64,
            connections: u32::try_from(self.hub.count()).unwrap_or(u32::MAX),
            agents: u32::try_from(agents.len()).unwrap_or(u32::MAX),
            running_agents: u32::try_from(running).unwrap_or(u32::MAX),
            awake_agents: u32::try_from(self.registry.awake()).unwrap_or(u32::MAX),
        }
    }

    fn disconnect(&self, target: RevokeSession) -> u32 {
        let session = match &target {
            RevokeSession::One(id) => Some(id.as_str()),
            RevokeSession::All => None,
        };
        self.hub.close_browsers(session, "disconnected by the daemon; reconnect")
    }

    fn revoke(&self, target: RevokeSession) -> Result<Vec<String>, WireError> {
        let revoked = match target {
            RevokeSession::All => self.auth.revoke_all().map_err(CommandError::from)?,
            RevokeSession::One(id) => {
                if !self.auth.revoke(&id).map_err(CommandError::from)? {
                    return Err(CommandError::NoBrowserSession(id).into());
                }
                vec![id]
            }
        };
        for id in &revoked {
            self.hub.close_session(id, "session revoked");
            self.audit.record(
                "session_revoked",
                json!({"session_id": id, "by": "shard sessions revoke"}),
            );
        }
        Ok(revoked)
    }

    fn presence(&self, connection: crate::agents::SubscriberId, visible: bool) {
        self.hub.set_visible(connection, visible);
    }

    fn watch_fleet(&self, connection: crate::agents::SubscriberId, watch: bool) {
        self.hub.watch_fleet(connection, watch);
    }
}
