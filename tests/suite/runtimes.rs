//! Runtimes (CONTRACT.md, "Agents that are not Shard's own"): what
//! `runtime.list` names, what `agent.create`'s `runtime` accepts, and what
//! `AgentInfo.runtime` says, through the real daemon.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::{Daemon, alive, wait_until_within};

const TWO_RUNTIMES: &str = r#"
[[runtimes]]
id = "claude"
protocol = "acp"
command = "claude-agent-acp"
env = { IS_SANDBOX = "1", ANTHROPIC_API_KEY = "sk-runtime-secret" }

[[runtimes]]
id = "codex"
protocol = "acp"
command = "/opt/codex-acp"
args = ["--quiet"]
"#;

fn runtimes(answer: &Value) -> Vec<(String, String)> {
    let listed = answer["data"]["runtimes"].as_array().unwrap_or_else(|| panic!("{answer}"));
    listed
        .iter()
        .map(|runtime| {
            (
                runtime["id"].as_str().unwrap().to_owned(),
                runtime["protocol"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn runtime_list_names_the_builtin_agent_then_each_configured_runtime() {
    let home = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let bare = client.call("r0", json!({"type": "runtime.list"})).await;
    assert_eq!(runtimes(&bare), [("shard".to_owned(), "shard".to_owned())]);
    // What a new-agent form offers: the default model, and a folder (the
    // daemon's own, which exists).
    assert_eq!(bare["data"]["default_model"], "demo", "{bare}");
    let suggested = bare["data"]["suggested_cwd"].as_str().expect("a suggested folder");
    assert!(
        std::path::Path::new(suggested).is_absolute() && std::path::Path::new(suggested).is_dir()
    );

    // Read when asked: a runtime added to config.toml is listed at once.
    std::fs::write(home.path().join("config.toml"), TWO_RUNTIMES).unwrap();
    let listed = client.call("r1", json!({"type": "runtime.list"})).await;
    let expected = [("shard", "shard"), ("claude", "acp"), ("codex", "acp")]
        .map(|(id, protocol)| (id.to_owned(), protocol.to_owned()));
    assert_eq!(runtimes(&listed), expected);
    // Only ids and protocols: no command, no argument, no key.
    let text = listed.to_string();
    for hidden in ["claude-agent-acp", "codex-acp", "--quiet", "IS_SANDBOX", "sk-runtime-secret"] {
        assert!(!text.contains(hidden), "{hidden} leaked: {text}");
    }
}

#[tokio::test]
async fn an_unknown_runtime_is_not_found_and_a_bad_one_is_refused_clearly() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    std::fs::write(home.path().join("config.toml"), TWO_RUNTIMES).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let unknown =
        client.call("c", json!({"type": "agent.create", "cwd": cwd, "runtime": "gemini"})).await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND", "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("`gemini`"), "{unknown}");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"], json!([]), "nothing made: {listed}");

    // A runtime that takes the built-in agent's id is a configuration
    // error, said as such.
    let taken = "[[runtimes]]\nid = \"shard\"\nprotocol = \"acp\"\ncommand = \"x\"\n";
    std::fs::write(home.path().join("config.toml"), taken).unwrap();
    let refused = client.call("r", json!({"type": "runtime.list"})).await;
    assert_eq!(refused["success"], false, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("built-in"), "{refused}");
}

#[tokio::test]
async fn the_builtin_agent_says_it_runs_shard() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    for (id, create) in [
        ("a", json!({"type": "agent.create", "cwd": cwd})),
        ("b", json!({"type": "agent.create", "cwd": cwd, "runtime": "shard"})),
    ] {
        let made = client.call(id, create).await;
        assert_eq!(made["success"], true, "{made}");
    }
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{listed}");
    assert!(agents.iter().all(|agent| agent["runtime"] == "shard"), "{listed}");
}

/// `config.toml` with the scripted ACP agent (tests/fixtures/acp) as `fake`.
pub(super) fn scripted_runtime() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/acp/fake_acp_agent.py");
    format!(
        "[[runtimes]]\nid = \"fake\"\nprotocol = \"acp\"\ncommand = \"python3\"\nargs = [{script:?}]\n"
    )
}

#[tokio::test]
async fn an_acp_agent_streams_asks_and_is_recorded_like_shards_own() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    std::fs::write(home.path().join("config.toml"), scripted_runtime()).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let made = client
        .call("c", json!({"type": "agent.create", "cwd": cwd, "runtime": "fake", "name": "acp"}))
        .await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&agent, "interactive").await;

    // A streamed reply: deltas, then the whole message, then the turn's end.
    // Another client attached learns the prompt and its entry at once.
    let mut other = Client::unix(&daemon.socket()).await;
    other.attach(&agent, "observer").await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "hello world"});
    assert_eq!(client.call("p1", prompt).await["success"], true);
    let turn = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let types: Vec<_> = turn.iter().filter_map(|m| m["type"].as_str()).collect();
    let start = types.iter().position(|t| *t == "turn_start").expect("a turn start");
    assert_eq!(types.get(start + 1), Some(&"user_message"), "{types:?}");
    let seen = other.until_agent(&agent, |message| message["type"] == "user_message").await;
    let said = seen.last().expect("the user message");
    assert_eq!(said["text"], "hello world", "{said}");
    assert_eq!(said["turn_id"], turn[start]["turn_id"], "{said}");
    let entry = said["entry_id"].as_str().expect("its entry").to_owned();
    let deltas =
        turn.iter().filter(|m| m["type"] == "message_delta" && m["kind"] == "text").count();
    assert!(deltas >= 2, "streamed in deltas: {turn:?}");
    let complete = turn.iter().find(|m| m["type"] == "message_complete").expect("a whole message");
    let text = complete["message"]["content"].to_string();
    assert!(text.contains("echo: hello world"), "{complete}");

    // A tool call that asks first: Shard's own question, answered as any.
    let run =
        json!({"type": "prompt", "agent_id": agent, "message": "run: echo from-the-acp-tool"});
    assert_eq!(client.call("p2", run).await["success"], true);
    let asked = client.permission_request(&agent).await;
    let decision = json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": "allow"});
    assert_eq!(client.call("a", decision).await["success"], true);
    let turn = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let result = turn.iter().find(|m| m["type"] == "tool_result").expect("a tool result");
    assert!(result["content"].to_string().contains("from-the-acp-tool"), "{result}");
    let resolved = turn.iter().find(|m| m["type"] == "permission_resolved");
    assert!(resolved.is_some(), "every client learns the question is settled: {turn:?}");

    // A client that attaches later sees the conversation from Shard's own
    // record of it, and the agent says which runtime it runs.
    let mut late = Client::unix(&daemon.socket()).await;
    let sync = late.attach(&agent, "observer").await;
    let window = sync["live_window"].to_string();
    assert!(window.contains("hello world") && window.contains("echo: hello world"), "{sync}");
    assert!(window.contains(&entry), "the entry it named is the recorded one: {sync}");
    let listed = late.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["runtime"], "fake", "{listed}");
}

