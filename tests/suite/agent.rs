//! `shard agent --stdio` driven over its real stdin and stdout with the demo
//! model: exact event sequences for every per-agent command (PROTOCOL.md §9).

use serde_json::{Value, json};

use super::agent_support::{Workspace, count, find, shape, streamed_text};

fn strs(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

#[tokio::test]
async fn hello_then_sync_describe_the_runtime() {
    let workspace = Workspace::new();
    let mut agent = workspace.start(&[]).await;
    let hello = agent.expect("hello").await;
    assert_eq!(hello["protocol_version"], "0.1.0");
    let capabilities: Vec<&str> =
        hello["capabilities"].as_array().expect("list").iter().filter_map(Value::as_str).collect();
    for wanted in [
        "streaming-deltas",
        "mode-catalog",
        "mode-switch",
        "model-catalog",
        "model-switch",
        "ui:input",
        "ui:select",
    ] {
        assert!(capabilities.contains(&wanted), "missing {wanted}: {capabilities:?}");
    }
    assert!(!capabilities.contains(&"reasoning-switch"), "demo has no reasoning levels");
    let sync = agent.expect("sync").await;
    assert_eq!(sync["status"], "idle");
    assert_eq!(sync["mode"], "build");
    assert_eq!(sync["capabilities"], hello["capabilities"]);
    assert_eq!(sync["live_window"]["messages"], json!([]));
    assert_eq!(sync["pending_requests"], json!([]));
    agent.silent_for(200).await;

    // A model with reasoning levels advertises the reasoning controls.
    let mut thinking = workspace.start(&["--model", "demo-think"]).await;
    let hello = thinking.expect("hello").await;
    let capabilities = hello["capabilities"].to_string();
    assert!(
        capabilities.contains("reasoning-catalog") && capabilities.contains("reasoning-switch")
    );
}

#[tokio::test]
async fn a_prompt_streams_a_reply_word_by_word() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let turn = agent.turn("hello there agent").await;
    assert_eq!(
        shape(&turn),
        strs(&[
            "turn_start",
            "status:streaming",
            "user_message",
            "message_delta",
            "message_complete",
            "usage",
            "turn_end",
            "status:idle"
        ])
    );
    assert!(count(&turn, "message_delta") >= 4, "streamed in pieces: {turn:#?}");
    assert_eq!(streamed_text(&turn), "You said: hello there agent");
    let complete = find(&turn, "message_complete");
    assert_eq!(complete["message"]["role"], "assistant");
    assert_eq!(
        complete["message"]["content"],
        json!([{"type": "text", "text": "You said: hello there agent"}])
    );
    let delta = find(&turn, "message_delta");
    assert_eq!(delta["message_id"], complete["message_id"]);
    let turn_start = find(&turn, "turn_start");
    assert_eq!(find(&turn, "turn_end")["turn_id"], turn_start["turn_id"]);
    assert!(find(&turn, "turn_end")["usage"]["input"].as_u64().unwrap_or(0) > 0);
    assert_eq!(find(&turn, "usage")["model"], "demo");
}

#[tokio::test]
async fn a_mid_turn_prompt_needs_a_streaming_behavior_and_follow_ups_wait() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "stream: 40"})).await;
    agent.expect("turn_start").await;
    let (refused, _) = agent.call_during("p2", json!({"type": "prompt", "message": "again"})).await;
    assert_eq!(refused["success"], false);
    assert_eq!(refused["error"]["code"], "INVALID_REQUEST");
    assert!(refused["error"]["message"].as_str().unwrap_or("").contains("streaming_behavior"));
    let (queued, _) = agent
        .call_during(
            "p3",
            json!({"type": "prompt", "message": "afterwards", "streaming_behavior": "follow_up"}),
        )
        .await;
    assert_eq!(queued["success"], true);
    // The first turn finishes untouched, then the follow-up is its own turn.
    let first = agent.until("turn_end").await;
    assert!(streamed_text(&first).contains("tick-40"));
    assert!(!streamed_text(&first).contains("afterwards"));
    let second = agent.until("turn_end").await;
    assert_eq!(count(&second, "turn_start"), 1, "a new turn: {second:#?}");
    assert_eq!(streamed_text(&second), "You said: afterwards");
    assert_eq!(agent.expect("status").await["status"], "idle");
}

#[tokio::test]
async fn a_steer_lands_before_the_next_model_call_of_the_same_turn() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "stream: 40"})).await;
    let turn_start = agent.expect("turn_start").await;
    let (accepted, _) =
        agent.call_during("s1", json!({"type": "steer", "message": "change course"})).await;
    assert_eq!(accepted["success"], true);
    let rest = agent.until("turn_end").await;
    assert_eq!(find(&rest, "turn_end")["turn_id"], turn_start["turn_id"], "same turn");
    assert_eq!(count(&rest, "turn_start"), 0, "no new turn: {rest:#?}");
    let completes: Vec<&Value> =
        rest.iter().filter(|message| message["type"] == "message_complete").collect();
    assert_eq!(completes.len(), 2, "two model calls in one turn");
    assert!(
        completes[0]["message"]["content"][0]["text"].as_str().unwrap_or("").contains("tick-40")
    );
    assert_eq!(completes[1]["message"]["content"][0]["text"], "You said: change course");
    // The prompt form of steering works the same way.
    agent.expect("status").await;
    agent.call("p2", json!({"type": "prompt", "message": "stream: 30"})).await;
    agent.expect("turn_start").await;
    agent
        .call_during(
            "s2",
            json!({"type": "prompt", "message": "steered", "streaming_behavior": "steer"}),
        )
        .await;
    let rest = agent.until("turn_end").await;
    assert!(streamed_text(&rest).ends_with("You said: steered"), "{}", streamed_text(&rest));
}

/// Answers the next permission request with `answer` fields; returns it.
async fn answer_permission(agent: &mut super::agent_support::AgentProc, answer: Value) -> Value {
    let asked = agent.until("permission_request").await;
    let request = asked.last().cloned().expect("request");
    assert_eq!(agent.expect("status").await["status"], "waiting_for_permission");
    let mut response = json!({"type": "permission_response", "request_id": request["request_id"]});
    for (key, value) in answer.as_object().expect("object") {
        response[key] = value.clone();
    }
    agent.send(response).await;
    request
}

