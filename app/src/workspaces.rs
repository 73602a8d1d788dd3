//! Workspaces in the page (docs/WORKSPACES.md): which repository and which
//! workspace each agent works in (the agent list groups by them), and the
//! `workspace.*` commands the new-agent form and the workspace panel send.
//!
//! An agent belongs to the workspace whose worktree holds its `cwd`, and to
//! the repository whose main checkout holds it; both are known only from
//! the workspaces the daemon reported (`repository_cwd` is the one
//! repository path a workspace projection carries, PROTOCOL.md §10.1a).

use std::collections::{BTreeMap, BTreeSet};

use leptos::prelude::*;
use serde_json::Value;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::types::AgentInfo;
use shard_protocol::workspace::{
    BranchDisposition, WorkspaceAction, WorkspaceAttach, WorkspaceCreate, WorkspaceDetail,
    WorkspaceLaunch, WorkspaceList, WorkspaceListResult, WorkspacePreview, WorkspaceRetire,
    WorkspaceStatus, WorkspaceSummary,
};

use crate::kept::Kept;
use crate::link::{Link, Request};
use crate::roster::{NewAgent, given};
pub use crate::workspace_action::Action;

/// Why the last retirement of the workspace on screen did not happen.
#[derive(Debug, Clone, PartialEq)]
pub enum RetireProblem {
    /// Refused (busy, live, dirty, missing authority…): the daemon's words.
    Refused(String),
    /// The branch is not proven merged: deleting it needs the user's yes.
    Confirm { workspace_id: String, reason: String },
}

/// Where the panel's action stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Acting {
    /// The dry run is on its way.
    Previewing(Action),
    /// What the action would do, waiting for the person's yes (decoded by
    /// the panel that shows it).
    Preview(Action, Kept<WorkspacePreview>),
    /// The action is on its way.
    Doing(Action),
    /// What it did, in the daemon's words.
    Done(String),
    /// Why it will not, in the daemon's words.
    Refused(String),
}

/// Whether `path` is `root` or inside it.
pub fn within(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/'))
}

/// The workspace whose worktree holds `cwd` on `node` (`None`: the hub),
/// the deepest, should worktrees ever nest. A path names a folder of one
/// machine: a node's agent is never in the hub's workspace of the same
/// path, nor the other way round.
pub fn workspace_of<'a>(
    workspaces: &'a BTreeMap<String, WorkspaceSummary>,
    cwd: &str,
    node: Option<&str>,
) -> Option<&'a WorkspaceSummary> {
    workspaces
        .values()
        .filter(|workspace| workspace.node.as_deref() == node && within(cwd, &workspace.cwd))
        .max_by_key(|workspace| workspace.cwd.len())
}

/// Where a repository is: its node (`None`: the hub), and its path there.
type Place<'a> = (Option<&'a str>, &'a str);

