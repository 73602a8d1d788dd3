//! One turn: the user's message, then model calls and tool runs until the
//! model answers without calling a tool (PROTOCOL.md §9.4, §12.1).
//!
//! Between iterations (after the tools of one model call, before the next)
//! queued steer messages are delivered, the session log is flushed, and if the
//! context is full the window is compacted. `abort` cancels the token: the
//! model call is dropped, a running `bash` group is killed, open questions are
//! withdrawn, every tool call gets a result so the history stays valid, and
//! the turn ends normally with `turn_end`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use shard_protocol::agent::{
    Compaction, DeltaKind, ErrorEvent, MessageComplete, MessageDelta, ToolCall, ToolResult,
    TurnEnd, TurnStart, UiKind, UiRequest, UiValue,
};
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::message::Response;
use shard_protocol::types::{
    AgentStatus, ContentBlock, JsonObject, Message, Role, ToolResultContent, Usage,
};
use shard_protocol::{ErrorCode, ServerMessage, WireError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Price;
use crate::conversation::summary_heading;
use crate::permission::{self, Outcome, Verdict};
use crate::provider::{self, ProviderEvent, ProviderRequest};
use crate::session_log::EntryBody;
use crate::shared::{Shared, UserInput};
use crate::tools::{self, ToolContext, ToolOutput};
use crate::util::new_id;

/// Provider events buffered between the provider task and the turn.
const PROVIDER_EVENTS: usize = 256;
/// Messages `recall` returns per page by default.
const RECALL_PAGE: usize = 20;

const SYSTEM_PROMPT: &str = "You are a coding agent working in the user's project directory. \
Use the tools to read, search and change files and to run commands. Keep answers short.";

/// What a turn opens with.
pub enum Opening {
    /// This user message, appended to the session log as the turn starts.
    Input(UserInput),
    /// The user message the log already ends with: a resumed agent records
    /// what its last process still owed before its `sync`, so that the
    /// `sync` shows it ([`crate::agent::Agent::greet`]).
    Recorded,
}

/// How a turn ended; the controller sets the status that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Done,
    Aborted,
    Failed,
}

/// A block being assembled from deltas.
enum Block {
    Text(String),
    Thinking(String),
    Tool { id: String, name: String, args: String },
}

struct Assembler {
    message_id: String,
    blocks: Vec<Block>,
    signatures: Vec<String>,
}

impl Assembler {
    /// Folds one provider event in; returns the delta to emit.
    fn apply(&mut self, event: ProviderEvent) -> Option<MessageDelta> {
        let message_id = self.message_id.clone();
        let delta = move |block_index: usize, kind| MessageDelta {
            message_id: message_id.clone(),
            block_index: u32::try_from(block_index).unwrap_or(u32::MAX),
            kind,
            text_delta: None,
            tool_call_id: None,
            name: None,
            args_delta: None,
        };
        match event {
            ProviderEvent::Text(text) | ProviderEvent::Thinking(text) if text.is_empty() => None,
            ProviderEvent::Text(text) => {
                let at = self.append(DeltaKind::Text, &text);
                Some(MessageDelta { text_delta: Some(text), ..delta(at, DeltaKind::Text) })
            }
            ProviderEvent::Thinking(text) => {
                let at = self.append(DeltaKind::Thinking, &text);
                Some(MessageDelta { text_delta: Some(text), ..delta(at, DeltaKind::Thinking) })
            }
            ProviderEvent::ThinkingSignature(signature) => {
                self.signatures.push(signature);
                None
            }
            ProviderEvent::ToolCallStart { id, name } => {
                self.blocks.push(Block::Tool {
                    id: id.clone(),
                    name: name.clone(),
                    args: String::new(),
                });
                Some(MessageDelta {
                    tool_call_id: Some(id),
                    name: Some(name),
                    ..delta(self.blocks.len() - 1, DeltaKind::ToolCall)
                })
            }
            ProviderEvent::ToolArgs { id, delta: piece } => {
                let at = self.blocks.iter().rposition(
                    |block| matches!(block, Block::Tool { id: known, .. } if *known == id),
                )?;
                if let Block::Tool { args, .. } = &mut self.blocks[at] {
                    args.push_str(&piece);
                }
                Some(MessageDelta { args_delta: Some(piece), ..delta(at, DeltaKind::ToolCall) })
            }
            ProviderEvent::Usage(_) => None,
        }
    }