fn process_running(marker: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", marker])
        .stdout(std::process::Stdio::null())
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

#[tokio::test]
async fn abort_kills_a_running_command_and_leaves_the_agent_idle() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let marker = format!("shard-abort-{}", std::process::id());
    agent
        .call("p1", json!({"type": "prompt", "message": format!("run: sleep 30; echo {marker}")}))
        .await;
    let request = answer_permission(&mut agent, json!({"decision": "allow"})).await;
    assert_eq!(request["tool_name"], "bash");
    let resolved = agent.expect("permission_resolved").await;
    assert_eq!(resolved["decision"], "allow");
    agent.until("tool_call").await;
    // The command is running: its process group holds the marker.
    let started = std::time::Instant::now();
    while !process_running(&marker) {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "bash never started");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (response, before) = agent.call_during("a1", json!({"type": "abort"})).await;
    assert_eq!(response["success"], true);
    assert_eq!(
        shape(&before),
        strs(&["tool_result", "turn_end", "status:idle"]),
        "abort winds the turn down before answering: {before:#?}"
    );
    let result = find(&before, "tool_result");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["exit_code"], 137);
    assert!(!process_running(&marker), "the process group was killed");
    // The session is consistent: the next turn works.
    let turn = agent.turn("still there?").await;
    assert_eq!(streamed_text(&turn), "You said: still there?");
}

#[tokio::test]
async fn abort_while_waiting_withdraws_the_question() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "run: echo never"})).await;
    let asked = agent.until("permission_request").await;
    let request_id = asked.last().expect("request")["request_id"].clone();
    agent.expect("status").await;
    let (response, before) = agent.call_during("a1", json!({"type": "abort"})).await;
    assert_eq!(response["success"], true);
    let resolved = find(&before, "permission_resolved");
    assert_eq!(resolved["request_id"], request_id);
    assert_eq!(resolved["decision"], "deny");
    assert_eq!(resolved["source"], "abort");
    let result = find(&before, "tool_result");
    assert_eq!(result["is_error"], true);
    assert_eq!(count(&before, "tool_call"), 0, "the tool never ran");
    assert_eq!(before.last().expect("status")["status"], "idle");
}

#[tokio::test]
async fn permission_answers_in_both_forms_and_unknown_choices_are_ignored() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent
        .call(
            "p1",
            json!({"type": "prompt", "message": "write: notes.txt\nfirst line\nsecond line"}),
        )
        .await;
    let request = answer_permission(&mut agent, json!({"choice_id": "no-such-choice"})).await;
    assert_eq!(request["tool_name"], "write");
    assert_eq!(request["options"], json!(["allow", "allow_always", "deny"]));
    let choices: Vec<&str> = request["choices"]
        .as_array()
        .expect("choices")
        .iter()
        .filter_map(|choice| choice["id"].as_str())
        .collect();
    assert_eq!(choices, vec!["allow-once", "allow-always", "deny"]);
    assert!(
        request["details"]
            .as_array()
            .expect("details")
            .iter()
            .any(|detail| detail["format"] == "path")
    );
    // The unknown choice changed nothing: the request is still open.
    assert_eq!(agent.expect("response").await["success"], true);
    agent.silent_for(300).await;
    assert!(!workspace.path("notes.txt").exists());
    agent.send(json!({"type": "permission_response", "request_id": request["request_id"], "choice_id": "allow-once"})).await;
    let resolved = agent.expect("permission_resolved").await;
    assert_eq!(resolved["choice_id"], "allow-once");
    assert!(resolved.get("decision").is_none());
    let rest = agent.until("turn_end").await;
    let result = find(&rest, "tool_result");
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["render"]["kind"], "diff");
    assert_eq!(result["render"]["hunks"][0]["lines"], json!(["+first line", "+second line"]));
    assert_eq!(
        std::fs::read_to_string(workspace.path("notes.txt")).expect("written"),
        "first line\nsecond line\n"
    );
    assert_eq!(agent.expect("status").await["status"], "idle");
    // A late answer to a settled request is dropped silently.
    agent.send(json!({"type": "permission_response", "request_id": request["request_id"], "decision": "deny"})).await;
    assert_eq!(agent.expect("response").await["success"], true);
    agent.silent_for(200).await;

    // A deny reaches the model as an error result.
    agent.call("p2", json!({"type": "prompt", "message": "run: touch denied.txt"})).await;
    answer_permission(&mut agent, json!({"decision": "deny"})).await;
    let rest = agent.until("turn_end").await;
    let result = find(&rest, "tool_result");
    assert_eq!(result["is_error"], true);
    assert!(result["content"]["message"].as_str().unwrap_or("").contains("denied"));
    assert!(!workspace.path("denied.txt").exists());
}

#[tokio::test]
async fn allow_always_covers_the_exact_call_only_and_survives_a_restart() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "run: echo granted"})).await;
    answer_permission(&mut agent, json!({"decision": "allow_always"})).await;
    let turn = agent.until("turn_end").await;
    assert_eq!(find(&turn, "tool_result")["exit_code"], 0);
    agent.expect("status").await;

    let again = agent.turn("run: echo granted").await;
    assert_eq!(count(&again, "permission_request"), 0, "asked again: {again:#?}");
    assert!(streamed_text(&again).contains("exit code 0"));

    agent.call("p2", json!({"type": "prompt", "message": "run: echo other"})).await;
    answer_permission(&mut agent, json!({"decision": "deny"})).await;
    agent.until("turn_end").await;
    agent.expect("status").await;

    // The grant is part of the session: a resumed agent still honors it.
    let (response, _) = agent.call_during("l1", json!({"type": "session_op", "op": "list"})).await;
    let session = response["data"]["active"].as_str().expect("session id").to_owned();
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    let mut resumed = workspace.ready(&["--session", &session]).await;
    let turn = resumed.turn("run: echo granted").await;
    assert_eq!(count(&turn, "permission_request"), 0);
}

#[tokio::test]
async fn plan_mode_refuses_mutating_tools_without_asking() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let (response, before) =
        agent.call_during("m1", json!({"type": "set_mode", "mode": "plan"})).await;
    assert_eq!(shape(&before), strs(&["mode_changed"]), "the event precedes the response");
    assert_eq!(before[0]["previous_mode"], "build");
    assert_eq!(before[0]["mode"], "plan");
    assert_eq!(response["data"], json!({"previous_mode": "build", "mode": "plan"}));
    // Setting the same mode is acknowledged without an event.
    let response = agent.call("m2", json!({"type": "set_mode", "mode": "plan"})).await;
    assert_eq!(response["success"], true);
    let unknown = agent.call("m3", json!({"type": "set_mode", "mode": "yolo"})).await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND");
    let modes = agent.call("m4", json!({"type": "list_modes"})).await;
    assert_eq!(modes["data"]["active"], "plan");
    let names: Vec<&str> = modes["data"]["modes"]
        .as_array()
        .expect("modes")
        .iter()
        .filter_map(|mode| mode["name"].as_str())
        .collect();
    assert_eq!(names, vec!["build", "plan"]);

    let turn = agent.turn("run: touch planned.txt").await;
    assert_eq!(count(&turn, "permission_request"), 0);
    assert_eq!(count(&turn, "tool_call"), 0);
    let result = find(&turn, "tool_result");
    assert_eq!(result["is_error"], true);
    assert!(result["content"]["message"].as_str().unwrap_or("").contains("plan mode"));
    assert!(!workspace.path("planned.txt").exists());
    // Read-only tools still run, without asking.
    std::fs::write(workspace.path("readme.md"), "# Title\nbody\n").expect("write");
    let turn = agent.turn("read: readme.md").await;
    assert_eq!(count(&turn, "permission_request"), 0);
    let call = find(&turn, "tool_call");
    assert_eq!(call["read_only"], true);
    let result = find(&turn, "tool_result");
    assert_eq!(result["render"]["kind"], "code");
    assert_eq!(result["render"]["path"], "readme.md");
    assert!(streamed_text(&turn).contains("# Title"));
}

