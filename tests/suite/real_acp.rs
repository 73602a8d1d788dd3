//! Agents nobody here wrote, under Shard through ACP: Claude Code
//! (`@zed-industries/claude-agent-acp`), Codex (`@zed-industries/codex-acp`),
//! Gemini CLI (`@google/gemini-cli`) and opencode (`opencode-ai`), pinned in
//! tests/acp/package-lock.json and installed by scripts/test. Each runs
//! offline against a scripted local model server
//! (tests/fixtures/acp/model_server.py: Anthropic Messages, OpenAI
//! Responses, Gemini generateContent, chat completions) with the configuration
//! tests/fixtures/acp/setup_agent.py writes, and is driven over the unix
//! socket as any client would: a streamed reply, a command that asks and
//! is allowed, one that is denied, a file edit shown as a diff, an abort
//! mid-command that leaves no process behind, a prompt after it, and a
//! daemon restart after which the agent remembers its session.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::client::Client;
use super::support::{Daemon, running, wait_until_within};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/acp").join(name)
}

/// The scripted model server, on a port of its own.
struct ModelServer {
    _child: tokio::process::Child,
    port: u16,
}

impl ModelServer {
    async fn start(log: &Path) -> Self {
        let mut child = tokio::process::Command::new("python3")
            .arg(fixture("model_server.py"))
            .args(["--port", "0", "--log"])
            .arg(log)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs the model server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next_line().await.expect("read").expect("the server says its port");
        let port = first.trim_start_matches("PORT ").trim().parse().expect("a port");
        Self { _child: child, port }
    }
}

/// `config.toml` naming `agent` as a runtime, set up in `state` to reach
/// the model server on `port`: the command and environment
/// setup_agent.py gives.
fn runtime_config(agent: &str, state: &Path, port: u16) -> String {
    let output = std::process::Command::new("python3")
        .arg(fixture("setup_agent.py"))
        .args([agent, state.to_str().unwrap(), &port.to_string()])
        .output()
        .expect("python3 runs setup_agent.py");
    assert!(
        output.status.success(),
        "{agent} is not installed: run scripts/test (or `npm install` in tests/acp): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let spec: Value = serde_json::from_slice(&output.stdout).expect("a JSON spec");
    let command: Vec<&str> =
        spec["command"].as_array().unwrap().iter().map(|word| word.as_str().unwrap()).collect();
    let env: Vec<String> = spec["env"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(key, value)| format!("{key} = {:?}", value.as_str().unwrap()))
        .collect();
    format!(
        "[[runtimes]]\nid = {agent:?}\nprotocol = \"acp\"\ncommand = {:?}\nargs = {:?}\nenv = {{ {} }}\n",
        command[0],
        &command[1..],
        env.join(", ")
    )
}

/// Prompts `message` and reads until the turn ends, answering each
/// permission request with `decision`.
async fn turn(client: &mut Client, agent: &str, message: &str, decision: &str) -> Vec<Value> {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message});
    let answer = client.call_within(message, prompt, std::time::Duration::from_secs(60)).await;
    assert_eq!(answer["success"], true, "{answer}");
    let mut seen = Vec::new();
    loop {
        let events = client
            .until_agent(agent, |event| {
                event["type"] == "turn_end" || event["type"] == "permission_request"
            })
            .await;
        let last = events.last().cloned().unwrap();
        seen.extend(events);
        if last["type"] == "turn_end" {
            return seen;
        }
        let answer = json!({"type": "permission_response", "agent_id": agent,
                            "request_id": last["request_id"], "decision": decision});
        assert_eq!(client.call("answer", answer).await["success"], true);
    }
}

fn said(events: &[Value]) -> String {
    events
        .iter()
        .filter(|event| event["type"] == "message_complete")
        .map(|event| event["message"]["content"].to_string())
        .collect()
}

fn has(events: &[Value], kind: &str) -> bool {
    events.iter().any(|event| event["type"] == kind)
}

/// The live `sleep <seconds>` processes on this machine.
fn sleeping(seconds: &str) -> Vec<String> {
    running(&format!("^sleep {seconds}$"))
}

/// One agent, and what it needs of the steps above.
struct RealAgent {
    /// Its runtime id, as setup_agent.py names it.
    id: &'static str,
    /// What its command line holds, to see that its process is gone.
    program: &'static str,
    /// A number of seconds no other test sleeps.
    sleep: &'static str,
    edit: Edit,
    restart: Restart,
}

/// The file the edit step has the agent write.
enum Edit {
    /// One that is not there yet.
    NewFile,
    /// One that holds `old\n` already: Gemini CLI 0.61.0 cannot create a
    /// file through a client that serves ACP's file methods (its write_file
    /// reads the file first, and takes ACP's "resource not found" for a
    /// failure, not for a file that is not there yet).
    ExistingFile,
}

/// When the daemon restarts.
enum Restart {
    /// As soon as the steps before it are done.
    AtOnce,
    /// Once the minute the session began in (UTC) is over: Gemini CLI
    /// 0.61.0 names a session's file by that minute and the session's id,
    /// and a process that loads the session within the same minute opens
    /// that file afresh, emptying it before it reads it, so the load fails.
    InALaterMinute,
}

/// The minutes since the epoch, as a clock on the wall reads them.
fn this_minute() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    now.as_secs() / 60
}

