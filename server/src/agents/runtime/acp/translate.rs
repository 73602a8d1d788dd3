//! The translation between Shard's per-agent protocol (PROTOCOL.md §9, what
//! the host speaks) and ACP (what the agent speaks), as a synchronous state
//! machine: a line from either side in, the lines and log entries it gives
//! out. No process, no clock: unit tests drive it line by line.
//!
//! What it covers so far: the start (`initialize`, `session/new`, then
//! Shard's `hello` and `sync`), a turn (`prompt` → `session/prompt`, chunks
//! → `message_delta`, the result → `message_complete` and `turn_end`),
//! `abort` → `session/cancel`, tool calls as `tool_call`/`tool_result`, and
//! permission requests both ways. Every other command is answered with an
//! error saying so, never left without an answer.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol_schema::ProtocolVersion;
use agent_client_protocol_schema::v1::{
    self as acp, AgentNotification, AgentRequest, AgentResponse, CancelNotification,
    ClientCapabilities, ClientNotification, ClientRequest, ClientResponse, ContentChunk,
    InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest, RequestId,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionUpdate, StopReason, ToolCallContent, ToolCallStatus,
    ToolCallUpdateFields,
};
use serde_json::Value;
use shard_agent::session_log::EntryBody;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DeltaKind, Hello, LiveWindow, MessageComplete, MessageDelta,
    PermissionAnswer, PermissionChoice, PermissionRequest, PermissionResponse, Status, Sync,
    ToolCall, ToolResult, TurnEnd, TurnStart,
};
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, ContentBlock, Message, Role, ToolResultContent};
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};

use super::wire::{self, Incoming, Outstanding};
use crate::agents::error::AgentError;

/// What one line in gives out.
#[derive(Debug, PartialEq)]
pub enum Out {
    /// A §9 line for the host.
    Host(String),
    /// An ACP line for the agent.
    Agent(String),
    /// An entry for Shard's own record of the session.
    Log(EntryBody),
    /// The agent cannot be used: why. The process is stopped.
    Fatal(String),
}

enum Phase {
    Initializing(i64),
    Opening(i64),
    Ready,
}

/// A turn in progress: Shard's ids for it and for the message streaming.
struct Turn {
    turn_id: String,
    prompt: i64,
    message_id: String,
    blocks: Vec<ContentBlock>,
}

/// A permission request of the agent, open until answered or cancelled.
struct Question {
    asked: RequestId,
    /// Shard's choice id → the agent's option id.
    options: HashMap<String, acp::PermissionOptionId>,
    /// The option each legacy decision picks, by its kind.
    decisions: HashMap<Decision, acp::PermissionOptionId>,
}

pub struct Translator {
    cwd: PathBuf,
    /// Names the model in Shard's record: the runtime's id.
    model: String,
    outstanding: Outstanding,
    phase: Phase,
    session: Option<acp::SessionId>,
    mode: String,
    turn: Option<Turn>,
    questions: HashMap<String, Question>,
    /// Tool calls announced to the host, by the agent's id.
    tools: HashMap<String, String>,
    next: u64,
}

