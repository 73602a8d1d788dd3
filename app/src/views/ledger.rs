//! The agent on screen's sessions, usage and approval history (each a
//! panel that fetches when opened), and the total of every agent's usage
//! above the list (crate::ledger).

use leptos::html;
use leptos::prelude::*;
use shard_protocol::agent::{SessionListResult, SessionSummary};
use shard_protocol::approvals::{ApprovalKind, ApprovalRecord};
use shard_protocol::usage::{TurnState, TurnUsage, UsageTotals};

use super::{dollars, state};
use crate::kept::Kept;
use crate::markdown::Ticked;

/// `1.2k`, `3.4M`: a token count at a glance (integers only: float
/// formatting costs the bundle 12 KB).
pub(crate) fn tokens(count: u64) -> String {
    match count {
        0..1_000 => count.to_string(),
        1_000..1_000_000 => format!("{}.{}k", count / 1_000, count % 1_000 / 100),
        _ => format!("{}.{}M", count / 1_000_000, count % 1_000_000 / 100_000),
    }
}

/// `12.3k tok · $0.0420`, with a `+` when some calls had no price (the cost
/// is then a lower bound).
fn totals_label(usage: &UsageTotals) -> String {
    let spent = tokens(usage.input + usage.output + usage.cache_read + usage.cache_write);
    match usage.cost {
        Some(cost) if usage.unpriced_calls > 0 => format!("{spent} tok · {}+", dollars(cost)),
        Some(cost) => format!("{spent} tok · {}", dollars(cost)),
        None => format!("{spent} tok"),
    }
}

/// `millis` as the reader's local date and time, `2026-12-03 16:20`. The
/// panels render in the browser only; elsewhere (the server, unit tests)
/// the time is UTC and says so.
fn clock(millis: u64) -> String {
    #[cfg(feature = "hydrate")]
    {
        let date = web_sys::js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(millis as f64));
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}",
            date.get_full_year(),
            date.get_month() + 1,
            date.get_date(),
            date.get_hours(),
            date.get_minutes()
        )
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let minutes = millis / 60_000;
        format!("{:02}:{:02} UTC", minutes / 60 % 24, minutes % 60)
    }
}

/// A browser principal as people can tell them apart: the random part of
/// its id, shortened (`principal-3fa9c1…` → `3fa9c1`).
fn principal_label(principal_id: &str) -> String {
    let random = principal_id.strip_prefix("principal-").unwrap_or(principal_id);
    random.chars().take(6).collect()
}

/// A `<details>` whose open state is `open`; `on_open` runs each time it
/// opens (the panel fetches what it shows).
#[component]
pub(super) fn Panel(
    #[prop(into)] class: String,
    #[prop(into)] label: String,
    open: RwSignal<bool>,
    on_open: impl Fn() + 'static,
    children: Children,
) -> impl IntoView {
    let element: NodeRef<html::Details> = NodeRef::new();
    view! {
        <details class=class node_ref=element prop:open=move || open.get()
            on:toggle=move |_| {
                let Some(element) = element.get_untracked() else { return };
                let now = element.open();
                if now != open.get_untracked() {
                    open.set(now);
                }
                if now {
                    on_open();
                }
            }>
            <summary>{label}</summary>
            {children()}
        </details>
    }
}

/// Every agent's usage together, above the list.
#[component]
pub fn UsageTotal() -> impl IntoView {
    let agents = state().roster.agents;
    let total = Memo::new(move |_| {
        agents.with(|agents| {
            let (mut spent, mut cost, mut priced) = (0, 0.0, false);
            for usage in agents.iter().filter_map(|agent| agent.usage.as_ref()) {
                spent += usage.input
                    + usage.output
                    + usage.cache_read.unwrap_or(0)
                    + usage.cache_write.unwrap_or(0);
                if let Some(spent) = usage.cost {
                    cost += spent;
                    priced = true;
                }
            }
            (spent > 0).then(|| match priced {
                true => format!("All agents: {} tok · {}", tokens(spent), dollars(cost)),
                false => format!("All agents: {} tok", tokens(spent)),
            })
        })
    });
    view! {
        <p class="usage-total" aria-label="Usage of all agents" title="tokens and cost of every agent">
            {move || total.get()}
        </p>
    }
}

