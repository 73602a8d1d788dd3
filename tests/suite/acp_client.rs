//! What Shard does as an ACP agent's client (docs/ACP.md): the file service
//! it offers (`fs/read_text_file`, `fs/write_text_file`), what it shows of
//! the agent's questions, calls and refusals. Each through the real daemon
//! and the scripted agent (tests/fixtures/acp/fake_acp_agent.py).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::runtimes::{scripted_agent, scripted_runtime, turn};
use super::support::Daemon;

/// The text the agent said in a turn, its messages' text blocks joined.
fn answered(events: &[Value]) -> String {
    let messages = events.iter().filter(|event| event["type"] == "message_complete");
    let blocks = messages
        .flat_map(|event| event["message"]["content"].as_array().cloned().unwrap_or_default());
    blocks.filter_map(|block| block["text"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn an_acp_agent_swapping_a_folder_for_a_link_reads_and_writes_nothing_outside() {
    let project = TempDir::new().unwrap();
    let outside = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let root = project.path().canonicalize().unwrap();
    let agent = scripted_agent(&daemon, &mut client, root.to_str().unwrap()).await;
    std::fs::write(outside.path().join("f"), "SECRET-OUTSIDE").unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    std::fs::write(root.join("d/f"), "inside").unwrap();

    // `d` is a folder, then a link to `outside`, then the folder again, as
    // fast as this thread can swap them, while the agent reads `d/f` and
    // writes `d/new.txt` back to back.
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), root.clone(), outside.path().to_owned());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            let (d, real) = (root.join("d"), root.join("real"));
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&d, &real).unwrap();
                // The service may make `d` while it is missing: a folder
                // for the file it writes, inside, as it should.
                let _ = std::os::unix::fs::symlink(&outside, &d);
                std::thread::yield_now();
                while std::fs::rename(&real, &d).is_err() {
                    if std::fs::remove_file(&d).is_err() {
                        let _ = std::fs::remove_dir_all(&d);
                    }
                }
                swaps += 1;
            }
            swaps
        })
    };
    let (read, write) = (root.join("d/f"), root.join("d/new.txt"));
    let script = format!("hammer: 3 {} {}", read.display(), write.display());
    let events = turn(&mut client, &agent, &script).await;
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();

    let text = answered(&events);
    let summary = text.split_once("hammered ").map(|(_, rest)| rest);
    let summary = summary.unwrap_or_else(|| panic!("a summary: {events:?}"));
    let summary: Value = serde_json::from_str(summary).unwrap_or_else(|_| panic!("{text}"));
    assert!(swaps > 100, "the folder was swapped {swaps} times");
    let reads = summary["reads"].as_u64().unwrap();
    let writes = summary["writes"].as_u64().unwrap();
    assert!(reads > 10 && writes > 10, "the service served through the race: {summary}");
    assert_eq!(summary["texts"], json!(["inside"]), "only the inside file was read: {summary}");
    assert_eq!(std::fs::read_to_string(outside.path().join("f")).unwrap(), "SECRET-OUTSIDE");
    let planted: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().collect();
    assert_eq!(planted.len(), 1, "nothing written outside: {planted:?}");
}

#[tokio::test]
async fn an_acp_agent_reads_a_missing_file_as_not_found_and_writes_into_new_folders() {
    let project = TempDir::new().unwrap();
    let outside = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let root = project.path().canonicalize().unwrap();
    let agent = scripted_agent(&daemon, &mut client, root.to_str().unwrap()).await;
    std::os::unix::fs::symlink(outside.path(), root.join("away")).unwrap();

    // ACP's own code for a file that is not there.
    let missing = root.join("missing.txt");
    let events = turn(&mut client, &agent, &format!("read: {}", missing.display())).await;
    assert!(answered(&events).contains("read error -32002"), "{events:?}");

    // Folders that do not exist yet are made, inside.
    let deep = root.join("new/deeper/file.txt");
    let events = turn(&mut client, &agent, &format!("write: {} hello", deep.display())).await;
    assert!(answered(&events).contains("wrote"), "{events:?}");
    assert_eq!(std::fs::read_to_string(&deep).unwrap(), "hello");
    let events = turn(&mut client, &agent, &format!("read: {}", deep.display())).await;
    assert!(answered(&events).contains(r#"read {"content": "hello"}"#), "{events:?}");

    // Never through a link, not even to make a folder.
    let through = root.join("away/made/x.txt");
    let events = turn(&mut client, &agent, &format!("write: {} planted", through.display())).await;
    assert!(answered(&events).contains("write error"), "{events:?}");
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none(), "nothing made outside");
}

/// The path a permission request is about.
fn asked_path(request: &Value) -> String {
    request["input"]["path"].as_str().unwrap_or_default().to_owned()
}

/// Prompts a write of `text` to `path`, answers its question with
/// `decision` (none asked: `None`); the turn's events.
async fn write_answering(
    client: &mut Client,
    agent: &str,
    path: &Path,
    text: &str,
    decision: &str,
) -> (Option<Value>, Vec<Value>) {
    let message = format!("write: {} {text}", path.display());
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message});
    assert_eq!(client.call(&message, prompt).await["success"], true);
    let first = client
        .until_agent(agent, |event| {
            event["type"] == "permission_request" || event["type"] == "turn_end"
        })
        .await;
    let Some(asked) = first.last().filter(|event| event["type"] == "permission_request").cloned()
    else {
        return (None, first);
    };
    let answer = json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": decision});
    assert_eq!(client.call("answer", answer).await["success"], true);
    let rest = client.until_agent(agent, |event| event["type"] == "turn_end").await;
    (Some(asked), first.into_iter().chain(rest).collect())
}

