//! One agent's sandbox: the owner's `[sandbox]` with its runtime's table
//! on top (`shard_platform::sandbox`), Shard's own agent's provider hosts,
//! and what `agent.create` asked, which may only narrow it.

use std::path::{Path, PathBuf};

use shard_platform::config::Config;
use shard_platform::sandbox::{HostPort, SandboxPolicy};
use shard_protocol::sandbox::{NetworkPolicy, SandboxInfo, SandboxMode, SandboxRequest};

/// Read by no agent, whatever the policy adds: relative to the user's
/// home (docs/SANDBOX.md, "What an agent cannot read"). `$SHARD_HOME` and
/// with it every workspace's worktree are hidden too.
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    "snap/firefox",
    "snap/chromium",
];

/// The policy as it applies to one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub mode: SandboxMode,
    pub network: NetworkPolicy,
    /// What stays inside runs without asking.
    pub allow_inside: bool,
    /// Reached without asking.
    pub allow_hosts: Vec<HostPort>,
    /// Hidden, besides [`HIDDEN_IN_HOME`] and `$SHARD_HOME`.
    pub deny_read: Vec<PathBuf>,
    /// Writable, besides the agent's directory and `/tmp`.
    pub allow_write: Vec<PathBuf>,
}

impl Applied {
    pub fn contained(&self) -> bool {
        self.mode != SandboxMode::Off
    }

    /// `AgentInfo.sandbox`, with the hosts a person allowed always.
    pub fn info(&self, granted: &[HostPort]) -> SandboxInfo {
        let mut allowed: Vec<String> = self.allow_hosts.iter().map(ToString::to_string).collect();
        let granted: Vec<String> = granted.iter().map(ToString::to_string).collect();
        allowed.extend(
            granted.iter().filter(|host| !allowed.contains(host)).cloned().collect::<Vec<_>>(),
        );
        SandboxInfo {
            mode: self.mode,
            network: if self.contained() { self.network } else { NetworkPolicy::Allow },
            allow_inside: self.allow_inside && self.contained(),
            allowed_hosts: allowed,
            granted_hosts: granted,
        }
    }
}

/// Why an agent's sandbox cannot be what was asked.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{0:#}")]
    Config(anyhow::Error),
    #[error(
        "sandbox.{field} {asked:?} is wider than {configured:?}, which config.toml sets: a client \
         may only narrow the sandbox (only the machine's owner widens it, in config.toml)"
    )]
    Wider { field: &'static str, asked: &'static str, configured: &'static str },
}

/// The sandbox of an agent of `runtime` (`shard`: Shard's own), narrowed
/// by `asked`.
pub fn for_agent(
    config: &Config,
    runtime: &str,
    asked: Option<SandboxRequest>,
    user_home: Option<&Path>,
) -> Result<Applied, PolicyError> {
    let table = config.runtime(runtime).and_then(|runtime| runtime.sandbox.as_ref());
    let policy =
        SandboxPolicy::resolve(&config.sandbox, table, user_home).map_err(PolicyError::Config)?;
    let mut applied = Applied {
        mode: policy.mode,
        network: policy.network,
        allow_inside: policy.allow_inside,
        allow_hosts: policy.allow_hosts,
        deny_read: policy.deny_read,
        allow_write: policy.allow_write,
    };
    if runtime == shard_platform::runtimes::BUILTIN {
        for host in provider_hosts(config) {
            if !applied.allow_hosts.contains(&host) {
                applied.allow_hosts.push(host);
            }
        }
    }
    let asked = asked.unwrap_or_default();
    if let Some(mode) = asked.mode {
        if mode < applied.mode {
            return Err(PolicyError::Wider {
                field: "mode",
                asked: mode.as_str(),
                configured: applied.mode.as_str(),
            });
        }
        applied.mode = mode;
    }
    if let Some(network) = asked.network {
        if network < applied.network {
            return Err(PolicyError::Wider {
                field: "network",
                asked: network.as_str(),
                configured: applied.network.as_str(),
            });
        }
        applied.network = network;
    }
    Ok(applied)
}

/// The narrower of two asks, field by field: what a child of a narrowed
/// parent gets at least.
pub fn narrowest(
    parent: Option<SandboxRequest>,
    child: Option<SandboxRequest>,
) -> Option<SandboxRequest> {
    match (parent, child) {
        (None, child) => child,
        (parent, None) => parent,
        (Some(parent), Some(child)) => Some(SandboxRequest {
            mode: parent.mode.max(child.mode),
            network: parent.network.max(child.network),
        }),
    }
}

/// Where Shard's own agent's configured models are served: reached
/// without asking, since the agent cannot work without them.
fn provider_hosts(config: &Config) -> Vec<HostPort> {
    config
        .models
        .iter()
        .filter_map(|model| {
            let default = model.provider.default_base_url()?;
            HostPort::of_url(model.base_url.as_deref().unwrap_or(default))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        Config::load(dir.path()).unwrap()
    }

    #[test]
    fn a_client_narrows_and_never_widens() {
        let config = config("[sandbox]\nnetwork = \"ask\"\n");
        let ask = |mode, network| SandboxRequest { mode, network };
        let applied =
            for_agent(&config, "shard", Some(ask(Some(SandboxMode::ReadOnly), None)), None)
                .unwrap();
        assert_eq!((applied.mode, applied.network), (SandboxMode::ReadOnly, NetworkPolicy::Ask));
        let wider = for_agent(&config, "shard", Some(ask(Some(SandboxMode::Off), None)), None);
        assert!(matches!(wider, Err(PolicyError::Wider { field: "mode", .. })), "{wider:?}");
        let wider = for_agent(&config, "shard", Some(ask(None, Some(NetworkPolicy::Allow))), None);
        assert!(matches!(wider, Err(PolicyError::Wider { field: "network", .. })), "{wider:?}");
        let off = config_off();
        let applied = for_agent(&off, "shard", Some(ask(Some(SandboxMode::Off), None)), None);
        assert!(applied.is_ok_and(|applied| !applied.contained()));
    }

    fn config_off() -> Config {
        config("[sandbox]\nmode = \"off\"\n")
    }

    #[test]
    fn shard_s_own_agent_reaches_its_providers() {
        let config = config(
            "[[models]]\nid = \"local\"\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:8000/v1\"\n\
             [[models]]\nid = \"claude\"\nprovider = \"anthropic\"\nmodel = \"m\"\n",
        );
        let applied = for_agent(&config, "shard", None, None).unwrap();
        let hosts: Vec<String> = applied.allow_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["127.0.0.1:8000", "api.anthropic.com:443"]);
    }

    #[test]
    fn a_child_is_never_wider_than_its_parent() {
        let parent = SandboxRequest { mode: Some(SandboxMode::ReadOnly), network: None };
        let child = SandboxRequest { mode: None, network: Some(NetworkPolicy::Deny) };
        let both = narrowest(Some(parent), Some(child)).unwrap();
        assert_eq!(both.mode, Some(SandboxMode::ReadOnly));
        assert_eq!(both.network, Some(NetworkPolicy::Deny));
    }
}
