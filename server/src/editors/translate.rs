//! What an editor is told, made from what Shard's agents say: each event of
//! the per-agent protocol as an ACP `session/update`, a conversation's
//! history as the updates that replay it, a question as a
//! `session/request_permission` and its answer back. Pure functions, no
//! I/O, each tested below.
//!
//! Every text an agent, a tool or a model wrote passes through
//! [`shard_protocol::display::shown`] on its way, the dashboard's rule: an
//! editor's terminal or panel never gets a raw escape, a bidi override or a
//! zero-width character that would make it read otherwise than it runs.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    Cost, PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionUpdate, TextContent, ToolCall as AcpToolCall, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
    Usage, UsageUpdate,
};
use serde_json::Value;
use shard_protocol::agent::{
    AgentCommands, ChoiceIntent, Decision, PermissionAnswer, PermissionRequest, UiKind, UiRequest,
    UiValue,
};
use shard_protocol::agent::{DeltaKind, MessageDelta, ToolCall, ToolResult};
use shard_protocol::display::shown;
use shard_protocol::types::{ContentBlock as Block, JsonObject, Message, Role, ToolResultContent};

/// `text` made display-safe.
pub fn safe(text: &str) -> String {
    shown(text).text.into_owned()
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(safe(text)))
}

/// A piece of the agent's reply or of its thinking; nothing for a tool
/// call's arguments as they stream (the call itself follows).
pub fn delta(delta: &MessageDelta) -> Option<SessionUpdate> {
    let text = delta.text_delta.as_deref().filter(|text| !text.is_empty())?;
    match delta.kind {
        DeltaKind::Text => {
            Some(SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text))))
        }
        DeltaKind::Thinking => {
            Some(SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text))))
        }
        _ => None,
    }
}

/// A person's message, sent from another client (a tab, a phone, another
/// editor).
pub fn user_text(text: &str) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(ContentChunk::new(text_block(text)))
}

/// The commands the agent offers (its slash commands), as the editor
/// offers them.
pub fn commands(commands: &AgentCommands) -> SessionUpdate {
    let available = commands
        .commands
        .iter()
        .map(|command| {
            let input = command.hint.as_deref().map(|hint| {
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(safe(hint)))
            });
            AvailableCommand::new(safe(&command.name), safe(&command.description)).input(input)
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available))
}

/// What kind of work a Shard tool does, for the editor's icons.
fn kind(tool: &str) -> ToolKind {
    match tool {
        "read" | "ls" => ToolKind::Read,
        "write" | "edit" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "grep" | "find" => ToolKind::Search,
        "network" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// A one-line title: the tool and what it works on.
fn title(tool: &str, args: &JsonObject) -> String {
    let on = ["command", "path", "pattern", "host"]
        .iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str));
    let title = match on {
        Some(on) => format!("{tool} {on}"),
        None => tool.to_owned(),
    };
    let line = title.lines().next().unwrap_or_default();
    let mut line: String = line.chars().take(200).collect();
    if line.len() < title.len() {
        line.push('…');
    }
    safe(&line)
}

/// An edit's or a write's change, as the editor shows a diff.
fn diff(tool: &str, args: &JsonObject) -> Option<ToolCallContent> {
    let path = args.get("path").and_then(Value::as_str)?;
    let (old, new) = match tool {
        "write" => (None, args.get("content").and_then(Value::as_str)?),
        "edit" => (
            args.get("old_string").or_else(|| args.get("old_text")).and_then(Value::as_str),
            args.get("new_string").or_else(|| args.get("new_text")).and_then(Value::as_str)?,
        ),
        _ => return None,
    };
    let diff =
        agent_client_protocol::v1::schema::Diff::new(path, safe(new)).old_text(old.map(safe));
    Some(ToolCallContent::Diff(diff))
}

/// A tool about to run.
pub fn tool_call(call: &ToolCall) -> SessionUpdate {
    SessionUpdate::ToolCall(started(&call.tool_call_id, &call.name, &call.args))
}

/// An ACP runtime's plan, which Shard shows as a `plan` card whose
/// arguments are its entries (each `content` and `status`: done, doing or
/// to do), as ACP's `plan` update; `None` for any other call.
pub fn plan(call: &ToolCall) -> Option<SessionUpdate> {
    if call.name != "plan" {
        return None;
    }
    let entries = call.args.get("entries")?.as_array()?;
    let entry = |entry: &Value| {
        let status = match entry["status"].as_str()? {
            "done" => PlanEntryStatus::Completed,
            "doing" => PlanEntryStatus::InProgress,
            "to do" => PlanEntryStatus::Pending,
            _ => return None,
        };
        let content = safe(entry["content"].as_str()?);
        Some(PlanEntry::new(content, PlanEntryPriority::Medium, status))
    };
    let entries: Option<Vec<PlanEntry>> = entries.iter().map(entry).collect();
    Some(SessionUpdate::Plan(Plan::new(entries?)))
}

