//! An ACP agent's form (`elicitation/create` in form mode, ACP's
//! elicitation) asked as Shard's own questions: one `ui_request` per field,
//! in the form's order, of the kind that fits the field: a string with
//! choices is a `select`, a yes-or-no a `confirm`, any other string or a
//! number an `input` (a number that does not read as one is asked again).
//! Every tab and the inbox answer them as any question; the agent gets the
//! whole form's content once its last field is answered. Dismissed, the
//! form is cancelled; a form Shard cannot show (a URL to open, a list of
//! choices to tick) is declined at once.

use std::collections::{BTreeMap, HashMap, VecDeque};

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationContentValue as Content,
    ElicitationMode, ElicitationPropertySchema as Property, RequestId,
};
use serde_json::Value;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{UiKind, UiRequest, UiResolved, UiResponse, UiValue};

use super::ids::Ids;
use super::{Out, event};
use crate::agents::runtime::acp::wire;

/// A form being asked, field by field.
struct Form {
    /// The agent's request the content goes to.
    asked: RequestId,
    /// The agent's words for the whole form.
    message: String,
    /// The field being asked now.
    current: Field,
    /// The fields still to ask, in order.
    next: VecDeque<Field>,
    content: BTreeMap<String, Content>,
}

struct Field {
    key: String,
    title: String,
    description: Option<String>,
    kind: Kind,
}

enum Kind {
    /// The choices' titles, each with the value the agent gets.
    Choice(Vec<(String, String)>),
    Text {
        default: Option<String>,
    },
    Number {
        integer: bool,
        default: Option<String>,
    },
    Flag,
}

impl Field {
    /// A field of the form as Shard can ask it; `None` for one it cannot.
    fn of(key: &str, property: &Property) -> Option<Self> {
        let (title, description, kind) = match property {
            Property::String(string) => {
                let choices: Vec<(String, String)> = match (&string.one_of, &string.enum_values) {
                    (Some(options), _) => options
                        .iter()
                        .map(|option| (option.title.clone(), option.value.clone()))
                        .collect(),
                    (None, Some(values)) => {
                        values.iter().map(|value| (value.clone(), value.clone())).collect()
                    }
                    (None, None) => Vec::new(),
                };
                let kind = if choices.is_empty() {
                    Kind::Text { default: string.default.clone() }
                } else {
                    Kind::Choice(choices)
                };
                (string.title.clone(), string.description.clone(), kind)
            }
            Property::Number(number) => (
                number.title.clone(),
                number.description.clone(),
                Kind::Number { integer: false, default: number.default.map(|n| n.to_string()) },
            ),
            Property::Integer(integer) => (
                integer.title.clone(),
                integer.description.clone(),
                Kind::Number { integer: true, default: integer.default.map(|n| n.to_string()) },
            ),
            Property::Boolean(flag) => (flag.title.clone(), flag.description.clone(), Kind::Flag),
            _ => return None,
        };
        let title = title.unwrap_or_else(|| key.to_owned());
        Some(Self { key: key.to_owned(), title, description, kind })
    }

    /// The question for it; `problem` says why an answer was not taken.
    fn question(&self, request_id: String, form: &str, problem: Option<&str>) -> UiRequest {
        let mut message = form.to_owned();
        for line in [self.description.as_deref(), problem].into_iter().flatten() {
            message.push_str("\n\n");
            message.push_str(line);
        }
        let (kind, options, prefill) = match &self.kind {
            Kind::Choice(choices) => {
                let titles = choices.iter().map(|(title, _)| title.clone()).collect();
                (UiKind::Select, Some(titles), None)
            }
            Kind::Text { default } | Kind::Number { default, .. } => {
                (UiKind::Input, None, default.clone())
            }
            Kind::Flag => (UiKind::Confirm, None, None),
        };
        UiRequest {
            request_id,
            kind,
            title: Some(self.title.clone()),
            message: Some(message),
            options,
            placeholder: None,
            prefill,
            notify_type: None,
        }
    }

