//! §9.1 lifecycle events: `hello`, the `sync` snapshot a (re)attaching
//! client renders from (the live window and the questions still open), and
//! `status` on every transition.

use serde::{Deserialize, Deserializer, Serialize};

use super::permission::PermissionRequest;
use super::ui::UiRequest;
use crate::tagged::Tagged;
use crate::types::{AgentStatus, Message};

/// `hello`: the first message on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: String,
    pub server_version: String,
    pub capabilities: Vec<String>,
}

/// `sync`: everything a (re)attaching client needs to render the agent now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sync {
    pub status: AgentStatus,
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_epoch: Option<u64>,
    pub live_window: LiveWindow,
    pub pending_requests: Vec<PendingRequest>,
    /// Shard's additive cursor: the `seq` of the agent's last event this
    /// snapshot includes (a client resumes after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// Shard's additive flag: the client's cursor was outside retention, so
    /// this snapshot replaces everything it knew of the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<bool>,
}

/// The post-compaction message window carried by `sync`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveWindow {
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_index: Option<u64>,
}

/// A question still open when `sync` was taken. A delegated child's request
/// surfaced through an ancestor keeps the child's `agent_id` (§6.3).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(flatten)]
    pub request: PendingKind,
}

/// The question itself, tagged by the event `type` that asked it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum PendingKind {
    #[serde(rename = "permission_request")]
    Permission(PermissionRequest),
    #[serde(rename = "ui_request")]
    Ui(UiRequest),
}

// Both decoded from the one object (`crate::tagged`): serde's derive would
// buffer it twice over, once for `flatten` and once for the tag.
impl<'de> Deserialize<'de> for PendingRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut question = Tagged::read(deserializer, "type")?;
        let agent_id = question.optional("agent_id")?;
        Ok(Self { agent_id, request: PendingKind::from_tagged(question)? })
    }
}

impl<'de> Deserialize<'de> for PendingKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_tagged(Tagged::read(deserializer, "type")?)
    }
}

impl PendingKind {
    fn from_tagged<E: serde::de::Error>(question: Tagged) -> Result<Self, E> {
        match question.tag.as_str() {
            "permission_request" => question.rest().map(Self::Permission),
            "ui_request" => question.rest().map(Self::Ui),
            other => Err(E::unknown_variant(other, &["permission_request", "ui_request"])),
        }
    }

    pub fn request_id(&self) -> &str {
        match self {
            Self::Permission(request) => &request.request_id,
            Self::Ui(request) => &request.request_id,
        }
    }
}

/// `status`: sent on every status transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub status: AgentStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
