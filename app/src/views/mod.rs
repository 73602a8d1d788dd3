//! The dashboard's components, by what they show: the agent list
//! ([`agents`]); the agent on screen with its pickers and prompt box
//! ([`agent`]), its transcript ([`transcript`]) and tool calls ([`tools`]),
//! the search across every agent and the find in a transcript
//! ([`search`]),
//! its jobs ([`jobs`]) and its sessions, usage and approval history
//! ([`ledger`]); the questions: the dialog and the approval inbox
//! ([`questions`]); the workspaces ([`workspace`]); the dialog that pairs
//! another device ([`pair`]); and the bar a narrow screen moves between its
//! panes with ([`phone`]). Every component takes the page's
//! [`ClientState`](crate::state::ClientState) from context ([`state`]) and
//! reads the slices it shows.

mod agent;
mod agents;
mod jobs;
mod ledger;
mod pair;
mod phone;
mod questions;
mod search;
mod tools;
mod transcript;
mod workspace;

use leptos::html;
use leptos::prelude::*;
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::subagent::RunState;
use shard_protocol::types::{AgentStatus, RuntimeState};

pub use agent::AgentView;
pub use agents::{AgentList, CreateAgent};
pub use pair::{PairDialog, new_link};
pub use phone::PhoneBar;
#[cfg(feature = "hydrate")]
pub use phone::reveal;
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