#[tokio::test]
async fn models_and_reasoning_levels_switch_at_the_next_provider_call() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let models = agent.call("l1", json!({"type": "list_models"})).await;
    assert_eq!(models["data"]["active"]["id"], "demo");
    let ids: Vec<&str> = models["data"]["models"]
        .as_array()
        .expect("models")
        .iter()
        .filter_map(|model| model["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["demo", "demo-think"]);
    let none = agent.call("r0", json!({"type": "list_reasoning_levels"})).await;
    assert_eq!(none["error"]["code"], "NOT_FOUND");

    // Switching mid-stream does not touch the reply in flight: the switch
    // goes once the reply streams (after turn_start the turn still says
    // its user_message before the provider call starts).
    agent.call("p1", json!({"type": "prompt", "message": "stream: 30"})).await;
    let opening = agent.until("message_delta").await;
    assert_eq!(opening[0]["type"], "turn_start", "{opening:?}");
    let (switched, before) =
        agent.call_during("s1", json!({"type": "set_model", "model": "demo-think"})).await;
    let changed = find(&before, "model_changed");
    assert_eq!(changed["previous"]["id"], "demo");
    assert_eq!(changed["active"]["id"], "demo-think");
    assert_eq!(changed["effective"], "next_provider_call");
    assert!(changed["capabilities"].to_string().contains("reasoning-switch"));
    assert_eq!(switched["data"]["active"]["id"], "demo-think");
    let rest = agent.until("turn_end").await;
    assert_eq!(find(&rest, "usage")["model"], "demo", "the stream in flight kept its model");
    assert_eq!(
        count(&rest, "message_delta"),
        rest.iter().filter(|m| m["type"] == "message_delta" && m["kind"] == "text").count(),
        "no thinking in the old model's reply"
    );
    agent.expect("status").await;
    let next = agent.turn("hi").await;
    assert_eq!(find(&next, "usage")["model"], "demo-think");
    assert!(
        next.iter()
            .any(|message| message["type"] == "message_delta" && message["kind"] == "thinking")
    );
    assert!(streamed_text(&next).contains("You said: hi"));

    let levels = agent.call("r1", json!({"type": "list_reasoning_levels"})).await;
    assert_eq!(levels["data"]["active"], "medium");
    assert_eq!(levels["data"]["model"]["id"], "demo-think");
    let level_ids: Vec<&str> = levels["data"]["levels"]
        .as_array()
        .expect("levels")
        .iter()
        .filter_map(|level| level["id"].as_str())
        .collect();
    assert_eq!(level_ids, vec!["low", "medium", "high"]);
    let stale = agent
        .call("r2", json!({"type": "set_reasoning_level", "model": "demo", "effort": "high"}))
        .await;
    assert_eq!(stale["error"]["code"], "CONFLICT");
    let unknown = agent
        .call("r3", json!({"type": "set_reasoning_level", "model": "demo-think", "effort": "max"}))
        .await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND");
    let (set, before) = agent
        .call_during(
            "r4",
            json!({"type": "set_reasoning_level", "model": "demo-think", "effort": "high"}),
        )
        .await;
    let changed = find(&before, "reasoning_level_changed");
    assert_eq!(
        (changed["previous"].as_str(), changed["active"].as_str()),
        (Some("medium"), Some("high"))
    );
    assert_eq!(set["data"]["active"], "high");
    let same = agent
        .call("r5", json!({"type": "set_reasoning_level", "model": "demo-think", "effort": "high"}))
        .await;
    assert_eq!(same["success"], true, "idempotent, and call() saw no event before it");
    let thought = agent.turn("hello").await;
    let thinking: String = thought
        .iter()
        .filter(|m| m["kind"] == "thinking")
        .filter_map(|m| m["text_delta"].as_str())
        .collect();
    assert!(thinking.contains("high effort"), "{thinking}");
    let unknown_model = agent.call("s2", json!({"type": "set_model", "model": "gpt-none"})).await;
    assert_eq!(unknown_model["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn ask_is_answered_through_a_ui_response() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "ask: What is your name?"})).await;
    let asked = agent.until("ui_request").await;
    let request = asked.last().expect("request").clone();
    assert_eq!(request["kind"], "input");
    assert_eq!(request["message"], "What is your name?");
    assert_eq!(agent.expect("status").await["status"], "waiting_for_ui");
    agent
        .send(json!({"type": "ui_response", "request_id": request["request_id"], "value": "Ada"}))
        .await;
    let resolved = agent.expect("ui_resolved").await;
    assert_eq!(resolved["value"], "Ada");
    let rest = agent.until("turn_end").await;
    assert_eq!(find(&rest, "tool_result")["content"]["text"], "Ada");
    assert!(streamed_text(&rest).contains("You answered: Ada"));
}

#[tokio::test]
async fn search_tools_render_path_lists() {
    let workspace = Workspace::new();
    std::fs::create_dir(workspace.path("src")).expect("mkdir");
    std::fs::write(workspace.path("src/lib.rs"), "pub fn needle() {}\n").expect("write");
    std::fs::write(workspace.path("notes.md"), "no match here\n").expect("write");
    let mut agent = workspace.ready(&[]).await;
    let listed = agent.turn("ls: .").await;
    let paths = &find(&listed, "tool_result")["render"]["paths"];
    assert_eq!(paths[0], json!({"path": "src", "kind": "dir"}));
    assert_eq!(paths[1], json!({"path": "notes.md", "kind": "file"}));
    let grepped = agent.turn("grep: needle").await;
    let render = &find(&grepped, "tool_result")["render"];
    assert_eq!(render["kind"], "path_list");
    assert_eq!(render["paths"][0]["path"], "src/lib.rs");
    assert_eq!(render["paths"][0]["hint"], "1: pub fn needle() {}");
    let found = agent.turn("find: *.rs").await;
    assert_eq!(
        find(&found, "tool_result")["render"]["paths"],
        json!([{"path": "src/lib.rs", "kind": "file"}])
    );
    for turn in [&listed, &grepped, &found] {
        assert_eq!(count(turn, "permission_request"), 0, "read-only inside cwd never asks");
    }
}

#[tokio::test]
async fn edit_replaces_an_exact_string_and_renders_hunks() {
    let workspace = Workspace::new();
    std::fs::write(workspace.path("config.txt"), "alpha\nbeta\ngamma\n").expect("write");
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "edit: config.txt\nbeta\nBETA"})).await;
    answer_permission(&mut agent, json!({"decision": "allow"})).await;
    let rest = agent.until("turn_end").await;
    let result = find(&rest, "tool_result");
    assert_eq!(result["is_error"], false, "{result}");
    let hunk = &result["render"]["hunks"][0];
    assert_eq!(hunk["lines"], json!([" alpha", "-beta", "+BETA", " gamma"]));
    assert_eq!((hunk["old_start"].as_u64(), hunk["new_start"].as_u64()), (Some(1), Some(1)));
    assert_eq!(
        std::fs::read_to_string(workspace.path("config.txt")).expect("read"),
        "alpha\nBETA\ngamma\n"
    );
    // A string that is not there is an error the model sees, not a crash.
    agent.expect("status").await;
    agent.call("p2", json!({"type": "prompt", "message": "edit: config.txt\nmissing\nx"})).await;
    answer_permission(&mut agent, json!({"decision": "allow"})).await;
    let rest = agent.until("turn_end").await;
    assert_eq!(find(&rest, "tool_result")["is_error"], true);
}

