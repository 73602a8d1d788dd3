//! Workspaces on screen (docs/WORKSPACES.md): the agent list's headings for
//! repositories and workspaces, and the panel of the workspace the agent on
//! screen works in: its status, its diff against the integration target,
//! commit, merge and push (each previewed, then confirmed), and retirement
//! with the daemon's confirmation when it asks for one.

use leptos::html;
use leptos::prelude::*;
use shard_protocol::display::shown;
use shard_protocol::types::RenderDescriptor;
use shard_protocol::workspace::{
    BranchDisposition, ChangedPath, MergeKind, WorkspaceDetail, WorkspaceDiff, WorkspaceLifecycle,
    WorkspacePreview, WorkspaceSummary,
};

use super::state;
use crate::kept::Kept;
use crate::markdown::Ticked;
use crate::roster::Roster;
use crate::workspaces::{Acting, Action, RetireProblem, Row, Workspaces};

fn lifecycle_label(lifecycle: WorkspaceLifecycle) -> &'static str {
    match lifecycle {
        WorkspaceLifecycle::Active => "active",
        WorkspaceLifecycle::Retiring => "retiring",
        WorkspaceLifecycle::Retired => "retired",
        WorkspaceLifecycle::Conflict => "conflict",
        WorkspaceLifecycle::Unknown => "unknown",
    }
}

/// What a workspace is called: its label, else its branch, else its id.
fn title(workspace: &WorkspaceSummary) -> String {
    workspace
        .label
        .clone()
        .or_else(|| workspace.branch.clone())
        .unwrap_or_else(|| workspace.workspace_id.clone())
}

/// The last part of a path, for a repository's heading.
fn base_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

/// A heading row of the agent list.
#[component]
pub fn Heading(row: Row) -> impl IntoView {
    match row {
        Row::Repository(path, node) => {
            let machine = node
                .clone()
                .map(|node| view! { <span class="group-node" title="the machine">{node}</span> });
            view! {
                <li class="group repository" data-repository=path.clone() data-node=node>
                    <span class="group-name">{base_name(&path).to_owned()}</span>
                    {machine}
                    <span class="group-path" title="the repository">{path.clone()}</span>
                </li>
            }
            .into_any()
        }
        Row::Workspace(workspace_id) => {
            view! { <WorkspaceHeading workspace_id=workspace_id/> }.into_any()
        }
        Row::Elsewhere => view! {
            <li class="group elsewhere"><span class="group-name">"Elsewhere"</span></li>
        }
        .into_any(),
        Row::Agent(_) => ().into_any(),
    }
}

#[component]
fn WorkspaceHeading(workspace_id: String) -> impl IntoView {
    let workspaces = state().workspaces;
    let summary = {
        let workspaces = workspaces.all;
        let workspace_id = workspace_id.clone();
        Memo::new(move |_| workspaces.with(|workspaces| workspaces.get(&workspace_id).cloned()))
    };
    let read = move |field: fn(&WorkspaceSummary) -> String| {
        move || summary.with(|summary| summary.as_ref().map(field).unwrap_or_default())
    };
    let lifecycle = read(|summary| lifecycle_label(summary.lifecycle).to_owned());
    let open = Memo::new(move |_| {
        summary.with(|summary| {
            summary.as_ref().is_some_and(|summary| summary.lifecycle != WorkspaceLifecycle::Retired)
        })
    });
    let name = read(title);
    let attach = {
        let workspace_id = workspace_id.clone();
        move |_| workspaces.attach(&workspace_id)
    };
    view! {
        <li class="group workspace" data-workspace-id=workspace_id.clone() data-lifecycle=lifecycle>
            <span class="group-name">{name}</span>
            <span class="branch" title="its branch">{read(|summary| format!("⎇ {}", summary.branch.clone().unwrap_or_default()))}</span>
            <Show when=move || lifecycle() != "active">
                <span class="badge lifecycle">{lifecycle}</span>
            </Show>
            <Show when=move || open.get()>
                <button class="link attach" on:click=attach.clone()
                    aria-label=move || format!("New agent in workspace {}", name())>"+ agent"</button>
            </Show>
        </li>
    }
}

