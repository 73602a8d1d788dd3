//! The one task that tells the editor what the agents do. Everything that
//! changes what an editor is owed comes here through one queue, in order:
//! the daemon's events, and the handlers' word that a prompt is on its way
//! or a session opened. So a prompt's end can never overtake the turn's
//! last piece, and a prompt registered before it is sent cannot miss its
//! turn's start.
//!
//! A prompt belongs to the turn its `user_message` opened or joined (the
//! daemon tells every client which turn a message went into); the editor's
//! `session/prompt` is answered when that turn ends. Messages sent from
//! anywhere else are told as a person's message, so an editor shows a
//! conversation it shares with tabs and phones whole.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, SessionConfigOption, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, RequestCancellationHandle};
use shard_protocol::ClientMessage;
use shard_protocol::ServerMessage;
use shard_protocol::agent::PendingKind;
use shard_protocol::agent::{
    AgentCommands, PermissionRequest, PermissionResponse, UiKind, UiRequest, UiResponse,
};
use tokio::sync::{mpsc, oneshot};

use super::daemon::{Daemon, Read, Routed};
use super::options::{self, Usage};
use super::translate;

/// What the pump is told.
pub enum Input {
    /// An event of an agent, from the daemon.
    Event(Box<Routed>),
    /// The daemon's connection of that generation ended.
    Closed(u64),
    /// A session opened on this agent, over `daemon` (it is attached
    /// next). `replayed`, for `session/load`, hears once its history has
    /// been told.
    Open { agent_id: String, daemon: Arc<Daemon>, replayed: Option<oneshot::Sender<()>> },
    /// The editor's prompt, about to be sent to the agent.
    Prompt { agent_id: String, text: String, responder: Responder<serde_json::Value> },
    /// The daemon refused that prompt.
    Refused { agent_id: String, error: agent_client_protocol::Error },
    /// The editor cancelled the turn.
    Cancel { agent_id: String },
    /// The commands the agent offers, asked for once its session is known
    /// to the editor.
    Commands { agent_id: String, commands: AgentCommands },
    /// The session's config options as the editor was told them, its
    /// model's context window and what it has cost so far.
    Options { agent_id: String, options: Vec<SessionConfigOption>, usage: Usage },
    /// The agents spawned under a session so far, whose questions it asks.
    Family { agent_id: String, descendants: Vec<String> },
}

impl Input {
    pub fn read(read: Read) -> Self {
        match read {
            Read::Event(routed) => Input::Event(routed),
            Read::Closed(generation) => Input::Closed(generation),
        }
    }
}

struct Prompt {
    text: String,
    responder: Responder<serde_json::Value>,
    /// The turn its message went into, once the daemon said.
    turn: Option<String>,
    cancelled: bool,
}

/// A question put to the editor: as a permission request it can take back
/// (`handle`), or, for a UI question it cannot answer, only as a card.
struct Asked {
    question: Question,
    handle: Option<RequestCancellationHandle>,
}

enum Question {
    Permission(PermissionRequest),
    Ui(UiRequest),
}

struct Session {
    /// The connection it was attached over.
    daemon: Arc<Daemon>,
    /// Waiting for the attachment's `sync`, to tell the history first.
    replayed: Option<oneshot::Sender<()>>,
    /// The first `sync` was seen: later ones (a new process) replay nothing.
    synced: bool,
    prompts: Vec<Prompt>,
    /// Questions put to the editor, by the asking agent (this one or a
    /// delegated descendant) and request id: taken back when answered
    /// anywhere else.
    asked: HashMap<(String, String), Asked>,
    /// Its config options, kept current as its mode and model change.
    options: Vec<SessionConfigOption>,
    usage: Usage,
    /// The turn's plan cards (one a turn), told as the editor's plan.
    plans: std::collections::HashSet<String>,
}