#[tokio::test]
async fn a_provider_error_is_reported_and_the_agent_recovers() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let turn = agent.turn("fail: upstream overloaded").await;
    let error = find(&turn, "error");
    assert_eq!(error["code"], "PROVIDER_ERROR");
    assert_eq!(error["fatal"], false);
    assert!(error["message"].as_str().unwrap_or("").contains("upstream overloaded"));
    assert_eq!(turn.last().expect("status")["status"], "error");
    assert_eq!(count(&turn, "turn_end"), 1);
    let next = agent.turn("are you back?").await;
    assert_eq!(next.last().expect("status")["status"], "idle");
    assert_eq!(streamed_text(&next), "You said: are you back?");
}

#[tokio::test]
async fn malformed_input_is_answered_and_survived() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.send_raw("this is not json").await;
    let error = agent.expect("error").await;
    assert_eq!(error["code"], "INVALID_REQUEST");
    agent.send_raw("{\"id\": \"u1\", \"type\": \"teleport\"}").await;
    let unknown = agent.expect("response").await;
    assert_eq!(
        (unknown["id"].as_str(), unknown["command"].as_str()),
        (Some("u1"), Some("teleport"))
    );
    assert_eq!(unknown["error"]["code"], "INVALID_REQUEST");
    agent.send(json!({"id": "w1", "type": "prompt", "message": 42})).await;
    let wrong = agent.expect("response").await;
    assert_eq!(wrong["error"]["code"], "INVALID_REQUEST");
    assert!(
        wrong["error"]["message"].as_str().unwrap_or("").contains("message"),
        "names the field: {wrong}"
    );
    agent.send(json!({"type": "set_mode"})).await;
    let missing = agent.expect("error").await;
    assert!(missing["message"].as_str().unwrap_or("").contains("mode"));
    agent.send(json!({"id": "d1", "type": "agent.list"})).await;
    let daemon_only = agent.expect("response").await;
    assert_eq!(daemon_only["error"]["code"], "INVALID_REQUEST");
    agent.send_raw("{\"type\":\"prompt\",\"message\":\"crlf works\"}\r").await;
    agent.expect("response").await;
    let turn = agent.until("turn_end").await;
    assert_eq!(streamed_text(&turn), "You said: crlf works");
}

