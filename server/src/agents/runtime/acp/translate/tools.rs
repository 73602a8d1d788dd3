//! Tool calls. An ACP tool call comes in pieces (a `tool_call`, then
//! `tool_call_update`s that fill in its input, status and output; some
//! agents ask permission before announcing it at all), so it is gathered
//! here and shown to Shard's clients once its input is known in a turn: as
//! a `tool_call` with Shard's own renders (a command, a diff), then one
//! `tool_result`, each recorded in Shard's log. A permission request about
//! a call shows the call as gathered so far (its [`Subject`]); the question
//! itself is `question.rs`'s.

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{
    self as acp, ToolCallContent, ToolCallStatus, ToolCallUpdateFields, ToolKind,
};
use serde_json::Value;
use shard_platform::session_log::EntryBody;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{ToolCall, ToolResult};
use shard_protocol::types::{ContentBlock, RenderDescriptor, ToolResultContent};

use super::question::Subject;
use super::{Out, Shown, event};

/// A tool call as gathered so far.
#[derive(Default)]
struct Tool {
    title: String,
    kind: Option<ToolKind>,
    input: Option<Value>,
    status: Option<ToolCallStatus>,
    content: Vec<ToolCallContent>,
    /// The files it works on, as the agent says.
    locations: Vec<acp::ToolCallLocation>,
    output: Option<Value>,
    announced: bool,
    finished: bool,
}

impl Tool {
    fn merge(&mut self, fields: ToolCallUpdateFields) {
        if let Some(title) = fields.title {
            self.title = title;
        }
        self.kind = fields.kind.or(self.kind);
        self.status = fields.status.or(self.status);
        if let Some(input) = fields.raw_input.filter(|input| !is_empty(input)) {
            self.input = Some(input);
        }
        if let Some(content) = fields.content {
            // A diff once shown stays (opencode shows its edit only in the
            // permission request, then reports the call without it).
            let diff = |content: &ToolCallContent| matches!(content, ToolCallContent::Diff(_));
            let kept: Vec<ToolCallContent> = if content.iter().any(diff) {
                Vec::new()
            } else {
                self.content.iter().filter(|content| diff(content)).cloned().collect()
            };
            self.content = kept.into_iter().chain(content).collect();
        }
        if let Some(locations) = fields.locations.filter(|locations| !locations.is_empty()) {
            self.locations = locations;
        }
        self.output = fields.raw_output.or(self.output.take());
    }

    /// Its input, with the file it works on as `path` (what clients show
    /// beside a call's name) when the input names none.
    fn args(&self) -> serde_json::Map<String, Value> {
        let mut args = match &self.input {
            Some(Value::Object(args)) => args.clone(),
            Some(other) => serde_json::Map::from_iter([("input".to_owned(), other.clone())]),
            None => serde_json::Map::new(),
        };
        if let Some(location) = self.locations.first().filter(|_| !args.contains_key("path")) {
            let path = location.path.display().to_string();
            let path = match location.line {
                Some(line) => format!("{path}:{line}"),
                None => path,
            };
            args.insert("path".to_owned(), path.into());
        }
        args
    }

    /// Its ACP kind and the files it names, as permission details.
    fn effect_details(&self) -> Vec<shard_protocol::agent::PermissionDetail> {
        let kind = self.kind.and_then(|kind| serde_json::to_value(kind).ok());
        let paths: Vec<std::path::PathBuf> =
            self.locations.iter().map(|location| location.path.clone()).collect();
        crate::agents::effect::details(kind.as_ref().and_then(Value::as_str), &paths)
    }

    fn name(&self) -> String {
        if self.title.trim().is_empty() { "tool".to_owned() } else { self.title.clone() }
    }

    /// The command a call runs, as its input names it; for an execute
    /// call whose input names none, its title (Gemini CLI sends a shell
    /// call's command only there).
    fn command(&self) -> Option<String> {
        let input = self.input.as_ref();
        let named = input.and_then(|input| input.get("command").or_else(|| input.get("cmd")));
        let from_input = match named {
            Some(Value::String(command)) => Some(command.clone()),
            Some(Value::Array(words)) => {
                let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
                Some(words.join(" "))
            }
            _ => None,
        };
        from_input.or_else(|| {
            let titled = self.kind == Some(ToolKind::Execute) && !self.title.trim().is_empty();
            titled.then(|| self.title.clone())
        })
    }

    /// Shard's render: a diff for an edit, the command for a run.
    fn render(&self) -> Option<RenderDescriptor> {
        let diff = self.content.iter().find_map(|content| match content {
            ToolCallContent::Diff(diff) => Some(diff),
            _ => None,
        });
        if let Some(diff) = diff {
            let before = diff.old_text.as_deref().unwrap_or("");
            return Some(RenderDescriptor::Diff {
                path: diff.path.display().to_string(),
                hunks: shard_platform::diff::hunks(before, &diff.new_text),
            });
        }
        let command = self.command().filter(|_| self.kind == Some(ToolKind::Execute))?;
        Some(RenderDescriptor::Command { command, exit_code: None, duration_ms: None })
    }

