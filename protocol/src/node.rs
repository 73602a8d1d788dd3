//! Other machines' daemons a hub reaches (CONTRACT.md, "`shard acp` and
//! nodes"; docs/NODES.md): each node's link as every client sees it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a node's link stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// The link is up: the node's agents answer.
    Online,
    /// Its command is starting, or the node's daemon has not greeted yet.
    Connecting,
    /// The link is down; it is tried again after a backoff.
    Offline,
    Unknown,
}

/// One node, as `node.list` and `node_changed` carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

// Read from the object's fields by hand, as `AgentInfo` is: the browser
// bundle carries every wire type's decoder, and a derived one brings paths
// no peer takes (docs/PERFORMANCE.md). The rules are the derive's: a
// missing required field is an error, an optional one absent or `null` is
// `None`, unknown fields are ignored, an unknown state is `Unknown`.
impl<'de> Deserialize<'de> for NodeInfo {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = Map::deserialize(deserializer)?;
        let mut take = |name: &'static str| fields.remove(name).filter(|value| !value.is_null());
        let id = match take("id") {
            Some(Value::String(id)) => id,
            _ => return Err(D::Error::missing_field("id")),
        };
        let state = match take("state") {
            Some(Value::String(state)) => match state.as_str() {
                "online" => NodeState::Online,
                "connecting" => NodeState::Connecting,
                "offline" => NodeState::Offline,
                _ => NodeState::Unknown,
            },
            _ => return Err(D::Error::missing_field("state")),
        };
        let since = take("since").and_then(|since| since.as_u64());
        let since = since.ok_or_else(|| D::Error::missing_field("since"))?;
        let error = take("error").and_then(|error| error.as_str().map(str::to_owned));
        let retry_at = take("retry_at").and_then(|retry_at| retry_at.as_u64());
        Ok(NodeInfo { id, state, since, error, retry_at })
    }
}
