//! The agent list: one keyed row per agent, each updating on its own,
//! children under their parents. The form that creates an agent is its own
//! noun ([`super::new_agent`]).

use leptos::prelude::*;
use shard_protocol::orchestrator::ActivityPhase;
use shard_protocol::types::AgentInfo;

use std::collections::{BTreeMap, BTreeSet};

use super::{phase_label, run_label, runtime_label, state, status_label};
use crate::order::{set_of, sort_by_rank};
use crate::roster::waiting;
use crate::workspaces::Row;

/// How the list is sorted.
fn sorted(mut list: Vec<AgentInfo>, sort: &str) -> Vec<AgentInfo> {
    match sort {
        "name" => sort_by_rank(&mut list, |agent| {
            (0, agent.identity.name.clone().unwrap_or_default().to_lowercase())
        }),
        "status" => sort_by_rank(&mut list, |agent| {
            (u64::from(!waiting(agent.status)), status_label(agent.status).to_owned())
        }),
        // Most used first.
        "cost" => sort_by_rank(&mut list, |agent| {
            let used = agent.usage.as_ref().map_or(0, |usage| usage.input + usage.output);
            (u64::MAX - used, String::new())
        }),
        _ => {}
    }
    list
}

fn matches(agent: &AgentInfo, needle: &str) -> bool {
    needle.is_empty()
        || [
            agent.identity.name.as_deref().unwrap_or(""),
            &agent.cwd,
            &agent.agent_id,
            agent.model.as_deref().unwrap_or(""),
        ]
        .iter()
        .any(|field| field.to_lowercase().contains(needle))
}

/// The ids in tree order: each agent, then its children (unless collapsed),
/// siblings in list order. An agent whose parent is not in `list` (filtered
/// out) is a root.
fn tree_order(list: &[AgentInfo], collapsed: &BTreeSet<String>) -> Vec<String> {
    let listed: BTreeSet<&str> = set_of(list.iter().map(|agent| agent.agent_id.as_str()));
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut roots = Vec::new();
    for agent in list {
        match agent.identity.parent_agent_id.as_deref().filter(|parent| listed.contains(parent)) {
            Some(parent) => children.entry(parent).or_default().push(&agent.agent_id),
            None => roots.push(agent.agent_id.as_str()),
        }
    }
    let mut order = Vec::new();
    let mut stack: Vec<&str> = roots.into_iter().rev().collect();
    while let Some(agent_id) = stack.pop() {
        // A corrupt manifest loop cannot make the walk endless.
        if order.len() > list.len() {
            break;
        }
        order.push(agent_id.to_owned());
        if !collapsed.contains(agent_id)
            && let Some(below) = children.get(agent_id)
        {
            stack.extend(below.iter().rev());
        }
    }
    // Agents in a parent loop (corrupt data) have no root: still listed.
    let seen: BTreeSet<String> = set_of(order.iter().cloned());
    let reachable = |agent: &AgentInfo| {
        let mut current = agent.identity.parent_agent_id.as_deref();
        for _ in 0..list.len() {
            match current {
                Some(parent) if collapsed.contains(parent) => return false,
                Some(parent) if seen.contains(parent) => current = None,
                Some(parent) => {
                    current = list
                        .iter()
                        .find(|a| a.agent_id == parent)
                        .and_then(|a| a.identity.parent_agent_id.as_deref())
                }
                None => return true,
            }
        }
        true
    };
    order.extend(
        list.iter()
            .filter(|agent| !seen.contains(&agent.agent_id) && reachable(agent))
            .map(|agent| agent.agent_id.clone()),
    );
    order
}

/// How many ancestors `agent_id` has in `agents`.
fn depth_of(agents: &[AgentInfo], agent_id: &str) -> usize {
    let parent = |id: &str| {
        agents
            .iter()
            .find(|agent| agent.agent_id == id)
            .and_then(|agent| agent.identity.parent_agent_id.clone())
    };
    let mut depth = 0;
    let mut current = parent(agent_id);
    while let Some(id) = current {
        depth += 1;
        if depth >= 16 || !agents.iter().any(|agent| agent.agent_id == id) {
            break;
        }
        current = parent(&id);
    }
    depth
}

