//! Keeps the transcript at its end while the user is there (hydrate only).
//! Whether the user is "there" changes only when they scroll; when the
//! content grows or the view shrinks, a `ResizeObserver` (at most once a frame, after layout,
//! never once per delta) brings the end back into view. Once the user
//! scrolls up, or while the view shows a window that is not the end (paged
//! back, or moved to a row found), nothing moves under them.

use std::cell::Cell;
use std::rc::Rc;

use leptos::prelude::{GetUntracked, RwSignal, Set};
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{HtmlDivElement, ResizeObserver};

/// How close to the end still counts as at the end, in CSS pixels.
const SLACK_PX: i32 = 8;

fn at_end(scroller: &HtmlDivElement) -> bool {
    scroller.scroll_height() - scroller.scroll_top() - scroller.client_height() <= SLACK_PX
}

/// Keeps `scroller` at its end while the user is at it and
/// `following_end` says the view shows the end, as `content` grows; `away`
/// says whether the user scrolled up from it (set only when that changes,
/// never per scroll event).
pub fn stick_to_end(
    scroller: HtmlDivElement,
    content: HtmlDivElement,
    following_end: impl Fn() -> bool + 'static,
    away: RwSignal<bool>,
) {
    let following = Rc::new(Cell::new(true));
    // Where this code last put the view: its own scroll is not the user's,
    // even when the content grew again before the event came.
    let ours = Rc::new(Cell::new(-1));
    let on_scroll = {
        let (following, ours, scroller) = (following.clone(), ours.clone(), scroller.clone());
        Closure::<dyn FnMut()>::new(move || {
            if scroller.scroll_top() != ours.get() {
                let there = at_end(&scroller);
                following.set(there);
                if away.get_untracked() == there {
                    away.set(!there);
                }
            }
        })
    };
    let _ = scroller.add_event_listener_with_callback("scroll", on_scroll.as_ref().unchecked_ref());
    let on_resize = {
        let scroller = scroller.clone();
        Closure::<dyn FnMut()>::new(move || {
            if following.get() && following_end() {
                scroller.set_scroll_top(scroller.scroll_height());
                ours.set(scroller.scroll_top());
            }
        })
    };
    // The view's own height changes too (a panel opens above it, a
    // chunk's header arrives, a phone's keyboard shows): then the end
    // would slip out of sight with no scroll to say so.
    if let Ok(observer) = ResizeObserver::new(on_resize.as_ref().unchecked_ref()) {
        observer.observe(&content);
        observer.observe(&scroller);
    }
    // They live as long as the page's transcript view, which is made once
    // per opening of the agent pane: a few closures, not per row or delta.
    on_scroll.forget();
    on_resize.forget();
}
