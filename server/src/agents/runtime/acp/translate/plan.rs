//! The agent's plan. ACP sends the whole list again with every change
//! (`plan` updates); Shard shows it as one `plan` card per turn whose list
//! is replaced in place as the agent works through it (clients take a
//! `tool_call` with a known id as an update of that call), and records the
//! last list as the card's result when the turn ends, so attach, sync and
//! resume show what the agent last planned.

use agent_client_protocol_schema::v1::{self as acp, PlanEntryStatus};
use serde_json::json;
use shard_platform::session_log::EntryBody;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{ToolCall, ToolResult};
use shard_protocol::types::{ContentBlock, KeyValue, RenderDescriptor, ToolResultContent};

use super::{Out, Translator, event};

const NAME: &str = "plan";

/// The plan of the turn in progress, as the agent last sent it.
pub(super) struct Plan {
    id: String,
    entries: Vec<acp::PlanEntry>,
}

fn state(entry: &acp::PlanEntry) -> &'static str {
    match entry.status {
        PlanEntryStatus::Completed => "done",
        PlanEntryStatus::InProgress => "doing",
        _ => "to do",
    }
}

impl Plan {
    fn args(&self) -> serde_json::Map<String, serde_json::Value> {
        let entries: Vec<_> = self
            .entries
            .iter()
            .map(|entry| json!({"content": entry.content, "status": state(entry)}))
            .collect();
        let mut args = serde_json::Map::new();
        args.insert("entries".to_owned(), entries.into());
        args
    }

    fn render(&self) -> RenderDescriptor {
        let pairs = self
            .entries
            .iter()
            .map(|entry| KeyValue { k: state(entry).to_owned(), v: entry.content.clone() })
            .collect();
        RenderDescriptor::Kv { pairs }
    }

    fn text(&self) -> String {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|entry| format!("[{}] {}", state(entry), entry.content))
            .collect();
        lines.join("\n")
    }
}

impl Translator {
    /// A `plan` update: the card of this turn, shown or brought up to date.
    pub(super) fn plan(&mut self, plan: acp::Plan) -> Vec<Out> {
        if self.turn.is_none() {
            return Vec::new();
        }
        let (id, first) = match self.plan.take() {
            Some(known) => (known.id, false),
            None => (self.fresh(NAME), true),
        };
        let plan = Plan { id: id.clone(), entries: plan.entries };
        let (args, render) = (plan.args(), plan.render());
        self.plan = Some(plan);
        let mut out = Vec::new();
        if first {
            let block = ContentBlock::ToolCall {
                id: id.clone(),
                name: NAME.to_owned(),
                args: args.clone(),
            };
            out.extend(self.complete_message(vec![block]));
        }
        let call = ToolCall {
            tool_call_id: id,
            name: NAME.to_owned(),
            args,
            render: Some(render),
            read_only: Some(true),
        };
        out.push(event(ServerMessage::ToolCall(call)));
        out
    }

    /// At the turn's end: the plan as it last stood, shown and recorded.
    pub(super) fn plan_left_open(&mut self) -> Vec<Out> {
        let Some(plan) = self.plan.take() else { return Vec::new() };
        let content = ToolResultContent::Text { text: plan.text() };
        let result = ToolResult {
            tool_call_id: plan.id.clone(),
            content: content.clone(),
            is_error: false,
            exit_code: None,
            duration_ms: None,
            render: Some(plan.render()),
        };
        vec![
            Out::Log(EntryBody::ToolResult {
                tool_call_id: plan.id,
                tool_name: NAME.to_owned(),
                content,
                is_error: false,
                exit_code: None,
            }),
            event(ServerMessage::ToolResult(result)),
        ]
    }
}
