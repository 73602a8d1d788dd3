//! The form that creates an agent ("New agent"): what it holds as the
//! user types ([`NewAgent`]), the checks made before it asks, and its
//! fields. Only its `<details>` is in the first load; the form itself is a
//! WASM chunk fetched the first time it opens (`create_form`).

use std::collections::BTreeSet;

use leptos::prelude::*;
use shard_protocol::node::NodeState;
use shard_protocol::types::AgentInfo;

use super::state;
use crate::link::Connection;
use crate::markdown::Ticked;
use crate::roster::{self, Creation, Roster};
use crate::state::ClientState;
use crate::workspaces::NewWorkspace;

/// What the new-agent form holds as the user types.
#[derive(Clone, Copy)]
struct NewAgent {
    cwd: RwSignal<String>,
    name: RwSignal<String>,
    model: RwSignal<String>,
    mode: RwSignal<String>,
    /// Empty: Shard's own agent.
    runtime: RwSignal<String>,
    in_workspace: RwSignal<bool>,
    branch: RwSignal<String>,
    base: RwSignal<String>,
    /// Narrower than config.toml's sandbox; empty: as configured.
    sandbox: RwSignal<String>,
    network: RwSignal<String>,
    /// The node it runs on; empty: this machine.
    node: RwSignal<String>,
}

impl NewAgent {
    fn new() -> Self {
        Self {
            cwd: RwSignal::new(String::new()),
            name: RwSignal::new(String::new()),
            model: RwSignal::new(String::new()),
            mode: RwSignal::new(String::new()),
            runtime: RwSignal::new(String::new()),
            in_workspace: RwSignal::new(false),
            branch: RwSignal::new(String::new()),
            base: RwSignal::new(String::new()),
            sandbox: RwSignal::new(String::new()),
            network: RwSignal::new(String::new()),
            node: RwSignal::new(String::new()),
        }
    }

    /// Asks for what the form holds: an agent, or a workspace with one.
    fn submit(&self, state: &ClientState) {
        let creation = state.roster.creation;
        let cwd = self.cwd.get_untracked();
        if cwd.trim().is_empty() {
            let why = "Give the agent a working directory (an absolute path).";
            creation.set(Creation::Failed(why.to_owned()));
            return;
        }
        let (name, runtime) = (self.name.get_untracked(), self.runtime.get_untracked());
        let node = self.node.get_untracked();
        let taken = !name.trim().is_empty()
            && state.roster.agents.with_untracked(|agents| {
                agents.iter().any(|agent| agent.identity.name.as_deref() == Some(name.trim()))
            });
        if taken {
            let why = format!(
                "An agent is already named \u{201c}{}\u{201d}: choose another name.",
                name.trim()
            );
            creation.set(Creation::Failed(why));
            return;
        }
        creation.set(Creation::Sent);
        // An ACP agent's model and mode are its own, chosen once it runs.
        let (model, mode) = if runtime.is_empty() {
            (self.model.get_untracked(), self.mode.get_untracked())
        } else {
            (String::new(), String::new())
        };
        let agent = roster::NewAgent {
            cwd: &cwd,
            name: &name,
            model: &model,
            mode: &mode,
            runtime: &runtime,
            node: &node,
            sandbox: crate::sandbox::narrowing(
                &self.sandbox.get_untracked(),
                &self.network.get_untracked(),
            ),
        };
        if self.in_workspace.get_untracked() {
            let (branch, base) = (self.branch.get_untracked(), self.base.get_untracked());
            state.workspaces.create(NewWorkspace { agent, branch: &branch, base: &base });
        } else {
            state.roster.create(agent);
        }
    }

    /// The agent was made: what named it goes, so that the next one is
    /// named anew; the folder and the choices stay for it.
    /// A new workspace is a choice for one agent: the next is made in the
    /// folder as it is, unless asked again.
    fn reset(&self) {
        self.name.set(String::new());
        self.branch.set(String::new());
        self.base.set(String::new());
        self.in_workspace.set(false);
    }
}

