//! Desktop notifications for questions that wait. A question notifies only
//! if it is still open [`NOTIFY_DELAY_MS`] after it arrived (one answered at
//! once, here or in another tab, never pops up), and never while its agent
//! is on screen in a visible tab (the dialog is already in front of the
//! user), nor in a hidden tab of a browser that takes pushes (the push of
//! it can answer; one from here would replace it). Permission is asked
//! once, from a click in the Notifications dialog (views::push; browsers
//! only allow it at a user gesture); a browser that granted it before
//! starts with notifications on. The tab title counts open questions
//! (crate::Home).

#[cfg(feature = "hydrate")]
use leptos::prelude::*;

#[cfg(feature = "hydrate")]
use crate::questions::Question;
#[cfg(feature = "hydrate")]
use crate::state::ClientState;

/// How long a question waits before it notifies.
#[cfg(feature = "hydrate")]
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

/// Every question new to the page notifies later if it still waits then.
#[cfg(feature = "hydrate")]
pub fn listen(state: &ClientState) {
    let page = state.clone();
    state.questions.listen(Box::new(move |question| schedule(&page, question)));
}

#[cfg(feature = "hydrate")]
fn schedule(state: &ClientState, question: &Question) {
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
    let open = state.questions.is_open(question);
    let on_screen = !hidden() && state.screen.shows(&question.agent_id);
    if !open || on_screen || !state.questions.notify.get_untracked() || !granted() {
        return;
    }
    let body = match &question.request {
        PendingKind::Permission(request) => request.prompt.clone(),
        PendingKind::Ui(request) => {
            request.message.clone().or(request.title.clone()).unwrap_or_default()
        }
    };
    // Hidden characters as visible escapes (shard_protocol::display).
    let body = shard_protocol::display::escaped(&crate::markdown::untick(&body));
    let options = web_sys::NotificationOptions::new();
    options.set_body(&body);
    // The tag of the push of it too (shard_protocol::web::question_tag).
    let tag = shard_protocol::web::question_tag(&question.agent_id, question.request.request_id());
    options.set_tag(&tag);
    let name = shard_protocol::display::escaped(&state.roster.name_of(&question.agent_id));
    let title = format!("{name} needs an answer");
    let (state, agent_id) = (state.clone(), question.agent_id.clone());
    leptos::task::spawn_local(async move {
        // Hidden, in a browser that takes pushes (docs/NOTIFICATIONS.md):
        // the daemon pushes the question while no tab of it is on screen,
        // and that notification has Allow and Deny, which one of the same
        // tag from here would replace.
        if hidden() && subscribed().await {
            return;
        }
        let Ok(notification) = web_sys::Notification::new_with_options(&title, &options) else {
            return;
        };
        // A click brings the tab forward with that agent on screen.
        let open_agent = Closure::once_into_js(move || {
            if let Some(window) = web_sys::window() {
                let _ = window.focus();
            }
            state.select(Some(agent_id));
        });
        notification.set_onclick(Some(open_agent.unchecked_ref()));
    });
}

/// Whether this browser holds a push subscription. Asked of the push
/// manager, not of the shown notifications: Chromium can lose a notification
/// that a service worker is showing while the page reads them.
#[cfg(feature = "hydrate")]
async fn subscribed() -> bool {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let Some(window) = web_sys::window() else { return false };
    if !window.is_secure_context() {
        return false;
    }
    let found = JsFuture::from(window.navigator().service_worker().get_registration()).await;
    let Ok(registration) =
        found.and_then(|found| found.dyn_into::<web_sys::ServiceWorkerRegistration>())
    else {
        return false;
    };
    let Ok(asked) = registration.push_manager().and_then(|push| push.get_subscription()) else {
        return false;
    };
    JsFuture::from(asked).await.is_ok_and(|subscription| !subscription.is_null())
}

/// Where a tab's "Turn off in this tab" is kept (the tab's own storage):
/// the browser's permission outlives it.
#[cfg(feature = "hydrate")]
const TAB_OFF: &str = "shard.tab-notifications-off";

/// Turns notifications on if this browser already allows them, unless
/// this tab turned them off.
#[cfg(feature = "hydrate")]
pub fn restore(state: &ClientState) {
    let off = tab_storage().and_then(|storage| storage.get_item(TAB_OFF).ok().flatten()).is_some();
    if granted() && !off {
        state.questions.notify.set(true);
    }
}

/// This tab's notifications on or off, as the user chose; kept for a reload.
#[cfg(feature = "hydrate")]
pub fn set_for_tab(notify: RwSignal<bool>, on: bool) {
    notify.set(on);
    if let Some(storage) = tab_storage() {
        let _ = if on { storage.remove_item(TAB_OFF) } else { storage.set_item(TAB_OFF, "1") };
    }
}

#[cfg(feature = "hydrate")]
fn tab_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}
