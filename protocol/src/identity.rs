//! Who an agent is: its name, and its place in a family of agents (§10.1,
//! §11). Declared once here and written beside the other fields of every
//! message and record that names an agent: `agent.create`, `AgentInfo`, the
//! daemon's manifest and a job's run record.
//!
//! It is read with its own decoder rather than serde's derive. A struct
//! written beside others (`#[serde(flatten)]`) is handed the fields its
//! container did not take, and a derived decoder's error would then no
//! longer say which field was wrong; this one names it.

use std::fmt;

use serde::de::{Error, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// An agent's name and relatives. A child a job launched carries the alias
/// it answers to among its siblings and, when the alias came from its
/// parent's pool, the task's name as `definition_name` and both together as
/// `display_name` ("review · Ada").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentIdentity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

const FIELDS: &[&str] = &["name", "parent_agent_id", "alias", "definition_name", "display_name"];

impl AgentIdentity {
    /// The field named `key`, for a decoder reading an object this identity
    /// is written in; `None` for a key that is not the identity's.
    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<String>> {
        Some(match key {
            "name" => &mut self.name,
            "parent_agent_id" => &mut self.parent_agent_id,
            "alias" => &mut self.alias,
            "definition_name" => &mut self.definition_name,
            "display_name" => &mut self.display_name,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for AgentIdentity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("AgentIdentity", FIELDS, IdentityVisitor)
    }
}

struct IdentityVisitor;

impl<'de> Visitor<'de> for IdentityVisitor {
    type Value = AgentIdentity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an agent's identity")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<AgentIdentity, A::Error> {
        let mut identity = AgentIdentity::default();
        while let Some(key) = fields.next_key::<String>()? {
            let Some(slot) = identity.slot(&key) else {
                fields.next_value::<IgnoredAny>()?;
                continue;
            };
            *slot = fields
                .next_value()
                .map_err(|error| A::Error::custom(format_args!("`{key}`: {error}")))?;
        }
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::envelope::Envelope;
    use crate::message::{ClientMessage, ServerMessage};
    use crate::orchestrator::AgentCreate;
    use crate::types::AgentInfo;

    fn info(extra: serde_json::Value) -> serde_json::Value {
        let mut info = json!({
            "agent_id": "agent-1", "cwd": "/w", "status": "idle",
            "runtime_state": "stopped", "created_at": 1,
        });
        info.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        info
    }

    #[test]
    fn written_beside_the_other_fields_and_read_back() {
        let identity = json!({
            "name": "review", "parent_agent_id": "agent-0", "alias": "Ada",
            "definition_name": "review", "display_name": "review · Ada",
        });
        let agent: AgentInfo = crate::decode::from_value(info(identity.clone())).unwrap();
        assert_eq!(agent.identity.alias.as_deref(), Some("Ada"));
        assert_eq!(agent.identity.parent_agent_id.as_deref(), Some("agent-0"));
        let written = serde_json::to_value(&agent).unwrap();
        assert_eq!(written, info(identity), "the same object, no nesting");
    }

    #[test]
    fn absent_and_null_are_none() {
        let agent: AgentInfo = crate::decode::from_value(info(json!({ "alias": null }))).unwrap();
        assert_eq!(agent.identity, Default::default());
        let written = serde_json::to_value(&agent).unwrap();
        assert_eq!(written, info(json!({})), "nothing written for an empty identity");
    }

    #[test]
    fn a_wrong_field_is_named_in_the_error() {
        let line = r#"{"type":"agent.create","id":"1","cwd":"/w","display_name":7}"#;
        let error = Envelope::<ClientMessage>::from_json(line).unwrap_err().to_string();
        assert!(error.contains("`display_name`"), "{error}");
        assert!(error.contains("invalid type: integer `7`, expected a string"), "{error}");

        let line = r#"{"type":"agent.create","id":"1","cwd":5,"name":"n"}"#;
        let error = Envelope::<ClientMessage>::from_json(line).unwrap_err().to_string();
        assert!(error.contains("cwd: invalid type: integer `5`"), "{error}");
    }

    #[test]
    fn an_agent_info_read_field_by_field_says_which_field_was_wrong() {
        let spawned = |info: serde_json::Value| {
            let line = json!({ "type": "agent_spawned", "agent_id": "agent-1", "info": info });
            Envelope::<ServerMessage>::from_json(&line.to_string()).map(|_| ())
        };
        let error = spawned(info(json!({ "name": [] }))).unwrap_err().to_string();
        assert!(error.contains("info.name: invalid type: sequence"), "{error}");
        let error = spawned(info(json!({ "created_at": "then" }))).unwrap_err().to_string();
        assert!(error.contains("info.created_at: invalid type: string"), "{error}");
        let mut without_cwd = info(json!({}));
        without_cwd.as_object_mut().unwrap().remove("cwd");
        let error = spawned(without_cwd).unwrap_err().to_string();
        assert!(error.contains("missing field `cwd`"), "{error}");
        assert!(spawned(info(json!({ "later": { "a": 1 }, "model": null }))).is_ok());
        assert!(spawned(json!(["agent-1", "x"])).is_err(), "a struct only from an object");
    }

    #[test]
    fn an_agent_create_keeps_its_own_fields() {
        let line = r#"{"type":"agent.create","id":"1","cwd":"/w","name":"n","mode":"plan"}"#;
        let ClientMessage::AgentCreate(create) =
            Envelope::<ClientMessage>::from_json(line).unwrap().message
        else {
            panic!("not an agent.create");
        };
        let create: AgentCreate = create;
        assert_eq!(create.cwd, "/w");
        assert_eq!(create.mode.as_deref(), Some("plan"));
        assert_eq!(create.identity.name.as_deref(), Some("n"));
    }
}