/// The agent through every step above.
async fn a_real_agent_works_under_shard(real: RealAgent) {
    let RealAgent { id: agent, program, sleep, edit, restart } = real;
    let scratch = TempDir::new().unwrap();
    let home = scratch.path().join("home");
    let state = scratch.path().join(agent);
    let project = scratch.path().join("project");
    for dir in [&home, &state, &project] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let project = project.canonicalize().unwrap();
    let cwd = project.to_str().unwrap();
    let server = ModelServer::start(&scratch.path().join("model.log")).await;
    std::fs::write(home.join("config.toml"), runtime_config(agent, &state, server.port)).unwrap();

    let (agent_id, began) = {
        let daemon = Daemon::start_in(&home, &[]).await;
        let mut client = Client::unix(&daemon.socket()).await;
        let create = json!({"type": "agent.create", "cwd": cwd, "runtime": agent});
        let made = client.call_within("c", create, std::time::Duration::from_secs(60)).await;
        assert_eq!(made["success"], true, "{agent}: {made}");
        let agent_id = made["data"]["agent_id"].as_str().unwrap().to_owned();
        // Read once the session is open: it began in this minute or before.
        let began = this_minute();
        client.attach(&agent_id, "interactive").await;

        // A streamed reply.
        let events = turn(&mut client, &agent_id, "hello zebra42", "deny").await;
        let deltas = events.iter().filter(|event| event["type"] == "message_delta").count();
        assert!(said(&events).contains("echo: hello zebra42"), "{agent}: {events:?}");
        assert!(deltas >= 2, "{agent} streams: {events:?}");

        // A command that asks, allowed; one that asks, denied.
        let events = turn(&mut client, &agent_id, "run: touch allowed.txt", "allow").await;
        assert!(has(&events, "permission_resolved"), "{agent} asked: {events:?}");
        assert!(project.join("allowed.txt").exists(), "{agent} ran it: {events:?}");
        let events = turn(&mut client, &agent_id, "run: touch denied.txt", "deny").await;
        assert!(has(&events, "permission_request"), "{agent} asked: {events:?}");
        assert!(!project.join("denied.txt").exists(), "{agent} did not run it: {events:?}");

        // A file edit, shown as a diff.
        if let Edit::ExistingFile = edit {
            std::fs::write(project.join("edited.txt"), "old\n").unwrap();
        }
        let events = turn(&mut client, &agent_id, "edit: edited.txt", "allow").await;
        let written = std::fs::read_to_string(project.join("edited.txt")).unwrap_or_default();
        assert_eq!(written, "new\n", "{agent}: {events:?}");
        let diff = events.iter().any(|event| event["render"]["kind"] == "diff");
        assert!(diff, "{agent} shows a diff: {events:?}");

        // An abort mid-command leaves no process behind, and the next
        // prompt is answered as usual.
        let prompt =
            json!({"type": "prompt", "agent_id": agent_id, "message": format!("sleep: {sleep}")});
        assert_eq!(client.call("sleep", prompt).await["success"], true);
        let started = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while sleeping(sleep).is_empty() {
            assert!(std::time::Instant::now() < started, "{agent} never ran sleep {sleep}");
            let next = tokio::time::timeout(std::time::Duration::from_millis(200), client.next());
            if let Ok(event) = next.await
                && event["type"] == "permission_request"
            {
                let answer = json!({"type": "permission_response", "agent_id": agent_id,
                                        "request_id": event["request_id"], "decision": "allow"});
                client.call("answer", answer).await;
            }
        }
        let abort = json!({"type": "abort", "agent_id": agent_id});
        assert_eq!(client.call("abort", abort).await["success"], true);
        client.until_agent(&agent_id, |event| event["type"] == "turn_end").await;
        let ten = Duration::from_secs(10);
        wait_until_within("the aborted command to die", ten, || sleeping(sleep).is_empty()).await;
        let events = turn(&mut client, &agent_id, "hello again", "deny").await;
        assert!(said(&events).contains("echo: hello again"), "{agent} after abort: {events:?}");
        (agent_id, began)
    };
    if let Restart::InALaterMinute = restart {
        while this_minute() == began {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    // After a restart the agent takes up its session: the model sees the
    // earlier conversation again. The restart is an orderly one: the first
    // daemon's agent is gone (its guard killed it) before the second starts.
    let guarded = format!("shard guard -- .*{program}");
    wait_until_within("the first agent to be gone", Duration::from_secs(10), || {
        running(&guarded).is_empty()
    })
    .await;
    let daemon = Daemon::start_in(&home, &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let sync = client.attach(&agent_id, "interactive").await;
    assert!(sync["live_window"].to_string().contains("hello zebra42"), "{agent}: {sync}");
    let events = turn(&mut client, &agent_id, "recall zebra42", "deny").await;
    assert!(said(&events).contains("recall: remembered"), "{agent} after a restart: {events:?}");
}

#[tokio::test]
async fn claude_code_works_under_shard() {
    a_real_agent_works_under_shard(RealAgent {
        id: "claude",
        program: "claude-agent-acp/dist",
        sleep: "41",
        edit: Edit::NewFile,
        restart: Restart::AtOnce,
    })
    .await;
}

#[tokio::test]
async fn codex_works_under_shard() {
    a_real_agent_works_under_shard(RealAgent {
        id: "codex",
        program: "codex-acp",
        sleep: "43",
        edit: Edit::NewFile,
        restart: Restart::AtOnce,
    })
    .await;
}

#[tokio::test]
async fn gemini_cli_works_under_shard() {
    a_real_agent_works_under_shard(RealAgent {
        id: "gemini",
        program: "gemini-cli/bundle/gemini.js",
        sleep: "53",
        edit: Edit::ExistingFile,
        restart: Restart::InALaterMinute,
    })
    .await;
}

#[tokio::test]
async fn opencode_works_under_shard() {
    a_real_agent_works_under_shard(RealAgent {
        id: "opencode",
        program: "opencode.exe acp",
        sleep: "47",
        edit: Edit::NewFile,
        restart: Restart::AtOnce,
    })
    .await;
}
