//! What this tab keeps across a reload (the browser's sessionStorage, so per
//! tab and gone with it): the agent on screen and every half-written prompt.
//! A reconnect needs none of this (the state outlives the connection); a
//! reload of the page does.

use std::collections::BTreeMap;

use leptos::prelude::*;

use crate::state::ClientState;

const SELECTED: &str = "shard.selected";
const DRAFTS: &str = "shard.drafts";

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok()?
}

/// Brings back what the tab had before a reload, before it connects.
pub fn restore(state: &ClientState) {
    let Some(storage) = storage() else { return };
    let drafts: BTreeMap<String, String> = storage
        .get_item(DRAFTS)
        .ok()
        .flatten()
        .and_then(|json| serde_json::from_str(&json).ok())
        .unwrap_or_default();
    let selected = storage.get_item(SELECTED).ok().flatten().filter(|id| !id.is_empty());
    let screen = state.screen;
    if let Some(agent_id) = &selected {
        screen.drafts.draft.set(drafts.get(agent_id).cloned().unwrap_or_default());
    }
    screen.drafts.others.set(drafts);
    // The connection attaches it once greeted.
    screen.selected.set(selected);
}

/// Keeps storage up to date as the user selects and types.
pub fn keep(state: &ClientState) {
    let screen = state.screen;
    let (selected, draft, drafts) = (screen.selected, screen.drafts.draft, screen.drafts.others);
    Effect::new(move |_| {
        let Some(storage) = storage() else { return };
        let selected = selected.get();
        let mut all = drafts.get();
        if let Some(agent_id) = &selected {
            let draft = draft.get();
            if draft.is_empty() {
                all.remove(agent_id);
            } else {
                all.insert(agent_id.clone(), draft);
            }
        }
        let _ = storage.set_item(SELECTED, selected.as_deref().unwrap_or(""));
        if let Ok(json) = serde_json::to_string(&all) {
            let _ = storage.set_item(DRAFTS, &json);
        }
    });
}
