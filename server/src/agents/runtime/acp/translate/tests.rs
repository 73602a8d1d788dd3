//! The translator driven line by line, as the bridge drives it.

use serde_json::{Value, json};

use super::testing::{agent, host, types};
use super::*;

fn start(cwd: &str) -> Start {
    Start { cwd: PathBuf::from(cwd), runtime: "fake".to_owned(), ..Start::default() }
}

/// A translator past `initialize` and `session/new`.
fn ready() -> Translator {
    ready_with(json!({}))
}

/// A translator past `initialize`, whose agent said it has
/// `capabilities`, and `session/new`.
fn ready_with(capabilities: Value) -> Translator {
    ready_with_info(capabilities, json!(null))
}

/// The same, the agent naming itself with `info` (`agentInfo`).
fn ready_with_info(capabilities: Value, info: Value) -> Translator {
    let (mut translator, out) = Translator::start(start("/work"));
    let initialize = &agent(&out)[0];
    assert_eq!(initialize["method"], "initialize");
    let out = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": initialize["id"],
                "result": {"protocolVersion": 1, "agentCapabilities": capabilities,
                           "agentInfo": info}})
        .to_string(),
    );
    let new = &agent(&out)[0];
    assert_eq!(new["method"], "session/new");
    assert_eq!(new["params"]["cwd"], "/work");
    let out = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1",
                "modes": {"currentModeId": "plan", "availableModes": [{"id": "plan", "name": "Plan"}]}}})
        .to_string(),
    );
    let lines = host(&out);
    assert_eq!(types(&lines), ["hello", "sync"]);
    assert_eq!(lines[1]["mode"], "plan");
    translator
}

fn update(kind: &str, extra: Value) -> String {
    let mut update = json!({"sessionUpdate": kind});
    update.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1", "update": update}})
        .to_string()
}

#[test]
fn a_prompt_is_a_turn_of_deltas_completed_and_recorded() {
    let mut translator = ready();
    let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "hello"}"#);
    let lines = host(&out);
    assert_eq!(types(&lines), ["response", "turn_start", "status"]);
    assert_eq!(lines[0]["id"], "c1");
    assert_eq!(lines[0]["success"], true);
    assert!(out.contains(&Out::Prompted {
        text: "hello".to_owned(),
        images: Vec::new(),
        queued_entry_id: None,
        turn_id: lines[1]["turn_id"].as_str().expect("a turn id").to_owned(),
    }));
    let prompt = &agent(&out)[0];
    assert_eq!(prompt["method"], "session/prompt");
    assert_eq!(prompt["params"]["prompt"][0]["text"], "hello");

    let thought = translator.from_agent(&update(
        "agent_thought_chunk",
        json!({"content": {"type": "text", "text": "hmm"}}),
    ));
    let first = translator.from_agent(&update(
        "agent_message_chunk",
        json!({"content": {"type": "text", "text": "hi "}}),
    ));
    let second = translator.from_agent(&update(
        "agent_message_chunk",
        json!({"content": {"type": "text", "text": "there"}}),
    ));
    let deltas: Vec<Value> = [thought, first, second].iter().flat_map(|out| host(out)).collect();
    assert_eq!(types(&deltas), ["message_delta"; 3]);
    assert_eq!(deltas[0]["kind"], "thinking");
    assert_eq!(
        (deltas[1]["block_index"].as_u64(), deltas[2]["block_index"].as_u64()),
        (Some(1), Some(1))
    );

    let done = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}})
            .to_string(),
    );
    let lines = host(&done);
    assert_eq!(types(&lines), ["message_complete", "turn_end", "status"]);
    assert_eq!(lines[0]["message"]["content"][1]["text"], "hi there");
    assert_eq!(lines[0]["message_id"], deltas[1]["message_id"]);
    assert_eq!(lines[2]["status"], "idle");
    assert!(done.iter().any(|out| matches!(out, Out::Log(EntryBody::Assistant { .. }))));
}

#[test]
fn a_permission_request_is_shards_own_and_the_option_chosen_is_the_agents() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "run: ls"}"#);
    let ask = json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission",
        "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "t1", "title": "Run ls", "rawInput": {"command": "ls"}},
                   "options": [{"optionId": "allow", "name": "Yes", "kind": "allow_once"},
                               {"optionId": "always", "name": "Always", "kind": "allow_always"},
                               {"optionId": "nope", "name": "No", "kind": "reject_once"}]}});
    let asked = host(&translator.from_agent(&ask.to_string()));
    assert_eq!(types(&asked), ["message_complete", "tool_call", "permission_request", "status"]);
    assert_eq!(asked[3]["status"], "waiting_for_permission", "as Shard's own agent says");
    let request = &asked[2];
    assert_eq!(request["options"], json!(["allow", "allow_always", "deny"]));
    assert_eq!(request["choices"][2]["label"], "No");
    assert_eq!(request["choices"][2]["intent"], "deny");
    assert_eq!(request["input"]["command"], "ls");

    let request_id = request["request_id"].as_str().unwrap();
    let answer = json!({"id": "a1", "type": "permission_response", "request_id": request_id, "decision": "deny"});
    let out = translator.from_host(&answer.to_string());
    let told = host(&out);
    assert_eq!(types(&told), ["response", "permission_resolved", "status"]);
    assert_eq!(told[1]["decision"], "deny");
    assert_eq!(told[2]["status"], "streaming", "the turn goes on");
    let reply = &agent(&out)[0];
    assert_eq!(reply["id"], 0, "answered under the agent's own id");
    assert_eq!(reply["result"]["outcome"], json!({"outcome": "selected", "optionId": "nope"}));
    // A second answer finds nothing open and sends the agent nothing.
    let again = translator.from_host(&answer.to_string());
    assert!(agent(&again).is_empty());
}