    /// What the tool gave: its text content, else its raw output.
    fn output_text(&self) -> String {
        let text: Vec<String> = self
            .content
            .iter()
            .filter_map(|content| match content {
                ToolCallContent::Content(content) => match &content.content {
                    acp::ContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                },
                ToolCallContent::Diff(diff) => Some(format!("edited {}", diff.path.display())),
                _ => None,
            })
            .collect();
        if !text.is_empty() {
            return text.join("\n");
        }
        match &self.output {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Object(object)) => {
                let field = ["output", "stdout", "formatted_output", "aggregated_output"]
                    .iter()
                    .find_map(|key| object.get(*key).and_then(Value::as_str));
                field.map_or_else(|| Value::Object(object.clone()).to_string(), str::to_owned)
            }
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

fn is_empty(input: &Value) -> bool {
    match input {
        Value::Null => true,
        Value::Object(object) => object.is_empty(),
        _ => false,
    }
}

/// The tool calls of the turn, by the agent's id.
#[derive(Default)]
pub(super) struct Tools {
    calls: HashMap<String, Tool>,
}

/// What a piece of a call gives: the call shown, the first time its input
/// is known in a turn, then its result, once it has one.
pub(super) struct Progress {
    pub shown: Option<Shown>,
    pub finished: Vec<Out>,
}

impl Tools {
    /// A `tool_call`: the call's first piece.
    pub(super) fn call(&mut self, call: acp::ToolCall, in_turn: bool) -> Progress {
        let fields = ToolCallUpdateFields::new()
            .title(call.title)
            .kind(call.kind)
            .status(call.status)
            .content(call.content)
            .locations(call.locations)
            .raw_input(call.raw_input)
            .raw_output(call.raw_output);
        self.update(acp::ToolCallUpdate::new(call.tool_call_id, fields), in_turn)
    }

    /// A `tool_call_update`: the call filled in.
    pub(super) fn update(&mut self, update: acp::ToolCallUpdate, in_turn: bool) -> Progress {
        let id = update.tool_call_id.0.to_string();
        self.calls.entry(id.clone()).or_default().merge(update.fields);
        let Some(tool) = self.calls.get(&id) else {
            return Progress { shown: None, finished: Vec::new() };
        };
        let started = tool.input.is_some()
            || matches!(
                tool.status,
                Some(
                    ToolCallStatus::InProgress | ToolCallStatus::Completed | ToolCallStatus::Failed
                )
            );
        let done = matches!(tool.status, Some(ToolCallStatus::Completed | ToolCallStatus::Failed));
        let shown = if started { self.announce(&id, in_turn) } else { None };
        let finished = if done { self.finish(&id, None) } else { Vec::new() };
        Progress { shown, finished }
    }

    /// What a permission request says of the call it is about, merged:
    /// the call shown first, whatever the agent said of it so far.
    pub(super) fn asked_about(
        &mut self,
        id: &str,
        fields: ToolCallUpdateFields,
        in_turn: bool,
    ) -> Option<Shown> {
        self.calls.entry(id.to_owned()).or_default().merge(fields);
        self.announce(id, in_turn)
    }

    /// The call `id` as a question about it shows it.
    pub(super) fn subject(&self, id: &str) -> Subject {
        let tool = self.calls.get(id);
        let name = tool.map_or_else(|| "a tool".to_owned(), Tool::name);
        let prompt = match tool.and_then(Tool::command) {
            Some(command) if !name.contains(&command) => format!("{name}: {command}"),
            _ => name.clone(),
        };
        Subject {
            tool_name: name,
            prompt,
            input: tool.and_then(|tool| tool.input.clone()).unwrap_or(Value::Null),
            details: tool
                .map_or_else(|| crate::agents::effect::details(None, &[]), Tool::effect_details),
        }
    }

    /// Shows the call, once, in a turn: the message streaming so far
    /// completes with the call as its last block, then `tool_call`.
    fn announce(&mut self, id: &str, in_turn: bool) -> Option<Shown> {
        let tool = self.calls.get_mut(id)?;
        if tool.announced || !in_turn {
            return None;
        }
        tool.announced = true;
        let (name, args, render) = (tool.name(), tool.args(), tool.render());
        let read_only = tool.kind.map(|kind| {
            matches!(kind, ToolKind::Read | ToolKind::Search | ToolKind::Think | ToolKind::Fetch)
        });
        let block =
            ContentBlock::ToolCall { id: id.to_owned(), name: name.clone(), args: args.clone() };
        let call = ToolCall { tool_call_id: id.to_owned(), name, args, render, read_only };
        Some(Shown { completes: Some(block), call: event(ServerMessage::ToolCall(call)) })
    }

    /// Its result, once: shown and recorded. `cut` says why a call the
    /// agent never finished ends here.
    fn finish(&mut self, id: &str, cut: Option<&str>) -> Vec<Out> {
        let Some(tool) = self.calls.get_mut(id) else { return Vec::new() };
        if tool.finished || !tool.announced {
            return Vec::new();
        }
        tool.finished = true;
        let text = match cut {
            Some(why) => why.to_owned(),
            None => tool.output_text(),
        };
        let is_error = cut.is_some() || tool.status == Some(ToolCallStatus::Failed);
        let content = ToolResultContent::Text { text };
        let render = tool.render().filter(|render| matches!(render, RenderDescriptor::Diff { .. }));
        let name = tool.name();
        let result = ToolResult {
            tool_call_id: id.to_owned(),
            content: content.clone(),
            is_error,
            exit_code: None,
            duration_ms: None,
            render,
        };
        vec![
            Out::Log(EntryBody::ToolResult {
                tool_call_id: id.to_owned(),
                tool_name: name,
                content,
                is_error,
                exit_code: None,
            }),
            event(ServerMessage::ToolResult(result)),
        ]
    }

    /// At the turn's end: every call shown and never finished ends, and the
    /// calls of the turn are forgotten.
    pub(super) fn left_open(&mut self) -> Vec<Out> {
        let open: Vec<String> = self
            .calls
            .iter()
            .filter(|(_, tool)| tool.announced && !tool.finished)
            .map(|(id, _)| id.clone())
            .collect();
        let mut out = Vec::new();
        for id in open {
            out.extend(self.finish(&id, Some("the turn ended before the tool finished")));
        }
        self.calls.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::host_line as host;
    use super::*;

    fn call(fields: Value) -> acp::ToolCall {
        serde_json::from_value(fields).expect("a tool call")
    }

    fn update(fields: Value) -> acp::ToolCallUpdate {
        serde_json::from_value(fields).expect("a tool call update")
    }

    #[test]
    fn a_call_is_shown_once_its_input_is_known_then_its_result_once() {
        let mut tools = Tools::default();
        let pending =
            tools.call(call(json!({"toolCallId": "t1", "title": "Run", "kind": "execute"})), true);
        assert!(pending.shown.is_none() && pending.finished.is_empty(), "nothing known yet");

        let input = update(json!({"toolCallId": "t1", "rawInput": {"command": ["ls", "-a"]}}));
        let started = tools.update(input, true);
        let Some(Shown { completes: Some(ContentBlock::ToolCall { id, name, .. }), call }) =
            started.shown
        else {
            panic!("shown");
        };
        assert_eq!((id.as_str(), name.as_str()), ("t1", "Run"));
        let call = host(&call);
        assert_eq!(call["render"], json!({"kind": "command", "command": "ls -a"}));
        assert_eq!(call["read_only"], false);
        assert!(started.finished.is_empty());

        let output = json!({"toolCallId": "t1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "a b"}}]});
        let done = tools.update(update(output.clone()), true);
        assert!(done.shown.is_none(), "shown once");
        let Out::Log(EntryBody::ToolResult { tool_name, content, is_error, .. }) =
            &done.finished[0]
        else {
            panic!("recorded: {:?}", done.finished);
        };
        assert_eq!((tool_name.as_str(), *is_error), ("Run", false));
        assert_eq!(content, &ToolResultContent::Text { text: "a b".to_owned() });
        assert!(tools.update(update(output), true).finished.is_empty(), "finished once");
    }

    #[test]
    fn outside_a_turn_nothing_is_shown_and_a_call_left_open_ends_with_the_turn() {
        let mut tools = Tools::default();
        let early = call(json!({"toolCallId": "t0", "title": "x", "status": "completed"}));
        let early = tools.call(early, false);
        assert!(early.shown.is_none() && early.finished.is_empty(), "never shown, never ended");

        let edit = json!({"toolCallId": "t2", "title": "Edit", "kind": "edit", "status": "in_progress",
            "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "old", "newText": "new"}]});
        let shown = tools.call(call(edit), true).shown.expect("shown");
        assert_eq!(host(&shown.call)["render"]["kind"], "diff");
        let ended = tools.left_open();
        let result = host(&ended[1]);
        assert_eq!(result["is_error"], true);
        assert_eq!(result["content"]["text"], "the turn ended before the tool finished");
        assert_eq!(result["render"]["kind"], "diff", "an edit's result shows its diff");
        assert!(tools.left_open().is_empty(), "the turn's calls are forgotten");
    }

    #[test]
    fn a_question_about_a_call_shows_it_first_and_names_its_command() {
        let mut tools = Tools::default();
        let fields = update(json!({"toolCallId": "t3", "title": "Shell", "kind": "execute",
                                   "rawInput": {"cmd": "rm -rf build"}}))
        .fields;
        assert!(tools.asked_about("t3", fields.clone(), true).is_some(), "shown");
        assert!(tools.asked_about("t3", fields, true).is_none(), "once");
        let subject = tools.subject("t3");
        assert_eq!(subject.tool_name, "Shell");
        assert_eq!(subject.prompt, "Shell: rm -rf build");
        assert_eq!(subject.input, json!({"cmd": "rm -rf build"}));
        let unknown = tools.subject("t9");
        assert_eq!((unknown.tool_name.as_str(), unknown.input), ("a tool", Value::Null));
    }
}
