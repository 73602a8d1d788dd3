//! Agents as the daemon keeps them: the [`registry`] of durable agents and
//! their [`manifest`]s, one [`host`] per agent (its process generations,
//! open questions and the projection that builds `sync`), an actor while it
//! has something to do and dormant state in [`hosts`] while it has not, and
//! [`delegation`], who answers whose questions (PROTOCOL.md §6, §10.1).
//! A host reaches its agent's process only through the [`runtime`] seam:
//! start a generation, send it per-agent commands, hear its events and its
//! exit, stop it; Shard's own agent is its first implementation.
//!
//! This folder reads and writes no socket and knows no browser. It hands
//! serialized events to [`Subscriber`]s and registry events to a [`Broadcast`]; the
//! `clients` folder implements both with its bounded outboxes. What a person
//! away from the screen should hear of (a question, its end, a failed turn)
//! goes to [`Notices`], which the web side turns into pushes.

pub mod approvals;
pub mod budgets;
pub mod checks;
pub mod delegation;
pub mod effect;
pub mod error;
pub mod fleet;
pub mod host;
pub mod hosts;
pub mod manifest;
pub mod nodes;
pub mod registry;
pub mod runtime;
pub mod sensitive;
pub mod usage;

/// One serialized message as it goes to clients: JSON text, shared by
/// every connection it goes to (a clone is a reference count) and UTF-8 by
/// construction, so that no transport has to check it again per client.
/// It is the WebSocket library's text payload, so that the web transport
/// frames it without a copy; nothing else of that library is used here.
pub type Wire = tokio_tungstenite::tungstenite::Utf8Bytes;

/// Names one client connection for as long as it lives.
pub type SubscriberId = u64;

/// One client connection as an agent sees it: a queue that never blocks.
pub trait Subscriber: Send + Sync {
    fn id(&self) -> SubscriberId;
    /// Queues one serialized message without waiting. `false` when the
    /// connection is closing (and, if it was too slow, closes it).
    fn push(&self, bytes: Wire) -> bool;
}

/// A shared handle to a subscriber.
pub type Sub = std::sync::Arc<dyn Subscriber>;

/// Registry events (`agent_spawned`, `agent_status_changed`, …) go to every
/// connection, attached or not.
pub trait Broadcast: Send + Sync {
    fn broadcast(&self, bytes: &Wire);
}

/// What the daemon tells people who are not looking (docs/NOTIFICATIONS.md):
/// a question that waits, its end, a turn that failed. Called from an
/// agent's host in its own order of events; an implementation only queues,
/// never waits, so an agent is never held up by a notification.
pub trait Notices: Send + Sync {
    /// A question is open and waits for a person.
    fn asked(&self, agent: &NoticeAgent<'_>, request: &shard_protocol::agent::PendingKind);
    /// A question is closed: answered by anyone, or by nobody.
    fn settled(&self, agent_id: &str, request_id: &str);
    /// A turn reported an error (`code` only: its message may hold what a
    /// lock screen must not show).
    fn failed(&self, agent: &NoticeAgent<'_>, code: &str);
}

/// The agent a notice is about.
pub struct NoticeAgent<'a> {
    pub agent_id: &'a str,
    pub name: Option<&'a str>,
}

/// No notices: for daemons and tests that push nothing.
pub struct Unnoticed;

impl Notices for Unnoticed {
    fn asked(&self, _: &NoticeAgent<'_>, _: &shard_protocol::agent::PendingKind) {}
    fn settled(&self, _: &str, _: &str) {}
    fn failed(&self, _: &NoticeAgent<'_>, _: &str) {}
}

pub use crate::clock::now_ms;

/// The pid of each agent process that runs, and whose it is: how the daemon
/// knows an agent that speaks to it over the unix socket as itself (its
/// `subagent_*` tools) from any other local client, a tool of its own
/// included (a tool's process has its own pid).
#[derive(Default)]
pub struct Processes(std::sync::Mutex<std::collections::HashMap<u32, Started>>);

/// One process the daemon started for an agent.
struct Started {
    agent_id: String,
    /// Shard's own agent in a sandbox: the process started is bubblewrap,
    /// and the agent is the child of the sandbox's first process.
    contained: bool,
}

impl Processes {
    fn table(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u32, Started>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn started(&self, pid: u32, agent_id: &str) {
        self.table().insert(pid, Started { agent_id: agent_id.to_owned(), contained: false });
    }

    /// `pid`, started for Shard's own agent, is its sandbox's bubblewrap.
    pub fn contained(&self, pid: u32) {
        if let Some(started) = self.table().get_mut(&pid) {
            started.contained = true;
        }
    }

    /// The agent that the process `pid` is, if it is one: a process the
    /// daemon started, or in a sandbox of Shard's own agent the one child
    /// of the sandbox's first process. That agent is a subreaper: what its
    /// tools leave behind is its own child, never reparented up there, and
    /// when the agent goes, its sandbox goes with it.
    pub fn speaking(&self, pid: u32) -> Option<String> {
        if let Some(agent_id) = self.agent_of(pid) {
            return Some(agent_id);
        }
        let ancestors = shard_platform::process_tree::ancestors(pid);
        let [_first, sandbox, ..] = ancestors[..] else { return None };
        let table = self.table();
        let started = table.get(&sandbox)?;
        started.contained.then(|| started.agent_id.clone())
    }

    /// Called once the process has been reaped, before its pid can be reused.
    pub fn ended(&self, pid: u32) {
        self.table().remove(&pid);
    }

    /// Every process started for an agent, with its agent.
    pub fn roots(&self) -> Vec<(u32, String)> {
        self.table().iter().map(|(pid, started)| (*pid, started.agent_id.clone())).collect()
    }

    /// The agent whose process has this pid.
    pub fn agent_of(&self, pid: u32) -> Option<String> {
        self.table().get(&pid).map(|started| started.agent_id.clone())
    }
}