    /// Appends text to the last block if it is of the same kind, else opens
    /// a new block; returns the block's index.
    fn append(&mut self, kind: DeltaKind, text: &str) -> usize {
        match (self.blocks.last_mut(), kind) {
            (Some(Block::Text(current)), DeltaKind::Text)
            | (Some(Block::Thinking(current)), DeltaKind::Thinking) => {
                current.push_str(text);
            }
            (_, DeltaKind::Thinking) => self.blocks.push(Block::Thinking(text.to_owned())),
            _ => self.blocks.push(Block::Text(text.to_owned())),
        }
        self.blocks.len() - 1
    }

    /// The finished content, and each tool call with its parsed arguments
    /// (or why they could not be parsed).
    fn finish(self, keep_tool_calls: bool) -> (Vec<ContentBlock>, Vec<String>, Vec<PlannedCall>) {
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for block in self.blocks {
            match block {
                Block::Text(text) => content.push(ContentBlock::Text { text }),
                Block::Thinking(text) => content.push(ContentBlock::Thinking { text }),
                Block::Tool { .. } if !keep_tool_calls => {}
                Block::Tool { id, name, args } => {
                    let parsed = if args.trim().is_empty() {
                        Ok(JsonObject::new())
                    } else {
                        match serde_json::from_str::<Value>(&args) {
                            Ok(Value::Object(map)) => Ok(map),
                            Ok(_) => Err("the arguments are not a JSON object".to_owned()),
                            Err(problem) => {
                                Err(format!("the arguments are not valid JSON: {problem}"))
                            }
                        }
                    };
                    content.push(ContentBlock::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        args: parsed.clone().unwrap_or_default(),
                    });
                    calls.push(PlannedCall { id, name, args: parsed });
                }
            }
        }
        (content, self.signatures, calls)
    }
}

struct PlannedCall {
    id: String,
    name: String,
    args: Result<JsonObject, String>,
}

fn add_usage(total: &mut Usage, call: &Usage) {
    total.input += call.input;
    total.output += call.output;
    for (sum, part) in
        [(&mut total.cache_read, call.cache_read), (&mut total.cache_write, call.cache_write)]
    {
        if let Some(part) = part {
            *sum = Some(sum.unwrap_or(0) + part);
        }
    }
    if let Some(cost) = call.cost {
        total.cost = Some(total.cost.unwrap_or(0.0) + cost);
    }
    total.context_tokens = call.context_tokens.or(total.context_tokens);
    total.model.clone_from(&call.model);
}

/// Runs one turn to its end. Never panics on bad model output or tool errors.
/// The status after the turn is the controller's to set: it may start a
/// queued follow-up instead of going idle.
pub async fn run(shared: Arc<Shared>, opening: Opening, cancel: CancellationToken) -> Ending {
    let turn_id = format!("turn-{}", new_id());
    shared.state().turn_id = Some(turn_id.clone());
    shared.emit(ServerMessage::TurnStart(TurnStart { turn_id: turn_id.clone() })).await;
    shared.set_status(AgentStatus::Streaming).await;
    let mut total = Usage::default();
    let opened = match opening {
        Opening::Input(input) => push(&shared, user_entry(input)).await,
        Opening::Recorded => Ok(()),
    };
    let ending = match opened {
        Ok(()) => iterate(&shared, &cancel, &mut total).await,
        Err(problem) => {
            report(&shared, ErrorCode::InternalError, problem, false).await;
            Ending::Failed
        }
    };
    if let Err(problem) = shared.conversation.lock().await.flush().await {
        report(&shared, ErrorCode::InternalError, format!("session log: {problem}"), true).await;
    }
    let usage = (total.input + total.output > 0).then_some(total);
    {
        let mut state = shared.state();
        state.turn_ended = true;
        state.turn_id = None;
    }
    shared.emit(ServerMessage::TurnEnd(TurnEnd { turn_id, usage })).await;
    ending
}

/// The log entry of a user message; one that waited in a queue names its
/// `queued` entry, which it settles.
pub fn user_entry(input: UserInput) -> EntryBody {
    EntryBody::User {
        text: input.text,
        images: input.images,
        queued_entry_id: input.queued_entry_id,
    }
}

async fn push(shared: &Shared, body: EntryBody) -> Result<(), String> {
    shared
        .conversation
        .lock()
        .await
        .push(body)
        .await
        .map(|_| ())
        .map_err(|problem| format!("session log: {problem}"))
}

