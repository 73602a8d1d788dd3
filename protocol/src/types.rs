//! The shared types of §11: content, tool results, render descriptors, usage,
//! models and agents. Per-message payloads live in [`crate::agent`],
//! [`crate::orchestrator`], [`crate::workspace`] and [`crate::subagent`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::identity::AgentIdentity;
use crate::tagged::Tagged;

/// A JSON object, as the spec's `Record<string, unknown>`.
pub type JsonObject = Map<String, Value>;

/// `AgentStatus` (§9.1). `Unknown` keeps a client working when a newer server
/// adds a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Idle,
    Streaming,
    WaitingForPermission,
    WaitingForUi,
    Compacting,
    Error,
    /// Shard extension (CONTRACT.md): held at a budget's cap before a model
    /// call, with work waiting (docs/PROTOCOL-NOTES.md, "Budgets").
    Paused,
    #[serde(other)]
    Unknown,
}

impl AgentStatus {
    /// Active states never expire and keep a Runtime alive (§6.4).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            Self::Streaming
                | Self::WaitingForPermission
                | Self::WaitingForUi
                | Self::Compacting
                | Self::Paused
        )
    }
}

/// `RuntimeState` (CONTRACT.md): the state of an agent's process generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeState {
    Starting,
    Running,
    Stopped,
    Failed,
    /// Stopped by the fleet's limits to make room; it comes back on its
    /// next prompt or attach (CONTRACT.md, "Fleet limits and budgets").
    Hibernated,
    #[serde(other)]
    Unknown,
}

/// `Image` (§11): base64 data with its MIME type, tagged `"type": "image"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// Always [`ImageTag::Image`]; a field (not `#[serde(tag)]` on the struct)
    /// so that decoding checks it.
    #[serde(rename = "type")]
    pub tag: ImageTag,
    pub data: String,
    pub mime_type: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageTag {
    #[default]
    Image,
}

/// `ModelDescriptor` (§11): a secret-free catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDescriptor {
    pub id: String,
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// A mode catalog entry (§9.2 `list_modes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeDescriptor {
    pub name: String,
    pub description: String,
}

/// One reasoning effort of a model (§9.2 `list_reasoning_levels`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningLevel {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    #[serde(other)]
    Unknown,
}

/// `Message` (§11): one entry of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    pub role: Role,
    pub content: Vec<ContentBlock>,
    /// Shard's extension: a reply an abort cut off while it streamed (a
    /// kill too), so that every client, now or later, shows where it
    /// stopped (docs/PROTOCOL-NOTES.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aborted: bool,
    /// Shard's extension: the reply streaming now, as far as it has come
    /// (the last message of a `sync` a client gets mid-reply). Its `id` is
    /// the `message_id` its deltas go on under, and its `message_complete`
    /// follows (docs/PROTOCOL-NOTES.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streaming: bool,
}

/// `ContentBlock` (§11). Decoded by hand (crate::tagged).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    ToolCall {
        id: String,
        name: String,
        args: JsonObject,
    },
    ToolResult {
        tool_call_id: String,
        content: ToolResultContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    Thinking {
        text: String,
    },
    /// A block kind this build does not know; shown as nothing, never fatal.
    #[serde(other, skip_serializing)]
    Unknown,
}

/// `ToolResultContent` (§11): the pure output of a tool. Decoded by hand
/// (crate::tagged).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolResultContent {
    Text {
        text: String,
    },
    Json {
        value: Value,
    },
    Error {
        message: String,
    },
    #[serde(other, skip_serializing)]
    Unknown,
}

/// `RenderDescriptor` (§11, ARCHITECTURE §4.5): presentation data the client
/// renders itself. New kinds are additive, so an unknown kind decodes to
/// `Unknown` and the client falls back to the plain content. Decoded by hand
/// (crate::tagged).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RenderDescriptor {
    Text {
        text: String,
    },
    Kv {
        pairs: Vec<KeyValue>,
    },
    Diff {
        path: String,
        hunks: Vec<Hunk>,
    },
    Tree {
        root: TreeNode,
    },
    Progress {
        label: String,
        current: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<u64>,
    },
    Status {
        label: String,
        tone: Tone,
    },
    Command {
        command: String,
        #[serde(rename = "exitCode", default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
        #[serde(rename = "durationMs", default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    PathList {
        paths: Vec<PathEntry>,
    },
    Code {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lang: Option<String>,
        text: String,
    },
    #[serde(other, skip_serializing)]
    Unknown,
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut block = Tagged::read(deserializer, "type")?;
        Ok(match block.tag.as_str() {
            "text" => Self::Text { text: block.field("text")? },
            "tool_call" => Self::ToolCall {
                id: block.field("id")?,
                name: block.field("name")?,
                args: block.field("args")?,
            },
            "tool_result" => Self::ToolResult {
                tool_call_id: block.field("tool_call_id")?,
                content: block.field("content")?,
                is_error: block.optional("is_error")?,
            },
            "thinking" => Self::Thinking { text: block.field("text")? },
            _ => Self::Unknown,
        })
    }
}