fn started(id: &str, tool: &str, args: &JsonObject) -> AcpToolCall {
    let mut call = AcpToolCall::new(id.to_owned(), title(tool, args))
        .kind(kind(tool))
        .status(ToolCallStatus::InProgress)
        .raw_input(Value::Object(args.clone()));
    if let Some(diff) = diff(tool, args) {
        call = call.content(vec![diff]);
    }
    call
}

fn output(content: &ToolResultContent) -> Option<String> {
    match content {
        ToolResultContent::Text { text } => Some(text.clone()),
        ToolResultContent::Json { value } => Some(value.to_string()),
        ToolResultContent::Error { message } => Some(message.clone()),
        ToolResultContent::Unknown => None,
    }
}

fn finished(id: &str, content: &ToolResultContent, failed: bool) -> ToolCallUpdate {
    let status = if failed { ToolCallStatus::Failed } else { ToolCallStatus::Completed };
    let mut fields = ToolCallUpdateFields::new().status(status);
    if let Some(text) = output(content).filter(|text| !text.is_empty()) {
        fields = fields.content(vec![ToolCallContent::from(text_block(&text))]);
    }
    ToolCallUpdate::new(id.to_owned(), fields)
}

/// A tool that finished.
pub fn tool_result(result: &ToolResult) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(finished(&result.tool_call_id, &result.content, result.is_error))
}

/// The updates that replay a conversation, oldest first: what a person
/// said, what the agent said and thought, each tool call with its result.
pub fn history(messages: &[Message]) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    for message in messages {
        for block in &message.content {
            match (block, &message.role) {
                (Block::Text { text }, Role::User) => updates.push(user_text(text)),
                (Block::Text { text }, _) => updates
                    .push(SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text)))),
                (Block::Thinking { text }, _) => updates
                    .push(SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text)))),
                (Block::ToolCall { id, name, args }, _) => {
                    updates.push(SessionUpdate::ToolCall(started(id, name, args)));
                }
                (Block::ToolResult { tool_call_id, content, is_error }, _) => {
                    let failed = is_error.unwrap_or(false);
                    updates.push(SessionUpdate::ToolCallUpdate(finished(
                        tool_call_id,
                        content,
                        failed,
                    )));
                }
                (Block::Unknown, _) => {}
            }
        }
    }
    updates
}

/// The options of a permission question, each with the id its answer
/// comes back with: a server-defined choice's own id (`choice:<id>`), or
/// the legacy decision's name.
pub fn options(request: &PermissionRequest) -> Vec<PermissionOption> {
    if let Some(choices) = request.choices.as_ref().filter(|choices| !choices.is_empty()) {
        return choices
            .iter()
            .map(|choice| {
                let kind = match choice.intent {
                    ChoiceIntent::Allow => PermissionOptionKind::AllowOnce,
                    ChoiceIntent::Persist => PermissionOptionKind::AllowAlways,
                    ChoiceIntent::Deny | ChoiceIntent::Unknown => PermissionOptionKind::RejectOnce,
                };
                PermissionOption::new(format!("choice:{}", choice.id), safe(&choice.label), kind)
            })
            .collect();
    }
    request
        .options
        .iter()
        .map(|decision| {
            let (id, name, kind) = match decision {
                Decision::Allow => ("allow", "Allow", PermissionOptionKind::AllowOnce),
                Decision::AllowAlways => {
                    ("allow_always", "Always allow", PermissionOptionKind::AllowAlways)
                }
                Decision::Deny => ("deny", "Deny", PermissionOptionKind::RejectOnce),
            };
            PermissionOption::new(id, name, kind)
        })
        .collect()
}

