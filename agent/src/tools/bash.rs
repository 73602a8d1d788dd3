//! `bash`: one command in its own process group, so that a timeout or an
//! `abort` kills everything it started. What escapes the group (`setsid cmd
//! &`) is still the agent's: the agent is a subreaper and kills its whole
//! tree when it exits (`process_tree`).

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use shard_protocol::types::JsonObject;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::{ToolContext, ToolDefinition, ToolError, ToolOutput, required_string};
use crate::process_tree::Managed;

const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 1800;
/// Output kept for the model: the head and the tail of what the command
/// printed, so both the first error and the final summary survive.
const KEEP_HEAD_BYTES: usize = 30 * 1024;
const KEEP_TAIL_BYTES: usize = 20 * 1024;

/// `bash`, as the model is offered it.
pub fn definition() -> ToolDefinition {
    ToolDefinition {
        name: "bash",
        description: "Run a shell command in the working directory. Output is capped; the exit code is reported.",
        parameters: json!({"type": "object", "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "integer", "minimum": 1, "description": "Seconds (default 120, at most 1800)"}
        }, "required": ["command"]}),
    }
}

/// Sends SIGKILL to a whole process group. A group that is already gone is fine.
pub fn kill_process_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// The head and tail of a stream of output, with the middle counted.
struct CappedOutput {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    omitted: usize,
}

impl CappedOutput {
    fn new() -> Self {
        Self { head: Vec::new(), tail: std::collections::VecDeque::new(), omitted: 0 }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < KEEP_HEAD_BYTES {
            let take = bytes.len().min(KEEP_HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        while self.tail.len() > KEEP_TAIL_BYTES {
            self.tail.pop_front();
            self.omitted += 1;
        }
    }

    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.omitted > 0 {
            text.push_str(&format!("\n[... {} bytes of output omitted ...]\n", self.omitted));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

async fn pump(mut reader: impl AsyncRead + Unpin, sender: mpsc::Sender<Vec<u8>>) {
    let mut buffer = vec![0; 8192];
    while let Ok(read) = reader.read(&mut buffer).await {
        if read == 0 || sender.send(buffer[..read].to_vec()).await.is_err() {
            break;
        }
    }
}

/// While alive, the orphan reaper leaves this child to tokio.
struct ManagedChild(Option<i32>);

impl Drop for ManagedChild {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            Managed::lock().remove(&pid);
        }
    }
}

/// Starts `bash -c command`, registered as managed before any reaper can
/// look at it.
fn spawn(
    command: &str,
    context: &ToolContext,
) -> std::io::Result<(tokio::process::Child, ManagedChild)> {
    let mut bash = tokio::process::Command::new("bash");
    // Keys the agent holds for its provider are not the command's to read:
    // `env` would put them in the model's context and the session log.
    for (name, _) in std::env::vars_os() {
        if context.hidden_env.hides(&name) {
            bash.env_remove(name);
        }
    }
    let mut managed = Managed::lock();
    let child = bash
        .arg("-c")
        .arg(command)
        .current_dir(&context.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
    if let Some(pid) = pid {
        managed.insert(pid);
    }
    Ok((child, ManagedChild(pid)))
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Aborted,
}

pub async fn run(args: &JsonObject, context: &ToolContext) -> ToolOutput {
    let command = match required_string(args, "command") {
        Ok(command) => command,
        Err(error) => return error.into(),
    };
    let timeout = match timeout_secs(args) {
        Ok(timeout) => timeout,
        Err(error) => return error.into(),
    };
    let (mut child, _managed) = match spawn(&command, context) {
        Ok(spawned) => spawned,
        Err(error) => return ToolOutput::error(format!("cannot start bash: {error}")),
    };
    let pid = child.id();
    // stdout and stderr interleaved in arrival order, as a terminal shows them.
    let (sender, mut chunks) = mpsc::channel(64);
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(pump(stdout, sender.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(pump(stderr, sender.clone()));
    }
    drop(sender);
    let mut output = CappedOutput::new();
    let deadline = tokio::time::sleep(Duration::from_secs(timeout));
    tokio::pin!(deadline);
    let mut pipes_open = true;
    let ending = loop {
        tokio::select! {
            chunk = chunks.recv(), if pipes_open => match chunk {
                Some(chunk) => output.push(&chunk),
                None => pipes_open = false,
            },
            status = child.wait() => match status {
                Ok(status) => break Ending::Exited(status),
                Err(error) => return ToolOutput::error(format!("waiting for bash failed: {error}")),
            },
            () = &mut deadline => break Ending::TimedOut,
            () = context.cancel.cancelled() => break Ending::Aborted,
        }
    };
    // Whatever the ending, nothing the command started may outlive it; this
    // also closes pipes held open by background children.
    if let Some(pid) = pid {
        kill_process_group(pid);
    }
    if !matches!(ending, Ending::Exited(_)) {
        let _ = child.wait().await;
    }
    // Drain what was already written, briefly.
    let drain = tokio::time::sleep(Duration::from_millis(200));
    tokio::pin!(drain);
    while pipes_open {
        tokio::select! {
            chunk = chunks.recv() => match chunk {
                Some(chunk) => output.push(&chunk),
                None => pipes_open = false,
            },
            () = &mut drain => break,
        }
    }
    result(ending, output.render(), timeout)
}

/// `timeout` in seconds: the default when absent, at most the maximum.
fn timeout_secs(args: &JsonObject) -> Result<u64, ToolError> {
    match args.get("timeout") {
        None | Some(Value::Null) => Ok(DEFAULT_TIMEOUT_SECS),
        Some(value) => match value.as_u64() {
            Some(seconds) if seconds > 0 => Ok(seconds.min(MAX_TIMEOUT_SECS)),
            _ => Err(ToolError::NotSeconds("timeout")),
        },
    }
}

/// The tool result of a command that ended so, with what it wrote (`text`).
fn result(ending: Ending, text: String, timeout: u64) -> ToolOutput {
    match ending {
        Ending::Exited(status) => {
            let code = exit_code(status);
            ToolOutput {
                content: shard_protocol::types::ToolResultContent::Text { text },
                is_error: code != 0,
                exit_code: Some(code),
                render: None,
            }
        }
        Ending::TimedOut => {
            let mut result = ToolOutput::error(format!(
                "{text}\n[timed out after {timeout} s; the command was killed]"
            ));
            result.exit_code = Some(124);
            result
        }
        Ending::Aborted => {
            let mut result =
                ToolOutput::error(format!("{text}\n[aborted; the command was killed]"));
            result.exit_code = Some(137);
            result
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => -1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_keeps_head_and_tail() {
        let mut output = CappedOutput::new();
        output.push(&vec![b'a'; KEEP_HEAD_BYTES]);
        output.push(&vec![b'b'; 100_000]);
        output.push(b"END");
        let text = output.render();
        assert!(text.starts_with("aaa"));
        assert!(text.ends_with("END"));
        assert!(
            text.contains(&format!("{} bytes of output omitted", 100_000 + 3 - KEEP_TAIL_BYTES))
        );
    }
}
