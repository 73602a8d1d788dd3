//! What the page knows, as signals shared by the components and the
//! connection task: the connection, every agent and its activity, the
//! selected agent's transcript, catalogs and capabilities, and every open
//! question this tab has seen.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use leptos::prelude::*;
use serde_json::{Value, json};
use shard_protocol::agent::{PendingKind, ToolResult};
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::types::{
    AgentInfo, AgentStatus, ModeDescriptor, ModelDescriptor, ReasoningLevel, RenderDescriptor,
};

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

/// One piece of an assistant message as it streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    Thinking(String),
}

/// One line of the transcript.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // short-lived UI state; boxing buys nothing
pub enum Item {
    User {
        text: String,
    },
    Assistant {
        message_id: String,
        blocks: Vec<Block>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        args: Value,
        read_only: Option<bool>,
        start: Option<RenderDescriptor>,
        result: Option<ToolResult>,
    },
    Compaction {
        index: u64,
        tokens_before: u64,
        tokens_after: u64,
    },
    Notice {
        text: String,
        error: bool,
    },
}

/// An open question: whose, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub agent_id: String,
    pub request: PendingKind,
}

impl Question {
    pub fn key(&self) -> (String, String) {
        (self.agent_id.clone(), self.request.request_id().to_owned())
    }
}

/// Sends a text frame on the current connection, if any.
pub type Sender = Arc<Mutex<Option<Box<dyn Fn(String) + Send + Sync>>>>;

#[derive(Clone)]
pub struct ClientState {
    pub connection: RwSignal<Connection>,
    pub agents: RwSignal<Vec<AgentInfo>>,
    pub activity: RwSignal<BTreeMap<String, (ActivityPhase, Option<String>)>>,
    pub notice: RwSignal<Option<String>>,
    /// The agent shown (and the only interactive attachment).
    pub selected: RwSignal<Option<String>>,
    pub transcript: RwSignal<Vec<Item>>,
    pub status: RwSignal<AgentStatus>,
    pub mode: RwSignal<String>,
    pub capabilities: RwSignal<Vec<String>>,
    pub modes: RwSignal<Vec<ModeDescriptor>>,
    pub models: RwSignal<Vec<ModelDescriptor>>,
    pub model: RwSignal<Option<ModelDescriptor>>,
    pub levels: RwSignal<Vec<ReasoningLevel>>,
    pub level: RwSignal<Option<String>>,
    /// Every open question this tab knows, by (agent, request).
    pub questions: RwSignal<BTreeMap<(String, String), Question>>,
    /// Questions the user closed without answering (they stay in the inbox).
    pub dismissed: RwSignal<Vec<(String, String)>>,
    pub notify: RwSignal<bool>,
    pub sender: Sender,
    next_id: Arc<Mutex<u64>>,
}

impl ClientState {
    pub fn new() -> Self {
        Self {
            connection: RwSignal::new(Connection::Loading),
            agents: RwSignal::new(Vec::new()),
            activity: RwSignal::new(BTreeMap::new()),
            notice: RwSignal::new(None),
            selected: RwSignal::new(None),
            transcript: RwSignal::new(Vec::new()),
            status: RwSignal::new(AgentStatus::Idle),
            mode: RwSignal::new(String::new()),
            capabilities: RwSignal::new(Vec::new()),
            modes: RwSignal::new(Vec::new()),
            models: RwSignal::new(Vec::new()),
            model: RwSignal::new(None),
            levels: RwSignal::new(Vec::new()),
            level: RwSignal::new(None),
            questions: RwSignal::new(BTreeMap::new()),
            dismissed: RwSignal::new(Vec::new()),
            notify: RwSignal::new(false),
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
    pub fn send(&self, message: Value) {
        let sender = self.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match sender.as_ref() {
            Some(send) => send(message.to_string()),
            None => self.notice.set(Some("Not connected; try again in a moment.".to_owned())),
        }
    }

    pub fn has_capability(&self, capability: &str) -> bool {
        self.capabilities.with(|capabilities| capabilities.iter().any(|known| known == capability))
    }

    pub fn create_agent(&self, cwd: &str, name: &str, model: &str, mode: &str) {
        let mut command =
            json!({"id": self.request_id("create"), "type": "agent.create", "cwd": cwd});
        for (key, value) in [("name", name), ("model", model), ("mode", mode)] {
            if !value.is_empty() {
                command[key] = Value::String(value.to_owned());
            }
        }
        self.send(command);
    }

    /// Shows an agent: it becomes this tab's one interactive attachment.
    pub fn select(&self, agent_id: Option<String>) {
        let previous = self.selected.get_untracked();
        if previous == agent_id {
            return;
        }
        if let Some(previous) = previous {
            self.send(json!({"id": self.request_id("detach"), "type": "agent.detach", "agent_id": previous}));
        }
        self.transcript.set(Vec::new());
        self.capabilities.set(Vec::new());
        self.modes.set(Vec::new());
        self.models.set(Vec::new());
        self.levels.set(Vec::new());
        self.selected.set(agent_id.clone());
        if let Some(agent_id) = agent_id {
            self.send(json!({"id": "attach", "type": "agent.attach", "agent_id": agent_id, "role": "interactive"}));
        }
    }

    /// Sends to the selected agent.
    pub fn to_selected(&self, mut message: Value) {
        let Some(agent_id) = self.selected.get_untracked() else { return };
        message["agent_id"] = Value::String(agent_id);
        if message.get("id").is_none() {
            message["id"] = Value::String(self.request_id("cmd"));
        }
        self.send(message);
    }

    pub fn prompt(&self, text: &str, behavior: Option<&str>) {
        let mut message = json!({"type": "prompt", "message": text});
        if let Some(behavior) = behavior {
            message["streaming_behavior"] = Value::String(behavior.to_owned());
        }
        self.transcript.update(|items| items.push(Item::User { text: text.to_owned() }));
        self.to_selected(message);
    }

    /// Answers a question of any agent. For an agent other than the selected
    /// one the tab attaches interactively just long enough to answer.
    pub fn answer(&self, question: &Question, mut answer: Value) {
        let agent_id = question.agent_id.clone();
        let selected = self.selected.get_untracked().as_deref() == Some(agent_id.as_str());
        if !selected {
            self.send(json!({"id": self.request_id("answer-attach"), "type": "agent.attach", "agent_id": agent_id, "role": "interactive"}));
        }
        answer["agent_id"] = Value::String(agent_id.clone());
        answer["request_id"] = Value::String(question.request.request_id().to_owned());
        self.send(answer);
        if !selected {
            self.send(json!({"id": self.request_id("answer-detach"), "type": "agent.detach", "agent_id": agent_id}));
        }
        self.questions.update(|questions| {
            questions.remove(&question.key());
        });
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

    pub fn agent_name(&self, agent_id: &str) -> String {
        self.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|agent| agent.agent_id == agent_id)
                .and_then(|agent| agent.name.clone())
                .unwrap_or_else(|| agent_id.to_owned())
        })
    }

    /// Questions still waiting for this tab, dismissed ones excluded.
    pub fn open_questions(&self) -> Vec<Question> {
        let dismissed = self.dismissed.get();
        self.questions.with(|questions| {
            questions
                .values()
                .filter(|question| !dismissed.contains(&question.key()))
                .cloned()
                .collect()
        })
    }
}

impl Default for ClientState {
    fn default() -> Self {
        Self::new()
    }
}