/// The tool call a question is about, as the editor shows it beside the
/// options: the question's own id (the call itself is told when it runs),
/// its prompt as the title, what the agent asked to do as its input.
pub fn asked_call(request: &PermissionRequest) -> ToolCallUpdate {
    let mut lines = vec![request.prompt.clone()];
    for detail in request.details.iter().flatten() {
        match &detail.label {
            Some(label) => lines.push(format!("{label}: {}", detail.value)),
            None => lines.push(detail.value.clone()),
        }
    }
    let fields = ToolCallUpdateFields::new()
        .title(safe(&request.prompt))
        .kind(kind(&request.tool_name))
        .status(ToolCallStatus::Pending)
        .raw_input(request.input.clone())
        .content(vec![ToolCallContent::from(text_block(&lines.join("\n")))]);
    ToolCallUpdate::new(format!("question:{}", request.request_id), fields)
}

/// A question answered (anywhere): its card in the editor shows how, for
/// an editor that cannot take back the question itself.
pub fn question_closed(request: &PermissionRequest, answer: &PermissionAnswer) -> SessionUpdate {
    let (said, allowed) = match answer {
        PermissionAnswer::Decision(Decision::Allow) => ("Allowed".to_owned(), true),
        PermissionAnswer::Decision(Decision::AllowAlways) => ("Always allowed".to_owned(), true),
        PermissionAnswer::Decision(Decision::Deny) => ("Denied".to_owned(), false),
        PermissionAnswer::Choice(id) => {
            let choice = request.choices.iter().flatten().find(|choice| &choice.id == id);
            match choice {
                Some(choice) => (safe(&choice.label), choice.intent != ChoiceIntent::Deny),
                None => (format!("Answered: {}", safe(id)), false),
            }
        }
    };
    let status = if allowed { ToolCallStatus::Completed } else { ToolCallStatus::Failed };
    let fields = ToolCallUpdateFields::new()
        .status(status)
        .content(vec![ToolCallContent::from(text_block(&said))]);
    let id = format!("question:{}", request.request_id);
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields))
}

/// The answer an editor's chosen option stands for; none for an id the
/// question never offered.
pub fn answer(request: &PermissionRequest, option_id: &str) -> Option<PermissionAnswer> {
    let answer = match option_id.strip_prefix("choice:") {
        Some(choice) => PermissionAnswer::Choice(choice.to_owned()),
        None => PermissionAnswer::Decision(match option_id {
            "allow" => Decision::Allow,
            "allow_always" => Decision::AllowAlways,
            "deny" => Decision::Deny,
            _ => return None,
        }),
    };
    request.accepts(&answer).then_some(answer)
}

/// The options a UI question is asked with in the editor, each with the id
/// its answer comes back with: a choice's index (`ui:<n>`) or `yes`/`no`,
/// and `dismiss`. `None` for a question an editor cannot answer with a
/// choice (a text to type, a text to edit): it is shown as a card instead
/// ([`ui_card`]), and answered in a tab or the inbox.
pub fn ui_options(request: &UiRequest) -> Option<Vec<PermissionOption>> {
    let mut options = match request.kind {
        UiKind::Select => {
            let choices = request.options.iter().flatten().enumerate();
            let choose = |(at, choice): (usize, &String)| {
                PermissionOption::new(
                    format!("ui:{at}"),
                    safe(choice),
                    PermissionOptionKind::AllowOnce,
                )
            };
            choices.map(choose).collect()
        }
        UiKind::Confirm => vec![
            PermissionOption::new("yes", "Yes", PermissionOptionKind::AllowOnce),
            PermissionOption::new("no", "No", PermissionOptionKind::RejectOnce),
        ],
        UiKind::Input | UiKind::Editor | UiKind::Notify | UiKind::Unknown => return None,
    };
    options.push(PermissionOption::new("dismiss", "Dismiss", PermissionOptionKind::RejectOnce));
    Some(options)
}

/// What a UI question asks, as the card the editor shows beside it.
pub fn ui_call(request: &UiRequest) -> ToolCallUpdate {
    let fields = ToolCallUpdateFields::new()
        .title(safe(&ui_title(request)))
        .kind(ToolKind::Other)
        .status(ToolCallStatus::Pending)
        .content(ui_content(request, None));
    ToolCallUpdate::new(format!("question:{}", request.request_id), fields)
}

/// A UI question the editor cannot answer (a text to type or edit): a card
/// that shows it and says where it is answered.
pub fn ui_card(request: &UiRequest) -> SessionUpdate {
    let hint = "Answer it in a Shard tab or the inbox: an ACP editor cannot send a typed answer.";
    let call =
        AcpToolCall::new(format!("question:{}", request.request_id), safe(&ui_title(request)))
            .kind(ToolKind::Other)
            .status(ToolCallStatus::Pending)
            .content(ui_content(request, Some(hint)));
    SessionUpdate::ToolCall(call)
}