#[tokio::test]
async fn session_ops_follow_their_error_tables() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    // compact on an empty session: a successful no-op, with the lifecycle.
    let (response, before) =
        agent.call_during("c1", json!({"type": "session_op", "op": "compact"})).await;
    assert_eq!(shape(&before), strs(&["status:compacting"]));
    assert_eq!(response["data"], json!({"compacted": false, "reason": "no_safe_cut"}));
    assert_eq!(agent.expect("status").await["status"], "idle");
    let bad = agent
        .call(
            "c2",
            json!({"type": "session_op", "op": "compact", "args": {"keep_recent_tokens": -1}}),
        )
        .await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST");
    let no_entry = agent
        .call("f1", json!({"type": "session_op", "op": "fork", "args": {"from_entry_id": "e-999"}}))
        .await;
    assert_eq!(no_entry["error"]["code"], "NOT_FOUND");
    let no_arg = agent.call("f2", json!({"type": "session_op", "op": "fork"})).await;
    assert_eq!(no_arg["error"]["code"], "INVALID_REQUEST");
    // Mid-turn, compact and fork conflict.
    agent.call("p1", json!({"type": "prompt", "message": "stream: 40"})).await;
    agent.expect("turn_start").await;
    let (busy, _) = agent.call_during("c3", json!({"type": "session_op", "op": "compact"})).await;
    assert_eq!(busy["error"]["code"], "CONFLICT");
    let (busy, _) = agent
        .call_during(
            "f3",
            json!({"type": "session_op", "op": "fork", "args": {"from_entry_id": "e-1"}}),
        )
        .await;
    assert_eq!(busy["error"]["code"], "CONFLICT");
    let (listed, _) = agent.call_during("l1", json!({"type": "session_op", "op": "list"})).await;
    assert_eq!(listed["data"]["sessions"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn a_fork_is_a_new_session_that_resumes() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let first = agent.turn("first question").await;
    let fork_at =
        find(&first, "message_complete")["message"]["id"].as_str().expect("entry id").to_owned();
    agent.turn("second question").await;
    let forked = agent
        .call("f1", json!({"type": "session_op", "op": "fork", "args": {"from_entry_id": fork_at}}))
        .await;
    assert_eq!(forked["success"], true, "{forked}");
    let fork_session = forked["data"]["session_id"].as_str().expect("session").to_owned();
    assert!(forked["data"]["fork_id"].as_str().expect("fork id").starts_with("fork-"));
    let listed = agent.call("l1", json!({"type": "session_op", "op": "list"})).await;
    let sessions = listed["data"]["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 2);
    let fork_row = sessions
        .iter()
        .find(|row| row["session_id"] == fork_session.as_str())
        .expect("fork listed");
    assert_eq!(fork_row["forked_from"]["entry_id"], fork_at.as_str());
    assert_eq!(fork_row["head_entry_id"], forked["data"]["head_entry_id"]);
    agent.close_stdin();
    agent.wait_exit().await;

    let mut resumed = workspace.start(&["--session", &fork_session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    let texts: Vec<String> = sync["live_window"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["content"][0]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        texts,
        vec!["first question", "You said: first question"],
        "the window as it was at the fork"
    );
    let turn = resumed.turn("on the fork").await;
    assert_eq!(streamed_text(&turn), "You said: on the fork");
}

#[tokio::test]
async fn compaction_summarizes_and_recall_pages_back_through_the_range() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("remember the word pelican").await;
    agent.turn("burst: 300").await;
    agent.turn("burst: 300").await;
    let (response, before) = agent
        .call_during(
            "c1",
            json!({"type": "session_op", "op": "compact", "args": {"keep_recent_tokens": 500}}),
        )
        .await;
    assert_eq!(shape(&before), strs(&["status:compacting", "compaction"]));
    let compaction = &before[1];
    assert_eq!(response["data"]["compacted"], true, "{response}");
    assert_eq!(response["data"]["index"], compaction["index"]);
    assert_eq!(response["data"]["message_range"], compaction["message_range"]);
    assert!(compaction["tokens_after"].as_u64() < compaction["tokens_before"].as_u64());
    assert_eq!(agent.expect("status").await["status"], "idle");

    let turn = agent.turn("recall: 1").await;
    let result = find(&turn, "tool_result");
    let text = result["content"]["text"].as_str().expect("text");
    assert!(text.contains("remember the word pelican"), "{text}");
    let first = compaction["message_range"][0].as_str().expect("first id");
    assert!(text.contains(&format!("[{first}]")), "starts at the range: {text}");

    // The summary is now what the window starts with.
    agent.close_stdin();
    agent.wait_exit().await;
}

#[tokio::test]
async fn compaction_runs_by_itself_once_the_window_is_nearly_full() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("first").await;
    // The demo window is 8192 tokens: a long reply crosses 80 %.
    agent.call("p1", json!({"type": "prompt", "message": "burst: 3200"})).await;
    let rest = agent.until("compaction").await;
    assert_eq!(count(&rest, "turn_end"), 1, "between turns");
    let statuses: Vec<&str> = rest
        .iter()
        .filter(|m| m["type"] == "status")
        .filter_map(|m| m["status"].as_str())
        .collect();
    assert_eq!(statuses, vec!["streaming", "idle", "compacting"]);
    assert_eq!(agent.expect("status").await["status"], "idle");
}

#[tokio::test]
async fn a_corrupt_session_log_is_refused_and_left_untouched() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("something worth keeping").await;
    let listed = agent.call("l1", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    agent.close_stdin();
    agent.wait_exit().await;
    let log = workspace.home.path().join("sessions").join(&session).join("session.jsonl");
    let original = std::fs::read(&log).expect("log");
    let mut bytes = original.clone();
    bytes.truncate(bytes.len() - 10); // a torn last line
    std::fs::write(&log, &bytes).expect("write");

    let mut refused = workspace.start(&["--session", &session]).await;
    refused.expect("hello").await;
    let error = refused.expect("error").await;
    assert_eq!(error["code"], "SESSION_CORRUPT");
    assert_eq!(error["fatal"], true);
    assert!(!refused.wait_exit().await.success());
    assert_eq!(std::fs::read(&log).expect("log"), bytes, "never rewritten");

    // A corrupt line in the middle, the lines after it intact: refused too.
    let mut lines: Vec<Vec<u8>> =
        original.split(|&byte| byte == b'\n').map(<[u8]>::to_vec).collect();
    let middle = lines.len() / 2;
    lines[middle] = b"{\"id\": \"e-9\", \"body\": not json".to_vec();
    let corrupted = lines.join(&b'\n');
    std::fs::write(&log, &corrupted).expect("write");
    let mut refused = workspace.start(&["--session", &session]).await;
    refused.expect("hello").await;
    assert_eq!(refused.expect("error").await["code"], "SESSION_CORRUPT");
    assert!(!refused.wait_exit().await.success());
    assert_eq!(std::fs::read(&log).expect("log"), corrupted, "never rewritten");

    // A line that parses but holds what this version cannot write back (a
    // content block of an unknown type): a sync could not carry it, so the
    // log is refused rather than shown broken (found by fuzz/session_log).
    let mut lines: Vec<Vec<u8>> =
        original.split(|&byte| byte == b'\n').map(<[u8]>::to_vec).collect();
    let unknown = json!({"id": "e-90", "ts": 1, "kind": "assistant", "model": "demo",
                         "content": [{"type": "hologram", "text": "?"}]});
    lines.insert(lines.len() - 1, unknown.to_string().into_bytes());
    let unwritable = lines.join(&b'\n');
    std::fs::write(&log, &unwritable).expect("write");
    let mut refused = workspace.start(&["--session", &session]).await;
    refused.expect("hello").await;
    let error = refused.expect("error").await;
    assert_eq!(error["code"], "SESSION_CORRUPT", "{error}");
    assert!(error["message"].as_str().unwrap_or("").contains("line"), "{error}");
    assert!(!refused.wait_exit().await.success());
    assert_eq!(std::fs::read(&log).expect("log"), unwritable, "never rewritten");

    let mut missing = workspace.start(&["--session", "sess-doesnotexist"]).await;
    missing.expect("hello").await;
    assert_eq!(missing.expect("error").await["code"], "NOT_FOUND");
}

#[tokio::test]
async fn a_resumed_session_shows_its_window_and_mode() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("keep this").await;
    agent.call_during("m1", json!({"type": "set_mode", "mode": "plan"})).await;
    let listed = agent.call_during("l1", json!({"type": "session_op", "op": "list"})).await.0;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    assert_eq!(sync["mode"], "plan");
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["content"][0]["text"], "You said: keep this");
}

#[tokio::test]
async fn closing_stdin_refuses_open_questions_and_exits() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "run: echo late"})).await;
    agent.until("permission_request").await;
    agent.close_stdin();
    let rest = agent.until("turn_end").await;
    let resolved = find(&rest, "permission_resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("deny"), Some("headless"))
    );
    assert_eq!(find(&rest, "tool_result")["is_error"], true);
    assert!(agent.wait_exit().await.success());
}

#[tokio::test]
async fn a_crash_mid_turn_loses_only_the_unfinished_turn() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("this one is finished").await;
    let listed = agent.call("l1", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    agent.call("p1", json!({"type": "prompt", "message": "stream: 500"})).await;
    agent.until("message_delta").await;
    agent.child.start_kill().expect("SIGKILL");
    agent.wait_exit().await;

    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    let texts: Vec<&str> =
        messages.iter().filter_map(|message| message["content"][0]["text"].as_str()).collect();
    // The finished turn is whole; of the unfinished one at most its prompt
    // survived (entries are written as they happen), never a partial reply.
    assert_eq!(texts[..2], ["this one is finished", "You said: this one is finished"]);
    assert!(texts[2..].iter().all(|text| *text == "stream: 500"), "{texts:?}");
    let turn = resumed.turn("and on we go").await;
    assert_eq!(streamed_text(&turn), "You said: and on we go");
}

