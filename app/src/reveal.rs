//! Bringing an element into view, and the keyboard onto it, once the pane
//! it is in is shown (a narrow screen shows one pane at a time).

use leptos::prelude::{document, request_animation_frame};

/// Brings the first element matching `selector` into view once the pane
/// it is in is shown, and puts the keyboard on the first match of `focus`
/// inside it.
pub fn reveal(selector: String, focus: Option<&'static str>) {
    use wasm_bindgen::JsCast;
    request_animation_frame(move || {
        let Some(found) = document().query_selector(&selector).ok().flatten() else { return };
        let options = web_sys::ScrollIntoViewOptions::new();
        options.set_block(web_sys::ScrollLogicalPosition::Nearest);
        found.scroll_into_view_with_scroll_into_view_options(&options);
        let inner = focus.and_then(|focus| found.query_selector(focus).ok().flatten());
        if let Some(inner) = inner.and_then(|inner| inner.dyn_into::<web_sys::HtmlElement>().ok()) {
            let _ = inner.focus();
        }
    });
}
