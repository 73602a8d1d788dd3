//! The agent on screen: its header and lifecycle buttons, the pickers its
//! runtime advertises, the transcript and the prompt box.

use leptos::prelude::*;
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::types::AgentStatus;

use super::transcript::Transcript;
use super::{state, status_label};

#[component]
fn Pickers() -> impl IntoView {
    let state = state();
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
    let s5 = state.clone();
    let s6 = state.clone();
    view! {
        <div class="pickers">
            <Show when=move || s1.has_capability("mode-switch") && !s1.modes.get().is_empty()>
                <label>"Mode"
                    <select aria-label="Mode" on:change={
                        let state = s2.clone();
                        move |event| state.set_mode(event_target_value(&event))
                    }>
                        {let state = s2.clone(); move || state.modes.get().into_iter().map(|mode| {
                            let current = state.mode.get() == mode.name;
                            view! { <option value=mode.name.clone() selected=current title=mode.description>{mode.name.clone()}</option> }
                        }).collect_view()}
                    </select>
                </label>
            </Show>
            <Show when=move || s3.has_capability("model-switch") && !s3.models.get().is_empty()>
                <label>"Model"
                    <select aria-label="Model" on:change={
                        let state = s4.clone();
                        move |event| state.set_model(event_target_value(&event))
                    }>
                        {let state = s4.clone(); move || {
                            let active = state.model.get().map(|model| model.id);
                            state.models.get().into_iter().map(|model| {
                                let current = active.as_deref() == Some(model.id.as_str());
                                view! { <option value=model.id.clone() selected=current>{model.id.clone()}</option> }
                            }).collect_view()
                        }}
                    </select>
                </label>
            </Show>
            <Show when=move || s5.has_capability("reasoning-switch") && !s5.levels.get().is_empty()>
                <label>"Reasoning"
                    <select aria-label="Reasoning" on:change={
                        let state = s6.clone();
                        move |event| {
                            let model = state.model.get_untracked().map(|model| model.id).unwrap_or_default();
                            state.set_reasoning_level(model, event_target_value(&event));
                        }
                    }>
                        {let state = s6.clone(); move || {
                            let active = state.level.get();
                            state.levels.get().into_iter().map(|level| {
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

#[component]
fn PromptBox() -> impl IntoView {
    let state = state();
    // The draft lives in the state: it survives a reconnect, and a refused
    // prompt comes back into it.
    let text = state.draft;
    let error = state.prompt_error;
    let busy = {
        let status = state.status;
        move || !matches!(status.get(), AgentStatus::Idle | AgentStatus::Error)
    };
    let send = {
        let state = state.clone();
        move |behavior: Option<StreamingBehavior>| {
            let message = text.get_untracked();
            if message.trim().is_empty() {
                return;
            }
            if state.prompt(&message, behavior) {
                text.set(String::new());
            }
        }
    };
    let on_submit = {
        let send = send.clone();
        move |event: leptos::ev::SubmitEvent| {
            event.prevent_default();
            send(busy().then_some(StreamingBehavior::FollowUp));
        }
    };
    let steer = {
        let send = send.clone();
        move |_| send(Some(StreamingBehavior::Steer))
    };
    let abort = {
        let state = state.clone();
        move |_| state.abort()
    };
    let recall = {
        let state = state.clone();
        move |_| state.recall()
    };
    let queued = state.queued;
    let on_key = {
        let send = send.clone();
        move |event: leptos::ev::KeyboardEvent| {
            // Ctrl/Cmd+Enter sends.
            if event.key() == "Enter" && (event.ctrl_key() || event.meta_key()) {
                event.prevent_default();
                send(busy().then_some(StreamingBehavior::FollowUp));
            }
        }
    };
    view! {
        <form class="prompt" on:submit=on_submit aria-label="Prompt">
            <textarea name="prompt" rows="3" aria-label="Message to the agent" placeholder="Message (Ctrl+Enter to send)"
                prop:value=text on:input=move |event| text.set(event_target_value(&event)) on:keydown=on_key></textarea>
            {move || error.get().map(|why| view! { <p class="prompt-error" role="alert">{why}</p> })}
            <div class="prompt-actions">
                <button type="submit">{move || if busy() { "Queue follow-up" } else { "Send" }}</button>
                <Show when=busy>
                    <button type="button" on:click=steer.clone()>"Steer"</button>
                    <button type="button" class="danger" on:click=abort.clone()>"Abort"</button>
                </Show>
                <Show when=move || { busy() && queued.get() > 0 }>
                    <button type="button" class="recall" on:click=recall.clone()
                        title="Take back the newest steer or follow-up before it reaches the agent">"Take back"</button>
                </Show>
            </div>
        </form>
    }
}

#[component]
pub fn AgentView() -> impl IntoView {
    let state = state();
    let s = state.clone();
    view! {
        <Show when=move || s.selected.get().is_some() fallback=|| view! { <section class="agent-view empty"><p>"Select an agent to see its work."</p></section> }>
            {
                let state = state.clone();
                // Tracked: after a reload the agent is on screen before the
                // list that names it has arrived.
                let title = {
                    let state = state.clone();
                    move || {
                        state.agents.track();
                        state.selected.get().map(|id| state.agent_name(&id)).unwrap_or_default()
                    }
                };
                let terminate = {
                    let state = state.clone();
                    move |_| {
                        state.terminate_selected();
                    }
                };
                let kill = {
                    let state = state.clone();
                    move |_| {
                        state.kill_selected();
                    }
                };
                let close = {
                    let state = state.clone();
                    move |_| state.select(None)
                };
                let status = state.status;
                let resumed = state.resumed;
                let usage = {
                    let state = state.clone();
                    move || {
                        let selected = state.selected.get()?;
                        state.agents.with(|agents| {
                            let usage = agents.iter().find(|agent| agent.agent_id == selected)?.usage.clone()?;
                            Some(match usage.cost {
                                Some(cost) => format!("{} in · {} out · {}", usage.input, usage.output, super::dollars(cost)),
                                None => format!("{} in · {} out", usage.input, usage.output),
                            })
                        })
                    }
                };
                view! {
                    <section class="agent-view" aria-label="Agent" data-attach=move || match resumed.get() {
                        Some(true) => "resumed",
                        Some(false) => "sync",
                        None => "",
                    }>
                        <header class="agent-header">
                            <button class="back" on:click=close aria-label="Back to agents">"←"</button>
                            <h2>{title}</h2>
                            <span class="status" data-status=move || status_label(status.get())>{move || status_label(status.get())}</span>
                            <span class="usage" title="tokens used">{usage}</span>
                            <Pickers/>
                            <div class="lifecycle">
                                <button on:click=terminate>"Terminate"</button>
                                <button class="danger" on:click=kill>"Kill"</button>
                            </div>
                        </header>
                        <super::workspace::WorkspacePanel/>
                        <div class="ledger-panels">
                            <super::ledger::SessionsPanel/>
                            <super::ledger::UsagePanel/>
                            <super::ledger::ApprovalsPanel/>
                        </div>
                        <super::jobs::JobsPanel/>
                        <Transcript/>
                        <super::ledger::LedgerNote/>
                        <PromptBox/>
                    </section>
                }
            }
        </Show>
    }
}
