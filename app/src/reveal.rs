//! Bringing an element into view, and the keyboard onto it, once the pane
//! it is in is shown (a narrow screen shows one pane at a time).

use leptos::prelude::{document, request_animation_frame};

/// Brings the first element matching `selector` into view once the pane
/// it is in is shown, and puts the keyboard on the first match of `focus`
/// inside it. A part of the page that loads on first use (the prompt box,
/// a panel) may not be there yet: it is looked for again each frame, for
/// up to [`FRAMES`] frames.
pub fn reveal(selector: String, focus: Option<&'static str>) {
    reveal_within(selector, focus, FRAMES);
}

/// About two seconds of frames.
const FRAMES: u32 = 120;

fn reveal_within(selector: String, focus: Option<&'static str>, frames: u32) {
    use wasm_bindgen::JsCast;
    request_animation_frame(move || {
        let Some(found) = document().query_selector(&selector).ok().flatten() else {
            if frames > 0 {
                reveal_within(selector, focus, frames - 1);
            }
            return;
        };
        let inner = focus.map(|focus| found.query_selector(focus).ok().flatten());
        if let Some(None) = inner
            && frames > 0
        {
            return reveal_within(selector, focus, frames - 1);
        }
        let options = web_sys::ScrollIntoViewOptions::new();
        options.set_block(web_sys::ScrollLogicalPosition::Nearest);
        found.scroll_into_view_with_scroll_into_view_options(&options);
        let inner = inner.flatten().and_then(|inner| inner.dyn_into::<web_sys::HtmlElement>().ok());
        if let Some(inner) = inner {
            let _ = inner.focus();
        }
    });
}
