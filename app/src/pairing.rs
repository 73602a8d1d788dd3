//! Pairing another device from this enrolled page (docs/SECURITY.md,
//! "Pairing a device"): the dialog's state. The link comes from `POST
//! /pair` (`client::pair` asks for it and counts its time down); the daemon
//! draws its QR code, so the page only shows it, as an image. A link lives
//! as long as the daemon says and dies when used, when a new one is asked
//! for, or with this page's session.

use leptos::html;
use leptos::prelude::*;
#[cfg(any(feature = "hydrate", test))]
use shard_protocol::web::PairAnswer;

/// The link on show.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub url: String,
    /// The QR code as an image URL ([`image_url`]).
    pub qr: String,
    /// When the link dies, on the page's clock (ms).
    pub until_ms: f64,
    /// The link names the daemon's loopback address: it works on this
    /// computer only (a phone would open it on itself).
    pub local_only: bool,
}

#[derive(Clone, Copy)]
pub struct Pairing {
    /// The page's one `<dialog>` for it: modal, closed by Escape. Its code
    /// loads the first time it is wanted ([`Pairing::wanted`]).
    pub dialog: NodeRef<html::Dialog>,
    /// Whether the dialog was ever opened.
    pub wanted: RwSignal<bool>,
    pub shown: RwSignal<Option<Shown>>,
    /// Whole seconds the link has left; 0 once it expired.
    pub left: RwSignal<u64>,
    /// The link on show was used (`pair_used`): a browser enrolled by it.
    pub used: RwSignal<bool>,
    pub error: RwSignal<Option<String>>,
}

impl Pairing {
    pub fn new() -> Self {
        Self {
            dialog: NodeRef::new(),
            wanted: RwSignal::new(false),
            shown: RwSignal::new(None),
            left: RwSignal::new(0),
            used: RwSignal::new(false),
            error: RwSignal::new(None),
        }
    }

    /// Opens the dialog, empty until the new link arrives. The first time,
    /// its code is still loading: the dialog opens itself once it is in the
    /// page ([`Pairing::show_modal`]).
    pub fn opened(self) {
        self.shown.set(None);
        self.used.set(false);
        self.error.set(None);
        self.wanted.set(true);
        self.show_modal();
    }

    /// Shows the dialog as modal if it is in the page and closed.
    pub fn show_modal(self) {
        crate::dialog::show_modal(self.dialog);
    }

    /// Closes the dialog; its `close` event calls [`Pairing::closed`].
    pub fn close(self) {
        crate::dialog::close(self.dialog);
    }

    /// The dialog closed (by "Close" or Escape): the link is off show.
    pub fn closed(self) {
        self.shown.set(None);
    }

    /// `pair_used`: this session's link was used, so it works no more. The
    /// dialog says so, if it shows the link, and stops counting it down.
    pub fn link_used(self) {
        if self.shown.with_untracked(Option::is_some) {
            self.used.set(true);
        }
    }

    /// The daemon's answer, received at `now_ms`; returns its URL.
    #[cfg(any(feature = "hydrate", test))]
    pub fn show(self, answer: PairAnswer, now_ms: f64) -> String {
        let until_ms = now_ms + answer.expires_in_ms as f64;
        let qr = image_url(&answer.qr_svg);
        let local_only = answer.local_only;
        self.shown.set(Some(Shown { url: answer.url.clone(), qr, until_ms, local_only }));
        self.left.set(seconds_left(until_ms, now_ms));
        answer.url
    }

    /// `POST /pair` refused with `status` (0: no answer).
    #[cfg(feature = "hydrate")]
    pub fn failed(self, status: u16) {
        let why = match status {
            401 => "This browser's enrollment has ended: reload the page.",
            429 => "Too many tries; wait a minute.",
            _ => "No link could be made; try again.",
        };
        self.error.set(Some(why.to_owned()));
    }

