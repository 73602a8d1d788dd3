//! How each message from the daemon changes what the page knows: the
//! client's reducer. It lives outside the browser-only code so that native
//! unit tests drive it with the daemon's own frames; the connection
//! (`client`) only feeds it.

// Only the browser build has a connection to feed it; the daemon's (ssr)
// build compiles it for the tests.
#![cfg_attr(not(feature = "hydrate"), allow(dead_code))]

use leptos::prelude::{GetUntracked, Set, Update, WithUntracked};
use shard_protocol::agent::{
    ListModelsResult, ListModesResult, ListReasoningLevelsResult, PendingKind, Sync,
};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AgentsResult;
use shard_protocol::subagent::{SubagentRunChanged, SubagentStatusResult};
use shard_protocol::types::{AgentStatus, RuntimeState};
use shard_protocol::{Envelope, ServerMessage};

use crate::state::{ClientState, Connection, NOT_CONNECTED, Question, Request, waiting};
use crate::transcript::{self, Item};

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
    let selected = state.selected.get_untracked();
    let routed = envelope.agent_id.clone();
    let mine = routed.is_some() && routed == selected;
    if let (true, Some(seq)) = (mine, envelope.seq) {
        state.cursor.update(|cursor| *cursor = Some(cursor.map_or(seq, |known| known.max(seq))));
    }
    match envelope.message {
        ServerMessage::Hello(hello) => {
            // §7: another major version speaks another protocol.
            let ours = shard_protocol::PROTOCOL_VERSION;
            if major(&hello.protocol_version) != major(ours) {
                let newer = version(&hello.protocol_version) > version(ours);
                state.connection.set(Connection::Mismatch { newer });
                return Greeted::Mismatch;
            }
            state.connection.set(Connection::Connected);
            // Connected again: what could not be sent can be now.
            if state.notice.with_untracked(|notice| notice.as_deref() == Some(NOT_CONNECTED)) {
                state.notice.set(None);
            }
            state.list_agents();
            state.list_workspaces();
            // Re-attach the agent on screen from its cursor: what it missed
            // follows, or a sync that brings it all back.
            if let Some(agent_id) = selected {
                state.resume(&agent_id);
            }
            return Greeted::Yes;
        }
        ServerMessage::Response(response) => {
            let request = envelope.id.as_deref().and_then(|id| state.requests().close(id));
            if let Some(request) = request {
                response_arrived(state, request, response);
            }
        }
        // Another agent's sync comes from attaching only to answer: its
        // questions are already known, and the answer is on its way.
        ServerMessage::Sync(sync) if mine => apply_sync(state, sync, envelope.seq),
        ServerMessage::Sync(sync) => {
            let Some(agent_id) = routed else { return Greeted::No };
            if state.peeking().contains(&agent_id) {
                for pending in sync.pending_requests {
                    let agent_id = pending.agent_id.unwrap_or_else(|| agent_id.clone());
                    add_question(state, Question { agent_id, request: pending.request });
                }
                state.end_peek(&agent_id);
            }
        }
        ServerMessage::AgentSpawned(spawned) => state.upsert(spawned.info),
        ServerMessage::SubagentRunChanged(changed) => run_changed(state, changed),
        ServerMessage::WorkspaceCreated(event) | ServerMessage::WorkspaceRetired(event) => {
            crate::workspaces::changed(state, event.workspace)
        }
        ServerMessage::WorkspaceAttached(attached) => {
            crate::workspaces::changed(state, attached.workspace)
        }
        ServerMessage::WorkspaceConflict(conflict) => {
            crate::workspaces::changed(state, conflict.workspace)
        }
        ServerMessage::AgentStatusChanged(changed) => {
            let known = state.agents.with_untracked(|agents| {
                agents
                    .iter()
                    .find(|agent| agent.agent_id == changed.agent_id)
                    .map(|agent| (agent.status, agent.runtime_state))
            });
            let started = changed.runtime_state == shard_protocol::types::RuntimeState::Running
                && known.is_some_and(|(_, runtime)| runtime != changed.runtime_state);
            if started {
                // A (re)started process knows its model and mode: refresh.
                state.list_agents();
            }
            let asks = waiting(changed.status);
            let on_screen = Some(&changed.agent_id) == selected.as_ref();
            let was_busy = known.is_some_and(|(status, _)| {
                !matches!(status, AgentStatus::Idle | AgentStatus::Unknown)
            });
            let settled = matches!(changed.status, AgentStatus::Idle | AgentStatus::Error);
            if !on_screen && was_busy && settled {
                // A turn ended off screen: there is something to read.
                state.unread.update(|unread| {
                    unread.insert(changed.agent_id.clone());
                });
            }
            if asks && !on_screen {
                state.peek(&changed.agent_id);
            }
            if !asks && !on_screen {
                // Its questions were answered elsewhere (or denied).
                state.questions.update(|questions| {
                    questions.retain(|(agent, _), _| *agent != changed.agent_id)
                });
            }
            state.agents.update(|agents| {
                if let Some(agent) =
                    agents.iter_mut().find(|agent| agent.agent_id == changed.agent_id)
                {
                    agent.status = changed.status;
                    agent.runtime_state = changed.runtime_state;
                }
            });
            if !running(changed.runtime_state) {
                runtime_gone(state, &changed.agent_id, Some(changed.status));
            }
        }
        ServerMessage::AgentExited(exited) => {
            state.agents.update(|agents| {
                if let Some(agent) =
                    agents.iter_mut().find(|agent| agent.agent_id == exited.agent_id)
                {
                    agent.runtime_state = exited.runtime_state;
                }
            });
            if !running(exited.runtime_state) {
                runtime_gone(state, &exited.agent_id, None);
            }
        }
        ServerMessage::AgentUsage(usage) => crate::ledger::usage_changed(state, usage),
        ServerMessage::AgentActivity(activity) => state.activity.update(|map| {
            map.insert(activity.agent_id, (activity.phase, activity.tool_name));
        }),
        ServerMessage::PermissionRequest(request) => {
            if mine {
                crate::ledger::question_changed(state);
            }
            if let Some(agent_id) = routed {
                add_question(
                    state,
                    Question { agent_id, request: PendingKind::Permission(request) },
                );
            }
        }
        ServerMessage::UiRequest(request) => {
            if let Some(agent_id) = routed {
                if request.kind == shard_protocol::agent::UiKind::Notify {
                    let text =
                        request.message.clone().or(request.title.clone()).unwrap_or_default();
                    if mine {
                        transcript::push(state.transcript, Item::Notice { text, error: false });
                    }
                } else {
                    if mine {
                        crate::ledger::question_changed(state);
                    }
                    add_question(state, Question { agent_id, request: PendingKind::Ui(request) });
                }
            }
        }
        ServerMessage::PermissionResolved(resolved) => {
            remove_question(state, routed.as_deref(), &resolved.request_id);
            if mine {
                crate::ledger::question_changed(state);
            }
        }
        ServerMessage::UiResolved(resolved) => {
            remove_question(state, routed.as_deref(), &resolved.request_id);
            if mine {
                crate::ledger::question_changed(state);
            }
        }
        message if mine => agent_event(state, message),
        _ => {}
    }
    Greeted::No
}

