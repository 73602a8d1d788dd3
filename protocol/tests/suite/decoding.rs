//! Envelope rules (§5), forward compatibility and the response shape (§9.3).

use serde_json::json;
use shard_protocol::agent::{
    Decision, PermissionAnswer, PermissionRequest, PermissionResponse, Prompt,
};
use shard_protocol::orchestrator::AgentAttach;
use shard_protocol::types::{AgentStatus, RenderDescriptor};
use shard_protocol::{ClientMessage, DecodeError, Envelope, ErrorCode, ServerMessage, WireError};

#[test]
fn per_agent_agent_id_is_the_routing_tag() {
    let decoded = Envelope::<ClientMessage>::from_value(
        json!({"id": "1", "type": "prompt", "agent_id": "agent-1", "message": "hi"}),
    )
    .expect("valid prompt");
    assert_eq!(decoded.agent_id.as_deref(), Some("agent-1"));
    assert_eq!(decoded.id.as_deref(), Some("1"));
    assert_eq!(
        decoded.message,
        ClientMessage::Prompt(Prompt {
            message: "hi".into(),
            images: None,
            streaming_behavior: None,
            pinned: None,
        })
    );
}

#[test]
fn orchestrator_agent_id_is_payload() {
    let decoded = Envelope::<ClientMessage>::from_value(
        json!({"id": "1", "type": "agent.attach", "agent_id": "agent-3"}),
    )
    .expect("valid attach");
    assert_eq!(decoded.agent_id, None, "agent.attach has no routing tag");
    assert_eq!(
        decoded.message,
        ClientMessage::AgentAttach(AgentAttach {
            agent_id: "agent-3".into(),
            role: None,
            after_seq: None
        })
    );
    // And it encodes back as one `agent_id`, in the payload.
    let encoded: serde_json::Value = serde_json::from_str(&decoded.to_json()).expect("json");
    assert_eq!(encoded, json!({"id": "1", "type": "agent.attach", "agent_id": "agent-3"}));
}

#[test]
fn unknown_fields_are_ignored() {
    let decoded = Envelope::<ServerMessage>::from_value(json!({
        "type": "status", "agent_id": "agent-1", "status": "idle",
        "added_in_v2": {"anything": true}
    }))
    .expect("extra fields are fine");
    assert!(
        matches!(decoded.message, ServerMessage::Status(ref status) if status.status == AgentStatus::Idle)
    );
}

#[test]
fn unknown_enum_values_from_a_newer_peer_degrade() {
    let decoded = Envelope::<ServerMessage>::from_value(json!({
        "type": "tool_result", "tool_call_id": "t", "is_error": false,
        "content": {"kind": "text", "text": "ok"},
        "render": {"kind": "hologram", "depth": 3}
    }))
    .expect("an unknown render kind is not fatal");
    let ServerMessage::ToolResult(result) = decoded.message else { panic!("tool_result") };
    assert_eq!(result.render, Some(RenderDescriptor::Unknown));

    let decoded =
        Envelope::<ServerMessage>::from_value(json!({"type": "status", "status": "daydreaming"}))
            .expect("an unknown status is not fatal");
    assert!(
        matches!(decoded.message, ServerMessage::Status(ref status) if status.status == AgentStatus::Unknown)
    );
}

#[test]
fn unknown_type_keeps_its_name_and_id_for_the_answer() {
    let error =
        Envelope::<ClientMessage>::from_value(json!({"id": "q", "type": "agent.frobnicate"}))
            .expect_err("not a command");
    assert_eq!(
        error,
        DecodeError::UnknownType { type_name: "agent.frobnicate".into(), id: Some("q".into()) }
    );
    assert_eq!(error.type_name(), Some("agent.frobnicate"));
    assert_eq!(error.to_wire_error().code, ErrorCode::InvalidRequest);
}

#[test]
fn a_server_message_is_not_a_client_message() {
    // The sets are closed per direction: a client cannot send `hello`.
    let error = Envelope::<ClientMessage>::from_value(json!({"type": "hello",
        "protocol_version": "0.1.0", "server_version": "x", "capabilities": []}))
    .expect_err("hello is server → client");
    assert!(matches!(error, DecodeError::UnknownType { .. }));
}

#[test]
fn frames_that_are_not_json_objects_are_rejected() {
    assert!(matches!(
        Envelope::<ClientMessage>::from_json("{not json"),
        Err(DecodeError::Syntax(_))
    ));
    assert_eq!(Envelope::<ClientMessage>::from_json("[1, 2]"), Err(DecodeError::NotObject));
    assert_eq!(Envelope::<ClientMessage>::from_json("\"prompt\""), Err(DecodeError::NotObject));
}

