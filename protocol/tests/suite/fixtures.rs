//! Keeps the types and PROTOCOL.md from drifting: hand-written examples of
//! every message of §9–§11 are decoded and round-tripped, and the lists below,
//! copied from the spec by hand, must each have a fixture.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shard_protocol::agent::{
    AgentCommands, CompactResult, ForkResult, ListModelsResult, ListModesResult,
    ListReasoningLevelsResult, ReasoningLevelChange, RecallSteerResult, SessionListResult,
    SetModeResult, SetModelResult,
};
use shard_protocol::approvals::ApprovalListResult;
use shard_protocol::budget::{BudgetListResult, BudgetSetResult};
use shard_protocol::fleet::FleetUpdated;
use shard_protocol::orchestrator::{
    AgentCreateResult, AgentsResult, AttachResult, DisconnectResult, EnrollResult, RevokeResult,
    RuntimeListResult, SessionActivateResult, SessionsResult, TerminateResult,
};
use shard_protocol::sandbox::AgentSandbox;
use shard_protocol::search::SearchResults;
use shard_protocol::subagent::{
    SubagentCreateResult, SubagentRelaunchResult, SubagentStatusResult, SubagentSteerResult,
    SubagentStopResult, SubagentWaitResult,
};
use shard_protocol::usage::{UsageAgentResult, UsageGlobalResult, UsageSessionResult};
use shard_protocol::workspace::{
    ConfirmationRequired, WorkspaceActed, WorkspaceLaunchResult, WorkspaceListResult,
    WorkspacePreview, WorkspaceResult,
};
use shard_protocol::{ClientMessage, Envelope, ServerMessage};

/// Every client → server `type` PROTOCOL.md names (§9.2, §9.5, §10.1,
/// §10.1a, §10.3).
const SPEC_CLIENT_TYPES: &[&str] = &[
    "prompt",
    "steer",
    "abort",
    "set_mode",
    "list_modes",
    "list_models",
    "set_model",
    "list_reasoning_levels",
    "set_reasoning_level",
    "session_op",
    "permission_response",
    "ui_response",
    "agent.list",
    "agent.create",
    "agent.attach",
    "agent.detach",
    "agent.terminate",
    "agent.kill",
    "agent.status",
    "daemon.shutdown",
    "workspace.create",
    "workspace.attach",
    "workspace.list",
    "workspace.status",
    "workspace.retire",
    "subagent.create",
    "subagent.wait",
    "subagent.steer",
    "subagent.relaunch",
    "subagent.status",
    "subagent.stop",
];

/// Shard's own additions to the client set, pinned in docs/PROTOCOL-NOTES.md.
const EXTENSION_CLIENT_TYPES: &[&str] = &[
    "daemon.enroll",
    "daemon.sessions",
    "daemon.stats",
    "daemon.revoke_session",
    "daemon.disconnect",
    "usage.global",
    "usage.agent",
    "usage.session",
    "approval.list",
    "session.activate",
    "recall_steer",
    "runtime.list",
    "list_commands",
    "workspace.commit",
    "workspace.merge",
    "workspace.push",
    "search.query",
    "client.presence",
    "sandbox.revoke",
    "fleet.watch",
    "budget.list",
    "budget.set",
    "hold",
    "node.list",
];

/// Shard's own additions to the server set, pinned in docs/PROTOCOL-NOTES.md.
const EXTENSION_SERVER_TYPES: &[&str] = &[
    "agent_sandbox",
    "agent_usage",
    "budget_updated",
    "commands_changed",
    "fleet_updated",
    "node_changed",
    "pair_used",
    "user_message",
    "workspace_updated",
];

/// Every server → client `type` PROTOCOL.md names (§9.1, §9.3, §9.4, §9.5,
/// §10.2, §10.3).
const SPEC_SERVER_TYPES: &[&str] = &[
    "hello",
    "sync",
    "status",
    "response",
    "turn_start",
    "message_delta",
    "message_complete",
    "tool_call",
    "tool_result",
    "turn_end",
    "usage",
    "compaction",
    "error",
    "permission_request",
    "permission_resolved",
    "ui_request",
    "ui_resolved",
    "model_changed",
    "mode_changed",
    "reasoning_level_changed",
    "workspace_created",
    "workspace_attached",
    "workspace_retired",
    "workspace_conflict",
    "agent_spawned",
    "agent_exited",
    "agent_status_changed",
    "agent_activity",
    "subagent_run_changed",
];

