//! Keeps the transcript at its end while the user is there (hydrate only).
//! Whether the user is "there" changes only when they scroll; when the
//! content grows or the view shrinks, a `ResizeObserver` (at most once a frame, after layout,
//! never once per delta) brings the end back into view. Once the user
//! scrolls up, or while the view shows a window that is not the end (paged
//! back, or moved to a row found), nothing moves under them.
//!
//! The view it serves can go (the agent is left, a phone goes back to the
//! list) while the browser still has a scroll or a resize to tell: from
//! then on it does nothing, and the observer lets go.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use leptos::prelude::{GetUntracked, RwSignal, Set};
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{HtmlDivElement, ResizeObserver};

/// How close to the end still counts as at the end, in CSS pixels.
const SLACK_PX: i32 = 8;

fn at_end(scroller: &HtmlDivElement) -> bool {
    scroller.scroll_height() - scroller.scroll_top() - scroller.client_height() <= SLACK_PX
}

/// One view's follower, for a jump to the end (a prompt sent, "↓ Latest"):
/// the jump goes through it, so that its scroll is known for the code's own
/// and not read as the user's, even when the content grew again before
/// the browser told of it.
#[derive(Clone)]
pub struct Follower {
    scroller: HtmlDivElement,
    following: Rc<Cell<bool>>,
    ours: Rc<Cell<i32>>,
    away: RwSignal<bool>,
    gone: Arc<AtomicBool>,
}

impl Follower {
    /// Shows the end and follows it from now on.
    pub fn to_end(&self) {
        if self.gone.load(Ordering::Relaxed) {
            return;
        }
        self.following.set(true);
        self.scroller.set_scroll_top(self.scroller.scroll_height());
        self.ours.set(self.scroller.scroll_top());
        if self.away.get_untracked() {
            self.away.set(false);
        }
    }
}

/// Keeps `scroller` at its end while the user is at it and
/// `following_end` says the view shows the end, as `content` grows; `away`
/// says whether the user scrolled up from it (set only when that changes,
/// never per scroll event). Once `gone` is set (the view was unmounted,
/// and `away` with it) nothing is read or moved again. The follower it
/// returns is how the view jumps to the end.
pub fn stick_to_end(
    scroller: HtmlDivElement,
    content: HtmlDivElement,
    following_end: impl Fn() -> bool + 'static,
    away: RwSignal<bool>,
    gone: Arc<AtomicBool>,
) -> Follower {
    let following = Rc::new(Cell::new(true));
    // Where this code last put the view: its own scroll is not the user's,
    // even when the content grew again before the event came.
    let ours = Rc::new(Cell::new(-1));
    let follower = Follower {
        scroller: scroller.clone(),
        following: following.clone(),
        ours: ours.clone(),
        away,
        gone: gone.clone(),
    };
    let on_scroll = {
        let (following, ours, scroller) = (following.clone(), ours.clone(), scroller.clone());
        let gone = gone.clone();
        Closure::<dyn FnMut()>::new(move || {
            if gone.load(Ordering::Relaxed) {
                return;
            }
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
    // Set once it exists: the closure it calls lets it go once the view is.
    let observer: Rc<Cell<Option<ResizeObserver>>> = Rc::default();
    let on_resize = {
        let (scroller, observer) = (scroller.clone(), observer.clone());
        Closure::<dyn FnMut()>::new(move || {
            if gone.load(Ordering::Relaxed) {
                if let Some(observer) = observer.take() {
                    observer.disconnect();
                }
                return;
            }
            if following.get() && following_end() {
                scroller.set_scroll_top(scroller.scroll_height());
                ours.set(scroller.scroll_top());
            }
        })
    };
    // The view's own height changes too (a panel opens above it, a
    // chunk's header arrives, a phone's keyboard shows): then the end
    // would slip out of sight with no scroll to say so.
    if let Ok(made) = ResizeObserver::new(on_resize.as_ref().unchecked_ref()) {
        made.observe(&content);
        made.observe(&scroller);
        observer.set(Some(made));
    }
    // Handed to the browser, which frees them with the elements and the
    // observer that call them.
    let _ = on_scroll.into_js_value();
    let _ = on_resize.into_js_value();
    follower
}