#[tokio::test]
async fn an_acp_agent_asks_before_writing_git_shell_start_up_or_agent_settings_files() {
    let project = TempDir::new().unwrap();
    let root = project.path().canonicalize().unwrap();
    // (Shard's home cannot hold an agent's directory: the daemon refuses
    // such a cwd, so a write into the home is judged in unit tests only.)
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, root.to_str().unwrap()).await;
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();

    // Refused when denied: the file is as it was.
    let config = root.join(".git/config");
    let (asked, events) = write_answering(&mut client, &agent, &config, "planted", "deny").await;
    let asked = asked.unwrap_or_else(|| panic!("a .git write asks first: {events:?}"));
    assert_eq!(asked_path(&asked), config.display().to_string(), "{asked}");
    assert!(answered(&events).contains("write error"), "{events:?}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
    // Written when allowed.
    let (asked, events) = write_answering(&mut client, &agent, &config, "allowed", "allow").await;
    assert!(asked.is_some(), "{events:?}");
    assert!(answered(&events).contains("wrote"), "{events:?}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "allowed");

    for sensitive in [
        root.join(".git/hooks/pre-commit"),
        root.join(".bashrc"),
        root.join(".profile"),
        root.join("sub/.zshrc"),
        root.join(".claude/settings.json"),
        root.join(".envrc"),
    ] {
        let (asked, events) =
            write_answering(&mut client, &agent, &sensitive, "planted", "deny").await;
        assert!(asked.is_some(), "{} asks first: {events:?}", sensitive.display());
        assert!(!sensitive.exists() || std::fs::read_to_string(&sensitive).unwrap() != "planted");
    }

    // An ordinary file is written without a question.
    let plain = root.join("notes.txt");
    let (asked, events) = write_answering(&mut client, &agent, &plain, "fine", "deny").await;
    assert!(asked.is_none(), "{asked:?}");
    assert!(answered(&events).contains("wrote"), "{events:?}");
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "fine");
}

#[tokio::test]
async fn an_acp_agent_waiting_for_an_answer_says_so_in_events_status_and_sync() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    let run = json!({"type": "prompt", "agent_id": agent, "message": "run: echo waited"});
    assert_eq!(client.call("p", run).await["success"], true);
    let asked = client.permission_request(&agent).await;
    let waiting = |event: &Value| event["type"] == "status" && event["agent_id"] == agent;
    let status = client.until(waiting).await.pop().unwrap();
    assert_eq!(status["status"], "waiting_for_permission", "{status}");

    let info = client.call("s", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(info["data"]["agents"][0]["status"], "waiting_for_permission", "{info}");
    let mut late = Client::unix(&daemon.socket()).await;
    let sync = late.attach(&agent, "observer").await;
    assert_eq!(sync["status"], "waiting_for_permission", "{sync}");

    // Answered: streaming again, then idle at the turn's end.
    let answer = json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": "allow"});
    assert_eq!(client.call("a", answer).await["success"], true);
    let status = client.until(waiting).await.pop().unwrap();
    assert_eq!(status["status"], "streaming", "{status}");
    let info = client.call("s2", json!({"type": "agent.status", "agent_id": agent})).await;
    let now = info["data"]["agents"][0]["status"].as_str().unwrap().to_owned();
    assert!(now == "streaming" || now == "idle", "{info}");
    let ended = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    assert!(answered(&ended).contains("ran echo waited"), "{ended:?}");
}

#[tokio::test]
async fn an_acp_shell_call_named_only_by_its_title_shows_its_command() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = scripted_agent(&daemon, &mut client, project.path().to_str().unwrap()).await;
    let run = json!({"type": "prompt", "agent_id": agent, "message": "titled: echo by-title"});
    assert_eq!(client.call("p", run).await["success"], true);
    let events = client.until_agent(&agent, |event| event["type"] == "tool_call").await;
    let call = events.last().unwrap();
    assert_eq!(call["render"]["kind"], "command", "{call}");
    assert_eq!(call["render"]["command"], "echo by-title", "{call}");
    let asked = client.permission_request(&agent).await;
    let answer = json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": "allow"});
    assert_eq!(client.call("a", answer).await["success"], true);
    let ended = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    let result = ended.iter().find(|event| event["type"] == "tool_result").expect("a result");
    assert!(result["content"].to_string().contains("by-title"), "{result}");
}

#[tokio::test]
async fn an_acp_agents_reason_for_a_refusal_reaches_the_client_clean() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let reason = "plan mode needs a login first\\u001b[2J";
    let config =
        format!("{}env = {{ FAKE_ACP_MODE_REFUSAL = \"{reason}\" }}\n", scripted_runtime());
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let made = client
        .call(
            "c",
            json!({"type": "agent.create", "cwd": project.path().to_str().unwrap(),
                   "runtime": "fake"}),
        )
        .await;
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&agent, "interactive").await;

    let refused =
        client.call("m", json!({"type": "set_mode", "agent_id": agent, "mode": "plan"})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("plan mode needs a login first"), "{refused}");
    assert!(!message.contains('\u{1b}'), "cleaned: {refused}");

    let prompt =
        json!({"type": "prompt", "agent_id": agent, "message": "fail: the quota is spent"});
    assert_eq!(client.call("p", prompt).await["success"], true);
    let events = client.until_agent(&agent, |event| event["type"] == "turn_end").await;
    let error = events.iter().find(|event| event["type"] == "error").expect("an error");
    assert!(error["message"].as_str().unwrap().contains("the quota is spent"), "{error}");
}
