//! One turn: the user's message, then model calls and tool runs until the
//! model answers without calling a tool (PROTOCOL.md §9.4, §12.1).
//!
//! Between iterations (after the tools of one model call, before the next)
//! queued steer messages are delivered, the session log is flushed, and if the
//! context is full the window is compacted. `abort` cancels the token: the
//! model call is dropped, a running `bash` group is killed, open questions are
//! withdrawn, every tool call gets a result so the history stays valid, and
//! the turn ends normally with `turn_end`.
//!
//! - `stream`: one model call, streamed and assembled into a reply.
//! - `tool_calls`: running the reply's tool calls in order.
//! - `questions`: the permission gate's questions and the `ask` tool.
//! - `recall`: the `recall` tool.
//! - `compaction`: compacting the live window.

mod compaction;
mod questions;
mod recall;
mod stream;
mod tool_calls;

use std::ops::ControlFlow;
use std::sync::Arc;

use shard_protocol::agent::{ErrorEvent, MessageComplete, TurnEnd, TurnStart, UserMessage};
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, Message, Role, Usage};
use shard_protocol::{ErrorCode, ServerMessage, WireError};
use tokio_util::sync::CancellationToken;

use crate::provider::ProviderError;
use crate::session_log::EntryBody;
use crate::shared::{LogFailed, Shared, UserInput};
use crate::util::new_id;

pub use self::compaction::{CompactionFailed, compact};
use self::stream::{ModelReply, PlannedCall, call_model};
use self::tool_calls::run_tools;

/// What a turn opens with.
pub enum Opening {
    /// This user message, appended to the session log as the turn starts.
    Input(UserInput),
    /// The user message the log already ends with: a resumed agent records
    /// what its last process still owed before its `sync`, so that the
    /// `sync` shows it ([`crate::agent::Agent::greet`]). The turn still
    /// tells it (`user_message`): a client resuming from its cursor after a
    /// restart gets events, not that `sync`.
    Recorded(UserMessage),
}

/// How a turn ended; the controller sets the status that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Done,
    Aborted,
    Failed,
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
        Opening::Input(input) => say(&shared, input, Some(turn_id.clone())).await,
        Opening::Recorded(mut said) => {
            said.turn_id = Some(turn_id.clone());
            shared.emit(ServerMessage::UserMessage(said)).await;
            Ok(())
        }
    };
    let ending = match opened {
        Ok(()) => iterate(&shared, &cancel, &mut total).await,
        Err(problem) => {
            report(&shared, problem, false).await;
            Ending::Failed
        }
    };
    if let Err(problem) = shared.conversation.lock().await.flush().await {
        report(&shared, LogFailed(problem), true).await;
    }
    let usage = (total.input + total.output > 0).then_some(total);
    let dropped = {
        let mut state = shared.state();
        state.turn_ended = true;
        state.turn_id = None;
        std::mem::take(&mut state.dropped)
    };
    let aborted = ending == Ending::Aborted;
    shared.emit(ServerMessage::TurnEnd(TurnEnd { turn_id, usage, aborted, dropped })).await;
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

/// Records a user message and tells every client it landed
/// (`user_message`), with the entry it became.
async fn say(shared: &Shared, input: UserInput, turn_id: Option<String>) -> Result<(), LogFailed> {
    let text = input.text.clone();
    let entry_id = push(shared, user_entry(input)).await?;
    let said = UserMessage { entry_id, text, turn_id };
    shared.emit(ServerMessage::UserMessage(said)).await;
    Ok(())
}

/// Appends an entry to the session log; answers its id.
async fn push(shared: &Shared, body: EntryBody) -> Result<String, LogFailed> {
    Ok(shared.conversation.lock().await.push(body).await?.id.clone())
}

/// What goes wrong mid-turn (§8's async errors), each reason with its code:
/// told in an `error` event, or in the answer to a strict steer it failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Log(#[from] LogFailed),
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

impl Failure {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Log(_) => ErrorCode::InternalError,
            Self::Provider(_) => ErrorCode::ProviderError,
        }
    }

    fn to_wire(&self) -> WireError {
        WireError::new(self.code(), self.to_string())
    }
}

/// An `error` event. Every async error of a turn goes out here, provider
/// errors (whose text an HTTP body or a stream's `error` event wrote) above
/// all: made safe to show and bounded first.
async fn report(shared: &Shared, failure: impl Into<Failure>, fatal: bool) {
    let failure = failure.into();
    let code = failure.code();
    let message = into_diagnostic(failure.to_string());
    shared.emit(ServerMessage::Error(ErrorEvent { code, message, fatal: Some(fatal) })).await;
}

/// Model calls, each with the tools it called, until the model answers
/// without calling one (and no steer came meanwhile) or the turn is aborted
/// or fails.
async fn iterate(shared: &Arc<Shared>, cancel: &CancellationToken, total: &mut Usage) -> Ending {
    loop {
        if cancel.is_cancelled() || !unheld(shared, cancel).await {
            return Ending::Aborted;
        }
        let reply = call_model(shared, cancel).await;
        let calls = match take_reply(shared, reply, total).await {
            ControlFlow::Continue(calls) => calls,
            ControlFlow::Break(ending) => return ending,
        };
        let aborted = run_tools(shared, cancel, calls).await;
        if aborted {
            return Ending::Aborted;
        }
        let steered = deliver_steers(shared).await;
        if !steered && !ends_with_tool_result(shared).await {
            return Ending::Done;
        }
        if let Err(problem) = next_iteration(shared, cancel).await {
            report(shared, problem, true).await;
            return Ending::Failed;
        }
    }
}

