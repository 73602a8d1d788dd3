//! An ACP agent's form (`elicitation/create` in form mode, ACP's
//! elicitation) asked as Shard's own questions: one `ui_request` per field,
//! in the form's order, of the kind that fits the field: a string with
//! choices is a `select`, a yes-or-no a `confirm`, any other string or a
//! number an `input` (a number that does not read as one is asked again).
//! Every tab and the inbox answer them as any question; the agent gets the
//! whole form's content once its last field is answered. Dismissed, the
//! form is cancelled; a form Shard cannot show (a URL to open, a list of
//! choices to tick) is declined at once.

use std::collections::{BTreeMap, VecDeque};

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationContentValue as Content,
    ElicitationMode, ElicitationPropertySchema as Property, RequestId,
};
use serde_json::Value;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{UiKind, UiRequest, UiResolved, UiResponse, UiValue};
use shard_protocol::message::Response;

use super::{Out, Translator, event, respond};
use crate::agents::runtime::acp::wire;

/// A form being asked, field by field.
pub(super) struct Form {
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
    pub(super) fn cancel(self, request_id: String) -> Vec<Out> {
        vec![answer(self.asked, ElicitationAction::Cancel), resolved(request_id, Value::Null)]
    }
}

impl Translator {
    /// `elicitation/create`: its first field asked, or the form declined
    /// when Shard cannot show it.
    pub(super) fn elicit(
        &mut self,
        asked: RequestId,
        request: CreateElicitationRequest,
    ) -> Vec<Out> {
        let ElicitationMode::Form(form) = request.mode else {
            return vec![answer(asked, ElicitationAction::Decline)];
        };
        let schema = form.requested_schema;
        let fields: Option<VecDeque<Field>> =
            schema.properties.iter().map(|(key, property)| Field::of(key, property)).collect();
        let Some(mut fields) = fields else {
            return vec![answer(asked, ElicitationAction::Decline)];
        };
        let Some(current) = fields.pop_front() else {
            let empty = ElicitationAcceptAction::new().content(BTreeMap::new());
            return vec![answer(asked, ElicitationAction::Accept(empty))];
        };
        let form = Form {
            asked,
            message: request.message,
            current,
            next: fields,
            content: BTreeMap::new(),
        };
        self.ask_field(form, None)
    }

    fn ask_field(&mut self, form: Form, problem: Option<&str>) -> Vec<Out> {
        let request_id = self.fresh("form");
        let question = form.current.question(request_id.clone(), &form.message, problem);
        self.forms.insert(request_id, form);
        vec![event(ServerMessage::UiRequest(question)), self.status_now()]
    }

    /// A `ui_response`: the next field asked, the same one again with why,
    /// or the form's content (or its cancellation) for the agent.
    pub(super) fn form_answered(&mut self, id: Option<String>, answer: UiResponse) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("ui_response"))];
        // Already settled: not an answer any more (§9.5).
        let Some(mut form) = self.forms.remove(&answer.request_id) else { return out };
        let text = match &answer.value {
            None => {
                out.extend(form.cancel(answer.request_id));
                out.push(self.status_now());
                return out;
            }
            Some(UiValue::Text(text)) => text.clone(),
            Some(UiValue::List(list)) => list.join(", "),
        };
        // This question is settled either way: taken, or asked again.
        let told = serde_json::to_value(&answer.value).unwrap_or(Value::Null);
        out.push(resolved(answer.request_id, told));
        match form.current.value(&text) {
            Err(why) => out.extend(self.ask_field(form, Some(why))),
            Ok(value) => {
                form.content.insert(form.current.key.clone(), value);
                match form.next.pop_front() {
                    Some(next) => {
                        form.current = next;
                        out.extend(self.ask_field(form, None));
                    }
                    None => {
                        let accepted = ElicitationAcceptAction::new().content(form.content);
                        out.push(self::answer(form.asked, ElicitationAction::Accept(accepted)));
                        out.push(self.status_now());
                    }
                }
            }
        }
        out
    }

    /// Every form still asked, cancelled (an abort, the turn's end).
    pub(super) fn forms_left_open(&mut self) -> Vec<Out> {
        let open: Vec<(String, Form)> = self.forms.drain().collect();
        open.into_iter().flat_map(|(request_id, form)| form.cancel(request_id)).collect()
    }
}

/// Whether the agent may ask forms of Shard: in form mode only.
pub(super) fn capabilities() -> acp::ElicitationCapabilities {
    acp::ElicitationCapabilities::new().form(acp::ElicitationFormCapabilities::new())
}