fn ui_title(request: &UiRequest) -> String {
    let asked = request.title.as_ref().or(request.message.as_ref());
    asked.cloned().unwrap_or_else(|| "The agent asks".to_owned())
}

fn ui_content(request: &UiRequest, hint: Option<&str>) -> Vec<ToolCallContent> {
    let mut lines: Vec<&str> = Vec::new();
    // The message, unless the title already says it.
    let title = ui_title(request);
    if let Some(message) = request.message.as_deref().filter(|message| *message != title) {
        lines.push(message);
    }
    if let Some(prefill) = request.prefill.as_deref().filter(|prefill| !prefill.is_empty()) {
        lines.push(prefill);
    }
    lines.extend(hint);
    match lines.is_empty() {
        true => Vec::new(),
        false => vec![ToolCallContent::from(text_block(&lines.join("\n")))],
    }
}

/// The answer an editor's chosen option stands for (`None` inside:
/// dismissed); none at all for an id the question never offered.
pub fn ui_answer(request: &UiRequest, option_id: &str) -> Option<Option<UiValue>> {
    let text = |text: &str| Some(Some(UiValue::Text(text.to_owned())));
    match (request.kind, option_id) {
        (_, "dismiss") => Some(None),
        (UiKind::Confirm, "yes" | "no") => text(option_id),
        (UiKind::Select, _) => {
            let at: usize = option_id.strip_prefix("ui:")?.parse().ok()?;
            // The option's exact text, as the dashboard answers.
            text(request.options.as_ref()?.get(at)?)
        }
        _ => None,
    }
}

/// A UI question answered (anywhere): its card shows the answer.
pub fn ui_closed(request: &UiRequest, value: &Value) -> SessionUpdate {
    let (said, status) = match value {
        Value::Null => ("Dismissed".to_owned(), ToolCallStatus::Failed),
        Value::String(text) => (format!("Answered: {text}"), ToolCallStatus::Completed),
        other => (format!("Answered: {other}"), ToolCallStatus::Completed),
    };
    let fields = ToolCallUpdateFields::new()
        .status(status)
        .content(vec![ToolCallContent::from(text_block(&said))]);
    let id = format!("question:{}", request.request_id);
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields))
}

/// A turn's tokens, as its `session/prompt` answer carries them.
pub fn turn_usage(usage: &shard_protocol::types::Usage) -> Usage {
    let cached = usage.cache_read.unwrap_or(0) + usage.cache_write.unwrap_or(0);
    Usage::new(usage.input + usage.output + cached, usage.input, usage.output)
        .cached_read_tokens(usage.cache_read)
        .cached_write_tokens(usage.cache_write)
}