/// An `error` event. Every async error of a turn goes out here, provider
/// errors (whose text an HTTP body or a stream's `error` event wrote) above
/// all: made safe to show and bounded first.
async fn report(shared: &Shared, code: ErrorCode, message: String, fatal: bool) {
    let message = into_diagnostic(message);
    shared.emit(ServerMessage::Error(ErrorEvent { code, message, fatal: Some(fatal) })).await;
}

async fn iterate(shared: &Arc<Shared>, cancel: &CancellationToken, total: &mut Usage) -> Ending {
    let mut first = true;
    loop {
        if !first {
            // An iteration boundary: make the last round durable, deliver
            // steers, and compact if the next call would overflow.
            if let Err(problem) = shared.conversation.lock().await.flush().await {
                report(shared, ErrorCode::InternalError, format!("session log: {problem}"), true)
                    .await;
                return Ending::Failed;
            }
            let (model, _) = shared.active_model();
            let tokens = shared.conversation.lock().await.window_tokens();
            if tokens >= model.context_window() {
                let _ = compact(shared, shared.config.compaction.keep_recent_tokens).await;
                shared.set_status(AgentStatus::Streaming).await;
            }
        }
        first = false;
        if cancel.is_cancelled() {
            return Ending::Aborted;
        }
        let ModelReply { message_id, content, signatures, calls, usage, ending } =
            call_model(shared, cancel).await;
        let (model, _) = shared.active_model();
        let entry_id = {
            let mut conversation = shared.conversation.lock().await;
            match conversation
                .push(EntryBody::Assistant {
                    content: content.clone(),
                    model: model.id.clone(),
                    thinking_signatures: signatures,
                    usage: usage.clone(),
                })
                .await
            {
                Ok(entry) => entry.id.clone(),
                Err(problem) => {
                    drop(conversation);
                    report(
                        shared,
                        ErrorCode::InternalError,
                        format!("session log: {problem}"),
                        true,
                    )
                    .await;
                    return Ending::Failed;
                }
            }
        };
        shared
            .emit(ServerMessage::MessageComplete(MessageComplete {
                message_id,
                message: Message { id: entry_id, role: Role::Assistant, content },
            }))
            .await;
        if let Some(usage) = usage {
            add_usage(total, &usage);
            shared.emit(ServerMessage::Usage(usage)).await;
        }
        if let Some(ending) = ending {
            return ending;
        }
        let aborted = run_tools(shared, cancel, calls).await;
        if aborted {
            return Ending::Aborted;
        }
        let steered = deliver_steers(shared).await;
        let had_tools = {
            let conversation = shared.conversation.lock().await;
            matches!(
                conversation.entries().last().map(|entry| &entry.body),
                Some(EntryBody::ToolResult { .. })
            )
        };
        if !had_tools && !steered {
            return Ending::Done;
        }
    }
}

/// What one model call produced.
struct ModelReply {
    /// The id the deltas carried; `message_complete` repeats it.
    message_id: String,
    content: Vec<ContentBlock>,
    signatures: Vec<String>,
    calls: Vec<PlannedCall>,
    usage: Option<Usage>,
    /// Set when the call ended the turn (aborted or failed).
    ending: Option<Ending>,
}

/// The built-in instructions, then a manager's (a subagent's brief), then
/// where the agent works.
fn system_prompt(shared: &Shared) -> String {
    let mut system = SYSTEM_PROMPT.to_owned();
    if let Some(instructions) = &shared.instructions {
        system.push_str("\n\n");
        system.push_str(instructions);
    }
    system.push_str(&format!("\nWorking directory: {}", shared.cwd.display()));
    system
}

