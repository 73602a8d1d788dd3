//! `[sandbox]` in `config.toml` (CONTRACT.md, "Sandbox"; docs/SANDBOX.md):
//! the containment every agent runs in, as the machine's owner sets it.
//! Only this file can turn the sandbox off or widen it; a client's
//! `agent.create` may only narrow what it says.
//!
//! ```toml
//! [sandbox]
//! mode = "workspace-write"   # or "read-only", or "off"
//! network = "ask"            # or "deny", or "allow" (no proxy at all)
//! allow_hosts = ["pypi.org", "files.pythonhosted.org", "localhost:8080"]
//! deny_read = ["~/work/secrets"]     # besides the documented defaults
//! allow_write = ["~/.cache/pip"]     # besides the agent's own directory
//! allow_inside = false               # true: what stays inside runs unasked
//!
//! [[runtimes]]
//! id = "claude"
//! protocol = "acp"
//! command = "claude-agent-acp"
//! sandbox = { allow_hosts = ["api.anthropic.com"], allow_write = ["~/.claude"] }
//! ```
//!
//! A runtime's `mode`, `network` and `allow_inside` replace the daemon's;
//! its lists are added to the daemon's.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use shard_protocol::sandbox::{NetworkPolicy, SandboxMode};

/// The port a host named without one is reached on.
pub const DEFAULT_PORT: u16 = 443;

/// One `[sandbox]` table, the daemon's or a runtime's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub mode: Option<SandboxMode>,
    pub network: Option<NetworkPolicy>,
    /// What stays inside the sandbox runs without asking: commands, and
    /// writes in the agent's own directory (docs/SANDBOX.md, "Fewer
    /// questions"). Off unless set.
    pub allow_inside: Option<bool>,
    pub allow_hosts: Vec<String>,
    pub deny_read: Vec<String>,
    pub allow_write: Vec<String>,
}

/// A host and port an agent may reach, lower-cased (IPv6 without brackets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// `host`, `host:port`, `[v6]` or `[v6]:port`; a bare host means port 443.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest.split_once(']')?;
            let port = match after {
                "" => DEFAULT_PORT,
                after => after.strip_prefix(':')?.parse().ok()?,
            };
            (host, port)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().ok()?),
                None => (text, DEFAULT_PORT),
            }
        };
        let plain = !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
        (plain && port != 0).then(|| Self { host: host.to_ascii_lowercase(), port })
    }

    /// The host and port of a provider's base URL.
    pub fn of_url(url: &str) -> Option<Self> {
        let url = url::Url::parse(url).ok()?;
        let host = match url.host()? {
            url::Host::Domain(name) => name.to_ascii_lowercase(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        };
        Some(Self { host, port: url.port_or_known_default()? })
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// The owner's policy for one runtime: the daemon's table with the
/// runtime's on top, every name checked and every path made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    pub network: NetworkPolicy,
    pub allow_inside: bool,
    pub allow_hosts: Vec<HostPort>,
    pub deny_read: Vec<PathBuf>,
    pub allow_write: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// `base` with `runtime`'s table on top (`None`: Shard's own agent).
    /// `user_home` expands a leading `~/`.
    pub fn resolve(
        base: &SandboxConfig,
        runtime: Option<&SandboxConfig>,
        user_home: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let tables = std::iter::once(base).chain(runtime);
        let mut policy = Self {
            mode: SandboxMode::WorkspaceWrite,
            network: NetworkPolicy::Ask,
            allow_inside: false,
            allow_hosts: Vec::new(),
            deny_read: Vec::new(),
            allow_write: Vec::new(),
        };
        for table in tables {
            policy.mode = table.mode.unwrap_or(policy.mode);
            policy.network = table.network.unwrap_or(policy.network);
            policy.allow_inside = table.allow_inside.unwrap_or(policy.allow_inside);
            for host in &table.allow_hosts {
                let parsed = HostPort::parse(host).ok_or_else(|| {
                    anyhow::anyhow!("sandbox.allow_hosts: {host:?} is not `host` or `host:port`")
                })?;
                if !policy.allow_hosts.contains(&parsed) {
                    policy.allow_hosts.push(parsed);
                }
            }
            for (key, paths, into) in [
                ("deny_read", &table.deny_read, &mut policy.deny_read),
                ("allow_write", &table.allow_write, &mut policy.allow_write),
            ] {
                for path in paths {
                    let absolute = expand(path, user_home).ok_or_else(|| {
                        anyhow::anyhow!("sandbox.{key}: {path:?} is not an absolute or `~/` path")
                    })?;
                    if !into.contains(&absolute) {
                        into.push(absolute);
                    }
                }
            }
        }
        Ok(policy)
    }
}

/// Checks every table once, when the file is read, so that a mistake is
/// found at start-up rather than at an agent's start.
/// `runtimes`: each runtime's id and its own table.
pub fn check<'a>(
    base: &SandboxConfig,
    runtimes: impl IntoIterator<Item = (&'a str, Option<&'a SandboxConfig>)>,
) -> anyhow::Result<()> {
    let home = Some(Path::new("/home/check"));
    SandboxPolicy::resolve(base, None, home)?;
    for (id, table) in runtimes {
        SandboxPolicy::resolve(base, table, home)
            .map_err(|error| anyhow::anyhow!("runtime `{id}`: {error}"))?;
    }
    Ok(())
}

