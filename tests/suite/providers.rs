//! The real providers, run by the real agent binary against a replay server:
//! a streamed tool call whose arguments arrive in pieces, plain text, usage,
//! and errors before and in the middle of a stream. Every request the agent
//! sent is checked.

use serde_json::{Value, json};

use super::agent_support::{AgentProc, Workspace, count, find, streamed_text};
use super::replay::{Captured, ReplayServer, Reply};

const KEY_VARIABLE: &str = "SHARD_REPLAY_KEY";
const KEY: &str = "replay-secret-key";

fn configure(workspace: &Workspace, provider: &str, base_url: &str) {
    let config = format!(
        "default_model = \"replay\"\n\n[[models]]\nid = \"replay\"\nprovider = \"{provider}\"\n\
         model = \"{provider}-test-model\"\nbase_url = \"{base_url}\"\napi_key_env = \"{KEY_VARIABLE}\"\n\
         context_window = 100000\n"
    );
    std::fs::write(workspace.home.path().join("config.toml"), config).expect("config");
}

async fn start(workspace: &Workspace) -> AgentProc {
    let mut agent = AgentProc::spawn_with_env(
        workspace.home.path(),
        workspace.project.path(),
        &[],
        &[(KEY_VARIABLE, KEY)],
    )
    .await;
    agent.expect("hello").await;
    agent.expect("sync").await;
    agent
}

/// Prompt, allow the bash call, and read the turn to its end.
async fn tool_round_trip(agent: &mut AgentProc) -> Vec<Value> {
    agent.call("p1", json!({"type": "prompt", "message": "run something"})).await;
    let mut read = agent.until("permission_request").await;
    let request = read.last().expect("request").clone();
    assert_eq!(request["input"], json!({"command": "echo hi"}));
    agent.send(json!({"type": "permission_response", "request_id": request["request_id"], "decision": "allow"})).await;
    read.extend(agent.until("turn_end").await);
    read
}

fn tool_names(tools: &Value, key: &[&str]) -> Vec<String> {
    tools
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| {
            key.iter()
                .fold(tool, |value, part| &value[*part])
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn assert_tool_events(turn: &[Value]) {
    // Arguments arrived in pieces and were streamed as such.
    let pieces: Vec<&str> = turn
        .iter()
        .filter(|m| m["type"] == "message_delta" && m["kind"] == "tool_call")
        .filter_map(|m| m["args_delta"].as_str())
        .collect();
    assert!(pieces.len() >= 2, "args in pieces: {pieces:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&pieces.concat()).expect("args json"),
        json!({"command": "echo hi"})
    );
    let first_tool_delta = turn.iter().find(|m| m["kind"] == "tool_call").expect("tool delta");
    assert_eq!(first_tool_delta["name"], "bash");
    let result = find(turn, "tool_result");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["content"]["text"], "hi\n");
    assert!(streamed_text(turn).ends_with("The command printed hi."));
    assert_eq!(count(turn, "message_complete"), 2);
}

#[tokio::test]
async fn openai_streams_a_tool_call_and_sends_its_result_back() {
    let server = ReplayServer::start(vec![
        Reply::Stream("openai-tool-call.sse"),
        Reply::Stream("openai-text.sse"),
    ])
    .await;
    let workspace = Workspace::new();
    configure(&workspace, "openai", &format!("{}/v1", server.base));
    let mut agent = start(&workspace).await;
    let turn = tool_round_trip(&mut agent).await;
    assert_tool_events(&turn);
    let usages: Vec<&Value> = turn.iter().filter(|m| m["type"] == "usage").collect();
    assert_eq!((usages[0]["input"].as_u64(), usages[0]["output"].as_u64()), (Some(120), Some(18)));
    assert_eq!(usages[0]["cache_read"], 64);
    assert_eq!(usages[1]["input"], 160);
    assert_eq!(find(&turn, "turn_end")["usage"]["input"], 280);

    let requests: Vec<Captured> = server.captured();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
        assert_eq!(request.body["model"], "openai-test-model");
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["stream_options"]["include_usage"], true);
        let names = tool_names(&request.body["tools"], &["function", "name"]);
        assert_eq!(
            names,
            vec!["read", "write", "edit", "bash", "grep", "find", "ls", "recall", "ask"]
        );
        assert_eq!(
            request.body["tools"][3]["function"]["parameters"]["required"],
            json!(["command"])
        );
    }
    let first = &requests[0].body["messages"];
    assert_eq!(first[0]["role"], "system");
    assert_eq!(first[1], json!({"role": "user", "content": "run something"}));
    assert_eq!(first.as_array().map(Vec::len), Some(2));
    let second = &requests[1].body["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["content"], "Let me check.");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_replay_1");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "bash");
    let arguments: Value = serde_json::from_str(
        second[2]["tool_calls"][0]["function"]["arguments"].as_str().expect("string"),
    )
    .expect("json");
    assert_eq!(arguments, json!({"command": "echo hi"}));
    assert_eq!(
        second[3],
        json!({"role": "tool", "tool_call_id": "call_replay_1", "content": "hi\n[exit code: 0]"})
    );
    // The key is sent to the provider and nowhere else.
    let log = std::fs::read_dir(workspace.home.path().join("sessions"))
        .expect("sessions")
        .flatten()
        .next()
        .expect("session");
    let text = std::fs::read_to_string(log.path().join("session.jsonl")).expect("log");
    assert!(!text.contains(KEY));
    assert!(!agent.seen.iter().any(|message| message.to_string().contains(KEY)));
}