#[test]
fn an_abort_cancels_the_turn_and_every_open_question() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "run: ls"}"#);
    let ask = json!({"jsonrpc": "2.0", "id": "q", "method": "session/request_permission",
        "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "t1"},
                   "options": [{"optionId": "y", "name": "Yes", "kind": "allow_once"}]}});
    translator.from_agent(&ask.to_string());
    let out = translator.from_host(r#"{"id": "c2", "type": "abort"}"#);
    let sent = agent(&out);
    let told = host(&out);
    assert_eq!(types(&told), ["response", "permission_resolved", "status"]);
    assert_eq!(told[2]["status"], "streaming", "until the agent ends the turn");
    assert_eq!(sent[0]["id"], "q");
    assert_eq!(sent[0]["result"]["outcome"], json!({"outcome": "cancelled"}));
    assert_eq!(sent[1]["method"], "session/cancel");
    let prompt_id = 2; // initialize 0, session/new 1
    let ended = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "cancelled"}})
            .to_string(),
    );
    let lines = host(&ended);
    assert_eq!(types(&lines), ["tool_result", "turn_end", "status"]);
    assert_eq!(lines[0]["is_error"], true, "a call cut short by the turn's end ends with it");
    assert_eq!(lines[1]["aborted"], true, "{:?}", lines[1]);
    assert!(lines[1].get("dropped").is_none(), "nothing was queued: {:?}", lines[1]);
}

#[test]
fn a_write_to_git_is_asked_first_and_served_only_when_allowed() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
    let write = |id: u32, path: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
               "params": {"sessionId": "s-1", "path": path, "content": "[core]"}})
        .to_string()
    };
    // An ordinary file goes to the bridge at once.
    let plain = translator.from_agent(&write(7, "/work/a.txt"));
    assert!(matches!(plain.as_slice(), [Out::Fs(_, FsRequest::Write(_))]), "{plain:?}");

    let asked = host(&translator.from_agent(&write(8, "/work/.git/config")));
    assert_eq!(types(&asked), ["permission_request", "status"]);
    assert_eq!(asked[0]["tool_name"], "write");
    assert_eq!(asked[0]["input"]["path"], "/work/.git/config");
    assert_eq!(asked[0]["options"], json!(["allow", "deny"]), "nothing remembered");
    assert_eq!(asked[1]["status"], "waiting_for_permission");
    let answer = |request: &Value, decision: &str| {
        json!({"id": "a", "type": "permission_response", "request_id": request["request_id"],
               "decision": decision})
        .to_string()
    };
    let denied = translator.from_host(&answer(&asked[0], "deny"));
    assert!(!denied.iter().any(|out| matches!(out, Out::Fs(..))), "{denied:?}");
    let refused = &agent(&denied)[0];
    assert_eq!(refused["id"], 8);
    assert!(refused["error"]["data"].to_string().contains("did not allow"), "{refused}");
    assert_eq!(host(&denied).last().unwrap()["status"], "streaming");

    let asked = host(&translator.from_agent(&write(9, "/work/.git/config")));
    let allowed = translator.from_host(&answer(&asked[0], "allow"));
    let served = allowed.iter().find_map(|out| match out {
        Out::Fs(id, FsRequest::Write(write)) => Some((id.clone(), write.path.clone())),
        _ => None,
    });
    assert_eq!(served, Some((acp::RequestId::Number(9), PathBuf::from("/work/.git/config"))));

    // An abort answers an open one as cancelled.
    translator.from_agent(&write(10, "/work/.bashrc"));
    let aborted = translator.from_host(r#"{"id": "c2", "type": "abort"}"#);
    let cancelled = &agent(&aborted)[0];
    assert_eq!(cancelled["id"], 10);
    assert_eq!(cancelled["error"]["code"], -32800, "{cancelled}");
}