impl Translator {
    /// A translator for an agent in `cwd`, and its first line: `initialize`.
    pub fn start(cwd: PathBuf, model: &str) -> (Self, Vec<Out>) {
        let mut outstanding = Outstanding::default();
        let initialize = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::default());
        let (id, line) = outstanding.request(ClientRequest::InitializeRequest(initialize));
        let translator = Self {
            cwd,
            model: model.to_owned(),
            outstanding,
            phase: Phase::Initializing(id),
            session: None,
            mode: "default".to_owned(),
            turn: None,
            questions: HashMap::new(),
            tools: HashMap::new(),
            next: 0,
        };
        (translator, vec![Out::Agent(line)])
    }

    /// The agent has a session: Shard's `hello` and `sync` went out.
    pub fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready)
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{}", self.next)
    }

    /// One line from the host (a §9 command).
    pub fn from_host(&mut self, line: &str) -> Vec<Out> {
        let Ok(envelope) = Envelope::<ClientMessage>::from_json(line) else {
            return Vec::new();
        };
        let id = envelope.id;
        let command = shard_protocol::envelope::MessageSet::type_name(&envelope.message);
        match envelope.message {
            ClientMessage::Prompt(prompt) => self.prompt(id, prompt.message),
            ClientMessage::Abort(_) => self.abort(id),
            ClientMessage::PermissionResponse(answer) => self.answered(id, answer),
            ClientMessage::ListModes(_) => {
                let modes = shard_protocol::agent::ListModesResult {
                    modes: vec![shard_protocol::types::ModeDescriptor {
                        name: self.mode.clone(),
                        description: String::new(),
                    }],
                    active: self.mode.clone(),
                };
                vec![respond(id, Response::ok(command, modes))]
            }
            _ => {
                vec![respond(id, Response::failed(command, AgentError::NotForAcp(command).into()))]
            }
        }
    }

    fn prompt(&mut self, id: Option<String>, text: String) -> Vec<Out> {
        let (Phase::Ready, Some(session)) = (&self.phase, self.session.clone()) else {
            return vec![respond(id, Response::failed("prompt", AgentError::NoAcpSession.into()))];
        };
        if self.turn.is_some() {
            return vec![respond(id, Response::failed("prompt", AgentError::TurnRunning.into()))];
        }
        let request = PromptRequest::new(session, vec![text.clone().into()]);
        let (prompt, line) = self.outstanding.request(ClientRequest::PromptRequest(request));
        let turn_id = self.fresh("turn");
        let message_id = self.fresh("msg");
        self.turn = Some(Turn { turn_id: turn_id.clone(), prompt, message_id, blocks: Vec::new() });
        vec![
            respond(id, Response::accepted("prompt")),
            Out::Log(EntryBody::User { text, images: Vec::new(), queued_entry_id: None }),
            event(ServerMessage::TurnStart(TurnStart { turn_id })),
            status(AgentStatus::Streaming),
            Out::Agent(line),
        ]
    }

    /// `session/cancel`, and every open question answered `cancelled` as
    /// ACP requires; the turn ends when the agent answers the prompt.
    fn abort(&mut self, id: Option<String>) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("abort"))];
        let Some(session) = self.session.clone().filter(|_| self.turn.is_some()) else {
            return out;
        };
        for (request_id, question) in std::mem::take(&mut self.questions) {
            let cancelled = RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled);
            let answer = ClientResponse::RequestPermissionResponse(cancelled);
            out.push(Out::Agent(wire::answer(question.asked, Ok(answer))));
            out.push(resolved(
                request_id,
                PermissionAnswer::Decision(Decision::Deny),
                Some("abort"),
            ));
        }
        let cancel = ClientNotification::CancelNotification(CancelNotification::new(session));
        out.push(Out::Agent(wire::notification(cancel)));
        out
    }

    fn answered(&mut self, id: Option<String>, answer: PermissionResponse) -> Vec<Out> {
        let command = "permission_response";
        let Some(question) = self.questions.get(&answer.request_id) else {
            // Already settled: not an answer any more (§9.5).
            return vec![respond(id, Response::accepted(command))];
        };
        let option = match &answer.answer {
            PermissionAnswer::Choice(choice) => question.options.get(choice),
            PermissionAnswer::Decision(decision) => question.decisions.get(decision),
        };
        let Some(option) = option.cloned() else {
            return vec![respond(id, Response::accepted(command))];
        };
        let Some(question) = self.questions.remove(&answer.request_id) else {
            return Vec::new();
        };
        let selected = RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option));
        let response =
            ClientResponse::RequestPermissionResponse(RequestPermissionResponse::new(selected));
        vec![
            respond(id, Response::accepted(command)),
            Out::Agent(wire::answer(question.asked, Ok(response))),
            // Settled: the host tells every client who answered.
            resolved(answer.request_id, answer.answer, None),
        ]
    }

    /// One line from the agent.
    pub fn from_agent(&mut self, line: &str) -> Vec<Out> {
        match wire::decode(line, &mut self.outstanding) {
            Incoming::Response { id, result, .. } => self.response(id, result),
            Incoming::Notification(notification) => match *notification {
                AgentNotification::SessionNotification(update) => self.update(update.update),
                _ => Vec::new(),
            },
            Incoming::Request(asked, request) => match *request {
                AgentRequest::RequestPermissionRequest(request) => self.asked(asked, request),
                _ => vec![Out::Agent(wire::answer(asked, Err(acp::Error::method_not_found())))],
            },
            Incoming::Unanswerable(asked, error) => {
                vec![Out::Agent(wire::answer(asked, Err(error)))]
            }
            Incoming::Ignored(why) => {
                tracing::warn!(%why, "an ACP agent's line was ignored");
                Vec::new()
            }
        }
    }

    fn response(&mut self, id: i64, result: Result<Box<AgentResponse>, acp::Error>) -> Vec<Out> {
        match (&self.phase, result) {
            (Phase::Initializing(asked), result) if *asked == id => match result.map(|r| *r) {
                Ok(AgentResponse::InitializeResponse(initialized))
                    if initialized.protocol_version == ProtocolVersion::V1 =>
                {
                    let new = NewSessionRequest::new(self.cwd.clone());
                    let (id, line) =
                        self.outstanding.request(ClientRequest::NewSessionRequest(new));
                    self.phase = Phase::Opening(id);
                    vec![Out::Agent(line)]
                }
                Ok(AgentResponse::InitializeResponse(initialized)) => vec![Out::Fatal(format!(
                    "the agent speaks ACP version {}, Shard speaks 1",
                    initialized.protocol_version
                ))],
                Ok(_) => {
                    vec![Out::Fatal("the agent answered initialize with something else".to_owned())]
                }
                Err(error) => {
                    vec![Out::Fatal(format!("the agent refused to start: {}", error.message))]
                }
            },
            (Phase::Opening(asked), result) if *asked == id => match result.map(|r| *r) {
                Ok(AgentResponse::NewSessionResponse(session)) => {
                    if let Some(modes) = &session.modes {
                        self.mode = modes.current_mode_id.0.to_string();
                    }
                    self.session = Some(session.session_id);
                    self.phase = Phase::Ready;
                    self.ready()
                }
                Ok(_) => vec![Out::Fatal(
                    "the agent answered session/new with something else".to_owned(),
                )],
                Err(error) => {
                    vec![Out::Fatal(format!("the agent cannot open a session: {}", error.message))]
                }
            },
            (_, result) if self.turn.as_ref().is_some_and(|turn| turn.prompt == id) => {
                self.turn_ended(result.map(|r| *r))
            }
            _ => Vec::new(),
        }
    }

    /// Shard's `hello` and `sync` once the agent has a session.
    fn ready(&self) -> Vec<Out> {
        let capabilities = vec!["streaming-deltas".to_owned(), "mode-catalog".to_owned()];
        let hello = Hello {
            protocol_version: "0.1".to_owned(),
            server_version: format!("acp:{}", self.model),
            capabilities: capabilities.clone(),
        };
        let sync = Sync {
            status: AgentStatus::Idle,
            mode: self.mode.clone(),
            capabilities: Some(capabilities),
            runtime_epoch: None,
            live_window: LiveWindow { messages: Vec::new(), compaction_index: None },
            pending_requests: Vec::new(),
            seq: None,
            reset: None,
        };
        vec![event(ServerMessage::Hello(hello)), event(ServerMessage::Sync(sync))]
    }

    fn update(&mut self, update: SessionUpdate) -> Vec<Out> {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => self.chunk(chunk, DeltaKind::Text),
            SessionUpdate::AgentThoughtChunk(chunk) => self.chunk(chunk, DeltaKind::Thinking),
            SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                self.announce(&id, &call.title, call.raw_input.clone())
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                self.tool_update(&id, update.fields)
            }
            _ => Vec::new(),
        }
    }

    fn chunk(&mut self, chunk: ContentChunk, kind: DeltaKind) -> Vec<Out> {
        let acp::ContentBlock::Text(text) = chunk.content else { return Vec::new() };
        let Some(turn) = &mut self.turn else { return Vec::new() };
        let text = text.text;
        let same_kind = matches!(
            (turn.blocks.last(), kind),
            (Some(ContentBlock::Text { .. }), DeltaKind::Text)
                | (Some(ContentBlock::Thinking { .. }), DeltaKind::Thinking)
        );
        if !same_kind {
            turn.blocks.push(match kind {
                DeltaKind::Thinking => ContentBlock::Thinking { text: String::new() },
                _ => ContentBlock::Text { text: String::new() },
            });
        }
        if let Some(ContentBlock::Text { text: all } | ContentBlock::Thinking { text: all }) =
            turn.blocks.last_mut()
        {
            all.push_str(&text);
        }
        let delta = MessageDelta {
            message_id: turn.message_id.clone(),
            block_index: u32::try_from(turn.blocks.len() - 1).unwrap_or(u32::MAX),
            kind,
            text_delta: Some(text),
            tool_call_id: None,
            name: None,
            args_delta: None,
        };
        vec![event(ServerMessage::MessageDelta(delta))]
    }

    fn announce(&mut self, id: &str, title: &str, input: Option<Value>) -> Vec<Out> {
        if self.tools.contains_key(id) {
            return Vec::new();
        }
        self.tools.insert(id.to_owned(), title.to_owned());
        let args = match input {
            Some(Value::Object(args)) => args,
            _ => serde_json::Map::new(),
        };
        let call = ToolCall {
            tool_call_id: id.to_owned(),
            name: title.to_owned(),
            args,
            render: None,
            read_only: None,
        };
        vec![event(ServerMessage::ToolCall(call))]
    }

    fn tool_update(&mut self, id: &str, fields: ToolCallUpdateFields) -> Vec<Out> {
        let title = fields.title.clone().unwrap_or_else(|| "tool".to_owned());
        let mut out = self.announce(id, &title, fields.raw_input.clone());
        let finished =
            matches!(fields.status, Some(ToolCallStatus::Completed | ToolCallStatus::Failed));
        if !finished {
            return out;
        }
        let text: Vec<String> = fields
            .content
            .iter()
            .flatten()
            .filter_map(|content| match content {
                ToolCallContent::Content(content) => match &content.content {
                    acp::ContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                },
                ToolCallContent::Diff(diff) => Some(format!("edited {}", diff.path.display())),
                _ => None,
            })
            .collect();
        let result = ToolResult {
            tool_call_id: id.to_owned(),
            content: ToolResultContent::Text { text: text.join("\n") },
            is_error: fields.status == Some(ToolCallStatus::Failed),
            exit_code: None,
            duration_ms: None,
            render: None,
        };
        out.push(event(ServerMessage::ToolResult(result)));
        out
    }

    /// A permission request: Shard's own, with one choice per option the
    /// agent offered (its id kept), and the legacy decisions by kind.
    fn asked(&mut self, asked: RequestId, request: RequestPermissionRequest) -> Vec<Out> {
        let request_id = self.fresh("perm");
        let mut options = HashMap::new();
        let mut decisions = HashMap::new();
        let mut choices = Vec::new();
        for (at, option) in request.options.iter().enumerate() {
            let (intent, decision) = match option.kind {
                PermissionOptionKind::AllowOnce => (ChoiceIntent::Allow, Some(Decision::Allow)),
                PermissionOptionKind::AllowAlways => {
                    (ChoiceIntent::Persist, Some(Decision::AllowAlways))
                }
                PermissionOptionKind::RejectOnce => (ChoiceIntent::Deny, Some(Decision::Deny)),
                _ => (ChoiceIntent::Deny, None),
            };
            let choice_id = format!("option-{at}");
            options.insert(choice_id.clone(), option.option_id.clone());
            if let Some(decision) = decision {
                decisions.entry(decision).or_insert_with(|| option.option_id.clone());
            }
            choices.push(PermissionChoice {
                id: choice_id,
                label: option.name.clone(),
                description: None,
                accelerator: None,
                intent,
            });
        }
        let tool = request.tool_call.fields.title.clone().unwrap_or_else(|| "a tool".to_owned());
        let input = request.tool_call.fields.raw_input.clone().unwrap_or(Value::Null);
        let shard_request = PermissionRequest {
            request_id: request_id.clone(),
            tool_name: tool.clone(),
            input,
            prompt: tool,
            options: [Decision::Allow, Decision::AllowAlways, Decision::Deny]
                .into_iter()
                .filter(|decision| decisions.contains_key(decision))
                .collect(),
            details: None,
            choices: Some(choices),
        };
        self.questions.insert(request_id, Question { asked, options, decisions });
        vec![event(ServerMessage::PermissionRequest(shard_request))]
    }

    /// The agent answered the turn's prompt: the message is complete, and
    /// the turn ends (an error says why, then ends it too).
    fn turn_ended(&mut self, result: Result<AgentResponse, acp::Error>) -> Vec<Out> {
        let Some(turn) = self.turn.take() else { return Vec::new() };
        let mut out = Vec::new();
        if !turn.blocks.is_empty() {
            let message = Message {
                id: turn.message_id.clone(),
                role: Role::Assistant,
                content: turn.blocks.clone(),
            };
            out.push(event(ServerMessage::MessageComplete(MessageComplete {
                message_id: turn.message_id,
                message,
            })));
            out.push(Out::Log(EntryBody::Assistant {
                content: turn.blocks,
                model: self.model.clone(),
                thinking_signatures: Vec::new(),
                usage: None,
            }));
        }
        match result {
            Ok(AgentResponse::PromptResponse(done)) if done.stop_reason == StopReason::Refusal => {
                out.push(error_event(AgentError::Refused.into()));
            }
            Ok(_) => {}
            Err(error) => out.push(error_event(AgentError::PromptFailed(error.message).into())),
        }
        out.push(event(ServerMessage::TurnEnd(TurnEnd { turn_id: turn.turn_id, usage: None })));
        out.push(status(AgentStatus::Idle));
        out
    }
}

