//! Durable agent identity: one manifest per agent under
//! `$SHARD_HOME/agents/<agent_id>/manifest.json`, written before the agent's
//! first process starts and kept when processes stop, crash or are killed.

use std::path::Path;

use serde::{Deserialize, Serialize};
use shard_protocol::identity::AgentIdentity;
use shard_protocol::orchestrator::{HeadlessPolicy, LaunchPolicy};

use crate::agents::error::AgentError;

pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub agent_id: String,
    /// Its name and relatives, as `agent.create` and `AgentInfo` carry them.
    #[serde(flatten)]
    pub identity: AgentIdentity,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub session_id: String,
    pub created_at: u64,
    /// Nesting depth: 0 for an agent with no parent.
    #[serde(default)]
    pub depth: u32,
    /// What this agent may launch: tasks per job, and how deep its
    /// descendants may nest (inherited, never widened, by its children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_policy: Option<LaunchPolicy>,
    /// The tools its model is offered; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// A manager's instructions (a managed child's brief).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headless_policy: Option<HeadlessPolicy>,
    /// Friendly aliases its children's launches take, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// A configured runtime's id; absent: the built-in agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// How `agent.create` (or its parent) narrowed its sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<shard_protocol::sandbox::SandboxRequest>,
    /// For a node's agent: which node, and its id there (docs/NODES.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<Remote>,
}

/// Where a node's agent lives: the node, and the agent's id there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    pub node: String,
    pub agent_id: String,
    /// Its sandbox as the node applies it, when the hub listed it: the
    /// node's policy, never the hub's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<shard_protocol::sandbox::SandboxInfo>,
}

impl Manifest {
    /// The runtime this agent runs, as `AgentInfo.runtime` says it.
    pub fn runtime_id(&self) -> &str {
        self.runtime.as_deref().unwrap_or(shard_platform::runtimes::BUILTIN)
    }
}

/// Launch limits for agents that set none: a job of at most 8 tasks, and
/// descendants at most 3 levels below a root.
pub const DEFAULT_LAUNCH_POLICY: LaunchPolicy = LaunchPolicy { max_tasks: 8, max_depth: 3 };

impl Manifest {
    pub fn policy(&self) -> LaunchPolicy {
        self.launch_policy.unwrap_or(DEFAULT_LAUNCH_POLICY)
    }

    /// Whether this agent may launch subagents: its children would still be
    /// within its launch policy's depth.
    /// `Ok` for an agent of this daemon's own; a node's agent's children
    /// are its node's to make.
    pub fn here(&self) -> Result<(), AgentError> {
        match &self.remote {
            None => Ok(()),
            Some(remote) => Err(AgentError::ParentOnNode {
                parent: self.agent_id.clone(),
                node: remote.node.clone(),
            }),
        }
    }

    pub fn may_delegate(&self) -> bool {
        self.depth < self.policy().max_depth
    }
}

/// A managed child's instructions, beside its manifest, for the runtime's
/// `--system-prompt-file`.
pub const INSTRUCTIONS_FILE: &str = "system_prompt.txt";

pub use crate::home::{agent_dir, agents_dir};

impl Manifest {
    pub fn save(&self, home: &Path) -> anyhow::Result<()> {
        let dir = agent_dir(home, &self.agent_id);
        crate::home::prepare_dir(&dir)?;
        if let Some(instructions) = &self.system_prompt {
            crate::home::write_private(&dir.join(INSTRUCTIONS_FILE), instructions.as_bytes())?;
        }
        let bytes = serde_json::to_vec_pretty(self)?;
        crate::home::write_private(&dir.join("manifest.json"), &bytes)?;
        Ok(())
    }

    /// This agent running `session_id` from now on, recorded; the session
    /// it ran before.
    pub fn switch_session(
        &mut self,
        home: &Path,
        session_id: String,
    ) -> Result<String, AgentError> {
        let mut switched = self.clone();
        let previous = std::mem::replace(&mut switched.session_id, session_id);
        if let Err(error) = switched.save(home) {
            let error = format!("{error:#}");
            tracing::error!(agent = %self.agent_id, %error, "cannot write the manifest");
            return Err(AgentError::SwitchUnrecorded);
        }
        *self = switched;
        Ok(previous)
    }

    /// Every readable manifest; unreadable ones are logged and skipped, never
    /// deleted.
    pub fn load_all(home: &Path) -> Vec<Manifest> {
        let Ok(entries) = std::fs::read_dir(agents_dir(home)) else { return Vec::new() };
        let mut manifests: Vec<Manifest> = entries
            .flatten()
            .filter_map(|entry| {
                let path = entry.path().join("manifest.json");
                let text = std::fs::read_to_string(&path).ok()?;
                match serde_json::from_str::<Manifest>(&text) {
                    Ok(manifest) => Some(manifest),
                    Err(error) => {
                        tracing::error!(path = %path.display(), %error, "unreadable agent manifest skipped");
                        None
                    }
                }
            })
            .collect();
        manifests.sort_by(|a, b| (a.created_at, &a.agent_id).cmp(&(b.created_at, &b.agent_id)));
        manifests
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Manifest;

    #[test]
    fn a_manifest_reads_and_writes_its_identity_beside_its_other_fields() {
        let written = json!({
            "version": 1, "agent_id": "agent-2", "name": "review", "cwd": "/w",
            "session_id": "sess-2", "created_at": 5, "parent_agent_id": "agent-1",
            "alias": "Ada", "definition_name": "review", "display_name": "review · Ada",
            "depth": 1,
        });
        let manifest: Manifest = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(manifest.identity.name.as_deref(), Some("review"));
        assert_eq!(manifest.identity.parent_agent_id.as_deref(), Some("agent-1"));
        assert_eq!(manifest.identity.display_name.as_deref(), Some("review · Ada"));
        assert_eq!(manifest.depth, 1);
        assert_eq!(serde_json::to_value(&manifest).unwrap(), written);
    }
}
