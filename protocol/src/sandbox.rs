//! The sandbox every agent runs in, as the wire names it (CONTRACT.md,
//! "Sandbox"): what `agent.create` may ask for (only ever narrower than
//! the machine's owner configured) and what `AgentInfo.sandbox` shows.

use serde::{Deserialize, Serialize};

/// What the agent may write. Ordered from the widest to the narrowest, so
/// that `a <= b` reads "b is at least as narrow as a".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Not contained at all: only the owner's `config.toml` can say so.
    Off,
    /// Writes to the agent's own directory and a private temporary one.
    WorkspaceWrite,
    /// Writes nowhere but a private temporary directory.
    ReadOnly,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::WorkspaceWrite => "workspace-write",
            Self::ReadOnly => "read-only",
        }
    }
}

/// What the agent may reach. Ordered from the widest to the narrowest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkPolicy {
    /// Any host, directly (no proxy).
    Allow,
    /// The allowed hosts; any other host is a question (`tool_name: "network"`).
    Ask,
    /// The allowed hosts only; any other connection fails without asking.
    Deny,
}

impl NetworkPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// `agent.create`'s `sandbox`: each field narrows the configured policy,
/// or is refused (`PERMISSION_DENIED`) if it would widen it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkPolicy>,
}

/// `AgentInfo.sandbox`: the policy as applied to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    pub mode: SandboxMode,
    pub network: NetworkPolicy,
    /// Commands, and writes in the agent's own directory, run without
    /// asking: the sandbox holds them (Shard extension; config.toml's
    /// `allow_inside`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_inside: bool,
    /// Hosts (`host:port`) the agent reaches without asking: the configured
    /// ones and those a person allowed always for it (Shard extension).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Of those, the ones a person allowed, which `sandbox.revoke` takes
    /// back (Shard extension).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted_hosts: Vec<String>,
}

/// `sandbox.revoke` (Shard extension): takes back a host a person allowed
/// always for an agent (`host:port`, as `granted_hosts` lists it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRevoke {
    pub agent_id: String,
    pub host: String,
}

/// The answer to `sandbox.revoke`, and the `agent_sandbox` event every
/// client gets when an agent's sandbox changes (a host granted or taken
/// back): the agent's sandbox as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSandbox {
    pub agent_id: String,
    pub sandbox: SandboxInfo,
}

/// The tool name of a sandbox's network question.
pub const NETWORK_TOOL: &str = "network";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrower_compares_greater() {
        assert!(SandboxMode::Off < SandboxMode::WorkspaceWrite);
        assert!(SandboxMode::WorkspaceWrite < SandboxMode::ReadOnly);
        assert!(NetworkPolicy::Allow < NetworkPolicy::Ask);
        assert!(NetworkPolicy::Ask < NetworkPolicy::Deny);
    }

    #[test]
    fn names_are_the_contracts() {
        let request: SandboxRequest =
            serde_json::from_str(r#"{"mode":"workspace-write","network":"deny"}"#).unwrap();
        assert_eq!(request.mode, Some(SandboxMode::WorkspaceWrite));
        assert_eq!(request.network, Some(NetworkPolicy::Deny));
        assert!(serde_json::from_str::<SandboxRequest>(r#"{"mode":"wide-open"}"#).is_err());
        let info = SandboxInfo {
            mode: SandboxMode::ReadOnly,
            network: NetworkPolicy::Ask,
            allow_inside: false,
            allowed_hosts: vec![],
            granted_hosts: vec![],
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"mode": "read-only", "network": "ask"})
        );
    }
}