pub async fn run(
    mut inputs: mpsc::Receiver<Input>,
    editor: ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    let mut sessions: HashMap<String, Session> = HashMap::new();
    let mut family = Family::default();
    let mut held = None;
    loop {
        let input = match held.take() {
            Some(input) => input,
            None => match inputs.recv().await {
                Some(input) => input,
                None => break,
            },
        };
        let input = gather(input, &mut inputs, &mut held);
        match input {
            Input::Open { agent_id, daemon, replayed } => {
                // Opened again (loaded by a second request, or after the
                // daemon came back): what was waiting on the old one ends.
                if let Some(old) = sessions.remove(&agent_id) {
                    end(old, "the session was opened again")?;
                }
                let session = Session {
                    daemon,
                    replayed,
                    synced: false,
                    prompts: Vec::new(),
                    asked: HashMap::new(),
                    options: Vec::new(),
                    usage: Usage::default(),
                    plans: Default::default(),
                };
                sessions.insert(agent_id, session);
            }
            Input::Closed(generation) => {
                let gone: Vec<String> = sessions
                    .iter()
                    .filter(|(_, session)| session.daemon.generation == generation)
                    .map(|(agent_id, _)| agent_id.clone())
                    .collect();
                for agent_id in gone {
                    if let Some(session) = sessions.remove(&agent_id) {
                        end(session, "the daemon stopped; load the session again once it runs")?;
                    }
                }
            }
            Input::Prompt { agent_id, text, responder } => match sessions.get_mut(&agent_id) {
                Some(session) => {
                    session.prompts.push(Prompt { text, responder, turn: None, cancelled: false })
                }
                None => responder.respond_with_error(
                    agent_client_protocol::Error::invalid_params()
                        .data("this session is not open here: load it first (session/load)"),
                )?,
            },
            Input::Refused { agent_id, error } => {
                let session = sessions.get_mut(&agent_id);
                // The refused one is the newest not yet in a turn.
                if let Some(session) = session
                    && let Some(at) =
                        session.prompts.iter().rposition(|prompt| prompt.turn.is_none())
                {
                    session.prompts.remove(at).responder.respond_with_error(error)?;
                }
            }
            Input::Commands { agent_id, commands } => {
                if sessions.contains_key(&agent_id) {
                    let update = translate::commands(&commands);
                    editor.send_notification(SessionNotification::new(agent_id, update))?;
                }
            }
            Input::Family { agent_id, descendants } => {
                for child in descendants {
                    family.adopt(child, &agent_id);
                }
            }
            Input::Options { agent_id, options, usage } => {
                if let Some(session) = sessions.get_mut(&agent_id) {
                    session.options = options;
                    session.usage = usage;
                }
            }
            Input::Cancel { agent_id } => {
                for prompt in sessions.get_mut(&agent_id).into_iter().flat_map(|s| &mut s.prompts) {
                    prompt.cancelled = true;
                }
            }
            Input::Event(routed) => {
                let Routed { agent_id: asker, message } = *routed;
                if let ServerMessage::AgentSpawned(spawned) = &message {
                    let parent = spawned.info.identity.parent_agent_id.as_deref();
                    family.spawned(&sessions, &spawned.agent_id, parent);
                    continue;
                }
                // A delegated child's question comes under its own id, to
                // the attachment of its nearest interactive ancestor: here,
                // the session it was spawned under. Nothing else of the
                // child's is the session's.
                let agent_id = match sessions.contains_key(&asker) {
                    true => asker.clone(),
                    false => match family.session_of(&asker) {
                        Some(session) if is_question(&message) => session.to_owned(),
                        _ => continue,
                    },
                };
                let Some(session) = sessions.get_mut(&agent_id) else { continue };
                let tell = |update: SessionUpdate| {
                    editor.send_notification(SessionNotification::new(agent_id.clone(), update))
                };
                match message {
                    ServerMessage::Sync(sync) => {
                        if !session.synced {
                            session.synced = true;
                            if session.replayed.is_some() {
                                for update in translate::history(&sync.live_window.messages) {
                                    tell(update)?;
                                }
                            }
                        }
                        if let Some(replayed) = session.replayed.take() {
                            let _ = replayed.send(());
                        }
                        for pending in sync.pending_requests {
                            let asked = pending.agent_id.unwrap_or_else(|| agent_id.clone());
                            match pending.request {
                                PendingKind::Permission(request) => {
                                    ask(session, &editor, &agent_id, &asked, request)?
                                }
                                PendingKind::Ui(request) => {
                                    ask_ui(session, &editor, &agent_id, &asked, request)?
                                }
                            }
                        }
                    }
                    ServerMessage::UserMessage(said) => {
                        let ours = session
                            .prompts
                            .iter_mut()
                            .find(|prompt| prompt.turn.is_none() && prompt.text == said.text);
                        match ours {
                            Some(prompt) => prompt.turn = Some(said.turn_id.unwrap_or_default()),
                            None => tell(translate::user_text(&said.text))?,
                        }
                    }
                    ServerMessage::MessageDelta(delta) => {
                        if let Some(update) = translate::delta(&delta) {
                            tell(update)?;
                        }
                    }
                    ServerMessage::CommandsChanged(commands) => {
                        tell(translate::commands(&commands))?;
                    }
                    ServerMessage::ToolCall(call) => match translate::plan(&call) {
                        // The plan's card is the editor's plan, each
                        // change the whole list again, as ACP sends it.
                        Some(plan) => {
                            session.plans.insert(call.tool_call_id);
                            tell(plan)?
                        }
                        None => tell(translate::tool_call(&call))?,
                    },
                    // The plan's card's result is its last list, told already.
                    ServerMessage::ToolResult(result)
                        if session.plans.contains(&result.tool_call_id) => {}
                    ServerMessage::ToolResult(result) => tell(translate::tool_result(&result))?,
                    ServerMessage::ModeChanged(changed) => {
                        if options::now(&mut session.options, options::MODE, &changed.mode) {
                            let options = session.options.clone();
                            tell(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                                options,
                            )))?;
                        }
                        tell(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                            changed.mode,
                        )))?
                    }
                    ServerMessage::ModelChanged(changed)
                        if options::now(
                            &mut session.options,
                            options::MODEL,
                            &changed.active.id,
                        ) =>
                    {
                        let options = session.options.clone();
                        tell(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)))?;
                    }
                    ServerMessage::Usage(usage) => {
                        // A model call: the context it filled, and its cost.
                        if let Some(cost) = usage.cost {
                            session.usage.spent = Some(session.usage.spent.unwrap_or(0.0) + cost);
                        }
                        if let (Some(used), Some(size)) =
                            (usage.context_tokens, session.usage.window)
                        {
                            tell(translate::usage_update(used, size, session.usage.spent))?;
                        }
                    }
                    ServerMessage::TurnEnd(end) => {
                        session.plans.clear();
                        let at = session.prompts.iter().position(|prompt| {
                            prompt
                                .turn
                                .as_deref()
                                .is_some_and(|turn| turn == end.turn_id || turn.is_empty())
                        });
                        if let Some(at) = at {
                            let prompt = session.prompts.remove(at);
                            let reason = if end.aborted || prompt.cancelled {
                                StopReason::Cancelled
                            } else {
                                StopReason::EndTurn
                            };
                            let answer = PromptResponse::new(reason)
                                .usage(end.usage.as_ref().map(translate::turn_usage));
                            let response = serde_json::to_value(answer)
                                .map_err(agent_client_protocol::Error::into_internal_error)?;
                            prompt.responder.respond(response)?;
                        }
                    }
                    ServerMessage::Error(error) if error.fatal == Some(true) => {
                        // The agent cannot go on: every prompt waiting on it
                        // ends with what happened.
                        for prompt in session.prompts.drain(..) {
                            prompt.responder.respond_with_error(
                                agent_client_protocol::Error::internal_error()
                                    .data(translate::safe(&error.message)),
                            )?;
                        }
                    }
                    ServerMessage::PermissionRequest(request) => {
                        ask(session, &editor, &agent_id, &asker, request)?;
                    }
                    ServerMessage::UiRequest(request) => {
                        ask_ui(session, &editor, &agent_id, &asker, request)?;
                    }
                    ServerMessage::PermissionResolved(resolved) => {
                        // Answered here or anywhere: the editor's dialog, if
                        // still open, is taken back.
                        let key = (asker, resolved.request_id);
                        if let Some(asked) = session.asked.remove(&key) {
                            asked.handle.map(|handle| handle.cancel()).transpose()?;
                            if let Question::Permission(request) = &asked.question {
                                tell(translate::question_closed(request, &resolved.answer))?;
                            }
                        }
                    }
                    ServerMessage::UiResolved(resolved) => {
                        let key = (asker, resolved.request_id);
                        if let Some(asked) = session.asked.remove(&key) {
                            asked.handle.map(|handle| handle.cancel()).transpose()?;
                            if let Question::Ui(request) = &asked.question {
                                tell(translate::ui_closed(request, &resolved.value))?;
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// Whether `message` is a question or its resolution: all of a delegated
/// child's events that its ancestor's session takes.
fn is_question(message: &ServerMessage) -> bool {
    matches!(
        message,
        ServerMessage::PermissionRequest(_)
            | ServerMessage::UiRequest(_)
            | ServerMessage::PermissionResolved(_)
            | ServerMessage::UiResolved(_)
    )
}

/// The agents spawned under the sessions followed here, each with its
/// session: a delegated child's questions go there.
#[derive(Default)]
struct Family {
    session_of: HashMap<String, String>,
}

/// The most descendants followed; past it, a new one's questions are
/// answered in a tab or the inbox (and shown in the editor on its next
/// `session/load`).
const FAMILY: usize = 10_000;

impl Family {
    fn adopt(&mut self, child: String, session: &str) {
        if self.session_of.len() < FAMILY || self.session_of.contains_key(&child) {
            self.session_of.insert(child, session.to_owned());
        }
    }

    /// An agent spawned under `parent`: a session here, or one of theirs.
    fn spawned(&mut self, sessions: &HashMap<String, Session>, child: &str, parent: Option<&str>) {
        let Some(parent) = parent else { return };
        let session = match sessions.contains_key(parent) {
            true => parent.to_owned(),
            false => match self.session_of.get(parent) {
                Some(session) => session.clone(),
                None => return,
            },
        };
        self.adopt(child.to_owned(), &session);
    }

    fn session_of(&self, agent_id: &str) -> Option<&str> {
        self.session_of.get(agent_id).map(String::as_str)
    }
}

/// The most text one gathered piece holds.
const GATHERED: usize = 64 * 1024;

/// A piece of text followed, already queued, by more of the same message
/// and kind: one piece, as the editor shows it the same. What an editor
/// costs per piece is then paid once per batch while it falls behind, and
/// once per piece while it keeps up. The first input that is not more of
/// it is `held` for next.
fn gather(input: Input, inputs: &mut mpsc::Receiver<Input>, held: &mut Option<Input>) -> Input {
    let Input::Event(mut routed) = input else { return input };
    let ServerMessage::MessageDelta(first) = &mut routed.message else {
        return Input::Event(routed);
    };
    let Some(text) = first.text_delta.as_mut() else { return Input::Event(routed) };
    while text.len() < GATHERED {
        let Ok(next) = inputs.try_recv() else { break };
        let more = match &next {
            Input::Event(next) if next.agent_id == routed.agent_id => match &next.message {
                ServerMessage::MessageDelta(delta)
                    if delta.kind == first.kind && delta.message_id == first.message_id =>
                {
                    delta.text_delta.as_deref()
                }
                _ => None,
            },
            _ => None,
        };
        match more {
            Some(more) => text.push_str(more),
            None => {
                *held = Some(next);
                break;
            }
        }
    }
    Input::Event(routed)
}

/// Puts a question to the editor. Its answer goes to the daemon, which
/// takes the first answer from anywhere; a question answered elsewhere
/// first is taken back from the editor (`$/cancel_request`).
fn ask(
    session: &mut Session,
    editor: &ConnectionTo<Client>,
    session_id: &str,
    asking_agent: &str,
    request: PermissionRequest,
) -> Result<(), agent_client_protocol::Error> {
    let key = (asking_agent.to_owned(), request.request_id.clone());
    if session.asked.contains_key(&key) {
        return Ok(());
    }
    let question = RequestPermissionRequest::new(
        session_id.to_owned(),
        translate::asked_call(&request),
        translate::options(&request),
    );
    let asked = Question::Permission(request.clone());
    put(session, editor, key, asked, question, move |option_id| {
        let answer = translate::answer(&request, option_id)?;
        let request_id = request.request_id;
        Some(ClientMessage::PermissionResponse(PermissionResponse {
            request_id,
            answer,
            reason: None,
        }))
    })
}

/// Sends `question` to the editor as a permission request, kept under
/// `key` (asking agent, request id) so that an answer given elsewhere takes
/// it back; the option the editor chooses goes to the daemon as `answer`
/// makes it (nothing for an option the question never offered).
fn put(
    session: &mut Session,
    editor: &ConnectionTo<Client>,
    key: (String, String),
    asked: Question,
    question: RequestPermissionRequest,
    answer: impl FnOnce(&str) -> Option<ClientMessage> + Send + 'static,
) -> Result<(), agent_client_protocol::Error> {
    let sent = editor.send_request(question);
    let handle = Some(sent.cancellation_handle());
    let asking_agent = key.0.clone();
    session.asked.insert(key, Asked { question: asked, handle });
    let daemon = session.daemon.clone();
    sent.on_receiving_result(async move |result| {
        // Not shown, or taken back: others still can answer.
        let Ok(response) = result else { return Ok(()) };
        let RequestPermissionOutcome::Selected(selected) = response.outcome else { return Ok(()) };
        if let Some(message) = answer(&selected.option_id.to_string()) {
            daemon.send(&asking_agent, message);
        }
        Ok(())
    })
}

/// Puts a UI question to the editor: a choice or a confirmation as a
/// permission request whose options are its answers; a text to type or
/// edit, which no ACP request can carry, as a card saying where to answer.
fn ask_ui(
    session: &mut Session,
    editor: &ConnectionTo<Client>,
    session_id: &str,
    asking_agent: &str,
    request: UiRequest,
) -> Result<(), agent_client_protocol::Error> {
    // A notice asks nothing; the editor's transcript does not show it.
    let key = (asking_agent.to_owned(), request.request_id.clone());
    if session.asked.contains_key(&key) || request.kind == UiKind::Notify {
        return Ok(());
    }
    let Some(options) = translate::ui_options(&request) else {
        let card = translate::ui_card(&request);
        editor.send_notification(SessionNotification::new(session_id.to_owned(), card))?;
        let asked = Asked { question: Question::Ui(request.clone()), handle: None };
        session.asked.insert(key, asked);
        return Ok(());
    };
    let question =
        RequestPermissionRequest::new(session_id.to_owned(), translate::ui_call(&request), options);
    let asked = Question::Ui(request.clone());
    put(session, editor, key, asked, question, move |option_id| {
        let value = translate::ui_answer(&request, option_id)?;
        let request_id = request.request_id;
        Some(ClientMessage::UiResponse(UiResponse { request_id, value }))
    })
}

/// A session no longer followed: its prompts end with `why`, its questions
/// are taken back from the editor.
fn end(session: Session, why: &str) -> Result<(), agent_client_protocol::Error> {
    for prompt in session.prompts {
        prompt.responder.respond_with_error(
            agent_client_protocol::Error::internal_error().data(why.to_owned()),
        )?;
    }
    for handle in session.asked.into_values().filter_map(|asked| asked.handle) {
        handle.cancel()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn delta(agent: &str, message: &str, kind: &str, text: &str) -> Input {
        let delta = serde_json::from_value(json!({"message_id": message, "block_index": 0,
                                                  "kind": kind, "text_delta": text}))
        .expect("a delta");
        Input::Event(Box::new(Routed {
            agent_id: agent.to_owned(),
            message: ServerMessage::MessageDelta(delta),
        }))
    }

    fn text(input: &Input) -> (String, String) {
        let Input::Event(routed) = input else { panic!("not an event") };
        let ServerMessage::MessageDelta(delta) = &routed.message else { panic!("not a delta") };
        (routed.agent_id.clone(), delta.text_delta.clone().unwrap_or_default())
    }

    #[tokio::test]
    async fn queued_pieces_of_one_message_and_kind_are_one_and_the_next_waits_its_turn() {
        let (queue, mut inputs) = mpsc::channel(16);
        for input in [
            delta("a", "m1", "text", "b"),
            delta("a", "m1", "text", "c"),
            delta("a", "m1", "thinking", "t"),
            delta("a", "m1", "text", "d"),
            delta("b", "m2", "text", "x"),
            delta("a", "m1", "text", "e"),
        ] {
            queue.send(input).await.expect("queued");
        }
        let mut held = None;
        let first = gather(delta("a", "m1", "text", "a"), &mut inputs, &mut held);
        assert_eq!(text(&first), ("a".into(), "abc".into()));
        // Thinking is another kind: it waits, then goes on its own.
        let thinking = held.take().expect("held");
        let thinking = gather(thinking, &mut inputs, &mut held);
        assert_eq!(text(&thinking), ("a".into(), "t".into()));
        let next = gather(held.take().expect("held"), &mut inputs, &mut held);
        assert_eq!(text(&next), ("a".into(), "d".into()), "another agent's piece stops it");
        let other = gather(held.take().expect("held"), &mut inputs, &mut held);
        assert_eq!(text(&other), ("b".into(), "x".into()));
        let last = gather(held.take().expect("held"), &mut inputs, &mut held);
        assert_eq!(text(&last), ("a".into(), "e".into()));
        assert!(held.is_none());
    }

    #[tokio::test]
    async fn a_gathered_piece_stops_at_its_bound() {
        let (queue, mut inputs) = mpsc::channel(8);
        let big = "x".repeat(GATHERED / 2 + 1);
        for _ in 0..3 {
            queue.send(delta("a", "m", "text", &big)).await.expect("queued");
        }
        let mut held = None;
        let first = gather(delta("a", "m", "text", "y"), &mut inputs, &mut held);
        // "y" and two halves pass the bound; the third waits in the queue.
        assert_eq!(text(&first).1.len(), 1 + 2 * big.len());
        assert!(held.is_none());
        assert!(inputs.try_recv().is_ok(), "the rest stays queued, in order");
    }
}