/// "New agent": the form loads the first time it opens.
#[component]
pub fn CreateAgent() -> impl IntoView {
    let roster = state().roster;
    let form = NewAgent::new();
    provide_context(form);
    let creation = roster.creation;
    let panel: NodeRef<leptos::html::Details> = NodeRef::new();
    let opened = RwSignal::new(false);
    // Made: the form closes and the keyboard goes to the new agent's
    // message box. Refused: the reason shows by the button, the fields as
    // they were.
    Effect::new(move |_| {
        if creation.get() != Creation::Created {
            return;
        }
        creation.set(Creation::Idle);
        form.reset();
        if let Some(panel) = panel.get_untracked() {
            panel.set_open(false);
        }
        #[cfg(feature = "hydrate")]
        super::reveal(".prompt".to_owned(), Some("textarea"));
    });
    let toggled = move |_| {
        if panel.get_untracked().is_some_and(|panel| panel.open()) {
            opened.set(true);
        }
    };
    view! {
        <details class="create-panel" node_ref=panel on:toggle=toggled>
            // The runtimes asked again as the form opens, so one added to
            // config.toml since the page loaded is offered.
            <summary on:click=move |_| roster.list_runtimes(&form.node.get_untracked())>
                "New agent"
            </summary>
            {super::deferred(move || opened.get(), create_form)}
        </details>
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(create_form, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn create_form() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let form = expect_context::<NewAgent>();
    let NewAgent { cwd, name, in_workspace, .. } = form;
    let roster = state.roster;
    let connection = state.link.connection;
    let connected = move || connection.get() == Connection::Connected;
    let submit = {
        let state = state.clone();
        move |event: leptos::ev::SubmitEvent| {
            event.prevent_default();
            form.submit(&state);
        }
    };
    suggest_cwd(roster, cwd);
    let creation = roster.creation;
    let problem = move || match creation.get() {
        Creation::Failed(why) => Some(why),
        _ => None,
    };
    let agents = roster.agents;
    Ok(view! {
        <form class="create" on:submit=submit aria-label="Create an agent">
            <label>"Working directory"
                <input name="cwd" type="text" placeholder="/home/me/project" required list="known-dirs"
                    prop:value=cwd on:input=move |event| cwd.set(event_target_value(&event))/>
            </label>
            <datalist id="known-dirs">{known(agents, |agent| Some(agent.cwd.as_str()))}</datalist>
            <label>"Name"
                <input name="name" type="text" placeholder="optional"
                    prop:value=name on:input=move |event| name.set(event_target_value(&event))/>
            </label>
            <NodeField form=form roster=roster/>
            <RuntimeField form=form roster=roster/>
            <ModelFields form=form roster=roster/>
            <SandboxFields form=form/>
            // On the machine chosen above: a node's repository is a path there.
            <label class="check">
                <input name="workspace" type="checkbox" prop:checked=in_workspace
                    on:change=move |event| in_workspace.set(event_target_checked(&event))/>
                "In a new workspace (its own git worktree and branch)"
            </label>
            <Show when=move || in_workspace.get()>
                <WorkspaceFields form=form/>
            </Show>
            {move || problem().map(|why| view! { <p class="form-error" role="alert"><Ticked text=why/></p> })}
            <button type="submit" disabled=move || !connected() || creation.get() == Creation::Sent>
                "Create agent"
            </button>
        </form>
    }
    .into_any())
}

/// An empty folder field offers one: the newest agent's, else (a first
/// run) the one the daemon was started in.
fn suggest_cwd(roster: Roster, cwd: RwSignal<String>) {
    let (agents, defaults) = (roster.agents, roster.defaults);
    Effect::new(move |_| {
        let newest = agents.with(|agents| {
            agents.iter().max_by_key(|agent| agent.created_at).map(|agent| agent.cwd.clone())
        });
        let suggested = newest.or_else(|| defaults.with(|(_, cwd)| cwd.clone()));
        if let Some(suggested) = suggested
            && cwd.with_untracked(String::is_empty)
        {
            cwd.set(suggested);
        }
    });
}

/// What a field can be filled with, as a datalist's options: what `field`
/// reads from the agents there are (their folders, their models).
fn known(agents: RwSignal<Vec<AgentInfo>>, field: fn(&AgentInfo) -> Option<&str>) -> impl IntoView {
    move || {
        let mut seen = BTreeSet::new();
        agents.with(|agents| {
            for agent in agents {
                if let Some(value) = field(agent) {
                    seen.insert(value.to_owned());
                }
            }
        });
        seen.into_iter().map(|value| view! { <option value=value/> }).collect_view()
    }
}

/// The machine the new agent runs on, offered once the hub has nodes
/// (docs/NODES.md): this one by default. A node out of reach is listed
/// with its state and cannot be chosen.
#[component]
fn NodeField(form: NewAgent, roster: Roster) -> impl IntoView {
    let NewAgent { node, runtime, .. } = form;
    let nodes = state().nodes;
    // Another machine has its own runtimes: the choice starts over.
    let chosen = move |event| {
        let chosen = event_target_value(&event);
        runtime.set(String::new());
        roster.list_runtimes(&chosen);
        node.set(chosen);
    };
    view! {
        <Show when=move || !nodes.all.with(Vec::is_empty)>
            <label>"Machine"
                <select name="node" on:change=chosen>
                    <option value="" selected=move || node.get().is_empty()>"this machine (the hub)"</option>
                    <For each=move || nodes.all.get() key=|info| (info.id.clone(), crate::nodes::state_label(info.state)) let:info>
                        <option value=info.id.clone() disabled=info.state != NodeState::Online
                            selected={
                                let id = info.id.clone();
                                move || node.get() == id
                            }>
                            {match info.state {
                                NodeState::Online => info.id.clone(),
                                state => format!("{} ({})", info.id, crate::nodes::state_label(state)),
                            }}
                        </option>
                    </For>
                </select>
            </label>
        </Show>
    }
}

/// The new-agent form's runtime: Shard's own agent is the default; the
/// others are listed once the daemon said which it has.
#[component]
fn RuntimeField(form: NewAgent, roster: Roster) -> impl IntoView {
    let NewAgent { runtime, .. } = form;
    let runtimes = roster.runtimes;
    let others =
        move || runtimes.get().into_iter().filter(|id| id != "shard").collect::<Vec<String>>();
    view! {
        <Show when=move || !others().is_empty()>
            <label>"Runtime"
                <select name="runtime"
                    on:change=move |event| runtime.set(event_target_value(&event))>
                    <option value="" selected=move || runtime.get().is_empty()>
                        "shard (built in)"
                    </option>
                    <For each=others key=|id| id.clone() let:id>
                        <option value=id.clone()
                            selected={
                                let id = id.clone();
                                move || runtime.get() == id
                            }>
                            {id.clone()}
                        </option>
                    </For>
                </select>
            </label>
        </Show>
    }
}

/// The new-agent form's model and mode, for Shard's own agent only: an
/// ACP agent's model and mode are its own, chosen once it runs.
#[component]
fn ModelFields(form: NewAgent, roster: Roster) -> impl IntoView {
    let NewAgent { model, mode, runtime, .. } = form;
    let (agents, defaults) = (roster.agents, roster.defaults);
    let default_model = move || {
        let model = defaults.with(|(model, _)| model.clone());
        format!("{} (the default)", model.unwrap_or_else(|| "demo".to_owned()))
    };
    view! {
        <Show when=move || runtime.get().is_empty()>
            <label>"Model"
                <input name="model" type="text" placeholder=default_model list="known-models"
                    prop:value=model on:input=move |event| model.set(event_target_value(&event))/>
            </label>
            <datalist id="known-models">{known(agents, |agent| agent.model.as_deref())}</datalist>
            <label>"Mode"
                <select name="mode" on:change=move |event| mode.set(event_target_value(&event))>
                    <option value="">"default"</option>
                    <option value="build">"build"</option>
                    <option value="plan">"plan"</option>
                </select>
            </label>
        </Show>
    }
}

/// The new-agent form's sandbox fields: config.toml's policy, or narrower
/// (the daemon refuses anything wider, and the form shows why).
#[component]
fn SandboxFields(form: NewAgent) -> impl IntoView {
    let NewAgent { sandbox, network, .. } = form;
    view! {
        <div class="sandbox-fields">
            <label title="What the agent may write (never wider than config.toml says)">"Sandbox"
                <select name="sandbox" aria-label="Sandbox" on:change=move |event| sandbox.set(event_target_value(&event))>
                    <option value="" selected=move || sandbox.get().is_empty()>"as configured"</option>
                    <option value="read-only" selected=move || sandbox.get() == "read-only">
                        "read-only: writes nowhere"
                    </option>
                </select>
            </label>
            <label title="Which hosts the agent may reach (never wider than config.toml says)">"Network"
                <select name="network" aria-label="Network" on:change=move |event| network.set(event_target_value(&event))>
                    <option value="" selected=move || network.get().is_empty()>"as configured"</option>
                    <option value="ask" selected=move || network.get() == "ask">
                        "ask about each new host"
                    </option>
                    <option value="deny" selected=move || network.get() == "deny">
                        "deny: allowed hosts only"
                    </option>
                </select>
            </label>
        </div>
    }
}

/// The new-agent form's fields for a new workspace.
#[component]
fn WorkspaceFields(form: NewAgent) -> impl IntoView {
    let NewAgent { branch, base, .. } = form;
    view! {
        <label>"Branch"
            <input name="branch" type="text" placeholder="shard/<name>"
                prop:value=branch on:input=move |event| branch.set(event_target_value(&event))/>
        </label>
        <label>"Base"
            <input name="base" type="text" placeholder="HEAD"
                prop:value=base on:input=move |event| base.set(event_target_value(&event))/>
        </label>
    }
}
