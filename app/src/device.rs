//! The open state of the dialogs of this device: "Notifications"
//! (views::push) and "This browser" (views::browser). Their code loads the
//! first time they open; this is on the page from the start, beside the
//! pairing dialog's (crate::pairing).

use leptos::html;
use leptos::prelude::*;

/// The dialog's open state, on the page from the start.
#[derive(Clone, Copy)]
pub struct DialogPanel {
    pub dialog: NodeRef<html::Dialog>,
    pub wanted: RwSignal<bool>,
}

impl DialogPanel {
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

impl Default for DialogPanel {
    fn default() -> Self {
        Self::new()
    }
}
