//! Questions: the dialog for the agent on screen and the approval inbox for
//! every agent, both built so that nothing answers by accident
//! (crate::guard): no focus onto an answer, shortcuts only on the focused
//! question, nothing before it is armed, "Always allow" never one keystroke.
//! What a permission question's details show is [`details`].

mod details;

use leptos::html;
use leptos::prelude::*;
use shard_protocol::agent::{
    ChoiceIntent, Decision, PendingKind, PermissionAnswer, PermissionRequest, UiKind, UiRequest,
    UiValue,
};
// Text as a person is shown it: hidden characters as visible escapes.
use shard_protocol::budget::BUDGET_TOOL;
use shard_protocol::display::{escaped, has_hidden};
use shard_protocol::sandbox::NETWORK_TOOL;

use super::state;
use crate::guard;
use crate::link::Connection;
use crate::markdown::Ticked;
use crate::questions::{Answer, Question};
use crate::state::ClientState;
use details::details_view;

/// Whether anything a permission request shows held a hidden character.
fn permission_hides(request: &PermissionRequest) -> bool {
    let details = request.details.iter().flatten();
    let choices = request.choices.iter().flatten();
    has_hidden(&request.prompt)
        || has_hidden(&request.tool_name)
        || details.into_iter().any(|detail| {
            has_hidden(&detail.value) || detail.label.as_deref().is_some_and(has_hidden)
        })
        || choices.into_iter().any(|choice| has_hidden(&choice.label))
}

/// Said above a question whose text held hidden characters: what runs may
/// not read the way the text would have looked.
fn hidden_notice() -> impl IntoView {
    view! {
        <p class="hidden-characters" role="alert">
            "Contains hidden characters, shown as \\u{…}: what runs may differ from how it looked."
        </p>
    }
}

/// The answers a permission request offers: the server's choices, else the
/// legacy options. "Always allow" (intent `persist`) never gets a shortcut
/// (crate::guard).
fn permission_answers(
    request: &PermissionRequest,
) -> Vec<(String, String, Option<String>, Answer)> {
    match &request.choices {
        Some(choices) if !choices.is_empty() => choices
            .iter()
            .map(|choice| {
                let intent = match choice.intent {
                    ChoiceIntent::Allow => "allow",
                    ChoiceIntent::Persist => "persist",
                    ChoiceIntent::Deny => "deny",
                    ChoiceIntent::Unknown => "unknown",
                }
                .to_owned();
                let key = if intent == "persist" { None } else { choice.accelerator.clone() };
                (
                    escaped(&choice.label),
                    intent,
                    key,
                    Answer::Permission(PermissionAnswer::Choice(choice.id.clone())),
                )
            })
            .collect(),
        _ => request
            .options
            .iter()
            .map(|option| {
                let (label, intent, key) = match option {
                    Decision::Allow => ("Allow", "allow", Some("y")),
                    Decision::AllowAlways => ("Always allow", "persist", None),
                    Decision::Deny => ("Deny", "deny", Some("n")),
                };
                (
                    label.to_owned(),
                    intent.to_owned(),
                    key.map(str::to_owned),
                    Answer::Permission(PermissionAnswer::Decision(*option)),
                )
            })
            .collect(),
    }
}

/// The answer a key press gives to `question`, if the guard lets it.
fn shortcut_answer(
    question: &Question,
    event: &leptos::ev::KeyboardEvent,
    shown_at: f64,
) -> Option<Answer> {
    let PendingKind::Permission(request) = &question.request else { return None };
    let answers = permission_answers(request);
    let keys: Vec<String> = answers.iter().filter_map(|(_, _, key, _)| key.clone()).collect();
    let key = event.key();
    let press = guard::Press {
        key: &key,
        ctrl: event.ctrl_key(),
        alt: event.alt_key(),
        meta: event.meta_key(),
        shift: event.shift_key(),
        repeat: event.repeat(),
    };
    let pressed = guard::shortcut(&press, &keys, shown_at, guard::now_ms())?;
    answers
        .into_iter()
        .find(|(_, _, key, _)| key.as_deref() == Some(pressed))
        .map(|(_, _, _, answer)| answer)
}