/// Every agent, filtered and sorted, children under their parents. Rows
/// are keyed by agent: a change to one agent updates its row only.
#[component]
pub fn AgentList() -> impl IntoView {
    let state = state();
    let filter = RwSignal::new(String::new());
    let sort = RwSignal::new("created".to_owned());
    let agents = state.roster.agents;
    // The ids in order: the list itself changes only when this does.
    let collapsed = state.roster.collapsed;
    let workspaces = state.workspaces.all;
    let rows = Memo::new(move |_| {
        let needle = filter.get().to_lowercase();
        let list: Vec<AgentInfo> = agents.with(|agents| {
            agents.iter().filter(|agent| matches(agent, &needle)).cloned().collect()
        });
        let list = sorted(list, &sort.get());
        let order = collapsed.with(|collapsed| tree_order(&list, collapsed));
        let rows = workspaces.with(|workspaces| crate::workspaces::rows(&list, &order, workspaces));
        if needle.is_empty() { rows } else { crate::workspaces::without_empty_groups(rows) }
    });
    let none = move || agents.with(Vec::is_empty);
    let no_match =
        move || !none() && rows.with(|rows| !rows.iter().any(|row| matches!(row, Row::Agent(_))));
    view! {
        <section class="agent-list" aria-label="Agents">
            <div class="list-tools">
                <input type="search" class="filter" placeholder="Filter agents" aria-label="Filter agents"
                    prop:value=filter on:input=move |event| filter.set(event_target_value(&event))/>
                <label class="sort">"Sort"
                    <select aria-label="Sort agents" on:change=move |event| sort.set(event_target_value(&event))>
                        <option value="created">"created"</option>
                        <option value="name">"name"</option>
                        <option value="status">"needs me"</option>
                        <option value="cost">"usage"</option>
                    </select>
                </label>
            </div>
            <super::nodes::NodeBar/>
            <super::fleet::FleetBar/>
            <super::ledger::UsageTotal/>
            <ul class="agents">
                <Show when=none><li class="empty">"No agents yet: create one under \u{201c}New agent\u{201d}."</li></Show>
                <Show when=no_match><li class="empty">"No agent matches."</li></Show>
                <For each=move || rows.get() key=Row::key let:row>
                    {match row {
                        Row::Agent(agent_id) => view! { <AgentRow agent_id=agent_id/> }.into_any(),
                        heading => view! { <super::workspace::Heading row=heading/> }.into_any(),
                    }}
                </For>
            </ul>
        </section>
    }
}

/// How many levels of subagents the list indents; deeper ones line up with
/// the last. The stylesheet has a rule for each (`data-depth`): the page's
/// policy allows no inline style.
const MAX_INDENT: usize = 6;

/// One agent's row: its name, badges, status, activity, place and usage.
#[component]
fn AgentRow(agent_id: String) -> impl IntoView {
    let state = state();
    let roster = state.roster;
    let info = {
        let agents = roster.agents;
        let agent_id = agent_id.clone();
        Memo::new(move |_| {
            agents.with(|agents| agents.iter().find(|agent| agent.agent_id == agent_id).cloned())
        })
    };
    let unread = {
        let unread = roster.unread;
        let agent_id = agent_id.clone();
        Memo::new(move |_| unread.with(|unread| unread.contains(&agent_id)))
    };
    let is_selected = {
        let selected = state.screen.selected;
        let agent_id = agent_id.clone();
        move || selected.with(|selected| selected.as_deref() == Some(agent_id.as_str()))
    };
    let depth = {
        let agents = roster.agents;
        let agent_id = agent_id.clone();
        Memo::new(move |_| agents.with(|agents| depth_of(agents, &agent_id)))
    };
    let parent = field(info, |info| info.identity.parent_agent_id.clone().unwrap_or_default());
    // A node's agent while its link is down: shown, out of reach.
    let nodes = state.nodes;
    let unreachable = move || {
        let node = info.with(|info| info.as_ref().and_then(|info| info.node.clone()));
        !nodes.reachable(node.as_deref())
    };
    let (head, facts) = (agent_id.clone(), agent_id.clone());
    view! {
        <li class="agent" class:selected=is_selected class:unread=move || unread.get() class:child=move || { depth.get() > 0 } class:unreachable=unreachable
            data-agent-id=agent_id data-parent-id=parent data-depth=move || depth.get().min(MAX_INDENT)>
            <RowHead agent_id=head info=info unread=unread/>
            <RowFacts agent_id=facts info=info/>
        </li>
    }
}

/// A text `read` from the agent's row as it is now, or nothing.
fn field(
    info: Memo<Option<AgentInfo>>,
    read: fn(&AgentInfo) -> String,
) -> impl Fn() -> String + Copy + Send + Sync + 'static {
    move || info.with(|info| info.as_ref().map(read).unwrap_or_default())
}

