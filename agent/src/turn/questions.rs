//! What a turn asks the user and waits for: the permission gate's
//! `permission_request` and the `ask` tool's `ui_request`, with the status
//! showing the wait and the question withdrawn on abort.

use std::sync::Arc;

use serde_json::Value;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{UiKind, UiRequest, UiValue};
use shard_protocol::types::{AgentStatus, JsonObject};
use tokio_util::sync::CancellationToken;

use super::push;
use crate::permission::{self, Outcome, Verdict};
use crate::session_log::EntryBody;
use crate::shared::{LogFailed, Shared};
use crate::tools::ToolOutput;

/// Why a tool call may not run: the words of its `is_error` result.
#[derive(Debug, thiserror::Error)]
pub(super) enum Denied {
    /// The mode or the gate's own rules refuse it (`why`).
    #[error("Permission denied: {0}")]
    ByRule(String),
    /// Nobody is connected to ask, or everybody left while it waited.
    #[error("Permission denied: nobody is connected to answer (headless)")]
    Headless,
    #[error("Permission denied by the user")]
    ByUser,
    #[error("aborted while waiting for permission")]
    Aborted,
    /// Allowed always, but the grant could not be recorded.
    #[error(transparent)]
    Log(#[from] LogFailed),
}

/// `Ok` to run, or why not.
pub(super) async fn check_permission(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    name: &str,
    args: &JsonObject,
) -> Result<(), Denied> {
    let (mode, headless) = {
        let state = shared.state();
        (state.mode.clone(), state.headless)
    };
    let verdict = permission::decide(name, args, &mode, &shared.cwd, |fingerprint| {
        shared.state().grants.contains(fingerprint)
    });
    match verdict {
        Verdict::Allow => return Ok(()),
        Verdict::Refuse(why) => return Err(Denied::ByRule(why)),
        Verdict::Ask if headless => return Err(Denied::Headless),
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
        Some(Outcome::Deny) => Err(Denied::ByUser),
        // Withdrawn: aborted, or refused because nobody can answer.
        None if cancel.is_cancelled() => Err(Denied::Aborted),
        None => Err(Denied::Headless),
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

/// `ask`: a `ui_request`, waiting for its `ui_response` (except `notify`,
/// which only informs and waits for nothing).
pub(super) async fn ask(
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    args: &JsonObject,
) -> ToolOutput {
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
