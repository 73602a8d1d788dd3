//! ACP's wire, with the field's own types (`agent-client-protocol-schema`):
//! one JSON-RPC 2.0 message per line. Each line from the agent is decoded
//! by its method (never by the shape of its payload), and a response is
//! matched to the request it answers by id, so its result is decoded as
//! that request's. Ids are kept exactly as the agent sent them: `0` is an
//! id like any other, and a string stays a string.

use std::borrow::Cow;
use std::collections::HashMap;

use agent_client_protocol::{JsonRpcMessage as _, JsonRpcResponse as _};
use agent_client_protocol_schema::v1::{
    self as acp, AgentNotification, AgentRequest, AgentResponse, ClientNotification, ClientRequest,
    ClientResponse, JsonRpcMessage, Notification, Request, RequestId, Response,
};
use serde_json::Value;

/// One line from the agent, decoded.
#[derive(Debug)]
pub enum Incoming {
    /// The agent asks something of the client; it waits for the answer.
    Request(RequestId, Box<AgentRequest>),
    /// A request whose method or parameters this client does not know: it
    /// must still be answered, with this error.
    Unanswerable(RequestId, acp::Error),
    Notification(Box<AgentNotification>),
    /// A text chunk of the agent's message or of its thinking
    /// (`agent_message_chunk` / `agent_thought_chunk`): the line agents
    /// send most, read on its own way (see [`text_chunk`]).
    TextChunk {
        text: String,
        thinking: bool,
    },
    /// The answer to one of our requests, and what was asked.
    Response {
        id: i64,
        method: String,
        result: Result<Box<AgentResponse>, acp::Error>,
    },
    /// Something that is none of these, or a notification this client
    /// cannot read: said why, and otherwise ignored.
    Ignored(String),
}

/// The requests we sent and have not had an answer to, by id.
#[derive(Debug, Default)]
pub struct Outstanding {
    next: i64,
    methods: HashMap<i64, String>,
}

impl Outstanding {
    /// Numbers a request and remembers its method; the line to send.
    pub fn request(&mut self, request: ClientRequest) -> (i64, String) {
        let id = self.next;
        self.next += 1;
        let method = request.method().to_owned();
        self.methods.insert(id, method.clone());
        let message =
            Request { id: RequestId::Number(id), method: method.into(), params: Some(request) };
        (id, line(&JsonRpcMessage::wrap(message)))
    }

    pub fn is_waiting(&self, id: i64) -> bool {
        self.methods.contains_key(&id)
    }
}

/// What an error of the agent says: its message, then the reason it gave
/// in the error's `data` (`{"details": "…"}`, as the adapters send it, or a
/// plain string), cleaned and bounded as every diagnostic a client is
/// shown (`shard_protocol::diagnostic`).
pub fn said(error: &acp::Error) -> String {
    let reason = match &error.data {
        Some(Value::String(reason)) => Some(reason.as_str()),
        Some(Value::Object(data)) => {
            data.get("details").or_else(|| data.get("message")).and_then(Value::as_str)
        }
        _ => None,
    };
    let reason = reason.map(str::trim).filter(|reason| !reason.is_empty());
    let text = match reason {
        Some(reason) if reason != error.message => format!("{}: {reason}", error.message),
        _ => error.message.clone(),
    };
    shard_protocol::diagnostic::into_diagnostic(text)
}

/// A notification to the agent (`session/cancel`).
pub fn notification(notification: ClientNotification) -> String {
    let method = notification.method().to_owned();
    line(&JsonRpcMessage::wrap(Notification { method: method.into(), params: Some(notification) }))
}

/// The answer to the agent's request `id`.
pub fn answer(id: RequestId, result: Result<ClientResponse, acp::Error>) -> String {
    line(&JsonRpcMessage::wrap(Response::new(id, result)))
}

fn line(message: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string(message).unwrap_or_default();
    text.push('\n');
    text
}

/// A text chunk notification, as far as it is read: unknown fields are
/// skipped, the text is borrowed from the line unless it has escapes.
#[derive(serde::Deserialize)]
struct ChunkLine<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    /// Whether the line has an `id` at all (then it is no notification).
    #[serde(default, deserialize_with = "present")]
    id: bool,
    #[serde(borrow)]
    params: ChunkParams<'a>,
}

#[derive(serde::Deserialize)]
struct ChunkParams<'a> {
    #[serde(borrow)]
    update: ChunkUpdate<'a>,
}

#[derive(serde::Deserialize)]
struct ChunkUpdate<'a> {
    #[serde(rename = "sessionUpdate", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    content: ChunkContent<'a>,
}

#[derive(serde::Deserialize)]
struct ChunkContent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    <serde::de::IgnoredAny as serde::Deserialize>::deserialize(deserializer).map(|_| true)
}

