//! The fleet as the page draws it: the bar above the agent list (memory and
//! spend against their limits, who is awake and who hibernates), each
//! agent's own meter, and the agent panel's budgets, set and raised there
//! (their code a chunk of its own, fetched when the panel first opens).

use leptos::prelude::*;
use shard_protocol::budget::{BudgetPeriod, BudgetScope, BudgetSet, BudgetState, BudgetStatus};
use shard_protocol::fleet::Resources;
use shard_protocol::types::RuntimeState;

use super::ledger::{Panel, tokens};
use super::{dollars, state};
use crate::fleet::bytes;

const MB: u64 = 1024 * 1024;

/// `$1.2000 of $5.0000`, `12.3k of 50.0k tok`: what a budget spent of its
/// cap, in dollars where it has a dollar cap (or spent any), else tokens.
fn spent_of(budget: &BudgetStatus) -> String {
    let dollars_of = |cap: Option<f64>| match cap {
        Some(cap) => format!("{} of {}", dollars(budget.spent_usd), dollars(cap)),
        None => dollars(budget.spent_usd),
    };
    match (budget.cap_usd, budget.cap_tokens) {
        (None, Some(cap)) => format!("{} of {} tok", tokens(budget.spent_tokens), tokens(cap)),
        (Some(_), _) => dollars_of(budget.cap_usd),
        (None, None) if budget.spent_usd > 0.0 => dollars_of(None),
        (None, None) => format!("{} tok", tokens(budget.spent_tokens)),
    }
}

/// How far a budget is to its cap, in per mille of the nearest measure.
fn used_of(budget: &BudgetStatus) -> Option<u64> {
    let usd = budget.cap_usd.filter(|cap| *cap > 0.0).map(|cap| budget.spent_usd / cap);
    let tokens = budget.cap_tokens.filter(|cap| *cap > 0);
    let tokens = tokens.map(|cap| budget.spent_tokens as f64 / cap as f64);
    let share = usd.into_iter().chain(tokens).reduce(f64::max)?;
    Some((share.min(1.0) * 1000.0) as u64)
}

fn state_key(state: BudgetState) -> &'static str {
    match state {
        BudgetState::Ok => "ok",
        BudgetState::Warning => "warning",
        BudgetState::Reached => "reached",
        BudgetState::Unknown => "",
    }
}

fn period_label(period: BudgetPeriod) -> &'static str {
    match period {
        BudgetPeriod::Day => "today",
        _ => "this month",
    }
}

/// The fleet's memory and spend against their limits, above the list, once
/// the daemon told the fleet.
#[component]
pub fn FleetBar() -> impl IntoView {
    move || state().fleet.now.with(Option::is_some).then(fleet_bar)
}

fn fleet_bar() -> AnyView {
    let state = state();
    let now = state.fleet.now;
    let agents = state.roster.agents;
    let memory = move || {
        now.with(|now| {
            let now = now.as_ref()?;
            let used = now.agents_total.pss_bytes;
            let limits = now.limits;
            let limit = [limits.memory_hard_mb, limits.memory_soft_mb].into_iter().find(|mb| *mb > 0);
            let figure = match limit {
                Some(mb) => format!("{} of {} MB", bytes(used), mb),
                None => bytes(used),
            };
            let meter = limit.map(|mb| view! {
                <meter min="0" max=(mb * MB).to_string() value=used.to_string()
                    aria-label="Memory of all agents against the fleet's ceiling"></meter>
            });
            Some(view! { <span class="fleet-memory" title="what every agent's processes hold (PSS)">"Memory " {meter} {figure}</span> })
        })
    };
    let awake = move || {
        now.with(|now| {
            let now = now.as_ref()?;
            let max = now.limits.max_awake_agents;
            let running = now.agents.len();
            let sleeping = agents.with(|agents| {
                let hibernated = |agent: &&shard_protocol::types::AgentInfo| {
                    agent.runtime_state == RuntimeState::Hibernated
                };
                agents.iter().filter(hibernated).count()
            });
            let mut said = match max {
                0 => format!("{running} awake"),
                max => format!("{running} of {max} awake"),
            };
            if sleeping > 0 {
                said.push_str(&format!(" · {sleeping} hibernated"));
            }
            Some(view! { <span class="fleet-awake">{said}</span> })
        })
    };
    let spend = move || {
        now.with(|now| {
            let spend = now.as_ref().map(|now| now.spend.clone()).unwrap_or_default();
            spend.into_iter().map(|budget| {
                let meter = used_of(&budget).map(|used| view! {
                    <meter min="0" max="1000" high="800" optimum="0" value=used.to_string()
                        aria-label=format!("Spent {} against the daemon's cap", period_label(budget.period))></meter>
                });
                let said = format!("{} {}", period_label(budget.period), spent_of(&budget));
                view! { <span class="fleet-spend" data-state=state_key(budget.state)>{meter} {said}</span> }
            }).collect_view()
        })
    };
    view! {
        <section class="fleet-bar" aria-label="Fleet">
            {memory} {awake} {spend}
        </section>
    }
    .into_any()
}