/// One provider call, streamed to the client. A failed or aborted call still
/// yields what arrived (without tool calls), so the transcript stays whole.
async fn call_model(shared: &Arc<Shared>, cancel: &CancellationToken) -> ModelReply {
    // The model is read here, at the call boundary: a set_model during the
    // previous stream takes effect now, never mid-stream (§9.2).
    let (model, reasoning_level) = shared.active_model();
    let (model_id, price) = (model.id.clone(), shared.config.price(&model.id));
    let window = {
        let conversation = shared.conversation.lock().await;
        conversation.window().into_iter().cloned().collect()
    };
    let request = ProviderRequest {
        model,
        reasoning_level,
        system: system_prompt(shared),
        window,
        tools: shared.toolset.definitions(),
    };
    let (sender, mut events) = mpsc::channel(PROVIDER_EVENTS);
    let call = provider::stream(request, sender);
    tokio::pin!(call);
    let message_id = format!("msg-{}", new_id());
    let mut assembler =
        Assembler { message_id: message_id.clone(), blocks: Vec::new(), signatures: Vec::new() };
    let mut usage = None;
    let mut outcome: Option<Result<(), provider::ProviderError>> = None;
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(ProviderEvent::Usage(reported)) => {
                    usage = Some(priced(reported, &model_id, price));
                }
                Some(event) => {
                    if let Some(delta) = assembler.apply(event) {
                        shared.emit(ServerMessage::MessageDelta(delta)).await;
                    }
                }
                None => break,
            },
            result = &mut call, if outcome.is_none() => outcome = Some(result),
            () = cancel.cancelled() => {
                let (content, signatures, _) = assembler.finish(false);
                return ModelReply { message_id, content, signatures, calls: Vec::new(), usage, ending: Some(Ending::Aborted) };
            }
        }
    }
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => call.await,
    };
    let failed = outcome.err();
    let (content, signatures, calls) = assembler.finish(failed.is_none());
    if let Some(problem) = &failed {
        report(shared, ErrorCode::ProviderError, problem.0.clone(), false).await;
    }
    ModelReply {
        message_id,
        content,
        signatures,
        calls,
        usage,
        ending: failed.map(|_| Ending::Failed),
    }
}

/// A call's usage with its model and, when `config.toml` prices that model
/// and the provider reported no cost of its own, its cost.
fn priced(mut usage: Usage, model_id: &str, price: Option<Price>) -> Usage {
    if usage.cost.is_none() {
        usage.cost = price.map(|price| price.cost(&usage));
    }
    if usage.model.is_none() {
        usage.model = Some(model_id.to_owned());
    }
    usage
}

/// Runs the calls in order. Returns whether the turn was aborted; every call
/// has a result either way.
async fn run_tools(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    calls: Vec<PlannedCall>,
) -> bool {
    let mut aborted = false;
    for call in calls {
        let (output, duration_ms) = if aborted || cancel.is_cancelled() {
            aborted = true;
            (ToolOutput::error("aborted before it ran"), None)
        } else {
            let ran = run_tool(shared, cancel, &call).await;
            aborted = cancel.is_cancelled();
            ran
        };
        let recorded = push(
            shared,
            EntryBody::ToolResult {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: output.content.clone(),
                is_error: output.is_error,
                exit_code: output.exit_code,
            },
        )
        .await;
        if let Err(problem) = recorded {
            report(shared, ErrorCode::InternalError, problem, true).await;
        }
        shared
            .emit(ServerMessage::ToolResult(ToolResult {
                tool_call_id: call.id,
                content: output.content,
                is_error: output.is_error,
                exit_code: output.exit_code,
                duration_ms,
                render: output.render,
            }))
            .await;
    }
    aborted
}

/// Gate, announce, run. The duration is the tool's own run time (not the
/// time spent waiting for permission); `None` when it never ran.
async fn run_tool(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    call: &PlannedCall,
) -> (ToolOutput, Option<u64>) {
    let args = match &call.args {
        Ok(args) => args,
        Err(problem) => {
            return (ToolOutput::error(format!("cannot run {}: {problem}", call.name)), None);
        }
    };
    let known = shared.toolset.offers(&call.name);
    if !known {
        return (ToolOutput::error(format!("there is no tool named `{}`", call.name)), None);
    }
    if let Err(denied) = check_permission(shared, cancel, &call.name, args).await {
        return (ToolOutput::error(denied), None);
    }
    let started = Instant::now();
    shared
        .emit(ServerMessage::ToolCall(ToolCall {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args: args.clone(),
            render: tools::start_render(&call.name, args),
            read_only: Some(tools::is_read_only(&call.name)),
        }))
        .await;
    let output = match call.name.as_str() {
        "recall" => recall(shared, args).await,
        "ask" => ask(shared, cancel, args).await,
        name if tools::subagent::is_subagent_tool(name) => match &shared.toolset.delegate {
            Some(delegate) => tools::subagent::run(name, args, delegate, cancel).await,
            None => ToolOutput::error("this agent cannot launch subagents"),
        },
        name => {
            let context = ToolContext {
                cwd: shared.cwd.clone(),
                cancel: cancel.clone(),
                hidden_env: shared.config.hidden_env.clone(),
            };
            tools::run(name, args, &context).await
        }
    };
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    (output, Some(elapsed))
}