#[tokio::test]
async fn an_acp_agent_that_cannot_start_says_so() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    let config = "[[runtimes]]\nid = \"missing\"\nprotocol = \"acp\"\ncommand = \"/nonexistent/acp-agent\"\n";
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let made =
        client.call("c", json!({"type": "agent.create", "cwd": cwd, "runtime": "missing"})).await;
    assert_eq!(made["error"]["code"], "RUNTIME_START_FAILED", "{made}");
    let agent = made["error"]["data"]["agent_id"].as_str().expect("the agent is kept");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["agent_id"], agent, "{listed}");
    assert_eq!(listed["data"]["agents"][0]["runtime_state"], "failed", "{listed}");
}

/// A scripted ACP agent on `fake`, attached interactively; its id.
pub(super) async fn scripted_agent(daemon: &Daemon, client: &mut Client, cwd: &str) -> String {
    std::fs::write(daemon.home.join("config.toml"), scripted_runtime()).unwrap();
    let made =
        client.call("c", json!({"type": "agent.create", "cwd": cwd, "runtime": "fake"})).await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&agent, "interactive").await;
    agent
}

/// Prompts `message` and reads the agent's events until its turn ends.
pub(super) async fn turn(client: &mut Client, agent: &str, message: &str) -> Vec<Value> {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message});
    let answer = client.call(message, prompt).await;
    assert_eq!(answer["success"], true, "{answer}");
    client.until_agent(agent, |event| event["type"] == "turn_end").await
}

