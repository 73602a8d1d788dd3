//! The browser side of the connection (hydrate only): enroll when opened with
//! `#enroll=CODE` (then drop the code from the address bar), get a ticket from
//! `/bootstrap`, open `/ws` with it, keep the agent list live, re-attach the
//! selected agent after every reconnect (its `sync` brings the transcript and
//! any open question back), and retry a lost connection with backoff 1 s,
//! 2 s, 4 s … 30 s (§2.2).

use futures::{SinkExt, StreamExt};
use gloo_net::http::Request as Http;
use gloo_net::websocket::Message;
use gloo_net::websocket::futures::WebSocket;
use leptos::prelude::{GetUntracked, Set, Update, WithUntracked};
use serde_json::json;
use shard_protocol::agent::{
    DeltaKind, ListModelsResult, ListModesResult, ListReasoningLevelsResult, PendingKind, Sync,
};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AgentsResult;
use shard_protocol::types::{AgentStatus, ContentBlock, Message as WireMessage, Role};
use shard_protocol::{Envelope, ServerMessage};

use crate::state::{Block, ClientState, Connection, Item, Question, Request};

const MAX_BACKOFF_SECONDS: u32 = 30;

enum Ended {
    /// The browser has no valid session: enrollment is needed.
    NotEnrolled,
    /// The connection failed or dropped; `connected` if it had worked.
    Dropped { connected: bool },
    /// The daemon speaks another protocol version.
    Mismatch,
}

/// The code from `#enroll=…`, removed from the address bar at once so it is
/// neither bookmarked nor left in history.
fn take_enroll_code() -> Option<String> {
    let window = web_sys::window()?;
    let location = window.location();
    let hash = location.hash().ok()?;
    let code = hash.strip_prefix("#enroll=")?.to_owned();
    let clean = format!("{}{}", location.pathname().ok()?, location.search().ok()?);
    if let Ok(history) = window.history() {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&clean));
    }
    (!code.is_empty()).then_some(code)
}

async fn enroll(state: &ClientState, code: String) {
    state.connection.set(Connection::Enrolling);
    let body = json!({ "code": code });
    let enrolled = match Http::post("/enroll").json(&body) {
        Ok(request) => request.send().await.map(|response| response.status()),
        Err(error) => Err(error),
    };
    match enrolled {
        Ok(200) => state.notice.set(Some("This browser is now enrolled.".to_owned())),
        Ok(429) => {
            state.notice.set(Some("Too many tries; wait a minute and open a new link.".to_owned()))
        }
        _ => state.notice.set(Some(
            "That enrollment link is invalid, used or expired. Run `shard enroll` for a new one."
                .to_owned(),
        )),
    }
}

/// Resolves at the next `hashchange` (an enrollment link opened in this tab).
async fn hash_changed() {
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    let Some(window) = web_sys::window() else { return std::future::pending().await };
    let (fire, fired) = futures::channel::oneshot::channel::<()>();
    let fire = std::cell::Cell::new(Some(fire));
    let listener = Closure::<dyn FnMut()>::new(move || {
        if let Some(fire) = fire.take() {
            let _ = fire.send(());
        }
    });
    let callback = listener.as_ref().unchecked_ref();
    if window.add_event_listener_with_callback("hashchange", callback).is_err() {
        return std::future::pending().await;
    }
    let _ = fired.await;
    let _ = window.remove_event_listener_with_callback("hashchange", callback);
}

