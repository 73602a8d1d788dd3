//! Workspaces in the page (docs/WORKSPACES.md): which repository and which
//! workspace each agent works in (the agent list groups by them), and the
//! `workspace.*` commands the new-agent form and the workspace panel send.
//!
//! An agent belongs to the workspace whose worktree holds its `cwd`, and to
//! the repository whose main checkout holds it; both are known only from
//! the workspaces the daemon reported (`repository_cwd` is the one
//! repository path a workspace projection carries, PROTOCOL.md §10.1a).

#![cfg_attr(not(feature = "hydrate"), allow(dead_code))]

use std::collections::{BTreeMap, BTreeSet};

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::types::AgentInfo;
use shard_protocol::workspace::{
    BranchDisposition, WorkspaceAttach, WorkspaceCreate, WorkspaceLaunch, WorkspaceLaunchResult,
    WorkspaceList, WorkspaceListResult, WorkspaceResult, WorkspaceRetire, WorkspaceStatus,
    WorkspaceSummary,
};

use crate::state::{ClientState, Request};

/// Why the last retirement of the workspace on screen did not happen.
#[derive(Debug, Clone, PartialEq)]
pub enum RetireProblem {
    /// Refused (busy, live, dirty, missing authority…): the daemon's words.
    Refused(String),
    /// The branch is not proven merged: deleting it needs the user's yes.
    Confirm { workspace_id: String, reason: String },
}

/// Whether `path` is `root` or inside it.
pub fn within(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}

/// The workspace whose worktree holds `cwd` (the deepest, should worktrees
/// ever nest).
pub fn workspace_of<'a>(
    workspaces: &'a BTreeMap<String, WorkspaceSummary>,
    cwd: &str,
) -> Option<&'a WorkspaceSummary> {
    workspaces
        .values()
        .filter(|workspace| within(cwd, &workspace.cwd))
        .max_by_key(|workspace| workspace.cwd.len())
}

/// A heading in the agent list, or an agent under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// A repository (its main checkout's path): its agents follow.
    Repository(String),
    /// A workspace (its id): its agents follow.
    Workspace(String),
    /// Agents in no known repository, after the repositories.
    Elsewhere,
    Agent(String),
}

impl Row {
    /// A key unique in the list, stable while the row exists.
    pub fn key(&self) -> String {
        match self {
            Self::Repository(path) => format!("repository:{path}"),
            Self::Workspace(id) => format!("workspace:{id}"),
            Self::Elsewhere => "elsewhere".to_owned(),
            Self::Agent(id) => format!("agent:{id}"),
        }
    }
}

