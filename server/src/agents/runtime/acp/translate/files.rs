//! The agent's file requests (`fs/read_text_file`, `fs/write_text_file`):
//! handed to the bridge to serve (`acp/fs.rs`), except a write whose
//! effect reaches past the file (`.git/`, a shell start-up file, an
//! agent's settings, `~/.ssh`, `$SHARD_HOME`: `crate::agents::sensitive`),
//! which is first Shard's own question, a `permission_request` like any
//! other, open among the questions (`question.rs`) and served only once a
//! person allows it. The agent's own rules decide nothing here: ACP lets
//! an agent write through its client without asking anyone.

use std::path::PathBuf;

use agent_client_protocol_schema::v1::WriteTextFileRequest;
use serde_json::json;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionChoice, PermissionDetail, PermissionRequest,
};

use super::ids::Ids;
use super::question::{CHOICE_ALLOW, CHOICE_DENY};
use crate::agents::effect;
use crate::agents::sensitive::Places;

/// The most of a write's content a question repeats, in its details and
/// its input: far more than a configuration file holds, and bounded so
/// that a question always fits a client's queue (an ACP write may be 8 MiB).
const MAX_SHOWN: usize = 256 * 1024;

/// `text` up to [`MAX_SHOWN`] bytes; a longer one says how much more.
fn shown(text: &str) -> String {
    if text.len() <= MAX_SHOWN {
        return text.to_owned();
    }
    let mut end = MAX_SHOWN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes)", &text[..end], text.len() - end)
}

/// What decides a write of the agent's: where a write is asked about
/// first, and the directory the question shows it beside.
pub(super) struct Files {
    cwd: PathBuf,
    places: Places,
}

/// What a write of the agent's becomes.
pub(super) enum Write {
    /// Served at once, by the bridge.
    Serve(WriteTextFileRequest),
    /// Shard's own question first, `shown`: the write waits for a
    /// person's answer.
    Ask { request: WriteTextFileRequest, shown: Box<PermissionRequest> },
}

impl Files {
    pub(super) fn new(cwd: PathBuf, places: Places) -> Self {
        Self { cwd, places }
    }

    /// `fs/write_text_file`: served at once, or asked about first.
    pub(super) fn write(&self, ids: &mut Ids, request: WriteTextFileRequest) -> Write {
        let Some(why) = self.places.write_needs_asking(&request.path) else {
            return Write::Serve(request);
        };
        let request_id = ids.fresh("perm");
        let path = request.path.display().to_string();
        let content = shown(&request.content);
        let detail = |label: &str, value: String, format| PermissionDetail {
            label: Some(label.to_owned()),
            value,
            format: Some(format),
        };
        let choice = |id: &str, label: &str, key: &str, intent| PermissionChoice {
            id: id.to_owned(),
            label: label.to_owned(),
            description: None,
            accelerator: Some(key.to_owned()),
            intent,
        };
        let shown = PermissionRequest {
            request_id,
            tool_name: "write".to_owned(),
            input: json!({"path": path, "content": content}),
            prompt: format!("Write {path}? It is {why}."),
            options: vec![Decision::Allow, Decision::Deny],
            // Labelled as the bridge labels an ACP call's kind and files,
            // so that the step-up rule judges this write by its effect too.
            details: Some(vec![
                detail(effect::KIND, "edit".to_owned(), DetailFormat::Text),
                detail(effect::PATH, path.clone(), DetailFormat::Path),
                detail(
                    "why",
                    format!("{why}: Shard asks before any write there"),
                    DetailFormat::Text,
                ),
                detail("content", content, DetailFormat::Code),
                detail("working directory", self.cwd.display().to_string(), DetailFormat::Path),
            ]),
            // No "always": nothing is remembered of a yes to such a write.
            choices: Some(vec![
                choice(CHOICE_ALLOW, "Allow once", "y", ChoiceIntent::Allow),
                choice(CHOICE_DENY, "Deny", "n", ChoiceIntent::Deny),
            ]),
        };
        Write::Ask { request, shown: Box::new(shown) }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::*;

    fn write(path: &str, content: &str) -> WriteTextFileRequest {
        serde_json::from_value(json!({"sessionId": "s", "path": path, "content": content}))
            .expect("a write")
    }

    fn files() -> Files {
        Files::new(PathBuf::from("/w"), Places::new(Path::new("/shard"), Some(Path::new("/u"))))
    }

    #[test]
    fn a_write_inside_the_project_is_served_and_one_past_the_file_asked_first() {
        let mut ids = Ids::new("f".to_owned());
        assert!(matches!(files().write(&mut ids, write("/w/src/main.rs", "x")), Write::Serve(_)));
        let Write::Ask { request, shown } = files().write(&mut ids, write("/w/.git/config", "x"))
        else {
            panic!("asked first");
        };
        assert_eq!(request.path, PathBuf::from("/w/.git/config"));
        assert_eq!(shown.request_id, "perm-f-1");
        assert_eq!(shown.options, [Decision::Allow, Decision::Deny]);
        let details = shown.details.expect("details");
        let value = |label: &str| {
            details.iter().find(|detail| detail.label.as_deref() == Some(label)).map(|d| &d.value)
        };
        assert_eq!(value(effect::PATH).map(String::as_str), Some("/w/.git/config"));
        assert_eq!(value("working directory").map(String::as_str), Some("/w"));
        let home = files().write(&mut ids, write("/shard/config.toml", "x"));
        assert!(matches!(home, Write::Ask { .. }), "Shard's own home");
    }

    #[test]
    fn a_long_write_is_shown_cut_saying_how_much_more() {
        let mut ids = Ids::new("f".to_owned());
        let long = "é".repeat(MAX_SHOWN);
        let Write::Ask { request, shown } = files().write(&mut ids, write("/u/.bashrc", &long))
        else {
            panic!("asked first");
        };
        assert_eq!(request.content, long, "the write itself is whole");
        let Some(Value::String(content)) = shown.input.get("content") else { panic!() };
        assert!(content.len() < long.len());
        assert!(content.ends_with(&format!("({} more bytes)", long.len() - MAX_SHOWN)));
    }
}