/// The context a model call filled, of `size`, and the session's cost.
pub fn usage_update(used: u64, size: u64, spent: Option<f64>) -> SessionUpdate {
    let cost = spent.map(|amount| Cost::new(amount, "USD"));
    SessionUpdate::UsageUpdate(UsageUpdate::new(used, size).cost(cost))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(value: Value) -> PermissionRequest {
        serde_json::from_value(value).expect("a permission request")
    }

    #[test]
    fn text_and_thinking_stream_and_tool_arguments_do_not() {
        let piece = |kind: &str, text: &str| -> MessageDelta {
            serde_json::from_value(json!({"message_id": "m", "block_index": 0, "kind": kind,
                                          "text_delta": text}))
            .expect("a delta")
        };
        let said =
            serde_json::to_value(delta(&piece("text", "hi\u{202e}")).expect("text")).expect("json");
        assert_eq!(said["sessionUpdate"], "agent_message_chunk");
        assert_eq!(said["content"]["text"], "hi\\u{202E}", "a bidi override is shown, not obeyed");
        let thought =
            serde_json::to_value(delta(&piece("thinking", "hm")).expect("thinking")).expect("json");
        assert_eq!(thought["sessionUpdate"], "agent_thought_chunk");
        assert!(delta(&piece("tool_call", "{\"pa")).is_none());
        assert!(delta(&piece("text", "")).is_none());
    }

    #[test]
    fn a_tool_call_is_titled_kinded_and_an_edit_is_a_diff() {
        let call: ToolCall = serde_json::from_value(json!({"tool_call_id": "t1", "name": "edit",
            "args": {"path": "/w/a.rs", "old_string": "x", "new_string": "y\u{1b}[2J"}}))
        .expect("a call");
        let told = serde_json::to_value(tool_call(&call)).expect("json");
        assert_eq!(told["sessionUpdate"], "tool_call");
        assert_eq!(told["toolCallId"], "t1");
        assert_eq!(told["title"], "edit /w/a.rs");
        assert_eq!(told["kind"], "edit");
        assert_eq!(told["status"], "in_progress");
        assert_eq!(told["content"][0]["type"], "diff");
        assert_eq!(told["content"][0]["oldText"], "x");
        assert_eq!(told["content"][0]["newText"], "y\\u{001B}[2J");
        let bash: ToolCall = serde_json::from_value(json!({"tool_call_id": "t2", "name": "bash",
            "args": {"command": "ls -la\nrm -rf x"}}))
        .expect("a call");
        let told = serde_json::to_value(tool_call(&bash)).expect("json");
        assert_eq!(
            (told["title"].as_str(), told["kind"].as_str()),
            (Some("bash ls -la…"), Some("execute"))
        );
        let result: ToolResult = serde_json::from_value(json!({"tool_call_id": "t2",
            "content": {"kind": "text", "text": "done"}, "is_error": true}))
        .expect("a result");
        let told = serde_json::to_value(tool_result(&result)).expect("json");
        assert_eq!(told["sessionUpdate"], "tool_call_update");
        assert_eq!(told["status"], "failed");
        assert_eq!(told["content"][0]["content"]["text"], "done");
    }

    #[test]
    fn a_history_replays_in_order() {
        let messages: Vec<Message> = serde_json::from_value(json!([
            {"id": "1", "role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"id": "2", "role": "assistant", "content": [
                {"type": "thinking", "text": "hm"},
                {"type": "text", "text": "reading"},
                {"type": "tool_call", "id": "c", "name": "read", "args": {"path": "a"}}]},
            {"id": "3", "role": "user", "content": [{"type": "tool_result", "tool_call_id": "c",
                "content": {"kind": "text", "text": "A"}}]},
            {"id": "4", "role": "assistant", "content": [{"type": "text", "text": "done"}]}
        ]))
        .expect("messages");
        let kinds: Vec<String> = history(&messages)
            .iter()
            .map(|update| serde_json::to_value(update).expect("json")["sessionUpdate"].to_string())
            .collect();
        assert_eq!(
            kinds,
            [
                "\"user_message_chunk\"",
                "\"agent_thought_chunk\"",
                "\"agent_message_chunk\"",
                "\"tool_call\"",
                "\"tool_call_update\"",
                "\"agent_message_chunk\""
            ]
        );
    }

    #[test]
    fn commands_are_offered_with_their_hints() {
        let offered: AgentCommands = serde_json::from_value(json!({"commands": [
            {"name": "compact", "description": "Shorten the context"},
            {"name": "review", "description": "Review", "hint": "a branch\u{1b}"}]}))
        .expect("commands");
        let told = serde_json::to_value(commands(&offered)).expect("json");
        assert_eq!(told["sessionUpdate"], "available_commands_update");
        assert_eq!(told["availableCommands"][0]["name"], "compact");
        assert!(told["availableCommands"][0].get("input").is_none());
        assert_eq!(told["availableCommands"][1]["input"]["hint"], "a branch\\u{001B}");
    }

    #[test]
    fn options_stand_for_the_answers_the_question_accepts() {
        let legacy = request(json!({"request_id": "r", "tool_name": "bash", "input": {},
            "prompt": "Run ls", "options": ["allow", "allow_always", "deny"]}));
        let offered: Vec<(String, PermissionOptionKind)> = options(&legacy)
            .into_iter()
            .map(|option| (option.option_id.to_string(), option.kind))
            .collect();
        assert_eq!(
            offered,
            [
                ("allow".to_owned(), PermissionOptionKind::AllowOnce),
                ("allow_always".to_owned(), PermissionOptionKind::AllowAlways),
                ("deny".to_owned(), PermissionOptionKind::RejectOnce)
            ]
        );
        assert_eq!(answer(&legacy, "deny"), Some(PermissionAnswer::Decision(Decision::Deny)));
        assert_eq!(answer(&legacy, "choice:x"), None, "not a choice of this question");
        assert_eq!(answer(&legacy, "maybe"), None);

        let structured = request(json!({"request_id": "r", "tool_name": "bash", "input": {},
            "prompt": "Run ls", "options": ["allow", "deny"],
            "choices": [{"id": "once", "label": "Yes", "intent": "allow"},
                        {"id": "no", "label": "No\u{200b}", "intent": "deny"}]}));
        let offered = options(&structured);
        assert_eq!(offered[0].option_id.to_string(), "choice:once");
        assert_eq!(offered[1].name, "No\\u{200B}");
        assert_eq!(answer(&structured, "choice:no"), Some(PermissionAnswer::Choice("no".into())));
        assert_eq!(answer(&structured, "choice:other"), None);

        // Answered anywhere: the card says how, by the choice's own label.
        let closed = |request: &PermissionRequest, answer: PermissionAnswer| {
            serde_json::to_value(question_closed(request, &answer)).expect("json")
        };
        let denied = closed(&structured, PermissionAnswer::Choice("no".into()));
        assert_eq!(denied["toolCallId"], "question:r");
        assert_eq!(denied["status"], "failed");
        assert_eq!(denied["content"][0]["content"]["text"], "No\\u{200B}");
        let allowed = closed(&legacy, PermissionAnswer::Decision(Decision::Allow));
        assert_eq!(
            (allowed["status"].as_str(), allowed["content"][0]["content"]["text"].as_str()),
            (Some("completed"), Some("Allowed"))
        );
    }

    #[test]
    fn a_ui_choice_is_offered_as_options_and_answered_with_its_exact_text() {
        let ui =
            |value: Value| -> UiRequest { serde_json::from_value(value).expect("a ui request") };
        let select = ui(json!({"request_id": "u1", "kind": "select", "message": "Which?",
                               "options": ["red\u{202e}", "green"]}));
        let options = ui_options(&select).expect("a choice");
        let shown: Vec<(String, String)> = options
            .iter()
            .map(|option| (option.option_id.to_string(), option.name.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("ui:0".to_owned(), "red\\u{202E}".to_owned()),
                ("ui:1".to_owned(), "green".to_owned()),
                ("dismiss".to_owned(), "Dismiss".to_owned())
            ],
            "shown escaped"
        );
        let text = |text: &str| Some(Some(UiValue::Text(text.to_owned())));
        assert_eq!(ui_answer(&select, "ui:0"), text("red\u{202e}"), "answered exactly");
        assert_eq!(ui_answer(&select, "dismiss"), Some(None));
        for never_offered in ["ui:2", "ui:x", "yes", "allow"] {
            assert_eq!(ui_answer(&select, never_offered), None, "{never_offered}");
        }
        let confirm = ui(json!({"request_id": "u2", "kind": "confirm", "message": "Sure?"}));
        assert_eq!(ui_options(&confirm).map(|options| options.len()), Some(3));
        assert_eq!(ui_answer(&confirm, "no"), text("no"));
        assert_eq!(ui_answer(&confirm, "ui:0"), None);
        // A text to type has no options: a card says where to answer it.
        let input = ui(json!({"request_id": "u3", "kind": "input", "title": "Name",
                              "message": "Your name?"}));
        assert!(ui_options(&input).is_none());
        assert_eq!(ui_answer(&input, "ui:0"), None);
        let card = serde_json::to_value(ui_card(&input)).expect("json");
        assert_eq!(card["toolCallId"], "question:u3");
        assert_eq!(card["title"], "Name");
        let text = card["content"][0]["content"]["text"].as_str().expect("text");
        assert!(text.starts_with("Your name?\nAnswer it in a Shard tab"), "{text}");
        let closed = serde_json::to_value(ui_closed(&input, &json!(null))).expect("json");
        assert_eq!(closed["status"], "failed");
        assert_eq!(closed["content"][0]["content"]["text"], "Dismissed");
    }

    #[test]
    fn a_turns_tokens_and_the_context_it_filled() {
        let usage: shard_protocol::types::Usage = serde_json::from_value(
            json!({"input": 100, "output": 20, "cache_read": 300, "cost": 0.01}),
        )
        .expect("usage");
        let told = serde_json::to_value(turn_usage(&usage)).expect("json");
        assert_eq!(
            told,
            json!({"totalTokens": 420, "inputTokens": 100, "outputTokens": 20,
                   "cachedReadTokens": 300})
        );
        let update = serde_json::to_value(usage_update(5_000, 200_000, Some(0.25))).expect("json");
        assert_eq!(update["sessionUpdate"], "usage_update");
        assert_eq!(
            (update["used"].as_u64(), update["size"].as_u64()),
            (Some(5_000), Some(200_000))
        );
        assert_eq!(update["cost"], json!({"amount": 0.25, "currency": "USD"}));
        let unpriced = serde_json::to_value(usage_update(1, 2, None)).expect("json");
        assert!(unpriced.get("cost").is_none(), "{unpriced}");
    }
}