fn event(message: ServerMessage) -> Out {
    Out::Host(Envelope::new(message).to_json())
}

fn respond(id: Option<String>, response: Response) -> Out {
    let envelope = Envelope::new(ServerMessage::Response(response));
    Out::Host(
        match id {
            Some(id) => envelope.with_id(id),
            None => envelope,
        }
        .to_json(),
    )
}

fn resolved(request_id: String, answer: PermissionAnswer, source: Option<&str>) -> Out {
    let source = source.map(str::to_owned);
    event(ServerMessage::PermissionResolved(shard_protocol::agent::PermissionResolved {
        request_id,
        answer,
        source,
    }))
}

fn status(status: AgentStatus) -> Out {
    event(ServerMessage::Status(Status { status, detail: None }))
}

fn error_event(error: WireError) -> Out {
    let event_ = shard_protocol::agent::ErrorEvent {
        code: error.code,
        message: error.message,
        fatal: Some(false),
    };
    event(ServerMessage::Error(event_))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The host's lines among `out`, as JSON.
    fn host(out: &[Out]) -> Vec<Value> {
        out.iter()
            .filter_map(|out| match out {
                Out::Host(line) => Some(serde_json::from_str(line).expect("a JSON line")),
                _ => None,
            })
            .collect()
    }

    /// The agent's lines among `out`, as JSON.
    fn agent(out: &[Out]) -> Vec<Value> {
        out.iter()
            .filter_map(|out| match out {
                Out::Agent(line) => Some(serde_json::from_str(line).expect("a JSON line")),
                _ => None,
            })
            .collect()
    }

    fn types(lines: &[Value]) -> Vec<&str> {
        lines.iter().map(|line| line["type"].as_str().unwrap_or("?")).collect()
    }

    /// A translator past `initialize` and `session/new`.
    fn ready() -> Translator {
        let (mut translator, out) = Translator::start(PathBuf::from("/work"), "fake");
        let initialize = &agent(&out)[0];
        assert_eq!(initialize["method"], "initialize");
        let out = translator.from_agent(
            &json!({"jsonrpc": "2.0", "id": initialize["id"],
                    "result": {"protocolVersion": 1, "agentCapabilities": {}}})
            .to_string(),
        );
        let new = &agent(&out)[0];
        assert_eq!(new["method"], "session/new");
        assert_eq!(new["params"]["cwd"], "/work");
        let out = translator.from_agent(
            &json!({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1",
                    "modes": {"currentModeId": "plan", "availableModes": [{"id": "plan", "name": "Plan"}]}}})
            .to_string(),
        );
        let lines = host(&out);
        assert_eq!(types(&lines), ["hello", "sync"]);
        assert_eq!(lines[1]["mode"], "plan");
        translator
    }

    fn update(kind: &str, extra: Value) -> String {
        let mut update = json!({"sessionUpdate": kind});
        update.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1", "update": update}})
            .to_string()
    }

    #[test]
    fn a_prompt_is_a_turn_of_deltas_completed_and_recorded() {
        let mut translator = ready();
        let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "hello"}"#);
        let lines = host(&out);
        assert_eq!(types(&lines), ["response", "turn_start", "status"]);
        assert_eq!(lines[0]["id"], "c1");
        assert_eq!(lines[0]["success"], true);
        assert!(out.contains(&Out::Log(EntryBody::User {
            text: "hello".to_owned(),
            images: Vec::new(),
            queued_entry_id: None
        })));
        let prompt = &agent(&out)[0];
        assert_eq!(prompt["method"], "session/prompt");
        assert_eq!(prompt["params"]["prompt"][0]["text"], "hello");

        let thought = translator.from_agent(&update(
            "agent_thought_chunk",
            json!({"content": {"type": "text", "text": "hmm"}}),
        ));
        let first = translator.from_agent(&update(
            "agent_message_chunk",
            json!({"content": {"type": "text", "text": "hi "}}),
        ));
        let second = translator.from_agent(&update(
            "agent_message_chunk",
            json!({"content": {"type": "text", "text": "there"}}),
        ));
        let deltas: Vec<Value> =
            [thought, first, second].iter().flat_map(|out| host(out)).collect();
        assert_eq!(types(&deltas), ["message_delta"; 3]);
        assert_eq!(deltas[0]["kind"], "thinking");
        assert_eq!(
            (deltas[1]["block_index"].as_u64(), deltas[2]["block_index"].as_u64()),
            (Some(1), Some(1))
        );

        let done = translator.from_agent(
            &json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}})
                .to_string(),
        );
        let lines = host(&done);
        assert_eq!(types(&lines), ["message_complete", "turn_end", "status"]);
        assert_eq!(lines[0]["message"]["content"][1]["text"], "hi there");
        assert_eq!(lines[0]["message_id"], deltas[1]["message_id"]);
        assert_eq!(lines[2]["status"], "idle");
        assert!(done.iter().any(|out| matches!(out, Out::Log(EntryBody::Assistant { .. }))));
    }

    #[test]
    fn a_permission_request_is_shards_own_and_the_option_chosen_is_the_agents() {
        let mut translator = ready();
        translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "run: ls"}"#);
        let ask = json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
            "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "t1", "title": "Run ls", "rawInput": {"command": "ls"}},
                       "options": [{"optionId": "allow", "name": "Yes", "kind": "allow_once"},
                                   {"optionId": "always", "name": "Always", "kind": "allow_always"},
                                   {"optionId": "nope", "name": "No", "kind": "reject_once"}]}});
        let asked = host(&translator.from_agent(&ask.to_string()));
        assert_eq!(types(&asked), ["permission_request"]);
        let request = &asked[0];
        assert_eq!(request["options"], json!(["allow", "allow_always", "deny"]));
        assert_eq!(request["choices"][2]["label"], "No");
        assert_eq!(request["choices"][2]["intent"], "deny");
        assert_eq!(request["input"]["command"], "ls");

        let request_id = request["request_id"].as_str().unwrap();
        let answer = json!({"id": "a1", "type": "permission_response", "request_id": request_id, "decision": "deny"});
        let out = translator.from_host(&answer.to_string());
        let told = host(&out);
        assert_eq!(types(&told), ["response", "permission_resolved"]);
        assert_eq!(told[1]["decision"], "deny");
        let reply = &agent(&out)[0];
        assert_eq!(reply["id"], 0, "answered under the agent's own id");
        assert_eq!(reply["result"]["outcome"], json!({"outcome": "selected", "optionId": "nope"}));
        // A second answer finds nothing open and sends the agent nothing.
        let again = translator.from_host(&answer.to_string());
        assert!(agent(&again).is_empty());
    }

    #[test]
    fn an_abort_cancels_the_turn_and_every_open_question() {
        let mut translator = ready();
        translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "run: ls"}"#);
        let ask = json!({"jsonrpc": "2.0", "id": "q", "method": "session/request_permission",
            "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "t1"},
                       "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]}});
        translator.from_agent(&ask.to_string());
        let out = translator.from_host(r#"{"id": "c2", "type": "abort"}"#);
        let sent = agent(&out);
        assert_eq!(types(&host(&out)), ["response", "permission_resolved"]);
        assert_eq!(sent[0]["id"], "q");
        assert_eq!(sent[0]["result"]["outcome"], json!({"outcome": "cancelled"}));
        assert_eq!(sent[1]["method"], "session/cancel");
        let prompt_id = 2; // initialize 0, session/new 1
        let ended = translator.from_agent(
            &json!({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "cancelled"}})
                .to_string(),
        );
        assert_eq!(types(&host(&ended)), ["turn_end", "status"]);
    }

    #[test]
    fn what_cannot_be_done_is_said_and_a_tool_call_is_shown() {
        let mut translator = ready();
        let out = translator.from_host(r#"{"id": "m", "type": "set_model", "model": "x"}"#);
        let refused = &host(&out)[0];
        assert_eq!(refused["id"], "m");
        assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");
        translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
        let busy = host(&translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "y"}"#));
        assert_eq!(busy[0]["error"]["code"], "CONFLICT");
        let call = translator.from_agent(&update(
            "tool_call",
            json!({"toolCallId": "t1", "title": "Read a.txt", "rawInput": {"path": "a.txt"}}),
        ));
        assert_eq!(types(&host(&call)), ["tool_call"]);
        let done = translator.from_agent(&update(
            "tool_call_update",
            json!({"toolCallId": "t1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "contents"}}]}),
        ));
        let result = &host(&done)[0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(result["content"]["text"], "contents");
        let failed = translator.from_agent(
            &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom"}})
                .to_string(),
        );
        let lines = host(&failed);
        assert_eq!(types(&lines), ["error", "turn_end", "status"]);
        assert!(lines[0]["message"].as_str().unwrap().contains("boom"));
    }

    #[test]
    fn an_agent_of_another_protocol_version_or_that_cannot_open_a_session_is_fatal() {
        let (mut translator, _) = Translator::start(PathBuf::from("/w"), "fake");
        let out = translator
            .from_agent(r#"{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2}}"#);
        assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("version 2")), "{out:?}");
        let (mut translator, _) = Translator::start(PathBuf::from("/w"), "fake");
        translator.from_agent(r#"{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}"#);
        let out = translator.from_agent(
            r#"{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "login first"}}"#,
        );
        assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("login first")), "{out:?}");
    }
}
