//! Nodes on the page (docs/NODES.md): the bar that tells each node's link
//! above the agent list, and the mark that tells a node's agent from the
//! hub's own, on its row and in its header.

use leptos::prelude::*;
use shard_protocol::node::{NodeInfo, NodeState};

use super::state;
use crate::nodes::state_label;

/// Every node's link, once the hub has nodes: its name, its state and,
/// while it is down, why.
#[component]
pub fn NodeBar() -> impl IntoView {
    let nodes = state().nodes;
    view! {
        <Show when=move || !nodes.all.with(Vec::is_empty)>
            <section class="node-bar" aria-label="Nodes">
                <ul>
                    <For each=move || nodes.all.get() key=|info| (info.id.clone(), state_label(info.state), info.since) let:info>
                        <NodeItem info=info/>
                    </For>
                </ul>
            </section>
        </Show>
    }
}

#[component]
fn NodeItem(info: NodeInfo) -> impl IntoView {
    let NodeInfo { id, state, error, .. } = info;
    let why = error.filter(|_| state != NodeState::Online);
    let title = why.clone().unwrap_or_default();
    let shown = why.map(|why| view! { <span class="node-error">{why}</span> });
    let name = id.clone();
    view! {
        <li class="node" data-node=id data-state=state_label(state) title=title>
            <span class="node-name">{name}</span>
            <span class="node-state">{state_label(state)}</span>
            {shown}
        </li>
    }
}

/// The mark of an agent that runs on `node` (nothing for the hub's own):
/// where it runs, and whether its link is up now.
pub fn node_mark(
    node: impl Fn() -> Option<String> + Send + Sync + Copy + 'static,
) -> impl IntoView {
    let nodes = state().nodes;
    move || {
        let node = node()?;
        let node_state = nodes.state_of(&node).unwrap_or(NodeState::Unknown);
        let (text, title) = match node_state {
            NodeState::Online => (format!("on {node}"), format!("runs on the node {node}")),
            other => (
                format!("{node} {}", state_label(other)),
                format!("runs on the node {node}, whose link is {}", state_label(other)),
            ),
        };
        Some(view! {
            <span class="badge node" data-node=node data-state=state_label(node_state) title=title>{text}</span>
        })
    }
}
