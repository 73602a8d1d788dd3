//! The Shard web client, one Leptos app in two builds: with `ssr` the daemon
//! renders its HTML as a first paint, with `hydrate` it is compiled to WASM
//! and renders the live page in its place in the browser. It shares the
//! wire types with the daemon through `shard-protocol`, so client and server
//! cannot disagree on a message.
//!
//! Server-only code sits behind `#[cfg(feature = "ssr")]`, browser-only code
//! (the connection, in [`client`]) behind `#[cfg(feature = "hydrate")]`; the
//! WASM entry point is [`hydrate`] and does nothing else.

// Leptos view types nest deeply; the default limit is too low for a page.
#![recursion_limit = "512"]

#[cfg(feature = "hydrate")]
mod address;
#[cfg(feature = "hydrate")]
mod client;
mod device;
mod dialog;
mod find;
mod fleet;
#[cfg(feature = "hydrate")]
mod follow;
mod guard;
mod jobs;
mod kept;
mod ledger;
mod link;
mod markdown;
#[cfg(feature = "hydrate")]
mod message_keys;
mod nodes;
mod notify;
mod order;
mod outgoing;
mod pairing;
#[cfg(feature = "hydrate")]
mod persist;
mod questions;
// Messages arrive only in the browser, and in the tests that play the
// daemon: elsewhere (the daemon's first paint) nothing feeds the reducer.
#[cfg(any(feature = "hydrate", test))]
mod reducer;
#[cfg(feature = "hydrate")]
mod reveal;
mod roster;
mod sandbox;
mod screen;
mod search;
mod state;
mod transcript;
mod views;
mod workspace_action;
mod workspaces;

use leptos::prelude::*;

pub use link::Connection;
pub use state::ClientState;
use state::Pane;
use views::{
    AgentList, AgentView, BrowserDialog, CreateAgent, Inbox, PairDialog, PhoneBar, PushDialog,
    QuestionDialog, SearchButton, SearchPanel, new_link,
};

/// The name of the bundle's files under `/pkg/` (`shard.js`,
/// `shard_bg.wasm`, `shard.css`); the daemon and scripts/build agree on it.
pub const OUTPUT_NAME: &str = "shard";

/// The HTML document around the app, rendered by the daemon for `/`.
///
/// The app is one page, so there is no router: a router (and the meta
/// crate for the title) would be a fifth of the WASM bundle for one route.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <Head/>
                <title>"Shard"</title>
                <HydrationScripts options/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// What every page's head holds.
#[component]
fn Head() -> impl IntoView {
    view! {
        <meta charset="utf-8"/>
        <meta name="viewport" content="width=device-width, initial-scale=1"/>
        <meta name="color-scheme" content="light dark"/>
        <meta name="theme-color" content="#1f2430"/>
        <link rel="icon" href="/favicon.ico"/>
        <link rel="manifest" href="/manifest.webmanifest"/>
        <link rel="apple-touch-icon" href="/icon-192.png"/>
        <link rel="stylesheet" id="shard-css" href="/pkg/shard.css"/>
    }
}

/// The page for any other path: plain HTML (nothing to hydrate), answered
/// as a 404 by the daemon.
pub fn not_found_shell() -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <Head/>
                <title>"Not found · Shard"</title>
            </head>
            <body>
                <main class="home">
                    <h1>"Not found"</h1>
                    <p><a href="/">"Back to Shard"</a></p>
                </main>
            </body>
        </html>
    }
}

/// The dashboard: enrolls this browser when opened with `#enroll=`,
/// connects, lists every agent live, shows the selected one, and keeps every
/// open question answerable.
#[component]
pub fn App() -> impl IntoView {
    let state = ClientState::new();
    provide_context(state.clone());
    // Effects run only in the browser, so this flips once the app is live;
    // the server-rendered HTML always says "false".
    let hydrated = RwSignal::new(false);
    #[cfg(feature = "hydrate")]
    let live = state.clone();
    Effect::new(move |_| {
        hydrated.set(true);
        #[cfg(feature = "hydrate")]
        {
            persist::restore(&live);
            client::open_from_notifications(&live);
            address::follow(&live);
            persist::keep(&live);
            notify::restore(&live);
            notify::listen(&live);
            leptos::task::spawn_local(client::run(live.clone()));
        }
    });
    let connection = state.link.connection;
    // Changes only when enrollment does, not with every reconnect.
    let enrolled = Memo::new(move |_| connection.get() != Connection::NotEnrolled);
    let notice = state.link.notice;
    let questions = state.questions.open;
    let title = move || match questions.with(|questions| questions.len()) {
        0 => "Shard".to_owned(),
        count => format!("({count}) Shard"),
    };
    let pane = state.pane;
    #[cfg(feature = "hydrate")]
    shortcuts(&state);
    // The tab's title counts open questions; the server renders "Shard".
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| document().set_title(&title()));
    #[cfg(not(feature = "hydrate"))]
    let _ = title;
    view! {
        <TopBar state=state/>
        <main class="home" data-hydrated=move || hydrated.get().to_string() data-enrolled=move || enrolled.get().to_string()>
            {move || notice.get().map(|text| view! { <p class="notice" role="status"><markdown::Ticked text=text/></p> })}
            // Not enrolled, the dashboard would be an empty list and a form
            // that cannot work: say so, and how to be, instead.
            // (Hidden by the stylesheet rather than unmounted: swapping the
            // whole dashboard in and out costs the bundle kilobytes.)
            {move || (!enrolled.get()).then(NotEnrolled)}
            <div class="layout" data-pane=move || pane.get().key()>
                <aside class="sidebar">
                    <Inbox/>
                    <CreateAgent/>
                    <AgentList/>
                </aside>
                <AgentView/>
            </div>
            <SearchPanel/>
            <QuestionDialog/>
            <PairDialog/>
            <PushDialog/>
            <BrowserDialog/>
        </main>
        <PhoneBar/>
    }
}

