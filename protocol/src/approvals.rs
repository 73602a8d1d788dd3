//! An agent's approval history (Shard extension, pinned in
//! docs/PROTOCOL-NOTES.md): every permission and UI question it asked, who
//! answered it, from where, and when. Kept durably by the daemon.

use serde::{Deserialize, Serialize};

/// `approval.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalList {
    pub agent_id: String,
    /// At most this many records, newest first (default and cap: 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    Permission,
    Ui,
    #[serde(other)]
    Unknown,
}

/// Who answered a question, and from where.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answerer {
    /// As in `permission_resolved.source`: `web`, `unix`, `headless`,
    /// `abort`, `runtime_exited`, or what the agent itself reported.
    pub source: String,
    /// The enrolled browser that answered (`web` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<String>,
    /// The client's address as the daemon saw it (`web` only: the TCP
    /// peer, or behind the trusted proxy the address it forwarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// One question and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub request_id: String,
    pub kind: ApprovalKind,
    /// The tool a permission question is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// What was asked: the permission prompt, or the UI title and message;
    /// cleaned and bounded like every diagnostic (500 bytes here).
    pub prompt: String,
    pub asked_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<u64>,
    /// A permission's outcome: `allow`, `allow_always`, `deny`, or the
    /// `choice_id` answered; a UI question's: `answered` or `dismissed`
    /// (a null value). Absent while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<Answerer>,
}

/// The data of `approval.list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalListResult {
    pub agent_id: String,
    pub approvals: Vec<ApprovalRecord>,
}
