//! The Shard web client, one Leptos app in two builds: with `ssr` the daemon
//! renders its HTML, with `hydrate` it is compiled to WASM and takes that HTML
//! over in the browser. It shares the wire types with the daemon through
//! `shard-protocol`, so client and server cannot disagree on a message.
//!
//! Server-only code sits behind `#[cfg(feature = "ssr")]`; the WASM entry point
//! is [`hydrate`] and does nothing else.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::StaticSegment;
use leptos_router::components::{Route, Router, Routes};

/// The name of the bundle's files under `/pkg/` (`shard.js`,
/// `shard_bg.wasm`, `shard.css`); the daemon and scripts/build agree on it.
pub const OUTPUT_NAME: &str = "shard";

/// The HTML document around the app, rendered by the daemon.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" href="/favicon.ico"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="shard-css" href="/pkg/shard.css"/>
        <Title text="Shard"/>
        <Router>
            <Routes fallback=NotFound>
                <Route path=StaticSegment("") view=Home/>
            </Routes>
        </Router>
    }
}

/// The landing page. Until the daemon issue adds authentication it only shows
/// the product and whether the client side has taken over.
#[component]
fn Home() -> impl IntoView {
    // Effects run only in the browser, so this flips once hydration is done;
    // the server-rendered HTML always says "loading".
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let state = move || if hydrated.get() { "ready" } else { "loading" };

    view! {
        <header class="topbar">
            <span class="brand">"Shard"</span>
            <span class="client-state" data-state=state aria-live="polite">
                {move || if hydrated.get() { "client ready" } else { "loading client…" }}
            </span>
        </header>
        <main class="home" data-hydrated=move || hydrated.get().to_string()>
            <h1>"Shard"</h1>
            <p class="tagline">"Run and supervise many coding agents from any tab."</p>
        </main>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    view! {
        <main class="home">
            <h1>"Not found"</h1>
            <p><a href="/">"Back to Shard"</a></p>
        </main>
    }
}

/// The WASM entry point: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
}
