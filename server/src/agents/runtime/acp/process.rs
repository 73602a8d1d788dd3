//! An ACP agent's process: started from its runtime's command in the
//! agent's cwd, supervised like Shard's own agent (its own process group,
//! its tree killed, its exit reported once after its last line, stderr to
//! `agents/<id>/agent.log`), with a bridge task between the host and the
//! process that translates every line and keeps Shard's own record of
//! what the agent said in the session log.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use shard_platform::conversation::{Conversation, Undelivered};
use shard_platform::runtimes::RuntimeConfig;
use shard_platform::session_log::EntryBody;
use shard_protocol::agent::UserMessage;
use shard_protocol::jsonl::LineDecoder;
use shard_protocol::{Envelope, ServerMessage};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::error::AcpError;
use super::translate::{Out, Queueing, Start, Translator};
use crate::agents::runtime::stdio::{
    INPUT_BYTES, Spawned, agent_command, agent_log, feed, jailed_command, spawn_managed, supervised,
};
use crate::agents::runtime::{ChildEvent, Runtime, SessionRecord, SpawnRequest};
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
    /// This `shard`: the agent runs under `shard guard`, which kills it if
    /// the daemon dies first.
    pub exe: PathBuf,
    pub home: PathBuf,
    pub processes: Arc<crate::agents::Processes>,
}

impl AcpSpawner {
    pub fn spawn(
        &self,
        runtime: &RuntimeConfig,
        request: &SpawnRequest<'_>,
        jail: Option<&crate::sandbox::Jail>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let program = find_program(&runtime.command)?;
        // In a sandbox, its first process does the guard's work: the
        // sandbox ends with the daemon and with the agent.
        let mut command = match jail {
            Some(jail) => jailed_command(jail, &self.home, request.agent_id),
            None => {
                let mut command = agent_command(&self.exe, &self.home, request.agent_id);
                command.args(["guard", "--"]);
                command
            }
        };
        command.arg(program).args(&runtime.args).current_dir(request.cwd);
        // The keys this daemon holds reach the agent, never its clients;
        // the runtime's own variables come last and win.
        command.envs(&runtime.env);
        let (mut child, pid) = spawn_managed(&mut command, &self.processes, request.agent_id)?;
        let (input, from_host) = byte_queue(INPUT_BYTES);
        let (to_agent, queued) = byte_queue(INPUT_BYTES);
        if let Some(stdin) = child.stdin.take() {
            tokio::spawn(feed(queued, stdin));
        }
        // Opened before the agent runs: its file requests are served beneath
        // this directory whatever it later does to the name.
        let directory = super::fs::Directory::open(std::path::Path::new(request.cwd))
            .inspect_err(|error| tracing::warn!(%error, "cannot open an ACP agent's directory"))
            .ok()
            .map(Arc::new);
        let bridge = child.stdout.take().map(|stdout| {
            let bridge = Bridge {
                stderr: agent_log(&self.home, request.agent_id),
                home: self.home.clone(),
                cwd: PathBuf::from(request.cwd),
                directory,
                record: request.record.clone(),
                epoch: request.epoch,
                events: events.clone(),
                to_agent: Some(to_agent),
                log: None,
                pid,
                before: std::collections::HashSet::new(),
            };
            tokio::spawn(bridge.run(runtime.id.clone(), from_host, stdout))
        });
        let spawned = Spawned { child, pid, contained: jail.is_some() };
        Ok(supervised(spawned, request.epoch, bridge, events, self.processes.clone(), input))
    }
}

