//! The notifications dialog's open state (views::push draws it; its code
//! loads the first time it opens): on the page from the start, beside the
//! pairing dialog's (crate::pairing).

use leptos::html;
use leptos::prelude::*;

/// The dialog's open state, on the page from the start.
#[derive(Clone, Copy)]
pub struct PushPanel {
    pub dialog: NodeRef<html::Dialog>,
    pub wanted: RwSignal<bool>,
}

impl PushPanel {
    pub fn new() -> Self {
        Self { dialog: NodeRef::new(), wanted: RwSignal::new(false) }
    }

    pub fn open(self) {
        self.wanted.set(true);
        self.show_modal();
    }

    pub fn show_modal(self) {
        crate::dialog::show_modal(self.dialog);
    }
}

impl Default for PushPanel {
    fn default() -> Self {
        Self::new()
    }
}
