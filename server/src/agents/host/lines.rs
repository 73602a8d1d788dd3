//! The agent's lines as the host reads them: a delta's kind without
//! decoding the rest, and a question's text made safe to show.

use shard_protocol::agent::{DeltaKind, PendingKind};
use shard_protocol::{Envelope, ServerMessage};

/// The kind of a `message_delta` line, read without decoding the rest of
/// it; `None` for any other line (or one that is not even that much JSON),
/// which then takes the full decode.
pub(super) fn streamed_delta(line: &str) -> Option<DeltaKind> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        type_name: std::borrow::Cow<'a, str>,
        kind: Option<DeltaKind>,
    }
    let head: Head = serde_json::from_str(line).ok()?;
    if head.type_name == "message_delta" { head.kind } else { None }
}

/// A question as every client gets it: the text a person decides on
/// (a permission's tool name, prompt, details and choices; a UI request's
/// title, message and placeholder) with each control and format character
/// written as a visible escape ([`shard_protocol::display`]), and its line
/// written again when that changed anything. What a person must act on
/// exactly (the call's `input`, an option's value, a prefill) is kept as
/// it is (docs/PROTOCOL-NOTES.md, "Text on the wire").
pub(super) fn display_safe(
    mut request: PendingKind,
    id: Option<String>,
    line: String,
) -> (PendingKind, String) {
    use shard_protocol::display::shown;
    let mut changed = false;
    let mut clean = |text: &mut String| {
        if let std::borrow::Cow::Owned(safe) = shown(text).text {
            *text = safe;
            changed = true;
        }
    };
    match &mut request {
        PendingKind::Permission(permission) => {
            clean(&mut permission.tool_name);
            clean(&mut permission.prompt);
            for detail in permission.details.iter_mut().flatten() {
                detail.label.iter_mut().for_each(&mut clean);
                clean(&mut detail.value);
            }
            for choice in permission.choices.iter_mut().flatten() {
                clean(&mut choice.label);
                choice.description.iter_mut().for_each(&mut clean);
            }
        }
        PendingKind::Ui(ui) => {
            ui.title.iter_mut().for_each(&mut clean);
            ui.message.iter_mut().for_each(&mut clean);
            ui.placeholder.iter_mut().for_each(&mut clean);
        }
    }
    if !changed {
        return (request, line);
    }
    let message = match &request {
        PendingKind::Permission(permission) => ServerMessage::PermissionRequest(permission.clone()),
        PendingKind::Ui(ui) => ServerMessage::UiRequest(ui.clone()),
    };
    let mut envelope = Envelope::new(message);
    envelope.id = id;
    (request, envelope.to_json())
}