#[test]
fn permission_response_encodes_exactly_one_form() {
    let choice = Envelope::new(ClientMessage::PermissionResponse(PermissionResponse {
        request_id: "r".into(),
        answer: PermissionAnswer::Choice("allow-once".into()),
        reason: None,
    }));
    let value: serde_json::Value = serde_json::from_str(&choice.to_json()).expect("json");
    assert_eq!(
        value,
        json!({"type": "permission_response", "request_id": "r", "choice_id": "allow-once"})
    );

    let legacy = Envelope::new(ClientMessage::PermissionResponse(PermissionResponse {
        request_id: "r".into(),
        answer: PermissionAnswer::Decision(Decision::Deny),
        reason: Some("no".into()),
    }))
    .for_agent("agent-2");
    let value: serde_json::Value = serde_json::from_str(&legacy.to_json()).expect("json");
    assert_eq!(
        value,
        json!({"type": "permission_response", "request_id": "r", "decision": "deny",
               "reason": "no", "agent_id": "agent-2"})
    );
}

#[test]
fn a_request_accepts_only_answers_it_offered() {
    let request: PermissionRequest = serde_json::from_value(json!({
        "request_id": "r", "tool_name": "bash", "input": {}, "prompt": "run?",
        "options": ["allow", "deny"],
        "choices": [{"id": "once", "label": "Once", "intent": "allow"}]
    }))
    .expect("valid request");
    assert!(request.accepts(&PermissionAnswer::Choice("once".into())));
    assert!(!request.accepts(&PermissionAnswer::Choice("forever".into())), "unknown choice id");
    assert!(request.accepts(&PermissionAnswer::Decision(Decision::Deny)));
    assert!(!request.accepts(&PermissionAnswer::Decision(Decision::AllowAlways)), "not offered");
}

#[test]
fn responses_carry_data_or_an_error_never_both() {
    for (json, ok) in [
        (json!({"type": "response", "id": "1", "command": "abort", "success": true}), true),
        (json!({"type": "response", "id": "1", "command": "abort", "success": false}), false),
        (
            json!({"type": "response", "id": "1", "command": "abort", "success": true,
                   "error": {"code": "CONFLICT", "message": "x"}}),
            false,
        ),
    ] {
        let decoded = Envelope::<ServerMessage>::from_value(json.clone());
        assert_eq!(decoded.is_ok(), ok, "{json}: {decoded:?}");
    }
}

#[test]
fn typed_response_data_reads_back() {
    use shard_protocol::message::Response;
    use shard_protocol::orchestrator::AgentCreateResult;

    let response = Response::ok("agent.create", AgentCreateResult { agent_id: "agent-7".into() });
    let wire = Envelope::new(ServerMessage::Response(response)).with_id("c1").to_json();
    let decoded = Envelope::<ServerMessage>::from_json(&wire).expect("decodes");
    let ServerMessage::Response(response) = decoded.message else { panic!("a response") };
    assert!(response.success());
    let data: AgentCreateResult = response.data().expect("typed data");
    assert_eq!(data.agent_id, "agent-7");

    let failed =
        Response::failed("agent.attach", WireError::new(ErrorCode::NotFound, "no agent-9"));
    assert_eq!(
        failed.data::<AgentCreateResult>().map_err(|error| error.code),
        Err(ErrorCode::NotFound)
    );
}

#[test]
fn unknown_error_codes_are_kept_verbatim() {
    let code: ErrorCode = serde_json::from_value(json!("RATE_LIMITED")).expect("any string");
    assert_eq!(code, ErrorCode::Other("RATE_LIMITED".into()));
    assert_eq!(serde_json::to_value(&code).expect("json"), json!("RATE_LIMITED"));
    assert_eq!(ErrorCode::parse("SESSION_CORRUPT"), ErrorCode::SessionCorrupt);
}

#[test]
fn numbers_survive_a_decode_and_encode_bit_for_bit() {
    // Found by fuzz/server_message: serde_json's default float parsing can
    // miss the nearest double by one unit in the last place, so a message
    // decoded and encoded again (as a relay does) changed the numbers in a
    // tool's arguments. The workspace enables `float_roundtrip`.
    let text = r#"{"type": "tool_call", "tool_call_id": "t1", "name": "bash",
                   "args": {"n": 1000000000014093932601324135308, "x": 0.30000000000000004}}"#;
    let once = Envelope::<ServerMessage>::from_json(text).expect("decodes");
    let again = Envelope::<ServerMessage>::from_json(&once.to_json()).expect("decodes again");
    assert_eq!(again, once);
}

