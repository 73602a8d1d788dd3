//! Agents that are not Shard's own (CONTRACT.md, "Agents that are not
//! Shard's own"): each is a named runtime in `config.toml`, a command that
//! speaks the Agent Client Protocol on its stdio.
//!
//! ```toml
//! [[runtimes]]
//! id = "claude"
//! protocol = "acp"
//! command = "claude-agent-acp"    # on PATH, or an absolute path
//! args = []
//! env = { IS_SANDBOX = "1" }      # added to the daemon's environment
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// The id of the built-in agent, which no configured runtime may take.
pub const BUILTIN: &str = "shard";
/// The longest runtime id.
const MAX_ID: usize = 64;

/// The protocol a runtime speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeProtocol {
    /// The Agent Client Protocol, version 1.
    Acp,
}

impl RuntimeProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeProtocol::Acp => "acp",
        }
    }
}

/// One `[[runtimes]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    pub id: String,
    pub protocol: RuntimeProtocol,
    /// A program on `PATH`, or an absolute path.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the daemon's environment for this runtime's processes.
    /// Values may be keys: never logged, never shown to a client.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// This runtime's part of the sandbox policy (crate::sandbox).
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::SandboxConfig>,
}

/// Why `runtimes` cannot be used, if they cannot.
pub fn check(runtimes: &[RuntimeConfig]) -> anyhow::Result<()> {
    for (at, runtime) in runtimes.iter().enumerate() {
        let id = &runtime.id;
        let well_formed = !id.is_empty()
            && id.len() <= MAX_ID
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !well_formed {
            anyhow::bail!("runtimes: id {id:?} must be 1 to {MAX_ID} letters, digits, `-` or `_`");
        }
        if id == BUILTIN {
            anyhow::bail!("runtimes: id `{BUILTIN}` is the built-in agent's");
        }
        if runtimes[..at].iter().any(|earlier| earlier.id == *id) {
            anyhow::bail!("runtimes: id `{id}` is defined twice");
        }
        if runtime.command.trim().is_empty() {
            anyhow::bail!("runtimes.{id}: `command` is empty");
        }
        if let Some(name) = runtime.env.keys().find(|name| !valid_env_name(name)) {
            anyhow::bail!("runtimes.{id}: env name {name:?} is not a variable name");
        }
    }
    Ok(())
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(id: &str) -> RuntimeConfig {
        RuntimeConfig {
            id: id.to_owned(),
            protocol: RuntimeProtocol::Acp,
            command: "agent-acp".to_owned(),
            args: Vec::new(),
            env: BTreeMap::new(),
            sandbox: None,
        }
    }

    #[test]
    fn ids_are_unique_well_formed_and_never_the_builtin() {
        assert!(check(&[runtime("claude"), runtime("codex-1")]).is_ok());
        for bad in [vec![runtime("shard")], vec![runtime("a b")], vec![runtime("")]] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
        let twice = check(&[runtime("x"), runtime("x")]).unwrap_err();
        assert!(twice.to_string().contains("defined twice"), "{twice}");
    }

    #[test]
    fn env_names_are_variable_names() {
        let mut bad = runtime("x");
        bad.env.insert("A=B".to_owned(), "v".to_owned());
        assert!(check(&[bad]).is_err());
        let mut good = runtime("x");
        good.env.insert("IS_SANDBOX".to_owned(), "1".to_owned());
        assert!(check(&[good]).is_ok());
    }
}
