//! An agent's sandbox as a person reads it (docs/SANDBOX.md): what the
//! containment line of the agent on screen says of `AgentInfo.sandbox`,
//! what a network question (`tool_name: "network"`) asks about, and what
//! the new-agent form sends when it narrows the configured policy
//! (`agent.create`'s `sandbox`, which may only narrow config.toml's).
//! Plain data in, plain data out: the views show it, the tests read it.

use shard_protocol::agent::PermissionRequest;
use shard_protocol::sandbox::{
    NETWORK_TOOL, NetworkPolicy, SandboxInfo, SandboxMode, SandboxRequest,
};

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

/// What a network question asks about: the host and port, and how the
/// agent tried to reach it (`HTTPS (CONNECT)`, `HTTP`, `SOCKS5`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkTarget {
    pub host: String,
    pub port: String,
    pub through: Option<String>,
}

/// The labels of the details a network question's card shows itself.
pub const TARGET_DETAILS: [&str; 3] = ["host", "port", "through"];

/// The target of `request` if it is a sandbox's network question: from its
/// details, as the daemon worded them, else from its `input`.
pub fn network_target(request: &PermissionRequest) -> Option<NetworkTarget> {
    if request.tool_name != NETWORK_TOOL {
        return None;
    }
    let detail = |label: &str| {
        request
            .details
            .iter()
            .flatten()
            .find(|detail| detail.label.as_deref() == Some(label))
            .map(|detail| detail.value.clone())
    };
    let input = &request.input;
    let host = detail("host").or_else(|| input["host"].as_str().map(str::to_owned))?;
    let port = detail("port").or_else(|| match &input["port"] {
        serde_json::Value::Number(port) => Some(port.to_string()),
        serde_json::Value::String(port) => Some(port.clone()),
        _ => None,
    });
    Some(NetworkTarget { host, port: port.unwrap_or_default(), through: detail("through") })
}

/// The new-agent form's sandbox fields (`""`: as configured) as the
/// request's `sandbox`, or nothing when neither narrows anything.
pub fn narrowing(mode: &str, network: &str) -> Option<SandboxRequest> {
    let mode = match mode {
        "workspace-write" => Some(SandboxMode::WorkspaceWrite),
        "read-only" => Some(SandboxMode::ReadOnly),
        _ => None,
    };
    let network = match network {
        "ask" => Some(NetworkPolicy::Ask),
        "deny" => Some(NetworkPolicy::Deny),
        _ => None,
    };
    (mode.is_some() || network.is_some()).then_some(SandboxRequest { mode, network })
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

    fn request(value: serde_json::Value) -> PermissionRequest {
        serde_json::from_value(value).expect("permission request")
    }

    #[test]
    fn a_network_question_names_its_host_port_and_way() {
        let asked = request(json!({"request_id": "net-1", "tool_name": "network",
            "input": {"host": "example.test", "port": 8080}, "prompt": "Let it connect?",
            "options": ["allow", "allow_always", "deny"],
            "details": [{"label": "host", "value": "example.test", "format": "text"},
                        {"label": "port", "value": "8080", "format": "text"},
                        {"label": "through", "value": "HTTPS (CONNECT)", "format": "text"}]}));
        assert_eq!(
            network_target(&asked),
            Some(NetworkTarget {
                host: "example.test".to_owned(),
                port: "8080".to_owned(),
                through: Some("HTTPS (CONNECT)".to_owned()),
            })
        );
        // Without details, its input says as much as it can.
        let bare = request(json!({"request_id": "net-2", "tool_name": "network",
            "input": {"host": "10.0.0.1", "port": 22}, "prompt": "?", "options": ["deny"]}));
        let target = network_target(&bare).expect("a network question");
        assert_eq!(
            (target.host.as_str(), target.port.as_str(), target.through),
            ("10.0.0.1", "22", None)
        );
        // Any other tool's question is not one.
        let bash = request(json!({"request_id": "p", "tool_name": "bash",
            "input": {"host": "x"}, "prompt": "?", "options": ["allow"]}));
        assert_eq!(network_target(&bash), None);
    }

    #[test]
    fn the_form_sends_a_sandbox_only_when_it_narrows() {
        assert_eq!(narrowing("", ""), None);
        assert_eq!(
            narrowing("read-only", ""),
            Some(SandboxRequest { mode: Some(SandboxMode::ReadOnly), network: None })
        );
        assert_eq!(
            narrowing("", "deny"),
            Some(SandboxRequest { mode: None, network: Some(NetworkPolicy::Deny) })
        );
        let both = narrowing("read-only", "ask").expect("narrowed");
        assert_eq!(
            serde_json::to_value(both).expect("json"),
            json!({"mode": "read-only", "network": "ask"})
        );
    }
}