#[test]
fn what_cannot_be_done_is_said_and_a_tool_call_is_shown() {
    let mut translator = ready();
    let out = translator.from_host(r#"{"id": "m", "type": "set_model", "model": "x"}"#);
    let refused = &host(&out)[0];
    assert_eq!(refused["id"], "m");
    assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
    let busy = host(&translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "y"}"#));
    assert_eq!(busy[0]["error"]["code"], "CONFLICT");
    let call = translator.from_agent(&update(
        "tool_call",
        json!({"toolCallId": "t1", "title": "Read a.txt", "rawInput": {"path": "a.txt"}}),
    ));
    assert_eq!(types(&host(&call)), ["message_complete", "tool_call"]);
    let done = translator.from_agent(&update(
        "tool_call_update",
        json!({"toolCallId": "t1", "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "contents"}}]}),
    ));
    let result = &host(&done)[0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["content"]["text"], "contents");
    let failed = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom"}})
            .to_string(),
    );
    let lines = host(&failed);
    assert_eq!(types(&lines), ["error", "turn_end", "status"]);
    assert!(lines[0]["message"].as_str().unwrap().contains("boom"));
}

#[test]
fn an_agent_of_another_protocol_version_or_that_cannot_open_a_session_is_fatal() {
    let (mut translator, _) = Translator::start(start("/w"));
    let out =
        translator.from_agent(r#"{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 2}}"#);
    assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("version 2")), "{out:?}");
    let (mut translator, _) = Translator::start(start("/w"));
    translator.from_agent(r#"{"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}"#);
    let out = translator.from_agent(
        r#"{"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "login first"}}"#,
    );
    assert!(matches!(&out[..], [Out::Fatal(why)] if why.contains("login first")), "{out:?}");
}

/// The id of the newest request sent to the agent among `out`.
fn asked_id(out: &[Out]) -> Value {
    agent(out).last().expect("a request")["id"].clone()
}

fn answer(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

#[test]
fn a_follow_up_is_recorded_before_it_is_accepted_and_starts_the_next_turn() {
    let mut translator = ready();
    let first = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "one"}"#);
    let prompt = asked_id(&first);
    let steer = host(&translator.from_host(r#"{"id": "s", "type": "steer", "message": "x"}"#));
    assert_eq!(steer[0]["error"]["code"], "CONFLICT");
    assert!(steer[0]["error"]["message"].as_str().unwrap().contains("follow-up"), "{steer:?}");

    let out = translator.from_host(
        r#"{"id": "c2", "type": "prompt", "message": "two", "streaming_behavior": "follow_up"}"#,
    );
    let [Out::Queue(queueing)] = &out[..] else { panic!("not queued first: {out:?}") };
    assert_eq!((queueing.text.as_str(), queueing.reply.as_deref()), ("two", Some("c2")));
    let undelivered = |entry: &str, text: &str| Undelivered {
        entry_id: entry.to_owned(),
        text: text.to_owned(),
        images: Vec::new(),
        behavior: StreamingBehavior::FollowUp,
        pinned: false,
    };
    let accepted = host(&translator.queued(Some("c2".into()), undelivered("e-7", "two")));
    assert_eq!(
        (accepted[0]["id"].as_str(), accepted[0]["success"].as_bool()),
        (Some("c2"), Some(true))
    );
    translator.queued(None, undelivered("e-8", "three"));
    let recalled = translator.from_host(r#"{"id": "r", "type": "recall_steer"}"#);
    assert_eq!(host(&recalled)[0]["data"]["recalled"]["message"], "three", "{recalled:?}");
    assert!(recalled.contains(&Out::Log(EntryBody::Unqueued {
        queued_entry_id: "e-8".into(),
        reason: shard_platform::session_log::UnqueueReason::Recalled,
    })));

    let ended = translator.from_agent(&answer(&prompt, json!({"stopReason": "end_turn"})));
    assert_eq!(types(&host(&ended)), ["turn_end", "status", "turn_start", "status"]);
    let delivered = ended.iter().any(|out| {
        matches!(out, Out::Prompted { text, queued_entry_id, .. }
            if text == "two" && queued_entry_id.as_deref() == Some("e-7"))
    });
    assert!(delivered, "{ended:?}");
    assert_eq!(agent(&ended)[0]["params"]["prompt"][0]["text"], "two");
}

#[test]
fn held_the_turn_in_progress_ends_and_what_is_prompted_next_waits_until_released() {
    let mut translator = ready();
    let first = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "one"}"#);
    let prompt = asked_id(&first);
    let held =
        translator.from_host(r#"{"id": "h", "type": "hold", "held": true, "reason": "cap"}"#);
    assert_eq!(host(&held)[0]["success"], true);
    assert!(agent(&held).is_empty(), "the turn in progress is not cancelled");
    let ended = translator.from_agent(&answer(&prompt, json!({"stopReason": "end_turn"})));
    assert_eq!(types(&host(&ended)), ["turn_end", "status"]);

    // Between turns, held: a prompt is recorded and waits, paused.
    let out = translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "two"}"#);
    let [Out::Queue(queueing)] = &out[..] else { panic!("not queued: {out:?}") };
    assert_eq!(queueing.text, "two");
    let waiting = Undelivered {
        entry_id: "e-2".to_owned(),
        text: "two".to_owned(),
        images: Vec::new(),
        behavior: StreamingBehavior::FollowUp,
        pinned: false,
    };
    let queued = host(&translator.queued(Some("c2".into()), waiting));
    assert_eq!(types(&queued), ["response", "status"]);
    assert_eq!(
        (queued[1]["status"].as_str(), queued[1]["detail"].as_str()),
        (Some("paused"), Some("cap"))
    );

    let released = translator.from_host(r#"{"type": "hold", "held": false}"#);
    assert_eq!(types(&host(&released)), ["response", "turn_start", "status"]);
    assert_eq!(agent(&released)[0]["params"]["prompt"][0]["text"], "two");
}

#[test]
fn an_abort_drops_the_queued_follow_ups_and_the_turns_end_names_them() {
    let mut translator = ready();
    let first = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "one"}"#);
    let prompt = asked_id(&first);
    for (entry, text) in [("e-7", "two"), ("e-8", "three")] {
        let undelivered = Undelivered {
            entry_id: entry.to_owned(),
            text: text.to_owned(),
            images: Vec::new(),
            behavior: StreamingBehavior::FollowUp,
            pinned: false,
        };
        translator.queued(None, undelivered);
    }
    let aborted = translator.from_host(r#"{"id": "a", "type": "abort"}"#);
    let unqueued = aborted.iter().filter(|out| matches!(out, Out::Log(EntryBody::Unqueued { .. })));
    assert_eq!(unqueued.count(), 2, "{aborted:?}");
    let ended = translator.from_agent(&answer(&prompt, json!({"stopReason": "cancelled"})));
    let lines = host(&ended);
    assert_eq!(types(&lines), ["turn_end", "status"], "nothing is left to start");
    assert_eq!(lines[0]["aborted"], true);
    assert_eq!(lines[0]["dropped"], json!(["two", "three"]), "oldest first");
}

#[test]
fn a_reply_an_abort_cut_off_is_completed_and_recorded_as_aborted() {
    let mut translator = ready();
    let first = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "one"}"#);
    let prompt = asked_id(&first);
    translator.from_agent(&update(
        "agent_message_chunk",
        json!({"content": {"type": "text", "text": "half a "}}),
    ));
    translator.from_host(r#"{"id": "a", "type": "abort"}"#);
    let ended = translator.from_agent(&answer(&prompt, json!({"stopReason": "cancelled"})));
    let lines = host(&ended);
    assert_eq!(types(&lines), ["message_complete", "turn_end", "status"]);
    assert_eq!(lines[0]["message"]["aborted"], true, "{:?}", lines[0]);
    assert_eq!(lines[0]["message"]["content"][0]["text"], "half a ");
    let recorded =
        ended.iter().any(|out| matches!(out, Out::Log(EntryBody::Assistant { aborted: true, .. })));
    assert!(recorded, "{ended:?}");

    // A turn that ends by itself completes its message as whole.
    let next = translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "two"}"#);
    let prompt = asked_id(&next);
    translator.from_agent(&update(
        "agent_message_chunk",
        json!({"content": {"type": "text", "text": "all of it"}}),
    ));
    let done = host(&translator.from_agent(&answer(&prompt, json!({"stopReason": "end_turn"}))));
    assert!(done[0]["message"].get("aborted").is_none(), "{:?}", done[0]);
}

#[test]
fn usage_comes_from_the_prompts_result_and_the_sessions_running_cost() {
    let mut translator = ready();
    let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "one"}"#);
    let prompt = asked_id(&out);
    translator.from_agent(&update(
        "usage_update",
        json!({"used": 1200, "size": 200000, "cost": {"amount": 0.5, "currency": "USD"}}),
    ));
    let ended = translator.from_agent(&answer(
        &prompt,
        json!({"stopReason": "end_turn", "usage": {"totalTokens": 130, "inputTokens": 100,
               "outputTokens": 30, "cachedReadTokens": 7}}),
    ));
    let lines = host(&ended);
    assert_eq!(types(&lines), ["usage", "turn_end", "status"]);
    let usage = &lines[0];
    assert_eq!((usage["input"].as_u64(), usage["output"].as_u64()), (Some(100), Some(30)));
    assert_eq!(
        (usage["cache_read"].as_u64(), usage["context_tokens"].as_u64()),
        (Some(7), Some(1200))
    );
    assert_eq!(usage["cost"], 0.5);
    // The next turn costs what the running cost grew by.
    let prompt =
        asked_id(&translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "two"}"#));
    translator.from_agent(&update(
        "usage_update",
        json!({"used": 1500, "size": 200000, "cost": {"amount": 0.75, "currency": "USD"}}),
    ));
    let ended = translator.from_agent(&answer(&prompt, json!({"stopReason": "end_turn"})));
    assert_eq!(host(&ended)[0]["cost"], 0.25);
}

#[test]
fn modes_and_models_are_listed_and_switched_through_the_agent() {
    let (mut translator, out) = Translator::start(start("/w"));
    translator.from_agent(&answer(&asked_id(&out), json!({"protocolVersion": 1})));
    let model = json!({"id": "model", "name": "Model", "category": "model", "type": "select",
        "currentValue": "m1", "options": [{"value": "m1", "name": "Small"}, {"value": "m2", "name": "Large"}]});
    let opened = translator.from_agent(&answer(
        &json!(1),
        json!({"sessionId": "s-1", "configOptions": [model],
               "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}}),
    ));
    let capabilities = &host(&opened)[0]["capabilities"];
    assert!(capabilities.as_array().unwrap().contains(&json!("model-switch")), "{capabilities}");

    let modes = host(&translator.from_host(r#"{"id": "l", "type": "list_modes"}"#));
    assert_eq!(modes[0]["data"]["modes"][1]["name"], "code");
    let unknown = host(&translator.from_host(r#"{"id": "u", "type": "set_mode", "mode": "yolo"}"#));
    assert_eq!(unknown[0]["error"]["code"], "NOT_FOUND");
    let out = translator.from_host(r#"{"id": "m", "type": "set_mode", "mode": "code"}"#);
    let sent = &agent(&out)[0];
    assert_eq!(
        (sent["method"].as_str(), sent["params"]["modeId"].as_str()),
        (Some("session/set_mode"), Some("code"))
    );
    assert!(host(&out).is_empty(), "answered once the agent has switched");
    let switched = translator.from_agent(&answer(&sent["id"], json!({})));
    let lines = host(&switched);
    assert_eq!(types(&lines), ["mode_changed", "response"]);
    assert_eq!(lines[1]["data"], json!({"previous_mode": "ask", "mode": "code"}));
    assert!(
        switched
            .iter()
            .any(|out| matches!(out, Out::Log(EntryBody::Settings { mode: Some(_), .. })))
    );

    let models = host(&translator.from_host(r#"{"id": "l", "type": "list_models"}"#));
    assert_eq!(models[0]["data"]["active"]["model"], "Small", "{models:?}");
    let out = translator.from_host(r#"{"id": "s", "type": "set_model", "model": "m2"}"#);
    let sent = &agent(&out)[0];
    assert_eq!(sent["method"], "session/set_config_option");
    assert_eq!(
        (sent["params"]["configId"].as_str(), sent["params"]["value"].as_str()),
        (Some("model"), Some("m2"))
    );
    let mut now = model.clone();
    now["currentValue"] = json!("m2");
    let lines = host(&translator.from_agent(&answer(&sent["id"], json!({"configOptions": [now]}))));
    assert_eq!(types(&lines), ["model_changed", "response"]);
    assert_eq!(lines[1]["data"]["active"]["id"], "m2");
    // The agent may change its mode by itself.
    let own = host(
        &translator.from_agent(&update("current_mode_update", json!({"currentModeId": "ask"}))),
    );
    assert_eq!(own[0]["type"], "mode_changed");
}

#[test]
fn an_earlier_session_is_loaded_without_its_replay_or_else_said_to_be_new() {
    let mut begun = start("/w");
    begun.previous = Some("old".into());
    let (mut translator, out) = Translator::start(begun);
    let out = translator.from_agent(&answer(
        &asked_id(&out),
        json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}),
    ));
    let load = &agent(&out)[0];
    assert_eq!(
        (load["method"].as_str(), load["params"]["sessionId"].as_str()),
        (Some("session/load"), Some("old"))
    );
    let replay = translator.from_agent(&update(
        "agent_message_chunk",
        json!({"content": {"type": "text", "text": "said before"}}),
    ));
    assert!(replay.is_empty(), "a replay is already in Shard's record");
    let loaded = translator.from_agent(&answer(&load["id"], json!({})));
    assert_eq!(loaded[0], Out::Session("old".into()));
    assert_eq!(types(&host(&loaded)), ["hello", "sync"]);

    // An agent that can neither load nor resume starts afresh, and says so.
    let mut begun = start("/w");
    begun.previous = Some("old".into());
    let (mut translator, out) = Translator::start(begun);
    let out = translator.from_agent(&answer(&asked_id(&out), json!({"protocolVersion": 1})));
    assert_eq!(agent(&out)[0]["method"], "session/new");
    let opened = translator.from_agent(&answer(&asked_id(&out), json!({"sessionId": "new"})));
    let lines = host(&opened);
    assert_eq!(types(&lines), ["hello", "sync", "error"]);
    assert!(lines[2]["message"].as_str().unwrap().contains("starts a new one"), "{lines:?}");
    assert_eq!(opened[0], Out::Session("new".into()));
}

#[test]
fn a_failed_load_starts_a_new_session_and_a_file_request_goes_to_the_bridge() {
    let mut begun = start("/w");
    begun.previous = Some("gone".into());
    let (mut translator, out) = Translator::start(begun);
    let out = translator.from_agent(&answer(
        &asked_id(&out),
        json!({"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"resume": {}}}}),
    ));
    let resume = &agent(&out)[0];
    assert_eq!(resume["method"], "session/resume");
    let failed = json!({"jsonrpc": "2.0", "id": resume["id"], "error": {"code": -32002, "message": "no such session"}});
    let out = translator.from_agent(&failed.to_string());
    assert_eq!(agent(&out)[0]["method"], "session/new");
    let opened = translator.from_agent(&answer(&asked_id(&out), json!({"sessionId": "s-1"})));
    assert!(host(&opened)[2]["message"].as_str().unwrap().contains("no such session"));

    let read = json!({"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file",
                      "params": {"sessionId": "s-1", "path": "/w/a.txt"}});
    let out = translator.from_agent(&read.to_string());
    assert!(
        matches!(&out[..], [Out::Fs(_, FsRequest::Read(request))] if request.path == std::path::Path::new("/w/a.txt")),
        "{out:?}"
    );
}

#[test]
fn a_call_filled_in_by_updates_is_shown_once_with_its_command_and_an_edit_as_a_diff() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
    let bare = translator.from_agent(&update(
        "tool_call",
        json!({"toolCallId": "t1", "title": "Terminal", "kind": "execute", "rawInput": {}}),
    ));
    assert!(host(&bare).is_empty(), "not shown before its input is known");
    let filled = host(&translator.from_agent(&update(
        "tool_call_update",
        json!({"toolCallId": "t1", "rawInput": {"command": "ls -la"}, "status": "in_progress"}),
    )));
    assert_eq!(types(&filled), ["message_complete", "tool_call"]);
    assert_eq!(filled[1]["render"], json!({"kind": "command", "command": "ls -la"}));
    let again = translator
        .from_agent(&update("tool_call_update", json!({"toolCallId": "t1", "title": "ls"})));
    assert!(host(&again).is_empty(), "shown once");
    let done = host(&translator.from_agent(&update(
        "tool_call_update",
        json!({"toolCallId": "t1", "status": "completed", "rawOutput": {"output": "total 0"}}),
    )));
    assert_eq!(done[0]["content"]["text"], "total 0");

    let edit = host(&translator.from_agent(&update(
        "tool_call",
        json!({"toolCallId": "t2", "title": "Write a.txt", "kind": "edit", "status": "completed",
               "content": [{"type": "diff", "path": "/w/a.txt", "oldText": "old\n", "newText": "new\n"}]}),
    )));
    assert_eq!(types(&edit), ["message_complete", "tool_call", "tool_result"]);
    assert_eq!(edit[1]["render"]["kind"], "diff");
    assert_eq!(edit[1]["render"]["hunks"][0]["lines"], json!(["-old", "+new"]));
    assert_eq!(edit[2]["render"]["kind"], "diff", "the result shows the diff too");
}

#[test]
fn a_new_process_never_reuses_the_ids_of_an_earlier_one() {
    // After a restart the clients still hold the earlier process's
    // messages, turns and questions: an id handed out again would
    // overwrite a message they show, or take an answer meant for another
    // question.
    let ids = |translator: &mut Translator| {
        let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "hello"}"#);
        let started = host(&out);
        let ask = json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission",
            "params": {"sessionId": "s-1", "toolCall": {"toolCallId": "t1", "title": "x"},
                       "options": [{"optionId": "a", "name": "Allow", "kind": "allow_once"}]}});
        let asked = host(&translator.from_agent(&ask.to_string()));
        let question = asked.iter().find(|line| line["type"] == "permission_request").unwrap();
        [
            started[1]["turn_id"].as_str().unwrap().to_owned(),
            question["request_id"].as_str().unwrap().to_owned(),
        ]
    };
    let earlier = ids(&mut ready());
    let later = ids(&mut ready());
    for (earlier, later) in earlier.iter().zip(&later) {
        assert_ne!(earlier, later);
    }
    let first = ready().fresh("msg");
    assert_ne!(first, ready().fresh("msg"));
}

#[test]
fn a_plan_is_one_card_per_turn_brought_up_to_date_and_recorded_as_it_last_stood() {
    let mut translator = ready();
    let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "plan it"}"#);
    let prompt = agent(&out)[0].clone();
    let plan = |first: &str, second: &str| {
        update(
            "plan",
            json!({"entries": [
                {"content": "read the code", "priority": "high", "status": first},
                {"content": "fix the bug", "priority": "medium", "status": second}]}),
        )
    };
    let shown = host(&translator.from_agent(&plan("in_progress", "pending")));
    let calls: Vec<&Value> = shown.iter().filter(|line| line["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 1, "{shown:?}");
    assert_eq!(calls[0]["name"], "plan");
    assert_eq!(calls[0]["render"]["kind"], "kv");
    assert_eq!(calls[0]["render"]["pairs"][0], json!({"k": "doing", "v": "read the code"}));
    let id = calls[0]["tool_call_id"].clone();

    let later = host(&translator.from_agent(&plan("completed", "in_progress")));
    assert_eq!(types(&later), ["tool_call"], "the same card again, not a new message");
    assert_eq!(later[0]["tool_call_id"], id);
    assert_eq!(later[0]["render"]["pairs"][1], json!({"k": "doing", "v": "fix the bug"}));

    let done = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}})
            .to_string(),
    );
    let lines = host(&done);
    let result = lines.iter().find(|line| line["type"] == "tool_result").expect("a result");
    assert_eq!(result["tool_call_id"], id);
    assert_eq!(result["content"]["text"], "[done] read the code\n[doing] fix the bug");
    let recorded = done.iter().any(|out| {
        matches!(out, Out::Log(EntryBody::ToolResult { tool_name, content: shard_protocol::types::ToolResultContent::Text { text }, .. })
            if tool_name == "plan" && text.starts_with("[done] read the code"))
    });
    assert!(recorded, "the last plan is in the log");
    let order: Vec<&str> = types(&lines);
    let at = |kind: &str| order.iter().position(|seen| *seen == kind).unwrap();
    assert!(at("tool_result") < at("turn_end"), "{order:?}");

    // The next turn's plan is a card of its own.
    let out = translator.from_host(r#"{"id": "c2", "type": "prompt", "message": "again"}"#);
    assert_eq!(agent(&out)[0]["method"], "session/prompt");
    let next = host(&translator.from_agent(&plan("pending", "pending")));
    let call = next.iter().find(|line| line["type"] == "tool_call").unwrap();
    assert_ne!(call["tool_call_id"], id);
}

#[test]
fn the_agents_commands_are_listed_and_their_changes_announced() {
    let mut translator = ready();
    let offered = update(
        "available_commands_update",
        json!({"availableCommands": [
            {"name": "review", "description": "Review the changes", "input": {"hint": "what to look at"}},
            {"name": "/compact", "description": "Summarize the conversation"},
            {"name": "", "description": "nameless"}]}),
    );
    let lines = host(&translator.from_agent(&offered));
    assert_eq!(types(&lines), ["commands_changed"]);
    let expected = json!([
        {"name": "review", "description": "Review the changes", "hint": "what to look at"},
        {"name": "compact", "description": "Summarize the conversation"}]);
    assert_eq!(lines[0]["commands"], expected);
    // The same list again is no change.
    assert!(host(&translator.from_agent(&offered)).is_empty());

    let answer = host(&translator.from_host(r#"{"id": "l1", "type": "list_commands"}"#));
    assert_eq!(answer[0]["success"], true, "{answer:?}");
    assert_eq!(answer[0]["data"]["commands"], expected);
}

#[test]
fn images_go_to_an_agent_that_takes_them_and_are_refused_by_one_that_does_not() {
    let prompt = r#"{"id": "c1", "type": "prompt", "message": "look",
                     "images": [{"type": "image", "data": "aGk=", "mime_type": "image/png"}]}"#;
    let mut blind = ready();
    let out = blind.from_host(prompt);
    let refused = host(&out);
    assert_eq!(refused[0]["success"], false, "{refused:?}");
    assert_eq!(refused[0]["error"]["code"], "INVALID_REQUEST");
    assert!(agent(&out).is_empty(), "nothing goes to the agent");

    let mut seeing = ready_with(json!({"promptCapabilities": {"image": true}}));
    let out = seeing.from_host(prompt);
    assert_eq!(host(&out)[0]["success"], true);
    let sent = &agent(&out)[0]["params"]["prompt"];
    assert_eq!(sent[0], json!({"type": "text", "text": "look"}));
    assert_eq!(sent[1], json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}));
    let recorded =
        out.iter().any(|out| matches!(out, Out::Prompted { images, .. } if images.len() == 1));
    assert!(recorded, "the image is in the log");

    // Mid-turn, a follow-up keeps its image until it is delivered.
    let follow = r#"{"id": "c2", "type": "prompt", "message": "and this",
                     "streaming_behavior": "follow_up",
                     "images": [{"type": "image", "data": "aG8=", "mime_type": "image/jpeg"}]}"#;
    let out = seeing.from_host(follow);
    let Some(Out::Queue(queueing)) = out.first() else { panic!("{out:?}") };
    assert_eq!(queueing.images.len(), 1);
}

/// A translator for an agent whose record says mode `plan`, past
/// `initialize`, with `session/new` answered in mode `default`: what it
/// sent the agent then.
fn reopened_in_default() -> (Translator, Vec<Value>) {
    let recorded =
        RecordedSettings { mode: Some("plan".to_owned()), ..RecordedSettings::default() };
    let (mut translator, out) = Translator::start(Start { recorded, ..start("/work") });
    let initialize = &agent(&out)[0];
    let out = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": initialize["id"],
                "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        .to_string(),
    );
    let new = &agent(&out)[0];
    let out = translator.from_agent(
        &json!({"jsonrpc": "2.0", "id": new["id"], "result": {"sessionId": "s-1",
                "modes": {"currentModeId": "default", "availableModes": [
                    {"id": "default", "name": "Default"}, {"id": "plan", "name": "Plan"}]}}})
        .to_string(),
    );
    assert!(host(&out).is_empty(), "no hello before the mode is back: {out:?}");
    (translator, agent(&out))
}

#[test]
fn a_new_session_is_set_to_the_recorded_mode_before_clients_see_it() {
    // A read-only mode chosen before a restart must not silently become
    // the agent's default.
    let (mut translator, sent) = reopened_in_default();
    assert_eq!(sent[0]["method"], "session/set_mode");
    assert_eq!(sent[0]["params"]["modeId"], "plan");
    let out = translator
        .from_agent(&json!({"jsonrpc": "2.0", "id": sent[0]["id"], "result": {}}).to_string());
    let lines = host(&out);
    assert_eq!(types(&lines), ["hello", "sync"]);
    assert_eq!(lines[1]["mode"], "plan");
}

#[test]
fn a_recorded_mode_the_agent_refuses_is_said_plainly() {
    let (mut translator, sent) = reopened_in_default();
    let refused = json!({"jsonrpc": "2.0", "id": sent[0]["id"],
                         "error": {"code": -32602, "message": "no such mode"}});
    let lines = host(&translator.from_agent(&refused.to_string()));
    assert_eq!(types(&lines), ["hello", "sync", "error"]);
    assert_eq!(lines[1]["mode"], "default");
    assert!(lines[2]["message"].as_str().unwrap().contains("plan"), "{lines:?}");
    assert_eq!(lines[2]["fatal"], false);
}

#[test]
fn a_calls_location_is_shown_as_its_path_unless_its_input_names_one() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
    let read = host(&translator.from_agent(&update(
        "tool_call",
        json!({"toolCallId": "t1", "title": "Read", "kind": "read", "status": "in_progress",
               "rawInput": {"file": "src/main.rs"},
               "locations": [{"path": "/w/src/main.rs", "line": 12}]}),
    )));
    let call = read.iter().find(|line| line["type"] == "tool_call").unwrap();
    assert_eq!(call["args"], json!({"file": "src/main.rs", "path": "/w/src/main.rs:12"}));
    assert_eq!(call["read_only"], true);

    let named = host(&translator.from_agent(&update(
        "tool_call",
        json!({"toolCallId": "t2", "title": "Edit", "kind": "edit", "status": "in_progress",
               "rawInput": {"path": "a.txt"}, "locations": [{"path": "/w/a.txt"}]}),
    )));
    let call = named.iter().find(|line| line["type"] == "tool_call").unwrap();
    assert_eq!(call["args"]["path"], "a.txt", "the agent's own input is kept");
}

/// After an aborted turn of an agent that can close and resume its
/// session and calls itself `name`: what Shard sends it.
fn after_an_abort(name: &str) -> Vec<Value> {
    let mut translator = ready_with_info(
        json!({"sessionCapabilities": {"close": {}, "resume": {}}}),
        json!({"name": name, "version": "1"}),
    );
    let out = translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "x"}"#);
    let prompt = agent(&out)[0].clone();
    translator.from_host(r#"{"id": "a", "type": "abort"}"#);
    let ended =
        json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "cancelled"}});
    agent(&translator.from_agent(&ended.to_string()))
}

