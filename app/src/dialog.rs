//! The page's modal dialogs that load their code on first use (pairing,
//! notifications): each `<dialog>` is in the page once its code is, so
//! opening one asks again after it renders.

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
