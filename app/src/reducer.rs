//! How each message from the daemon reaches the slices that own what it
//! changes: the client's reducer. It only routes: each slice applies what
//! concerns it (`Roster::status_changed`, `Screen::apply`,
//! `Questions::peeked`, …), and a response goes by what its request was for
//! ([`Request`]). It is compiled where messages arrive, in the browser, and
//! for the native unit tests that feed it the daemon's own frames
//! (`reducer/tests.rs`); the connection (`client`) only feeds it.

use leptos::prelude::{GetUntracked, Set, untrack};
use shard_protocol::agent::{PendingKind, UiKind};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::SessionActivateResult;
use shard_protocol::types::{AgentStatus, RuntimeState};
use shard_protocol::{Envelope, ServerMessage};

use crate::link::Request;
use crate::questions::Question;
use crate::roster::waiting;
use crate::screen::Sent;
use crate::state::ClientState;

/// Whether a message was the daemon's greeting, and whether it fit.
pub enum Greeted {
    Yes,
    No,
    Mismatch,
}

/// Applies one message.
pub fn handle(state: &ClientState, text: &str) -> Greeted {
    let Ok(envelope) = Envelope::<ServerMessage>::from_json(text) else {
        return Greeted::No; // a newer daemon's message: ignore it
    };
    let routed = envelope.agent_id;
    let mine = routed.as_deref().is_some_and(|agent_id| state.screen.shows(agent_id));
    if let (true, Some(seq)) = (mine, envelope.seq) {
        state.screen.saw(seq);
    }
    match envelope.message {
        ServerMessage::Hello(hello) => return greeted(state, &hello),
        ServerMessage::Response(response) => {
            if let Some(request) = envelope.id.as_deref().and_then(|id| state.link.close(id)) {
                response_arrived(state, request, response);
            }
        }
        ServerMessage::Sync(sync) => {
            let Some(agent_id) = routed else { return Greeted::No };
            if mine {
                let pending = state.screen.synced(sync, envelope.seq);
                state.questions.synced(&agent_id, pending);
                // A search result waiting for this transcript.
                state.seek(&agent_id);
            } else {
                state.questions.peeked(&agent_id, sync.pending_requests);
            }
        }
        ServerMessage::PairUsed(_) => state.pairing.link_used(),
        message @ (ServerMessage::PermissionRequest(_)
        | ServerMessage::UiRequest(_)
        | ServerMessage::PermissionResolved(_)
        | ServerMessage::UiResolved(_)) => question_event(state, routed, mine, message),
        message @ (ServerMessage::AgentSpawned(_)
        | ServerMessage::AgentStatusChanged(_)
        | ServerMessage::AgentExited(_)
        | ServerMessage::AgentUsage(_)
        | ServerMessage::AgentActivity(_)
        | ServerMessage::AgentSandbox(_)
        | ServerMessage::SubagentRunChanged(_)
        | ServerMessage::WorkspaceCreated(_)
        | ServerMessage::WorkspaceRetired(_)
        | ServerMessage::WorkspaceUpdated(_)
        | ServerMessage::WorkspaceAttached(_)
        | ServerMessage::WorkspaceConflict(_)
        | ServerMessage::FleetUpdated(_)
        | ServerMessage::BudgetUpdated(_)
        | ServerMessage::NodeChanged(_)) => registry_event(state, message),
        message if mine => {
            if let Some(agent_id) = &routed {
                state.roster.agent_event(agent_id, &message);
            }
            // A turn's messages joined its session: an open list counts them.
            if matches!(message, ServerMessage::TurnEnd(_)) {
                state.ledger.sessions_changed();
            }
            state.screen.apply(message);
        }
        _ => {}
    }
    Greeted::No
}

/// The daemon's `hello`: if it speaks this page's protocol, the lists are
/// asked for and the agent on screen is re-attached from its cursor (what
/// it missed follows, or a sync that brings it all back).
fn greeted(state: &ClientState, hello: &shard_protocol::agent::Hello) -> Greeted {
    if !state.link.greeted(&hello.protocol_version) {
        return Greeted::Mismatch;
    }
    #[cfg(feature = "hydrate")]
    state.link.presence(crate::link::on_screen());
    let actions = hello.capabilities.iter().any(|known| known == "workspace-actions");
    state.workspaces.actions.set(actions);
    state.roster.list();
    state.roster.list_runtimes("");
    state.fleet.watch();
    state.nodes.list();
    state.workspaces.list();
    if let Some(agent_id) = state.screen.selected.get_untracked() {
        state.screen.resume(&agent_id);
    }
    Greeted::Yes
}

/// The workspace on screen, by id (untracked).
fn shown_workspace(state: &ClientState) -> Option<String> {
    untrack(|| state.shown_workspace()).map(|shown| shown.workspace_id)
}