/// The agent on screen's sessions: its first one and every fork, with a
/// switch to each, compaction on demand, and what the last operation did.
#[component]
pub fn SessionsPanel() -> impl IntoView {
    let ledger = state().ledger;
    let fetch = move || ledger.fetch_sessions();
    let open = ledger.sessions_open;
    view! {
        <Panel class="sessions-panel" label="Sessions" open=open on_open=fetch>
            {super::deferred(move || open.get(), sessions_body)}
        </Panel>
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(sessions_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn sessions_body() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let (ledger, roster) = (state.ledger, state.roster);
    let compact = move |_| ledger.compact();
    let forked = {
        move || {
            ledger.forked.get().map(|session_id| {
                let switch = {
                    let session_id = session_id.clone();
                    move |_| ledger.activate_session(&session_id)
                };
                let open = {
                    let session_id = session_id.clone();
                    move |_| ledger.open_session_as_agent(&roster, &session_id)
                };
                view! {
                    <div class="forked">
                        <button type="button" on:click=switch>"Switch to the fork"</button>
                        <button type="button" on:click=open>"Open it as a new agent"</button>
                    </div>
                }
            })
        }
    };
    // A search result's message is in another session: the way to it.
    let elsewhere = move || {
        ledger.elsewhere.get().map(|session_id| {
            let switch = move |_| ledger.activate_session(&session_id);
            view! {
                <div class="elsewhere">
                    <button type="button" on:click=switch>"Switch to the session of the message found"</button>
                </div>
            }
        })
    };
    let list = move || {
        let list = match ledger.sessions.with(|answer| answer.as_ref().map(Kept::decoded))? {
            Ok(list) => list,
            Err(error) => return Some(unreadable(error)),
        };
        let active = list.active.clone();
        // A fork carries its source's title: the row says which row it
        // came from, by its number in the list.
        let numbers: std::collections::HashMap<String, usize> = list
            .sessions
            .iter()
            .enumerate()
            .map(|(index, session)| (session.session_id.clone(), index + 1))
            .collect();
        let rows = list
            .sessions
            .into_iter()
            .map(|session| {
                let source = session
                    .forked_from
                    .as_ref()
                    .and_then(|origin| numbers.get(&origin.session_id).copied());
                view! { <SessionRow session=session source=source active=active.clone()/> }
            })
            .collect_view();
        Some(view! { <ol class="sessions">{rows}</ol> }.into_any())
    };
    Ok(view! {
        <div class="panel-actions">
            <button type="button" class="compact" on:click=compact
                title="Summarize the older part of the conversation now">"Compact now"</button>
        </div>
        {forked}
        {elsewhere}
        {list}
    }
    .into_any())
}

#[component]
fn SessionRow(session: SessionSummary, source: Option<usize>, active: String) -> impl IntoView {
    let ledger = state().ledger;
    let is_active = session.session_id == active;
    let title = session
        .title
        .as_deref()
        .map_or_else(|| "(no message yet)".to_owned(), shard_protocol::display::escaped);
    // Where the session has got to, when that is not where it began: a
    // fork and its source share their first message.
    let latest = session
        .latest
        .as_deref()
        .filter(|latest| Some(*latest) != session.title.as_deref())
        .map(shard_protocol::display::escaped);
    let origin = session.forked_from.as_ref().map(|_| match source {
        Some(number) => format!("fork of {number}"),
        None => "fork".to_owned(),
    });
    let written = clock(session.updated_at.unwrap_or(session.created_at));
    let switch = {
        let session_id = session.session_id.clone();
        move |_| ledger.activate_session(&session_id)
    };
    view! {
        <li class="session" class:active=is_active data-session-id=session.session_id.clone()>
            <span class="session-title">{title}</span>
            {origin.map(|origin| view! { <span class="badge">{origin}</span> })}
            {latest.map(|latest| view! { <span class="session-latest">"last: "{latest}</span> })}
            <span class="session-meta">
                {format!("{} · {written}", super::counted(session.entries, "entry", "entries"))}
            </span>
            {if is_active {
                view! { <span class="badge current">"current"</span> }.into_any()
            } else {
                view! { <button type="button" class="resume" on:click=switch>"Resume"</button> }.into_any()
            }}
        </li>
    }
}

/// What the last session operation (fork, switch, compaction, take back)
/// did, or why it could not: above the prompt box, whatever panel is open.
#[component]
pub fn LedgerNote() -> impl IntoView {
    let note = state().ledger.note;
    move || {
        note.get().map(|note| {
            view! { <p class="ledger-note" class:error=note.error role="status"><Ticked text=note.text/></p> }
        })
    }
}

/// The agent on screen's usage: its total, each session's, and its newest
/// turns.
#[component]
pub fn UsagePanel() -> impl IntoView {
    let ledger = state().ledger;
    let fetch = move || ledger.fetch_usage();
    let open = ledger.usage_open;
    view! {
        <Panel class="usage-panel" label="Usage" open=open on_open=fetch>
            {super::deferred(move || open.get(), usage_body)}
        </Panel>
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(usage_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn usage_body() -> Result<AnyView, super::Unloaded> {
    let ledger = state().ledger;
    let body = move || {
        let usage = match ledger.usage.with(|answer| answer.as_ref().map(Kept::decoded))? {
            Ok(usage) => usage,
            Err(error) => return Some(unreadable(error)),
        };
        let sessions = ledger.sessions.with(|listed| {
            let listed = listed.as_ref().and_then(|listed| listed.decoded().ok());
            usage
                .sessions
                .iter()
                .map(|session| {
                    let name = session_name(listed.as_ref(), &session.session_id, session.first_at);
                    view! {
                        <li title=session.session_id.clone()>
                            <span class="session-title">{name}</span>" · "{totals_label(&session.usage)}
                        </li>
                    }
                })
                .collect_view()
        });
        let turns = usage.turns.iter().take(20).map(turn_row).collect_view();
        Some(
            view! {
                <p class="usage-agent-total">{format!(
                    "{} · {} in · {} out · {} · {}",
                    totals_label(&usage.total), usage.total.input, usage.total.output,
                    super::counted(usage.total.calls, "call", "calls"),
                    super::counted(usage.total.turns, "turn", "turns"),
                )}</p>
                <h4>"Sessions"</h4>
                <ul class="usage-sessions">{sessions}</ul>
                <h4>"Recent turns"</h4>
                <ol class="usage-turns">{turns}</ol>
            }
            .into_any(),
        )
    };
    Ok(body.into_any())
}

/// An answer the panel could not read, said where its content would be.
fn unreadable(why: String) -> AnyView {
    view! { <p class="form-error" role="alert"><Ticked text=why/></p> }.into_any()
}

/// A session as a person knows it: its first message (and whether the
/// agent runs on it now), else when it began; never its raw id.
fn session_name(listed: Option<&SessionListResult>, session_id: &str, first_at: u64) -> String {
    let known = listed.and_then(|listed| {
        let session = listed.sessions.iter().find(|session| session.session_id == session_id)?;
        let title = session
            .title
            .as_deref()
            .map_or_else(|| "(no message yet)".to_owned(), shard_protocol::display::escaped);
        Some(match listed.active == session_id {
            true => format!("{title} (current)"),
            false => title,
        })
    });
    known.unwrap_or_else(|| format!("session of {}", clock(first_at)))
}

fn turn_row(turn: &TurnUsage) -> impl IntoView + use<> {
    let state = match turn.state {
        TurnState::Running => "running",
        TurnState::Ended => "ended",
        TurnState::Interrupted => "interrupted",
        TurnState::Unknown => "",
    };
    view! {
        <li class="usage-turn" data-state=state>
            {format!("{} · {} · {}", clock(turn.started_at), turn.model.clone().unwrap_or_default(), totals_label(&turn.usage))}
        </li>
    }
}

/// The agent on screen's approval history, newest first.
#[component]
pub fn ApprovalsPanel() -> impl IntoView {
    let ledger = state().ledger;
    let fetch = move || ledger.fetch_approvals();
    let open = ledger.approvals_open;
    view! {
        <Panel class="approvals-panel" label="Approval history" open=open on_open=fetch>
            {super::deferred(move || open.get(), approvals_body)}
        </Panel>
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(approvals_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn approvals_body() -> Result<AnyView, super::Unloaded> {
    let ledger = state().ledger;
    let body = move || {
        let records = match ledger.approvals.with(|answer| answer.as_ref().map(Kept::decoded))? {
            Ok(list) => list.approvals,
            Err(error) => return Some(unreadable(error)),
        };
        if records.is_empty() {
            return Some(view! { <p class="empty">"No questions asked yet."</p> }.into_any());
        }
        let rows = records.iter().map(approval_row).collect_view();
        Some(view! { <ol class="approvals">{rows}</ol> }.into_any())
    };
    Ok(body.into_any())
}

fn approval_row(record: &ApprovalRecord) -> impl IntoView + use<> {
    let what = match (record.kind, &record.tool_name) {
        (ApprovalKind::Permission, Some(tool)) => tool.clone(),
        (ApprovalKind::Permission, None) => "permission".to_owned(),
        _ => "question".to_owned(),
    };
    let outcome = record.outcome.clone().unwrap_or_else(|| "open".to_owned());
    let state = outcome.clone();
    // Which enrolled browser answered, for a reader who wants it (the
    // line itself names the place, not an id).
    let browser = record
        .answered_by
        .as_ref()
        .and_then(|by| by.principal_id.as_deref())
        .map(|principal| format!("enrolled browser {}", principal_label(principal)));
    let who = record.answered_by.as_ref().map(|by| {
        let mut who = match by.source.as_str() {
            "web" => "in a browser".to_owned(),
            "unix" => "by a local tool".to_owned(),
            "push" => "from a notification".to_owned(),
            "headless" => "by the rule for nobody there".to_owned(),
            "agent" => "by the agent".to_owned(),
            "abort" => "ended by an abort".to_owned(),
            "runtime_exited" => "ended when its process stopped".to_owned(),
            other => format!("by {other}"),
        };
        if let Some(address) = &by.address {
            who.push_str(&format!(" from {address}"));
        }
        if let Some(at) = record.resolved_at {
            who.push_str(&format!(" at {}", clock(at)));
        }
        who
    });
    view! {
        <li class="approval" data-outcome=state data-request-id=record.request_id.clone()>
            <span class="approval-when">{clock(record.asked_at)}</span>
            <span class="approval-what">{what}</span>
            <span class="approval-prompt">{record.prompt.clone()}</span>
            <span class="approval-outcome">{outcome}</span>
            <span class="approval-who" title=browser>{who}</span>
        </li>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts_and_totals_read_at_a_glance() {
        assert_eq!(tokens(999), "999");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(4_560_000), "4.5M");
        let mut usage = UsageTotals { input: 900, output: 200, ..UsageTotals::default() };
        assert_eq!(totals_label(&usage), "1.1k tok");
        usage.cost = Some(0.042);
        assert_eq!(totals_label(&usage), "1.1k tok · $0.0420");
        usage.unpriced_calls = 1;
        assert_eq!(totals_label(&usage), "1.1k tok · $0.0420+");
        assert_eq!(clock(3_600_000 * 25 + 61_000), "01:01 UTC");
        assert_eq!(principal_label("principal-3fa9c1d2e4b5"), "3fa9c1");
    }
}
