//! Workspace commands (§10.1a): git-worktree workspaces, each launching a
//! fresh daemon-made agent and session. Projections are transport-safe: an
//! opaque `workspace_id`, never the common-dir or git-dir paths.

use serde::{Deserialize, Deserializer, Serialize};

/// `version?: 1` on every workspace command. Any other version is refused, so a
/// newer client learns at once that this daemon does not speak its dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkspaceVersion(u8);

impl WorkspaceVersion {
    pub const V1: Self = Self(1);
}

impl<'de> Deserialize<'de> for WorkspaceVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match u64::deserialize(deserializer)? {
            1 => Ok(Self::V1),
            other => Err(serde::de::Error::custom(format!(
                "unsupported workspace command version {other} (this daemon speaks 1)"
            ))),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCreate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    pub cwd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_target: Option<String>,
    /// Shard's additive field: the node to make it on (`node.list`), its
    /// `cwd` a path there; absent: this daemon (docs/NODES.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(flatten)]
    pub launch: WorkspaceLaunch,
}

/// The agent-launch fields shared by `workspace.create` and `workspace.attach`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLaunch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The runtime the agent runs (CONTRACT.md, "Agents that are not
    /// Shard's own"); absent: Shard's own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Narrows the configured sandbox for the agent (CONTRACT.md, "Sandbox").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceAttach {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    pub workspace_id: String,
    #[serde(flatten)]
    pub launch: WorkspaceLaunch,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceList {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_retired: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    pub workspace_id: String,
    /// Shard's additive field: also answer the diff against the
    /// integration target (`WorkspaceDetail::diff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_diff: Option<bool>,
}

/// One file of a workspace's diff, in the `diff` descriptor's shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiff {
    pub path: String,
    pub hunks: Vec<crate::types::Hunk>,
    /// Why the file's lines are not shown (a binary file, a new file too
    /// large to read); `hunks` is empty then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<String>,
}

/// What the workspace changed since it left its integration target,
/// committed or not (untracked files aside), bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceDiff {
    pub files: Vec<FileDiff>,
    /// Set when files or lines were left out to keep the answer bounded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchDisposition {
    /// Delete only when the daemon proves the branch merged (the default).
    DeleteIfMerged,
    Keep,
    /// The explicit retry after a `confirmation_required` refusal.
    DeleteConfirmed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRetire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_disposition: Option<BranchDisposition>,
}

/// `workspace.commit`, `workspace.merge` and `workspace.push` (Shard
/// extensions, docs/PROTOCOL-NOTES.md "Workspace actions"). A dry run
/// answers a [`WorkspacePreview`] and changes nothing; the action itself
/// takes the preview's `fingerprint` back and is refused (`stale`) when
/// what it would do changed since, so it does exactly what was shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<WorkspaceVersion>,
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// The preview's `fingerprint`: needed unless `dry_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// `workspace.commit` only: the commit message, needed unless
    /// `dry_run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A path an action changes, with git's letter for how (`A`dded,
/// `M`odified, `D`eleted, `T`ype changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedPath {
    pub status: String,
    pub path: String,
}

/// How a merge into the integration target would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeKind {
    /// The target is behind the branch: it moves up to it.
    FastForward,
    /// A merge commit whose tree git made without a conflict.
    Merge,
    /// Git cannot merge the two cleanly: refused (`conflicts`).
    Conflict,
    #[serde(other)]
    Unknown,
}

/// What a dry run found an action would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspacePreview {
    pub workspace_id: String,
    /// What it would do, in a sentence or two (names escaped).
    pub summary: String,
    /// The state previewed (opaque): the action takes it back.
    pub fingerprint: String,
    /// The workspace's branch.
    pub branch: String,
    /// A commit: the paths it commits. A merge: the paths the integration
    /// target changes in. At most 200; `file_count` tells them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ChangedPath>,
    #[serde(default)]
    pub file_count: u32,
    /// Commits a merge brings into the target, or a push sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commits: Option<u32>,
    /// A merge: how it would go, and its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A merge that conflicts: the paths (at most 200).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// A push: the remote (by name) and the branch there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_branch: Option<String>,
    /// A push: the exact URL it goes to, as the user's git rewrites the
    /// remote's, with any user info in it masked (a Shard extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_url: Option<String>,
}