/// `~/x` under `user_home`, or an absolute path as it is; `..` is refused.
fn expand(path: &str, user_home: Option<&Path>) -> Option<PathBuf> {
    let expanded = match path.strip_prefix("~/") {
        Some(rest) => user_home?.join(rest),
        None if path == "~" => user_home?.to_path_buf(),
        None => PathBuf::from(path),
    };
    let plain = expanded.is_absolute()
        && expanded.components().all(|part| !matches!(part, std::path::Component::ParentDir));
    plain.then_some(expanded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_with_and_without_ports() {
        let parsed = |text: &str| HostPort::parse(text).map(|host| host.to_string());
        assert_eq!(parsed("API.Anthropic.com").as_deref(), Some("api.anthropic.com:443"));
        assert_eq!(parsed("localhost:8080").as_deref(), Some("localhost:8080"));
        assert_eq!(parsed("[::1]:9").as_deref(), Some("[::1]:9"));
        assert_eq!(parsed("[::1]").as_deref(), Some("[::1]:443"));
        for bad in ["", "host:", "host:0", "host:99999", "ho st", "http://x", "a/b"] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
        let of_url = |url: &str| HostPort::of_url(url).map(|host| host.to_string());
        assert_eq!(of_url("https://api.openai.com/v1").as_deref(), Some("api.openai.com:443"));
        assert_eq!(of_url("http://127.0.0.1:8000/v1").as_deref(), Some("127.0.0.1:8000"));
    }

    #[test]
    fn a_runtime_replaces_modes_and_adds_to_lists() {
        let base = SandboxConfig {
            network: Some(NetworkPolicy::Deny),
            allow_hosts: vec!["pypi.org".into()],
            deny_read: vec!["~/secret".into()],
            ..SandboxConfig::default()
        };
        let runtime = SandboxConfig {
            mode: Some(SandboxMode::ReadOnly),
            allow_hosts: vec!["api.anthropic.com".into(), "pypi.org".into()],
            allow_write: vec!["/var/cache/x".into()],
            ..SandboxConfig::default()
        };
        let home = Path::new("/home/u");
        let policy = SandboxPolicy::resolve(&base, Some(&runtime), Some(home)).unwrap();
        assert_eq!(policy.mode, SandboxMode::ReadOnly);
        assert_eq!(policy.network, NetworkPolicy::Deny);
        let hosts: Vec<String> = policy.allow_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(hosts, ["pypi.org:443", "api.anthropic.com:443"]);
        assert_eq!(policy.deny_read, [PathBuf::from("/home/u/secret")]);
        assert_eq!(policy.allow_write, [PathBuf::from("/var/cache/x")]);
        let default = SandboxPolicy::resolve(&SandboxConfig::default(), None, None).unwrap();
        assert_eq!(
            (default.mode, default.network),
            (SandboxMode::WorkspaceWrite, NetworkPolicy::Ask)
        );
    }

    #[test]
    fn relative_and_climbing_paths_are_refused() {
        for bad in ["secret", "/a/../b", "~/../etc"] {
            let table = SandboxConfig { deny_read: vec![bad.into()], ..SandboxConfig::default() };
            let home = Some(Path::new("/home/u"));
            assert!(SandboxPolicy::resolve(&table, None, home).is_err(), "{bad:?}");
        }
    }
}