/// A question's body and answer controls (shared by the dialog and the
/// inbox). Their code is a WASM chunk of its own, fetched with the first
/// question (`views::deferred`). Nothing answers before the question is
/// armed (crate::guard), counted from when the body is on screen, which it
/// records in `shown`: until then the question's shortcuts do nothing.
#[component]
pub fn QuestionBody(question: Question, shown: RwSignal<Option<f64>>) -> impl IntoView {
    super::deferred(|| true, move || question_body(question.clone(), shown))
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(question_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn question_body(
    question: Question,
    shown: RwSignal<Option<f64>>,
) -> Result<AnyView, super::Unloaded> {
    let shown_at = guard::now_ms();
    shown.set(Some(shown_at));
    let state = state();
    // The answers are disabled until armed, so they look it too. An effect,
    // so the timer only ever runs in the browser.
    let delay_over = RwSignal::new(false);
    Effect::new(move |_| {
        let wait = (guard::ARM_DELAY_MS - (guard::now_ms() - shown_at)).max(0.0);
        set_timeout(
            move || {
                delay_over.try_set(true);
            },
            std::time::Duration::from_millis(wait as u64),
        );
    });
    // Offline an answer cannot be sent: the answers wait for the link.
    let connection = state.link.connection;
    let online = move || connection.get() == Connection::Connected;
    let armed = RwSignal::new(false);
    Effect::new(move |_| armed.set(delay_over.get() && online()));
    let offline_note = move || {
        (!online()).then(|| view! { <p class="offline-note" role="status">"Offline: answers wait for the connection."</p> })
    };
    Ok(match question.request.clone() {
        PendingKind::Permission(request) => {
            let mut details = request.details.clone().unwrap_or_default();
            // A sandbox's network question: its host first, in its own card.
            let network = crate::sandbox::network_target(&request);
            if network.is_some() {
                details.retain(|detail| {
                    !detail.label.as_deref().is_some_and(|label| {
                        crate::sandbox::TARGET_DETAILS.contains(&label)
                    })
                });
            }
            let answers = permission_answers(&request);
            let hidden = permission_hides(&request);
            view! {
                {hidden.then(hidden_notice)}
                {offline_note}
                {network.map(network_card)}
                <p class="question-prompt"><Ticked text=escaped(&request.prompt)/></p>
                <dl class="details">{details_view(details)}</dl>
                <div class="answers">
                    {answers.into_iter().map(|answer| answer_button(&state, &question, answer, shown_at, armed)).collect_view()}
                </div>
            }.into_any()
        }
        PendingKind::Ui(request) => {
            view! { {offline_note}<UiBody question=question request=request shown_at=shown_at armed=armed/> }
                .into_any()
        }
    })
}

/// One answer to a permission question, disabled until armed.
fn answer_button(
    state: &ClientState,
    question: &Question,
    (label, intent, key, answer): (String, String, Option<String>, Answer),
    shown_at: f64,
    armed: RwSignal<bool>,
) -> impl IntoView {
    let state = state.clone();
    let question = question.clone();
    // "Always allow" takes a second, separate activation.
    let persist = intent == "persist";
    let confirming = RwSignal::new(false);
    // The key's hint, which a phone's stylesheet hides.
    let hint = key.as_ref().map(|key| {
        view! {
            <span class="key-hint" hidden=move || confirming.get()>{format!(" ({key})")}</span>
        }
    });
    let shown = move || {
        if confirming.get() { format!("Confirm: {}", label.to_lowercase()) } else { label.clone() }
    };
    let click = move |_| {
        if !guard::armed(shown_at, guard::now_ms()) {
            return;
        }
        if persist && !confirming.get_untracked() {
            confirming.set(true);
            return;
        }
        state.questions.answer(&question, answer.clone());
    };
    view! {
        <button class="answer" data-intent=intent data-key=key.unwrap_or_default()
            prop:disabled=move || !armed.get() class:confirming=move || confirming.get()
            on:click=click>{shown}{hint}</button>
    }
}

/// What a network question asks about, before anything else: the host
/// and port the agent's sandbox stopped, and how it tried to reach them.
fn network_card(target: crate::sandbox::NetworkTarget) -> impl IntoView {
    let crate::sandbox::NetworkTarget { host, port, through } = target;
    view! {
        <div class="network-ask">
            <p class="network-title">"Network access"</p>
            <p class="network-target">
                <span class="network-host">{escaped(&host)}</span>
                <span class="network-port">{format!(":{}", escaped(&port))}</span>
            </p>
            {through.map(|how| view! { <p class="network-through">{format!("through {}", escaped(&how))}</p> })}
        </div>
    }
}

#[component]
fn UiBody(
    question: Question,
    request: UiRequest,
    shown_at: f64,
    armed: RwSignal<bool>,
) -> impl IntoView {
    let state = state();
    let value = RwSignal::new(request.prefill.clone().unwrap_or_default());
    let respond = move |answer: Option<UiValue>| {
        if guard::armed(shown_at, guard::now_ms()) {
            state.questions.answer(&question, Answer::Ui(answer))
        }
    };
    let message = request.message.clone().or(request.title.clone()).unwrap_or_default();
    // Both: the title says what is asked (a form's field), the message why.
    let heading = request
        .title
        .clone()
        .filter(|title| request.message.as_ref().is_some_and(|message| message != title));
    let hidden = [&request.title, &request.message, &request.placeholder, &request.prefill]
        .into_iter()
        .flatten()
        .chain(request.options.iter().flatten())
        .any(|text| has_hidden(text));
    let body = match request.kind {
        UiKind::Select => {
            let respond = respond.clone();
            request.options.clone().unwrap_or_default().into_iter().map(|option| {
                let respond = respond.clone();
                // Shown escaped; answered with the option's exact text.
                let label = escaped(&option);
                view! { <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| respond(Some(UiValue::Text(option.clone())))>{label}</button> }
            }).collect_view().into_any()
        }
        UiKind::Confirm => {
            let (yes, no) = (respond.clone(), respond.clone());
            view! {
                <button class="answer" prop:disabled=move || !armed.get() data-intent="allow" on:click=move |_| yes(Some(UiValue::Text("yes".to_owned())))>"Yes"</button>
                <button class="answer" prop:disabled=move || !armed.get() data-intent="deny" on:click=move |_| no(Some(UiValue::Text("no".to_owned())))>"No"</button>
            }.into_any()
        }
        UiKind::Editor => {
            let submit = respond.clone();
            view! {
                <textarea aria-label="Answer" rows="6" prop:value=value on:input=move |event| value.set(event_target_value(&event))></textarea>
                <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| submit(Some(UiValue::Text(value.get_untracked())))>"Submit"</button>
            }.into_any()
        }
        _ => {
            let submit = respond.clone();
            let placeholder = escaped(request.placeholder.as_deref().unwrap_or_default());
            view! {
                <input type="text" aria-label="Answer" placeholder=placeholder prop:value=value on:input=move |event| value.set(event_target_value(&event))/>
                <button class="answer" prop:disabled=move || !armed.get() on:click=move |_| submit(Some(UiValue::Text(value.get_untracked())))>"Submit"</button>
            }.into_any()
        }
    };
    let dismiss = respond.clone();
    view! {
        {hidden.then(hidden_notice)}
        {heading.map(|title| view! { <p class="question-title"><strong>{escaped(&title)}</strong></p> })}
        <p class="question-prompt"><Ticked text=escaped(&message)/></p>
        <div class="answers">{body}<button class="answer" prop:disabled=move || !armed.get() data-intent="deny" on:click=move |_| dismiss(None)>"Dismiss"</button></div>
    }
}

/// The dialog for the selected agent's first open question. It takes focus,
/// onto itself and never onto an answer, and gives it back when it goes.
/// Its shortcuts work only once armed, and a key pressed before that (a
/// typist who has not seen it yet) starts the wait again; Tab stays
/// inside it; Escape or "Later" closes it and the question stays in the
/// inbox (crate::guard).
///
/// Its code is a WASM chunk of its own, fetched with the first question of
/// the agent on screen (`views::deferred`).
#[component]
pub fn QuestionDialog() -> impl IntoView {
    let state = state();
    let any = Memo::new(move |_| {
        let Some(selected) = state.screen.selected.get() else { return false };
        state.questions.undismissed().iter().any(|question| question.agent_id == selected)
    });
    super::deferred(move || any.get(), question_dialog)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(question_dialog, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn question_dialog() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let current = {
        let state = state.clone();
        Memo::new(move |_| {
            let selected = state.screen.selected.get()?;
            state.questions.undismissed().into_iter().find(|question| question.agent_id == selected)
        })
    };
    Ok(view! { {move || current.get().map(|question| dialog_of(&state, question))} }.into_any())
}

/// The dialog of one question. It remembers where the focus was and gives
/// it back when it goes; its keys are [`dialog_keys`].
fn dialog_of(state: &ClientState, question: Question) -> impl IntoView + use<> {
    let shown = RwSignal::new(None);
    let dialog: NodeRef<html::Div> = NodeRef::new();
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(dialog) = dialog.get() {
            crate::dialog::remember_focus(&dialog);
        }
    });
    #[cfg(feature = "hydrate")]
    on_cleanup(crate::dialog::restore_focus);
    let dismiss = {
        let state = state.clone();
        let key = question.key();
        move || state.questions.dismiss(key.clone())
    };
    let on_key = dialog_keys(state, &question, dialog, shown);
    let agent = escaped(&state.roster.name_of(&question.agent_id));
    let title = match &question.request {
        PendingKind::Permission(request) if request.tool_name == NETWORK_TOOL => {
            format!("{agent} asks for network access")
        }
        PendingKind::Permission(request) if request.tool_name == BUDGET_TOOL => {
            format!("{agent} is paused at its budget")
        }
        PendingKind::Permission(request) => {
            format!("{agent} asks to use {}", escaped(&request.tool_name))
        }
        PendingKind::Ui(_) => format!("{agent} asks you"),
    };
    view! {
        <div class="overlay">
            <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="question-title" tabindex="-1" node_ref=dialog
                on:keydown=on_key data-request-id=question.request.request_id().to_owned()>
                <h2 id="question-title">{title}</h2>
                <QuestionBody question=question.clone() shown=shown/>
                <button class="later" on:click=move |_| dismiss()>"Later" <span class="key-hint">" (Esc)"</span></button>
            </div>
        </div>
    }
}

/// The question dialog's keys: Escape closes it (the question stays in
/// the inbox), Tab stays inside it, and a shortcut answers once armed; a
/// key pressed before then starts the wait again.
fn dialog_keys(
    state: &ClientState,
    question: &Question,
    dialog: NodeRef<html::Div>,
    shown: RwSignal<Option<f64>>,
) -> impl Fn(leptos::ev::KeyboardEvent) + use<> {
    let state = state.clone();
    let question = question.clone();
    let dismissed = question.key();
    #[cfg(not(feature = "hydrate"))]
    let _ = dialog;
    move |event: leptos::ev::KeyboardEvent| {
        let key = event.key();
        if key == "Escape" {
            event.prevent_default();
            state.questions.dismiss(dismissed.clone());
            return;
        }
        if key == "Tab" {
            event.prevent_default();
            #[cfg(feature = "hydrate")]
            if let Some(dialog) = dialog.get_untracked() {
                crate::dialog::cycle_focus(&dialog, event.shift_key());
            }
            return;
        }
        // Typing an answer into the question's own field.
        if guard::typing() || guard::is_modifier(&key) {
            return;
        }
        let Some(shown_at) = shown.get_untracked() else { return };
        let now = guard::now_ms();
        if !guard::armed(shown_at, now) {
            // Typing meant for the box behind: nothing answers
            // until the typist stops and sees the question.
            event.prevent_default();
            shown.set(Some(now));
            return;
        }
        if let Some(answer) = shortcut_answer(&question, &event, shown_at) {
            event.prevent_default();
            state.questions.answer(&question, answer);
        }
    }
}

/// Every open question of every agent this tab knows, answerable here.
#[component]
pub fn Inbox() -> impl IntoView {
    let state = state();
    let all = {
        let state = state.clone();
        move || {
            state.questions.open.with(|questions| questions.values().cloned().collect::<Vec<_>>())
        }
    };
    let count = move || all().len();
    view! {
        <section class="inbox" aria-label="Approval inbox" class:empty=move || count() == 0>
            <h2>"Inbox " <span class="count">{count}</span></h2>
            <Show when=move || count() == 0><p class="none">"Nothing waits for an answer."</p></Show>
            <ul>
                // Keyed: an entry (and an answer being typed in it) stays as
                // other questions come and go.
                <For each=all key=Question::key let:question>
                    {
                        let name = escaped(&state.roster.name_of(&question.agent_id));
                        let shown = RwSignal::new(None);
                        let open = {
                            let state = state.clone();
                            let agent = question.agent_id.clone();
                            move |_| state.select(Some(agent.clone()))
                        };
                        let on_key = {
                            let state = state.clone();
                            let question = question.clone();
                            move |event: leptos::ev::KeyboardEvent| {
                                // Only the entry itself, not a field inside it.
                                let on_entry = event.target() == event.current_target();
                                let shown_at = shown.get_untracked();
                                if on_entry
                                    && let Some(answer) = shown_at.and_then(|at| shortcut_answer(&question, &event, at)) {
                                        event.prevent_default();
                                        state.questions.answer(&question, answer);
                                    }
                            }
                        };
                        view! {
                            <li class="inbox-item" tabindex="0" on:keydown=on_key data-agent-id=question.agent_id.clone()
                                data-request-id=question.request.request_id().to_owned()>
                                <button class="agent-link" on:click=open>{name}</button>
                                <QuestionBody question=question.clone() shown=shown/>
                            </li>
                        }
                    }
                </For>
            </ul>
        </section>
    }
}
