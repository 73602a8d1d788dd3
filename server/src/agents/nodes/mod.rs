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

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use shard_platform::config::Config;
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

/// Every node's link, in the order config.toml lists them, and the ones
/// it listed before (kept, so that a node put back is the same link to
/// the hub's agents of it).
pub struct Nodes {
    entries: Mutex<Vec<Entry>>,
    broadcast: Arc<dyn Broadcast>,
    news: mpsc::Sender<News>,
    stop: CancellationToken,
}

struct Entry {
    link: Arc<Link>,
    /// Stops the link's task; `None` while config.toml does not name it.
    running: Option<CancellationToken>,
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
        let nodes = Self { entries: Mutex::default(), broadcast, news, stop };
        nodes.apply(configs);
        nodes
    }

    /// config.toml names `configs` now: a node new to it is started; one
    /// whose command changed connects again with the new command; one no
    /// longer named is stopped (and says so), its agents refused until it
    /// is named again.
    pub fn apply(&self, configs: Vec<NodeConfig>) {
        let mut entries = self.entries();
        let mut named = Vec::with_capacity(configs.len());
        for config in configs {
            let known = entries.iter().position(|entry| entry.link.id() == config.id);
            let Some(at) = known else {
                let link = Arc::new(Link::new(config, self.broadcast.clone()));
                let running = Some(self.run(&link));
                named.push(Entry { link, running });
                continue;
            };
            let mut entry = entries.remove(at);
            if entry.running.is_none() {
                entry.link.put_back(config.command);
                entry.running = Some(self.run(&entry.link));
            } else {
                entry.link.reconfigure(config.command);
            }
            named.push(entry);
        }
        for entry in entries.iter_mut() {
            if let Some(running) = entry.running.take() {
                entry.link.retire();
                running.cancel();
            }
        }
        named.append(&mut entries);
        *entries = named;
    }

    fn run(&self, link: &Arc<Link>) -> CancellationToken {
        let running = self.stop.child_token();
        tokio::spawn(link::run(link.clone(), self.news.clone(), running.clone()));
        running
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `node.list`: every node config.toml names, as it stands now.
    pub fn list(&self) -> Vec<NodeInfo> {
        let entries = self.entries();
        let named = entries.iter().filter(|entry| entry.running.is_some());
        named.map(|entry| entry.link.info()).collect()
    }

    /// The link of a node config.toml names: where new work may go.
    pub fn get(&self, id: &str) -> Option<Arc<Link>> {
        self.link(id).filter(|link| !link.retired())
    }

    /// The link of a node config.toml names or once named: where the
    /// hub's agents of it are (one taken out says so when asked).
    pub fn link(&self, id: &str) -> Option<Arc<Link>> {
        let entries = self.entries();
        entries.iter().map(|entry| &entry.link).find(|link| link.id() == id).cloned()
    }
}

/// How often config.toml is read again for its `[[nodes]]`.
const CONFIG_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Follows config.toml in `home` until `stop`, from `applied` (its text
/// as the nodes were started from it): once its text has changed and
/// then read the same twice in a row (a file caught half-written is not
/// taken), and it reads well, its `[[nodes]]` are applied. One that does
/// not read is said once, and the nodes stay as they were.
pub async fn follow_config(
    nodes: Arc<Nodes>,
    home: PathBuf,
    mut applied: Option<String>,
    stop: CancellationToken,
) {
    let mut seen = applied.clone();
    loop {
        tokio::select! {
            () = tokio::time::sleep(CONFIG_EVERY) => {}
            () = stop.cancelled() => return,
        }
        let reading = home.clone();
        let read = tokio::task::spawn_blocking(move || Config::read_text(&reading)).await;
        // A file that cannot be read now is looked at again next time.
        let Ok(Ok(now)) = read else { continue };
        let settled = now == seen;
        seen = now;
        if !settled || seen == applied {
            continue;
        }
        applied.clone_from(&seen);
        match Config::parse(&home, seen.as_deref()) {
            Ok(config) => nodes.apply(config.nodes),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "config.toml changed and cannot be read; the nodes stay as they were");
            }
        }
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