fn said(turn: &[Value]) -> String {
    let complete = turn.iter().find(|event| event["type"] == "message_complete");
    complete.map(|event| event["message"]["content"].to_string()).unwrap_or_default()
}

#[tokio::test]
async fn an_acp_agent_that_writes_garbage_huge_lines_or_strange_requests_goes_on() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    // Not JSON, a JSON array, a line past the 16 MiB cap, a request Shard
    // does not know: each is skipped or refused, and the turn still ends
    // with the reply that follows.
    for script in ["garbage", "huge: 17000000", "unknown-request"] {
        let events = turn(&mut client, &agent, script).await;
        assert!(
            said(&events).contains(&format!("echo: {}", script.split(':').next().unwrap())),
            "{script}: {events:?}"
        );
    }
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"][0]["runtime_state"], "running", "{listed}");
}

#[tokio::test]
async fn an_acp_agent_that_dies_mid_turn_is_reported_and_the_next_prompt_starts_it_again() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "die"});
    assert_eq!(client.call("die", prompt).await["success"], true);
    let exited =
        client.until(|event| event["type"] == "agent_exited" && event["agent_id"] == agent).await;
    assert_eq!(exited.last().unwrap()["runtime_state"], "failed", "{exited:?}");
    let events = turn(&mut client, &agent, "hello again").await;
    assert!(said(&events).contains("echo: hello again"), "{events:?}");
}

#[tokio::test]
async fn an_acp_agents_form_is_asked_field_by_field_in_every_tab_and_answered_from_any() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "elicit"});
    assert_eq!(client.call("p", prompt).await["success"], true);
    let asked = client.until_agent(&agent, |event| event["type"] == "ui_request").await;
    let colour = asked.last().unwrap().clone();
    assert_eq!(
        (colour["kind"].as_str(), colour["title"].as_str()),
        (Some("select"), Some("Colour"))
    );
    assert_eq!(colour["options"], json!(["Red", "Teal"]));
    assert_eq!(colour["message"], "How should it look?");

    // Another tab attaching now finds the question in its sync, and answers it.
    let mut other = Client::unix(&daemon.socket()).await;
    let sync = other.attach(&agent, "interactive").await;
    assert_eq!(sync["pending_requests"][0]["request_id"], colour["request_id"], "{sync}");
    assert_eq!(sync["status"], "waiting_for_ui");
    let answer = |request: &Value, value: Value| {
        json!({"type": "ui_response", "agent_id": agent, "request_id": request["request_id"],
               "value": value})
    };
    assert_eq!(other.call("a1", answer(&colour, json!("Teal"))).await["success"], true);
    let settled = client.until_agent(&agent, |event| event["type"] == "ui_resolved").await;
    assert_eq!(settled.last().unwrap()["request_id"], colour["request_id"]);
    let asked = client.until_agent(&agent, |event| event["type"] == "ui_request").await;
    let shiny = asked.last().unwrap().clone();
    assert_eq!(shiny["kind"], "confirm");
    assert_eq!(client.call("a2", answer(&shiny, json!("yes"))).await["success"], true);
    let ended = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    assert!(
        said(&ended).contains(r#"elicited {\"action\": \"accept\", \"content\": {\"colour\": \"teal\", \"shiny\": true}}"#),
        "{ended:#?}"
    );
}

/// Creates an agent on the scripted runtime started with `env`; the answer.
async fn create_with_env(env: &str) -> Value {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let config = format!("{}env = {{ {env} }}\n", scripted_runtime());
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let cwd = project.path().to_str().unwrap();
    let create = json!({"type": "agent.create", "cwd": cwd, "runtime": "fake"});
    client.call_within("c", create, Duration::from_secs(45)).await
}

