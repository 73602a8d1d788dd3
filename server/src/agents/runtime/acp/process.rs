//! An ACP agent's process: started from its runtime's command in the
//! agent's cwd, supervised like Shard's own agent (its own process group,
//! its tree killed, its exit reported once after its last line, stderr to
//! `agents/<id>/agent.log`), with a bridge task between the host and the
//! process that translates every line and keeps Shard's own record of
//! what the agent said in the session log.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use shard_agent::conversation::Conversation;
use shard_agent::runtimes::RuntimeConfig;
use shard_protocol::jsonl::LineDecoder;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::translate::{Out, Translator};
use crate::agents::runtime::stdio::{INPUT_BYTES, Process, feed, spawn_managed, stderr_log, wait};
use crate::agents::runtime::{ChildEvent, Runtime, SpawnRequest};
use crate::queue::{ByteQueue, ByteReceiver, byte_queue};

/// How long an agent has to answer `initialize` and open its session
/// (CONTRACT.md).
const START: std::time::Duration = std::time::Duration::from_secs(30);
/// The most of the agent's stderr a start failure quotes.
const STDERR_TAIL: usize = 1024;
/// The most lines of it quoted.
const STDERR_LINES: usize = 5;

/// Starts agents on configured ACP runtimes.
pub struct AcpSpawner {
    pub home: PathBuf,
    pub processes: Arc<crate::agents::Processes>,
}

impl AcpSpawner {
    pub fn spawn(
        &self,
        runtime: &RuntimeConfig,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let mut command = tokio::process::Command::new(&runtime.command);
        command
            .args(&runtime.args)
            .current_dir(request.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_log(&self.home, request.agent_id))
            .process_group(0)
            .kill_on_drop(true);
        // The keys this daemon holds reach the agent, never its clients;
        // the runtime's own variables come last and win.
        shard_agent::keys::hand_down(&mut command);
        command.envs(&runtime.env);
        let (mut child, pid) = spawn_managed(&mut command, &self.processes, request.agent_id)?;
        let (input, from_host) = byte_queue(INPUT_BYTES);
        let (to_agent, queued) = byte_queue(INPUT_BYTES);
        if let Some(stdin) = child.stdin.take() {
            tokio::spawn(feed(queued, stdin));
        }
        let bridge = child.stdout.take().map(|stdout| {
            let bridge = Bridge {
                stderr: crate::agents::manifest::agent_dir(&self.home, request.agent_id)
                    .join("agent.log"),
                home: self.home.clone(),
                session_id: request.session_id.to_owned(),
                epoch: request.epoch,
                events: events.clone(),
                to_agent: Some(to_agent),
                log: None,
            };
            let (translator, first) = Translator::start(PathBuf::from(request.cwd), &runtime.id);
            tokio::spawn(bridge.run(translator, first, from_host, stdout))
        });
        let kill = CancellationToken::new();
        let processes = self.processes.clone();
        tokio::spawn(wait(child, pid, request.epoch, bridge, kill.clone(), events, processes));
        Ok(Box::new(Process { pid, input: Some(input), kill }))
    }
}

/// Between the host and the agent's process, for one generation.
struct Bridge {
    /// Where the agent's stderr goes: a start failure quotes its end.
    stderr: PathBuf,
    home: PathBuf,
    session_id: String,
    epoch: u64,
    events: mpsc::Sender<ChildEvent>,
    /// Dropped when the host closes the agent's input: its stdin closes.
    to_agent: Option<ByteQueue<Bytes>>,
    /// Shard's record of the session, opened at the first entry.
    log: Option<Conversation>,
}