/// The agent list's rows: each repository (by path) with the agents in its
/// main checkout, then each of its workspaces (oldest first) with theirs,
/// then the agents in no known repository. A workspace with no agent is
/// listed while it is not retired. Within a group, agents keep `order`
/// (the list's tree order). With no workspace known, there are no headings.
pub fn rows(
    list: &[AgentInfo],
    order: &[String],
    workspaces: &BTreeMap<String, WorkspaceSummary>,
) -> Vec<Row> {
    let agent = |id: &str| list.iter().find(|agent| agent.agent_id == id);
    if workspaces.is_empty() {
        return order.iter().cloned().map(Row::Agent).collect();
    }
    let repositories: BTreeSet<&str> =
        workspaces.values().filter_map(|workspace| workspace.repository_cwd.as_deref()).collect();
    let repository_of = |cwd: &str| {
        repositories.iter().copied().filter(|root| within(cwd, root)).max_by_key(|root| root.len())
    };
    // Each agent's group: (repository, workspace).
    let mut grouped: BTreeMap<(Option<&str>, Option<&str>), Vec<String>> = BTreeMap::new();
    for id in order {
        let Some(info) = agent(id) else { continue };
        let key = match workspace_of(workspaces, &info.cwd) {
            Some(workspace) => {
                (workspace.repository_cwd.as_deref(), Some(workspace.workspace_id.as_str()))
            }
            None => (repository_of(&info.cwd), None),
        };
        grouped.entry(key).or_default().push(id.clone());
    }
    let mut sorted: Vec<&WorkspaceSummary> = workspaces.values().collect();
    crate::order::sort_by_rank(&mut sorted, |workspace| {
        (workspace.created_at, workspace.workspace_id.clone())
    });
    let mut rows = Vec::new();
    for repository in &repositories {
        rows.push(Row::Repository((*repository).to_owned()));
        let mut take = |key| {
            grouped.remove(&key).unwrap_or_default().into_iter().map(Row::Agent).collect::<Vec<_>>()
        };
        rows.extend(take((Some(*repository), None)));
        for workspace in sorted.iter().filter(|w| w.repository_cwd.as_deref() == Some(repository)) {
            let agents = take((Some(*repository), Some(workspace.workspace_id.as_str())));
            let retired =
                workspace.lifecycle == shard_protocol::workspace::WorkspaceLifecycle::Retired;
            if agents.is_empty() && retired {
                continue;
            }
            rows.push(Row::Workspace(workspace.workspace_id.clone()));
            rows.extend(agents);
        }
    }
    // What is left: agents in no known repository (or in a workspace whose
    // projection named none), in list order.
    let rest: BTreeSet<String> = grouped.into_values().flatten().collect();
    if !rest.is_empty() {
        rows.push(Row::Elsewhere);
        rows.extend(order.iter().filter(|id| rest.contains(*id)).cloned().map(Row::Agent));
    }
    rows
}

/// `rows` without the headings that head no agent (while the list is
/// filtered, only the groups of what matched are worth a heading).
pub fn without_empty_groups(rows: Vec<Row>) -> Vec<Row> {
    let mut kept: Vec<Row> = Vec::with_capacity(rows.len());
    for row in rows {
        if !matches!(row, Row::Agent(_)) {
            // A heading directly after a heading of its own level or a
            // lower one heads nothing: drop those before it.
            while let Some(last) = kept.last() {
                let empty = match (last, &row) {
                    (Row::Agent(_), _) => false,
                    (Row::Workspace(_), _) => true,
                    (Row::Repository(_), Row::Workspace(_)) => false,
                    (Row::Repository(_) | Row::Elsewhere, _) => true,
                };
                if !empty {
                    break;
                }
                kept.pop();
            }
        }
        kept.push(row);
    }
    while kept.last().is_some_and(|last| !matches!(last, Row::Agent(_))) {
        kept.pop();
    }
    kept
}

/// `None` for an empty field.
fn given(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// What the new-agent form asks of a workspace.
pub struct NewWorkspace<'a> {
    pub cwd: &'a str,
    pub name: &'a str,
    pub branch: &'a str,
    pub base: &'a str,
    pub model: &'a str,
    pub mode: &'a str,
}

impl ClientState {
    /// Every workspace, retired ones too: their agents are still listed.
    pub fn list_workspaces(&self) {
        let list = WorkspaceList { include_retired: Some(true), ..WorkspaceList::default() };
        self.send(ClientMessage::WorkspaceList(list), None, Request::Workspaces);
    }

    /// A new worktree with a fresh agent in it; the agent is opened once
    /// the daemon made it.
    pub fn create_workspace(&self, form: NewWorkspace<'_>) {
        let create = WorkspaceCreate {
            cwd: form.cwd.trim().to_owned(),
            label: given(form.name),
            branch: given(form.branch),
            base_ref: given(form.base),
            launch: WorkspaceLaunch {
                name: given(form.name),
                model: given(form.model),
                mode: given(form.mode),
                ..WorkspaceLaunch::default()
            },
            ..WorkspaceCreate::default()
        };
        self.send(ClientMessage::WorkspaceCreate(create), None, Request::WorkspaceLaunch);
    }

    /// A fresh agent in an existing workspace.
    pub fn attach_workspace(&self, workspace_id: &str) {
        let attach = WorkspaceAttach {
            version: None,
            workspace_id: workspace_id.to_owned(),
            launch: WorkspaceLaunch::default(),
        };
        self.send(ClientMessage::WorkspaceAttach(attach), None, Request::WorkspaceLaunch);
    }