#[tokio::test]
async fn an_acp_agent_that_dies_or_stays_silent_at_start_fails_with_its_stderr() {
    let crashed = create_with_env(r#"FAKE_ACP_CRASH_AT_START = "1""#).await;
    assert_eq!(crashed["error"]["code"], "RUNTIME_START_FAILED", "{crashed}");
    let message = crashed["error"]["message"].as_str().unwrap();
    assert!(message.contains("exited before it was ready"), "{message}");
    assert!(message.ends_with("fatal: cannot start (scripted)"), "ends with its stderr: {message}");

    // Silent at `initialize`: refused after CONTRACT.md's 30 s, quoting
    // what it wrote; the bridge's deadline comes before the host's.
    let silent = create_with_env(r#"FAKE_ACP_SILENT = "1", FAKE_ACP_STDERR_LINES = "8""#).await;
    assert_eq!(silent["error"]["code"], "RUNTIME_START_FAILED", "{silent}");
    let message = silent["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer within 30 s"), "{message}");
    assert!(message.contains("its stderr ends:"), "{message}");
    assert!(message.len() < 2048, "bounded: {message}");
}

/// Prompts the scripted agent to start `sleep <seconds>` in a session of
/// its own; that process's pid.
async fn spawned(client: &mut Client, agent: &str, seconds: u32) -> u32 {
    let spawn =
        json!({"type": "prompt", "agent_id": agent, "message": format!("spawn: {seconds}")});
    assert_eq!(client.call("spawn", spawn).await["success"], true);
    let started = client
        .until_agent(agent, |event| {
            event["text_delta"].as_str().is_some_and(|text| text.starts_with("pid "))
        })
        .await;
    // The pid the agent says is its sandbox's; on this machine the command
    // is found by its command line (each test sleeps for its own number).
    assert!(started.last().is_some(), "the agent said it started the command");
    let found = super::support::running(&format!("^sleep {seconds}$"));
    assert_eq!(found.len(), 1, "one `sleep {seconds}`: {found:?}");
    let pid = found[0].split_whitespace().next().unwrap_or_default();
    pid.parse().expect("a pid")
}

#[tokio::test]
async fn an_acp_agent_takes_follow_ups_refuses_steers_and_an_abort_leaves_no_process() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;

    // A follow-up waits for the turn's end, then is a turn of its own; a
    // steer has no way into an ACP turn and says what to do instead.
    let first = json!({"type": "prompt", "agent_id": agent, "message": "sleep: 1"});
    assert_eq!(client.call("p1", first).await["success"], true);
    let follow = json!({"type": "prompt", "agent_id": agent, "message": "and then",
                        "streaming_behavior": "follow_up"});
    assert_eq!(client.call("p2", follow).await["success"], true);
    let steer = client.call("s", json!({"type": "steer", "agent_id": agent, "message": "x"})).await;
    assert_eq!(steer["error"]["code"], "CONFLICT", "{steer}");
    assert!(steer["error"]["message"].as_str().unwrap().contains("follow-up"), "{steer}");
    client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    let second = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    assert!(said(&second).contains("echo: and then"), "{second:?}");
    assert!(second.last().unwrap().get("aborted").is_none(), "{second:?}");

    // A command the agent started in a session of its own, left running
    // when the turn is cancelled (as Codex leaves it), is killed with it.
    let pid = spawned(&mut client, &agent, 61).await;
    assert!(alive(pid), "the command runs");
    assert_eq!(
        client.call("a", json!({"type": "abort", "agent_id": agent})).await["success"],
        true
    );
    let ended = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    let end = ended.last().unwrap();
    assert_eq!(end["aborted"], true, "an abort says so: {end}");
    assert!(end.get("dropped").is_none(), "nothing was queued: {end}");
    let ten = Duration::from_secs(10);
    wait_until_within("the cancelled turn's command to be killed", ten, || !alive(pid)).await;
}

#[tokio::test]
async fn an_acp_agent_takes_up_its_session_after_a_daemon_restart() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let state = TempDir::new().unwrap();
    // Where it keeps its sessions is the agent's to write, in its sandbox.
    let config = format!(
        "{}env = {{ FAKE_ACP_STATE = {state:?} }}\nsandbox = {{ allow_write = [{state:?}] }}\n",
        scripted_runtime(),
        state = state.path()
    );
    std::fs::write(home.path().join("config.toml"), &config).unwrap();
    let cwd = project.path().to_str().unwrap();
    let agent = {
        let daemon = Daemon::start_in(home.path(), &[]).await;
        let mut client = Client::unix(&daemon.socket()).await;
        let made =
            client.call("c", json!({"type": "agent.create", "cwd": cwd, "runtime": "fake"})).await;
        let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
        client.attach(&agent, "interactive").await;
        let events = turn(&mut client, &agent, "remember this").await;
        assert!(said(&events).contains("echo: remember this"), "{events:?}");
        agent
    };
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let sync = client.attach(&agent, "interactive").await;
    assert!(sync["live_window"].to_string().contains("remember this"), "Shard's record: {sync}");
    // The agent itself remembers: its session was loaded, not started anew.
    let events = turn(&mut client, &agent, "history").await;
    assert!(said(&events).contains("history: 2 earlier messages"), "{events:?}");
    assert!(!events.iter().any(|event| event["type"] == "error"), "{events:?}");

    // Without its state the agent cannot load it: a new session, said plainly.
    drop(client);
    drop(daemon);
    for entry in std::fs::read_dir(state.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    client.attach(&agent, "interactive").await;
    let started = client.until_agent(&agent, |event| event["type"] == "error").await;
    let notice = started.last().unwrap();
    assert!(notice["message"].as_str().unwrap().contains("starts a new one"), "{notice}");
    let events = turn(&mut client, &agent, "history").await;
    assert!(said(&events).contains("history: 0 earlier messages"), "{events:?}");
}