impl Bridge {
    async fn run(
        mut self,
        mut translator: Translator,
        first: Vec<Out>,
        mut from_host: ByteReceiver<Bytes>,
        mut stdout: tokio::process::ChildStdout,
    ) {
        let mut decoder = LineDecoder::default();
        let mut buffer = vec![0; 64 * 1024];
        let mut host_open = true;
        let deadline = tokio::time::Instant::now() + START;
        if !self.deliver(first).await {
            return;
        }
        loop {
            let out = tokio::select! {
                () = tokio::time::sleep_until(deadline), if !translator.is_ready() => {
                    let why = format!("the agent did not answer within {} s", START.as_secs());
                    vec![Out::Fatal(why)]
                },
                line = from_host.recv(), if host_open => match line {
                    Some(line) => translator.from_host(String::from_utf8_lossy(&line).trim_end()),
                    None => {
                        host_open = false;
                        self.to_agent = None;
                        continue;
                    }
                },
                read = stdout.read(&mut buffer) => match read {
                    Ok(0) | Err(_) if !translator.is_ready() => {
                        // Its exit follows: the host hears why first.
                        self.deliver(vec![Out::Fatal("the agent exited before it was ready".to_owned())]).await;
                        break;
                    }
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        decoder.feed(&buffer[..read]);
                        let mut out = Vec::new();
                        while let Some(line) = decoder.next_line() {
                            match line {
                                Ok(line) => out.extend(translator.from_agent(&line)),
                                Err(error) => tracing::warn!(%error, "an ACP agent wrote a line Shard cannot read"),
                            }
                        }
                        out
                    }
                },
            };
            if !self.deliver(out).await {
                break;
            }
        }
        if let Some(log) = &self.log {
            let _ = log.flush().await;
        }
    }

    /// Carries out what one line gave. `false` once the agent cannot go on
    /// or the host stopped listening.
    async fn deliver(&mut self, out: Vec<Out>) -> bool {
        let mut lines = Vec::new();
        let mut logged = false;
        for out in out {
            match out {
                Out::Host(line) => lines.push(Ok(line)),
                Out::Agent(line) => {
                    if let Some(to_agent) = &self.to_agent {
                        let _ = to_agent.push(Bytes::from(line));
                    }
                }
                Out::Log(body) => {
                    self.record(body).await;
                    logged = true;
                }
                Out::Fatal(why) => {
                    let error = shard_protocol::agent::ErrorEvent {
                        code: shard_protocol::ErrorCode::RuntimeStartFailed,
                        message: with_stderr(why, &self.stderr),
                        fatal: Some(true),
                    };
                    let line =
                        shard_protocol::Envelope::new(shard_protocol::ServerMessage::Error(error));
                    lines.push(Ok(line.to_json()));
                    self.to_agent = None;
                    let _ = self.events.send(ChildEvent::Lines { epoch: self.epoch, lines }).await;
                    return false;
                }
            }
        }
        if logged {
            if let Some(log) = &self.log {
                let _ = log.flush().await;
            }
        }
        lines.is_empty()
            || self.events.send(ChildEvent::Lines { epoch: self.epoch, lines }).await.is_ok()
    }

    async fn record(&mut self, body: shard_agent::session_log::EntryBody) {
        if self.log.is_none() {
            match Conversation::resume(&self.home, &self.session_id).await {
                Ok(log) => self.log = Some(log),
                Err(error) => {
                    tracing::error!(session = %self.session_id, %error, "cannot open the session log");
                    return;
                }
            }
        }
        if let Some(log) = &mut self.log {
            if let Err(error) = log.push(body).await {
                tracing::error!(session = %self.session_id, %error, "cannot record the session");
            }
        }
    }
}

/// `why`, then the last lines the agent wrote to its stderr, made safe to
/// show (control and invisible characters escaped) and bounded.
fn with_stderr(why: String, path: &std::path::Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return why };
    let length = file.metadata().map_or(0, |meta| meta.len());
    let from = length.saturating_sub(STDERR_TAIL as u64);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut tail).is_err() {
        return why;
    }
    let text = String::from_utf8_lossy(&tail);
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(STDERR_LINES)..];
    if last.is_empty() {
        return why;
    }
    let shown: Vec<String> =
        last.iter().map(|line| shard_protocol::display::escaped(line)).collect();
    format!("{why}; its stderr ends: {}", shown.join(" | "))
}