/// A heading in the agent list, or an agent under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// A repository (its main checkout's path, and its node; `None`: the
    /// hub's): its agents follow.
    Repository(String, Option<String>),
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
            Self::Repository(path, None) => format!("repository:{path}"),
            Self::Repository(path, Some(node)) => format!("repository:{path}@{node}"),
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
    // Each repository by (node, path): the hub's first, then each node's.
    let repositories: BTreeSet<Place<'_>> =
        crate::order::set_of(workspaces.values().filter_map(|workspace| {
            let path = workspace.repository_cwd.as_deref()?;
            Some((workspace.node.as_deref(), path))
        }));
    let repository_of = |cwd: &str, node: Option<&str>| {
        let theirs = repositories.iter().copied().filter(|(on, _)| *on == node);
        theirs.filter(|(_, root)| within(cwd, root)).max_by_key(|(_, root)| root.len())
    };
    // Each agent's group: (repository, workspace).
    let mut grouped: BTreeMap<(Option<Place<'_>>, Option<&str>), Vec<String>> = BTreeMap::new();
    for id in order {
        let Some(info) = agent(id) else { continue };
        let node = info.node.as_deref();
        let key = match workspace_of(workspaces, &info.cwd, node) {
            Some(workspace) => {
                let repository = workspace.repository_cwd.as_deref().map(|path| (node, path));
                (repository, Some(workspace.workspace_id.as_str()))
            }
            None => (repository_of(&info.cwd, node), None),
        };
        grouped.entry(key).or_default().push(id.clone());
    }
    let mut sorted: Vec<&WorkspaceSummary> = workspaces.values().collect();
    crate::order::sort_by_rank(&mut sorted, |workspace| {
        (workspace.created_at, workspace.workspace_id.clone())
    });
    let mut rows = Vec::new();
    for &(node, path) in &repositories {
        rows.push(Row::Repository(path.to_owned(), node.map(str::to_owned)));
        let mut take = |key| {
            grouped.remove(&key).unwrap_or_default().into_iter().map(Row::Agent).collect::<Vec<_>>()
        };
        rows.extend(take((Some((node, path)), None)));
        let here = |w: &&&WorkspaceSummary| {
            w.node.as_deref() == node && w.repository_cwd.as_deref() == Some(path)
        };
        for workspace in sorted.iter().filter(here) {
            let agents = take((Some((node, path)), Some(workspace.workspace_id.as_str())));
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
    let rest: BTreeSet<String> = crate::order::set_of(grouped.into_values().flatten());
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
                    (Row::Repository(..), Row::Workspace(_)) => false,
                    (Row::Repository(..) | Row::Elsewhere, _) => true,
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

/// What the new-agent form asks of a workspace: its agent (whose `cwd` is
/// the repository), and the branch and base of its worktree.
pub struct NewWorkspace<'a> {
    pub agent: NewAgent<'a>,
    pub branch: &'a str,
    pub base: &'a str,
}

/// The workspaces slice: every workspace the page knows, and the panel of
/// the one on screen.
#[derive(Clone, Copy)]
pub struct Workspaces {
    /// Every workspace the page knows, by id (PROTOCOL.md §10.1a).
    pub all: RwSignal<BTreeMap<String, WorkspaceSummary>>,
    /// The latest status of the workspace on screen (decoded by the panel
    /// that shows it).
    pub detail: RwSignal<Option<Kept<WorkspaceDetail>>>,
    /// Whether the workspace panel shows the diff (its status then asks
    /// for it).
    pub diff: RwSignal<bool>,
    pub retire_problem: RwSignal<Option<RetireProblem>>,
    /// Whether the daemon offers commit, merge and push (its `hello`).
    pub actions: RwSignal<bool>,
    /// The panel's action, from its preview to its result.
    pub acting: RwSignal<Option<Acting>>,
    link: Link,
}

impl Workspaces {
    pub fn new(link: Link) -> Self {
        Self {
            all: RwSignal::new(BTreeMap::new()),
            detail: RwSignal::new(None),
            diff: RwSignal::new(false),
            retire_problem: RwSignal::new(None),
            actions: RwSignal::new(false),
            acting: RwSignal::new(None),
            link,
        }
    }

    /// Asks what `action` would do to `workspace_id` (a dry run).
    pub fn preview(&self, workspace_id: &str, action: Action) {
        let request = WorkspaceAction {
            workspace_id: workspace_id.to_owned(),
            dry_run: Some(true),
            ..WorkspaceAction::default()
        };
        self.send_action(action, request, Acting::Previewing(action));
    }

    /// Does what the preview with `fingerprint` showed (a commit with
    /// `message`).
    pub fn act(&self, workspace_id: &str, action: Action, fingerprint: String, message: String) {
        let request = WorkspaceAction {
            workspace_id: workspace_id.to_owned(),
            fingerprint: Some(fingerprint),
            message: (action == Action::Commit).then_some(message),
            ..WorkspaceAction::default()
        };
        self.send_action(action, request, Acting::Doing(action));
    }

    fn send_action(&self, action: Action, request: WorkspaceAction, stage: Acting) {
        let asked = Request::WorkspaceAction {
            workspace_id: request.workspace_id.clone(),
            action,
            dry_run: request.dry_run == Some(true),
        };
        let message = match action {
            Action::Commit => ClientMessage::WorkspaceCommit(request),
            Action::Merge => ClientMessage::WorkspaceMerge(request),
            Action::Push => ClientMessage::WorkspacePush(request),
        };
        if self.link.send(message, None, asked) {
            self.acting.set(Some(stage));
        }
    }

    /// Every workspace, retired ones too: their agents are still listed.
    pub fn list(&self) {
        let list = WorkspaceList { include_retired: Some(true), ..WorkspaceList::default() };
        self.link.send(ClientMessage::WorkspaceList(list), None, Request::Workspaces);
    }

    /// A new worktree with a fresh agent in it; the agent is opened once
    /// the daemon made it.
    pub fn create(&self, NewWorkspace { agent, branch, base }: NewWorkspace<'_>) {
        let create = WorkspaceCreate {
            cwd: agent.cwd.trim().to_owned(),
            label: given(agent.name),
            branch: given(branch),
            base_ref: given(base),
            launch: WorkspaceLaunch {
                name: given(agent.name),
                model: given(agent.model),
                mode: given(agent.mode),
                runtime: given(agent.runtime),
                sandbox: agent.sandbox,
                ..WorkspaceLaunch::default()
            },
            node: given(agent.node),
            ..WorkspaceCreate::default()
        };
        self.link.send(ClientMessage::WorkspaceCreate(create), None, Request::WorkspaceLaunch);
    }

    /// A fresh agent in an existing workspace.
    pub fn attach(&self, workspace_id: &str) {
        let attach = WorkspaceAttach {
            version: None,
            workspace_id: workspace_id.to_owned(),
            launch: WorkspaceLaunch::default(),
        };
        self.link.send(ClientMessage::WorkspaceAttach(attach), None, Request::WorkspaceLaunch);
    }

    /// The workspace whose worktree holds `cwd` on `node` (tracked).
    pub fn of_place(&self, cwd: &str, node: Option<&str>) -> Option<WorkspaceSummary> {
        self.all.with(|workspaces| workspace_of(workspaces, cwd, node).cloned())
    }

    /// Asks for the status of `workspace_id` (with its diff while the
    /// panel's diff is open).
    pub fn status(&self, workspace_id: &str) {
        let status = WorkspaceStatus {
            version: None,
            workspace_id: workspace_id.to_owned(),
            include_diff: self.diff.get_untracked().then_some(true),
        };
        let request = Request::WorkspaceStatus { workspace_id: workspace_id.to_owned() };
        self.link.send(ClientMessage::WorkspaceStatus(status), None, request);
    }

    pub fn retire(&self, workspace_id: &str, disposition: BranchDisposition) {
        self.retire_problem.set(None);
        let retire = WorkspaceRetire {
            version: None,
            workspace_id: workspace_id.to_owned(),
            branch_disposition: Some(disposition),
        };
        let request = Request::WorkspaceRetire { workspace_id: workspace_id.to_owned() };
        self.link.send(ClientMessage::WorkspaceRetire(retire), None, request);
    }

    /// Records what the daemon said of a workspace.
    fn upsert(&self, workspace: WorkspaceSummary) {
        self.all.update(|workspaces| {
            workspaces.insert(workspace.workspace_id.clone(), workspace);
        });
    }

    /// A workspace event: the page's record of it follows, and the panel
    /// asks for a fresh status when it is the workspace on screen
    /// (`shown`): a retirement or a conflict seen from another tab shows
    /// here too.
    pub fn changed(&self, workspace: WorkspaceSummary, shown: Option<&str>) {
        let id = workspace.workspace_id.clone();
        self.upsert(workspace);
        if shown == Some(id.as_str()) {
            self.status(&id);
        }
    }

    /// The answer to a `workspace.*` request; `shown` tells the workspace
    /// on screen (once what the answer said is recorded). A launch answers
    /// with the agent to open.
    /// The answer to a workspace launch: its agent, or why not.
    pub fn launched(&self, response: &Response) -> Result<String, String> {
        // Of the `WorkspaceLaunchResult`, the agent and the summary: the
        // detail's state and diff are the workspace panel's to decode.
        let data = response
            .outcome
            .as_ref()
            .map_err(|error| format!("Could not make the workspace: {}", error.message))?;
        let data = data.as_ref().unwrap_or(&Value::Null);
        let summary =
            shard_protocol::decode::from_value::<WorkspaceSummary>(data["workspace"].clone());
        match (data["agent_id"].as_str(), summary) {
            (Some(agent_id), Ok(summary)) => {
                self.upsert(summary);
                Ok(agent_id.to_owned())
            }
            _ => Err("Could not make the workspace: the daemon's answer said nothing.".to_owned()),
        }
    }

    pub fn answered(
        &self,
        request: Request,
        response: Response,
        shown: impl Fn() -> Option<String>,
    ) -> Option<String> {
        match request {
            Request::Workspaces => {
                if let Ok(WorkspaceListResult { workspaces }) = response.data() {
                    self.all.set(crate::order::map_of(
                        workspaces
                            .into_iter()
                            .map(|workspace| (workspace.workspace_id.clone(), workspace)),
                    ));
                }
            }
            Request::WorkspaceStatus { workspace_id } => match response.outcome {
                Ok(data) => {
                    self.read(&data.unwrap_or_default()["workspace"], &workspace_id, &shown)
                }
                Err(error) => {
                    self.link.tell(format!("Could not read the workspace: {}", error.message))
                }
            },
            Request::WorkspaceRetire { workspace_id } => match response.outcome {
                Ok(data) => {
                    self.retire_problem.set(None);
                    self.read(&data.unwrap_or_default()["workspace"], &workspace_id, &shown);
                }
                Err(error) => {
                    let kind = error.data.as_ref().and_then(|data| data["kind"].as_str());
                    let problem = match kind {
                        Some("confirmation_required") => {
                            RetireProblem::Confirm { workspace_id, reason: error.message }
                        }
                        _ => RetireProblem::Refused(error.message),
                    };
                    self.retire_problem.set(Some(problem));
                }
            },
            Request::WorkspaceAction { workspace_id, action, dry_run } => {
                // Only the workspace still on screen shows what came of it.
                if shown().as_deref() != Some(workspace_id.as_str()) {
                    return None;
                }
                let stage = match response.outcome {
                    Ok(data) if dry_run => {
                        Acting::Preview(action, Kept::new(data.unwrap_or_default()))
                    }
                    // WorkspaceActed: what it did, and the workspace after.
                    Ok(data) => {
                        let data = data.unwrap_or_default();
                        self.read(&data["workspace"], &workspace_id, &shown);
                        match data["summary"].as_str() {
                            Some(summary) => Acting::Done(summary.to_owned()),
                            None => Acting::Refused("The daemon's answer said nothing.".to_owned()),
                        }
                    }
                    Err(error) => Acting::Refused(error.message),
                };
                self.acting.set(Some(stage));
            }
            _ => {}
        }
        None
    }

    /// A status of `workspace_id`: recorded, and shown if it is the
    /// workspace on screen.
    fn read(&self, workspace: &Value, workspace_id: &str, shown: &impl Fn() -> Option<String>) {
        // A detail is its summary's fields and more (flattened).
        match shard_protocol::decode::from_value::<WorkspaceSummary>(workspace.clone()) {
            Ok(summary) => self.upsert(summary),
            Err(error) => {
                self.link.tell(format!("Could not read the workspace: {error}"));
                return;
            }
        }
        if shown().as_deref() == Some(workspace_id) {
            self.detail.set(Some(Kept::new(workspace.clone())));
        }
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

    fn by_id<const N: usize>(
        workspaces: [WorkspaceSummary; N],
    ) -> BTreeMap<String, WorkspaceSummary> {
        workspaces
            .into_iter()
            .map(|workspace| (workspace.workspace_id.clone(), workspace))
            .collect()
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

        let workspaces = by_id([
            workspace("ws-a", "/home/.shard/worktrees/ws-a", "/src/app", "active"),
            workspace("ws-empty", "/home/.shard/worktrees/ws-empty", "/src/app", "active"),
            workspace("ws-gone", "/home/.shard/worktrees/ws-gone", "/src/app", "retired"),
            workspace("ws-old", "/home/.shard/worktrees/ws-old", "/src/app", "retired"),
        ]);
        let agent_row = |id: &str| Row::Agent(id.to_owned());
        assert_eq!(
            rows(&list, &order, &workspaces),
            [
                Row::Repository("/src/app".to_owned(), None),
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
                Row::Repository("/src/app".to_owned(), None),
                Row::Workspace("ws-a".to_owned()),
                agent_row("deep"),
                Row::Elsewhere,
                agent_row("other"),
            ],
            "filtered: only the headings of what matched"
        );
        assert_eq!(
            without_empty_groups(rows(&list, &only(&["main-1"]), &workspaces)),
            [Row::Repository("/src/app".to_owned(), None), agent_row("main-1"),]
        );
        assert_eq!(
            workspace_of(&workspaces, "/home/.shard/worktrees/ws-a/x", None)
                .map(|w| w.workspace_id.as_str()),
            Some("ws-a")
        );
        assert!(workspace_of(&workspaces, "/home/.shard/worktrees/ws-ab", None).is_none());
    }

    #[test]
    fn a_nodes_agents_group_under_the_nodes_repositories_only() {
        let on_box = |mut info: AgentInfo| {
            info.agent_id.push_str("@box");
            info.node = Some("box".to_owned());
            info
        };
        // The same paths on the hub and on the node: two machines' folders.
        let list = vec![
            agent("here", "/src/app"),
            on_box(agent("there", "/src/app")),
            on_box(agent("ws-there", "/w/ws-b")),
            agent("lookalike", "/w/ws-b"),
        ];
        let order: Vec<String> = list.iter().map(|agent| agent.agent_id.clone()).collect();
        let mut theirs = workspace("ws-b@box", "/w/ws-b", "/src/app", "active");
        theirs.node = Some("box".to_owned());
        let workspaces = by_id([workspace("ws-a", "/w/ws-a", "/src/app", "active"), theirs]);
        let agent_row = |id: &str| Row::Agent(id.to_owned());
        assert_eq!(
            rows(&list, &order, &workspaces),
            [
                Row::Repository("/src/app".to_owned(), None),
                agent_row("here"),
                Row::Workspace("ws-a".to_owned()),
                Row::Repository("/src/app".to_owned(), Some("box".to_owned())),
                agent_row("there@box"),
                Row::Workspace("ws-b@box".to_owned()),
                agent_row("ws-there@box"),
                Row::Elsewhere,
                agent_row("lookalike"),
            ],
        );
        let key = |row: Row| row.key();
        assert_ne!(
            key(Row::Repository("/src/app".to_owned(), None)),
            key(Row::Repository("/src/app".to_owned(), Some("box".to_owned())))
        );
        assert!(workspace_of(&workspaces, "/w/ws-b", None).is_none(), "the hub has no ws-b");
    }
}
