//! "This browser": what the daemon trusts this browser with, and how to
//! change it. A passkey for the risky approvals the daemon guards
//! (docs/SECURITY.md, "Passkey step-up"), and signing out, which ends this
//! browser's enrollment. Its code loads the first time it opens
//! (`browser_dialog`); the first load carries only its button and its open
//! state (crate::device).

use leptos::prelude::*;

use super::state;

#[component]
pub fn BrowserDialog() -> impl IntoView {
    let wanted = state().browser.wanted;
    super::deferred(move || wanted.get(), browser_dialog)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(browser_dialog, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn browser_dialog() -> Result<AnyView, super::Unloaded> {
    let panel = state().browser;
    let message = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    // Signing out is asked once more: coming back needs a pairing link.
    let leaving = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    request_animation_frame(move || panel.show_modal());
    let add_passkey = move |_| {
        busy.set(true);
        message.set(None);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            let said = match super::passkey::register().await {
                Ok(()) => "Passkey added for this browser.".to_owned(),
                Err(why) => format!("No passkey was added: {why}."),
            };
            message.set(Some(said));
            busy.set(false);
        });
    };
    let sign_out = move |_| {
        if !leaving.get_untracked() {
            leaving.set(true);
            return;
        }
        busy.set(true);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            // `POST /logout`: the daemon revokes this browser's session and
            // closes its sockets (CONTRACT.md).
            match crate::client::post_json("/logout", "{}").await {
                // The page starts again as one that is not enrolled.
                Ok(()) => {
                    let _ = window().location().reload();
                }
                Err(why) => {
                    message.set(Some(why));
                    busy.set(false);
                }
            }
        });
    };
    let close = move |_| {
        leaving.set(false);
        crate::dialog::close(panel.dialog);
    };
    Ok(view! {
        <dialog class="dialog browser" aria-labelledby="browser-title" node_ref=panel.dialog>
            <h2 id="browser-title">"This browser"</h2>
            <h3>"Passkey"</h3>
            <p>"Where the daemon asks for it, allowing a risky call (a command, a write outside the agent's folder) from this browser needs its passkey: a fingerprint, a face or a security key."</p>
            <button disabled=busy on:click=add_passkey>"Add a passkey"</button>
            <h3>"Sign out"</h3>
            <p>"This browser stops being enrolled, and its passkeys go. To come back it needs a new pairing link, or a code from shard enroll."</p>
            <p class="browser-leaving" hidden=move || !leaving.get()>
                <strong>"Sign out this browser?"</strong>
            </p>
            <button class="danger" disabled=busy on:click=sign_out>
                {move || if leaving.get() { "Sign out now" } else { "Sign out" }}
            </button>
            <p class="browser-message" role="status" hidden=move || message.with(Option::is_none)>
                {move || message.get().unwrap_or_default()}
            </p>
            <div class="pair-actions">
                <button on:click=close>"Close"</button>
            </div>
        </dialog>
    }
    .into_any())
}