/// `Ok` to run, `Err(why)` refused.
async fn check_permission(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    name: &str,
    args: &JsonObject,
) -> Result<(), String> {
    let (mode, headless) = {
        let state = shared.state();
        (state.mode.clone(), state.headless)
    };
    let verdict = permission::decide(name, args, &mode, &shared.cwd, |fingerprint| {
        shared.state().grants.contains(fingerprint)
    });
    match verdict {
        Verdict::Allow => return Ok(()),
        Verdict::Refuse(why) => return Err(format!("Permission denied: {why}")),
        Verdict::Ask if headless => {
            return Err("Permission denied: nobody is connected to answer (headless)".to_owned());
        }
        Verdict::Ask => {}
    }
    let request_id = shared.state().next_request_id("perm");
    let request = permission::request(request_id.clone(), name, args, &shared.cwd);
    let answer = shared.ask_permission(request.clone());
    shared.emit(ServerMessage::PermissionRequest(request)).await;
    let answer =
        wait_for_answer(shared, cancel, &request_id, AgentStatus::WaitingForPermission, answer)
            .await;
    match answer.as_ref().map(permission::outcome) {
        Some(Outcome::Allow) => Ok(()),
        Some(Outcome::AllowAlways) => {
            let fingerprint = permission::fingerprint(name, args);
            shared.state().grants.insert(fingerprint.clone());
            push(shared, EntryBody::Grant { tool_name: name.to_owned(), fingerprint }).await?;
            Ok(())
        }
        Some(Outcome::Deny) => Err("Permission denied by the user".to_owned()),
        // Withdrawn: aborted, or refused because nobody can answer.
        None if cancel.is_cancelled() => Err("aborted while waiting for permission".to_owned()),
        None => Err("Permission denied: nobody is connected to answer (headless)".to_owned()),
    }
}

/// Waits for the answer to an open question with the status showing the
/// wait; on abort the question is withdrawn. `None`: no answer came (aborted,
/// or withdrawn because nobody can answer).
async fn wait_for_answer<T>(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    request_id: &str,
    waiting: AgentStatus,
    answer: tokio::sync::oneshot::Receiver<T>,
) -> Option<T> {
    shared.set_status(waiting).await;
    let answer = tokio::select! {
        answer = answer => answer.ok(),
        () = cancel.cancelled() => {
            shared.withdraw(request_id, "abort").await;
            None
        }
    };
    shared.set_status(AgentStatus::Streaming).await;
    answer
}

async fn recall(shared: &Arc<Shared>, args: &JsonObject) -> ToolOutput {
    let index = args.get("index").and_then(Value::as_u64).unwrap_or(0);
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(RECALL_PAGE, |limit| limit as usize)
        .clamp(1, 200);
    let conversation = shared.conversation.lock().await;
    let Some((entries, total)) = conversation.recall(index, offset, limit) else {
        return ToolOutput::error(format!("there is no compaction {index} in this session"));
    };
    let mut text = format!(
        "Compaction {index}: messages {} to {} of {total}\n",
        offset + 1,
        offset + entries.len()
    );
    for entry in &entries {
        if let Some(message) = crate::conversation::to_wire_message(entry) {
            text.push_str(&format!("[{}] {}\n", entry.id, describe(&message)));
        }
    }
    if offset + entries.len() < total {
        text.push_str(&format!("[more: recall with offset {}]\n", offset + entries.len()));
    }
    ToolOutput::text(text)
}

fn describe(message: &Message) -> String {
    let role = match message.role {
        Role::User => "user",
        _ => "assistant",
    };
    let parts: Vec<String> = message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Thinking { text } => format!("(thinking) {text}"),
            ContentBlock::ToolCall { name, args, .. } => {
                format!("(calls {name} {})", Value::Object(args.clone()))
            }
            ContentBlock::ToolResult { content, .. } => format!(
                "(result) {}",
                match content {
                    ToolResultContent::Text { text } => text.clone(),
                    ToolResultContent::Json { value } => value.to_string(),
                    ToolResultContent::Error { message } => message.clone(),
                    ToolResultContent::Unknown => String::new(),
                }
            ),
            ContentBlock::Unknown => String::new(),
        })
        .collect();
    format!("{role}: {}", parts.join(" "))
}