/// What every connection hears of every agent, jobs and workspaces.
fn registry_event(state: &ClientState, message: ServerMessage) {
    match message {
        ServerMessage::AgentSpawned(spawned) => state.roster.upsert(spawned.info),
        ServerMessage::AgentStatusChanged(changed) => {
            let on_screen = state.screen.shows(&changed.agent_id);
            state.roster.status_changed(&changed, on_screen);
            let asks = waiting(changed.status);
            state.questions.status_changed(&changed.agent_id, asks, on_screen);
            if !running(changed.runtime_state) {
                runtime_gone(state, &changed.agent_id, Some(changed.status));
            }
        }
        ServerMessage::AgentExited(exited) => {
            state.roster.exited(&exited);
            if !running(exited.runtime_state) {
                runtime_gone(state, &exited.agent_id, None);
            }
        }
        ServerMessage::AgentUsage(usage) => {
            state.roster.usage_changed(&usage);
            if state.screen.shows(&usage.agent_id) {
                state.ledger.usage_changed();
            }
        }
        ServerMessage::AgentActivity(activity) => state.roster.activity_changed(activity),
        ServerMessage::AgentSandbox(changed) => state.roster.sandbox_changed(changed),
        ServerMessage::SubagentRunChanged(changed) => state.jobs.run_changed(changed),
        ServerMessage::WorkspaceCreated(event)
        | ServerMessage::WorkspaceRetired(event)
        | ServerMessage::WorkspaceUpdated(event) => {
            state.workspaces.changed(event.workspace, shown_workspace(state).as_deref())
        }
        ServerMessage::WorkspaceAttached(attached) => {
            state.workspaces.changed(attached.workspace, shown_workspace(state).as_deref())
        }
        ServerMessage::WorkspaceConflict(conflict) => {
            state.workspaces.changed(conflict.workspace, shown_workspace(state).as_deref())
        }
        ServerMessage::FleetUpdated(now) => state.fleet.updated(now),
        ServerMessage::BudgetUpdated(_) => state.fleet.budget_updated(),
        ServerMessage::NodeChanged(changed) => node_changed(state, changed),
        _ => {}
    }
}

/// A node's link moved. Back online, the agent on screen, if it is that
/// node's and could not be attached while the node was down, is attached
/// now.
fn node_changed(state: &ClientState, changed: shard_protocol::node::NodeChanged) {
    let online = changed.node.state == shard_protocol::node::NodeState::Online;
    let node = changed.node.id.clone();
    state.nodes.changed(changed);
    if !online || !state.screen.unreached.get_untracked() {
        return;
    }
    let Some(agent_id) = state.screen.selected.get_untracked() else { return };
    if state.roster.node_of(&agent_id).as_deref() == Some(node.as_str()) {
        state.screen.resync(&agent_id);
    }
}

/// A question asked or resolved. One of the agent on screen also changes
/// its approval history.
fn question_event(state: &ClientState, routed: Option<String>, mine: bool, message: ServerMessage) {
    let question = |request| routed.clone().map(|agent_id| Question { agent_id, request });
    match message {
        // A notice, not a question: a line of the transcript, on screen only.
        ServerMessage::UiRequest(request) if request.kind == UiKind::Notify => {
            let text = request.message.or(request.title).unwrap_or_default();
            if mine {
                state.screen.notice(text, false);
            }
        }
        ServerMessage::PermissionRequest(request) => {
            if mine {
                state.ledger.question_changed();
            }
            if let Some(question) = question(PendingKind::Permission(request)) {
                state.questions.add(question);
            }
        }
        ServerMessage::UiRequest(request) => {
            if let Some(question) = question(PendingKind::Ui(request)) {
                if mine {
                    state.ledger.question_changed();
                }
                state.questions.add(question);
            }
        }
        ServerMessage::PermissionResolved(resolved) => {
            state.questions.resolved(routed.as_deref(), &resolved.request_id);
            if mine {
                state.ledger.question_changed();
            }
        }
        ServerMessage::UiResolved(resolved) => {
            state.questions.resolved(routed.as_deref(), &resolved.request_id);
            if mine {
                state.ledger.question_changed();
            }
        }
        _ => {}
    }
}

/// Whether a runtime in `state` is there (or on its way) to speak for its
/// agent.
fn running(state: RuntimeState) -> bool {
    matches!(state, RuntimeState::Starting | RuntimeState::Running | RuntimeState::Unknown)
}

/// `agent_id`'s process stopped (killed, terminated, failed, switched to
/// another session): nothing it was doing goes on, and no event of it will
/// say so. Its activity ends; on screen, the status is the registry's,
/// nothing waits for an answer, and the rest waits for the next runtime's
/// `sync`.
fn runtime_gone(state: &ClientState, agent_id: &str, status: Option<AgentStatus>) {
    state.roster.runtime_gone(agent_id);
    if !state.screen.shows(agent_id) {
        return;
    }
    let status = status.or_else(|| state.roster.status_of(agent_id)).unwrap_or(AgentStatus::Idle);
    state.screen.runtime_gone(status);
    state.questions.forget(agent_id);
}