#[tokio::test]
async fn anthropic_streams_a_tool_call_and_sends_its_result_back() {
    let server = ReplayServer::start(vec![
        Reply::Stream("anthropic-tool-call.sse"),
        Reply::Stream("anthropic-text.sse"),
    ])
    .await;
    let workspace = Workspace::new();
    configure(&workspace, "anthropic", &server.base);
    let mut agent = start(&workspace).await;
    let turn = tool_round_trip(&mut agent).await;
    assert_tool_events(&turn);
    let usage = turn.iter().find(|m| m["type"] == "usage").expect("usage");
    assert_eq!((usage["input"].as_u64(), usage["output"].as_u64()), (Some(210), Some(42)));
    assert_eq!(usage["cache_read"], 100);

    let requests = server.captured();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.headers["x-api-key"], KEY);
        assert_eq!(request.headers["anthropic-version"], "2023-06-01");
        assert_eq!(request.body["model"], "anthropic-test-model");
        assert_eq!(request.body["stream"], true);
        assert!(request.body["max_tokens"].as_u64().unwrap_or(0) > 0);
        assert!(request.body["system"].as_str().unwrap_or("").contains("coding agent"));
        let names = tool_names(&request.body["tools"], &["name"]);
        assert_eq!(
            names,
            vec!["read", "write", "edit", "bash", "grep", "find", "ls", "recall", "ask"]
        );
        assert_eq!(request.body["tools"][3]["input_schema"]["required"], json!(["command"]));
    }
    assert_eq!(
        requests[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "run something"}]}])
    );
    let second = &requests[1].body["messages"];
    assert_eq!(
        second[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_replay_1", "name": "bash", "input": {"command": "echo hi"}}]})
    );
    assert_eq!(
        second[2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_replay_1",
            "content": "hi\n[exit code: 0]", "is_error": false}]})
    );
}

/// One turn against `replies`; the workspace and server stay alive with the
/// agent for follow-up prompts.
async fn failing_turn(
    provider: &str,
    replies: Vec<Reply>,
    base_suffix: &str,
) -> (Vec<Value>, AgentProc, Workspace, ReplayServer) {
    let server = ReplayServer::start(replies).await;
    let workspace = Workspace::new();
    configure(&workspace, provider, &format!("{}{base_suffix}", server.base));
    let mut agent = start(&workspace).await;
    let turn = agent.turn("hello").await;
    (turn, agent, workspace, server)
}

#[tokio::test]
async fn an_error_in_the_middle_of_a_stream_is_a_provider_error() {
    for (provider, fixture, suffix, message) in [
        ("openai", "openai-error.sse", "/v1", "The server had an error"),
        ("anthropic", "anthropic-error.sse", "", "Overloaded"),
    ] {
        let (turn, ..) = failing_turn(provider, vec![Reply::Stream(fixture)], suffix).await;
        assert_eq!(
            streamed_text(&turn),
            "Partial ans",
            "{provider}: the partial text was streamed"
        );
        let error = find(&turn, "error");
        assert_eq!(error["code"], "PROVIDER_ERROR", "{provider}");
        assert_eq!(error["fatal"], false);
        assert!(error["message"].as_str().unwrap_or("").contains(message), "{provider}: {error}");
        let complete = find(&turn, "message_complete");
        assert_eq!(
            complete["message"]["content"],
            json!([{"type": "text", "text": "Partial ans"}])
        );
        assert_eq!(turn.last().expect("status")["status"], "error");
    }
}

