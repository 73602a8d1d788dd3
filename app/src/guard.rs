//! Answers that keystrokes meant for something else cannot give. A question
//! may arrive while the user is typing a prompt: it must never take that
//! typing as an answer. So:
//!
//! - opening a question never moves focus onto an answer button: the
//!   question dialog takes focus onto itself, so that what is typed next
//!   goes to it and not into the box behind its backdrop;
//! - a shortcut answers only when the question's own dialog or inbox entry
//!   has focus, never with a modifier held, never as a key's auto-repeat;
//! - nothing answers within [`ARM_DELAY_MS`] of the question appearing, not a
//!   shortcut, not Enter or Space on a button, not a click; in the dialog a
//!   key pressed meanwhile starts that wait again, so a typist who has not
//!   yet seen the question answers nothing however long they type;
//! - "Always allow" has no shortcut and takes two separate activations.

/// How long a new question ignores every answer. A person notices a change
/// on screen after about 250 ms and a typist has a key or two in flight
/// then; 800 ms covers that with room for a slow frame, and is still short
/// enough that a deliberate answer never notices it.
pub const ARM_DELAY_MS: f64 = 800.0;

/// A key press, as much of it as the guard needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Press<'a> {
    pub key: &'a str,
    pub ctrl: bool,
    pub alt: bool,
    pub meta: bool,
    pub shift: bool,
    pub repeat: bool,
}

/// Whether a question shown at `shown_at` takes answers at `now`.
pub fn armed(shown_at: f64, now: f64) -> bool {
    now - shown_at >= ARM_DELAY_MS
}

/// The shortcut `press` gives, if it may answer now: the bare key of one of
/// `shortcuts`, on an armed question whose own element has focus.
pub fn shortcut<'a>(
    press: &Press<'_>,
    shortcuts: &'a [String],
    shown_at: f64,
    now: f64,
) -> Option<&'a str> {
    if press.ctrl || press.alt || press.meta || press.shift || press.repeat {
        return None;
    }
    if !armed(shown_at, now) {
        return None;
    }
    shortcuts.iter().map(String::as_str).find(|shortcut| *shortcut == press.key)
}

/// Whether `key` (a `KeyboardEvent.key`) is a modifier alone, which types
/// nothing and so restarts no question's wait.
pub fn is_modifier(key: &str) -> bool {
    matches!(key, "Shift" | "Control" | "Alt" | "Meta" | "AltGraph" | "CapsLock")
}

/// The page's clock in milliseconds (0 outside the browser, where nothing
/// is ever answered).
pub fn now_ms() -> f64 {
    #[cfg(feature = "hydrate")]
    {
        web_sys::js_sys::Date::now()
    }
    #[cfg(not(feature = "hydrate"))]
    {
        0.0
    }
}

/// Whether the user is typing somewhere: focus is in a text field.
pub fn typing() -> bool {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let Some(active) = web_sys::window()
            .and_then(|window| window.document())
            .and_then(|document| document.active_element())
        else {
            return false;
        };
        let tag = active.tag_name().to_ascii_lowercase();
        let editable = active
            .dyn_ref::<web_sys::HtmlElement>()
            .is_some_and(web_sys::HtmlElement::is_content_editable);
        matches!(tag.as_str(), "textarea" | "input" | "select") || editable
    }
    #[cfg(not(feature = "hydrate"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<String> {
        vec!["y".to_owned(), "n".to_owned()]
    }

    #[test]
    fn nothing_answers_before_the_question_is_armed() {
        let press = Press { key: "y", ..Press::default() };
        assert_eq!(shortcut(&press, &keys(), 1000.0, 1000.0 + ARM_DELAY_MS - 1.0), None);
        assert_eq!(shortcut(&press, &keys(), 1000.0, 1000.0 + ARM_DELAY_MS), Some("y"));
        assert!(!armed(1000.0, 1500.0));
    }

    #[test]
    fn modifiers_and_repeats_never_answer() {
        let later = 10_000.0;
        for press in [
            Press { key: "y", ctrl: true, ..Press::default() },
            Press { key: "y", alt: true, ..Press::default() },
            Press { key: "y", meta: true, ..Press::default() },
            Press { key: "y", shift: true, ..Press::default() },
            Press { key: "y", repeat: true, ..Press::default() },
            Press { key: "a", ..Press::default() },
            Press { key: "Enter", ..Press::default() },
        ] {
            assert_eq!(shortcut(&press, &keys(), 0.0, later), None, "{press:?}");
        }
    }
}
