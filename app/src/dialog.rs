//! The page's modal dialogs. Those that load their code on first use
//! (pairing, notifications) are native `<dialog>`s, in the page once their
//! code is, so opening one asks again after it renders. The question dialog
//! is drawn over the page instead (it must never focus an answer, which a
//! native modal does on opening): it keeps Tab inside itself
//! ([`cycle_focus`]) and gives focus back when it goes ([`remember_focus`]).

use leptos::html;
use leptos::prelude::*;

/// Shows `dialog` as modal if it is in the page and closed.
pub fn show_modal(dialog: NodeRef<html::Dialog>) {
    #[cfg(feature = "hydrate")]
    if let Some(dialog) = dialog.get_untracked()
        && !dialog.open()
    {
        let _ = dialog.show_modal();
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = dialog;
}

/// Closes `dialog` if it is in the page.
pub fn close(dialog: NodeRef<html::Dialog>) {
    if let Some(dialog) = dialog.get_untracked() {
        dialog.close();
    }
}

#[cfg(feature = "hydrate")]
thread_local! {
    /// Where focus was when a question dialog took it.
    static FOCUS_BEFORE: std::cell::RefCell<Option<web_sys::HtmlElement>> =
        const { std::cell::RefCell::new(None) };
}

/// Moves focus onto `container` (a question dialog), remembering where it
/// was for [`restore_focus`], unless it was already inside a dialog.
#[cfg(feature = "hydrate")]
pub fn remember_focus(container: &web_sys::HtmlElement) {
    use wasm_bindgen::JsCast;
    let before = active_element().and_then(|active| active.dyn_into::<web_sys::HtmlElement>().ok());
    if let Some(before) =
        before.filter(|before| before.closest(".overlay").ok().flatten().is_none())
    {
        FOCUS_BEFORE.with(|slot| *slot.borrow_mut() = Some(before));
    }
    let _ = container.focus();
}

/// Gives focus back to where it was before a question dialog took it, if
/// it is still in the page and focus is nowhere else the user put it.
#[cfg(feature = "hydrate")]
pub fn restore_focus() {
    let Some(before) = FOCUS_BEFORE.with(|slot| slot.borrow_mut().take()) else { return };
    let elsewhere = active_element().is_some_and(|active| {
        active.tag_name() != "BODY" && active.closest(".overlay").ok().flatten().is_none()
    });
    if before.is_connected() && !elsewhere {
        let _ = before.focus();
    }
}

/// Tab inside `container`: focus moves to its next control (the previous
/// one `backwards`), round from the last to the first, never out of it.
#[cfg(feature = "hydrate")]
pub fn cycle_focus(container: &web_sys::Element, backwards: bool) {
    step_focus(
        container,
        "button:not([disabled]), input:not([disabled]), textarea:not([disabled]), select, summary, a[href]",
        backwards,
    );
}

/// Focus to the next of `container`'s elements matching `selector` (the
/// previous one `backwards`), round from the last to the first.
#[cfg(feature = "hydrate")]
pub fn step_focus(container: &web_sys::Element, selector: &str, backwards: bool) {
    use wasm_bindgen::JsCast;
    let Ok(list) = container.query_selector_all(selector) else {
        return;
    };
    // Only what is shown: a hidden control has no offset parent.
    let controls: Vec<web_sys::HtmlElement> = (0..list.length())
        .filter_map(|index| list.item(index))
        .filter_map(|node| node.dyn_into::<web_sys::HtmlElement>().ok())
        .filter(|control| control.offset_parent().is_some())
        .collect();
    if controls.is_empty() {
        return;
    }
    let active = active_element();
    let at = controls.iter().position(|control| {
        active.as_ref().is_some_and(|active| active == control.unchecked_ref::<web_sys::Element>())
    });
    let last = controls.len() - 1;
    let next = match (at, backwards) {
        (None, false) => 0,
        (None, true) => last,
        (Some(at), false) => {
            if at == last {
                0
            } else {
                at + 1
            }
        }
        (Some(at), true) => {
            if at == 0 {
                last
            } else {
                at - 1
            }
        }
    };
    let _ = controls[next].focus();
}

#[cfg(feature = "hydrate")]
pub fn active_element() -> Option<web_sys::Element> {
    web_sys::window()?.document()?.active_element()
}