    /// What the agent gets for `answer`, or why it is not one.
    fn value(&self, answer: &str) -> Result<Content, &'static str> {
        match &self.kind {
            Kind::Choice(choices) => choices
                .iter()
                .find(|(title, value)| title == answer || value == answer)
                .map(|(_, value)| Content::String(value.clone()))
                .ok_or("Choose one of the choices."),
            Kind::Text { .. } => Ok(Content::String(answer.to_owned())),
            Kind::Number { integer: true, .. } => {
                answer.trim().parse().map(Content::Integer).map_err(|_| "A whole number, please.")
            }
            Kind::Number { integer: false, .. } => answer
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|number| number.is_finite())
                .map(Content::Number)
                .ok_or("A number, please."),
            Kind::Flag => match answer {
                "yes" => Ok(Content::Boolean(true)),
                "no" => Ok(Content::Boolean(false)),
                _ => Err("Yes or no, please."),
            },
        }
    }
}

/// The answer that tells the agent `action`.
fn answer(asked: RequestId, action: ElicitationAction) -> Out {
    let response =
        ClientResponse::CreateElicitationResponse(CreateElicitationResponse::new(action));
    Out::Agent(wire::answer(asked, Ok(response)))
}

fn resolved(request_id: String, value: Value) -> Out {
    event(ServerMessage::UiResolved(UiResolved { request_id, value }))
}

impl Form {
    /// The answer when the form goes unanswered (an abort, the turn's end).
    fn cancel(self, request_id: String) -> Vec<Out> {
        vec![answer(self.asked, ElicitationAction::Cancel), resolved(request_id, Value::Null)]
    }
}

/// The agent's forms being asked, by the request id of the field asked.
#[derive(Default)]
pub(super) struct Forms {
    open: HashMap<String, Form>,
}

/// What an `elicitation/create` gives.
pub(super) enum Elicited {
    /// Its first field, as Shard's `ui_request`: a question is open.
    Asked(Out),
    /// The agent's answer at once: a form Shard cannot show, declined, or
    /// one with no field, accepted.
    Answered(Out),
}

impl Forms {
    pub(super) fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// `elicitation/create`: its first field asked, or the form declined
    /// when Shard cannot show it.
    pub(super) fn elicit(
        &mut self,
        ids: &mut Ids,
        asked: RequestId,
        request: CreateElicitationRequest,
    ) -> Elicited {
        let ElicitationMode::Form(form) = request.mode else {
            return Elicited::Answered(answer(asked, ElicitationAction::Decline));
        };
        let schema = form.requested_schema;
        let fields: Option<VecDeque<Field>> =
            schema.properties.iter().map(|(key, property)| Field::of(key, property)).collect();
        let Some(mut fields) = fields else {
            return Elicited::Answered(answer(asked, ElicitationAction::Decline));
        };
        let Some(current) = fields.pop_front() else {
            let empty = ElicitationAcceptAction::new().content(BTreeMap::new());
            return Elicited::Answered(answer(asked, ElicitationAction::Accept(empty)));
        };
        let form = Form {
            asked,
            message: request.message,
            current,
            next: fields,
            content: BTreeMap::new(),
        };
        Elicited::Asked(self.ask_field(ids, form, None))
    }

    /// The form's current field, asked as a `ui_request` of its own.
    fn ask_field(&mut self, ids: &mut Ids, form: Form, problem: Option<&str>) -> Out {
        let request_id = ids.fresh("form");
        let question = form.current.question(request_id.clone(), &form.message, problem);
        self.open.insert(request_id, form);
        event(ServerMessage::UiRequest(question))
    }

    /// A `ui_response` to a field asked: the next field asked, the same
    /// one again with why, or the form's content (or its cancellation) for
    /// the agent. `None` when no such field is asked (any more: §9.5).
    pub(super) fn answered(&mut self, ids: &mut Ids, answer: UiResponse) -> Option<Vec<Out>> {
        let mut form = self.open.remove(&answer.request_id)?;
        let text = match &answer.value {
            None => return Some(form.cancel(answer.request_id)),
            Some(UiValue::Text(text)) => text.clone(),
            Some(UiValue::List(list)) => list.join(", "),
        };
        // This question is settled either way: taken, or asked again.
        let told = serde_json::to_value(&answer.value).unwrap_or(Value::Null);
        let mut out = vec![resolved(answer.request_id, told)];
        match form.current.value(&text) {
            Err(why) => out.push(self.ask_field(ids, form, Some(why))),
            Ok(value) => {
                form.content.insert(form.current.key.clone(), value);
                match form.next.pop_front() {
                    Some(next) => {
                        form.current = next;
                        out.push(self.ask_field(ids, form, None));
                    }
                    None => {
                        let accepted = ElicitationAcceptAction::new().content(form.content);
                        out.push(self::answer(form.asked, ElicitationAction::Accept(accepted)));
                    }
                }
            }
        }
        Some(out)
    }