/// "1 ahead, 0 behind · 2 changed files · not merged · busy".
fn facts(detail: &WorkspaceDetail) -> String {
    let mut facts = Vec::new();
    if let (Some(ahead), Some(behind)) = (detail.state.ahead, detail.state.behind) {
        facts.push(format!("{ahead} ahead, {behind} behind"));
    }
    match detail.state.dirty_files {
        Some(0) => facts.push("no uncommitted changes".to_owned()),
        Some(1) => facts.push("1 uncommitted change".to_owned()),
        Some(count) => facts.push(format!("{count} uncommitted changes")),
        None => {}
    }
    match detail.state.merged {
        Some(true) if detail.state.ahead == Some(0) => {
            facts.push("no commits of its own".to_owned())
        }
        Some(true) => facts.push("merged".to_owned()),
        Some(false) => facts.push("not merged".to_owned()),
        None => {}
    }
    if detail.state.busy == Some(true) {
        facts.push("an agent is working".to_owned());
    } else if detail.state.live == Some(true) {
        facts.push("an agent is running".to_owned());
    }
    facts.join(" · ")
}

/// The workspace the agent on screen works in; nothing when it works in
/// none. It asks for a fresh status when it opens, and again whenever one
/// of the workspace's agents changes state (a turn that ended may have
/// changed files; a stopped agent no longer blocks retirement).
#[component]
pub fn WorkspacePanel() -> impl IntoView {
    let state = state();
    let any = Memo::new(move |_| state.shown_workspace().is_some());
    super::deferred(move || any.get(), workspace_body)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(workspace_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn workspace_body() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let shown = {
        let state = state.clone();
        Memo::new(move |_| state.shown_workspace())
    };
    let workspace_id = Memo::new(move |_| {
        shown.with(|shown| shown.as_ref().map(|shown| shown.workspace_id.clone()))
    });
    follow_status(state.roster, state.workspaces, shown, workspace_id);
    let workspaces = state.workspaces;
    let detail = Memo::new(move |_| {
        let id = workspace_id.get()?;
        let detail = workspaces.detail.with(|detail| detail.as_ref().map(Kept::decoded))?.ok()?;
        (detail.summary.workspace_id == id).then_some(detail)
    });
    let summary = Memo::new(move |_| {
        detail.with(|detail| detail.as_ref().map(|detail| detail.summary.clone())).or(shown.get())
    });
    let read = move |field: fn(&WorkspaceSummary) -> String| {
        move || summary.with(|summary| summary.as_ref().map(field).unwrap_or_default())
    };
    let lifecycle = read(|summary| lifecycle_label(summary.lifecycle).to_owned());
    let retired = move || lifecycle() == "retired";
    let refresh = move |_| {
        if let Some(id) = workspace_id.get_untracked() {
            workspaces.status(&id);
        }
    };
    // On a phone the diff and the actions fold under one button, so that
    // the panel leaves the screen to the transcript (the stylesheet shows
    // the button, and folds, only there).
    let unfolded = RwSignal::new(false);
    let unfold = move |_| unfolded.update(|open| *open = !*open);
    Ok(view! {
        <Show when=move || workspace_id.with(Option::is_some)>
            <section class="workspace-panel" aria-label="Workspace" data-lifecycle=lifecycle
                data-unfolded=move || unfolded.get().to_string()>
                <div class="workspace-head">
                    <span class="workspace-title">{read(|summary| format!("Workspace {}", title(summary)))}</span>
                    <span class="branch">{read(|summary| format!(
                        "⎇ {} → {}",
                        summary.branch.clone().unwrap_or_default(),
                        summary.integration_target.clone().unwrap_or_default()
                    ))}</span>
                    <Show when=move || lifecycle() != "active">
                        <span class="badge lifecycle">{lifecycle}</span>
                    </Show>
                    <button class="link" on:click=refresh>"Refresh"</button>
                </div>
                <p class="facts">{move || detail.with(|detail| detail.as_ref().map(facts))}</p>
                {move || detail.with(|detail| detail.as_ref().and_then(|detail| detail.state.conflict.clone()))
                    .map(|conflict| view! { <p class="conflict" role="status"><Ticked text=conflict/></p> })}
                <button type="button" class="unfold" hidden=retired on:click=unfold
                    aria-expanded=move || unfolded.get().to_string()>
                    {move || if unfolded.get() { "Fold the diff and actions" } else { "Diff, commit, merge…" }}
                </button>
                <div class="workspace-body" hidden=retired>
                    <DiffPanel workspace_id=workspace_id detail=detail summary=summary/>
                    <Show when=move || workspaces.actions.get()>
                        <ActionControls workspace_id=workspace_id summary=summary/>
                    </Show>
                    <RetireControls workspace_id=workspace_id/>
                </div>
                <Show when=retired>
                    <p class="hint">"Retired: its worktree is removed. Its agents' transcripts stay."</p>
                </Show>
            </section>
        </Show>
    }
    .into_any())
}

/// Keeps the panel's status current: another workspace on screen clears
/// what the last one showed and asks for its own; a change among its
/// agents asks again, unless one of them is working (the next change will).
fn follow_status(
    roster: Roster,
    workspaces: Workspaces,
    shown: Memo<Option<WorkspaceSummary>>,
    workspace_id: Memo<Option<String>>,
) {
    // The workspace's agents as they stand: a change asks for a status.
    let agents_now = Memo::new(move |_| {
        let cwd = shown.with(|shown| shown.as_ref().map(|shown| shown.cwd.clone()))?;
        Some(roster.agents.with(|agents| {
            agents
                .iter()
                .filter(|agent| crate::workspaces::within(&agent.cwd, &cwd))
                .map(|agent| (agent.agent_id.clone(), agent.status, agent.runtime_state))
                .collect::<Vec<_>>()
        }))
    });
    Effect::new(move |previous: Option<Option<String>>| {
        let id = workspace_id.get();
        let agents = agents_now.get();
        untrack(|| {
            let moved = previous.as_ref() != Some(&id);
            if moved {
                workspaces.retire_problem.set(None);
                workspaces.acting.set(None);
                if workspaces.detail.with(|detail| {
                    detail.as_ref().and_then(|detail| detail.field("workspace_id").as_str())
                        != id.as_deref()
                }) {
                    workspaces.detail.set(None);
                }
            }
            let working = agents.iter().flatten().any(|(_, status, _)| status.is_active());
            if let Some(id) = &id
                && (moved || !working)
            {
                workspaces.status(id);
            }
        });
        id
    });
}

/// The workspace's diff against its integration target, asked for (with
/// the status) only while it is open.
#[component]
fn DiffPanel(
    workspace_id: Memo<Option<String>>,
    detail: Memo<Option<WorkspaceDetail>>,
    summary: Memo<Option<WorkspaceSummary>>,
) -> impl IntoView {
    let workspaces = state().workspaces;
    let diff_element: NodeRef<html::Details> = NodeRef::new();
    let toggled = move |_| {
        let open = diff_element.get_untracked().is_some_and(|element| element.open());
        workspaces.diff.set(open);
        if let (true, Some(id)) = (open, workspace_id.get_untracked()) {
            workspaces.status(&id);
        }
    };
    let label = move || {
        summary.with(|summary| {
            summary.as_ref().map_or_else(String::new, |summary| {
                let target = summary.integration_target.clone().unwrap_or_default();
                format!("Diff against {target}")
            })
        })
    };
    view! {
        <details class="workspace-diff" node_ref=diff_element on:toggle=toggled>
            <summary>{label}</summary>
            {move || diff_view(detail.with(|detail| detail.as_ref().and_then(|detail| detail.state.diff.clone())))}
        </details>
    }
}

fn diff_view(diff: Option<WorkspaceDiff>) -> AnyView {
    match diff {
        None => view! { <p class="hint">"Loading the diff…"</p> }.into_any(),
        Some(diff) if diff.files.is_empty() => {
            view! { <p class="hint">"No changes yet."</p> }.into_any()
        }
        Some(diff) => {
            let truncated = diff.truncated;
            let files = diff
                .files
                .into_iter()
                .map(|file| match file.omitted {
                    // Listed, not read: a binary or very large file.
                    Some(why) => view! {
                        <div class="diff-omitted">
                            <code>{file.path}</code>
                            " · "
                            {why}
                        </div>
                    }
                    .into_any(),
                    None => super::tools::render_descriptor(RenderDescriptor::Diff {
                        path: file.path,
                        hunks: file.hunks,
                    }),
                })
                .collect_view();
            view! {
                {files}
                <Show when=move || truncated>
                    <p class="hint">"The diff is cut short here: it is too long to show whole."</p>
                </Show>
            }
            .into_any()
        }
    }
}

/// Commit, merge and push: each asks the daemon what it would do, shows
/// that for a yes (with the commit's message), then shows what it did or
/// why it would not, in the daemon's words.
#[component]
fn ActionControls(
    workspace_id: Memo<Option<String>>,
    summary: Memo<Option<WorkspaceSummary>>,
) -> impl IntoView {
    let workspaces = state().workspaces;
    let acting = workspaces.acting;
    let waiting = move || {
        acting.with(|stage| matches!(stage, Some(Acting::Previewing(_) | Acting::Doing(_))))
    };
    let label = move |action: Action| match action {
        Action::Merge => {
            let target = summary.with(|summary| {
                summary.as_ref().and_then(|summary| summary.integration_target.clone())
            });
            format!("Merge into {}…", target.unwrap_or_default())
        }
        _ => format!("{}…", action.verb()),
    };
    // One shape for the three buttons keeps the bundle small.
    let button = move |action: Action| {
        let start = move |_| {
            if let Some(id) = workspace_id.get_untracked() {
                workspaces.preview(&id, action);
            }
        };
        view! { <button on:click=start disabled=waiting>{move || label(action)}</button> }
    };
    let stage = move || {
        acting.get().map(|stage| {
            let (class, role, text) = match stage {
                Acting::Preview(action, preview) => match preview.decoded() {
                    Ok(preview) => {
                        return view! { <ActionPreview action=action preview=preview/> }.into_any();
                    }
                    Err(why) => ("action-error", "alert", why),
                },
                Acting::Previewing(_) => ("hint", "status", "Working out what it would do…".into()),
                Acting::Doing(action) => ("hint", "status", format!("{}…", action.verb())),
                Acting::Done(what) => ("action-result", "status", what),
                Acting::Refused(why) => ("action-error", "alert", why),
            };
            view! { <p class=class role=role><Ticked text=text/></p> }.into_any()
        })
    };
    view! {
        <div class="workspace-actions">
            {button(Action::Commit)}{button(Action::Merge)}{button(Action::Push)}
        </div>
        {stage}
    }
}

/// What an action would do, for a yes: the daemon's summary, the paths it
/// changes and those in conflict (git's `U`), and for a commit its message.
#[component]
fn ActionPreview(action: Action, preview: WorkspacePreview) -> impl IntoView {
    let workspaces = state().workspaces;
    let message = RwSignal::new(String::new());
    let conflict = preview.merge == Some(MergeKind::Conflict);
    let listed = u32::try_from(preview.files.len()).unwrap_or(u32::MAX);
    let mut summary = preview.summary;
    if preview.file_count > listed {
        summary.push_str(&format!(" The first {listed} are listed."));
    }
    let conflicts =
        preview.conflicts.into_iter().map(|path| ChangedPath { status: "U".to_owned(), path });
    let rows = preview
        .files
        .into_iter()
        .chain(conflicts)
        .map(|file| view! { <li><code>{file.status}</code>" "{shown(&file.path).text.into_owned()}</li> })
        .collect_view();
    let (workspace_id, fingerprint) = (preview.workspace_id, preview.fingerprint);
    let confirm = move |_: ()| {
        workspaces.act(&workspace_id, action, fingerprint.clone(), message.get_untracked());
    };
    let commit = action == Action::Commit;
    let unsaid = move || commit && message.with(|text| text.trim().is_empty());
    // The keyboard goes where the answer is: the message of a commit, else
    // the yes; Ctrl+Enter in the message commits.
    let field: NodeRef<leptos::html::Textarea> = NodeRef::new();
    let yes: NodeRef<leptos::html::Button> = NodeRef::new();
    Effect::new(move |_| {
        let _ = match commit {
            true => field.get().map(|field| field.focus()),
            false => yes.get().map(|yes| yes.focus()),
        };
    });
    let confirm_key = confirm.clone();
    let on_key = move |event: leptos::ev::KeyboardEvent| {
        if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) && !unsaid() {
            event.prevent_default();
            confirm_key(());
        }
    };
    view! {
        <div class="confirm action-preview" role="dialog" aria-label=action.verb()>
            <p><Ticked text=summary/></p>
            <ul class="paths">{rows}</ul>
            <textarea aria-label="Commit message" placeholder="What the commit does" hidden=!commit
                node_ref=field on:keydown=on_key
                on:input=move |event| message.set(event_target_value(&event))></textarea>
            <button class="primary" hidden=conflict node_ref=yes on:click=move |_| confirm(()) disabled=unsaid>{action.verb()}</button>
            <button on:click=move |_| workspaces.acting.set(None)>"Cancel"</button>
        </div>
    }
}

