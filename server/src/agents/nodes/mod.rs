//! Other machines' daemons this one reaches (CONTRACT.md, "`shard acp` and
//! nodes"; docs/NODES.md). Each `[[nodes]]` entry is one [`link::Link`]:
//! its command runs (`ssh -T box shard bridge`), and over its stdio this
//! daemon, the hub, is one local client of the node's daemon, nothing
//! more. The link starts again with a backoff whenever it ends, and every
//! client is told where it stands (`node_changed`).
//!
//! A node's agents are the hub's agents too, each under its node's id
//! (`agent-…@box`): the registry lists them from what the link tells it
//! ([`News`]), and each has a host of its own here whose runtime is the
//! link ([`crate::agents::runtime::remote`]), so that attachments,
//! questions, the journal, the inbox and pushes work for them as for the
//! hub's own.
//!
//! Trust runs one way: the hub sends the node commands as its client; what
//! the node sends back is only ever read as events and responses about
//! the node's own agents, never as a command.

pub mod link;
pub mod workspaces;

use std::sync::Arc;

use shard_platform::nodes::NodeConfig;
use shard_protocol::node::NodeInfo;
use shard_protocol::orchestrator::AgentStatusChanged;
use shard_protocol::types::AgentInfo;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use self::link::Link;
use super::Broadcast;

/// The most of one node's agents the hub lists (and writes a manifest
/// and a session for): a node that lists more, whether it runs that many
/// or means harm, has the rest left out.
pub const MAX_AGENTS: usize = 1000;

/// What the links tell the registry of the nodes' agents.
pub enum News {
    /// Every agent the node lists, as the link comes up.
    Listed { node: String, agents: Vec<AgentInfo> },
    /// One agent the node just made.
    Spawned { node: String, info: Box<AgentInfo> },
    /// One of the node's agents changed status there (`agent_status_changed`
    /// as the node told it, under the node's id).
    Status { node: String, changed: AgentStatusChanged },
    /// One of the node's agents' sandbox changed there (a host granted or
    /// taken back; `agent_sandbox` under the node's id).
    Sandbox { node: String, told: shard_protocol::sandbox::AgentSandbox },
    /// A question of one of the node's agents the hub does not listen to
    /// came to the hub (its parent's people): the hub listens to it.
    Asked { node: String, agent_id: String },
    /// A `workspace_*` event of the node's, as the node told it.
    Workspace { node: String, told: Box<shard_protocol::ServerMessage> },
}

/// How many pieces of news may wait for the registry.
pub const NEWS: usize = 64;

/// Every node's link, in the order config.toml lists them.
#[derive(Default)]
pub struct Nodes {
    links: Vec<Arc<Link>>,
}

impl Nodes {
    /// A link for each node, each started in its own task; they stop with
    /// `stop`.
    pub fn start(
        configs: Vec<NodeConfig>,
        broadcast: Arc<dyn Broadcast>,
        news: mpsc::Sender<News>,
        stop: CancellationToken,
    ) -> Self {
        let links: Vec<Arc<Link>> = configs
            .into_iter()
            .map(|config| Arc::new(Link::new(config, broadcast.clone())))
            .collect();
        for link in &links {
            tokio::spawn(link::run(link.clone(), news.clone(), stop.clone()));
        }
        Self { links }
    }

    /// `node.list`: every node as it stands now.
    pub fn list(&self) -> Vec<NodeInfo> {
        self.links.iter().map(|link| link.info()).collect()
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Link>> {
        self.links.iter().find(|link| link.id() == id)
    }
}

/// A node's link is down: why, as the error a spawn gives (so that the
/// host says `NODE_OFFLINE`, not a failed process start).
#[derive(Debug)]
pub struct Offline(pub String);

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Offline {}

impl Offline {
    pub fn io(why: String) -> std::io::Error {
        std::io::Error::other(Offline(why))
    }

    /// The reason, if `error` is one.
    pub fn in_io(error: &std::io::Error) -> Option<String> {
        error.get_ref().and_then(|inner| inner.downcast_ref::<Self>()).map(|it| it.0.clone())
    }
}
