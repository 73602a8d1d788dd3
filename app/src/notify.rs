//! Desktop notifications for questions that wait. A question notifies only
//! if it is still open [`NOTIFY_DELAY_MS`] after it arrived (one answered at
//! once, here or in another tab, never pops up), and never while its agent
//! is on screen in a visible tab (the dialog is already in front of the
//! user). Permission is asked once, from a click (browsers only allow it at
//! a user gesture); a browser that granted it before starts with
//! notifications on. The tab title counts open questions (crate::Home).

use leptos::prelude::*;

use crate::state::ClientState;
use crate::state::Question;

/// How long a question waits before it notifies.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub const NOTIFY_DELAY_MS: u64 = 3_000;

#[cfg(feature = "hydrate")]
fn hidden() -> bool {
    web_sys::window()
        .and_then(|window| window.document())
        .is_some_and(|document| document.visibility_state() == web_sys::VisibilityState::Hidden)
}

#[cfg(feature = "hydrate")]
fn granted() -> bool {
    web_sys::Notification::permission() == web_sys::NotificationPermission::Granted
}

/// A new question arrived: notify about it later if it still waits then.
#[cfg(feature = "hydrate")]
pub fn question(state: &ClientState, question: &Question) {
    let (state, question) = (state.clone(), question.clone());
    set_timeout(
        move || notify_if_waiting(&state, &question),
        std::time::Duration::from_millis(NOTIFY_DELAY_MS),
    );
}

#[cfg(feature = "hydrate")]
fn notify_if_waiting(state: &ClientState, question: &Question) {
    use shard_protocol::agent::PendingKind;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let open = state.questions.with_untracked(|open| open.contains_key(&question.key()));
    let on_screen = !hidden()
        && state.selected.with_untracked(|selected| selected.as_ref() == Some(&question.agent_id));
    if !open || on_screen || !state.notify.get_untracked() || !granted() {
        return;
    }
    let body = match &question.request {
        PendingKind::Permission(request) => request.prompt.clone(),
        PendingKind::Ui(request) => {
            request.message.clone().or(request.title.clone()).unwrap_or_default()
        }
    };
    // Hidden characters as visible escapes (shard_protocol::display).
    let body = shard_protocol::display::escaped(&body);
    let options = web_sys::NotificationOptions::new();
    options.set_body(&body);
    options.set_tag(question.request.request_id());
    let name = shard_protocol::display::escaped(&state.agent_name(&question.agent_id));
    let title = format!("{name} needs an answer");
    let Ok(notification) = web_sys::Notification::new_with_options(&title, &options) else {
        return;
    };
    // A click brings the tab forward with that agent on screen.
    let (state, agent_id) = (state.clone(), question.agent_id.clone());
    let open_agent = Closure::once_into_js(move || {
        if let Some(window) = web_sys::window() {
            let _ = window.focus();
        }
        state.select(Some(agent_id));
    });
    notification.set_onclick(Some(open_agent.unchecked_ref()));
}

/// Outside the browser there is nothing to notify.
#[cfg(not(feature = "hydrate"))]
#[allow(dead_code)] // called by the reducer, which only the browser feeds
pub fn question(_: &ClientState, _: &Question) {}

/// Turns notifications on if this browser already allows them.
#[cfg(feature = "hydrate")]
pub fn restore(state: &ClientState) {
    if granted() {
        state.notify.set(true);
    }
}

/// Asks for notification permission (from a click) and turns them on.
pub fn enable(state: &ClientState) {
    state.notify.set(true);
    #[cfg(feature = "hydrate")]
    {
        let _ = web_sys::Notification::request_permission();
    }
}