/// A run moved: shown at once; the parent's jobs are fetched again when the
/// job is new to the page or the run has ended (for its final text, usage
/// and the job's own state).
fn run_changed(state: &ClientState, changed: SubagentRunChanged) {
    let mut known = false;
    state.jobs.update(|jobs| {
        let run = jobs
            .get_mut(&changed.job_id)
            .and_then(|job| job.runs.iter_mut().find(|run| run.run_id == changed.run_id));
        if let Some(run) = run {
            known = true;
            run.state = changed.state;
            run.error.clone_from(&changed.error);
            run.ended_at = changed.ended_at.or(run.ended_at);
        }
    });
    if !known || changed.state.is_terminal() {
        state.fetch_jobs(&changed.parent_agent_id);
    }
}

/// Whether an agent in `status` has no turn under way.
fn settled(status: AgentStatus) -> bool {
    matches!(status, AgentStatus::Idle | AgentStatus::Error)
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
/// `sync` (the daemon sends one to this tab when a runtime starts again;
/// after a reconnect the tab asks for one).
fn runtime_gone(state: &ClientState, agent_id: &str, status: Option<AgentStatus>) {
    state.activity.update(|activity| {
        activity.remove(agent_id);
    });
    if state.selected.get_untracked().as_deref() != Some(agent_id) {
        return;
    }
    let status = status.unwrap_or_else(|| {
        state.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|agent| agent.agent_id == agent_id)
                .map_or(AgentStatus::Idle, |agent| agent.status)
        })
    });
    // A stopped runtime is never mid-turn, whatever the registry last said.
    let status = if status == AgentStatus::Error { status } else { AgentStatus::Idle };
    state.status.set(status);
    state.queued.set(0);
    state.questions.update(|questions| questions.retain(|(agent, _), _| agent != agent_id));
    state.needs_sync.set(true);
}