/// A row's head: the fold of its children, and the button that opens the
/// agent with its name and badges.
#[component]
fn RowHead(agent_id: String, info: Memo<Option<AgentInfo>>, unread: Memo<bool>) -> impl IntoView {
    let state = state();
    let roster = state.roster;
    let needs_you =
        move || info.with(|info| info.as_ref().is_some_and(|info| waiting(info.status)));
    // Names and aliases as a person is shown them: hidden characters as
    // visible escapes (shard_protocol::display).
    let name = field(info, |info| {
        shard_protocol::display::escaped(info.identity.name.as_deref().unwrap_or(&info.agent_id))
    });
    let children = {
        let agents = roster.agents;
        let agent_id = agent_id.clone();
        Memo::new(move |_| {
            agents.with(|agents| {
                agents
                    .iter()
                    .filter(|agent| {
                        agent.identity.parent_agent_id.as_deref() == Some(agent_id.as_str())
                    })
                    .count()
            })
        })
    };
    let run = {
        let jobs = state.jobs;
        let agent_id = agent_id.clone();
        Memo::new(move |_| jobs.run_of(&agent_id).map(|run| run_label(run.state)))
    };
    let collapsed = roster.collapsed;
    let expanded = {
        let agent_id = agent_id.clone();
        Memo::new(move |_| collapsed.with(|collapsed| !collapsed.contains(&agent_id)))
    };
    let toggle = {
        let agent_id = agent_id.clone();
        move |_| {
            collapsed.update(|collapsed| {
                if !collapsed.remove(&agent_id) {
                    collapsed.insert(agent_id.clone());
                }
            })
        }
    };
    let alias = field(info, |info| {
        shard_protocol::display::escaped(info.identity.alias.as_deref().unwrap_or_default())
    });
    let select = move |_| state.select(Some(agent_id.clone()));
    view! {
        <div class="row-head">
        <Show when=move || { children.get() > 0 }>
            <button class="toggle" on:click=toggle.clone() aria-expanded=move || expanded.get().to_string()
                aria-label=move || format!("{} the {} of {}", if expanded.get() { "Hide" } else { "Show" }, super::counted(children.get() as u64, "subagent", "subagents"), name())>
                {move || if expanded.get() { "▾" } else { "▸" }}
            </button>
        </Show>
        <button class="open" on:click=select aria-label=move || format!("Open {}", name())>
            <span class="name">{name}</span>
            {super::nodes::node_mark(move || info.with(|info| info.as_ref()?.node.clone()))}
            // A subagent's alias, unless it is its name already.
            <Show when=move || { let alias = alias(); !alias.is_empty() && alias != name() }>
                <span class="badge alias" title="its alias under its parent">{alias}</span>
            </Show>
            {move || run.get().map(|state| view! {
                <span class="badge run" data-run-state=state title="its subagent run">{format!("run {state}")}</span>
            })}
            <Show when=needs_you>
                <span class="badge waiting" title="a question is waiting for you">"waiting for you"</span>
            </Show>
            <Show when=move || unread.get()>
                <span class="badge unread" title="new activity since you last looked">"new"</span>
            </Show>
        </button>
        </div>
    }
}

/// A row's facts: status, runtime, activity, place, model and usage.
#[component]
fn RowFacts(agent_id: String, info: Memo<Option<AgentInfo>>) -> impl IntoView {
    let metered = agent_id.clone();
    let doing = {
        let activity = state().roster.activity;
        Memo::new(move |_| {
            activity.with(|map| {
                // Idle and waiting are the status already.
                map.get(&agent_id).and_then(|doing| match &doing.tool_name {
                    Some(tool) => Some(format!("{} · {tool}", phase_label(doing.phase))),
                    None if matches!(doing.phase, ActivityPhase::Idle | ActivityPhase::Waiting) => {
                        None
                    }
                    None => Some(phase_label(doing.phase).to_owned()),
                })
            })
        })
    };
    let status = field(info, |info| status_label(info.status).to_owned());
    view! {
        <span class="status" data-status=status>{status}</span>
        <span class="runtime">{field(info, |info| runtime_label(info.runtime_state).to_owned())}</span>
        <span class="activity">{move || doing.get()}</span>
        <span class="cwd" title=field(info, |info| info.cwd.clone())>{field(info, |info| info.cwd.clone())}</span>
        <span class="model">{field(info, |info| [info.model.clone(), info.mode.clone()].into_iter().flatten().collect::<Vec<_>>().join(" · "))}</span>
        <span class="usage">{field(info, |info| info.usage.as_ref().map(|usage| match usage.cost {
            Some(cost) => format!("{} tok · {}", super::ledger::tokens(usage.input + usage.output), super::dollars(cost)),
            None => format!("{} tok", super::ledger::tokens(usage.input + usage.output)),
        }).unwrap_or_default())}</span>
        <super::fleet::AgentMeter agent_id=metered/>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(agent_id: &str, parent: Option<&str>) -> AgentInfo {
        serde_json::from_value(serde_json::json!({
            "agent_id": agent_id, "cwd": "/", "status": "idle", "runtime_state": "stopped",
            "created_at": 0, "parent_agent_id": parent,
        }))
        .expect("agent info")
    }

    #[test]
    fn children_follow_their_parent_and_fold_with_it() {
        let list = vec![
            agent("a", None),
            agent("b", None),
            agent("a1", Some("a")),
            agent("b1", Some("b")),
            agent("a1x", Some("a1")),
            agent("a2", Some("a")),
            agent("orphan", Some("gone")),
        ];
        let none = BTreeSet::new();
        assert_eq!(tree_order(&list, &none), ["a", "a1", "a1x", "a2", "b", "b1", "orphan"]);
        let folded = BTreeSet::from(["a1".to_owned()]);
        assert_eq!(tree_order(&list, &folded), ["a", "a1", "a2", "b", "b1", "orphan"]);
        assert_eq!(depth_of(&list, "a1x"), 2);
        assert_eq!(depth_of(&list, "orphan"), 1, "its parent is not listed");
        // A loop in corrupt data ends.
        let looped = vec![agent("x", Some("y")), agent("y", Some("x"))];
        assert_eq!(tree_order(&looped, &none), ["x", "y"], "no root, still listed");
        assert_eq!(depth_of(&looped, "x"), 16);
    }
}