#[test]
fn only_claude_codes_adapter_has_its_session_reopened_after_an_abort() {
    // Its stale end_turn after a cancel is its own bug; Codex, which
    // offers the same capabilities, refuses a resume right after a close
    // ("already has a live local writer") and would lose its session.
    let claude = after_an_abort("@zed-industries/claude-agent-acp");
    assert_eq!(claude[0]["method"], "session/close", "{claude:?}");
    let codex = after_an_abort("codex-acp");
    assert!(codex.iter().all(|line| line["method"] != "session/close"), "{codex:?}");
}

/// `elicitation/create` of a form with `properties`, as request `id`.
fn form(id: u32, properties: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "elicitation/create",
           "params": {"sessionId": "s-1", "mode": "form", "message": "A few details, please.",
                      "requestedSchema": {"type": "object", "properties": properties}}})
    .to_string()
}

/// The `ui_request` among `out`.
fn ui_request(out: &[Out]) -> Value {
    host(out).into_iter().find(|line| line["type"] == "ui_request").expect("a ui_request")
}

fn ui_answer(request: &Value, value: Value) -> String {
    json!({"id": "u", "type": "ui_response", "request_id": request["request_id"], "value": value})
        .to_string()
}

#[test]
fn shard_offers_forms_and_asks_a_forms_fields_one_by_one_as_its_own_questions() {
    let (_, out) = Translator::start(start("/work"));
    let capabilities = &agent(&out)[0]["params"]["clientCapabilities"];
    assert!(capabilities["elicitation"]["form"].is_object(), "{capabilities}");
    assert!(capabilities["elicitation"].get("url").is_none(), "{capabilities}");

    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "configure"}"#);
    let properties = json!({
        "colour": {"type": "string", "title": "Colour",
                   "oneOf": [{"const": "r", "title": "Red"}, {"const": "t", "title": "Teal"}]},
        "count": {"type": "integer", "description": "How many to make", "default": 2},
        "sure": {"type": "boolean", "title": "Go ahead?"},
    });
    let out = translator.from_agent(&form(9, properties));
    let asked = ui_request(&out);
    assert_eq!((asked["kind"].as_str(), asked["title"].as_str()), (Some("select"), Some("Colour")));
    assert_eq!(asked["options"], json!(["Red", "Teal"]));
    assert_eq!(asked["message"], "A few details, please.");
    assert_eq!(host(&out).last().unwrap()["status"], "waiting_for_ui");
    assert!(agent(&out).is_empty(), "nothing for the agent yet");

    // Each answer settles its question and asks the next field.
    let out = translator.from_host(&ui_answer(&asked, json!("Teal")));
    assert_eq!(types(&host(&out))[..3], ["response", "ui_resolved", "ui_request"]);
    let count = ui_request(&out);
    assert_eq!((count["kind"].as_str(), count["prefill"].as_str()), (Some("input"), Some("2")));
    assert_eq!(count["title"], "count");
    assert_eq!(count["message"], "A few details, please.\n\nHow many to make");
    // Not a whole number: asked again, saying why.
    let again = ui_request(&translator.from_host(&ui_answer(&count, json!("a few"))));
    assert_ne!(again["request_id"], count["request_id"]);
    assert!(again["message"].as_str().unwrap().ends_with("A whole number, please."), "{again}");
    let sure = ui_request(&translator.from_host(&ui_answer(&again, json!(" 3 "))));
    assert_eq!(sure["kind"], "confirm");
    let out = translator.from_host(&ui_answer(&sure, json!("yes")));
    let sent = agent(&out);
    assert_eq!(sent[0]["id"], 9);
    assert_eq!(
        sent[0]["result"],
        json!({"action": "accept", "content": {"colour": "t", "count": 3, "sure": true}})
    );
    assert_eq!(host(&out).last().unwrap()["status"], "streaming");
    // A late answer finds nothing open.
    assert!(agent(&translator.from_host(&ui_answer(&sure, json!("no")))).is_empty());
}