/// The bar across the top: the search, the count of open questions (which
/// opens the inbox), the buttons of the dialogs, and the connection.
#[component]
fn TopBar(state: ClientState) -> impl IntoView {
    let connection = state.link.connection;
    let questions = state.questions.open;
    let pending = move || questions.with(|questions| questions.len());
    let pane = state.pane;
    let waiting = move || format!("{} waiting", pending());
    let show_inbox = move || {
        pane.set(Pane::Inbox);
        #[cfg(feature = "hydrate")]
        views::reveal(".inbox".to_owned(), Some(".inbox-item"));
    };
    let pairing = state.pairing;
    let push_panel = state.push;
    let browser_panel = state.browser;
    let notify_on = state.questions.notify;
    view! {
        <header class="topbar">
            <span class="brand">"Shard"</span>
            <SearchButton/>
            <button class=move || { if pending() > 0 { "pending active" } else { "pending" } }
                title="Open the approval inbox" on:click=move |_| show_inbox()>
                {waiting}
            </button>
            // This tab's and this device's notifications (views::push).
            <button class="notify" data-on=move || notify_on.get().to_string()
                on:click=move |_| push_panel.open()>"Notifications"</button>
            // Its passkey and signing out (views::browser).
            <button class="browser-open" hidden=move || connection.get() != Connection::Connected
                on:click=move |_| browser_panel.open()>"This browser"</button>
            // Another device enrolls through this one (crate::pairing).
            <button class="pair-open" hidden=move || connection.get() != Connection::Connected
                on:click=move |_| new_link(pairing)>"Pair a device"</button>
            <span class="connection" data-state=move || connection.get().key() aria-live="polite">
                {move || connection.get().label()}
            </span>
            <Show when=move || matches!(connection.get(), Connection::Retrying(_))>
                <button class="reconnect" on:click=move |_| {
                    #[cfg(feature = "hydrate")]
                    client::reconnect_now();
                }>"Reconnect now"</button>
            </Show>
        </header>
    }
}

/// The page's keyboard shortcuts: `/` (when not typing) or Ctrl+K opens
/// the search across every agent; Ctrl+F, with an agent on screen, its
/// find bar, which sees the whole transcript where the browser's own find
/// sees only the rows rendered.
#[cfg(feature = "hydrate")]
fn shortcuts(state: &ClientState) {
    let (search, screen, find) = (state.search, state.screen, state.find);
    let typing = guard::typing;
    // Dropping the handle leaves the listener: it lives as long as the page.
    let _ = window_event_listener(leptos::ev::keydown, move |event| {
        let command = event.ctrl_key() || event.meta_key();
        let key = event.key();
        if event.alt_key() || event.repeat() {
            return;
        }
        let handled = match key.as_str() {
            "k" | "K" if command => {
                views::open_search(search);
                true
            }
            "/" if !command && !typing() => {
                views::open_search(search);
                true
            }
            "f" | "F" if command && !event.shift_key() => views::open_find(screen, find),
            _ => false,
        };
        if handled {
            event.prevent_default();
        }
    });
}

/// What a browser without a live enrollment sees instead of the dashboard
/// (`/bootstrap` answered 401: no cookie, or an expired or revoked one, or
/// no browser secret): that it is not enrolled, and every way to be.
#[component]
fn NotEnrolled() -> impl IntoView {
    view! {
        <section class="not-enrolled enroll-help" aria-labelledby="not-enrolled-title">
            <h1 id="not-enrolled-title">"This browser is not enrolled"</h1>
            <p>"It sees and drives agents once it is. Any of these enrolls it:"</p>
            <ul>
                <li>"Open the " <code>"enroll:"</code> " link that " <code>"shard daemon"</code> " printed when it started."</li>
                <li>"Run " <code>"shard enroll"</code> " on the daemon's machine and open the link it prints."</li>
                <li>"In a browser that is enrolled, choose " <strong>"Pair a device"</strong> " and open its link here, or scan its QR code."</li>
            </ul>
            <p>"A link works once, for 10 minutes."</p>
        </section>
    }
}

/// The WASM entry point (its name is what the page's loader script calls).
///
/// The daemon's HTML is a first paint only, the same page with nothing
/// loaded: it is replaced, in one task so that no frame shows neither, by
/// the app rendered here. Rendering on the client rather than hydrating
/// leaves every view's hydration code out of the bundle, a tenth of it, and
/// costs nothing a user sees, since every datum arrives over the WebSocket
/// after this runs anyway.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    if let Some(body) = document().body() {
        body.set_text_content(None);
    }
    leptos::mount::mount_to_body(App);
    register_service_worker();
}

/// Registers the app's service worker (`public/sw.js`), which makes the
/// page installable as an app. Browsers offer service workers only to
/// secure contexts (loopback, https); elsewhere the page is a page.
#[cfg(feature = "hydrate")]
fn register_service_worker() {
    let Some(window) = web_sys::window() else { return };
    if !window.is_secure_context() {
        return;
    }
    let registering = window.navigator().service_worker().register("/sw.js");
    leptos::task::spawn_local(async move {
        if let Err(error) = wasm_bindgen_futures::JsFuture::from(registering).await {
            leptos::logging::warn!("the service worker did not register: {error:?}");
        }
    });
}