/// A text chunk, read in one pass over the line. The general way below
/// builds the line's tree, has the schema crate copy its params and read
/// them again: about three times the daemon's work for the line an agent
/// streams thousands of (docs/PERFORMANCE.md, "An agent that is not Shard's
/// own"). Any other line, or a chunk of another kind, takes the general
/// way, which reads it the same.
fn text_chunk(line: &str) -> Option<Incoming> {
    let chunk: ChunkLine<'_> = serde_json::from_str(line).ok()?;
    let thinking = match chunk.params.update.kind.as_ref() {
        "agent_message_chunk" => false,
        "agent_thought_chunk" => true,
        _ => return None,
    };
    let is_text = chunk.params.update.content.kind == "text";
    let text = chunk.params.update.content.text;
    (chunk.method == "session/update" && !chunk.id && is_text)
        .then(|| Incoming::TextChunk { text: text.into_owned(), thinking })
}

/// Decodes one line from the agent.
pub fn decode(line: &str, outstanding: &mut Outstanding) -> Incoming {
    if let Some(chunk) = text_chunk(line) {
        return chunk;
    }
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(line) else {
        return Incoming::Ignored("a line that is not a JSON object".to_owned());
    };
    // A request or a response has the key, whatever its value.
    let id = match object.remove("id") {
        None => None,
        Some(id) => match serde_json::from_value::<RequestId>(id) {
            Ok(id) => Some(id),
            Err(_) => return Incoming::Ignored("an id that is not a JSON-RPC id".to_owned()),
        },
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => {
            match AgentRequest::parse_message(&method, &params) {
                Ok(request) => Incoming::Request(id, Box::new(request)),
                Err(error) if error.code == acp::ErrorCode::MethodNotFound => {
                    Incoming::Unanswerable(id, acp::Error::method_not_found())
                }
                Err(error) => Incoming::Unanswerable(
                    id,
                    acp::Error::invalid_params().data(format!("`{method}`: {}", error.message)),
                ),
            }
        }
        (Some(Value::String(method)), None) => {
            match AgentNotification::parse_message(&method, &params) {
                Ok(notification) => Incoming::Notification(Box::new(notification)),
                Err(error) => Incoming::Ignored(format!("notification `{method}`: {error}")),
            }
        }
        (None, Some(RequestId::Number(id))) => response(id, object, outstanding),
        (None, Some(other)) => Incoming::Ignored(format!("a response to `{other}`, never asked")),
        _ => Incoming::Ignored("neither a request, a notification nor a response".to_owned()),
    }
}

