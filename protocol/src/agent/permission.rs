//! §9.5 permission requests and their answers: the structured choices and
//! the legacy decisions, `permission_response` and `permission_resolved`,
//! each carrying exactly one answer form (enforced while decoding).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The legacy semantic permission answers (also the `options` a request offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    /// Always-exact: repeat this exact request, never an inferred scope.
    AllowAlways,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    pub request_id: String,
    pub tool_name: String,
    pub input: Value,
    pub prompt: String,
    pub options: Vec<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<PermissionDetail>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<PermissionChoice>>,
}

impl PermissionRequest {
    /// Whether `answer` is a valid answer to this request. An unknown
    /// `choice_id` is not an answer: the request stays open (§9.5).
    pub fn accepts(&self, answer: &PermissionAnswer) -> bool {
        match answer {
            PermissionAnswer::Decision(decision) => self.options.contains(decision),
            PermissionAnswer::Choice(id) => {
                self.choices.iter().flatten().any(|choice| &choice.id == id)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DetailFormat>,
}

impl PermissionDetail {
    /// A detail named `label`, shown as `format`.
    pub fn labelled(label: &str, value: String, format: DetailFormat) -> Self {
        Self { label: Some(label.to_owned()), value, format: Some(format) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DetailFormat {
    Text,
    Command,
    Path,
    Code,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionChoice")]
pub struct PermissionChoice {
    pub id: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<String>,
    pub intent: ChoiceIntent,
}

impl PermissionChoice {
    /// A choice with its keyboard accelerator and no description.
    pub fn keyed(id: &str, label: String, key: &str, intent: ChoiceIntent) -> Self {
        Self {
            id: id.to_owned(),
            label,
            description: None,
            accelerator: Some(key.to_owned()),
            intent,
        }
    }
}

#[derive(Deserialize)]
struct RawPermissionChoice {
    id: String,
    label: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    accelerator: Option<String>,
    intent: ChoiceIntent,
}

impl TryFrom<RawPermissionChoice> for PermissionChoice {
    type Error = &'static str;

    fn try_from(raw: RawPermissionChoice) -> Result<Self, Self::Error> {
        if raw.id.is_empty() {
            return Err("a choice's `id` must be a non-empty string");
        }
        let RawPermissionChoice { id, label, description, accelerator, intent } = raw;
        Ok(Self { id, label, description, accelerator, intent })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceIntent {
    Allow,
    Persist,
    Deny,
    #[serde(other)]
    Unknown,
}

/// One answer to a permission request: the structured opaque choice, or the
/// legacy semantic decision. The wire form carries exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PermissionAnswer {
    Choice(String),
    Decision(Decision),
}

/// The wire form of `permission_response` and of `permission_resolved`:
/// one decoder for both, so that the two cannot drift. Each carries exactly
/// one of `choice_id` and `decision`; `reason` belongs to the response and
/// `source` to the resolution, and each ignores the other's, as it ignores
/// any field it does not know.
#[derive(Serialize, Deserialize)]
struct RawAnswered {
    request_id: String,
    // Not `#[serde(flatten)]`: flattening would lose the field path in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

/// Why a message's answer fields do not make one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadAnswer {
    /// The message they came in.
    message: &'static str,
    why: &'static str,
}

impl std::fmt::Display for BadAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.message, self.why)
    }
}

impl RawAnswered {
    /// The one answer its fields carry, in `message`.
    fn answer(&mut self, message: &'static str) -> Result<PermissionAnswer, BadAnswer> {
        let bad = |why| BadAnswer { message, why };
        match (self.choice_id.take(), self.decision.take()) {
            (Some(_), Some(_)) => {
                Err(bad("carries both `choice_id` and `decision`; exactly one is allowed"))
            }
            (None, None) => Err(bad("needs exactly one of `choice_id` or `decision`")),
            (Some(id), None) if id.is_empty() => Err(bad("`choice_id` must be a non-empty string")),
            (Some(id), None) => Ok(PermissionAnswer::Choice(id)),
            (None, Some(decision)) => Ok(PermissionAnswer::Decision(decision)),
        }
    }

    fn of(request_id: String, answer: PermissionAnswer) -> Self {
        let (choice_id, decision) = match answer {
            PermissionAnswer::Choice(id) => (Some(id), None),
            PermissionAnswer::Decision(decision) => (None, Some(decision)),
        };
        Self { request_id, choice_id, decision, reason: None, source: None }
    }
}

/// `permission_response`: a client's answer (§9.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawAnswered", into = "RawAnswered")]
pub struct PermissionResponse {
    pub request_id: String,
    pub answer: PermissionAnswer,
    pub reason: Option<String>,
}

impl TryFrom<RawAnswered> for PermissionResponse {
    type Error = BadAnswer;

    fn try_from(mut raw: RawAnswered) -> Result<Self, BadAnswer> {
        let answer = raw.answer("permission_response")?;
        Ok(Self { request_id: raw.request_id, answer, reason: raw.reason })
    }
}

impl From<PermissionResponse> for RawAnswered {
    fn from(response: PermissionResponse) -> Self {
        Self { reason: response.reason, ..Self::of(response.request_id, response.answer) }
    }
}

/// `permission_resolved`: broadcast once a request is settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawAnswered", into = "RawAnswered")]
pub struct PermissionResolved {
    pub request_id: String,
    pub answer: PermissionAnswer,
    /// Who answered, e.g. `"headless"` or a client label.
    pub source: Option<String>,
}

impl TryFrom<RawAnswered> for PermissionResolved {
    type Error = BadAnswer;

    fn try_from(mut raw: RawAnswered) -> Result<Self, BadAnswer> {
        let answer = raw.answer("permission_resolved")?;
        Ok(Self { request_id: raw.request_id, answer, source: raw.source })
    }
}

impl From<PermissionResolved> for RawAnswered {
    fn from(resolved: PermissionResolved) -> Self {
        Self { source: resolved.source, ..Self::of(resolved.request_id, resolved.answer) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal<T: serde::de::DeserializeOwned + std::fmt::Debug>(json: &str) -> String {
        serde_json::from_str::<T>(json).expect_err("refused").to_string()
    }

    #[test]
    fn an_answer_and_its_end_read_their_one_answer_alike_and_say_which_was_wrong() {
        let both = r#"{"request_id":"r","choice_id":"a","decision":"allow"}"#;
        assert!(refusal::<PermissionResponse>(both).starts_with(
            "permission_response carries both `choice_id` and `decision`; exactly one is allowed"
        ));
        assert!(
            refusal::<PermissionResolved>(both).starts_with("permission_resolved carries both")
        );
        let neither = r#"{"request_id":"r"}"#;
        assert!(
            refusal::<PermissionResolved>(neither)
                .starts_with("permission_resolved needs exactly one of `choice_id` or `decision`")
        );
        let empty = r#"{"request_id":"r","choice_id":""}"#;
        assert!(refusal::<PermissionResponse>(empty).contains("must be a non-empty string"));
    }

    #[test]
    fn each_keeps_its_own_field_and_writes_nothing_of_the_others() {
        let response: PermissionResponse = serde_json::from_str(
            r#"{"request_id":"r","decision":"deny","reason":"no","source":"web"}"#,
        )
        .expect("a response");
        assert_eq!(response.reason.as_deref(), Some("no"));
        assert_eq!(
            serde_json::to_value(&response).expect("json"),
            serde_json::json!({"request_id": "r", "decision": "deny", "reason": "no"})
        );
        let resolved: PermissionResolved = serde_json::from_str(
            r#"{"request_id":"r","choice_id":"option-1","reason":"no","source":"web"}"#,
        )
        .expect("a resolution");
        assert_eq!(resolved.answer, PermissionAnswer::Choice("option-1".to_owned()));
        assert_eq!(
            serde_json::to_value(&resolved).expect("json"),
            serde_json::json!({"request_id": "r", "choice_id": "option-1", "source": "web"})
        );
    }
}