#[test]
fn a_form_dismissed_is_cancelled_and_one_shard_cannot_show_is_declined() {
    let mut translator = ready();
    translator.from_host(r#"{"id": "c1", "type": "prompt", "message": "configure"}"#);
    let asked = ui_request(&translator.from_agent(&form(4, json!({"name": {"type": "string"}}))));
    assert_eq!(asked["kind"], "input");
    let out = translator.from_host(&ui_answer(&asked, json!(null)));
    assert_eq!(agent(&out)[0]["result"], json!({"action": "cancel"}));
    assert_eq!(types(&host(&out)), ["response", "ui_resolved", "status"]);

    // A list to tick, and a URL to open: declined, nothing asked.
    let ticks = json!({"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}});
    let out = translator.from_agent(&form(5, ticks));
    assert_eq!(agent(&out)[0]["result"], json!({"action": "decline"}));
    assert!(host(&out).is_empty());
    let url = json!({"jsonrpc": "2.0", "id": 6, "method": "elicitation/create",
        "params": {"sessionId": "s-1", "mode": "url", "message": "Sign in",
                   "elicitationId": "e-1", "url": "https://example.com/login"}});
    let out = translator.from_agent(&url.to_string());
    assert_eq!(agent(&out)[0]["result"], json!({"action": "decline"}));

    // An abort cancels a form being asked, and withdraws its question.
    let asked = ui_request(&translator.from_agent(&form(7, json!({"name": {"type": "string"}}))));
    let out = translator.from_host(r#"{"id": "a", "type": "abort"}"#);
    assert!(agent(&out).iter().any(|line| line["id"] == 7 && line["result"]["action"] == "cancel"));
    let withdrawn: Vec<Value> =
        host(&out).into_iter().filter(|line| line["type"] == "ui_resolved").collect();
    assert_eq!(withdrawn[0]["request_id"], asked["request_id"]);
}