/// Between the host and the agent's process, for one generation.
struct Bridge {
    /// Where the agent's stderr goes: a start failure quotes its end.
    stderr: PathBuf,
    home: PathBuf,
    /// The agent's directory.
    cwd: PathBuf,
    /// The same, opened when the agent started: its file requests are
    /// served beneath it. `None` if it could not be opened.
    directory: Option<Arc<super::fs::Directory>>,
    /// Shard's record of the session, which this runtime keeps (see
    /// [`crate::agents::runtime::record`]).
    record: SessionRecord,
    epoch: u64,
    events: mpsc::Sender<ChildEvent>,
    /// Dropped when the host closes the agent's input: its stdin closes.
    to_agent: Option<ByteQueue<Bytes>>,
    /// The record, open for writing.
    log: Option<Conversation>,
    pid: Option<u32>,
    /// What the agent ran apart from itself when the turn started.
    before: std::collections::HashSet<u32>,
}

/// Beside Shard's record of a session: the agent's own id for it.
const SIDECAR: &str = "acp.json";

#[derive(serde::Serialize, serde::Deserialize)]
struct Sidecar {
    session_id: String,
}

impl Bridge {
    async fn run(
        mut self,
        runtime: String,
        mut from_host: ByteReceiver<Bytes>,
        mut stdout: tokio::process::ChildStdout,
    ) {
        let start = self.start(runtime).await;
        let (mut translator, first) = Translator::start(start);
        let mut decoder = LineDecoder::default();
        let mut buffer = vec![0; 64 * 1024];
        let mut host_open = true;
        let deadline = tokio::time::Instant::now() + START;
        if !self.deliver(&mut translator, first).await {
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
                        let fatal = Out::Fatal("the agent exited before it was ready".to_owned());
                        self.deliver(&mut translator, vec![fatal]).await;
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
            if !self.deliver(&mut translator, out).await {
                break;
            }
        }
        if let Some(log) = &self.log {
            let _ = log.flush().await;
        }
    }

    /// What a translator starts from: Shard's record of the session (what
    /// it still owes, the settings last set) and the agent's own session id
    /// from an earlier process.
    async fn start(&mut self, runtime: String) -> Start {
        match self.record.writer().await {
            Ok(log) => self.log = Some(log),
            Err(error) => {
                tracing::error!(session = %self.record.session_id(), %error, "cannot open the session log");
            }
        }
        let (owed, recorded) = match &self.log {
            Some(log) => (log.undelivered(), log.settings()),
            None => Default::default(),
        };
        let previous = self.sidecar().and_then(|path| {
            let bytes = std::fs::read(path).ok()?;
            serde_json::from_slice::<Sidecar>(&bytes).ok().map(|sidecar| sidecar.session_id)
        });
        let user = std::env::var_os("HOME").map(PathBuf::from);
        let places = crate::agents::sensitive::Places::new(&self.home, user.as_deref());
        Start { cwd: self.cwd.clone(), places, runtime, previous, owed, recorded }
    }

    /// Beside Shard's record of the session, once it is open.
    fn sidecar(&self) -> Option<PathBuf> {
        self.log.as_ref().map(|log| log.dir.join(SIDECAR))
    }