#[tokio::test]
async fn an_abort_the_instant_streaming_starts_is_answered_and_settles_idle() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    for round in 0..20 {
        let prompt = format!("p{round}");
        let response =
            agent.call(&prompt, json!({"type": "prompt", "message": "stream: 3000"})).await;
        assert_eq!(response["success"], true, "{response}");
        agent
            .until_match(|message| message["type"] == "status" && message["status"] == "streaming")
            .await;
        let (response, before) =
            agent.call_during(&format!("a{round}"), json!({"type": "abort"})).await;
        assert_eq!(response["success"], true, "{response}");
        let settled = shape(&before);
        assert_eq!(settled.last().map(String::as_str), Some("status:idle"), "{settled:?}");
        assert!(settled.contains(&"turn_end".to_owned()), "{settled:?}");
    }
    agent.silent_for(200).await;
}

#[tokio::test]
async fn an_aborted_turn_ends_saying_so_and_names_what_it_dropped() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p", json!({"type": "prompt", "message": "stream: 3000"})).await;
    agent
        .until_match(|message| message["type"] == "status" && message["status"] == "streaming")
        .await;
    for (id, behavior, text) in [
        ("f", "follow_up", "then this"),
        ("s", "steer", "steer that"),
        ("g", "follow_up", "and last"),
    ] {
        let command = json!({"type": "prompt", "message": text, "streaming_behavior": behavior});
        let (queued, _) = agent.call_during(id, command).await;
        assert_eq!(queued["success"], true, "{queued}");
    }
    let (response, before) = agent.call_during("a", json!({"type": "abort"})).await;
    assert_eq!(response["success"], true, "{response}");
    let ended = find(&before, "turn_end");
    assert_eq!(ended["aborted"], true, "{ended}");
    assert_eq!(ended["dropped"], json!(["then this", "steer that", "and last"]), "in queued order");
    // The reply it cut off (here before its first word) says so, and keeps
    // saying so after a restart.
    let cut = find(&before, "message_complete");
    assert_eq!(cut["message"]["aborted"], true, "{cut}");

    // A turn that ends by itself says neither.
    let turn = agent.turn("hello").await;
    let ended = find(&turn, "turn_end");
    assert!(ended.get("aborted").is_none() && ended.get("dropped").is_none(), "{ended}");
    let whole = find(&turn, "message_complete");
    assert!(whole["message"].get("aborted").is_none(), "{whole}");
    let listed = agent.call("l1", json!({"type": "session_op", "op": "list"})).await;
    let session = listed["data"]["active"].as_str().expect("id").to_owned();
    // Nor does one aborted with nothing queued drop anything.
    agent.call("p2", json!({"type": "prompt", "message": "stream: 3000"})).await;
    agent
        .until_match(|message| message["type"] == "status" && message["status"] == "streaming")
        .await;
    let (_, before) = agent.call_during("a2", json!({"type": "abort"})).await;
    let ended = find(&before, "turn_end");
    assert_eq!(ended["aborted"], true, "{ended}");
    assert!(ended.get("dropped").is_none(), "{ended}");

    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    let mut resumed = workspace.start(&["--session", &session]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    let replies: Vec<bool> = sync["live_window"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == "assistant")
        .map(|message| message["aborted"] == true)
        .collect();
    assert_eq!(replies, [true, false, true], "{sync}");
}

#[tokio::test]
async fn steer_and_follow_up_queues_are_bounded_and_say_so() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p", json!({"type": "prompt", "message": "stream: 3000"})).await;
    agent
        .until_match(|message| message["type"] == "status" && message["status"] == "streaming")
        .await;
    // One model call streams for 30 s: no boundary takes the queued steers.
    for behavior in ["steer", "follow_up"] {
        for index in 0..32 {
            let command = json!({"type": "prompt", "message": format!("more {index}"),
                                 "streaming_behavior": behavior});
            let (response, _) = agent.call_during(&format!("{behavior}-{index}"), command).await;
            assert_eq!(response["success"], true, "{response}");
        }
        let command =
            json!({"type": "prompt", "message": "one too many", "streaming_behavior": behavior});
        let (refused, _) = agent.call_during(&format!("{behavior}-full"), command).await;
        assert_eq!(refused["success"], false, "{refused}");
        assert_eq!(refused["error"]["code"], "CONFLICT", "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap_or("").contains("queue is full"));
    }
    let (aborted, _) = agent.call_during("a", json!({"type": "abort"})).await;
    assert_eq!(aborted["success"], true, "an abort clears both queues");
    let turn = agent.turn("still there?").await;
    assert_eq!(streamed_text(&turn), "You said: still there?");
}

#[tokio::test]
async fn pace_streams_deltas_at_a_rate_each_stamped_with_the_time_it_was_made() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let micros = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_micros() as u64
    };
    let before = micros();
    let turn = agent.turn("pace: 20 200").await;
    let after = micros();
    let stamps: Vec<(u64, u64)> = streamed_text(&turn)
        .split_whitespace()
        .map(|tick| {
            let (index, stamp) =
                tick.strip_prefix("tick-").and_then(|rest| rest.split_once('@')).expect(tick);
            (index.parse().expect("index"), stamp.parse().expect("stamp"))
        })
        .collect();
    let indices: Vec<u64> = stamps.iter().map(|(index, _)| *index).collect();
    assert_eq!(indices, (1..=20).collect::<Vec<_>>());
    assert!(stamps.windows(2).all(|pair| pair[0].1 <= pair[1].1), "stamps only grow");
    assert!(stamps.iter().all(|(_, stamp)| (before..=after).contains(stamp)));
    // 20 deltas at 200 a second: the first is at once, the last 19 ticks
    // (95 ms) later, never sooner.
    let span = stamps[19].1 - stamps[0].1;
    assert!(span >= 90_000, "paced, not burst: {span} µs");
}