/// The tagged enums of §11 are decoded by hand (for the browser bundle's
/// size); these are the derive's rules they must keep.
#[test]
fn tagged_content_decodes_by_the_derives_rules() {
    use shard_protocol::types::{ContentBlock, ToolResultContent};
    let block = |value| serde_json::from_value::<ContentBlock>(value);
    // Unknown fields are ignored; an optional field absent or null is None.
    assert_eq!(
        block(json!({"type": "tool_result", "tool_call_id": "c1", "extra": 1,
            "content": {"kind": "text", "text": "ok"}, "is_error": null}))
        .unwrap(),
        ContentBlock::ToolResult {
            tool_call_id: "c1".into(),
            content: ToolResultContent::Text { text: "ok".into() },
            is_error: None,
        }
    );
    // A tag this build does not know is Unknown, whatever its fields.
    assert_eq!(block(json!({"type": "image", "data": 3})).unwrap(), ContentBlock::Unknown);
    // A missing tag, a tag that is not a string, a missing required field
    // and a field of the wrong type are errors that say which.
    let error = |value| block(value).unwrap_err().to_string();
    assert!(error(json!({"text": "hi"})).contains("missing field `type`"));
    assert!(error(json!({"type": 4, "text": "hi"})).contains("expected a string"));
    assert!(error(json!({"type": "text"})).contains("missing field `text`"));
    assert!(error(json!({"type": "text", "text": 5})).contains("`text`"));
    assert!(
        error(json!({"type": "tool_result", "tool_call_id": "c1",
        "content": {"kind": "text"}}))
        .contains("missing field `text`")
    );
    assert!(error(json!(["text", "hi"])).contains("invalid type"));

    let render = |value| serde_json::from_value::<RenderDescriptor>(value).unwrap();
    assert_eq!(
        render(json!({"kind": "command", "command": "ls", "exitCode": 2})),
        RenderDescriptor::Command { command: "ls".into(), exit_code: Some(2), duration_ms: None }
    );
    assert_eq!(render(json!({"kind": "sparkline", "points": []})), RenderDescriptor::Unknown);
}

#[test]
fn the_decoder_reads_what_serde_json_reads_with_the_same_errors() {
    use shard_protocol::agent::Hello;
    use shard_protocol::decode::from_value;
    use shard_protocol::types::Usage;
    // Values of the right shape read the same, through every kind of field.
    for value in [
        json!({"protocol_version": "0.1.0", "server_version": "1", "capabilities": ["a", "b"]}),
        json!({"protocol_version": "0.1.0", "server_version": "1", "capabilities": [],
            "unknown": {"nested": [1, -2, 3.5, null, true]}}),
    ] {
        let ours: Hello = from_value(value.clone()).expect("valid");
        let theirs: Hello = serde_json::from_value(value).expect("valid");
        assert_eq!(ours, theirs);
    }
    // Values of the wrong type fail with serde_json's own words.
    for value in [
        json!({"protocol_version": 5, "server_version": "1", "capabilities": []}),
        json!({"protocol_version": "0.1.0", "server_version": "1"}),
        json!({"protocol_version": "0.1.0", "server_version": "1", "capabilities": "a"}),
        json!({"protocol_version": "0.1.0", "server_version": -1, "capabilities": []}),
        json!("hello"),
        json!(null),
    ] {
        let ours = from_value::<Hello>(value.clone()).expect_err("invalid").to_string();
        let theirs = serde_json::from_value::<Hello>(value).expect_err("invalid").to_string();
        assert_eq!(ours, theirs);
    }
    for value in [
        json!({"input": -1, "output": 0}),
        json!({"input": 1.5, "output": 0}),
        json!({"input": 18446744073709551616.0, "output": 0}),
        json!({"input": "1", "output": 0}),
    ] {
        let ours = from_value::<Usage>(value.clone()).expect_err("invalid").to_string();
        let theirs = serde_json::from_value::<Usage>(value).expect_err("invalid").to_string();
        assert_eq!(ours, theirs);
    }
    // Map keys are strings on the wire, read as the key's type.
    let counts: std::collections::BTreeMap<u32, bool> =
        from_value(json!({"7": true, "12": false})).expect("integer keys");
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), [(7, true), (12, false)]);
    let error = from_value::<std::collections::BTreeMap<u32, bool>>(json!({"x": true}));
    assert!(error.unwrap_err().to_string().contains("expected an unsigned integer"));
    // Enums: a variant by name, an unknown one refused or kept as Unknown.
    assert_eq!(from_value::<Decision>(json!("allow_always")).unwrap(), Decision::AllowAlways);
    assert_eq!(
        from_value::<Decision>(json!("maybe")).unwrap_err().to_string(),
        serde_json::from_value::<Decision>(json!("maybe")).unwrap_err().to_string()
    );
}

