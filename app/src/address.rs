//! The address bar follows the agent on screen: `#agent=ID` while one is,
//! the bare page while the list is. Opening an agent from the list adds an
//! entry to the tab's history, so that the browser's Back (or a phone's
//! back gesture) returns to the list instead of leaving Shard; moving from
//! one agent to another replaces it, so Back never walks through every
//! agent looked at. The address of an agent opens it, in this tab or
//! another, after a reload, and from a notification (public/sw.js).

use leptos::prelude::*;
use wasm_bindgen::JsValue;

use crate::state::ClientState;

/// What the history entries this page adds hold, to tell them from others.
const PUSHED: &str = "shard.agent";

/// The agent an address names.
pub fn agent_in(hash: &str) -> Option<String> {
    let id = hash.strip_prefix("#agent=")?;
    let id = web_sys::js_sys::decode_uri_component(id).ok().map(String::from)?;
    (!id.is_empty()).then_some(id)
}

/// Keeps the address on the agent on screen, and the agent on screen on
/// the address as Back and Forward move it.
pub fn follow(state: &ClientState) {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(window) = web_sys::window() else { return };
    let selected = state.screen.selected;
    Effect::new(move |_| {
        let wanted = selected
            .get()
            .map(|agent_id| format!("#agent={}", web_sys::js_sys::encode_uri_component(&agent_id)));
        let Some(window) = web_sys::window() else { return };
        let (location, Ok(history)) = (window.location(), window.history()) else { return };
        let Ok(hash) = location.hash() else { return };
        // Only an agent's address is this code's: `#enroll=` is the
        // connection's to take (crate::client).
        let on_agent = agent_in(&hash).is_some();
        if on_agent.then_some(hash.as_str()) == wanted.as_deref() || hash.starts_with("#enroll=") {
            return;
        }
        let path = location.pathname().unwrap_or_default();
        let url = format!("{path}{}", wanted.as_deref().unwrap_or_default());
        if wanted.is_some() && !on_agent {
            let _ = history.push_state_with_url(&JsValue::from_str(PUSHED), "", Some(&url));
        } else {
            // One agent for another keeps the entry this page added; the
            // list in its place makes it an entry of the list.
            let kept = match wanted {
                Some(_) => history.state().unwrap_or(JsValue::NULL),
                None => JsValue::NULL,
            };
            let _ = history.replace_state_with_url(&kept, "", Some(&url));
        }
    });
    let state = state.clone();
    let moved = Closure::<dyn FnMut()>::new(move || {
        let hash = web_sys::window().and_then(|window| window.location().hash().ok());
        match hash.as_deref().and_then(agent_in) {
            Some(agent_id) => state.select(Some(agent_id)),
            None => state.show_list(),
        }
    });
    let _ = window.add_event_listener_with_callback("popstate", moved.as_ref().unchecked_ref());
    // It lives as long as the page.
    moved.forget();
}

/// Leaves the agent on screen for the list: by going back when this page
/// added the agent's entry (so the browser's Forward returns to it), else
/// in place. Whether it went back (the `popstate` then does the rest).
pub fn back() -> bool {
    let Some(history) = web_sys::window().and_then(|window| window.history().ok()) else {
        return false;
    };
    let ours = history.state().ok().and_then(|state| state.as_string()).as_deref() == Some(PUSHED);
    ours && history.back().is_ok()
}