/// What an action did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceActed {
    /// What it did, in a sentence (names escaped).
    pub summary: String,
    /// The commit made (a commit or a merge commit), the target's new tip
    /// (a fast-forward), or the commit pushed.
    pub commit: String,
    pub workspace: WorkspaceDetail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceLifecycle {
    Active,
    Retiring,
    Retired,
    Conflict,
    #[serde(other)]
    Unknown,
}

/// The transport-safe projection of a workspace (list rows and events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSummary {
    pub workspace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The worktree's own checkout directory.
    pub cwd: String,
    /// The original project's main-checkout root (never a git-dir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_cwd: Option<String>,
    /// `owned` when the daemon created the worktree, `adopted` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<String>,
    pub lifecycle: WorkspaceLifecycle,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration_target: Option<String>,
    /// Short content fingerprints (e.g. HEAD commit) to spot drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_fingerprint: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<u64>,
    #[serde(default)]
    pub agent_count: u32,
    /// Shard's additive field: the node a hub's workspace is on (its id
    /// then `<id>@<node>`); absent for the daemon's own (docs/NODES.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// `workspace.status` detail: the summary plus bindings and conflict state,
/// one flat object on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceDetail {
    #[serde(flatten)]
    pub summary: WorkspaceSummary,
    #[serde(flatten)]
    pub state: WorkspaceState,
}

impl<'de> Deserialize<'de> for WorkspaceDetail {
    /// Both parts from the one object, each ignoring the other's fields,
    /// rather than through serde's `flatten`, which buffers the object and
    /// compiles a second decoder of the summary (for the browser bundle).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let object = serde_json::Value::deserialize(deserializer)?;
        let state = crate::decode::from_value(object.clone()).map_err(D::Error::custom)?;
        let summary = crate::decode::from_value(object).map_err(D::Error::custom)?;
        Ok(Self { summary, state })
    }
}

/// What `workspace.status` tells beyond the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceState {
    /// Agents bound to this workspace (opaque ids only).
    #[serde(default)]
    pub agent_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tombstone: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// Shard's additive status fields (docs/PROTOCOL-NOTES.md): commits on
    /// the branch not on the integration target, and the other way round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<u32>,
    /// Changed, staged or untracked paths in the worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty_files: Option<u32>,
    /// Whether the branch's tip is reachable from the integration target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<bool>,
    /// Whether a bound agent has a running process, and whether one is busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<bool>,
    /// With `include_diff` on `workspace.status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<WorkspaceDiff>,
}

/// The data of `workspace.create` and `workspace.attach`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLaunchResult {
    pub agent_id: String,
    pub session_id: String,
    pub workspace: WorkspaceDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceListResult {
    pub workspaces: Vec<WorkspaceSummary>,
}

/// The data of `workspace.status` and `workspace.retire`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceResult {
    pub workspace: WorkspaceDetail,
}

/// `error.data` of a retire that needs an explicit `delete_confirmed` retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmationRequired {
    /// Always `"confirmation_required"`.
    pub kind: String,
    pub workspace_id: String,
    pub reason: String,
    pub confirmation_disposition: BranchDisposition,
}

/// `workspace_created`, `workspace_retired` and `workspace_updated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceEvent {
    pub workspace: WorkspaceSummary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceAttached {
    pub workspace: WorkspaceSummary,
    pub agent_id: String,
    pub session_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceConflict {
    pub workspace: WorkspaceSummary,
    /// Sanitized: no paths, no git output.
    pub reason: String,
}