/// `ask`: a `ui_request`, waiting for its `ui_response` (except `notify`,
/// which only informs and waits for nothing).
async fn ask(shared: &Arc<Shared>, cancel: &CancellationToken, args: &JsonObject) -> ToolOutput {
    let question = args.get("question").and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = match args.get("kind").and_then(Value::as_str).unwrap_or("input") {
        "select" => UiKind::Select,
        "confirm" => UiKind::Confirm,
        "editor" => UiKind::Editor,
        "notify" => UiKind::Notify,
        "input" => UiKind::Input,
        other => return ToolOutput::error(format!("unknown ask kind `{other}`")),
    };
    let options: Option<Vec<String>> = args
        .get("options")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect());
    if kind == UiKind::Select && options.as_ref().is_none_or(Vec::is_empty) {
        return ToolOutput::error("a select question needs `options`");
    }
    let (request_id, headless) = {
        let mut state = shared.state();
        (state.next_request_id("ui"), state.headless)
    };
    let request = UiRequest {
        request_id: request_id.clone(),
        kind,
        title: None,
        message: Some(question),
        options,
        placeholder: None,
        prefill: args.get("prefill").and_then(Value::as_str).map(str::to_owned),
        notify_type: (kind == UiKind::Notify).then_some(shard_protocol::agent::NotifyType::Info),
    };
    if kind == UiKind::Notify {
        shared.emit(ServerMessage::UiRequest(request)).await;
        return ToolOutput::text("The user was notified.");
    }
    if headless {
        return ToolOutput::error("nobody is connected to answer (headless)");
    }
    let answer = shared.ask_ui(request.clone());
    shared.emit(ServerMessage::UiRequest(request)).await;
    let answer =
        wait_for_answer(shared, cancel, &request_id, AgentStatus::WaitingForUi, answer).await;
    match answer {
        Some(Some(UiValue::Text(text))) => ToolOutput::text(text),
        Some(Some(UiValue::List(items))) => ToolOutput::text(items.join(", ")),
        Some(None) => ToolOutput::error("the user dismissed the question"),
        None if cancel.is_cancelled() => ToolOutput::error("aborted while waiting for an answer"),
        None => ToolOutput::error("nobody is connected to answer (headless)"),
    }
}

/// Delivers queued steers as user messages. Returns whether there were any.
async fn deliver_steers(shared: &Arc<Shared>) -> bool {
    let steers: Vec<UserInput> = shared.state().steers.drain(..).collect();
    let any = !steers.is_empty();
    for mut steer in steers {
        let strict = steer.strict.take();
        let delivered = push(shared, user_entry(steer)).await;
        if let Some(reply) = strict {
            let response = match &delivered {
                Ok(()) => Response::ok(reply.command, serde_json::json!({"status": "injected"})),
                Err(problem) => Response::failed(
                    reply.command,
                    WireError::new(ErrorCode::InternalError, problem.clone()),
                ),
            };
            shared.respond(reply.id, response).await;
        }
        if let Err(problem) = delivered {
            report(shared, ErrorCode::InternalError, problem, true).await;
        }
    }
    any
}

/// Compacts the live window now: status `compacting`, then a `compaction`
/// event on success. The caller restores the status it wants afterwards.
/// `Ok(None)`: nothing could be cut.
pub async fn compact(
    shared: &Arc<Shared>,
    keep_recent_tokens: u64,
) -> Result<Option<Compaction>, String> {
    shared.set_status(AgentStatus::Compacting).await;
    let mut conversation = shared.conversation.lock().await;
    let Some(plan) = conversation.plan_compaction(keep_recent_tokens) else { return Ok(None) };
    if plan.summary.trim().is_empty() {
        return Err("compaction produced an empty summary".to_owned());
    }
    let index = conversation.compaction_index().unwrap_or(0) + 1;
    let compaction = Compaction {
        index,
        tokens_before: plan.tokens_before,
        tokens_after: plan.tokens_after,
        first_kept_entry_id: plan.first_kept_entry_id.clone(),
        message_range: plan.message_range.clone(),
    };
    let written = async {
        conversation
            .push(EntryBody::Compaction {
                index,
                summary: plan.summary,
                first_kept_entry_id: plan.first_kept_entry_id,
                message_range: plan.message_range,
                tokens_before: plan.tokens_before,
                tokens_after: plan.tokens_after,
            })
            .await?;
        conversation.flush().await
    };
    written.await.map_err(|problem| format!("session log: {problem}"))?;
    drop(conversation);
    tracing::info!(index, heading = %summary_heading(index), "compacted");
    shared.emit(ServerMessage::Compaction(compaction.clone())).await;
    Ok(Some(compaction))
}