/// Records the model's reply and tells it (`message_complete`, then the
/// call's `usage`): the tool calls to run next, or the turn's ending when
/// the call ended it (aborted, failed, or the reply could not be recorded).
async fn take_reply(
    shared: &Shared,
    reply: ModelReply,
    total: &mut Usage,
) -> ControlFlow<Ending, Vec<PlannedCall>> {
    let ModelReply { message_id, content, signatures, calls, usage, ending } = reply;
    let (model, _) = shared.active_model();
    let aborted = ending == Some(Ending::Aborted);
    let entry = EntryBody::Assistant {
        content: content.clone(),
        model: model.id.clone(),
        thinking_signatures: signatures,
        usage: usage.clone(),
        aborted,
    };
    let entry_id = match push(shared, entry).await {
        Ok(entry_id) => entry_id,
        Err(problem) => {
            report(shared, problem, true).await;
            return ControlFlow::Break(Ending::Failed);
        }
    };
    shared
        .emit(ServerMessage::MessageComplete(MessageComplete {
            message_id,
            message: Message {
                id: entry_id,
                role: Role::Assistant,
                content,
                aborted,
                streaming: false,
            },
        }))
        .await;
    if let Some(usage) = usage {
        add_usage(total, &usage);
        shared.emit(ServerMessage::Usage(usage)).await;
    }
    match ending {
        Some(ending) => ControlFlow::Break(ending),
        None => ControlFlow::Continue(calls),
    }
}

/// Whether the session log ends with a tool result: the model has results
/// to read, so it is called again.
async fn ends_with_tool_result(shared: &Shared) -> bool {
    let conversation = shared.conversation.lock().await;
    matches!(
        conversation.entries().last().map(|entry| &entry.body),
        Some(EntryBody::ToolResult { .. })
    )
}

/// An iteration boundary, steers delivered: the last round made durable,
/// and the window compacted if the next call would overflow the model's
/// context.
async fn next_iteration(shared: &Arc<Shared>, cancel: &CancellationToken) -> Result<(), LogFailed> {
    shared.conversation.lock().await.flush().await?;
    let (model, _) = shared.active_model();
    let tokens = shared.conversation.lock().await.window_tokens();
    // Compacting calls the model too: not while held.
    if tokens >= model.context_window() && unheld(shared, cancel).await {
        let _ = compact(shared, shared.config.compaction.keep_recent_tokens).await;
        shared.set_status(AgentStatus::Streaming).await;
    }
    Ok(())
}

/// The budget's safe point, before every model call: while the daemon
/// holds the agent (`hold`), the turn waits here with `status: "paused"`
/// and the reason, and goes on (`streaming`) once released. `false` when
/// the turn was aborted while it waited.
async fn unheld(shared: &Shared, cancel: &CancellationToken) -> bool {
    let mut hold = shared.hold.subscribe();
    let Some(reason) = hold.borrow_and_update().clone() else { return true };
    shared.set_status_because(AgentStatus::Paused, Some(reason)).await;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return false,
            // The sender lives as long as `shared`: this never ends.
            _ = hold.changed() => {
                if hold.borrow_and_update().is_none() {
                    break;
                }
            }
        }
    }
    shared.set_status(AgentStatus::Streaming).await;
    true
}

/// Delivers queued steers as user messages. Returns whether there were any.
async fn deliver_steers(shared: &Arc<Shared>) -> bool {
    let steers: Vec<UserInput> = shared.state().steers.drain(..).collect();
    let any = !steers.is_empty();
    for mut steer in steers {
        let strict = steer.strict.take();
        let turn_id = shared.state().turn_id.clone();
        let failed = say(shared, steer, turn_id).await.err().map(Failure::from);
        if let Some(reply) = strict {
            let response = match &failed {
                None => Response::ok(reply.command, serde_json::json!({"status": "injected"})),
                Some(failure) => Response::failed(reply.command, failure.to_wire()),
            };
            shared.respond(reply.id, response).await;
        }
        if let Some(failure) = failed {
            report(shared, failure, true).await;
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::questions::Denied;
    use super::stream::BadArguments;
    use super::*;

    /// The codes and the words a client and a model have always been told.
    #[test]
    fn what_goes_wrong_mid_turn_reads_as_before() {
        let io = || std::io::Error::from(std::io::ErrorKind::StorageFull);
        let shown = io().to_string();
        let log = Failure::from(LogFailed(io())).to_wire();
        assert_eq!(
            (log.code.as_str(), log.message.as_str()),
            ("INTERNAL_ERROR", format!("session log: {shown}").as_str())
        );
        let provider = Failure::from(ProviderError::Scripted("the model is out".into())).to_wire();
        assert_eq!(
            (provider.code.as_str(), provider.message.as_str()),
            ("PROVIDER_ERROR", "the model is out")
        );
        for (denied, said) in [
            (
                Denied::ByRule("plan mode is read-only".into()),
                "Permission denied: plan mode is read-only",
            ),
            (Denied::Headless, "Permission denied: nobody is connected to answer (headless)"),
            (Denied::ByUser, "Permission denied by the user"),
            (Denied::Aborted, "aborted while waiting for permission"),
        ] {
            assert_eq!(denied.to_string(), said);
        }
        assert_eq!(Denied::Log(LogFailed(io())).to_string(), format!("session log: {shown}"));
        assert_eq!(BadArguments::NotObject.to_string(), "the arguments are not a JSON object");
        let json = serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON");
        let said = format!("the arguments are not valid JSON: {json}");
        assert_eq!(BadArguments::NotJson(json).to_string(), said);
        assert_eq!(
            CompactionFailed::EmptySummary.to_string(),
            "compaction produced an empty summary"
        );
    }
}
