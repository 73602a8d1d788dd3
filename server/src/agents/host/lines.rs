//! The agent's lines as the host reads them ([`read`]): a delta by its
//! kind without decoding the rest, the start-up handshake, responses,
//! questions with their text made safe to show, and every other event.

use shard_protocol::agent::{DeltaKind, PendingKind, Sync, UiKind};
use shard_protocol::envelope::{MessageSet, Scope};
use shard_protocol::message::Response;
use shard_protocol::{Envelope, ServerMessage};

use super::streaming::Delta;
use crate::agents::error::AgentError;

/// What one line of the agent's is, to the host.
pub(super) enum Line {
    /// A streamed delta, read without decoding the rest of its line, and
    /// the line as it goes out.
    Delta(Delta, String),
    /// A new process's `hello`: its capabilities.
    Hello(Vec<String>),
    /// A new process's `sync`.
    Sync(Box<Sync>),
    /// A new process refused to start: why.
    Refused(AgentError),
    /// The answer to a command sent under `id`.
    Response(Option<String>, Response),
    /// A question, made safe to show, and its line.
    Question(PendingKind, String),
    /// A question closed.
    Resolved(ServerMessage, String),
    /// Any other event, and its line.
    Event(ServerMessage, String),
    /// Nothing for the host.
    Nothing,
}

/// The lines of one read that are lines at all; the rest are logged.
pub(super) fn readable(
    lines: Vec<Result<String, shard_protocol::jsonl::LineError>>,
    agent_id: &str,
) -> Vec<String> {
    let readable = lines.into_iter().filter_map(|line| {
        line.map_err(|problem| tracing::warn!(agent = %agent_id, %problem, "bad line from agent"))
            .ok()
    });
    readable.collect()
}

/// A question the daemon asks itself, as clients get it: made safe to
/// show, and its line.
pub(super) fn asked(request: shard_protocol::agent::PermissionRequest) -> (PendingKind, String) {
    let line = Envelope::new(ServerMessage::PermissionRequest(request.clone())).to_json();
    display_safe(PendingKind::Permission(request), None, line)
}

/// Reads one line of the agent's; `up`: its process said `hello` and
/// `sync` (before, only the handshake counts).
pub(super) fn read(line: String, up: bool, agent_id: &str) -> Line {
    // Deltas are nearly all of an agent's traffic, and all the host needs
    // of one is its kind, message, block and text.
    if let Some(delta) = up.then(|| streamed_delta(&line)).flatten() {
        return Line::Delta(delta, line);
    }
    let envelope = match Envelope::<ServerMessage>::from_json(&line) {
        Ok(envelope) => envelope,
        Err(problem) => {
            tracing::warn!(agent = %agent_id, %problem, "unreadable event from agent");
            return Line::Nothing;
        }
    };
    match (up, envelope.message) {
        (false, ServerMessage::Hello(hello)) => Line::Hello(hello.capabilities),
        (false, ServerMessage::Sync(sync)) => Line::Sync(Box::new(sync)),
        (false, ServerMessage::Error(error)) => {
            let (code, message) = (error.code, error.message);
            tracing::error!(agent = %agent_id, %code, %message, "agent refused to start");
            Line::Refused(AgentError::StartRefused { code, message })
        }
        (false, _) | (true, ServerMessage::Hello(_) | ServerMessage::Sync(_)) => Line::Nothing,
        (true, ServerMessage::Response(response)) => Line::Response(envelope.id, response),
        (true, ServerMessage::PermissionRequest(request)) => {
            let (request, line) = display_safe(PendingKind::Permission(request), envelope.id, line);
            Line::Question(request, line)
        }
        (true, ServerMessage::UiRequest(request)) if request.kind != UiKind::Notify => {
            let (request, line) = display_safe(PendingKind::Ui(request), envelope.id, line);
            Line::Question(request, line)
        }
        (true, message @ (ServerMessage::PermissionResolved(_) | ServerMessage::UiResolved(_))) => {
            Line::Resolved(message, line)
        }
        // What only a daemon says of its own registry (an agent made, a
        // sandbox, a node, a pairing) is never an agent's to say: not its
        // process's, not a node's of its agent.
        (true, message)
            if ServerMessage::scope_of(message.type_name()) == Some(Scope::Registry) =>
        {
            tracing::warn!(agent = %agent_id, kind = message.type_name(), "a registry event from an agent; dropped");
            Line::Nothing
        }
        (true, message) => Line::Event(message, line),
    }
}

/// A `message_delta` line's kind, message, block and text, read without
/// decoding the rest of it; `None` for any other line (or one that is not
/// even that much JSON), which then takes the full decode.
fn streamed_delta(line: &str) -> Option<Delta> {
    use std::borrow::Cow;
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(rename = "type", borrow)]
        type_name: Cow<'a, str>,
        kind: Option<DeltaKind>,
        #[serde(borrow)]
        message_id: Option<Cow<'a, str>>,
        block_index: Option<u32>,
        #[serde(borrow)]
        text_delta: Option<Cow<'a, str>>,
    }
    let head: Head = serde_json::from_str(line).ok()?;
    if head.type_name != "message_delta" {
        return None;
    }
    Some(Delta {
        kind: head.kind?,
        message_id: head.message_id?.into_owned(),
        block_index: head.block_index?,
        text: head.text_delta.map(Cow::into_owned),
    })
}

/// A question as every client gets it: the text a person decides on
/// (a permission's tool name, prompt, details and choices; a UI request's
/// title, message and placeholder) with each control and format character
/// written as a visible escape ([`shard_protocol::display`]), and its line
/// written again when that changed anything. What a person must act on
/// exactly (the call's `input`, an option's value, a prefill) is kept as
/// it is (docs/PROTOCOL-NOTES.md, "Text on the wire").
fn display_safe(
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