#[test]
fn a_struct_is_read_only_from_an_object() {
    use shard_protocol::agent::Hello;
    // serde_json alone reads an array as a struct's fields in order; no
    // peer writes that, and the decoder refuses it like any wrong type.
    let positional = json!(["0.1.0", "1", []]);
    assert!(serde_json::from_value::<Hello>(positional.clone()).is_ok());
    let error = shard_protocol::decode::from_value::<Hello>(positional).unwrap_err();
    assert_eq!(error.to_string(), "invalid type: sequence, expected struct Hello");
    // So does a message whose nested struct is written so.
    let error = Envelope::<ServerMessage>::from_value(json!({
        "type": "sync", "agent_id": "a", "status": "idle", "mode": "default",
        "live_window": [[], 0], "pending_requests": []
    }))
    .unwrap_err();
    assert!(error.to_string().contains("invalid type: sequence"), "{error}");
}

#[test]
fn pending_questions_of_a_sync_read_and_write_one_flat_object() {
    use shard_protocol::agent::{PendingKind, PendingRequest};
    let permission = json!({
        "agent_id": "child", "type": "permission_request", "request_id": "r1",
        "tool_name": "bash", "input": {"command": "ls"}, "prompt": "Run ls?",
        "options": ["allow", "deny"]
    });
    let question = json!({"type": "ui_request", "request_id": "r2", "kind": "input"});
    let read = |value: &serde_json::Value| {
        shard_protocol::decode::from_value::<PendingRequest>(value.clone())
    };
    let first = read(&permission).expect("a permission request");
    assert_eq!(first.agent_id.as_deref(), Some("child"));
    let PendingKind::Permission(ref request) = first.request else { panic!("{first:?}") };
    assert_eq!((request.request_id.as_str(), request.tool_name.as_str()), ("r1", "bash"));
    let second = read(&question).expect("a ui request");
    assert_eq!(second.agent_id, None);
    assert!(matches!(second.request, PendingKind::Ui(ref ui) if ui.request_id == "r2"));
    // Each writes back as the object it came from.
    assert_eq!(serde_json::to_value(&first).unwrap(), permission);
    assert_eq!(serde_json::to_value(&second).unwrap(), question);
    // The derive's rules: the tag is required and known, the fields too.
    let error = |value: serde_json::Value| read(&value).unwrap_err().to_string();
    assert_eq!(error(json!({"request_id": "r3"})), "missing field `type`");
    assert!(error(json!({"type": "vote", "request_id": "r3"})).contains("unknown variant `vote`"));
    assert!(error(json!({"type": "ui_request", "kind": "input"})).contains("`request_id`"));
}

#[test]
fn a_workspace_detail_is_its_summary_and_state_in_one_object() {
    use shard_protocol::workspace::WorkspaceDetail;
    let flat = json!({
        "workspace_id": "w1", "cwd": "/repo", "lifecycle": "active", "created_at": 7,
        "agent_count": 1, "agent_ids": ["a1"], "ahead": 2, "behind": 0, "merged": false,
        "live": true, "busy": false
    });
    let detail: WorkspaceDetail = shard_protocol::decode::from_value(flat.clone()).unwrap();
    assert_eq!((detail.summary.workspace_id.as_str(), detail.summary.created_at), ("w1", 7));
    assert_eq!(detail.state.agent_ids, ["a1"]);
    assert_eq!((detail.state.ahead, detail.state.merged), (Some(2), Some(false)));
    assert_eq!(serde_json::to_value(&detail).unwrap(), flat);
    let mut missing = flat;
    missing.as_object_mut().unwrap().remove("workspace_id");
    let error = shard_protocol::decode::from_value::<WorkspaceDetail>(missing).unwrap_err();
    assert_eq!(error.to_string(), "missing field `workspace_id`");
}
