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

/// The two mutually exclusive answer fields shared by `permission_response`
/// and `permission_resolved`.
struct RawAnswer {
    choice_id: Option<String>,
    decision: Option<Decision>,
}

impl TryFrom<RawAnswer> for PermissionAnswer {
    type Error = &'static str;

    fn try_from(raw: RawAnswer) -> Result<Self, Self::Error> {
        match (raw.choice_id, raw.decision) {
            (Some(_), Some(_)) => {
                Err("carries both `choice_id` and `decision`; exactly one is allowed")
            }
            (None, None) => Err("needs exactly one of `choice_id` or `decision`"),
            (Some(id), None) if id.is_empty() => Err("`choice_id` must be a non-empty string"),
            (Some(id), None) => Ok(Self::Choice(id)),
            (None, Some(decision)) => Ok(Self::Decision(decision)),
        }
    }
}

impl From<PermissionAnswer> for RawAnswer {
    fn from(answer: PermissionAnswer) -> Self {
        match answer {
            PermissionAnswer::Choice(id) => Self { choice_id: Some(id), decision: None },
            PermissionAnswer::Decision(decision) => {
                Self { choice_id: None, decision: Some(decision) }
            }
        }
    }
}

/// `permission_response`: a client's answer (§9.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionResponse", into = "RawPermissionResponse")]
pub struct PermissionResponse {
    pub request_id: String,
    pub answer: PermissionAnswer,
    pub reason: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RawPermissionResponse {
    request_id: String,
    // Not `#[serde(flatten)]`: flattening would lose the field path in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl TryFrom<RawPermissionResponse> for PermissionResponse {
    type Error = String;

    fn try_from(raw: RawPermissionResponse) -> Result<Self, String> {
        let answer = PermissionAnswer::try_from(RawAnswer {
            choice_id: raw.choice_id,
            decision: raw.decision,
        })
        .map_err(|why| format!("permission_response {why}"))?;
        Ok(Self { request_id: raw.request_id, answer, reason: raw.reason })
    }
}

impl From<PermissionResponse> for RawPermissionResponse {
    fn from(response: PermissionResponse) -> Self {
        let RawAnswer { choice_id, decision } = response.answer.into();
        Self { request_id: response.request_id, choice_id, decision, reason: response.reason }
    }
}

/// `permission_resolved`: broadcast once a request is settled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPermissionResolved", into = "RawPermissionResolved")]
pub struct PermissionResolved {
    pub request_id: String,
    pub answer: PermissionAnswer,
    /// Who answered, e.g. `"headless"` or a client label.
    pub source: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RawPermissionResolved {
    request_id: String,
    // Not `#[serde(flatten)]`: flattening would lose the field path in errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    choice_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl TryFrom<RawPermissionResolved> for PermissionResolved {
    type Error = String;

    fn try_from(raw: RawPermissionResolved) -> Result<Self, String> {
        let answer = PermissionAnswer::try_from(RawAnswer {
            choice_id: raw.choice_id,
            decision: raw.decision,
        })
        .map_err(|why| format!("permission_resolved {why}"))?;
        Ok(Self { request_id: raw.request_id, answer, source: raw.source })
    }
}

impl From<PermissionResolved> for RawPermissionResolved {
    fn from(resolved: PermissionResolved) -> Self {
        let RawAnswer { choice_id, decision } = resolved.answer.into();
        Self { request_id: resolved.request_id, choice_id, decision, source: resolved.source }
    }
}
