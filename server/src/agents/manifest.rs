//! Durable agent identity: one manifest per agent under
//! `$SHARD_HOME/agents/<agent_id>/manifest.json`, written before the agent's
//! first process starts and kept when processes stop, crash or are killed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub session_id: String,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

pub fn agents_dir(home: &Path) -> PathBuf {
    home.join("agents")
}

pub fn agent_dir(home: &Path, agent_id: &str) -> PathBuf {
    agents_dir(home).join(agent_id)
}

impl Manifest {
    pub fn save(&self, home: &Path) -> anyhow::Result<()> {
        let dir = agent_dir(home, &self.agent_id);
        crate::home::prepare_dir(&dir)?;
        let bytes = serde_json::to_vec_pretty(self)?;
        crate::home::write_private(&dir.join("manifest.json"), &bytes)?;
        Ok(())
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
