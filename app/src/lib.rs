//! The Shard web client, one Leptos app in two builds: with `ssr` the daemon
//! renders its HTML, with `hydrate` it is compiled to WASM and takes that HTML
//! over in the browser. It shares the wire types with the daemon through
//! `shard-protocol`, so client and server cannot disagree on a message.
//!
//! Server-only code sits behind `#[cfg(feature = "ssr")]`, browser-only code
//! (the connection, in [`client`]) behind `#[cfg(feature = "hydrate")]`; the
//! WASM entry point is [`hydrate`] and does nothing else.

#[cfg(feature = "hydrate")]
mod client;
mod state;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::StaticSegment;
use leptos_router::components::{Route, Router, Routes};
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState};

pub use state::{ClientState, Connection};

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

/// The agents page: enrolls this browser when opened with `#enroll=`,
/// connects, and lists every agent live.
#[component]
fn Home() -> impl IntoView {
    let state = ClientState::new();
    // Effects run only in the browser, so this flips once hydration is done;
    // the server-rendered HTML always says "false".
    let hydrated = RwSignal::new(false);
    Effect::new({
        #[cfg_attr(not(feature = "hydrate"), allow(unused_variables))]
        let state = state.clone();
        move |_| {
            hydrated.set(true);
            #[cfg(feature = "hydrate")]
            leptos::task::spawn_local(client::run(state.clone()));
        }
    });
    let connection = state.connection;
    let notice = state.notice;
    view! {
        <header class="topbar">
            <span class="brand">"Shard"</span>
            <span class="connection" data-state=move || connection.get().key() aria-live="polite">
                {move || connection.get().label()}
            </span>
        </header>
        <main class="home" data-hydrated=move || hydrated.get().to_string()>
            <h1>"Agents"</h1>
            {move || notice.get().map(|text| view! { <p class="notice" role="status">{text}</p> })}
            {move || (connection.get() == Connection::NotEnrolled).then(|| view! {
                <p class="enroll-help">
                    "This browser is not enrolled. Run " <code>"shard enroll"</code>
                    " on the daemon's machine and open the link it prints."
                </p>
            })}
            <CreateAgent state=state.clone()/>
            <AgentList state=state.clone()/>
        </main>
    }
}

#[component]
fn CreateAgent(state: ClientState) -> impl IntoView {
    let cwd = RwSignal::new(String::new());
    let name = RwSignal::new(String::new());
    let connected = move || state.connection.get() == Connection::Connected;
    let submit = {
        let state = state.clone();
        move |event: leptos::ev::SubmitEvent| {
            event.prevent_default();
            let (cwd_value, name_value) = (cwd.get_untracked(), name.get_untracked());
            if cwd_value.trim().is_empty() {
                state
                    .notice
                    .set(Some("Give the agent a working directory (an absolute path).".to_owned()));
                return;
            }
            state.create_agent(cwd_value.trim(), name_value.trim());
            name.set(String::new());
        }
    };
    view! {
        <form class="create" on:submit=submit aria-label="Create an agent">
            <label>
                "Working directory"
                <input name="cwd" type="text" placeholder="/home/me/project" required
                    prop:value=cwd on:input=move |event| cwd.set(event_target_value(&event))/>
            </label>
            <label>
                "Name"
                <input name="name" type="text" placeholder="optional"
                    prop:value=name on:input=move |event| name.set(event_target_value(&event))/>
            </label>
            <button type="submit" disabled=move || !connected()>"Create agent"</button>
        </form>
    }
}

fn status_label(status: AgentStatus) -> &'static str {
    match status {
        AgentStatus::Idle => "idle",
        AgentStatus::Streaming => "streaming",
        AgentStatus::WaitingForPermission => "waiting for permission",
        AgentStatus::WaitingForUi => "waiting for an answer",
        AgentStatus::Compacting => "compacting",
        AgentStatus::Error => "error",
        AgentStatus::Unknown => "unknown",
    }
}

fn runtime_label(state: RuntimeState) -> &'static str {
    match state {
        RuntimeState::Starting => "starting",
        RuntimeState::Running => "running",
        RuntimeState::Stopped => "stopped",
        RuntimeState::Failed => "failed",
        RuntimeState::Unknown => "unknown",
    }
}

fn phase_label(phase: ActivityPhase) -> &'static str {
    match phase {
        ActivityPhase::Idle => "idle",
        ActivityPhase::Thinking => "thinking",
        ActivityPhase::Streaming => "writing",
        ActivityPhase::Tool => "running a tool",
        ActivityPhase::Waiting => "waiting",
        ActivityPhase::Compacting => "compacting",
        ActivityPhase::Retrying => "retrying",
        ActivityPhase::Error => "error",
        ActivityPhase::Unknown => "",
    }
}

#[component]
fn AgentList(state: ClientState) -> impl IntoView {
    let agents = state.agents;
    let activity = state.activity;
    view! {
        <ul class="agents" aria-label="Agents">
            {move || {
                let list = agents.get();
                if list.is_empty() {
                    return view! { <li class="empty">"No agents yet."</li> }.into_any();
                }
                list.into_iter()
                    .map(|info: AgentInfo| {
                        let id = info.agent_id.clone();
                        let phase = activity.with(|map| map.get(&id).cloned());
                        let doing = phase.map(|(phase, tool)| match tool {
                            Some(tool) => format!("{} · {tool}", phase_label(phase)),
                            None => phase_label(phase).to_owned(),
                        });
                        view! {
                            <li class="agent" data-agent-id=id.clone()>
                                <span class="name">{info.name.clone().unwrap_or_else(|| id.clone())}</span>
                                <span class="status" data-status=status_label(info.status)>{status_label(info.status)}</span>
                                <span class="runtime">{runtime_label(info.runtime_state)}</span>
                                <span class="activity">{doing}</span>
                                <span class="cwd" title=info.cwd.clone()>{info.cwd.clone()}</span>
                                <span class="model">{info.model.clone().unwrap_or_default()}</span>
                            </li>
                        }
                    })
                    .collect_view()
                    .into_any()
            }}
        </ul>
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
