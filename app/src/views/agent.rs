//! The agent on screen: its header and lifecycle buttons, the pickers its
//! runtime advertises, its containment, the transcript and the prompt box.

use leptos::prelude::*;
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::types::{AgentStatus, RuntimeState};

use super::ledger::tokens;
use super::transcript::Transcript;
use super::{state, status_label};
use crate::markdown::Ticked;

/// The header's meter of what the agent's processes use, its pickers and
/// the agent's containment line (its own row, below the rest). Their code is a WASM chunk of its own, fetched when an
/// agent is first on screen (`views::deferred`).
#[component]
fn HeaderTools() -> impl IntoView {
    super::deferred(|| true, header_tools)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(header_tools, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn header_tools() -> Result<AnyView, super::Unloaded> {
    let screen = state().screen;
    let meter = move || screen.selected.get().map(super::fleet::meter);
    Ok(view! { {meter} <Pickers/><super::sandbox::Containment/> }.into_any())
}

#[component]
fn Pickers() -> impl IntoView {
    let screen = state().screen;
    let catalogs = screen.catalogs;
    view! {
        <div class="pickers">
            <Show when=move || catalogs.has("mode-switch") && !catalogs.modes.get().is_empty()>
                <label>"Mode"
                    <select aria-label="Mode" on:change=move |event| screen.set_mode(event_target_value(&event))>
                        {move || catalogs.modes.get().into_iter().map(|mode| {
                            let current = catalogs.mode.get() == mode.name;
                            view! { <option value=mode.name.clone() selected=current title=mode.description>{mode.name.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
            </Show>
            <Show when=move || catalogs.has("model-switch") && !catalogs.models.get().is_empty()>
                <label>"Model"
                    <select aria-label="Model" on:change=move |event| screen.set_model(event_target_value(&event))>
                        {move || {
                            let active = catalogs.model.get().map(|model| model.id);
                            catalogs.models.get().into_iter().map(|model| {
                                let current = active.as_deref() == Some(model.id.as_str());
                                view! { <option value=model.id.clone() selected=current>{model.id.clone()}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </Show>
            <Show when=move || catalogs.has("reasoning-switch") && !catalogs.levels.get().is_empty()>
                <label>"Reasoning"
                    <select aria-label="Reasoning" on:change=move |event| {
                        let model = catalogs.model.get_untracked().map(|model| model.id).unwrap_or_default();
                        screen.set_reasoning_level(model, event_target_value(&event));
                    }>
                        {move || {
                            let active = catalogs.level.get();
                            catalogs.levels.get().into_iter().map(|level| {
                                let current = active.as_deref() == Some(level.id.as_str());
                                view! { <option value=level.id.clone() selected=current>{level.label.clone()}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </Show>
        </div>
    }
}

/// The prompt box. Its code (with the command hints') is a WASM chunk of
/// its own, fetched when an agent is first on screen (`views::deferred`).
#[component]
fn PromptBox() -> impl IntoView {
    super::deferred(|| true, prompt_box)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(prompt_box, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn prompt_box() -> Result<AnyView, super::Unloaded> {
    let (screen, roster) = (state().screen, state().roster);
    // ACP has no way into a running turn: such an agent takes follow-ups.
    let steerable =
        move || !screen.selected.get().is_some_and(|agent_id| roster.is_foreign(&agent_id));
    // The draft lives in the state: it survives a reconnect, and a refused
    // prompt comes back into it.
    let text = screen.drafts.draft;
    let error = screen.drafts.prompt_error;
    let busy = move || !matches!(screen.status.get(), AgentStatus::Idle | AgentStatus::Error);
    let send = move |behavior: Option<StreamingBehavior>| {
        let message = text.get_untracked();
        if message.trim().is_empty() {
            return;
        }
        if screen.prompt(&message, behavior) {
            text.set(String::new());
        }
    };
    let on_submit = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        send(busy().then_some(StreamingBehavior::FollowUp));
    };
    let steer = move |_| send(Some(StreamingBehavior::Steer));
    let abort = move |_| screen.abort();
    let recall = move |_| screen.recall();
    let queued = screen.drafts.queued;
    let on_key = move |event: leptos::ev::KeyboardEvent| {
        // Ctrl/Cmd+Enter sends.
        if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) {
            event.prevent_default();
            send(busy().then_some(StreamingBehavior::FollowUp));
        }
    };
    Ok(view! {
        <form class="prompt" on:submit=on_submit aria-label="Prompt">
            <textarea name="prompt" rows="3" aria-label="Message to the agent" placeholder="Message"
                prop:value=text on:input=move |event| text.set(event_target_value(&event)) on:keydown=on_key></textarea>
            <CommandHints text/>
            {move || error.get().map(|why| view! { <p class="prompt-error" role="alert"><Ticked text=why/></p> })}
            <div class="prompt-actions">
                <span class="key-hint send-hint">"Ctrl+Enter sends"</span>
                <button type="submit">{move || if busy() { "Queue follow-up" } else { "Send" }}</button>
                <Show when=move || busy() && steerable()>
                    <button type="button" on:click=steer>"Steer"</button>
                </Show>
                <Show when=busy>
                    <button type="button" class="danger" on:click=abort>"Abort"</button>
                </Show>
                <Show when=move || { busy() && queued.get() > 0 }>
                    <button type="button" class="recall" on:click=recall
                        title="Take back the newest steer or follow-up before it reaches the agent">"Take back"</button>
                </Show>
            </div>
        </form>
    }
    .into_any())
}

/// The commands the agent offers whose names start with what is typed,
/// while the draft is `/` and part of a name; choosing one puts it in the
/// draft, ready for its input. The agent gets the text as typed.
#[component]
fn CommandHints(text: RwSignal<String>) -> impl IntoView {
    const SHOWN: usize = 8;
    let commands = state().screen.catalogs.commands;
    let matching = move || {
        let draft = text.get();
        let typed = draft.strip_prefix('/').filter(|typed| !typed.contains(char::is_whitespace))?;
        let matching: Vec<_> = commands.with(|commands| {
            commands
                .iter()
                .filter(|command| command.name.starts_with(typed))
                .take(SHOWN)
                .cloned()
                .collect()
        });
        (!matching.is_empty()).then_some(matching)
    };
    move || {
        matching().map(|matching| view! {
            <ul class="command-hints" aria-label="Agent commands">
                {matching.into_iter().map(|command| {
                    let chosen = format!("/{} ", command.name);
                    view! {
                        <li><button type="button" on:click=move |_| text.set(chosen.clone())>
                            <span class="name">{format!("/{}", command.name)}</span>
                            {command.hint.map(|hint| view! { <span class="hint">{hint}</span> })}
                            <span class="description">{command.description}</span>
                        </button></li>
                    }
                }).collect_view()}
            </ul>
        })
    }
}

/// The agent on screen's header: its name, status, usage, pickers,
/// lifecycle buttons and the sandbox it runs in. Its code is a WASM chunk
/// of its own, fetched when an agent is first on screen.
#[component]
fn AgentHeader() -> impl IntoView {
    super::deferred(|| true, agent_header)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(agent_header, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn agent_header() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let (screen, roster, find, nodes) = (state.screen, state.roster, state.find, state.nodes);
    // Tracked: after a reload the agent is on screen before the list that
    // names it has arrived.
    let title = move || {
        roster.agents.track();
        screen.selected.get().map(|id| roster.name_of(&id)).unwrap_or_default()
    };
    // Back to the list, where the agent left is brought into view.
    let close = move |_| super::phone::back_to_list(&state);
    // A stopped process says so (a message starts it again), not "idle".
    let stopped = move || {
        let Some(selected) = screen.selected.get() else { return false };
        roster.agents.with(|agents| {
            agents.iter().any(|agent| {
                agent.agent_id == selected
                    && !matches!(
                        agent.runtime_state,
                        RuntimeState::Running | RuntimeState::Starting
                    )
            })
        })
    };
    let status = screen.status;
    let shown_status = move || if stopped() { "stopped" } else { status_label(status.get()) };
    let busy = move || !matches!(status.get(), AgentStatus::Idle | AgentStatus::Error);
    // Kill mid-reply cuts the reply off: it takes a second, deliberate click.
    let confirming_kill = RwSignal::new(false);
    Effect::new(move |_| {
        if !busy() {
            confirming_kill.set(false);
        }
    });
    let kill = move |_| {
        if busy() && !confirming_kill.get_untracked() {
            confirming_kill.set(true);
            return;
        }
        confirming_kill.set(false);
        screen.kill();
    };
    let usage = move || {
        let selected = screen.selected.get()?;
        roster.agents.with(|agents| {
            let usage = agents.iter().find(|agent| agent.agent_id == selected)?.usage.clone()?;
            Some(match usage.cost {
                Some(cost) => format!(
                    "{} in · {} out · {}",
                    tokens(usage.input),
                    tokens(usage.output),
                    super::dollars(cost)
                ),
                None => format!("{} in · {} out", tokens(usage.input), tokens(usage.output)),
            })
        })
    };
    // Where it runs, if not here, and while that node is out of reach,
    // what that means for it.
    let node = move || {
        let selected = screen.selected.get()?;
        roster
            .agents
            .with(|agents| agents.iter().find(|agent| agent.agent_id == selected)?.node.clone())
    };
    let unreachable = move || node().filter(|node| !nodes.reachable(Some(node)));
    Ok(view! {
        <header class="agent-header">
            <button class="back" on:click=close aria-label="Back to agents">"←"</button>
            <h2>{title}</h2>
            {super::nodes::node_mark(node)}
            {move || unreachable().map(|node| view! {
                <p class="node-offline" role="status">
                    {format!("The node {node} is out of reach: this is what the hub last had of the agent. Messages and answers go through once its link is back.")}
                </p>
            })}
            <span class="status" data-status=shown_status
                title=move || stopped().then_some("Its process is stopped: a message starts it again.")>{shown_status}</span>
            <span class="usage" title="tokens used">{usage}</span>
            <HeaderTools/>
            <div class="lifecycle">
                <button class="find-open" title="Find in this transcript (Ctrl+F)"
                    on:click=move |_| { super::open_find(screen, find); }>"Find"</button>
                <button on:click=move |_| screen.terminate()
                    title="Stop its process once the reply in progress ends. A message starts it again.">"Terminate"</button>
                <button class="danger" class:confirming=move || confirming_kill.get() on:click=kill
                    title="Stop its process now, cutting off a reply in progress. A message starts it again.">
                    {move || if confirming_kill.get() { "Kill mid-reply?" } else { "Kill" }}
                </button>
            </div>
        </header>
    }
    .into_any())
}

#[component]
pub fn AgentView() -> impl IntoView {
    let (screen, roster) = (state().screen, state().roster);
    let resumed = screen.resumed;
    let foreign =
        move || screen.selected.get().is_some_and(|agent_id| roster.is_foreign(&agent_id));
    // With no agent yet, the way to one; else which to pick.
    let empty = move || match roster.agents.with(Vec::is_empty) {
        true => "No agents yet: create one under \u{201c}New agent\u{201d}.",
        false => "Select an agent to see its work.",
    };
    view! {
        <Show when=move || screen.selected.get().is_some() fallback=move || view! { <section class="agent-view empty"><p>{empty}</p></section> }>
            <section class="agent-view" aria-label="Agent" data-attach=move || match resumed.get() {
                Some(true) => "resumed",
                Some(false) => "sync",
                None => "",
            }>
                <AgentHeader/>
                <super::workspace::WorkspacePanel/>
                <div class="ledger-panels">
                    // An ACP agent's sessions are its own: nothing to fork,
                    // switch or compact from here.
                    <Show when=move || !foreign()>
                        <super::ledger::SessionsPanel/>
                    </Show>
                    <super::ledger::UsagePanel/>
                    <super::fleet::BudgetPanel/>
                    <super::ledger::ApprovalsPanel/>
                </div>
                <super::jobs::JobsPanel/>
                <super::search::FindBar/>
                <Transcript/>
                <super::ledger::LedgerNote/>
                <PromptBox/>
            </section>
        </Show>
    }
}
