//! The agent's file requests (`fs/read_text_file`, `fs/write_text_file`):
//! handed to the bridge to serve (`acp/fs.rs`), except a write whose
//! effect reaches past the file (`.git/`, a shell start-up file, an
//! agent's settings, `~/.ssh`, `$SHARD_HOME`: `crate::agents::sensitive`),
//! which is first Shard's own
//! question, a `permission_request` like any other, and is served only once
//! a person allows it. The agent's own rules decide nothing here: ACP lets
//! an agent write through its client without asking anyone.

use agent_client_protocol_schema::v1::{RequestId, WriteTextFileRequest};
use serde_json::json;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionChoice, PermissionDetail, PermissionRequest,
};

use crate::agents::effect;

use super::question::{About, CHOICE_ALLOW, CHOICE_DENY, Question};
use super::{FsRequest, Out, Translator, event};

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

impl Translator {
    /// `fs/write_text_file`: served at once, or asked about first.
    pub(super) fn write_asked(
        &mut self,
        asked: RequestId,
        request: WriteTextFileRequest,
    ) -> Vec<Out> {
        let Some(why) = self.places.write_needs_asking(&request.path) else {
            return vec![Out::Fs(asked, FsRequest::Write(request))];
        };
        let request_id = self.fresh("perm");
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
        let question = PermissionRequest {
            request_id: request_id.clone(),
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
        self.questions.insert(request_id, Question { asked, about: About::Write(request) });
        vec![event(ServerMessage::PermissionRequest(question)), self.status_now()]
    }
}