pub async fn run(state: ClientState) {
    loop {
        if let Some(code) = take_enroll_code() {
            enroll(&state, code).await;
        }
        let mut backoff = 1;
        loop {
            state.connection.set(Connection::Connecting);
            match connect(&state).await {
                Ended::NotEnrolled => {
                    state.connection.set(Connection::NotEnrolled);
                    break;
                }
                Ended::Mismatch => {
                    // Reconnecting cannot help; a reload (of a new page) can.
                    *state.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                    return;
                }
                Ended::Dropped { connected } => {
                    *state.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                    // Answers to what was sent on that connection never come.
                    state.requests().clear();
                    if connected {
                        backoff = 1;
                    }
                    state.connection.set(Connection::Retrying(backoff));
                    gloo_timers::future::TimeoutFuture::new(backoff * 1000).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF_SECONDS);
                }
            }
        }
        // Not enrolled: wait for an enrollment link opened in this tab.
        hash_changed().await;
    }
}

async fn connect(state: &ClientState) -> Ended {
    let dropped = Ended::Dropped { connected: false };
    let response = match Http::post("/bootstrap").send().await {
        Ok(response) => response,
        Err(_) => return dropped,
    };
    if response.status() == 401 {
        return Ended::NotEnrolled;
    }
    if response.status() != 200 {
        return dropped;
    }
    let Ok(body) = response.json::<serde_json::Value>().await else { return dropped };
    let Some(ticket) = body["ticket"].as_str() else { return dropped };
    let Some(location) = web_sys::window().map(|window| window.location()) else { return dropped };
    let (Ok(protocol), Ok(host)) = (location.protocol(), location.host()) else { return dropped };
    let scheme = if protocol == "https:" { "wss" } else { "ws" };
    let url = format!("{scheme}://{host}/ws");
    let protocols = [
        shard_protocol::WS_SUBPROTOCOL.to_owned(),
        format!("{}{ticket}", shard_protocol::WS_TICKET_PREFIX),
    ];
    let Ok(socket) = WebSocket::open_with_protocols(&url, &protocols) else { return dropped };
    let (mut writer, mut reader) = socket.split();
    let (outgoing, mut queue) = futures::channel::mpsc::unbounded::<String>();
    *state.sender.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
        Some(Box::new(move |text| {
            let _ = outgoing.unbounded_send(text);
        }));
    leptos::task::spawn_local(async move {
        while let Some(text) = queue.next().await {
            if writer.send(Message::Text(text)).await.is_err() {
                break;
            }
        }
    });
    let mut connected = false;
    while let Some(message) = reader.next().await {
        match message {
            Ok(Message::Text(text)) => match handle(state, &text) {
                Greeted::Yes => connected = true,
                Greeted::Mismatch => return Ended::Mismatch,
                Greeted::No => {}
            },
            Ok(Message::Bytes(_)) => {}
            Err(_) => break,
        }
    }
    Ended::Dropped { connected }
}

/// Whether a message was the daemon's greeting, and whether it fit.
enum Greeted {
    Yes,
    No,
    Mismatch,
}