    /// Counts the link `url` down at `now_ms`: whether it is still on show
    /// and alive, so worth counting again.
    #[cfg(any(feature = "hydrate", test))]
    pub fn tick(self, url: &str, now_ms: f64) -> bool {
        let until = self.shown.with_untracked(|shown| {
            shown.as_ref().filter(|shown| shown.url == url).map(|shown| shown.until_ms)
        });
        let Some(until_ms) = until else { return false };
        if self.used.get_untracked() {
            return false;
        }
        let left = seconds_left(until_ms, now_ms);
        self.left.set(left);
        left > 0
    }
}

impl Default for Pairing {
    fn default() -> Self {
        Self::new()
    }
}

/// Whole seconds from `now_ms` to `until_ms`, rounded up (a link with 0.2 s
/// left still works), 0 once past.
#[cfg(any(feature = "hydrate", test))]
fn seconds_left(until_ms: f64, now_ms: f64) -> u64 {
    ((until_ms - now_ms) / 1000.0).ceil().max(0.0) as u64
}

/// The time left as the dialog says it.
pub fn left_label(seconds: u64) -> String {
    match seconds {
        0 => "Expired: make a new link.".to_owned(),
        _ => format!("Expires in {}:{:02}", seconds / 60, seconds % 60),
    }
}

/// An SVG document as a `data:` URL for an `<img>`: shown as an image, the
/// SVG can run nothing. Only `%` and `#` must be escaped in it.
#[cfg(any(feature = "hydrate", test))]
fn image_url(svg: &str) -> String {
    format!("data:image/svg+xml,{}", svg.replace('%', "%25").replace('#', "%23"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_counts_down_in_whole_seconds_until_it_expires_or_is_replaced() {
        let owner = Owner::new();
        owner.set();
        let pairing = Pairing::new();
        let answer = PairAnswer {
            url: "http://127.0.0.1:1/#enroll=A".into(),
            expires_in_ms: 600_000,
            qr_svg: "<svg/>".into(),
            local_only: true,
        };
        let url = pairing.show(answer, 1_000.0);
        assert_eq!(left_label(pairing.left.get_untracked()), "Expires in 10:00");
        assert!(pairing.tick(&url, 1_000.0 + 534_800.0));
        assert_eq!(left_label(pairing.left.get_untracked()), "Expires in 1:06", "0.2 s rounds up");
        assert!(!pairing.tick(&url, 601_000.0), "expired");
        assert_eq!(left_label(pairing.left.get_untracked()), "Expired: make a new link.");
        assert!(
            !pairing.tick("http://127.0.0.1:1/#enroll=B", 1_000.0),
            "another link's count stops"
        );
        pairing.closed();
        assert!(!pairing.tick(&url, 1_000.0), "closed");
    }

    #[test]
    fn a_used_link_stops_counting_and_a_new_one_starts_afresh() {
        let owner = Owner::new();
        owner.set();
        let pairing = Pairing::new();
        pairing.link_used();
        assert!(!pairing.used.get_untracked(), "no link on show: nothing to say");
        let answer = || PairAnswer {
            url: "http://127.0.0.1:1/#enroll=A".into(),
            expires_in_ms: 600_000,
            qr_svg: "<svg/>".into(),
            local_only: true,
        };
        let url = pairing.show(answer(), 0.0);
        pairing.link_used();
        assert!(pairing.used.get_untracked());
        assert!(!pairing.tick(&url, 1_000.0), "a used link is counted no more");
        pairing.opened();
        assert!(!pairing.used.get_untracked(), "a new link is not used");
        let url = pairing.show(answer(), 0.0);
        assert!(pairing.tick(&url, 1_000.0));
    }

    #[test]
    fn an_svg_becomes_an_image_url_with_its_colours_escaped() {
        let url = image_url(r##"<svg><rect fill="#ffffff" width="100%"/></svg>"##);
        assert_eq!(url, r#"data:image/svg+xml,<svg><rect fill="%23ffffff" width="100%25"/></svg>"#);
    }
}