#[tokio::test]
async fn an_acp_agent_and_what_it_started_do_not_outlive_a_killed_daemon() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    let pid = spawned(&mut client, &agent, 121).await;
    // SIGKILL: the daemon has no chance to kill anything itself.
    drop(client);
    drop(daemon);
    let ten = Duration::from_secs(10);
    wait_until_within("the agent's command to die with the daemon", ten, || !alive(pid)).await;
}

#[tokio::test]
async fn an_acp_agent_runs_in_a_workspace_and_takes_no_shard_model_or_mode() {
    let home = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    std::fs::write(daemon.home.join("config.toml"), scripted_runtime()).unwrap();
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    // A Shard model or mode means nothing to another agent: refused, saying
    // where its own are chosen.
    for extra in [json!({"model": "demo"}), json!({"mode": "plan"})] {
        let mut create = json!({"type": "agent.create", "cwd": cwd, "runtime": "fake"});
        create.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let refused = client.call("c", create).await;
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("set_model"), "{refused}");
    }

    // A workspace's agent runs the runtime asked for, in its worktree.
    let repo = super::workspaces::repository();
    let body = json!({"type": "workspace.create", "cwd": super::workspaces::canonical(repo.path()),
                      "runtime": "fake"});
    let made = client.call("w", body).await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    let worktree = made["data"]["workspace"]["cwd"].as_str().unwrap().to_owned();
    let status = client.call("s", json!({"type": "agent.status", "agent_id": agent})).await;
    let info = &status["data"]["agents"][0];
    assert_eq!(
        (info["runtime"].as_str(), info["cwd"].as_str()),
        (Some("fake"), Some(worktree.as_str()))
    );
    // Until the agent names its model, Shard names it by its runtime.
    assert_eq!(info["model"], "fake", "{status}");
    client.attach(&agent, "interactive").await;
    let events = turn(&mut client, &agent, "hello from the worktree").await;
    assert!(said(&events).contains("echo: hello from the worktree"), "{events:?}");
}

#[tokio::test]
async fn an_acp_agents_commands_are_listed_and_sent_as_typed_and_shards_own_has_none() {
    let project = TempDir::new().unwrap();
    let cwd = project.path().to_str().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, cwd).await;
    // The agent lists its commands once its session has started.
    let list = json!({"type": "list_commands", "agent_id": agent});
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let commands = loop {
        let listed = client.call("l", list.clone()).await;
        assert_eq!(listed["success"], true, "{listed}");
        if listed["data"]["commands"].as_array().is_some_and(|commands| !commands.is_empty()) {
            break listed["data"]["commands"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "no commands: {listed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        commands[0],
        json!({"name": "review", "description": "Review the changes",
                                   "hint": "what to look at"})
    );
    assert_eq!(commands[1]["name"], "compact");
    let events = turn(&mut client, &agent, "/review the diff").await;
    assert!(said(&events).contains("echo: /review the diff"), "{events:?}");

    let made = client.call("b", json!({"type": "agent.create", "cwd": cwd})).await;
    let builtin = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&builtin, "interactive").await;
    let listed = client.call("n", json!({"type": "list_commands", "agent_id": builtin})).await;
    assert_eq!(listed["success"], true, "{listed}");
    assert_eq!(listed["data"]["commands"], json!([]));
}
