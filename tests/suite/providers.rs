//! The real providers, run by the real agent binary against a replay server:
//! a streamed tool call whose arguments arrive in pieces, plain text, usage,
//! and errors before and in the middle of a stream; and the shapes other
//! servers stream (ids repeated or blank on every chunk, calls without an id
//! or an index, refusals, usage that changes in `message_delta`), see
//! `tests/fixtures/providers/README.md`. Every request the agent sent is
//! checked.

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
    let mut read =
        agent.until_match(|m| m["type"] == "permission_request" || m["type"] == "turn_end").await;
    let request = read.last().expect("request").clone();
    assert_eq!(request["type"], "permission_request", "the turn ended first: {read:#?}");
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

/// One call the model asked for, as the next request sent it back.
struct SentCall {
    id: String,
    name: String,
    args: Value,
    result: String,
}

/// The tool calls of the last assistant message in `messages` and the tool
/// results after it, checked to pair up: every id non-empty and distinct,
/// answered once, in order, by a result carrying the same `tool_call_id`.
fn sent_calls(messages: &Value) -> Vec<SentCall> {
    let messages = messages.as_array().expect("messages");
    let at = messages
        .iter()
        .rposition(|message| message["role"] == "assistant")
        .expect("an assistant message");
    let calls = messages[at]["tool_calls"].as_array().expect("tool_calls");
    let results = &messages[at + 1..];
    assert_eq!(results.len(), calls.len(), "one result per call: {messages:#?}");
    let sent: Vec<SentCall> = calls
        .iter()
        .zip(results)
        .map(|(call, result)| {
            assert_eq!(result["role"], "tool");
            assert_eq!(result["tool_call_id"], call["id"], "{call} answered by {result}");
            SentCall {
                id: call["id"].as_str().expect("id").to_owned(),
                name: call["function"]["name"].as_str().expect("name").to_owned(),
                args: serde_json::from_str(call["function"]["arguments"].as_str().expect("args"))
                    .unwrap_or_else(|error| panic!("arguments of {call}: {error}")),
                result: result["content"].as_str().expect("content").to_owned(),
            }
        })
        .collect();
    let mut ids: Vec<&str> = sent.iter().map(|call| call.id.as_str()).collect();
    assert!(ids.iter().all(|id| !id.is_empty()), "ids: {ids:?}");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), sent.len(), "distinct ids: {messages:#?}");
    sent
}

/// Runs the bash round trip against `fixture`; returns the one call as the
/// next request sent it back.
async fn one_bash_call(fixture: &'static str) -> SentCall {
    let server =
        ReplayServer::start(vec![Reply::Stream(fixture), Reply::Stream("openai-text.sse")]).await;
    let workspace = Workspace::new();
    configure(&workspace, "openai", &format!("{}/v1", server.base));
    let mut agent = start(&workspace).await;
    let turn = tool_round_trip(&mut agent).await;
    assert_tool_events(&turn);
    assert_eq!(count(&turn, "tool_call"), 1, "{fixture}: one call");
    assert_eq!(count(&turn, "error"), 0, "{fixture}");
    let requests = server.captured();
    assert_eq!(requests.len(), 2, "{fixture}");
    let mut calls = sent_calls(&requests[1].body["messages"]);
    assert_eq!(calls.len(), 1, "{fixture}: one call sent back");
    let call = calls.remove(0);
    assert_eq!((call.name.as_str(), &call.args), ("bash", &json!({"command": "echo hi"})));
    assert_eq!(call.result, "hi\n[exit code: 0]");
    assert_eq!(find(&turn, "tool_result")["tool_call_id"], call.id.as_str(), "{fixture}");
    call
}

#[tokio::test]
async fn openai_a_call_id_repeated_on_every_chunk_is_one_call() {
    // LiteLLM, DeepSeek and Qwen send the id again with every piece.
    let call = one_bash_call("openai-tool-call-repeated-id.sse").await;
    assert_eq!(call.id, "call_repeat_1");
}

#[tokio::test]
async fn openai_a_blank_call_id_on_continuation_chunks_is_one_call() {
    // Azure through LiteLLM and DashScope send "" as the id (and name) there.
    let call = one_bash_call("openai-tool-call-empty-id.sse").await;
    assert_eq!(call.id, "call_empty_1");
}

#[tokio::test]
async fn openai_a_call_streamed_without_an_id_gets_one_its_result_answers() {
    let call = one_bash_call("openai-tool-call-without-id.sse").await;
    assert!(call.id.starts_with("call_"), "{}", call.id);
}

#[tokio::test]
async fn openai_a_call_streamed_without_an_index_gets_an_id_its_result_answers() {
    let call = one_bash_call("openai-tool-call-without-index.sse").await;
    assert!(call.id.starts_with("call_"), "{}", call.id);
}