impl<'de> Deserialize<'de> for ToolResultContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut content = Tagged::read(deserializer, "kind")?;
        Ok(match content.tag.as_str() {
            "text" => Self::Text { text: content.field("text")? },
            "json" => Self::Json { value: content.field("value")? },
            "error" => Self::Error { message: content.field("message")? },
            _ => Self::Unknown,
        })
    }
}

impl<'de> Deserialize<'de> for RenderDescriptor {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut render = Tagged::read(deserializer, "kind")?;
        Ok(match render.tag.as_str() {
            "text" => Self::Text { text: render.field("text")? },
            "kv" => Self::Kv { pairs: render.field("pairs")? },
            "diff" => Self::Diff { path: render.field("path")?, hunks: render.field("hunks")? },
            "tree" => Self::Tree { root: render.field("root")? },
            "progress" => Self::Progress {
                label: render.field("label")?,
                current: render.field("current")?,
                total: render.optional("total")?,
            },
            "status" => Self::Status { label: render.field("label")?, tone: render.field("tone")? },
            "command" => Self::Command {
                command: render.field("command")?,
                exit_code: render.optional("exitCode")?,
                duration_ms: render.optional("durationMs")?,
            },
            "path_list" => Self::PathList { paths: render.field("paths")? },
            "code" => Self::Code {
                path: render.optional("path")?,
                lang: render.optional("lang")?,
                text: render.field("text")?,
            },
            _ => Self::Unknown,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    pub k: String,
    pub v: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    Info,
    Warn,
    Error,
    #[serde(other)]
    Unknown,
}

/// One hunk of a unified diff (P6, pinned in docs/PROTOCOL-NOTES.md): the
/// `@@ -old_start,old_lines +new_start,new_lines @@` header as numbers, then
/// the hunk's lines, each starting with `' '`, `'-'` or `'+'`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hunk {
    pub old_start: u64,
    pub old_lines: u64,
    pub new_start: u64,
    pub new_lines: u64,
    pub lines: Vec<String>,
}

/// A node of a `tree` descriptor (P6, pinned in docs/PROTOCOL-NOTES.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeNode {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<PathKind>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<TreeNode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    File,
    Dir,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathEntry {
    pub path: String,
    pub kind: PathKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// `Usage` (§11), also the payload of the `usage` event (§9.4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `AgentInfo` (§11): what the registry knows of one durable agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentInfo {
    pub agent_id: String,
    /// Its name and relatives, written beside the fields below.
    #[serde(flatten)]
    pub identity: AgentIdentity,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    pub status: AgentStatus,
    pub runtime_state: RuntimeState,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The runtime the agent runs: `shard` for the built-in agent, else a
    /// configured runtime's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The sandbox the agent runs in (CONTRACT.md, "Sandbox").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxInfo>,
    /// What its processes use, while they run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<crate::fleet::Resources>,
    /// The node it runs on, for an agent of another machine's daemon
    /// (CONTRACT.md, "`shard acp` and nodes"); absent for the hub's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

// Read field by field: serde's derive reads a struct with a flattened part
// through a buffered copy of every field it does not know, the largest cost
// of this type in the browser bundle. Missing required fields are errors,
// optional ones absent or `null` are `None`, unknown fields are ignored, as
// the derive would; the literal at the end names every field, so a field
// added to `AgentInfo` does not compile until it is read here.
impl<'de> Deserialize<'de> for AgentInfo {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("AgentInfo", &[], AgentInfoVisitor)
    }
}

struct AgentInfoVisitor;

impl<'de> serde::de::Visitor<'de> for AgentInfoVisitor {
    type Value = AgentInfo;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an agent's info")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AgentInfo, A::Error> {
        let (mut agent_id, mut cwd, mut status, mut runtime_state, mut created_at) =
            (None, None, None, None, None);
        let (mut model, mut provider, mut mode, mut usage, mut runtime, mut sandbox) =
            (None, None, None, None, None, None);
        let (mut resources, mut node) = (None, None);
        let mut identity = AgentIdentity::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "agent_id" => agent_id = Some(map.next_value()?),
                "cwd" => cwd = Some(map.next_value()?),
                "status" => status = Some(map.next_value()?),
                "runtime_state" => runtime_state = Some(map.next_value()?),
                "created_at" => created_at = Some(map.next_value()?),
                "model" => model = map.next_value()?,
                "provider" => provider = map.next_value()?,
                "mode" => mode = map.next_value()?,
                "usage" => usage = map.next_value()?,
                "runtime" => runtime = map.next_value()?,
                "sandbox" => sandbox = map.next_value()?,
                "resources" => resources = map.next_value()?,
                "node" => node = map.next_value()?,
                other => match identity.slot(other) {
                    Some(slot) => *slot = map.next_value()?,
                    None => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                },
            }
        }
        let missing = <A::Error as serde::de::Error>::missing_field;
        Ok(AgentInfo {
            agent_id: agent_id.ok_or_else(|| missing("agent_id"))?,
            identity,
            cwd: cwd.ok_or_else(|| missing("cwd"))?,
            model,
            provider,
            mode,
            status: status.ok_or_else(|| missing("status"))?,
            runtime_state: runtime_state.ok_or_else(|| missing("runtime_state"))?,
            created_at: created_at.ok_or_else(|| missing("created_at"))?,
            usage,
            runtime,
            sandbox,
            resources,
            node,
        })
    }
}
