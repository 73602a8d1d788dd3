//! Search across every agent's sessions (crate::search): the header's
//! button, the panel with its box (also opened with `/` or Ctrl+K), and
//! the results grouped by agent, each a snippet whose matching words are
//! marked; choosing one opens its agent's transcript at the message. The
//! find bar of the agent on screen (crate::find) is here too: Ctrl+F, or
//! its button in the agent's header.

use leptos::prelude::*;
use shard_protocol::search::{SearchHit, SearchResults};
use shard_protocol::types::Role;

use super::state;
use crate::find::Find;
use crate::screen::Screen;
use crate::search::{Group, Outcome, Search, grouped};
use crate::state::ClientState;

/// The header's button.
#[component]
pub fn SearchButton() -> impl IntoView {
    let search = state().search;
    view! {
        <button class="search-open" title="Search every agent's messages (/ or Ctrl+K)"
            aria-expanded=move || search.open.get().to_string()
            on:click=move |_| open_search(search)>"Search"</button>
    }
}

/// Opens the search panel with the keyboard in its box.
pub fn open_search(search: Search) {
    search.open.set(true);
    #[cfg(feature = "hydrate")]
    focus("#search-input");
}

/// Opens the find bar of the agent on screen with the keyboard in it;
/// `false` when no agent is on screen.
pub fn open_find(screen: Screen, find: Find) -> bool {
    if screen.selected.get_untracked().is_none() {
        return false;
    }
    find.open.set(true);
    #[cfg(feature = "hydrate")]
    focus("#find-input");
    true
}

/// Puts the keyboard in the element `selector` names once it is rendered,
/// its text selected.
#[cfg(feature = "hydrate")]
fn focus(selector: &'static str) {
    use wasm_bindgen::JsCast;
    request_animation_frame(move || {
        let found = document().query_selector(selector).ok().flatten();
        if let Some(input) =
            found.and_then(|found| found.dyn_into::<web_sys::HtmlInputElement>().ok())
        {
            let _ = input.focus();
            input.select();
        }
    });
}