/// Retiring the workspace: what becomes of its branch, and the daemon's
/// refusal or its question when the branch is not proven merged.
#[component]
fn RetireControls(workspace_id: Memo<Option<String>>) -> impl IntoView {
    let workspaces = state().workspaces;
    let disposition = RwSignal::new(BranchDisposition::DeleteIfMerged);
    let retire = move |chosen: BranchDisposition| {
        if let Some(id) = workspace_id.get_untracked() {
            workspaces.retire(&id, chosen);
        }
    };
    let problem = workspaces.retire_problem;
    let problem_view = move || {
        problem.get().map(|shown| match shown {
            RetireProblem::Refused(why) => {
                view! { <p class="retire-error" role="alert"><Ticked text=why/></p> }.into_any()
            }
            RetireProblem::Confirm { reason, .. } => view! {
                <div class="confirm" role="alertdialog" aria-label="Delete the branch?">
                    <p><Ticked text=reason/></p>
                    <button class="danger" on:click=move |_| retire(BranchDisposition::DeleteConfirmed)>"Delete the branch anyway"</button>
                    <button on:click=move |_| retire(BranchDisposition::Keep)>"Keep the branch"</button>
                    <button on:click=move |_| problem.set(None)>"Cancel"</button>
                </div>
            }
            .into_any(),
        })
    };
    view! {
        <div class="retire">
            <label>"After retiring"
                <select aria-label="Branch after retiring" on:change=move |event| {
                    disposition.set(match event_target_value(&event).as_str() {
                        "keep" => BranchDisposition::Keep,
                        _ => BranchDisposition::DeleteIfMerged,
                    })
                }>
                    <option value="delete_if_merged">"delete the branch if merged"</option>
                    <option value="keep">"keep the branch"</option>
                </select>
            </label>
            <button class="danger" on:click=move |_| retire(disposition.get_untracked())>"Retire workspace"</button>
        </div>
        {problem_view}
    }
}
