//! What a narrow screen adds: it shows one pane at a time (the agents, the
//! agent on screen, the approval inbox; `data-pane` on the layout, read by
//! the stylesheet), and this bar at its bottom moves between them and says
//! how many questions wait. A wide screen hides the bar.

use leptos::prelude::*;

use super::state;
use crate::state::Pane;

#[component]
pub fn PhoneBar() -> impl IntoView {
    let state = state();
    let pane = state.pane;
    let open = state.questions.open;
    let waiting = move || open.with(|questions| questions.len());
    let to_list = {
        let state = state.clone();
        move |_| back_to_list(&state)
    };
    // The inbox has its own pane: the agent on screen is left, so that its
    // dialog does not cover the inbox.
    let to_inbox = move |_| {
        state.select(None);
        pane.set(Pane::Inbox);
    };
    let pressed = move |which: Pane| move || (pane.get() == which).to_string();
    view! {
        <nav class="phonebar" aria-label="Panes">
            <button aria-pressed=pressed(Pane::List) on:click=to_list>"Agents"</button>
            <button class="waiting" class:active=move || { waiting() > 0 } aria-pressed=pressed(Pane::Inbox)
                on:click=to_inbox>
                {move || format!("{} waiting", waiting())}
            </button>
        </nav>
    }
}

/// Leaves the agent on screen for the list, where its row is brought into
/// view (on a phone the list is another pane). Where the page added the
/// agent's history entry, by going back (crate::address), so that Forward
/// returns to the agent: the `popstate` that follows comes here again.
pub fn back_to_list(state: &crate::state::ClientState) {
    #[cfg(feature = "hydrate")]
    if crate::address::back() {
        return;
    }
    state.show_list();
}