    /// Carries out what one line gave, and what that gives in turn. `false`
    /// once the agent cannot go on or the host stopped listening.
    async fn deliver(&mut self, translator: &mut Translator, out: Vec<Out>) -> bool {
        let mut lines = Vec::new();
        let mut logged = false;
        let mut work: std::collections::VecDeque<Out> = out.into();
        while let Some(out) = work.pop_front() {
            match out {
                Out::Host(line) => lines.push(Ok(line)),
                Out::Agent(line) => self.to_agent(line),
                Out::Log(body) => {
                    self.record(body).await;
                    logged = true;
                }
                Out::Prompted { text, images, queued_entry_id, turn_id } => {
                    let user = EntryBody::User { text: text.clone(), images, queued_entry_id };
                    if let Some(entry_id) = self.record(user).await {
                        let said = UserMessage { entry_id, text, turn_id: Some(turn_id) };
                        lines.push(Ok(Envelope::new(ServerMessage::UserMessage(said)).to_json()));
                    }
                    logged = true;
                }
                Out::Queue(queueing) => {
                    let more = self.queue(translator, queueing).await;
                    for out in more.into_iter().rev() {
                        work.push_front(out);
                    }
                }
                Out::Session(session_id) => self.keep_session(session_id).await,
                Out::Watch => {
                    if let Some(pid) = self.pid {
                        let found = tokio::task::spawn_blocking(move || {
                            shard_platform::process_tree::detached(pid)
                        });
                        self.before = found.await.unwrap_or_default();
                    }
                }
                Out::Reap => {
                    if let Some(pid) = self.pid {
                        let before = std::mem::take(&mut self.before);
                        let reaped = tokio::task::spawn_blocking(move || {
                            shard_platform::process_tree::kill_detached_since(pid, &before)
                        });
                        if let Ok(killed @ 1..) = reaped.await {
                            tracing::info!(killed, "killed what a cancelled turn left running");
                        }
                    }
                }
                Out::Fs(asked, request) => {
                    let answer = super::fs::serve(self.directory.clone(), request).await;
                    self.to_agent(super::wire::answer(asked, answer));
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
        if logged && let Some(log) = &self.log {
            let _ = log.flush().await;
        }
        lines.is_empty()
            || self.events.send(ChildEvent::Lines { epoch: self.epoch, lines }).await.is_ok()
    }

    fn to_agent(&self, line: String) {
        if let Some(to_agent) = &self.to_agent {
            let _ = to_agent.push(Bytes::from(line));
        }
    }

    /// A follow-up recorded and synced, then handed to the translator; one
    /// the log cannot take is refused, never accepted and lost.
    async fn queue(&mut self, translator: &mut Translator, queueing: Queueing) -> Vec<Out> {
        let Queueing { reply, text, images, behavior, pinned } = queueing;
        let entry = EntryBody::Queued {
            text: text.clone(),
            images: images.clone(),
            streaming_behavior: behavior,
            pinned,
        };
        let recorded = match &mut self.log {
            Some(log) => match log.push(entry).await {
                Ok(entry) => {
                    let id = entry.id.clone();
                    log.flush().await.map(|()| id)
                }
                Err(error) => Err(error),
            },
            None => Err(std::io::Error::other("the session log is not open")),
        };
        match recorded {
            Ok(entry_id) => {
                let input = Undelivered { entry_id, text, images, behavior, pinned };
                translator.queued(reply, input)
            }
            Err(error) => {
                tracing::error!(session = %self.record.session_id(), %error, "cannot record a follow-up");
                let failed = AcpError::QueueUnrecorded.into();
                vec![super::translate::failed(reply, "prompt", failed)]
            }
        }
    }

    /// The agent's own session id, kept for the next process to take up.
    async fn keep_session(&self, session_id: String) {
        let Some(path) = self.sidecar() else { return };
        let bytes = serde_json::to_vec(&Sidecar { session_id }).unwrap_or_default();
        let written =
            tokio::task::spawn_blocking(move || crate::home::write_private(&path, &bytes));
        if let Ok(Err(error)) = written.await {
            tracing::warn!(session = %self.record.session_id(), %error, "cannot keep the agent's session id");
        }
    }

    /// Records `body`; its entry's id, unless it could not be.
    async fn record(&mut self, body: EntryBody) -> Option<String> {
        let log = self.log.as_mut()?;
        match log.push(body).await {
            Ok(entry) => Some(entry.id.clone()),
            Err(error) => {
                tracing::error!(session = %self.record.session_id(), %error, "cannot record the session");
                None
            }
        }
    }
}

/// The runtime's command as a path: as given when it names one, else found
/// on PATH. A command that is not there fails the spawn itself, as it
/// would without the guard in between.
fn find_program(command: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    let found = if command.contains('/') {
        Some(PathBuf::from(command)).filter(|path| runnable(path))
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).map(|dir| dir.join(command)).find(|path| runnable(path))
    };
    found.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("`{command}` is not a program here"),
        )
    })
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