/// A version's numbers, for comparing (`0.1.0` → `[0, 1, 0]`).
fn version(text: &str) -> Vec<u64> {
    text.split('.').map(|part| part.parse().unwrap_or(0)).collect()
}

/// The part of a version that must match: the major, or for 0.x the minor.
fn major(text: &str) -> Vec<u64> {
    let numbers = version(text);
    let significant = if numbers.first() == Some(&0) { 2 } else { 1 };
    numbers.into_iter().take(significant).collect()
}

fn add_question(state: &ClientState, question: Question) {
    let key = question.key();
    let new = state.questions.with_untracked(|questions| !questions.contains_key(&key));
    state.questions.update(|questions| {
        questions.insert(key, question.clone());
    });
    if new {
        crate::notify::question(state, &question);
    }
}

fn remove_question(state: &ClientState, agent_id: Option<&str>, request_id: &str) {
    let Some(agent_id) = agent_id else { return };
    let key = (agent_id.to_owned(), request_id.to_owned());
    state.questions.update(|questions| {
        questions.remove(&key);
    });
    state.dismissed.update(|dismissed| dismissed.retain(|known| *known != key));
}

fn response_arrived(state: &ClientState, request: Request, response: Response) {
    let current = state.epoch.get_untracked();
    match request {
        Request::List => {
            if let Ok(AgentsResult { agents }) = response.data::<AgentsResult>() {
                let waiting: Vec<String> = agents
                    .iter()
                    .filter(|agent| waiting(agent.status))
                    .map(|agent| agent.agent_id.clone())
                    .collect();
                let parents: std::collections::BTreeSet<String> =
                    agents.iter().filter_map(|agent| agent.parent_agent_id.clone()).collect();
                state.agents.set(agents);
                for agent_id in waiting {
                    state.peek(&agent_id);
                }
                for parent in parents {
                    state.fetch_jobs(&parent);
                }
            }
        }
        Request::Jobs => {
            if let Ok(result) = response.data::<SubagentStatusResult>() {
                state.jobs.update(|known| {
                    for job in result.jobs.unwrap_or_default() {
                        known.insert(job.job_id.clone(), job);
                    }
                });
            }
        }
        request @ (Request::Workspaces
        | Request::WorkspaceLaunch
        | Request::WorkspaceStatus { .. }
        | Request::WorkspaceRetire { .. }) => crate::workspaces::answered(state, request, response),
        // A superseded runtime's catalog is no longer the agent's.
        Request::Modes { epoch } | Request::Models { epoch } | Request::Levels { epoch }
            if epoch != current => {}
        Request::Modes { .. } => {
            if let Ok(ListModesResult { modes, active }) = response.data() {
                state.modes.set(modes);
                state.mode.set(active);
            }
        }
        Request::Models { .. } => {
            if let Ok(ListModelsResult { models, active }) = response.data() {
                state.models.set(models);
                state.model.set(Some(active));
            }
        }
        Request::Levels { .. } => match response.data::<ListReasoningLevelsResult>() {
            Ok(result) => {
                state.levels.set(result.levels);
                state.level.set(Some(result.active));
            }
            Err(_) => state.levels.set(Vec::new()),
        },
        Request::Create => match response.data::<shard_protocol::orchestrator::AgentCreateResult>()
        {
            Ok(created) => {
                state.notice.set(None);
                state.select(Some(created.agent_id));
            }
            Err(error) => {
                state.notice.set(Some(format!("Could not create the agent: {}", error.message)))
            }
        },
        Request::Prompt { agent_id, text, queued } => {
            let shown = state.selected.get_untracked().as_deref() == Some(agent_id.as_str());
            match &response.outcome {
                // Accepted: now it is part of the conversation.
                Ok(_) if shown => {
                    if queued {
                        state.queued.update(|count| *count += 1);
                    }
                    transcript::push(state.transcript, Item::User { entry_id: None, text });
                    state.window_start.set(None);
                    state.scroll_to_end.update(|bump| *bump += 1);
                }
                Ok(_) => {}
                Err(error) if shown => {
                    // Back into the box, unless something new is being written.
                    if state.draft.with_untracked(|draft| draft.trim().is_empty()) {
                        state.draft.set(text);
                    }
                    state.prompt_error.set(Some(format!("Not sent: {}", error.message)));
                }
                Err(error) => {
                    // Kept as that agent's draft, for when it is opened again.
                    state.drafts.update(|drafts| {
                        drafts.entry(agent_id.clone()).or_insert(text);
                    });
                    let name = state.agent_name(&agent_id);
                    state
                        .notice
                        .set(Some(format!("A prompt to {name} was not sent: {}", error.message)))
                }
            }
        }
        Request::Attach => {
            if let Ok(result) = response.data::<shard_protocol::orchestrator::AttachResult>() {
                if result.resumed == Some(true) {
                    state.resumed.set(Some(true));
                    // The tab saw the agent mid-turn and it has settled
                    // since, or its runtime stopped: a runtime that stopped
                    // meanwhile (a daemon restart) settles with no event
                    // saying so, so what it settled to (its status, a tool
                    // call closed as interrupted) is asked for in a sync.
                    let busy = !settled(state.status.get_untracked());
                    if state.needs_sync.get_untracked() || (busy && settled(result.status)) {
                        if let Some(agent_id) = state.selected.get_untracked() {
                            state.resync(&agent_id);
                        }
                    }
                }
            }
            if let Err(error) = &response.outcome {
                // The agent on screen is gone (or was never there: a stale
                // tab): show none rather than a ghost.
                state.selected.set(None);
                state.transcript.set(Vec::new());
                state.notice.set(Some(format!("Could not open the agent: {}", error.message)));
            }
        }
        Request::Peek { agent_id } => {
            if response.outcome.is_err() {
                state.peeking().remove(&agent_id);
            }
        }
        request @ (Request::Recall { .. }
        | Request::UsageAgent { .. }
        | Request::Sessions { .. }
        | Request::Fork { .. }
        | Request::Compact { .. }
        | Request::Activate { .. }
        | Request::Approvals { .. }) => crate::ledger::answered(state, request, response),
        Request::Borrow | Request::Detach | Request::Command => {
            if let Err(error) = &response.outcome {
                state.notice.set(Some(format!("{} failed: {}", response.command, error.message)));
            }
        }
    }
}

