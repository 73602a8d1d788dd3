//! Other machines' daemons a hub reaches (CONTRACT.md, "`shard acp` and
//! nodes"; docs/NODES.md): each node's link as every client sees it.

use serde::{Deserialize, Serialize};

/// Where a node's link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// The link is up: the node's agents answer.
    Online,
    /// Its command is starting, or the node's daemon has not greeted yet.
    Connecting,
    /// The link is down; it is tried again after a backoff.
    Offline,
    #[serde(other)]
    Unknown,
}

/// One node, as `node.list` and `node_changed` carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Its id in `config.toml`; its agents' ids end in `@` and this.
    pub id: String,
    pub state: NodeState,
    /// Since when it is in this state (ms since the epoch).
    pub since: u64,
    /// Why the link last went down or failed to come up, made safe to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the next try is due, while offline (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<u64>,
}

/// The answer to `node.list`: every configured node, in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeList {
    pub nodes: Vec<NodeInfo>,
}

/// `node_changed` (registry event, to every client): a node's link moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeChanged {
    pub node: NodeInfo,
}