fn response(
    id: i64,
    mut object: serde_json::Map<String, Value>,
    outstanding: &mut Outstanding,
) -> Incoming {
    let Some(method) = outstanding.methods.remove(&id) else {
        return Incoming::Ignored(format!("a response to `{id}`, never asked"));
    };
    let result = match (object.remove("error"), object.remove("result")) {
        (Some(error), _) => Err(serde_json::from_value(error)
            .unwrap_or_else(|_| acp::Error::internal_error().data("an unreadable error"))),
        (None, Some(result)) => AgentResponse::from_json(&method, result)
            .map(Box::new)
            .map_err(|error| acp::Error::invalid_params().data(error.to_string())),
        (None, None) => Err(acp::Error::invalid_request().data("a response with no result")),
    };
    Incoming::Response { id, method, result }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol_schema::ProtocolVersion;
    use agent_client_protocol_schema::v1::{
        InitializeRequest, PermissionOptionKind, SessionUpdate,
    };
    use serde_json::json;

    use super::*;

    #[test]
    fn a_text_chunk_is_read_on_its_own_way_and_anything_else_on_the_general_one() {
        let mut outstanding = Outstanding::default();
        let chunk = |kind: &str, content: Value| {
            json!({"jsonrpc": "2.0", "method": "session/update",
                   "params": {"sessionId": "s", "update": {"sessionUpdate": kind, "content": content,
                              "_meta": {"x": [1, 2]}}}})
            .to_string()
        };
        let text = json!({"type": "text", "text": "say \"hi\"\n\u{e9}", "annotations": null});
        let Incoming::TextChunk { text: said, thinking } =
            decode(&chunk("agent_message_chunk", text.clone()), &mut outstanding)
        else {
            panic!("not a text chunk");
        };
        assert_eq!((said.as_str(), thinking), ("say \"hi\"\n\u{e9}", false));
        let thought = decode(&chunk("agent_thought_chunk", text.clone()), &mut outstanding);
        assert!(matches!(thought, Incoming::TextChunk { thinking: true, .. }), "{thought:?}");

        // The same as the general way reads it.
        let general = AgentNotification::parse_message(
            "session/update",
            &serde_json::from_str::<Value>(&chunk("agent_message_chunk", text.clone())).unwrap()["params"],
        );
        let Ok(AgentNotification::SessionNotification(general)) = general else { panic!() };
        let SessionUpdate::AgentMessageChunk(general) = general.update else { panic!() };
        let acp::ContentBlock::Text(general) = general.content else { panic!() };
        assert_eq!(general.text, said);

        // An image, a user's chunk, a line with an id: the general way.
        let image = json!({"type": "image", "data": "aGk=", "mimeType": "image/png"});
        let image = decode(&chunk("agent_message_chunk", image), &mut outstanding);
        assert!(matches!(image, Incoming::Notification(_)), "{image:?}");
        let user = decode(&chunk("user_message_chunk", text.clone()), &mut outstanding);
        assert!(matches!(user, Incoming::Notification(_)), "{user:?}");
        let mut asking: Value = serde_json::from_str(&chunk("agent_message_chunk", text)).unwrap();
        asking["id"] = json!(null);
        let asking = decode(&asking.to_string(), &mut outstanding);
        assert!(!matches!(asking, Incoming::TextChunk { .. }), "{asking:?}");
    }

    #[test]
    fn a_request_with_id_zero_is_a_request_and_its_id_is_kept() {
        let mut outstanding = Outstanding::default();
        let line = json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
            "params": {"sessionId": "s", "toolCall": {"toolCallId": "c1", "title": "Run ls"},
                       "options": [{"optionId": "once", "name": "Once", "kind": "allow_once"},
                                   {"optionId": "reject", "name": "No", "kind": "reject_once"}]}});
        let Incoming::Request(id, request) = decode(&line.to_string(), &mut outstanding) else {
            panic!("not a request");
        };
        let AgentRequest::RequestPermissionRequest(request) = *request else {
            panic!("not a permission request");
        };
        assert_eq!(id, RequestId::Number(0));
        assert_eq!(request.options[0].kind, PermissionOptionKind::AllowOnce);
        let reply = answer(id, Err(acp::Error::method_not_found()));
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["id"], 0, "{reply}");
        assert_eq!(reply["jsonrpc"], "2.0");
    }

    #[test]
    fn a_response_is_read_as_the_answer_to_what_was_asked() {
        let mut outstanding = Outstanding::default();
        let initialize =
            ClientRequest::InitializeRequest(InitializeRequest::new(ProtocolVersion::V1));
        let (id, sent) = outstanding.request(initialize);
        let sent: Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(sent["method"], "initialize", "{sent}");
        assert_eq!(sent["params"]["protocolVersion"], 1, "{sent}");
        let reply = json!({"jsonrpc": "2.0", "id": id,
            "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}});
        let Incoming::Response { result: Ok(response), .. } =
            decode(&reply.to_string(), &mut outstanding)
        else {
            panic!("not a response");
        };
        let AgentResponse::InitializeResponse(response) = *response else {
            panic!("not an initialize response");
        };
        assert!(response.agent_capabilities.load_session);
        assert!(!outstanding.is_waiting(id), "answered once");
        let again = decode(&reply.to_string(), &mut outstanding);
        assert!(matches!(again, Incoming::Ignored(_)), "{again:?}");
    }

    #[test]
    fn an_error_response_and_a_stream_update_decode() {
        let mut outstanding = Outstanding::default();
        let (id, _) = outstanding
            .request(ClientRequest::InitializeRequest(InitializeRequest::new(ProtocolVersion::V1)));
        let failed =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "no"}});
        let Incoming::Response { result: Err(error), .. } =
            decode(&failed.to_string(), &mut outstanding)
        else {
            panic!("not an error");
        };
        assert_eq!(error.message, "no");
        let call = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
            "update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}}});
        let Incoming::Notification(notification) = decode(&call.to_string(), &mut outstanding)
        else {
            panic!("not a notification");
        };
        let AgentNotification::SessionNotification(update) = *notification else {
            panic!("not an update");
        };
        assert!(matches!(update.update, SessionUpdate::ToolCall(_)));
    }

    #[test]
    fn an_errors_reason_is_said_after_its_message_clean_and_bounded() {
        let details =
            acp::Error::internal_error().data(json!({"details": "needs a \u{1b}[2Jlogin"}));
        assert_eq!(said(&details), "Internal error: needs a login");
        let plain = acp::Error::invalid_params().data("`x` is not a mode");
        assert_eq!(said(&plain), "Invalid params: `x` is not a mode");
        assert_eq!(said(&acp::Error::internal_error()), "Internal error");
        let same = acp::Error::new(-32603, "no").data(json!({"details": "no"}));
        assert_eq!(said(&same), "no");
        let flood = acp::Error::internal_error().data(json!({"details": "x".repeat(1 << 20)}));
        assert!(said(&flood).len() <= shard_protocol::diagnostic::DIAGNOSTIC_LIMIT);
    }

    #[test]
    fn what_cannot_be_read_is_said_and_a_strange_request_still_gets_an_answer() {
        let mut outstanding = Outstanding::default();
        for garbage in ["not json", "[1,2]", "{}", r#"{"id": {"x": 1}}"#] {
            assert!(matches!(decode(garbage, &mut outstanding), Incoming::Ignored(_)), "{garbage}");
        }
        let unknown = json!({"jsonrpc": "2.0", "id": "q", "method": "x/unknown", "params": {}});
        let Incoming::Unanswerable(id, error) = decode(&unknown.to_string(), &mut outstanding)
        else {
            panic!("an unknown request must be answered");
        };
        assert_eq!(id, RequestId::Str("q".to_owned()));
        assert_eq!(error.code, acp::ErrorCode::MethodNotFound);
        let update = json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": "s", "update": {"sessionUpdate": "brand_new_kind"}}});
        assert!(matches!(decode(&update.to_string(), &mut outstanding), Incoming::Ignored(_)));
    }
}