/// A `sync`: what the agent is now, in full. Everything the tab knew of it
/// that the sync does not hold goes (a streamed message that never
/// completed, a question no longer open, a tool card without its result),
/// so that the tab shows what a freshly opened one shows.
fn apply_sync(state: &ClientState, sync: Sync, seq: Option<u64>) {
    // The sync's `seq` travels in the envelope (the decoder takes it there).
    state.cursor.set(sync.seq.or(seq));
    state.resumed.set(Some(false));
    state.needs_sync.set(false);
    state.epoch.set(sync.runtime_epoch);
    state.status.set(sync.status);
    // Settled: nothing this tab queued is still waiting to land.
    if settled(sync.status) {
        state.queued.set(0);
    }
    state.mode.set(sync.mode);
    let capabilities = sync.capabilities.unwrap_or_default();
    let has = |name: &str| capabilities.iter().any(|known| known == name);
    let (modes, models, levels) =
        (has("mode-catalog"), has("model-catalog"), has("reasoning-catalog"));
    state.capabilities.set(capabilities.clone());
    // A first sync of the agent just opened shows its end; a resync leaves
    // the view where the user has it.
    if state.transcript.with_untracked(Vec::is_empty) {
        state.scroll_to_end.update(|bump| *bump += 1);
    }
    transcript::reconcile(
        state.transcript,
        transcript::from_sync(&sync.live_window.messages, sync.live_window.compaction_index),
    );
    let selected = state.selected.get_untracked().unwrap_or_default();
    // Questions of this agent are exactly the ones the sync re-shows.
    state.questions.update(|questions| questions.retain(|(agent, _), _| *agent != selected));
    for pending in sync.pending_requests {
        let agent_id = pending.agent_id.unwrap_or_else(|| selected.clone());
        add_question(state, Question { agent_id, request: pending.request });
    }
    // Controls exist only for what the runtime advertises (§7, §9.1).
    state.query_catalogs(modes, models, levels);
}