/// What an agent's processes use, as of the fleet's last look, in its row
/// of the list: `312 MB`; nothing while no process of it runs.
#[component]
pub fn AgentMeter(agent_id: String) -> impl IntoView {
    let fleet = state().fleet;
    let said = move || fleet.of(&agent_id).map(|used| bytes(used.pss_bytes));
    view! { <span class="memory" title="what its processes hold (PSS)">{said}</span> }
}

/// The agent on screen's meter in its header (whose code is a chunk
/// already): what its processes hold and their CPU, with a meter against
/// its own ceiling when it has one.
pub fn meter(agent_id: String) -> AnyView {
    let fleet = state().fleet;
    let used = Memo::new(move |_| fleet.of(&agent_id));
    let ceiling =
        move || fleet.now.with(|now| now.as_ref().map_or(0, |now| now.limits.agent_memory_mb));
    let meter = move || {
        let Resources { pss_bytes, cpu_percent, .. } = used.get()?;
        let said = format!("{} · {}% CPU", bytes(pss_bytes), cpu_percent.round() as u64);
        let meter = (ceiling() > 0).then(|| view! {
            <meter min="0" max=(ceiling() * MB).to_string() high=(ceiling() * MB * 8 / 10).to_string()
                value=pss_bytes.to_string() aria-label="Memory against the agent's ceiling"></meter>
        });
        Some(
            view! { <span class="memory" title="what its processes hold (PSS)">{meter} {said}</span> },
        )
    };
    meter.into_any()
}

/// The agent on screen's budgets: every one that applies to it, with what
/// was spent, and its own cap set or raised from here.
#[component]
pub fn BudgetPanel() -> impl IntoView {
    let state = state();
    let (fleet, screen) = (state.fleet, state.screen);
    let open = fleet.budgets_open;
    let fetch = move || {
        if let Some(agent_id) = screen.selected.get_untracked() {
            fleet.list_budgets(&agent_id);
        }
    };
    view! {
        <Panel class="budget-panel" label="Budget" open=open on_open=fetch>
            {super::deferred(move || open.get(), budget_body)}
        </Panel>
    }
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(budget_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn budget_body() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let (fleet, screen) = (state.fleet, state.screen);
    let shown = move || {
        let selected = screen.selected.get().unwrap_or_default();
        fleet.budgets.with(|shown| match shown {
            Some((agent_id, listed)) if *agent_id == selected => {
                listed.decoded().map(|listed| listed.budgets)
            }
            _ => Ok(Vec::new()),
        })
    };
    let list = move || {
        let budgets = match shown() {
            Ok(budgets) => budgets,
            Err(why) => {
                return view! { <p class="budget-outcome error" role="alert">{why}</p> }.into_any();
            }
        };
        if budgets.is_empty() {
            return view! { <p class="empty">"No budget applies to this agent."</p> }.into_any();
        }
        view! {
            <ul class="budgets">
                {budgets.into_iter().map(|budget| view! { <BudgetRow budget/> }).collect_view()}
            </ul>
        }
        .into_any()
    };
    Ok(view! { {list} <CapForm/> }.into_any())
}

fn scope_label(budget: &BudgetStatus) -> &'static str {
    match budget.scope {
        BudgetScope::Agent => "agent",
        BudgetScope::Workspace => "workspace",
        _ => "daemon",
    }
}

/// One budget: what it caps, what was spent, and a raise when reached.
#[component]
fn BudgetRow(budget: BudgetStatus) -> impl IntoView {
    let fleet = state().fleet;
    let said = format!(
        "{} · {}: {}",
        scope_label(&budget),
        period_label(budget.period),
        spent_of(&budget)
    );
    let reached = budget.state == BudgetState::Reached;
    // Another cap's worth from what was spent, for this period only: what
    // the budget question's "raise" gives.
    let raise = move |_| {
        let more = |cap: Option<f64>, spent: f64| cap.map(|cap| spent + cap);
        fleet.set_budget(BudgetSet {
            scope: budget.scope,
            agent_id: budget.agent_id.clone(),
            workspace_id: budget.workspace_id.clone(),
            period: budget.period,
            usd: more(budget.cap_usd, budget.spent_usd),
            tokens: budget.cap_tokens.map(|cap| budget.spent_tokens + cap),
            this_period: true,
            clear: false,
        });
    };
    view! {
        <li class="budget" data-state=state_key(budget.state)>
            <span>{said}</span>
            {reached.then(|| view! {
                <button type="button" class="raise" on:click=raise
                    title="Another cap's worth for this period; the agents it paused go on">"Raise"</button>
            })}
        </li>
    }
}

