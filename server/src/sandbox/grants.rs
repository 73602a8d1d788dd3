//! The hosts a person allowed always for one agent (`allow_always` on a
//! `network` question), kept with the agent in
//! `agents/<id>/network.json` (0600) and taken back with `sandbox.revoke`.
//! The agent cannot write them: `$SHARD_HOME` is hidden from it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_platform::sandbox::HostPort;

const FILE: &str = "network.json";
/// The most hosts kept per agent; the oldest goes first past it.
pub const MAX_GRANTS: usize = 256;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    hosts: Vec<String>,
}

fn path(home: &Path, agent_id: &str) -> PathBuf {
    crate::home::agent_dir(home, agent_id).join(FILE)
}

/// The hosts allowed always, oldest first; none if the file is missing or
/// unreadable (a grant lost is a question asked again, never a host let
/// through).
pub fn load(home: &Path, agent_id: &str) -> Vec<HostPort> {
    let Ok(bytes) = std::fs::read(path(home, agent_id)) else { return Vec::new() };
    let Ok(stored) = serde_json::from_slice::<Stored>(&bytes) else {
        tracing::warn!(agent = agent_id, "unreadable network grants; asking again");
        return Vec::new();
    };
    stored.hosts.iter().filter_map(|host| HostPort::parse(host)).collect()
}

/// Adds `host`; the hosts now.
pub fn grant(home: &Path, agent_id: &str, host: HostPort) -> std::io::Result<Vec<HostPort>> {
    let mut hosts = load(home, agent_id);
    if !hosts.contains(&host) {
        hosts.push(host);
    }
    if hosts.len() > MAX_GRANTS {
        hosts.drain(..hosts.len() - MAX_GRANTS);
    }
    save(home, agent_id, &hosts)?;
    Ok(hosts)
}

/// Takes `host` back; `None` if it was not granted.
pub fn revoke(
    home: &Path,
    agent_id: &str,
    host: &HostPort,
) -> std::io::Result<Option<Vec<HostPort>>> {
    let mut hosts = load(home, agent_id);
    let before = hosts.len();
    hosts.retain(|granted| granted != host);
    if hosts.len() == before {
        return Ok(None);
    }
    save(home, agent_id, &hosts)?;
    Ok(Some(hosts))
}

fn save(home: &Path, agent_id: &str, hosts: &[HostPort]) -> std::io::Result<()> {
    let stored = Stored { hosts: hosts.iter().map(ToString::to_string).collect() };
    let bytes = serde_json::to_vec_pretty(&stored).map_err(std::io::Error::other)?;
    crate::home::write_private(&path(home, agent_id), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_kept_and_taken_back() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(crate::home::agent_dir(home.path(), "a")).unwrap();
        let host = HostPort::parse("example.com").unwrap();
        assert!(load(home.path(), "a").is_empty());
        grant(home.path(), "a", host.clone()).unwrap();
        grant(home.path(), "a", host.clone()).unwrap();
        assert_eq!(load(home.path(), "a"), std::slice::from_ref(&host));
        assert_eq!(revoke(home.path(), "a", &host).unwrap(), Some(vec![]));
        assert_eq!(revoke(home.path(), "a", &host).unwrap(), None);
        assert!(load(home.path(), "b").is_empty());
    }
}