/// Every command whose response `data` the spec gives a shape for.
const SPEC_RESULTS: &[&str] = &[
    "set_mode",
    "list_modes",
    "list_models",
    "set_model",
    "list_reasoning_levels",
    "set_reasoning_level",
    "session_op.list",
    "session_op.compact",
    "session_op.fork",
    "agent.list",
    "agent.create",
    "agent.attach",
    "agent.terminate",
    "agent.status",
    "workspace.create",
    "workspace.list",
    "workspace.status",
    "workspace.retire.confirmation_required",
    "subagent.create",
    "subagent.wait",
    "subagent.steer",
    "subagent.relaunch",
    "subagent.status",
    "subagent.stop",
];

/// The variants of the §11 / §11.2 shared types, as `key.tag=value` where
/// `key` is the field that holds the object and `tag` its discriminant.
/// Each must occur somewhere in the fixtures.
const SPEC_SHARED_VARIANTS: &[&str] = &[
    // ContentBlock
    "content.type=text",
    "content.type=tool_call",
    "content.type=tool_result",
    "content.type=thinking",
    // ToolResultContent
    "content.kind=text",
    "content.kind=json",
    "content.kind=error",
    // RenderDescriptor
    "render.kind=text",
    "render.kind=kv",
    "render.kind=diff",
    "render.kind=tree",
    "render.kind=progress",
    "render.kind=status",
    "render.kind=command",
    "render.kind=path_list",
    "render.kind=code",
    // Image
    "images.type=image",
    // permission details
    "details.format=text",
    "details.format=command",
    "details.format=path",
    "details.format=code",
    // permission choices
    "choices.intent=allow",
    "choices.intent=persist",
    "choices.intent=deny",
    // UI kinds
    "root.kind=select",
    "root.kind=confirm",
    "root.kind=input",
    "root.kind=editor",
    "root.kind=notify",
    // pending requests in sync
    "pending_requests.type=permission_request",
    "pending_requests.type=ui_request",
];

/// Every AgentStatus, RuntimeState, JobState and RunState value (§9.1, §11.2,
/// CONTRACT.md), each of which must occur as a value in the fixtures.
const SPEC_STATES: &[(&str, &str)] = &[
    ("status", "idle"),
    ("status", "streaming"),
    ("status", "waiting_for_permission"),
    ("status", "waiting_for_ui"),
    ("status", "compacting"),
    ("status", "error"),
    ("runtime_state", "starting"),
    ("runtime_state", "running"),
    ("runtime_state", "stopped"),
    ("runtime_state", "failed"),
    ("state", "queued"),
    ("state", "running"),
    ("state", "completed"),
    ("state", "failed"),
    ("state", "cancelled"),
    ("state", "starting"),
    ("state", "active"),
    ("state", "timed_out"),
    ("state", "interrupted"),
    ("strategy", "single"),
    ("strategy", "parallel"),
    ("strategy", "chain"),
];

fn load(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
    match serde_json::from_str(&text) {
        Ok(Value::Array(items)) => items,
        other => panic!("{path} must hold a JSON array: {other:?}"),
    }
}

fn type_of(value: &Value) -> &str {
    value["type"].as_str().unwrap_or_else(|| panic!("fixture without a type: {value}"))
}

/// Decodes, re-encodes and compares as JSON values, then decodes the encoded
/// text again and compares as Rust values.
fn round_trip_message<M>(fixture: &Value)
where
    M: shard_protocol::envelope::MessageSet + Serialize + PartialEq + std::fmt::Debug,
{
    let decoded = Envelope::<M>::from_value(fixture.clone())
        .unwrap_or_else(|error| panic!("{fixture}\ndoes not decode: {error}"));
    assert_eq!(decoded.message.type_name(), type_of(fixture));
    let encoded = decoded.to_json();
    let reparsed: Value = serde_json::from_str(&encoded).expect("encoder writes JSON");
    assert_eq!(&reparsed, fixture, "round trip changed the message");
    let again = Envelope::<M>::from_json(&encoded).expect("encoded form decodes");
    assert_eq!(again, decoded);
}

fn round_trip_data<T: DeserializeOwned + Serialize>(name: &str, data: &Value) {
    let typed: T = serde_json::from_value(data.clone())
        .unwrap_or_else(|error| panic!("result {name}: {data}\ndoes not decode: {error}"));
    let encoded = serde_json::to_value(&typed).expect("results encode");
    assert_eq!(&encoded, data, "result {name}: round trip changed the data");
}

