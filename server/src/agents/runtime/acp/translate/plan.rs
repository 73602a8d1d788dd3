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

use super::ids::Ids;
use super::{Out, Shown, event};

const NAME: &str = "plan";

/// The card of the turn's plan: Shard's id for it, and the plan as the
/// agent last sent it.
struct Card {
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

impl Card {
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

/// The plan's card of the turn in progress, once the agent sent a plan.
#[derive(Default)]
pub(super) struct Plan {
    card: Option<Card>,
}

impl Plan {
    /// A `plan` update in a turn: the card shown or brought up to date.
    /// Outside a turn, nothing: a plan belongs to a turn.
    pub(super) fn now(&mut self, ids: &mut Ids, plan: acp::Plan, in_turn: bool) -> Option<Shown> {
        if !in_turn {
            return None;
        }
        let (id, first) = match self.card.take() {
            Some(known) => (known.id, false),
            None => (ids.fresh(NAME), true),
        };
        let card = Card { id: id.clone(), entries: plan.entries };
        let (args, render) = (card.args(), card.render());
        self.card = Some(card);
        let completes = first.then(|| ContentBlock::ToolCall {
            id: id.clone(),
            name: NAME.to_owned(),
            args: args.clone(),
        });
        let call = ToolCall {
            tool_call_id: id,
            name: NAME.to_owned(),
            args,
            render: Some(render),
            read_only: Some(true),
        };
        Some(Shown { completes, call: event(ServerMessage::ToolCall(call)) })
    }

    /// At the turn's end: the plan as it last stood, shown and recorded.
    pub(super) fn left_open(&mut self) -> Vec<Out> {
        let Some(card) = self.card.take() else { return Vec::new() };
        let content = ToolResultContent::Text { text: card.text() };
        let result = ToolResult {
            tool_call_id: card.id.clone(),
            content: content.clone(),
            is_error: false,
            exit_code: None,
            duration_ms: None,
            render: Some(card.render()),
        };
        vec![
            Out::Log(EntryBody::ToolResult {
                tool_call_id: card.id,
                tool_name: NAME.to_owned(),
                content,
                is_error: false,
                exit_code: None,
            }),
            event(ServerMessage::ToolResult(result)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol_schema::v1::PlanEntryPriority;
    use serde_json::{Value, json};

    use super::*;

    fn plan(entries: &[(&str, PlanEntryStatus)]) -> acp::Plan {
        acp::Plan::new(
            entries
                .iter()
                .map(|(text, status)| {
                    acp::PlanEntry::new(*text, PlanEntryPriority::Medium, status.clone())
                })
                .collect(),
        )
    }

    fn json(out: &Out) -> Value {
        let Out::Host(line) = out else { panic!("not for the host: {out:?}") };
        serde_json::from_str(line).expect("a JSON line")
    }

    #[test]
    fn a_plan_is_one_card_brought_up_to_date_then_recorded_at_the_turns_end() {
        let mut ids = Ids::new("p".to_owned());
        let mut card = Plan::default();
        let first = card.now(&mut ids, plan(&[("read", PlanEntryStatus::Pending)]), true);
        let Some(Shown { completes: Some(ContentBlock::ToolCall { id, .. }), call }) = first else {
            panic!("a new card completes the message");
        };
        assert_eq!(id, "plan-p-1");
        assert_eq!(json(&call)["render"]["pairs"], json!([{"k": "to do", "v": "read"}]));

        let steps = [("read", PlanEntryStatus::Completed), ("write", PlanEntryStatus::InProgress)];
        let again = card.now(&mut ids, plan(&steps), true).expect("shown");
        assert!(again.completes.is_none(), "the same card, updated in place");
        assert_eq!(json(&again.call)["tool_call_id"], "plan-p-1");

        let ended = card.left_open();
        let Out::Log(EntryBody::ToolResult { content, .. }) = &ended[0] else {
            panic!("recorded: {ended:?}")
        };
        let ToolResultContent::Text { text } = content else { panic!("{content:?}") };
        assert_eq!(text, "[done] read\n[doing] write");
        assert_eq!(json(&ended[1])["type"], "tool_result");
        assert!(card.left_open().is_empty(), "told once");
    }

    #[test]
    fn a_plan_outside_a_turn_is_not_shown() {
        let mut ids = Ids::new("p".to_owned());
        let mut card = Plan::default();
        assert!(card.now(&mut ids, plan(&[("x", PlanEntryStatus::Pending)]), false).is_none());
        assert!(card.left_open().is_empty());
        assert_eq!(ids.fresh("next"), "next-p-1", "no id minted");
    }
}
