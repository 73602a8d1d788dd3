//! Browser notifications and the tab title, for questions that arrive while
//! the tab is hidden. Permission is asked once, from a click (browsers only
//! allow it at a user gesture).

use leptos::prelude::*;

use crate::state::ClientState;
use crate::state::Question;

#[cfg(feature = "hydrate")]
fn hidden() -> bool {
    web_sys::window()
        .and_then(|window| window.document())
        .is_some_and(|document| document.visibility_state() == web_sys::VisibilityState::Hidden)
}

/// Shows a notification for a new question when the tab is hidden.
#[cfg(feature = "hydrate")]
pub fn question(state: &ClientState, question: &Question) {
    use shard_protocol::agent::PendingKind;
    if !state.notify.get_untracked() || !hidden() {
        return;
    }
    if web_sys::Notification::permission() != web_sys::NotificationPermission::Granted {
        return;
    }
    let body = match &question.request {
        PendingKind::Permission(request) => request.prompt.clone(),
        PendingKind::Ui(request) => {
            request.message.clone().or(request.title.clone()).unwrap_or_default()
        }
    };
    let options = web_sys::NotificationOptions::new();
    options.set_body(&body);
    options.set_tag(question.request.request_id());
    let title = format!("{} needs an answer", state.agent_name(&question.agent_id));
    let _ = web_sys::Notification::new_with_options(&title, &options);
}

/// Outside the browser there is nothing to notify.
#[cfg(not(feature = "hydrate"))]
#[allow(dead_code)] // called by the reducer, which only the browser feeds
pub fn question(_: &ClientState, _: &Question) {}

/// Asks for notification permission (from a click) and turns them on.
pub fn enable(state: &ClientState) {
    state.notify.set(true);
    #[cfg(feature = "hydrate")]
    {
        let _ = web_sys::Notification::request_permission();
    }
}