#[test]
fn every_client_fixture_decodes_and_round_trips() {
    for fixture in load("client.json") {
        round_trip_message::<ClientMessage>(&fixture);
    }
}

#[test]
fn every_server_fixture_decodes_and_round_trips() {
    for fixture in load("server.json") {
        round_trip_message::<ServerMessage>(&fixture);
    }
}

#[test]
fn every_result_fixture_decodes_and_round_trips() {
    for fixture in load("results.json") {
        let name = fixture["result"].as_str().expect("result fixtures name their command");
        let data = &fixture["data"];
        match name {
            "set_mode" => round_trip_data::<SetModeResult>(name, data),
            "list_modes" => round_trip_data::<ListModesResult>(name, data),
            "list_models" => round_trip_data::<ListModelsResult>(name, data),
            "set_model" => round_trip_data::<SetModelResult>(name, data),
            "list_reasoning_levels" => round_trip_data::<ListReasoningLevelsResult>(name, data),
            "set_reasoning_level" => round_trip_data::<ReasoningLevelChange>(name, data),
            "session_op.list" => round_trip_data::<SessionListResult>(name, data),
            "session_op.compact" => round_trip_data::<CompactResult>(name, data),
            "session_op.fork" => round_trip_data::<ForkResult>(name, data),
            "agent.list" | "agent.status" => round_trip_data::<AgentsResult>(name, data),
            "agent.create" => round_trip_data::<AgentCreateResult>(name, data),
            "agent.attach" => round_trip_data::<AttachResult>(name, data),
            "agent.terminate" => round_trip_data::<TerminateResult>(name, data),
            "daemon.enroll" => round_trip_data::<EnrollResult>(name, data),
            "recall_steer" => round_trip_data::<RecallSteerResult>(name, data),
            "daemon.sessions" => round_trip_data::<SessionsResult>(name, data),
            "daemon.revoke_session" => round_trip_data::<RevokeResult>(name, data),
            "daemon.disconnect" => round_trip_data::<DisconnectResult>(name, data),
            "workspace.create" => round_trip_data::<WorkspaceLaunchResult>(name, data),
            "workspace.list" => round_trip_data::<WorkspaceListResult>(name, data),
            "workspace.status" => round_trip_data::<WorkspaceResult>(name, data),
            "workspace.commit.preview" | "workspace.merge.preview" | "workspace.push.preview" => {
                round_trip_data::<WorkspacePreview>(name, data)
            }
            "workspace.commit" | "workspace.merge" | "workspace.push" => {
                round_trip_data::<WorkspaceActed>(name, data)
            }
            "workspace.retire.confirmation_required" => {
                round_trip_data::<ConfirmationRequired>(name, data)
            }
            "subagent.create" => round_trip_data::<SubagentCreateResult>(name, data),
            "subagent.wait" => round_trip_data::<SubagentWaitResult>(name, data),
            "subagent.steer" => round_trip_data::<SubagentSteerResult>(name, data),
            "subagent.relaunch" => round_trip_data::<SubagentRelaunchResult>(name, data),
            "subagent.status" => round_trip_data::<SubagentStatusResult>(name, data),
            "subagent.stop" => round_trip_data::<SubagentStopResult>(name, data),
            "usage.global" => round_trip_data::<UsageGlobalResult>(name, data),
            "usage.agent" => round_trip_data::<UsageAgentResult>(name, data),
            "usage.session" => round_trip_data::<UsageSessionResult>(name, data),
            "approval.list" => round_trip_data::<ApprovalListResult>(name, data),
            "session.activate" => round_trip_data::<SessionActivateResult>(name, data),
            "runtime.list" => round_trip_data::<RuntimeListResult>(name, data),
            "list_commands" => round_trip_data::<AgentCommands>(name, data),
            "search.query" => round_trip_data::<SearchResults>(name, data),
            "sandbox.revoke" => round_trip_data::<AgentSandbox>(name, data),
            "fleet.watch" => round_trip_data::<FleetUpdated>(name, data),
            "budget.list" => round_trip_data::<BudgetListResult>(name, data),
            "budget.set" => round_trip_data::<BudgetSetResult>(name, data),
            "node.list" => round_trip_data::<shard_protocol::node::NodeList>(name, data),
            other => panic!("result fixture `{other}` has no type to decode into"),
        }
    }
}