    /// Every form still asked, cancelled (an abort, the turn's end).
    pub(super) fn left_open(&mut self) -> Vec<Out> {
        let open: Vec<(String, Form)> = self.open.drain().collect();
        open.into_iter().flat_map(|(request_id, form)| form.cancel(request_id)).collect()
    }
}

/// Whether the agent may ask forms of Shard: in form mode only.
pub(super) fn capabilities() -> acp::ElicitationCapabilities {
    acp::ElicitationCapabilities::new().form(acp::ElicitationFormCapabilities::new())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{agent_line as agent, host_line as host};
    use super::*;

    fn request(properties: Value) -> CreateElicitationRequest {
        serde_json::from_value(json!({"sessionId": "s", "mode": "form", "message": "Details?",
            "requestedSchema": {"type": "object", "properties": properties}}))
        .expect("a form")
    }

    fn reply(asked: &Out, value: Value) -> UiResponse {
        let request_id = host(asked)["request_id"].as_str().expect("an id").to_owned();
        serde_json::from_value(json!({"request_id": request_id, "value": value})).expect("ok")
    }

    #[test]
    fn each_field_is_asked_in_turn_and_the_agent_gets_the_whole_form() {
        let (mut ids, mut forms) = (Ids::new("f".to_owned()), Forms::default());
        let form = request(json!({"size": {"type": "number"}, "sure": {"type": "boolean"}}));
        let Elicited::Asked(size) = forms.elicit(&mut ids, RequestId::Number(3), form) else {
            panic!("asked");
        };
        assert_eq!(host(&size)["request_id"], "form-f-1");
        assert!(!forms.is_empty());

        let again = forms.answered(&mut ids, reply(&size, json!("lots"))).expect("open");
        assert_eq!(host(&again[0])["type"], "ui_resolved");
        assert!(host(&again[1])["message"].as_str().unwrap().ends_with("A number, please."));
        let sure = forms.answered(&mut ids, reply(&again[1], json!("2.5"))).expect("open");
        assert_eq!(host(&sure[1])["kind"], "confirm");
        let done = forms.answered(&mut ids, reply(&sure[1], json!("no"))).expect("open");
        assert_eq!(
            agent(&done[1]),
            json!({"jsonrpc": "2.0", "id": 3,
                   "result": {"action": "accept", "content": {"size": 2.5, "sure": false}}})
        );
        assert!(forms.is_empty());
        assert!(forms.answered(&mut ids, reply(&sure[1], json!("yes"))).is_none(), "settled");
    }

    #[test]
    fn a_form_shard_cannot_show_is_declined_and_one_left_open_is_cancelled() {
        let (mut ids, mut forms) = (Ids::new("f".to_owned()), Forms::default());
        let ticks = json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}});
        let ticks = request(json!({ "tags": ticks }));
        let Elicited::Answered(declined) = forms.elicit(&mut ids, RequestId::Number(1), ticks)
        else {
            panic!("declined");
        };
        assert_eq!(agent(&declined)["result"], json!({"action": "decline"}));
        let Elicited::Answered(empty) =
            forms.elicit(&mut ids, RequestId::Number(2), request(json!({})))
        else {
            panic!("nothing to ask");
        };
        assert_eq!(agent(&empty)["result"], json!({"action": "accept", "content": {}}));

        let name = request(json!({"name": {"type": "string", "default": "x"}}));
        let Elicited::Asked(asked) = forms.elicit(&mut ids, RequestId::Number(4), name) else {
            panic!("asked");
        };
        assert_eq!(host(&asked)["prefill"], "x");
        let cancelled = forms.left_open();
        assert_eq!(agent(&cancelled[0])["result"], json!({"action": "cancel"}));
        assert_eq!(host(&cancelled[1])["value"], Value::Null);
        assert!(forms.is_empty());
    }
}
