//! Tool execution: each planned call in order through the permission gate,
//! announced as `tool_call`, run (the turn's own `recall` and `ask`, the
//! subagent tools, or the toolset) and answered with a `tool_result`, so
//! every call has a result even when the turn is aborted.

use std::sync::Arc;
use std::time::Instant;

use shard_protocol::ServerMessage;
use shard_protocol::agent::{ToolCall, ToolResult};
use tokio_util::sync::CancellationToken;

use super::questions::{ask, check_permission};
use super::recall::recall;
use super::stream::PlannedCall;
use super::{push, report};
use crate::session_log::EntryBody;
use crate::shared::Shared;
use crate::tools::{self, ToolContext, ToolOutput};

/// Runs the calls in order. Returns whether the turn was aborted; every call
/// has a result either way.
pub(super) async fn run_tools(
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
            report(shared, problem, true).await;
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
        return (ToolOutput::error(denied.to_string()), None);
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