#[tokio::test]
async fn tool_processes_see_no_provider_key_and_no_shard_variable() {
    let workspace = Workspace::new();
    std::fs::write(
        workspace.home.path().join("config.toml"),
        r#"
[[models]]
id = "custom"
provider = "openai"
model = "some-model"
base_url = "http://127.0.0.1:9"
api_key_env = "CUSTOM_PROVIDER_KEY"

[tools]
hide_env = ["MY_TOKEN", "CORP_*"]
"#,
    )
    .expect("config");
    let secrets = [
        ("CUSTOM_PROVIDER_KEY", "ck-secret-1"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret-2"),
        ("OPENAI_API_KEY", "sk-secret-3"),
        ("MY_TOKEN", "tok-secret-4"),
        ("CORP_VAULT_TOKEN", "vault-secret-5"),
        ("SHARD_EXTRA", "shard-secret-6"),
    ];
    let mut env = secrets.to_vec();
    env.push(("VISIBLE_SETTING", "plainly-visible"));
    let mut agent = super::agent_support::AgentProc::spawn_with_env(
        workspace.home.path(),
        workspace.project.path(),
        &[],
        &env,
    )
    .await;
    agent.expect("hello").await;
    agent.expect("sync").await;
    // Its own environment, and the agent's as the kernel shows it: what the
    // agent was started with, whatever it removed since (unless it is
    // another image by then).
    let command =
        "run: env; echo done-listing; tr '\\0' '\\n' < /proc/$PPID/environ; echo done-agent";
    agent.call("p1", json!({"type": "prompt", "message": command})).await;
    answer_permission(&mut agent, json!({"decision": "allow"})).await;
    let turn = agent.until("turn_end").await;
    let result = find(&turn, "tool_result").to_string();
    assert!(result.contains("done-listing") && result.contains("done-agent"), "{result}");
    assert_eq!(
        result.matches("VISIBLE_SETTING=plainly-visible").count(),
        2,
        "the rest stays, in both: {result}"
    );
    for (name, value) in secrets {
        assert!(!result.contains(value), "{name} reached the tool: {result}");
    }
    // Nor, then, the session log.
    agent.expect("status").await;
    for entry in walk(workspace.home.path()) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        for (name, value) in secrets {
            assert!(!text.contains(value), "{name} is in {}", entry.display());
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A detail of a permission request by label.
fn detail(request: &Value, label: &str) -> Option<String> {
    request["details"]
        .as_array()?
        .iter()
        .find(|detail| detail["label"] == label)
        .and_then(|detail| detail["value"].as_str())
        .map(str::to_owned)
}

#[tokio::test]
async fn a_bash_approval_shows_the_exact_command_and_where_it_runs() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    // Longer than the prompt's one-line summary, with quotes, `$` and `;`
    // that a shortened or re-quoted display would change.
    let padding = "x".repeat(300);
    let command = format!(r#"printf '%s' "$HOME" ; echo '{padding}' | wc -c && test -n "a;b""#);
    agent.call("p", json!({"type": "prompt", "message": format!("run: {command}")})).await;
    let request = answer_permission(&mut agent, json!({"decision": "deny"})).await;
    assert_eq!(request["tool_name"], "bash");
    assert_eq!(detail(&request, "command").as_deref(), Some(command.as_str()), "{request}");
    let cwd = workspace.project.path().canonicalize().expect("cwd").display().to_string();
    assert_eq!(detail(&request, "working directory").as_deref(), Some(cwd.as_str()));
    assert_eq!(request["input"]["command"], command.as_str(), "what runs is what was shown");
    agent.until("turn_end").await;
}

#[tokio::test]
async fn a_write_approval_names_the_file_it_will_really_change_with_all_its_content() {
    let workspace = Workspace::new();
    let outside = tempfile::TempDir::new().expect("outside");
    let victim = outside.path().join("bashrc");
    std::fs::write(&victim, "original\n").expect("victim");
    // A symlink committed in the repository, pointing out of it.
    std::os::unix::fs::symlink(&victim, workspace.path("notes.txt")).expect("symlink");
    let real_victim = victim.canonicalize().expect("canonical").display().to_string();
    let mut agent = workspace.ready(&[]).await;

    let long: Vec<String> = (0..400).map(|line| format!("line {line} of the content")).collect();
    let message = format!("write: notes.txt\n{}", long.join("\n"));
    agent.call("p1", json!({"type": "prompt", "message": message})).await;
    let request = answer_permission(&mut agent, json!({"decision": "deny"})).await;
    let prompt = request["prompt"].as_str().expect("prompt");
    assert!(prompt.contains(&real_victim), "{prompt}");
    assert!(prompt.contains("outside the working directory"), "{prompt}");
    assert!(prompt.contains("symbolic link"), "{prompt}");
    assert_eq!(detail(&request, "file").as_deref(), Some(real_victim.as_str()));
    assert!(detail(&request, "warning").is_some_and(|warning| warning.contains("notes.txt")));
    let content = detail(&request, "content").expect("content");
    assert!(
        content.contains("line 0 of") && content.contains("line 399 of"),
        "cut: {} bytes",
        content.len()
    );
    agent.until("turn_end").await;
    agent.expect("status").await;
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "original\n");

    // `..` is resolved too, and an ordinary file inside warns of nothing.
    std::fs::create_dir(workspace.path("sub")).expect("sub");
    agent.call("p2", json!({"type": "prompt", "message": "write: sub/../../escape.txt\nx"})).await;
    let request = answer_permission(&mut agent, json!({"decision": "deny"})).await;
    let escaped = workspace.project.path().canonicalize().expect("project");
    let escaped = escaped.parent().expect("parent").join("escape.txt").display().to_string();
    assert_eq!(detail(&request, "file").as_deref(), Some(escaped.as_str()));
    assert!(request["prompt"].as_str().expect("prompt").contains("outside the working directory"));
    agent.until("turn_end").await;
    agent.expect("status").await;
    agent.call("p3", json!({"type": "prompt", "message": "write: plain.txt\nx"})).await;
    let request = answer_permission(&mut agent, json!({"decision": "deny"})).await;
    assert!(detail(&request, "warning").is_none(), "{request}");
    assert!(!request["prompt"].as_str().expect("prompt").contains('('), "{request}");
}

/// The peak resident memory of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
}

#[tokio::test]
async fn read_pages_a_huge_file_in_little_memory_and_refuses_a_fifo() {
    let workspace = Workspace::new();
    // A page of the file fills the demo model's small context at once.
    std::fs::write(workspace.home.path().join("config.toml"), "[compaction]\nenabled = false\n")
        .expect("config");
    // 200 MB of text: the old `read` loaded it whole before paging.
    {
        use std::io::Write;
        let file = std::fs::File::create(workspace.path("big.log")).expect("big");
        let mut out = std::io::BufWriter::new(file);
        for line in 0..4_000_000u32 {
            writeln!(out, "log line {line:>10} of a very large file, padded to fifty")
                .expect("write");
        }
    }
    let mut agent = workspace.ready(&[]).await;
    let pid = agent.child.id().expect("pid");
    let turn = agent.turn("read: big.log").await;
    let result = find(&turn, "tool_result");
    let text = result["content"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("log line          0 of"), "{}", &text[..200.min(text.len())]);
    assert!(text.contains("[lines 1-"), "the page says there is more");
    let peak = peak_rss(pid);
    assert!(peak < 80 * 1024 * 1024, "the agent peaked at {} MB reading it", peak / 1024 / 1024);

    // A FIFO would block the tool forever: refused at once.
    let fifo = workspace.path("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let turn = agent.turn("read: pipe").await;
    let result = find(&turn, "tool_result");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(result.to_string().contains("not a regular file"), "{result}");
}

#[tokio::test]
async fn a_session_log_left_readable_by_others_is_made_private_when_resumed() {
    use std::os::unix::fs::PermissionsExt;
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("hello").await;
    let (response, _) = agent.call_during("l1", json!({"type": "session_op", "op": "list"})).await;
    let session = response["data"]["active"].as_str().expect("session id").to_owned();
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());
    let dir = workspace.home.path().join("sessions").join(&session);
    let log = dir.join("session.jsonl");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut resumed = workspace.ready(&["--session", &session]).await;
    resumed.turn("again").await;
    assert_eq!(std::fs::metadata(&dir).expect("dir").permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&log).expect("log").permissions().mode() & 0o777, 0o600);
}