/// Applies one message.
fn handle(state: &ClientState, text: &str) -> Greeted {
    let Ok(envelope) = Envelope::<ServerMessage>::from_json(text) else {
        return Greeted::No; // a newer daemon's message: ignore it
    };
    let selected = state.selected.get_untracked();
    let routed = envelope.agent_id.clone();
    let mine = routed.is_some() && routed == selected;
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
            state.list_agents();
            // Resync: re-attach the agent on screen; its sync brings it all back.
            if let Some(agent_id) = selected {
                state.attach(&agent_id, Request::Attach);
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
        ServerMessage::Sync(sync) if mine => apply_sync(state, sync),
        ServerMessage::AgentSpawned(spawned) => state.upsert(spawned.info),
        ServerMessage::AgentStatusChanged(changed) => {
            let started = changed.runtime_state == shard_protocol::types::RuntimeState::Running
                && state.agents.with_untracked(|agents| {
                    agents.iter().any(|agent| {
                        agent.agent_id == changed.agent_id
                            && agent.runtime_state != changed.runtime_state
                    })
                });
            if started {
                // A (re)started process knows its model and mode: refresh.
                state.list_agents();
            }
            let waiting = matches!(
                changed.status,
                AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi
            );
            if !waiting && Some(&changed.agent_id) != selected.as_ref() {
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
        }
        ServerMessage::AgentExited(exited) => state.agents.update(|agents| {
            if let Some(agent) = agents.iter_mut().find(|agent| agent.agent_id == exited.agent_id) {
                agent.runtime_state = exited.runtime_state;
            }
        }),
        ServerMessage::AgentActivity(activity) => state.activity.update(|map| {
            map.insert(activity.agent_id, (activity.phase, activity.tool_name));
        }),
        ServerMessage::PermissionRequest(request) => {
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
                        state
                            .transcript
                            .update(|items| items.push(Item::Notice { text, error: false }));
                    }
                } else {
                    add_question(state, Question { agent_id, request: PendingKind::Ui(request) });
                }
            }
        }
        ServerMessage::PermissionResolved(resolved) => {
            remove_question(state, routed.as_deref(), &resolved.request_id);
        }
        ServerMessage::UiResolved(resolved) => {
            remove_question(state, routed.as_deref(), &resolved.request_id)
        }
        message if mine => agent_event(state, message),
        _ => {}
    }
    Greeted::No
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
                state.agents.set(agents);
            }
        }
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
        Request::Prompt { agent_id, text } => {
            let shown = state.selected.get_untracked().as_deref() == Some(agent_id.as_str());
            match &response.outcome {
                // Accepted: now it is part of the conversation.
                Ok(_) if shown => {
                    state.transcript.update(|items| items.push(Item::User { text }));
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
                    state.notice.set(Some(format!("A prompt was not sent: {}", error.message)))
                }
            }
        }
        Request::Attach | Request::Borrow | Request::Detach | Request::Command => {
            if let Err(error) = &response.outcome {
                state.notice.set(Some(format!("{} failed: {}", response.command, error.message)));
            }
        }
    }
}

fn apply_sync(state: &ClientState, sync: Sync) {
    state.epoch.set(sync.runtime_epoch);
    state.status.set(sync.status);
    state.mode.set(sync.mode);
    let capabilities = sync.capabilities.unwrap_or_default();
    let has = |name: &str| capabilities.iter().any(|known| known == name);
    let (modes, models, levels) =
        (has("mode-catalog"), has("model-catalog"), has("reasoning-catalog"));
    state.capabilities.set(capabilities.clone());
    state
        .transcript
        .set(transcript_of(&sync.live_window.messages, sync.live_window.compaction_index));
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

/// The transcript a `sync` window describes.
fn transcript_of(messages: &[WireMessage], compaction_index: Option<u64>) -> Vec<Item> {
    let mut items = Vec::new();
    if let Some(index) = compaction_index {
        items.push(Item::Compaction { index, tokens_before: 0, tokens_after: 0 });
    }
    for message in messages {
        match message.role {
            Role::User => {
                for block in &message.content {
                    match block {
                        ContentBlock::Text { text } => {
                            items.push(Item::User { text: text.clone() })
                        }
                        ContentBlock::ToolResult { tool_call_id, content, is_error } => {
                            let result = shard_protocol::agent::ToolResult {
                                tool_call_id: tool_call_id.clone(),
                                content: content.clone(),
                                is_error: is_error.unwrap_or(false),
                                exit_code: None,
                                duration_ms: None,
                                render: None,
                            };
                            set_result(&mut items, result);
                        }
                        _ => {}
                    }
                }
            }
            _ => push_assistant(&mut items, &message.id, &message.content),
        }
    }
    items
}

fn push_assistant(items: &mut Vec<Item>, message_id: &str, content: &[ContentBlock]) {
    let blocks: Vec<Block> = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(Block::Text(text.clone())),
            ContentBlock::Thinking { text } => Some(Block::Thinking(text.clone())),
            _ => None,
        })
        .collect();
    match items.iter_mut().find(
        |item| matches!(item, Item::Assistant { message_id: known, .. } if known == message_id),
    ) {
        Some(Item::Assistant { blocks: existing, .. }) => *existing = blocks,
        _ => items.push(Item::Assistant { message_id: message_id.to_owned(), blocks }),
    }
    for block in content {
        if let ContentBlock::ToolCall { id, name, args } = block {
            let known = items
                .iter()
                .any(|item| matches!(item, Item::Tool { tool_call_id, .. } if tool_call_id == id));
            if !known {
                items.push(Item::Tool {
                    tool_call_id: id.clone(),
                    name: name.clone(),
                    args: serde_json::Value::Object(args.clone()),
                    read_only: None,
                    start: None,
                    result: None,
                });
            }
        }
    }
}

