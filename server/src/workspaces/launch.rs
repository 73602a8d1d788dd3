//! An agent in a workspace: the fresh agent and session that a create or
//! an attach starts in a worktree, and `workspace.attach` itself (a new
//! agent in a workspace that exists and whose worktree is still there).

use shard_protocol::ServerMessage;
use shard_protocol::identity::AgentIdentity;
use shard_protocol::orchestrator::AgentCreate;
use shard_protocol::workspace::{
    WorkspaceAttach, WorkspaceAttached, WorkspaceLaunch, WorkspaceLaunchResult, WorkspaceLifecycle,
};

use super::records::WorkspaceRecord;
use super::status::MISSING;
use super::{WorkspaceError, Workspaces, checkout, home, no_workspace};

/// The agent a launch made, and its session.
pub(super) struct Launched {
    pub(super) agent_id: String,
    pub(super) session_id: String,
}

impl Workspaces {
    /// `workspace.attach`: a fresh agent in an existing, present worktree.
    /// `afar`: asked by a browser of a daemon in a remote mode.
    pub async fn attach(
        &self,
        request: WorkspaceAttach,
        afar: bool,
    ) -> Result<WorkspaceLaunchResult, WorkspaceError> {
        let mut records = self.records.lock().await;
        let Some(record) = records.get(&request.workspace_id).cloned() else {
            return Err(no_workspace(&request.workspace_id));
        };
        if record.lifecycle == WorkspaceLifecycle::Retired {
            return Err(WorkspaceError::Retired);
        }
        if let Err(error) = checkout(&record).await {
            if let (WorkspaceError::Missing, Some(record)) =
                (&error, records.get_mut(&request.workspace_id))
            {
                self.settle(record, Some(MISSING));
            }
            return Err(error);
        }
        let Launched { agent_id, session_id } = self.launch(&record, &request.launch, afar).await?;
        let mut record = record;
        record.agent_ids.push(agent_id.clone());
        record.updated_at = Some(crate::clock::now_ms());
        record.save(&self.home).map_err(home)?;
        self.broadcast(ServerMessage::WorkspaceAttached(WorkspaceAttached {
            workspace: record.summary(),
            agent_id: agent_id.clone(),
            session_id: session_id.clone(),
        }));
        let workspace = self.detail(&record).await;
        records.insert(record.workspace_id.clone(), record);
        Ok(WorkspaceLaunchResult { agent_id, session_id, workspace })
    }

    /// A fresh agent and session in `record`'s worktree, named by the
    /// launch fields (else the workspace's label).
    pub(super) async fn launch(
        &self,
        record: &WorkspaceRecord,
        launch: &WorkspaceLaunch,
        afar: bool,
    ) -> Result<Launched, WorkspaceError> {
        let create = AgentCreate {
            cwd: record.worktree.clone(),
            identity: AgentIdentity {
                name: launch.name.clone().or(launch.title.clone()).or(record.label.clone()),
                ..AgentIdentity::default()
            },
            model: launch.model.clone(),
            provider: launch.provider.clone(),
            mode: launch.mode.clone(),
            runtime: launch.runtime.clone(),
            sandbox: launch.sandbox,
            ..AgentCreate::default()
        };
        let agent_id = self
            .registry
            .create(create, afar)
            .await
            .map_err(|error| WorkspaceError::Launch(error.into()))?;
        // What it spends counts against the workspace's budget.
        self.registry.context.budgets.set_workspace(&agent_id, &record.workspace_id);
        let session_id = self
            .registry
            .manifest(&agent_id)
            .map(|manifest| manifest.session_id)
            .unwrap_or_default();
        Ok(Launched { agent_id, session_id })
    }
}
