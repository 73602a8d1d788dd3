//! The dashboard's components, by what they show: the agent list
//! ([`agents`]) and the form that creates one ([`new_agent`]); the agent
//! on screen with its pickers and prompt box ([`agent`]), its transcript
//! ([`transcript`]) and tool calls ([`tools`]), the search across every
//! agent and the find in a transcript ([`search`]), its jobs ([`jobs`]),
//! its sessions, usage and approval history ([`ledger`]) and its sandbox
//! ([`sandbox`]); the questions: the dialog and the approval inbox
//! ([`questions`]); the workspaces ([`workspace`]); the dialogs that pair
//! another device ([`pair`]), notify this one ([`push`]) and say what
//! this browser is trusted with ([`browser`]); and the bar a narrow screen
//! moves between its panes with ([`phone`]). Every component takes the
//! page's [`ClientState`](crate::state::ClientState) from context
//! ([`state`]) and reads the slices it shows.

mod agent;
mod agents;
mod browser;
mod fleet;
mod jobs;
mod ledger;
mod new_agent;
mod nodes;
mod pair;
mod passkey;
mod phone;
mod push;
mod questions;
mod sandbox;
mod search;
mod tools;
mod transcript;
mod workspace;

use leptos::html;
use leptos::prelude::*;
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::subagent::RunState;
use shard_protocol::types::{AgentStatus, RuntimeState};

#[cfg(feature = "hydrate")]
pub use crate::reveal::reveal;
pub use agent::AgentView;
pub use agents::AgentList;
pub use browser::BrowserDialog;
pub use new_agent::CreateAgent;
pub use pair::{PairDialog, new_link};
#[cfg(feature = "hydrate")]
pub use passkey::step_up;
pub use phone::PhoneBar;
pub use push::PushDialog;
pub use questions::{Inbox, QuestionDialog};
#[cfg(feature = "hydrate")]
pub use search::open_search;
pub use search::{SearchButton, SearchPanel, open_find};

use crate::state::ClientState;

/// A `<details>` whose open state lives in `open`, so that it stays as the
/// user left it when its content is rendered again.
#[component]
fn Details(
    #[prop(into)] class: String,
    open: ArcRwSignal<bool>,
    children: Children,
) -> impl IntoView {
    let element: NodeRef<html::Details> = NodeRef::new();
    let toggled = open.clone();
    view! {
        <details class=class node_ref=element prop:open=open.get_untracked()
            on:toggle=move |_| {
                if let Some(element) = element.get_untracked() {
                    toggled.set(element.open());
                }
            }>
            {children()}
        </details>
    }
}

/// A part of the page whose code the browser could not load: its WASM
/// chunk did not arrive, or is of another build (the daemon was updated
/// under an open page). The page goes on without it and says so.
pub(crate) struct Unloaded;

#[cfg(feature = "hydrate")]
impl From<leptos::wasm_split::SplitLoaderError> for Unloaded {
    fn from(_: leptos::wasm_split::SplitLoaderError) -> Self {
        Unloaded
    }
}

/// A count and its noun, agreeing: "1 entry", "3 entries".
pub(crate) fn counted(count: u64, one: &str, many: &str) -> String {
    match count {
        1 => format!("1 {one}"),
        count => format!("{count} {many}"),
    }
}

/// What `body` renders, from the first time `shown` is true on. In the
/// browser `body` is split by scripts/build into a WASM chunk of its own
/// (the `wasm_split` attribute on it, `fallible`), fetched then, so that
/// the first load carries none of it. Once shown it stays mounted (its own
/// markup hides it when closed), so what the reader typed or opened in it
/// lasts.
#[cfg(feature = "hydrate")]
pub(crate) fn deferred<Fut>(
    shown: impl Fn() -> bool + Send + Sync + 'static,
    body: impl Fn() -> Fut + Send + Sync + 'static,
) -> impl IntoView
where
    Fut: std::future::Future<Output = Result<AnyView, Unloaded>> + Send + 'static,
{
    let ever = Memo::new(move |before: Option<&bool>| before.copied() == Some(true) || shown());
    // A chunk that did not arrive is asked for again on "Try again".
    let attempt = RwSignal::new(0_u32);
    move || {
        attempt.track();
        ever.get().then(|| {
            let loading = body();
            Suspend::new(async move { loading.await.unwrap_or_else(|_| unloaded(attempt)) })
        })
    }
}

/// The same, where nothing is split: the daemon's first paint, unit tests.
#[cfg(not(feature = "hydrate"))]
pub(crate) fn deferred(
    shown: impl Fn() -> bool + Send + Sync + 'static,
    body: impl Fn() -> Result<AnyView, Unloaded> + Send + Sync + 'static,
) -> impl IntoView {
    let ever = Memo::new(move |before: Option<&bool>| before.copied() == Some(true) || shown());
    let attempt = RwSignal::new(0_u32);
    move || ever.get().then(|| body().unwrap_or_else(|_| unloaded(attempt)))
}

/// In place of a part whose code did not arrive: a dropped link is worth
/// another try; a daemon updated under the page needs a reload.
fn unloaded(attempt: RwSignal<u32>) -> AnyView {
    view! {
        <p class="unloaded" role="alert">
            "This part of the page did not load. "
            <button type="button" on:click=move |_| attempt.update(|count| *count += 1)>"Try again"</button>
            " If the daemon was updated, reload the page."
        </p>
    }
    .into_any()
}

/// `$0.0123`: a cost to four decimals, formatted as integers (formatting a
/// float would add 12 KB to the WASM).
pub(crate) fn dollars(cost: f64) -> String {
    // Saturating: a negative or absurd figure shows as 0 or the most.
    let units = (cost * 10_000.0).round() as u64;
    format!("${}.{:04}", units / 10_000, units % 10_000)
}

/// The page's state, provided once by the dashboard.
fn state() -> ClientState {
    expect_context::<ClientState>()
}

pub(crate) fn status_label(status: AgentStatus) -> &'static str {
    match status {
        AgentStatus::Idle => "idle",
        AgentStatus::Streaming => "streaming",
        AgentStatus::WaitingForPermission => "waiting for permission",
        AgentStatus::WaitingForUi => "waiting for an answer",
        AgentStatus::Compacting => "compacting",
        AgentStatus::Error => "error",
        AgentStatus::Paused => "paused at its budget",
        AgentStatus::Unknown => "unknown",
    }
}

pub(crate) fn run_label(state: RunState) -> &'static str {
    match state {
        RunState::Queued => "queued",
        RunState::Starting => "starting",
        RunState::Active => "active",
        RunState::Completed => "completed",
        RunState::Failed => "failed",
        RunState::TimedOut => "timed out",
        RunState::Cancelled => "cancelled",
        RunState::Interrupted => "interrupted",
    }
}

pub(crate) fn runtime_label(state: RuntimeState) -> &'static str {
    match state {
        RuntimeState::Starting => "starting",
        RuntimeState::Running => "running",
        RuntimeState::Stopped => "stopped",
        RuntimeState::Failed => "failed",
        RuntimeState::Hibernated => "hibernated",
        RuntimeState::Unknown => "unknown",
    }
}

pub(crate) fn phase_label(phase: ActivityPhase) -> &'static str {
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_count_agrees_with_its_noun() {
        assert_eq!(super::counted(1, "entry", "entries"), "1 entry");
        assert_eq!(super::counted(0, "entry", "entries"), "0 entries");
        assert_eq!(super::counted(12, "turn", "turns"), "12 turns");
    }
}
