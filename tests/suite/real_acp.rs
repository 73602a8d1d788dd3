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
pub(super) struct ModelServer {
    _child: tokio::process::Child,
    pub(super) port: u16,
}

impl ModelServer {
    pub(super) async fn start(log: &Path) -> Self {
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

/// The model server's name, as the agents' configuration names it: the
/// daemon's egress proxy finds it on this machine (`--egress-resolve`).
const MODEL_HOST: &str = "model.test";

/// The daemon's arguments that let its egress proxy find the model server.
pub(super) const RESOLVE: [&str; 2] = ["--egress-resolve", "model.test=127.0.0.1"];

/// `config.toml` naming `agent` as a runtime, set up in `state` to reach
/// the model server on `port`: the command and environment
/// setup_agent.py gives, and a sandbox whose network reaches the model
/// server, through the egress proxy, and nothing else (never asking), and
/// where the agent may keep its state.
pub(super) fn runtime_config(agent: &str, state: &Path, port: u16) -> String {
    sandboxed_runtime(agent, state, port, "deny")
}

/// [`runtime_config`] with the sandbox's `network` policy `network`.
fn sandboxed_runtime(agent: &str, state: &Path, port: u16, network: &str) -> String {
    let output = std::process::Command::new("python3")
        .arg(fixture("setup_agent.py"))
        .args([agent, state.to_str().unwrap(), &port.to_string(), "--host", MODEL_HOST])
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
        "[[runtimes]]\nid = {agent:?}\nprotocol = \"acp\"\ncommand = {:?}\nargs = {:?}\nenv = {{ {} }}\n\
         sandbox = {{ network = {network:?}, allow_hosts = [\"{MODEL_HOST}:{port}\"], allow_write = [{state:?}] }}\n",
        command[0],
        &command[1..],
        env.join(", ")
    )
}

/// Prompts `message` and reads until the turn ends, answering each
/// permission request with `decision`.
pub(super) async fn turn(
    client: &mut Client,
    agent: &str,
    message: &str,
    decision: &str,
) -> Vec<Value> {
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

pub(super) fn said(events: &[Value]) -> String {
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
        let daemon = Daemon::start_in(&home, &RESOLVE).await;
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
    // daemon's agent is gone (its sandbox ended with it) before the second
    // starts.
    let guarded = format!("shard contain .*-- .*{program}");
    wait_until_within("the first agent to be gone", Duration::from_secs(10), || {
        running(&guarded).is_empty()
    })
    .await;
    let daemon = Daemon::start_in(&home, &RESOLVE).await;
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

/// Prompts `message` and reads until the turn ends: the agent's own
/// questions are allowed by `driver`, and each `network` question of its
/// sandbox is answered `network` by `answerer`, while `driver` watches it
/// close. Returns the driver's events.
async fn contained_turn(
    driver: &mut Client,
    answerer: &mut Client,
    agent: &str,
    message: &str,
    network: &str,
) -> Vec<Value> {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": message});
    let answer = driver.call_within(message, prompt, Duration::from_secs(60)).await;
    assert_eq!(answer["success"], true, "{answer}");
    let mut seen = Vec::new();
    loop {
        let events = driver
            .until_agent(agent, |event| {
                event["type"] == "turn_end" || event["type"] == "permission_request"
            })
            .await;
        let last = events.last().cloned().unwrap();
        seen.extend(events);
        if last["type"] == "turn_end" {
            return seen;
        }
        let request_id = last["request_id"].clone();
        let (who, decision) = match last["tool_name"] == "network" {
            true => {
                answerer.until_agent(agent, |event| event["request_id"] == request_id).await;
                (&mut *answerer, network)
            }
            false => (&mut *driver, "allow"),
        };
        let response = json!({"type": "permission_response", "agent_id": agent,
                              "request_id": request_id, "decision": decision});
        assert_eq!(who.call("answer", response).await["success"], true);
    }
}

/// A real agent in its sandbox: what its commands cannot read or write,
/// and the network questions it raises, answered from a second client; its
/// model's host, allowed by the runtime's configuration, is reached through
/// the egress proxy without a question.
async fn a_real_agent_is_contained(agent: &'static str) {
    let scratch = TempDir::new().unwrap();
    let user = scratch.path().join("user");
    let home = user.join(".shard");
    let state = scratch.path().join(agent);
    let project = scratch.path().join("project");
    for dir in [&home, &state, &project, &user.join(".ssh")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(user.join(".ssh/id_ed25519"), "SECRET-SSH-KEY").unwrap();
    let project = project.canonicalize().unwrap();
    let git = std::process::Command::new("git").args(["init", "-q"]).current_dir(&project).status();
    assert!(git.unwrap().success());
    let server = ModelServer::start(&scratch.path().join("model.log")).await;
    let config = sandboxed_runtime(agent, &state, server.port, "ask");
    std::fs::write(home.join("config.toml"), config).unwrap();
    let (port, reached) = super::sandbox::server("reached-through-the-proxy").await;
    let user_home = user.to_str().unwrap();
    let args = [RESOLVE[0], RESOLVE[1], "--egress-resolve", "example.test=127.0.0.1"];
    let daemon = Daemon::start_with(&home, &args, &[("HOME", user_home)], None).await;
    let mut driver = Client::unix(&daemon.socket()).await;
    let mut answerer = Client::unix(&daemon.socket()).await;
    let create =
        json!({"type": "agent.create", "cwd": project.to_str().unwrap(), "runtime": agent});
    let made = driver.call_within("c", create, Duration::from_secs(60)).await;
    assert_eq!(made["success"], true, "{agent}: {made}");
    let agent_id = made["data"]["agent_id"].as_str().unwrap().to_owned();
    driver.attach(&agent_id, "interactive").await;
    answerer.attach(&agent_id, "interactive").await;

    let outside = scratch.path().join("outside.txt");
    let command = format!(
        "run: cat {key} {config} > leaked.txt; echo planted > {outside}; \
         echo '[core]' >> .git/config; echo hook > .git/hooks/pre-commit; echo own > own.txt",
        key = user.join(".ssh/id_ed25519").display(),
        config = home.join("config.toml").display(),
        outside = outside.display(),
    );
    let events = contained_turn(&mut driver, &mut answerer, &agent_id, &command, "deny").await;
    assert!(project.join("own.txt").exists(), "{agent} ran the command: {events:?}");
    let leaked = std::fs::read_to_string(project.join("leaked.txt")).unwrap_or_default();
    assert!(!leaked.contains("SECRET") && !leaked.contains("runtimes"), "{agent} read {leaked:?}");
    assert!(!outside.exists(), "{agent} wrote outside its directory");
    assert!(!project.join(".git/hooks/pre-commit").exists(), "{agent} planted a hook");
    let git_config = std::fs::read_to_string(project.join(".git/config")).unwrap();
    assert!(!git_config.ends_with("[core]\n"), "{agent} changed .git/config");

    // A host not allowed: asked, allowed from the second client, reached.
    let fetch =
        |file: &str| format!("run: curl -sS --max-time 20 http://example.test:{port}/ > {file}");
    let events =
        contained_turn(&mut driver, &mut answerer, &agent_id, &fetch("fetched.txt"), "allow").await;
    let asked: Vec<&Value> =
        events.iter().filter(|event| event["tool_name"] == "network").collect();
    assert_eq!(asked.len(), 1, "{agent} asked once: {events:?}");
    assert_eq!(asked[0]["input"], json!({"host": "example.test", "port": port}));
    let closed = events.iter().any(|event| {
        event["type"] == "permission_resolved" && event["request_id"] == asked[0]["request_id"]
    });
    assert!(closed, "the driver saw it answered: {events:?}");
    let fetched = std::fs::read_to_string(project.join("fetched.txt")).unwrap_or_default();
    assert_eq!(fetched, "reached-through-the-proxy", "{agent}: {events:?}");
    // Denied: the connection fails, nothing reaches the server.
    let events =
        contained_turn(&mut driver, &mut answerer, &agent_id, &fetch("denied.txt"), "deny").await;
    assert!(events.iter().any(|event| event["tool_name"] == "network"), "{events:?}");
    // The proxy's refusal is all that came back (a 403 to a plain-HTTP
    // request, which curl writes down like any answer).
    let denied = std::fs::read_to_string(project.join("denied.txt")).unwrap_or_default();
    assert!(!denied.contains("reached-through-the-proxy"), "{agent}: {denied:?}");
    assert!(denied.is_empty() || denied.contains("sandbox refused"), "{agent}: {denied:?}");
    assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Its model's host was never a question.
    let log = std::fs::read_to_string(home.join("agents").join(&agent_id).join("approvals.jsonl"))
        .unwrap_or_default();
    assert!(!log.contains(MODEL_HOST), "{agent} was asked about its model's host: {log}");
}

#[tokio::test]
async fn claude_code_is_contained() {
    a_real_agent_is_contained("claude").await;
}

#[tokio::test]
async fn codex_is_contained() {
    a_real_agent_is_contained("codex").await;
}

#[tokio::test]
async fn opencode_is_contained() {
    a_real_agent_is_contained("opencode").await;
}
