//! The keyboard in the transcript (hydrate only). The transcript is one Tab
//! stop, not one per message: its Fork buttons are out of the Tab order, so
//! the message box is a few Tabs away however long the conversation. On
//! the transcript, ↑ and ↓ move from message to message; the message with
//! the focus shows its Fork, which is then the next Tab stop (and only its).

use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlElement, KeyboardEvent};

const MESSAGE: &str = ".message";

/// ↑/↓ on the transcript or one of its messages: focus to the previous or
/// next message. From the transcript itself, ↑ takes the lowest message in
/// view and ↓ the highest. Past the rendered rows the key scrolls as usual
/// (and the rows it brings are then reached).
pub fn step(event: &KeyboardEvent, transcript: &HtmlElement) {
    let forward = match event.key().as_str() {
        "ArrowDown" => true,
        "ArrowUp" => false,
        _ => return,
    };
    if event.ctrl_key() || event.alt_key() || event.meta_key() || event.shift_key() {
        return;
    }
    let Some(active) = crate::dialog::active_element() else { return };
    let messages = messages(transcript);
    let target = match messages.iter().position(|message| same(message, &active)) {
        Some(at) if forward => messages.get(at + 1),
        Some(at) => at.checked_sub(1).and_then(|before| messages.get(before)),
        // A button or a field inside the transcript keeps its own keys.
        None if !same(transcript, &active) => return,
        None => in_view(transcript, &messages, forward),
    };
    if let Some(target) = target {
        event.prevent_default();
        target.focus().ok();
        let options = web_sys::ScrollIntoViewOptions::new();
        options.set_block(web_sys::ScrollLogicalPosition::Nearest);
        target.scroll_into_view_with_scroll_into_view_options(&options);
    }
}

/// Focus moved inside the transcript: only the Fork of the message that
/// holds it is a Tab stop.
pub fn focus_moved(transcript: &HtmlElement, focused: Option<Element>) {
    let holder = focused.and_then(|focused| focused.closest(MESSAGE).ok().flatten());
    let own =
        holder.as_ref().and_then(|message| message.query_selector(":scope > .fork").ok().flatten());
    if let Ok(list) = transcript.query_selector_all(".fork[tabindex=\"0\"]") {
        for fork in (0..list.length()).filter_map(|index| list.item(index)) {
            let fork: Element = fork.unchecked_into();
            if own.as_ref() != Some(&fork) {
                fork.set_attribute("tabindex", "-1").ok();
            }
        }
    }
    if let Some(own) = own {
        own.set_attribute("tabindex", "0").ok();
    }
}

fn messages(transcript: &HtmlElement) -> Vec<HtmlElement> {
    let Ok(list) = transcript.query_selector_all(MESSAGE) else { return Vec::new() };
    (0..list.length())
        .filter_map(|index| list.item(index))
        .filter_map(|node| node.dyn_into::<HtmlElement>().ok())
        .collect()
}

/// The lowest message whose top is in view (`!forward`), or the highest
/// whose bottom is.
fn in_view<'a>(
    transcript: &HtmlElement,
    messages: &'a [HtmlElement],
    forward: bool,
) -> Option<&'a HtmlElement> {
    let view = transcript.get_bounding_client_rect();
    let shown = |message: &&HtmlElement| {
        let rect = message.get_bounding_client_rect();
        rect.bottom() > view.top() && rect.top() < view.bottom()
    };
    if forward { messages.iter().find(shown) } else { messages.iter().rev().find(shown) }
}

fn same(element: &HtmlElement, other: &Element) -> bool {
    element.unchecked_ref::<Element>() == other
}