/// This agent's own cap: per day or month, in dollars, tokens or both, for
/// good or this period only; or back to what config.toml says.
#[component]
fn CapForm() -> impl IntoView {
    let state = state();
    let (fleet, screen) = (state.fleet, state.screen);
    let period = RwSignal::new("day".to_owned());
    let usd = RwSignal::new(String::new());
    let token_cap = RwSignal::new(String::new());
    let this_period = RwSignal::new(false);
    let send = move |clear: bool| {
        let Some(agent_id) = screen.selected.get_untracked() else { return };
        let period = match period.get_untracked().as_str() {
            "month" => BudgetPeriod::Month,
            _ => BudgetPeriod::Day,
        };
        fleet.set_budget(BudgetSet {
            scope: BudgetScope::Agent,
            agent_id: Some(agent_id),
            workspace_id: None,
            period,
            usd: usd.get_untracked().trim().parse().ok(),
            tokens: token_cap.get_untracked().trim().parse().ok(),
            this_period: this_period.get_untracked(),
            clear,
        });
    };
    let outcome = move || {
        let outcome = fleet.set.get()?.and_then(|set| set.decoded().map(|set| set.budget));
        Some(match outcome {
            Ok(budget) => view! { <p class="budget-outcome" role="status">{format!("Now {}: {}", period_label(budget.period), spent_of(&budget))}</p> }.into_any(),
            Err(why) => view! { <p class="budget-outcome error" role="alert">{why}</p> }.into_any(),
        })
    };
    view! {
        <form class="cap-form" aria-label="This agent's cap" on:submit=move |event| { event.prevent_default(); send(false); }>
            <label>"Per"
                <select aria-label="Period" on:change=move |event| period.set(event_target_value(&event))>
                    <option value="day">"day"</option>
                    <option value="month">"month"</option>
                </select>
            </label>
            <label>"Dollars"
                <input type="number" min="0" step="any" inputmode="decimal" aria-label="Cap in dollars"
                    prop:value=usd on:input=move |event| usd.set(event_target_value(&event))/>
            </label>
            <label>"Tokens"
                <input type="number" min="0" step="1" inputmode="numeric" aria-label="Cap in tokens"
                    prop:value=token_cap on:input=move |event| token_cap.set(event_target_value(&event))/>
            </label>
            <label class="check">
                <input type="checkbox" prop:checked=this_period
                    on:change=move |event| this_period.set(event_target_checked(&event))/>
                "this period only"
            </label>
            <button type="submit">"Set cap"</button>
            <button type="button" on:click=move |_| send(true)
                title="Back to what config.toml says">"Clear"</button>
        </form>
        {outcome}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(cap_usd: Option<f64>, cap_tokens: Option<u64>, usd: f64, tok: u64) -> BudgetStatus {
        BudgetStatus {
            scope: BudgetScope::Agent,
            agent_id: Some("a-1".to_owned()),
            workspace_id: None,
            period: BudgetPeriod::Day,
            cap_usd,
            cap_tokens,
            spent_usd: usd,
            spent_tokens: tok,
            unpriced_calls: 0,
            state: BudgetState::Ok,
            source: shard_protocol::budget::CapSource::Set,
            period_start: 0,
            resets_at: 0,
        }
    }

    #[test]
    fn a_budget_says_what_it_spent_of_its_cap_in_the_measure_it_caps() {
        assert_eq!(spent_of(&budget(Some(5.0), None, 1.25, 900)), "$1.2500 of $5.0000");
        assert_eq!(spent_of(&budget(None, Some(50_000), 0.0, 12_300)), "12.3k of 50.0k tok");
        assert_eq!(spent_of(&budget(None, None, 0.5, 10)), "$0.5000");
        assert_eq!(spent_of(&budget(None, None, 0.0, 1500)), "1.5k tok");
    }

    #[test]
    fn the_nearest_cap_fills_the_meter() {
        assert_eq!(used_of(&budget(Some(4.0), Some(1000), 1.0, 900)), Some(900));
        assert_eq!(used_of(&budget(Some(1.0), None, 3.0, 0)), Some(1000), "past the cap: full");
        assert_eq!(used_of(&budget(None, None, 3.0, 10)), None);
    }
}