#[tokio::test]
async fn an_http_error_is_a_provider_error_and_the_next_prompt_retries() {
    let (turn, mut agent, _workspace, _server) = failing_turn(
        "openai",
        vec![
            Reply::Status(429, r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
            Reply::Stream("openai-text.sse"),
        ],
        "/v1",
    )
    .await;
    let error = find(&turn, "error");
    assert_eq!(error["code"], "PROVIDER_ERROR");
    assert!(error["message"].as_str().unwrap_or("").contains("429"), "{error}");
    assert!(error["message"].as_str().unwrap_or("").contains("Rate limit reached"));
    let retry = agent.turn("again").await;
    assert_eq!(streamed_text(&retry), "The command printed hi.");
    assert_eq!(retry.last().expect("status")["status"], "idle");
}

#[tokio::test]
async fn a_missing_api_key_is_a_clear_provider_error() {
    let server = ReplayServer::start(vec![]).await;
    let workspace = Workspace::new();
    configure(&workspace, "anthropic", &server.base);
    let mut agent = workspace.ready(&[]).await; // no key in the environment
    let turn = agent.turn("hello").await;
    let error = find(&turn, "error");
    assert_eq!(error["code"], "PROVIDER_ERROR");
    assert!(error["message"].as_str().unwrap_or("").contains(KEY_VARIABLE), "{error}");
    assert!(server.captured().is_empty(), "nothing was sent without a key");
}

/// Text a terminal would act on: escape sequences (clear the screen, set
/// the title, colour), a bidi override, NULs, DEL and C1 controls.
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{202e}txt.exe\0\0\u{7f}\u{9b}";

/// Whether `text` could be printed to a terminal or a log as it is: below
/// U+0020 only `\n` and `\t`, and no DEL, C1 control or format character.
fn printable(text: &str) -> bool {
    !text.chars().any(|c| {
        (c < ' ' && c != '\n' && c != '\t')
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || matches!(c, '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{feff}')
            || ('\u{200b}'..='\u{200f}').contains(&c)
            || ('\u{2028}'..='\u{202e}').contains(&c)
            || ('\u{2060}'..='\u{2069}').contains(&c)
            || ('\u{fff9}'..='\u{fffb}').contains(&c)
    })
}

#[tokio::test]
async fn a_hostile_provider_error_reaches_the_client_clean_and_bounded() {
    let readable = "The model said: ";
    let mut message = format!("{readable}{HOSTILE}");
    while message.len() < 100 * 1024 {
        message.push_str("flood ");
        message.push_str(HOSTILE);
    }
    let event = json!({"type": "error", "error": {"type": "overloaded_error", "message": message}});
    let stream = format!(
        "event: message_start\ndata: {}\n\nevent: error\ndata: {event}\n\n",
        json!({"type": "message_start", "message": {"id": "msg_hostile", "type": "message",
            "role": "assistant", "content": [], "model": "claude-test",
            "usage": {"input_tokens": 3, "output_tokens": 1}}})
    );
    // Raw bytes, not JSON escapes: the agent quotes an error body as text.
    let http = "error: \u{1b}[2J\u{1b}]0;pwned\u{7}down\u{202e}\0";
    let (turn, mut agent, _workspace, _server) =
        failing_turn("anthropic", vec![Reply::Body(stream), Reply::Status(503, http)], "").await;
    let error = find(&turn, "error");
    assert_eq!(error["code"], "PROVIDER_ERROR");
    let shown = error["message"].as_str().expect("message");
    assert!(shown.len() <= 4096, "{} bytes", shown.len());
    assert!(printable(shown), "{shown:?}");
    assert!(shown.starts_with(&format!("overloaded_error: {readable}red")), "{shown:.80}");
    let marker = shown.rfind("… [truncated, ").expect("a truncation marker");
    assert!(shown[marker..].ends_with(" bytes more]"), "{}", &shown[marker..]);
    // An HTTP error body is cleaned the same way.
    let turn = agent.turn("again").await;
    let shown = find(&turn, "error")["message"].as_str().expect("message").to_owned();
    assert!(shown.contains("503") && shown.contains("down"), "{shown:?}");
    assert!(printable(&shown), "{shown:?}");
}