/// Changes the selected agent's row in the list.
fn update_selected(
    state: &ClientState,
    change: impl FnOnce(&mut shard_protocol::types::AgentInfo),
) {
    let selected = state.selected.get_untracked();
    state.agents.update(|agents| {
        if let Some(agent) =
            agents.iter_mut().find(|agent| Some(&agent.agent_id) == selected.as_ref())
        {
            change(agent);
        }
    });
}

/// An event of the selected agent.
fn agent_event(state: &ClientState, message: ServerMessage) {
    match message {
        ServerMessage::Status(status) => {
            // Idle: whatever this tab queued has landed.
            if status.status == AgentStatus::Idle {
                state.queued.set(0);
            }
            state.status.set(status.status);
        }
        ServerMessage::MessageDelta(delta) => {
            if let Some(text) = &delta.text_delta {
                transcript::delta(state.transcript, &delta.message_id, delta.kind, text);
            }
        }
        ServerMessage::MessageComplete(complete) => transcript::complete(
            state.transcript,
            &complete.message_id,
            &complete.message.id,
            &complete.message.content,
        ),
        ServerMessage::ToolCall(call) => transcript::tool_call(state.transcript, call),
        ServerMessage::ToolResult(result) => transcript::tool_result(state.transcript, result),
        ServerMessage::Compaction(compaction) => transcript::push(
            state.transcript,
            Item::Compaction {
                index: compaction.index,
                tokens_before: compaction.tokens_before,
                tokens_after: compaction.tokens_after,
            },
        ),
        ServerMessage::Error(error) => transcript::push(
            state.transcript,
            Item::Notice { text: format!("{}: {}", error.code, error.message), error: true },
        ),
        ServerMessage::ModeChanged(changed) => {
            update_selected(state, |agent| agent.mode = Some(changed.mode.clone()));
            state.mode.set(changed.mode);
        }
        ServerMessage::ModelChanged(changed) => {
            update_selected(state, |agent| agent.model = Some(changed.active.id.clone()));
            state.model.set(Some(changed.active));
            if let Some(capabilities) = changed.capabilities {
                let levels = capabilities.iter().any(|known| known == "reasoning-catalog");
                state.capabilities.set(capabilities);
                state.query_catalogs(false, false, levels);
            }
        }
        ServerMessage::ReasoningLevelChanged(changed) => state.level.set(Some(changed.active)),
        // The totals come from the daemon's rollup (`agent_usage`), which
        // every tab gets; this is how full the context is.
        ServerMessage::Usage(usage) => update_selected(state, |agent| {
            if let Some(total) = agent.usage.as_mut() {
                total.context_tokens = usage.context_tokens.or(total.context_tokens);
            }
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
