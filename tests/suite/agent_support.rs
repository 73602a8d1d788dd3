//! Driving a real `shard agent --stdio` over its stdin and stdout.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Longest wait for one event. Generous for a loaded CI machine; a hang
/// still fails.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

pub struct AgentProc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every message read so far, in order.
    pub seen: Vec<Value>,
}

/// A home and a project directory that outlive agent restarts.
pub struct Workspace {
    pub home: TempDir,
    pub project: TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Self { home: TempDir::new().expect("home"), project: TempDir::new().expect("project") }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.project.path().join(name)
    }

    pub async fn start(&self, args: &[&str]) -> AgentProc {
        AgentProc::spawn(self.home.path(), self.project.path(), args).await
    }

    /// Starts an agent and reads its `hello` and `sync`.
    pub async fn ready(&self, args: &[&str]) -> AgentProc {
        let mut agent = self.start(args).await;
        agent.expect("hello").await;
        agent.expect("sync").await;
        agent
    }
}

impl AgentProc {
    pub async fn spawn(home: &Path, cwd: &Path, args: &[&str]) -> Self {
        Self::spawn_with_env(home, cwd, args, &[]).await
    }

    pub async fn spawn_with_env(
        home: &Path,
        cwd: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut command = Self::command(home, cwd, args);
        command.envs(env.iter().copied());
        Self::from_command(command)
    }

    /// `shard agent --stdio` with piped stdio, for a caller to adjust.
    pub fn command(home: &Path, cwd: &Path, args: &[&str]) -> tokio::process::Command {
        Self::stdio(super::support::shard(home, cwd), args)
    }

    /// `shard` (as `command` runs it) with `agent --stdio` and piped stdio.
    pub fn stdio(mut command: tokio::process::Command, args: &[&str]) -> tokio::process::Command {
        command
            .args(["agent", "--stdio"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }

    pub fn from_command(mut command: tokio::process::Command) -> Self {
        let mut child = command.spawn().expect("spawn shard agent");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self { child, stdin, stdout, seen: Vec::new() }
    }

    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next message, or a panic naming what was seen.
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(EVENT_TIMEOUT, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!("no message within {EVENT_TIMEOUT:?}; seen: {:#?}", self.tail())
            })
            .expect("read stdout")
            .unwrap_or_else(|| panic!("stdout closed; seen: {:#?}", self.tail()));
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
        assert!(
            value.get("agent_id").is_none(),
            "a direct connection carries no agent_id: {value}"
        );
        self.seen.push(value.clone());
        value
    }

    fn tail(&self) -> Vec<String> {
        self.seen.iter().rev().take(12).rev().map(Value::to_string).collect()
    }

    /// The next message, which must have this type.
    pub async fn expect(&mut self, kind: &str) -> Value {
        let message = self.next().await;
        assert_eq!(message["type"], kind, "expected {kind}, got {message}");
        message
    }

    /// Reads until a message of `kind` arrives; returns everything read.
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut read = Vec::new();
        loop {
            let message = self.next().await;
            let done = message["type"] == kind;
            read.push(message);
            if done {
                return read;
            }
        }
    }

    /// Reads until a message satisfies `matches`; returns everything read.
    pub async fn until_match(&mut self, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut read = Vec::new();
        loop {
            let message = self.next().await;
            let done = matches(&message);
            read.push(message);
            if done {
                return read;
            }
        }
    }

    /// Sends a command with `id` and returns its response, checking that
    /// nothing else arrived before it.
    pub async fn call(&mut self, id: &str, mut command: Value) -> Value {
        command["id"] = json!(id);
        self.send(command).await;
        let response = self.expect("response").await;
        assert_eq!(response["id"], id, "{response}");
        response
    }

    /// Sends a command with `id` while events may be flowing; returns its
    /// response and the events read before it.
    pub async fn call_during(&mut self, id: &str, mut command: Value) -> (Value, Vec<Value>) {
        command["id"] = json!(id);
        self.send(command).await;
        let mut before =
            self.until_match(|message| message["type"] == "response" && message["id"] == id).await;
        let response = before.pop().expect("the response");
        (response, before)
    }

    /// Asserts that nothing arrives for `millis`.
    pub async fn silent_for(&mut self, millis: u64) {
        if let Ok(line) =
            tokio::time::timeout(Duration::from_millis(millis), self.stdout.next_line()).await
        {
            panic!("expected silence, got {line:?}");
        }
    }

    /// Prompts while idle and reads the whole turn up to the final `idle`
    /// (or `error`) status; returns the turn's messages after the response.
    pub async fn turn(&mut self, message: &str) -> Vec<Value> {
        let response = self.call("turn", json!({"type": "prompt", "message": message})).await;
        assert_eq!(response["success"], true, "{response}");
        let mut read = self.until("turn_end").await;
        read.push(self.expect("status").await);
        read
    }

    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        tokio::time::timeout(EVENT_TIMEOUT, self.child.wait()).await.expect("exits").expect("wait")
    }
}

/// The `type`s of a run of messages, with `message_delta`s collapsed to one.
pub fn shape(messages: &[Value]) -> Vec<String> {
    let mut shape: Vec<String> = Vec::new();
    for message in messages {
        let mut kind = message["type"].as_str().unwrap_or("?").to_owned();
        if kind == "status" {
            kind = format!("status:{}", message["status"].as_str().unwrap_or("?"));
        }
        if kind == "message_delta" && shape.last().is_some_and(|last| last == "message_delta") {
            continue;
        }
        shape.push(kind);
    }
    shape
}

/// The first text block of each message in a `sync`'s live window.
pub fn live_texts(sync: &Value) -> Vec<&str> {
    let messages = sync["live_window"]["messages"].as_array().expect("messages");
    messages.iter().filter_map(|message| message["content"][0]["text"].as_str()).collect()
}

/// The text of all `text` deltas of one message.
pub fn streamed_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|message| message["type"] == "message_delta" && message["kind"] == "text")
        .filter_map(|message| message["text_delta"].as_str())
        .collect()
}

pub fn find<'a>(messages: &'a [Value], kind: &str) -> &'a Value {
    messages
        .iter()
        .find(|message| message["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {messages:#?}"))
}

pub fn count(messages: &[Value], kind: &str) -> usize {
    messages.iter().filter(|message| message["type"] == kind).count()
}