fn set_result(items: &mut [Item], result: shard_protocol::agent::ToolResult) {
    for item in items.iter_mut().rev() {
        if let Item::Tool { tool_call_id, result: slot, .. } = item {
            if *tool_call_id == result.tool_call_id {
                *slot = Some(result);
                return;
            }
        }
    }
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
        ServerMessage::Status(status) => state.status.set(status.status),
        ServerMessage::MessageDelta(delta) => state.transcript.update(|items| {
            let at = items.iter().position(|item| matches!(item, Item::Assistant { message_id, .. } if *message_id == delta.message_id));
            let at = at.unwrap_or_else(|| {
                items.push(Item::Assistant { message_id: delta.message_id.clone(), blocks: Vec::new() });
                items.len() - 1
            });
            if let (Item::Assistant { blocks, .. }, Some(text)) = (&mut items[at], delta.text_delta) {
                match (blocks.last_mut(), delta.kind) {
                    (Some(Block::Text(current)), DeltaKind::Text) | (Some(Block::Thinking(current)), DeltaKind::Thinking) => {
                        current.push_str(&text);
                    }
                    (_, DeltaKind::Thinking) => blocks.push(Block::Thinking(text)),
                    _ => blocks.push(Block::Text(text)),
                }
            }
        }),
        ServerMessage::MessageComplete(complete) => state.transcript.update(|items| {
            push_assistant(items, &complete.message_id, &complete.message.content);
        }),
        ServerMessage::ToolCall(call) => state.transcript.update(|items| {
            let existing = items.iter_mut().find(|item| matches!(item, Item::Tool { tool_call_id, .. } if *tool_call_id == call.tool_call_id));
            match existing {
                Some(Item::Tool { args, read_only, start, .. }) => {
                    *args = serde_json::Value::Object(call.args.clone());
                    *read_only = call.read_only;
                    start.clone_from(&call.render);
                }
                _ => items.push(Item::Tool {
                    tool_call_id: call.tool_call_id,
                    name: call.name,
                    args: serde_json::Value::Object(call.args),
                    read_only: call.read_only,
                    start: call.render,
                    result: None,
                }),
            }
        }),
        ServerMessage::ToolResult(result) => state.transcript.update(|items| set_result(items, result)),
        ServerMessage::Compaction(compaction) => state.transcript.update(|items| {
            items.push(Item::Compaction {
                index: compaction.index,
                tokens_before: compaction.tokens_before,
                tokens_after: compaction.tokens_after,
            });
        }),
        ServerMessage::Error(error) => state.transcript.update(|items| {
            items.push(Item::Notice { text: format!("{}: {}", error.code, error.message), error: true });
        }),
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
        ServerMessage::Usage(usage) => {
            let selected = state.selected.get_untracked();
            state.agents.update(|agents| {
                if let Some(agent) = agents.iter_mut().find(|agent| Some(&agent.agent_id) == selected.as_ref()) {
                    let total = agent.usage.get_or_insert_with(Default::default);
                    total.input += usage.input;
                    total.output += usage.output;
                    if let Some(cost) = usage.cost {
                        total.cost = Some(total.cost.unwrap_or(0.0) + cost);
                    }
                }
            });
        }
        _ => {}
    }
}
