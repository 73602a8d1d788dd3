//! Other machines' daemons this hub links to (docs/NODES.md), as the page
//! shows them: each node's link (`node.list` on each connection, then
//! every `node_changed`), so that a node's agents can be marked as out of
//! reach while its link is down, and the new-agent form can offer the
//! nodes to run on.

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::node::{NodeChanged, NodeInfo, NodeList, NodeState};

use crate::link::{Link, Request};

#[derive(Clone, Copy)]
pub struct Nodes {
    /// Every configured node, in config order, as last told.
    pub all: RwSignal<Vec<NodeInfo>>,
    link: Link,
}

impl Nodes {
    pub fn new(link: Link) -> Self {
        Self { all: RwSignal::new(Vec::new()), link }
    }

    /// Asks for every node (on each connection: what changed while the
    /// page was away is in the answer).
    pub fn list(&self) {
        self.link.send(ClientMessage::NodeList(Default::default()), None, Request::Nodes);
    }

    pub fn listed(&self, response: &Response) {
        if let Ok(list) = response.data::<NodeList>() {
            self.all.set(list.nodes);
        }
    }

    /// A `node_changed`: the node's entry replaced (or added, for a node
    /// told before the list came).
    pub fn changed(&self, changed: NodeChanged) {
        self.all.update(|all| match all.iter_mut().find(|known| known.id == changed.node.id) {
            Some(known) => *known = changed.node,
            None => all.push(changed.node),
        });
    }

    /// Where `node`'s link stands (tracked); `None` for a node not told.
    pub fn state_of(&self, node: &str) -> Option<NodeState> {
        self.all.with(|all| all.iter().find(|known| known.id == node).map(|known| known.state))
    }

    /// Whether an agent on `node` (`None`: this machine) can be reached
    /// now (tracked). A node not told yet is given the benefit of the
    /// doubt: its list is on its way.
    pub fn reachable(&self, node: Option<&str>) -> bool {
        node.is_none_or(|node| self.state_of(node).is_none_or(|state| state == NodeState::Online))
    }
}

/// How a node's state reads.
pub fn state_label(state: NodeState) -> &'static str {
    match state {
        NodeState::Online => "online",
        NodeState::Connecting => "connecting",
        NodeState::Offline => "offline",
        NodeState::Unknown => "unknown",
    }
}
