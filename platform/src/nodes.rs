//! Other machines' daemons this one reaches (CONTRACT.md, "`shard acp` and
//! nodes"; docs/NODES.md): each is a node in `config.toml`, named by an id
//! and reached through a command whose stdin and stdout are a byte stream
//! to that machine's `shard bridge`.
//!
//! ```toml
//! [[nodes]]
//! id = "box"
//! command = ["ssh", "-T", "-o", "ServerAliveInterval=15", "box", "shard", "bridge"]
//!
//! [[nodes]]
//! id = "pod-0"
//! command = ["kubectl", "exec", "-i", "shard-0", "--", "shard", "bridge"]
//! ```

use serde::Deserialize;

/// The longest node id: it is part of every id of the node's agents.
const MAX_ID: usize = 32;

/// One `[[nodes]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub id: String,
    /// The program (on `PATH`, or an absolute path) and its arguments.
    pub command: Vec<String>,
}

/// Why `nodes` cannot be used, if they cannot.
pub fn check(nodes: &[NodeConfig]) -> anyhow::Result<()> {
    for (at, node) in nodes.iter().enumerate() {
        let id = &node.id;
        let well_formed = !id.is_empty()
            && id.len() <= MAX_ID
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !well_formed {
            anyhow::bail!("nodes: id {id:?} must be 1 to {MAX_ID} letters, digits, `-` or `_`");
        }
        if nodes[..at].iter().any(|earlier| earlier.id == *id) {
            anyhow::bail!("nodes: id `{id}` is defined twice");
        }
        if node.command.first().is_none_or(|program| program.trim().is_empty()) {
            anyhow::bail!("nodes.{id}: `command` names no program");
        }
    }
    Ok(())
}

/// The id a node's agent has in the hub: its id on the node, `@`, the
/// node's id. `@` is in no id a daemon gives its own agents, so the two
/// can never collide, and one node's agents never take another's ids.
pub fn qualified(node: &str, agent_id: &str) -> String {
    format!("{agent_id}@{node}")
}

/// A hub's id of a node's agent, split: (node, the agent's id there).
pub fn split(qualified: &str) -> Option<(&str, &str)> {
    let (agent_id, node) = qualified.rsplit_once('@')?;
    (!agent_id.is_empty() && !node.is_empty()).then_some((node, agent_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, command: &[&str]) -> NodeConfig {
        NodeConfig { id: id.to_owned(), command: command.iter().map(|&s| s.to_owned()).collect() }
    }

    #[test]
    fn ids_are_unique_and_well_formed_and_a_command_names_a_program() {
        let ssh = ["ssh", "-T", "box", "shard", "bridge"];
        assert!(check(&[node("box", &ssh), node("pod-0", &["kubectl"])]).is_ok());
        for bad in [node("a b", &ssh), node("", &ssh), node("x@y", &ssh), node("x", &[])] {
            assert!(check(std::slice::from_ref(&bad)).is_err(), "{bad:?}");
        }
        assert!(check(&[node("x", &[" "])]).is_err());
        let twice = check(&[node("x", &ssh), node("x", &ssh)]).unwrap_err();
        assert!(twice.to_string().contains("defined twice"), "{twice}");
    }

    #[test]
    fn a_qualified_id_splits_back_into_node_and_agent() {
        let id = qualified("box", "agent-0a1b2c3d4e5f");
        assert_eq!(id, "agent-0a1b2c3d4e5f@box");
        assert_eq!(split(&id), Some(("box", "agent-0a1b2c3d4e5f")));
        assert_eq!(split("agent-0a1b2c3d4e5f"), None);
        assert_eq!(split("@box"), None);
        assert_eq!(split("agent@"), None);
    }
}
