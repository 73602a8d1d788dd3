//! `[limits]` of `config.toml` (CONTRACT.md, "Fleet limits and budgets"):
//! how many agents may run at once and how much memory they may hold. A
//! zero is no limit. Memory is counted as the agents' proportional set
//! size (each shared page once), what stopping them would give back.

use serde::Deserialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Agents whose process runs at once.
    pub max_awake_agents: u32,
    /// Over it, idle agents hibernate, least recently used first.
    pub memory_soft_mb: u64,
    /// A start that would pass it is refused, saying what holds the memory.
    pub memory_hard_mb: u64,
    /// An agent whose process tree passes it is stopped.
    pub agent_memory_mb: u64,
}

const MB: u64 = 1024 * 1024;

impl Limits {
    pub fn soft_bytes(&self) -> Option<u64> {
        (self.memory_soft_mb > 0).then(|| self.memory_soft_mb * MB)
    }

    pub fn hard_bytes(&self) -> Option<u64> {
        (self.memory_hard_mb > 0).then(|| self.memory_hard_mb * MB)
    }

    pub fn agent_bytes(&self) -> Option<u64> {
        (self.agent_memory_mb > 0).then(|| self.agent_memory_mb * MB)
    }

    pub fn max_awake(&self) -> Option<usize> {
        (self.max_awake_agents > 0).then_some(self.max_awake_agents as usize)
    }

    /// A soft ceiling above the hard one could never act.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if let (Some(soft), Some(hard)) = (self.soft_bytes(), self.hard_bytes())
            && soft > hard
        {
            anyhow::bail!(
                "limits.memory_soft_mb ({}) is above limits.memory_hard_mb ({})",
                self.memory_soft_mb,
                self.memory_hard_mb
            );
        }
        Ok(())
    }
}