/// A response, to the slice whose request it answers.
fn response_arrived(state: &ClientState, request: Request, response: Response) {
    match request {
        Request::List => agents_listed(state, &response),
        Request::Runtimes { node } => state.roster.runtimes_listed(&node, &response),
        Request::Create => {
            if let Some(agent_id) = state.roster.created(&response) {
                state.select(Some(agent_id));
            }
        }
        Request::Jobs => state.jobs.answered(&response),
        Request::WorkspaceLaunch => {
            let launched = state.workspaces.launched(&response);
            if let Some(agent_id) = state.roster.answered_form(launched) {
                state.select(Some(agent_id));
            }
        }
        request @ (Request::Workspaces
        | Request::WorkspaceStatus { .. }
        | Request::WorkspaceRetire { .. }
        | Request::WorkspaceAction { .. }) => {
            let shown = || shown_workspace(state);
            if let Some(agent_id) = state.workspaces.answered(request, response, shown) {
                state.select(Some(agent_id));
            }
        }
        request @ (Request::Modes { .. }
        | Request::Models { .. }
        | Request::Levels { .. }
        | Request::Commands { .. }) => state.screen.catalog_answered(request, response),
        Request::Prompt { agent_id, text, queued } => {
            prompt_answered(state, Sent { agent_id, text, queued }, &response)
        }
        Request::Recall { agent_id } => state.screen.recalled(&agent_id, &response, &state.ledger),
        Request::Attach { agent_id } => {
            state.screen.attached(&agent_id, &response);
            // Refused while its node was down, though the node is back
            // already (its `node_changed` came first): attached now. Only
            // on the hub's word that it is online: a node it never told of
            // (gone from its config) is not tried again and again.
            let node = state.roster.node_of(&agent_id);
            let online = node.and_then(|node| untrack(|| state.nodes.state_of(&node)));
            if state.screen.unreached.get_untracked()
                && online == Some(shard_protocol::node::NodeState::Online)
            {
                state.screen.resync(&agent_id);
            }
        }
        Request::Peek { agent_id } => {
            if response.outcome.is_err() {
                state.questions.peek_failed(&agent_id);
            }
        }
        Request::Search { query } => state.search.answered(query, &response),
        request @ Request::Activate { .. } => session_activated(state, request, response),
        Request::Edit { agent_id, text } => {
            if state.ledger.edit_forked(&agent_id, &response) {
                state.screen.drafts.editing(text);
            }
        }
        request @ (Request::UsageAgent { .. }
        | Request::Sessions { .. }
        | Request::Fork { .. }
        | Request::Compact { .. }
        | Request::Approvals { .. }) => state.ledger.take_answer(request, response),
        Request::Answer { agent_id, request_id } => {
            answer_answered(state, agent_id, request_id, &response)
        }
        Request::Terminate { agent_id } => state.screen.terminated(&agent_id, &response),
        Request::Fleet => state.fleet.answered(&response),
        Request::Nodes => state.nodes.listed(&response),
        Request::Budgets { agent_id } => state.fleet.budgets_listed(agent_id, response),
        Request::BudgetSet => state.fleet.budget_set(response),
        Request::Borrow | Request::Detach | Request::Command => state.link.answered(&response),
        Request::Quiet => {}
    }
}

/// The agent list, to the roster. The list is the daemon's word on who
/// waits (after a reconnect, on what was answered meanwhile): the inbox
/// follows it rather than what the page had, and asks for the questions
/// of those who wait; the parents' jobs are asked for too.
fn agents_listed(state: &ClientState, response: &Response) {
    let Some(listed) = state.roster.listed(response) else { return };
    state.questions.only_of(&listed.waiting);
    for agent_id in listed.waiting {
        state.questions.refresh(&agent_id);
    }
    for parent in listed.parents {
        state.jobs.fetch(&parent);
    }
}

/// A prompt's answer, to the screen. Sent and shown: the view goes back
/// to the end, unheld.
fn prompt_answered(state: &ClientState, sent: Sent, response: &Response) {
    if response.success() && state.screen.shows(&sent.agent_id) {
        state.find.unmark();
    }
    state.screen.prompted(sent, response, &state.roster)
}

/// A session switched to: a search result waiting in it can be marked
/// once its transcript comes (crate::find), and the ledger takes the
/// answer.
fn session_activated(state: &ClientState, request: Request, response: Response) {
    if let Ok(switched) = response.data::<SessionActivateResult>() {
        state.find.activated(&switched.session_id);
    }
    state.ledger.take_answer(request, response);
}

/// An allow answered: one refused for want of a passkey asks for it
/// (the step-up, views::passkey).
fn answer_answered(state: &ClientState, agent_id: String, request_id: String, response: &Response) {
    if state.questions.answer_answered(&agent_id, &request_id, response) {
        #[cfg(feature = "hydrate")]
        crate::views::step_up(state.link, agent_id, request_id);
        #[cfg(not(feature = "hydrate"))]
        let _ = agent_id;
    }
}

#[cfg(test)]
mod tests;
