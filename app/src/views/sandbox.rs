//! The containment line of the agent on screen (docs/SANDBOX.md): what its
//! sandbox lets it write and reach, whether what stays inside runs without
//! asking, and the hosts it reaches without asking, each one a person
//! allowed with its "Revoke". It follows the roster, which `agent_sandbox`
//! keeps current in every tab. It is part of the agent header's chunk
//! (`views::agent`), fetched when an agent is first on screen.

use leptos::prelude::*;
// Hosts as a person is shown them: hidden characters as visible escapes.
use shard_protocol::display::escaped;
use shard_protocol::sandbox::SandboxMode;

use super::state;
use crate::sandbox::{AllowedHost, allowed_hosts, mode_label, network_label};

/// The line, for the agent on screen; nothing when the daemon does not
/// say what contains it.
#[component]
pub fn Containment() -> impl IntoView {
    let state = state();
    let (selected, agents) = (state.screen.selected, state.roster.agents);
    let shown = Memo::new(move |_| {
        let selected = selected.get()?;
        agents.with(|agents| {
            let agent = agents.iter().find(|agent| agent.agent_id == selected)?;
            Some((selected.clone(), agent.sandbox.clone()?))
        })
    });
    move || {
        shown.get().map(|(agent_id, sandbox)| {
            let hosts = allowed_hosts(&sandbox);
            // Uncontained is the owner's choice, and worth a warning.
            let off = sandbox.mode == SandboxMode::Off;
            let inside = sandbox.allow_inside.then(|| {
                view! {
                    <span class="sandbox-inside" title="config.toml's allow_inside: the sandbox holds them">
                        "commands inside run without asking"
                    </span>
                }
            });
            view! {
                <div class="containment" role="group" aria-label="Sandbox" data-mode=sandbox.mode.as_str()
                    data-network=sandbox.network.as_str()>
                    <span class="sandbox-mode" class:badge=off>{mode_label(sandbox.mode)}</span>
                    <span class="sandbox-network">{network_label(sandbox.network)}</span>
                    {inside}
                    {(!hosts.is_empty()).then(|| view! {
                        <span class="sandbox-allowed">"allowed:"</span>
                        <ul class="sandbox-hosts" aria-label="Hosts allowed without asking">
                            {hosts.into_iter().map(|host| view! { <Host agent_id=agent_id.clone() host=host/> }).collect_view()}
                        </ul>
                    })}
                </div>
            }
        })
    }
}

/// One allowed host: one a person allowed can be taken back here; one
/// config.toml allows only its owner can take back.
#[component]
fn Host(agent_id: String, host: AllowedHost) -> impl IntoView {
    let roster = state().roster;
    let AllowedHost { host, granted } = host;
    let name = escaped(&host);
    let revoke = granted.then(|| {
        let label = format!("Revoke {name}");
        view! {
            <button type="button" class="revoke" aria-label=label
                title="Take back this host: the agent asks again before it connects"
                on:click=move |_| roster.revoke(agent_id.clone(), host.clone())>"Revoke"</button>
        }
    });
    let origin = if granted { "allowed always by a person" } else { "allowed by config.toml" };
    view! {
        <li class="sandbox-host" data-granted=granted.to_string() title=origin>
            <code>{name}</code>{revoke}
        </li>
    }
}
