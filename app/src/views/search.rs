//! Search across every agent's sessions (crate::search): the header's
//! button, the panel with its box (also opened with `/` or Ctrl+K), and
//! the results grouped by agent, each a snippet whose matching words are
//! marked; choosing one opens its agent's transcript at the message. The
//! find bar of the agent on screen (crate::find) is here too: Ctrl+F, or
//! its button in the agent's header.

use leptos::prelude::*;
use shard_protocol::search::{SearchHit, SnippetPart};
use shard_protocol::types::Role;

use super::state;
use crate::find::Find;
use crate::screen::Screen;
use crate::search::{Group, Outcome, Search};

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

#[component]
pub fn SearchPanel() -> impl IntoView {
    let search = state().search;
    let close = move || search.open.set(false);
    let on_key = move |event: leptos::ev::KeyboardEvent| {
        if event.key() == "Escape" {
            event.prevent_default();
            close();
        }
    };
    view! {
        <Show when=move || search.open.get()>
            <section class="search-panel" role="dialog" aria-label="Search messages" on:keydown=on_key>
                <div class="search-bar">
                    <input id="search-input" type="search" aria-label="Search messages"
                        placeholder="Search every agent's messages" autocomplete="off"
                        prop:value=search.text
                        on:input=move |event| search.typed(event_target_value(&event))/>
                    <button type="button" class="search-close" on:click=move |_| close()>"Close"</button>
                </div>
                <SearchOutcome/>
            </section>
        </Show>
    }
}

#[component]
fn SearchOutcome() -> impl IntoView {
    let search = state().search;
    move || match search.outcome.get() {
        Outcome::Nothing => {
            view! { <p class="search-status">"Words from any agent's messages."</p> }.into_any()
        }
        Outcome::Searching => view! { <p class="search-status">"Searching…"</p> }.into_any(),
        Outcome::Failed(why) => {
            view! { <p class="search-status error" role="alert">{why}</p> }.into_any()
        }
        Outcome::Found(groups) if groups.is_empty() => {
            view! { <p class="search-status">"No message has these words."</p> }.into_any()
        }
        Outcome::Found(groups) => {
            let count: usize = groups.iter().map(|group| group.hits.len()).sum();
            let label =
                if count == 1 { "1 message".to_owned() } else { format!("{count} messages") };
            view! {
                <p class="search-status" role="status">{label}</p>
                <div class="search-results">
                    {groups.into_iter().map(|group| view! { <GroupView group=group/> }).collect_view()}
                </div>
            }
            .into_any()
        }
    }
}

#[component]
fn GroupView(group: Group) -> impl IntoView {
    let roster = state().roster;
    let name = shard_protocol::display::escaped(
        &group
            .hits
            .first()
            .and_then(|hit| hit.agent_name.clone())
            .unwrap_or_else(|| roster.name_of(&group.agent_id)),
    );
    view! {
        <section class="search-group" data-agent-id=group.agent_id.clone()>
            <h3>{name}</h3>
            <ul>
                {group.hits.into_iter().map(|hit| view! { <HitView hit=hit/> }).collect_view()}
            </ul>
        </section>
    }
}

#[component]
fn HitView(hit: SearchHit) -> impl IntoView {
    let state = state();
    let who = match hit.role {
        Role::Assistant => "agent",
        _ => "you",
    };
    let elsewhere = (!hit.active).then(|| view! { <span class="badge">"other session"</span> });
    let snippet = hit.snippet.clone().into_iter().map(part).collect_view();
    let entry = hit.entry_id.clone();
    let open = move |_| state.open_hit(&hit);
    view! {
        <li>
            <button type="button" class="search-hit" data-entry-id=entry on:click=open>
                <span class="search-who">{who}</span>
                {elsewhere}
                <span class="search-snippet">{snippet}</span>
            </button>
        </li>
    }
}

/// A piece of a snippet: text, the words that matched marked.
fn part(part: SnippetPart) -> AnyView {
    if part.hit { view! { <mark>{part.text}</mark> }.into_any() } else { part.text.into_any() }
}

/// The find bar of the agent on screen: the text, "n of m", and steps
/// through the rows that hold it (Enter, Shift+Enter).
#[component]
pub fn FindBar() -> impl IntoView {
    let find = state().find;
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
    let count = move || find.count_label();
    view! {
        <Show when=move || find.open.get()>
            <form class="find-bar" role="search" aria-label="Find in the transcript"
                on:submit=move |event| event.prevent_default()>
                <input id="find-input" type="search" aria-label="Find in the transcript"
                    placeholder="Find in this transcript" autocomplete="off"
                    prop:value=find.text on:input=move |event| find.find(event_target_value(&event))
                    on:keydown=on_key/>
                <span class="find-count" aria-live="polite">{count}</span>
                <button type="button" on:click=move |_| find.step(false) aria-label="Previous match">"↑"</button>
                <button type="button" on:click=move |_| find.step(true) aria-label="Next match">"↓"</button>
                <button type="button" on:click=move |_| find.close()>"Close"</button>
            </form>
        </Show>
    }
}
