//! What the page knows: the connection's state, the agents and their latest
//! activity. Plain signals, shared by the components and the connection task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use leptos::prelude::*;
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::types::AgentInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Server-rendered, before the client runs.
    Loading,
    Enrolling,
    NotEnrolled,
    Connecting,
    Connected,
    /// Lost; trying again in this many seconds (§2.2 backoff).
    Retrying(u32),
}

impl Connection {
    pub fn key(self) -> &'static str {
        match self {
            Self::Loading => "loading",
            Self::Enrolling => "enrolling",
            Self::NotEnrolled => "not-enrolled",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Retrying(_) => "retrying",
        }
    }

    pub fn label(self) -> String {
        match self {
            Self::Loading => "loading…".to_owned(),
            Self::Enrolling => "enrolling this browser…".to_owned(),
            Self::NotEnrolled => "not enrolled".to_owned(),
            Self::Connecting => "connecting…".to_owned(),
            Self::Connected => "connected".to_owned(),
            Self::Retrying(seconds) => format!("reconnecting in {seconds} s"),
        }
    }
}

/// Sends a text frame on the current connection, if any.
pub type Sender = Arc<Mutex<Option<Box<dyn Fn(String) + Send + Sync>>>>;

#[derive(Clone)]
pub struct ClientState {
    pub connection: RwSignal<Connection>,
    pub agents: RwSignal<Vec<AgentInfo>>,
    pub activity: RwSignal<HashMap<String, (ActivityPhase, Option<String>)>>,
    pub notice: RwSignal<Option<String>>,
    pub sender: Sender,
    next_id: Arc<Mutex<u64>>,
}

impl ClientState {
    pub fn new() -> Self {
        Self {
            connection: RwSignal::new(Connection::Loading),
            agents: RwSignal::new(Vec::new()),
            activity: RwSignal::new(HashMap::new()),
            notice: RwSignal::new(None),
            sender: Arc::new(Mutex::new(None)),
            next_id: Arc::new(Mutex::new(0)),
        }
    }

    pub fn request_id(&self, prefix: &str) -> String {
        let mut next = self.next_id.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *next += 1;
        format!("{prefix}-{next}")
    }

    /// Sends a message now, or tells the user there is no connection.
    pub fn send(&self, text: String) {
        let sender = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match sender.as_ref() {
            Some(send) => send(text),
            None => self.notice.set(Some("Not connected; try again in a moment.".to_owned())),
        }
    }

    pub fn create_agent(&self, cwd: &str, name: &str) {
        let mut command = serde_json::json!({"id": self.request_id("create"), "type": "agent.create", "cwd": cwd});
        if !name.is_empty() {
            command["name"] = serde_json::Value::String(name.to_owned());
        }
        self.send(command.to_string());
    }

    /// Adds or replaces one agent, keeping creation order.
    pub fn upsert(&self, info: AgentInfo) {
        self.agents.update(|agents| {
            match agents.iter_mut().find(|known| known.agent_id == info.agent_id) {
                Some(known) => *known = info,
                None => {
                    agents.push(info);
                    agents.sort_by(|a, b| {
                        (a.created_at, &a.agent_id).cmp(&(b.created_at, &b.agent_id))
                    });
                }
            }
        });
    }
}

impl Default for ClientState {
    fn default() -> Self {
        Self::new()
    }
}