/// The search panel, loaded the first time it opens, then hidden while
/// closed.
#[component]
pub fn SearchPanel() -> impl IntoView {
    let open = state().search.open;
    super::deferred(move || open.get(), search_body)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(search_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn search_body() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let search = state.search;
    // The first opening's focus ran before this was loaded.
    #[cfg(feature = "hydrate")]
    focus("#search-input");
    let on_key = move |event: leptos::ev::KeyboardEvent| {
        match event.key().as_str() {
            "Escape" => search.open.set(false),
            // Down and up walk the box and the results.
            #[cfg(feature = "hydrate")]
            key @ ("ArrowDown" | "ArrowUp") => {
                use wasm_bindgen::JsCast;
                let panel = event
                    .current_target()
                    .and_then(|panel| panel.dyn_into::<web_sys::Element>().ok());
                if let Some(panel) = panel {
                    crate::dialog::step_focus(
                        &panel,
                        "#search-input, .search-hit",
                        key == "ArrowUp",
                    );
                }
            }
            _ => return,
        }
        event.prevent_default();
    };
    // The results, decoded once for the status line and the list.
    let found = Memo::new(move |_| {
        search.outcome.with(|outcome| match outcome {
            Outcome::Found(found) => Some(found.decoded()),
            _ => None,
        })
    });
    let status =
        move || found.with(|found| search.outcome.with(|outcome| status_of(outcome, found)));
    let failed = move || search.outcome.with(|outcome| matches!(outcome, Outcome::Failed(_)));
    let results = move || {
        let hits = found.with(|found| match found {
            Some(Ok(found)) => found.results.clone(),
            _ => Vec::new(),
        });
        grouped(hits).into_iter().map(|group| group_view(&state, group)).collect_view()
    };
    Ok(view! {
        <section class="search-panel" role="dialog" aria-label="Search messages"
            hidden=move || !search.open.get() on:keydown=on_key>
            <div class="search-bar">
                <input id="search-input" type="search" aria-label="Search messages"
                    placeholder="Search every agent's messages" autocomplete="off"
                    prop:value=search.text
                    on:input=move |event| search.typed(event_target_value(&event))/>
                <button type="button" on:click=move |_| search.open.set(false)>"Close"</button>
            </div>
            <p class="search-status" class:error=failed role="status">{status}</p>
            <div class="search-results">{results}</div>
        </section>
    }
    .into_any())
}

/// The line above the results (`found`: the results, decoded).
fn status_of(outcome: &Outcome, found: &Option<Result<SearchResults, String>>) -> String {
    match (outcome, found) {
        (Outcome::Nothing, _) => "Words from any agent's messages.".to_owned(),
        (Outcome::Searching, _) => "Searching…".to_owned(),
        (Outcome::Failed(why), _) | (Outcome::Found(_), Some(Err(why))) => why.clone(),
        (Outcome::Found(_), Some(Ok(found))) => match found.results.len() {
            0 => "No message has these words.".to_owned(),
            count => super::counted(count as u64, "message", "messages"),
        },
        (Outcome::Found(_), None) => String::new(),
    }
}

/// One agent's results under its name.
fn group_view(state: &ClientState, group: Group) -> impl IntoView + use<> {
    let name = group
        .hits
        .first()
        .and_then(|hit| hit.agent_name.clone())
        .unwrap_or_else(|| state.roster.name_of(&group.agent_id));
    let hits = group.hits.into_iter().map(|hit| hit_view(state.clone(), hit)).collect_view();
    view! {
        <section class="search-group" data-agent-id=group.agent_id>
            <h3>{shard_protocol::display::escaped(&name)}</h3>
            <ul>{hits}</ul>
        </section>
    }
}

/// One result: who said it, whether it is in another session of the
/// agent, and its snippet, the words that matched marked (as text).
fn hit_view(state: ClientState, hit: SearchHit) -> impl IntoView + use<> {
    let who = if hit.role == Role::Assistant { "agent" } else { "you" };
    let parts = hit
        .snippet
        .iter()
        .map(|part| {
            let class = if part.hit { "hit" } else { "" };
            view! { <span class=class>{part.text.clone()}</span> }
        })
        .collect_view();
    let (entry, active) = (hit.entry_id.clone(), hit.active);
    view! {
        <li>
            <button type="button" class="search-hit" data-entry-id=entry
                on:click=move |_| state.open_hit(&hit)>
                <span class="search-who">{who}</span>
                <span class="badge" hidden=active>"other session"</span>
                <span class="search-snippet">{parts}</span>
            </button>
        </li>
    }
}

/// The find bar of the agent on screen: the text, "n of m", and steps
/// through the rows that hold it (Enter, Shift+Enter). Hidden while closed.
#[component]
pub fn FindBar() -> impl IntoView {
    let open = state().find.open;
    super::deferred(move || open.get(), find_body)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(find_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn find_body() -> Result<AnyView, super::Unloaded> {
    let find = state().find;
    // The first opening's focus ran before this was loaded.
    #[cfg(feature = "hydrate")]
    focus("#find-input");
    let on_key = move |event: leptos::ev::KeyboardEvent| match event.key().as_str() {
        "Enter" => {
            event.prevent_default();
            find.step(!event.shift_key());
        }
        "Escape" => {
            event.prevent_default();
            find.close();
        }
        _ => {}
    };
    Ok(view! {
        <form class="find-bar" role="search" aria-label="Find in the transcript"
            hidden=move || !find.open.get() on:submit=move |event| event.prevent_default()>
            <input id="find-input" type="search" aria-label="Find in the transcript"
                placeholder="Find in this transcript" autocomplete="off"
                prop:value=find.text on:input=move |event| find.find(event_target_value(&event))
                on:keydown=on_key/>
            <span class="find-count" aria-live="polite">{move || find.count_label()}</span>
            <button type="button" on:click=move |_| find.step(false) aria-label="Previous match">"↑"</button>
            <button type="button" on:click=move |_| find.step(true) aria-label="Next match">"↓"</button>
            <button type="button" on:click=move |_| find.close()>"Close"</button>
        </form>
    }
    .into_any())
}
