//! The "Pair a device" dialog (crate::pairing): the one-time link to open on
//! the other device, its QR code for a phone's camera, and the time it has
//! left. A native modal `<dialog>`: Escape or "Close" closes it, focus
//! stays inside while open; "New link" retires the link on show.
//!
//! Its code loads the first time it opens; from then on it stays in the
//! page and only its attributes and text follow the link.

use leptos::html;
use leptos::prelude::*;

use super::state;
use crate::pairing::{Pairing, Shown, left_label};

/// Opens the dialog on a fresh link (the daemon retires the one before).
pub fn new_link(pairing: Pairing) {
    pairing.opened();
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(async move {
        if ask_for_link(pairing).await.is_err() {
            pairing.failed(0);
        }
    });
}

/// Starts asking the daemon for a link; in the dialog's chunk, as what
/// shows the link is.
#[cfg(feature = "hydrate")]
#[leptos::wasm_split::wasm_split(pair_dialog, wasm_split_path = ::leptos::wasm_split, fallible)]
fn ask_for_link(pairing: Pairing) -> Result<(), super::Unloaded> {
    leptos::task::spawn_local(crate::client::pair(pairing));
    Ok(())
}

#[component]
pub fn PairDialog() -> impl IntoView {
    let wanted = state().pairing.wanted;
    super::deferred(move || wanted.get(), pair_dialog)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(pair_dialog, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn pair_dialog() -> Result<AnyView, super::Unloaded> {
    let pairing = state().pairing;
    // Opened before its code was here: it opens once it is in the page.
    #[cfg(feature = "hydrate")]
    request_animation_frame(move || pairing.show_modal());
    let shown = pairing.shown;
    let field = move |pick: fn(&Shown) -> &String| {
        shown.with(|shown| shown.as_ref().map(|shown| pick(shown).clone()).unwrap_or_default())
    };
    let local_only =
        move || shown.with(|shown| shown.as_ref().is_some_and(|shown| shown.local_only));
    let input: NodeRef<html::Input> = NodeRef::new();
    let select = move || {
        if let Some(input) = input.get_untracked() {
            input.select();
        }
    };
    let copy = move |_| {
        select();
        #[cfg(feature = "hydrate")]
        crate::client::copy(&field(|shown| &shown.url));
    };
    Ok(view! {
        <dialog class="dialog pair" aria-labelledby="pair-title" node_ref=pairing.dialog
            on:close=move |_| pairing.closed()>
            <h2 id="pair-title">"Pair a device"</h2>
            <p>{move || if local_only() {
                "Open this link in the other browser. It enrolls one browser, once."
            } else {
                "Open this link on the other device, or scan the code with its camera. It enrolls one browser, once."
            }}</p>
            <p class="pair-error" role="alert" hidden=move || pairing.error.with(Option::is_none)>
                {move || pairing.error.get().unwrap_or_default()}
            </p>
            <p class="pair-used" role="status" hidden=move || !pairing.used.get()>
                "Used: a browser enrolled with this link just now, and it works no more. "
                "\u{201c}New link\u{201d} makes another."
            </p>
            <div hidden=move || shown.with(Option::is_none) || pairing.used.get()>
                // A loopback link opens on the device that scans it: no QR
                // code, and what to do instead.
                <div class="pair-local" role="note" hidden=move || !local_only()>
                    <p><strong>"This link works on this computer only."</strong>
                        " It points at 127.0.0.1, and a phone that opens it reaches itself, not this daemon. Use it for another browser here."</p>
                    <p>"To pair a phone, make the daemon reachable from it: put it behind a TLS reverse proxy (docs/WEB-DEPLOYMENT.md in Shard's source), open the dashboard at that address, and pair from there."</p>
                </div>
                <img class="qr" src=move || field(|shown| &shown.qr) alt="QR code of the pairing link"
                    hidden=local_only/>
                <div class="pair-link">
                    <input readonly aria-label="Pairing link" prop:value=move || field(|shown| &shown.url)
                        node_ref=input on:focus=move |_| select()/>
                    <button on:click=copy>"Copy"</button>
                </div>
                <p class="pair-left">{move || left_label(pairing.left.get())}</p>
            </div>
            <div class="pair-actions">
                <button on:click=move |_| new_link(pairing)>"New link"</button>
                <button on:click=move |_| pairing.close()>"Close"</button>
            </div>
        </dialog>
    }
    .into_any())
}