#[tokio::test]
async fn a_tool_error_about_a_hostile_path_comes_back_clean() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let turn = agent.turn("read: gone\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}\0.txt").await;
    let result = find(&turn, "tool_result");
    assert_eq!(result["is_error"], true);
    let message = result["content"]["message"].as_str().expect("an error message");
    assert!(message.contains("gone"), "{message:?}");
    assert!(
        !message.chars().any(|c| (c < ' ' && c != '\n' && c != '\t') || c == '\u{202e}'),
        "{message:?}"
    );
}

/// The user texts of the agent's (single) session log, in order.
fn logged_user_texts(workspace: &Workspace) -> Vec<String> {
    let session = std::fs::read_dir(workspace.home.path().join("sessions"))
        .expect("sessions")
        .flatten()
        .next()
        .expect("a session");
    let log = std::fs::read_to_string(session.path().join("session.jsonl")).expect("log");
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["kind"] == "user")
        .filter_map(|entry| entry["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn recall_steer_takes_back_the_newest_queued_input_before_it_lands() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    let nothing = json!({"recalled": null});
    let idle = agent.call("r0", json!({"type": "recall_steer"})).await;
    assert_eq!((&idle["success"], &idle["data"]), (&json!(true), &nothing), "{idle}");

    agent.call("p1", json!({"type": "prompt", "message": "stream: 200"})).await;
    agent.expect("turn_start").await;
    let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"});
    for (id, command) in [
        ("s1", json!({"type": "steer", "message": "first"})),
        (
            "f1",
            json!({"type": "prompt", "message": "second", "streaming_behavior": "follow_up",
                "images": [image]}),
        ),
    ] {
        let (queued, _) = agent.call_during(id, command).await;
        assert_eq!(queued["success"], true, "{queued}");
    }
    let mut recalled = Vec::new();
    for id in ["r1", "r2", "r3"] {
        let (response, _) = agent.call_during(id, json!({"type": "recall_steer"})).await;
        assert_eq!(response["success"], true, "{response}");
        assert_eq!(response["command"], "recall_steer");
        recalled.push(response["data"].clone());
    }
    assert_eq!(
        recalled,
        vec![
            json!({"recalled": {"message": "second", "streaming_behavior": "follow_up", "images": 1}}),
            json!({"recalled": {"message": "first", "streaming_behavior": "steer"}}),
            nothing.clone(),
        ]
    );

    // What is not recalled lands as usual, and is no longer recallable.
    let (queued, _) = agent.call_during("s2", json!({"type": "steer", "message": "third"})).await;
    assert_eq!(queued["success"], true);
    let rest = agent.until("turn_end").await;
    assert!(streamed_text(&rest).ends_with("You said: third"), "{}", streamed_text(&rest));
    assert_eq!(agent.expect("status").await["status"], "idle");
    agent.silent_for(300).await; // the recalled follow-up never starts a turn
    let after = agent.call("r4", json!({"type": "recall_steer"})).await;
    assert_eq!(after["data"], nothing);
    assert_eq!(logged_user_texts(&workspace), vec!["stream: 200", "third"]);
}

#[tokio::test]
async fn recall_steer_never_takes_back_a_pinned_input_such_as_a_completion_report() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.call("p1", json!({"type": "prompt", "message": "stream: 200"})).await;
    agent.expect("turn_start").await;
    for (id, command) in [
        ("s1", json!({"type": "steer", "message": "mine"})),
        (
            "s2",
            json!({"type": "prompt", "message": "a subagent's report", "streaming_behavior": "steer",
                "pinned": true}),
        ),
    ] {
        let (queued, _) = agent.call_during(id, command).await;
        assert_eq!(queued["success"], true, "{queued}");
    }
    // The newest is the report: passed over, the person's own steer comes back.
    let (first, _) = agent.call_during("r1", json!({"type": "recall_steer"})).await;
    assert_eq!(
        first["data"],
        json!({"recalled": {"message": "mine", "streaming_behavior": "steer"}})
    );
    let (second, _) = agent.call_during("r2", json!({"type": "recall_steer"})).await;
    assert_eq!(second["data"], json!({"recalled": null}));
    agent.until("turn_end").await;
    assert_eq!(logged_user_texts(&workspace), vec!["stream: 200", "a subagent's report"]);
}

#[tokio::test]
async fn session_op_list_shows_the_whole_lineage_from_a_fork() {
    let workspace = Workspace::new();
    let mut agent = workspace.ready(&[]).await;
    agent.turn("the first question\nwith a second line").await;
    agent.turn("a later question").await;
    let listed = agent.call("l", json!({"type": "session_op", "op": "list"})).await;
    let root = listed["data"]["active"].as_str().expect("active").to_owned();
    agent.close_stdin();
    assert!(agent.wait_exit().await.success());

    // Resumed, the session's live window names its messages by entry id.
    let mut resumed = workspace.start(&["--session", &root]).await;
    resumed.expect("hello").await;
    let sync = resumed.expect("sync").await;
    let first = sync["live_window"]["messages"][0].clone();
    assert_eq!(first["content"][0]["text"], "the first question\nwith a second line");
    let first_id = first["id"].as_str().expect("id").to_owned();
    let forked = resumed
        .call("f", json!({"type": "session_op", "op": "fork", "args": {"from_entry_id": first_id}}))
        .await;
    assert_eq!(forked["success"], true, "{forked}");
    let fork = forked["data"]["session_id"].as_str().expect("fork id").to_owned();

    // A second process on the fork sees the root above it.
    let mut on_fork = workspace.ready(&["--session", &fork]).await;
    let listed = on_fork.call("l", json!({"type": "session_op", "op": "list"})).await;
    let data = &listed["data"];
    assert_eq!(data["active"], fork.as_str(), "{listed}");
    let sessions = data["sessions"].as_array().expect("sessions");
    let ids: Vec<&str> = sessions.iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!(ids, vec![root.as_str(), fork.as_str()], "oldest first: {listed}");
    for session in sessions {
        assert_eq!(session["title"], "the first question", "first line only: {session}");
        let (created, updated) = (session["created_at"].as_u64(), session["updated_at"].as_u64());
        assert!(created.is_some() && updated >= created, "{session}");
    }
    assert!(sessions[0].get("forked_from").is_none());
    assert_eq!(sessions[1]["forked_from"], json!({"session_id": root, "entry_id": first_id}));
    assert_eq!(sessions[0]["entries"].as_u64().map(|n| n >= 5), Some(true), "{listed}");
}
