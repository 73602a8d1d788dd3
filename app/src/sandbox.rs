//! An agent's sandbox as a person reads it (docs/SANDBOX.md): what the
//! containment line of the agent on screen says of `AgentInfo.sandbox`.
//! Plain data in, plain data out: the views show it, the tests read it.

use shard_protocol::sandbox::{NetworkPolicy, SandboxInfo, SandboxMode};

/// What the containment line says of what the agent may write.
pub fn mode_label(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Off => "No sandbox",
        SandboxMode::WorkspaceWrite => "Sandboxed: workspace-write",
        SandboxMode::ReadOnly => "Sandboxed: read-only",
    }
}

/// What it says of what the agent may reach.
pub fn network_label(network: NetworkPolicy) -> &'static str {
    match network {
        NetworkPolicy::Allow => "network: open",
        NetworkPolicy::Ask => "network: ask",
        NetworkPolicy::Deny => "network: deny",
    }
}

/// A host the agent reaches without asking (`host:port`), and whether a
/// person allowed it always (then `sandbox.revoke` takes it back) rather
/// than config.toml (then only the file's owner can).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    pub host: String,
    pub granted: bool,
}

/// Every host the agent reaches without asking, as the daemon lists them;
/// a grant the daemon did not also list as allowed is still shown, so that
/// it can be taken back.
pub fn allowed_hosts(info: &SandboxInfo) -> Vec<AllowedHost> {
    let granted = |host: &String| info.granted_hosts.contains(host);
    let mut hosts: Vec<AllowedHost> = info
        .allowed_hosts
        .iter()
        .map(|host| AllowedHost { host: host.clone(), granted: granted(host) })
        .collect();
    for host in &info.granted_hosts {
        if !info.allowed_hosts.contains(host) {
            hosts.push(AllowedHost { host: host.clone(), granted: true });
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(value: serde_json::Value) -> SandboxInfo {
        serde_json::from_value(value).expect("sandbox info")
    }

    #[test]
    fn the_containment_line_names_each_policy() {
        assert_eq!(mode_label(SandboxMode::WorkspaceWrite), "Sandboxed: workspace-write");
        assert_eq!(mode_label(SandboxMode::ReadOnly), "Sandboxed: read-only");
        assert_eq!(mode_label(SandboxMode::Off), "No sandbox");
        assert_eq!(network_label(NetworkPolicy::Allow), "network: open");
        assert_eq!(network_label(NetworkPolicy::Ask), "network: ask");
        assert_eq!(network_label(NetworkPolicy::Deny), "network: deny");
    }

    #[test]
    fn only_granted_hosts_are_revocable_and_none_is_lost() {
        let sandbox = info(json!({"mode": "workspace-write", "network": "ask",
            "allowed_hosts": ["pypi.org:443", "example.test:8080"],
            "granted_hosts": ["example.test:8080", "late.test:443"]}));
        let hosts = allowed_hosts(&sandbox);
        let shown: Vec<(&str, bool)> =
            hosts.iter().map(|host| (host.host.as_str(), host.granted)).collect();
        assert_eq!(
            shown,
            [("pypi.org:443", false), ("example.test:8080", true), ("late.test:443", true)]
        );
        assert!(allowed_hosts(&info(json!({"mode": "off", "network": "allow"}))).is_empty());
    }
}