    /// The workspace of the agent on screen, if it works in one.
    pub fn shown_workspace(&self) -> Option<WorkspaceSummary> {
        let selected = self.selected.get()?;
        let cwd = self.agents.with(|agents| {
            agents.iter().find(|agent| agent.agent_id == selected).map(|agent| agent.cwd.clone())
        })?;
        self.workspaces.with(|workspaces| workspace_of(workspaces, &cwd).cloned())
    }

    /// Asks for the status of `workspace_id` (with its diff while the
    /// panel's diff is open).
    pub fn workspace_status(&self, workspace_id: &str) {
        let status = WorkspaceStatus {
            version: None,
            workspace_id: workspace_id.to_owned(),
            include_diff: self.workspace_diff.get_untracked().then_some(true),
        };
        let request = Request::WorkspaceStatus { workspace_id: workspace_id.to_owned() };
        self.send(ClientMessage::WorkspaceStatus(status), None, request);
    }

    pub fn retire_workspace(&self, workspace_id: &str, disposition: BranchDisposition) {
        self.retire_problem.set(None);
        let retire = WorkspaceRetire {
            version: None,
            workspace_id: workspace_id.to_owned(),
            branch_disposition: Some(disposition),
        };
        let request = Request::WorkspaceRetire { workspace_id: workspace_id.to_owned() };
        self.send(ClientMessage::WorkspaceRetire(retire), None, request);
    }

    /// Records what the daemon said of a workspace.
    pub fn upsert_workspace(&self, workspace: WorkspaceSummary) {
        self.workspaces.update(|workspaces| {
            workspaces.insert(workspace.workspace_id.clone(), workspace);
        });
    }
}

/// A workspace event: the page's record of it follows, and the panel asks
/// for a fresh status when it is the workspace on screen (a retirement or
/// a conflict seen from another tab shows here too).
pub fn changed(state: &ClientState, workspace: WorkspaceSummary) {
    let shown = untrack(|| state.shown_workspace())
        .is_some_and(|shown| shown.workspace_id == workspace.workspace_id);
    let id = workspace.workspace_id.clone();
    state.upsert_workspace(workspace);
    if shown {
        state.workspace_status(&id);
    }
}