/// Two parallel `read` calls from `fixture` (a.txt, then b.txt); returns
/// their ids as the next request sent them back.
async fn two_reads(fixture: &'static str) -> Vec<String> {
    let server =
        ReplayServer::start(vec![Reply::Stream(fixture), Reply::Stream("openai-text.sse")]).await;
    let workspace = Workspace::new();
    std::fs::write(workspace.path("a.txt"), "alpha\n").expect("a.txt");
    std::fs::write(workspace.path("b.txt"), "beta\n").expect("b.txt");
    configure(&workspace, "openai", &format!("{}/v1", server.base));
    let mut agent = start(&workspace).await;
    // `read` inside the project runs without asking.
    let turn = agent.turn("read both").await;
    assert_eq!(count(&turn, "tool_call"), 2, "{turn:#?}");
    let results: Vec<&Value> = turn.iter().filter(|m| m["type"] == "tool_result").collect();
    let texts: Vec<&Value> = results.iter().map(|result| &result["content"]["text"]).collect();
    assert_eq!(texts, [&json!("alpha\n"), &json!("beta\n")]);
    let requests = server.captured();
    assert_eq!(requests.len(), 2);
    let calls = sent_calls(&requests[1].body["messages"]);
    let sent: Vec<(&str, &Value, &str)> =
        calls.iter().map(|call| (call.name.as_str(), &call.args, call.result.as_str())).collect();
    assert_eq!(
        sent,
        [
            ("read", &json!({"path": "a.txt"}), "alpha\n"),
            ("read", &json!({"path": "b.txt"}), "beta\n")
        ]
    );
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(result["tool_call_id"], call.id.as_str());
    }
    calls.into_iter().map(|call| call.id).collect()
}

#[tokio::test]
async fn openai_parallel_calls_that_repeat_their_ids_stay_apart() {
    let ids = two_reads("openai-parallel-tool-calls-repeated-id.sse").await;
    assert_eq!(ids, ["call_par_a", "call_par_b"]);
}

#[tokio::test]
async fn openai_parallel_calls_without_an_index_or_id_stay_apart() {
    // Gemini: each call whole in its own chunk, `"index": null`, `"id": ""`.
    let ids = two_reads("openai-parallel-tool-calls-without-index.sse").await;
    assert!(ids.iter().all(|id| id.starts_with("call_")), "{ids:?}");
}

#[tokio::test]
async fn openai_a_refusal_is_the_reply_with_a_marker() {
    let server = ReplayServer::start(vec![Reply::Stream("openai-refusal.sse")]).await;
    let workspace = Workspace::new();
    configure(&workspace, "openai", &format!("{}/v1", server.base));
    let mut agent = start(&workspace).await;
    let turn = agent.turn("hello").await;
    let shown = "Refused: I'm sorry, but I can't help with that request.";
    assert_eq!(streamed_text(&turn), shown);
    assert_eq!(
        find(&turn, "message_complete")["message"]["content"],
        json!([{"type": "text", "text": shown}])
    );
    assert_eq!(count(&turn, "error"), 0);
    assert_eq!(find(&turn, "usage")["input"], 52);
    assert_eq!(turn.last().expect("status")["status"], "idle");
}

/// A reply a provider's filter stopped says so, with the refusal marker,
/// instead of ending empty or cut short without a word.
#[tokio::test]
async fn a_reply_stopped_by_a_filter_says_it_was_refused() {
    for (provider, fixture, shown) in [
        (
            "openai",
            "openai-content-filter.sse",
            "Refused: the provider's content filter stopped the reply.",
        ),
        (
            "anthropic",
            "anthropic-refusal.sse",
            "Here is how\n\nRefused: the model stopped the reply (stop_reason: refusal).",
        ),
    ] {
        let server = ReplayServer::start(vec![Reply::Stream(fixture)]).await;
        let workspace = Workspace::new();
        let base =
            if provider == "openai" { format!("{}/v1", server.base) } else { server.base.clone() };
        configure(&workspace, provider, &base);
        let mut agent = start(&workspace).await;
        let turn = agent.turn("hello").await;
        assert_eq!(streamed_text(&turn), shown, "{fixture}");
        assert_eq!(
            find(&turn, "message_complete")["message"]["content"],
            json!([{"type": "text", "text": shown}]),
            "{fixture}"
        );
        assert_eq!(count(&turn, "error"), 0, "{fixture}");
        assert_eq!(turn.last().expect("status")["status"], "idle");
    }
}

#[tokio::test]
async fn anthropic_usage_follows_every_message_delta() {
    let server = ReplayServer::start(vec![Reply::Stream("anthropic-usage-updates.sse")]).await;
    let workspace = Workspace::new();
    configure(&workspace, "anthropic", &server.base);
    let mut agent = start(&workspace).await;
    let turn = agent.turn("hello").await;
    assert_eq!(streamed_text(&turn), "The command printed hi.");
    assert_eq!(count(&turn, "usage"), 1);
    let usage = find(&turn, "usage");
    // The last message_delta's counts, cumulative: the cache counts of
    // message_start are replaced, not kept or added to.
    assert_eq!(
        [&usage["input"], &usage["output"], &usage["cache_read"], &usage["cache_write"]],
        [&json!(1480), &json!(64), &json!(2048), &json!(1536)],
        "{usage}"
    );
    assert_eq!(usage["context_tokens"], 1480 + 2048 + 1536);
    assert_eq!(find(&turn, "turn_end")["usage"]["input"], 1480);
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