fn missing<'a>(wanted: &[&'a str], present: &BTreeSet<String>) -> Vec<&'a str> {
    wanted.iter().copied().filter(|name| !present.contains(*name)).collect()
}

#[test]
fn every_message_type_of_the_spec_has_a_fixture() {
    let client: BTreeSet<String> =
        load("client.json").iter().map(|value| type_of(value).to_owned()).collect();
    let server: BTreeSet<String> =
        load("server.json").iter().map(|value| type_of(value).to_owned()).collect();
    let results: BTreeSet<String> = load("results.json")
        .iter()
        .filter_map(|value| value["result"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        missing(SPEC_CLIENT_TYPES, &client),
        Vec::<&str>::new(),
        "client types without a fixture"
    );
    assert_eq!(
        missing(SPEC_SERVER_TYPES, &server),
        Vec::<&str>::new(),
        "server types without a fixture"
    );
    assert_eq!(missing(SPEC_RESULTS, &results), Vec::<&str>::new(), "results without a fixture");
}

#[test]
fn the_code_knows_exactly_the_spec_types() {
    let spec: BTreeSet<&str> =
        SPEC_CLIENT_TYPES.iter().chain(EXTENSION_CLIENT_TYPES).copied().collect();
    let code: BTreeSet<&str> = ClientMessage::TYPES.iter().copied().collect();
    assert_eq!(code, spec, "ClientMessage and PROTOCOL.md disagree");
    let spec: BTreeSet<&str> =
        SPEC_SERVER_TYPES.iter().chain(EXTENSION_SERVER_TYPES).copied().collect();
    let code: BTreeSet<&str> = ServerMessage::TYPES.iter().copied().collect();
    assert_eq!(code, spec, "ServerMessage and PROTOCOL.md disagree");
}

/// Records `key.tag=value` for every object found under `key` (array items
/// inherit their array's key; top-level messages use `root`).
fn collect_variants(key: &str, value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for tag in ["type", "kind", "format", "intent"] {
                if let Some(Value::String(tag_value)) = map.get(tag) {
                    out.insert(format!("{key}.{tag}={tag_value}"));
                }
            }
            for (child_key, child) in map {
                collect_variants(child_key, child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_variants(key, item, out)),
        _ => {}
    }
}

fn collect_values(value: &Value, out: &mut BTreeSet<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if let Value::String(text) = child {
                    out.insert((key.clone(), text.clone()));
                }
                collect_values(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_values(item, out)),
        _ => {}
    }
}

#[test]
fn every_shared_type_variant_of_the_spec_has_a_fixture() {
    let all: Vec<Value> =
        ["client.json", "server.json", "results.json"].iter().flat_map(|name| load(name)).collect();
    let mut variants = BTreeSet::new();
    let mut values = BTreeSet::new();
    for fixture in &all {
        collect_variants("root", fixture, &mut variants);
        collect_values(fixture, &mut values);
    }
    assert_eq!(missing(SPEC_SHARED_VARIANTS, &variants), Vec::<&str>::new());
    let absent: Vec<_> = SPEC_STATES
        .iter()
        .filter(|(key, value)| !values.contains(&((*key).to_owned(), (*value).to_owned())))
        .collect();
    assert!(absent.is_empty(), "state values without a fixture: {absent:?}");
}

/// Field paths are the `field-paths` feature's (the browser bundle goes
/// without them).
#[cfg(feature = "field-paths")]
#[test]
fn invalid_messages_are_rejected_naming_the_field() {
    for case in load("invalid.json") {
        let why = case["why"].as_str().expect("invalid fixtures say why");
        let field = case["names"].as_str().expect("invalid fixtures name the field");
        let error = match Envelope::<ClientMessage>::from_value(case["json"].clone()) {
            Ok(decoded) => panic!("{why}: accepted {decoded:?}"),
            Err(error) => error,
        };
        let text = error.to_string();
        assert!(text.contains(field), "{why}: error `{text}` does not name `{field}`");
        let wire = error.to_wire_error();
        assert_eq!(wire.code.as_str(), "INVALID_REQUEST", "{why}");
        // The correlation id survives so the answer can be a `response`.
        if let Some(Value::String(id)) = case["json"].get("id") {
            assert_eq!(error.id(), Some(id.as_str()), "{why}: id lost");
        }
    }
}