/// The answer to a `workspace.*` request.
pub fn answered(state: &ClientState, request: Request, response: Response) {
    let shown = || untrack(|| state.shown_workspace()).map(|shown| shown.workspace_id);
    match request {
        Request::Workspaces => {
            if let Ok(WorkspaceListResult { workspaces }) = response.data() {
                state.workspaces.set(
                    workspaces
                        .into_iter()
                        .map(|workspace| (workspace.workspace_id.clone(), workspace))
                        .collect(),
                );
            }
        }
        Request::WorkspaceLaunch => match response.data::<WorkspaceLaunchResult>() {
            Ok(launched) => {
                state.notice.set(None);
                state.upsert_workspace(launched.workspace.summary);
                state.select(Some(launched.agent_id));
            }
            Err(error) => {
                state.notice.set(Some(format!("Could not make the workspace: {}", error.message)))
            }
        },
        Request::WorkspaceStatus { workspace_id } => match response.data::<WorkspaceResult>() {
            Ok(WorkspaceResult { workspace }) => {
                state.upsert_workspace(workspace.summary.clone());
                if shown().as_deref() == Some(workspace_id.as_str()) {
                    state.workspace.set(Some(workspace));
                }
            }
            Err(error) => {
                state.notice.set(Some(format!("Could not read the workspace: {}", error.message)))
            }
        },
        Request::WorkspaceRetire { workspace_id } => match response.data::<WorkspaceResult>() {
            Ok(WorkspaceResult { workspace }) => {
                state.retire_problem.set(None);
                state.upsert_workspace(workspace.summary.clone());
                if shown().as_deref() == Some(workspace_id.as_str()) {
                    state.workspace.set(Some(workspace));
                }
            }
            Err(error) => {
                let kind = error.data.as_ref().and_then(|data| data["kind"].as_str());
                let problem = match kind {
                    Some("confirmation_required") => {
                        RetireProblem::Confirm { workspace_id, reason: error.message }
                    }
                    _ => RetireProblem::Refused(error.message),
                };
                state.retire_problem.set(Some(problem));
            }
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent(agent_id: &str, cwd: &str) -> AgentInfo {
        serde_json::from_value(json!({
            "agent_id": agent_id, "cwd": cwd, "status": "idle", "runtime_state": "stopped",
            "created_at": 0,
        }))
        .expect("agent info")
    }

    fn workspace(id: &str, cwd: &str, repository: &str, lifecycle: &str) -> WorkspaceSummary {
        serde_json::from_value(json!({
            "workspace_id": id, "cwd": cwd, "repository_cwd": repository,
            "lifecycle": lifecycle, "created_at": id.len(), "agent_count": 0,
        }))
        .expect("workspace")
    }

    #[test]
    fn agents_group_under_their_repository_and_workspace() {
        let list = vec![
            agent("main-1", "/src/app"),
            agent("ws-agent", "/home/.shard/worktrees/ws-a"),
            agent("deep", "/home/.shard/worktrees/ws-a/server"),
            agent("sub", "/src/app/docs"),
            agent("other", "/tmp/scratch"),
            agent("lookalike", "/src/application"),
            agent("old", "/home/.shard/worktrees/ws-old"),
        ];
        let order: Vec<String> = list.iter().map(|agent| agent.agent_id.clone()).collect();
        let none = BTreeMap::new();
        assert_eq!(rows(&list, &order, &none).len(), list.len(), "no headings without workspaces");

        let workspaces: BTreeMap<String, WorkspaceSummary> = [
            workspace("ws-a", "/home/.shard/worktrees/ws-a", "/src/app", "active"),
            workspace("ws-empty", "/home/.shard/worktrees/ws-empty", "/src/app", "active"),
            workspace("ws-gone", "/home/.shard/worktrees/ws-gone", "/src/app", "retired"),
            workspace("ws-old", "/home/.shard/worktrees/ws-old", "/src/app", "retired"),
        ]
        .into_iter()
        .map(|workspace| (workspace.workspace_id.clone(), workspace))
        .collect();
        let agent_row = |id: &str| Row::Agent(id.to_owned());
        assert_eq!(
            rows(&list, &order, &workspaces),
            [
                Row::Repository("/src/app".to_owned()),
                agent_row("main-1"),
                agent_row("sub"),
                Row::Workspace("ws-a".to_owned()),
                agent_row("ws-agent"),
                agent_row("deep"),
                Row::Workspace("ws-old".to_owned()),
                agent_row("old"),
                Row::Workspace("ws-empty".to_owned()),
                Row::Elsewhere,
                agent_row("other"),
                agent_row("lookalike"),
            ],
            "a retired workspace shows only while it has agents; a path prefix is not a parent"
        );
        let only =
            |ids: &[&str]| -> Vec<String> { ids.iter().map(|id| (*id).to_owned()).collect() };
        assert_eq!(
            without_empty_groups(rows(&list, &only(&["deep", "other"]), &workspaces)),
            [
                Row::Repository("/src/app".to_owned()),
                Row::Workspace("ws-a".to_owned()),
                agent_row("deep"),
                Row::Elsewhere,
                agent_row("other"),
            ],
            "filtered: only the headings of what matched"
        );
        assert_eq!(
            without_empty_groups(rows(&list, &only(&["main-1"]), &workspaces)),
            [Row::Repository("/src/app".to_owned()), agent_row("main-1"),]
        );
        assert_eq!(
            workspace_of(&workspaces, "/home/.shard/worktrees/ws-a/x")
                .map(|w| w.workspace_id.as_str()),
            Some("ws-a")
        );
        assert!(workspace_of(&workspaces, "/home/.shard/worktrees/ws-ab").is_none());
    }
}
