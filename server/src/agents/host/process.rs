//! Process generations: each Runtime of a durable agent is one `shard agent
//! --stdio` process (`runtime_epoch` counts them). The host starts one
//! through a [`Spawner`] (the real one re-executes this binary; tests use
//! fakes), feeds its stdin through a queue bounded in bytes, and stops it
//! three ways: close stdin (graceful: the agent finishes and exits), SIGTERM
//! (the agent aborts its turn, flushes its log, kills what its tools left and
//! exits), or a forced kill of the whole process tree.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use shard_protocol::jsonl::{LineDecoder, LineError};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::AgentExited;
use shard_protocol::types::{AgentStatus, RuntimeState};
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Host, Waiting, projection::encode, projection::respond};

/// How long a new process may take to say `hello` and `sync`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// After SIGTERM, how long a process may take before its tree is killed.
/// The agent itself exits within a few seconds of SIGTERM whatever it was
/// doing; this only catches one that is wedged.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// After a process exits, how long its stdout reader may take to hand over
/// what is left in the pipe (a host that is not reading holds it up).
const READER_DRAIN: Duration = Duration::from_secs(5);
/// Bytes that may wait for one agent's stdin: room for a few of the largest
/// messages a client may send (a prompt with images, 16 MiB), never more.
pub const INPUT_BYTES: usize = 48 * 1024 * 1024;

/// What a new generation is started with.
pub struct SpawnRequest<'a> {
    pub agent_id: &'a str,
    pub cwd: &'a str,
    pub session_id: &'a str,
    pub epoch: u64,
    /// The tools its model is offered (all when `None`).
    pub tools: Option<&'a [String]>,
    /// Whether it gets a manager's instructions (`system_prompt.txt`).
    pub instructed: bool,
    /// Whether it may launch subagents (the `subagent_*` tools).
    pub delegates: bool,
}

/// Lines and the exit of a generation, as its reader and waiter see them.
pub enum ChildEvent {
    /// The lines one read of the child's stdout completed, in order.
    Lines {
        epoch: u64,
        lines: Vec<Result<String, LineError>>,
    },
    Exited {
        epoch: u64,
        code: Option<i32>,
        description: String,
    },
}

/// Starts agent processes.
pub trait Spawner: Send + Sync {
    /// Starts generation `request.epoch`; its lines and its exit (exactly
    /// one `Exited`) come back through `events`.
    fn spawn(
        &self,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>>;
}

/// The stdin queue is over its byte budget.
#[derive(Debug)]
pub struct InputFull;

/// A running generation, as the host controls it.
pub trait Runtime: Send {
    /// Queues one line (with its newline) for the process's stdin.
    fn send(&mut self, line: Bytes) -> Result<(), InputFull>;
    /// Closes stdin: the agent finishes what it is doing and exits.
    fn close_input(&mut self);
    /// SIGTERM: the agent aborts its turn, flushes and exits.
    fn terminate(&mut self);
    /// SIGKILL to the process and everything below it.
    fn kill(&mut self);
}

/// The host's view of its current generation.
pub(super) struct Generation {
    pub(super) epoch: u64,
    runtime: Box<dyn Runtime>,
    pub(super) ready: bool,
    pub(super) started: Instant,
    /// A stop was asked for (terminate, reap, kill, shutdown): the exit is
    /// expected and the agent stays `stopped`, not `failed`.
    pub(super) stopping: bool,
    pub(super) saw_hello: bool,
    /// When a graceful kill turns into a forced one.
    pub(super) kill_at: Option<Instant>,
}

impl Host {
    /// Starts a new generation unless one is running or starting.
    pub(super) fn ensure_process(&mut self, now: Instant) {
        if self.generation.is_some() {
            return;
        }
        if self.shutdown.is_some() {
            self.fail_waiting("the daemon is shutting down");
            return;
        }
        // Only a dormant host has no queue, and a dormant host runs nothing.
        let Some(events) = self.events.clone() else {
            self.fail_waiting("the agent's host is not running");
            return;
        };
        let epoch = self.generations;
        self.generations += 1;
        let request = SpawnRequest {
            agent_id: &self.manifest.agent_id,
            cwd: &self.manifest.cwd,
            session_id: &self.manifest.session_id,
            epoch,
            tools: self.manifest.tools.as_deref(),
            instructed: self.manifest.system_prompt.is_some(),
            delegates: self.manifest.may_delegate(),
        };
        let runtime = match self.context.spawner.spawn(&request, events) {
            Ok(runtime) => runtime,
            Err(error) => {
                tracing::error!(agent = %self.id(), %error, "cannot start the agent process");
                self.set_runtime_state(RuntimeState::Failed);
                self.fail_waiting(&format!("cannot start the agent process: {error}"));
                return;
            }
        };
        self.generation = Some(Generation {
            epoch,
            runtime,
            ready: false,
            started: now,
            stopping: false,
            saw_hello: false,
            kill_at: None,
        });
        self.set_runtime_state(RuntimeState::Starting);
    }

    /// Graceful stop: close stdin; the agent finishes its work and exits.
    pub(super) fn stop_process(&mut self) {
        if let Some(generation) = &mut self.generation {
            generation.stopping = true;
            generation.runtime.close_input();
        }
    }

    /// `agent.kill`: SIGTERM with a grace period, or the tree at once.
    pub(super) fn kill_process(&mut self, force: bool, now: Instant) {
        let Some(generation) = &mut self.generation else { return };
        generation.stopping = true;
        if force {
            generation.runtime.kill();
        } else {
            generation.runtime.terminate();
            generation.kill_at.get_or_insert(now + KILL_GRACE);
        }
    }

    /// Sends a command to the agent. `false` when its input queue is full.
    pub(super) fn send_to_child(&mut self, envelope: &Envelope<ClientMessage>) -> bool {
        let Some(generation) = &mut self.generation else { return false };
        let mut line = envelope.to_json().into_bytes();
        line.push(b'\n');
        generation.runtime.send(Bytes::from(line)).is_ok()
    }

    pub(super) fn process_timers(&mut self, now: Instant) {
        let Some(generation) = &mut self.generation else { return };
        if !generation.ready && now >= generation.started + START_TIMEOUT {
            tracing::warn!(agent = %self.manifest.agent_id, "agent process did not become ready in time");
            generation.stopping = true;
            generation.runtime.kill();
            self.fail_waiting("the agent process did not become ready in time");
            return;
        }
        if generation.kill_at.is_some_and(|at| now >= at) {
            tracing::warn!(agent = %self.manifest.agent_id, "agent did not exit after SIGTERM; killing it");
            generation.kill_at = None;
            generation.runtime.kill();
            return;
        }
        if self.reapable() && now >= self.last_active + self.context.idle_timeout {
            tracing::info!(agent = %self.id(), "stopping idle runtime");
            self.stop_process();
        }
    }

    /// Inactive, nothing open, nothing in flight: the process may be stopped.
    pub(super) fn reapable(&self) -> bool {
        matches!(self.status, AgentStatus::Idle | AgentStatus::Error)
            && self.run.is_none()
            && self.pending.is_empty()
            && self.inflight.is_empty()
            && self.waiting.is_empty()
            && self
                .generation
                .as_ref()
                .is_some_and(|generation| generation.ready && !generation.stopping)
    }

    pub(super) fn ready(&self) -> bool {
        self.generation.as_ref().is_some_and(|generation| generation.ready && !generation.stopping)
    }

    pub(super) fn fail_waiting(&mut self, why: &str) {
        self.fail_waiting_with(WireError::new(ErrorCode::RuntimeStartFailed, why));
    }

    /// Answers every piece of work that was waiting for a ready process.
    pub(super) fn fail_waiting_with(&mut self, error: WireError) {
        for waiting in std::mem::take(&mut self.waiting) {
            match waiting {
                Waiting::Start { reply } => {
                    let _ = reply.send(Err(error.clone()));
                }
                Waiting::Attach { subscriber, id, .. } => {
                    let failed = Response::failed("agent.attach", error.clone());
                    respond(&subscriber, id, None, failed);
                }
                Waiting::Forward { subscriber, id, message } => {
                    let command = shard_protocol::envelope::MessageSet::type_name(message.as_ref());
                    let failed = Response::failed(command, error.clone());
                    respond(&subscriber, id, Some(self.id()), failed);
                }
            }
        }
    }

    pub(super) fn process_exited(&mut self, code: Option<i32>, description: String, now: Instant) {
        let Some(generation) = self.generation.take() else { return };
        // The session's entries are read again when a process next starts:
        // a stopped agent holds none of them (a daemon lists many).
        self.session = None;
        let expected = generation.stopping || self.shutdown.is_some();
        if !generation.ready {
            self.fail_waiting(&format!(
                "the agent process exited before it was ready: {description}"
            ));
            // A switched session that cannot start is not started again
            // and again for its watchers: the next work or attach retries.
            self.resync_when_ready = false;
        }
        self.turn_expected = false;
        self.questions_orphaned();
        let interrupted = shard_protocol::usage::TurnState::Interrupted;
        self.context.usage.turn_ended(self.id(), None, interrupted, crate::agents::now_ms());
        if self.run.is_some() {
            self.end_run(Some(format!("the agent's process ended: {description}")));
        }
        for (_, inflight) in std::mem::take(&mut self.inflight) {
            if let Some(subscriber) = inflight.subscriber {
                let error = WireError::new(ErrorCode::InternalError, "the agent process exited");
                let failed = Response::failed(inflight.command, error);
                respond(&subscriber, inflight.client_id, Some(self.id()), failed);
            }
        }
        for waiter in self.kill_waiters.drain(..) {
            let _ = waiter.send(());
        }
        if expected {
            tracing::info!(agent = %self.id(), %description, "agent process stopped");
            self.status = AgentStatus::Idle;
            self.set_runtime_state(RuntimeState::Stopped);
        } else {
            tracing::warn!(agent = %self.id(), %description, "agent process exited");
            self.status = AgentStatus::Error;
            self.set_runtime_state(RuntimeState::Failed);
            let exited = AgentExited {
                agent_id: self.id().to_owned(),
                runtime_state: RuntimeState::Failed,
                reason: description,
                exit_code: code,
            };
            self.context
                .broadcast
                .broadcast(&encode(&Envelope::new(ServerMessage::AgentExited(exited))));
        }
        self.emit_activity();
        self.terminate_when_inactive = false;
        if let Some((_, waiters)) = self.shutdown.as_mut() {
            self.journal.close();
            for waiter in waiters.drain(..) {
                let _ = waiter.send(());
            }
            return;
        }
        // Work that arrived while it was stopping starts the next
        // generation, and so does a switched session someone is watching.
        let resync = self.resync_when_ready && !self.attached.is_empty();
        if !self.waiting.is_empty() || self.run.is_some() || resync {
            self.ensure_process(now);
        }
    }

    /// The host is going away (the daemon is exiting): nothing may outlive it.
    pub(super) fn abandon(&mut self) {
        if let Some(generation) = &mut self.generation {
            generation.runtime.kill();
        }
    }
}

/// The real spawner: re-executes this binary as `shard agent --stdio` for
/// the agent's cwd and session, stderr into `agents/<id>/agent.log`.
pub struct ProcessSpawner {
    pub exe: PathBuf,
    pub home: PathBuf,
    /// Where each process is recorded as its agent's while it runs.
    pub processes: Arc<crate::agents::Processes>,
}

impl Spawner for ProcessSpawner {
    fn spawn(
        &self,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let mut command = tokio::process::Command::new(&self.exe);
        command
            .args(["agent", "--stdio", "--cwd", request.cwd, "--session", request.session_id])
            .env("SHARD_HOME", &self.home)
            .env(shard_agent::PARENT_PID_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_log(&self.home, request.agent_id))
            // Its own process group: Ctrl-C in the daemon's terminal is the
            // daemon's to handle, not every agent's.
            .process_group(0)
            .kill_on_drop(true);
        // The keys this daemon took out of its own environment; the agent
        // takes them out of its own before any tool runs.
        shard_agent::keys::hand_down(&mut command);
        if let Some(tools) = request.tools {
            command.arg("--tools").arg(tools.join(","));
        }
        if request.instructed {
            let brief = crate::agents::manifest::agent_dir(&self.home, request.agent_id)
                .join(crate::agents::manifest::INSTRUCTIONS_FILE);
            command.arg("--system-prompt-file").arg(brief);
        }
        if request.delegates {
            command.args(["--delegate-as", request.agent_id]);
        }
        // Registered as spawned, under the lock the orphan killer lists
        // under: an agent is never taken for an orphan.
        let mut child = {
            let mut managed = shard_agent::process_tree::Managed::lock();
            let child = command.spawn()?;
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                managed.insert(pid);
            }
            child
        };
        let pid = child.id();
        if let Some(pid) = pid {
            self.processes.started(pid, request.agent_id);
        }
        let epoch = request.epoch;
        let (input, feed) = input_queue(INPUT_BYTES);
        if let Some(stdin) = child.stdin.take() {
            tokio::spawn(feed.feed(stdin));
        }
        let reader = child
            .stdout
            .take()
            .map(|stdout| tokio::spawn(read_lines(stdout, epoch, events.clone())));
        let kill = CancellationToken::new();
        let processes = self.processes.clone();
        tokio::spawn(wait(child, pid, epoch, reader, kill.clone(), events, processes));
        Ok(Box::new(Process { pid, input: Some(input), kill }))
    }
}

struct Process {
    pid: Option<u32>,
    input: Option<InputQueue>,
    kill: CancellationToken,
}

impl Runtime for Process {
    fn send(&mut self, line: Bytes) -> Result<(), InputFull> {
        match &self.input {
            Some(input) => input.push(line),
            None => Err(InputFull),
        }
    }

    fn close_input(&mut self) {
        self.input = None;
    }

    fn terminate(&mut self) {
        if let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }

    fn kill(&mut self) {
        self.kill.cancel();
    }
}

/// The stdin queue: bounded in bytes, never blocks the host. Dropping it
/// ends the feed once what is queued has been written, closing the pipe.
struct InputQueue {
    sender: mpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

/// The task's end of the stdin queue.
struct InputFeed {
    receiver: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
}

fn input_queue(limit: usize) -> (InputQueue, InputFeed) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (InputQueue { sender, queued: queued.clone(), limit }, InputFeed { receiver, queued })
}

impl InputQueue {
    fn push(&self, line: Bytes) -> Result<(), InputFull> {
        let size = line.len();
        let before = self.queued.fetch_add(size, Ordering::AcqRel);
        // One message always fits an empty queue, however large.
        if before > 0 && before + size > self.limit {
            self.queued.fetch_sub(size, Ordering::AcqRel);
            return Err(InputFull);
        }
        self.sender.send(line).map_err(|_| InputFull)
    }
}

impl InputFeed {
    async fn feed(mut self, mut stdin: tokio::process::ChildStdin) {
        while let Some(bytes) = self.receiver.recv().await {
            let written = match stdin.write_all(&bytes).await {
                Ok(()) => stdin.flush().await,
                Err(error) => Err(error),
            };
            self.queued.fetch_sub(bytes.len(), Ordering::AcqRel);
            if written.is_err() {
                break; // the process is gone; `wait` reports its exit
            }
        }
        // Dropping stdin closes it: the agent finishes and exits.
    }
}

async fn read_lines(
    mut stdout: tokio::process::ChildStdout,
    epoch: u64,
    events: mpsc::Sender<ChildEvent>,
) {
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = match stdout.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        decoder.feed(&buffer[..read]);
        // One message per read, not per line: a burst of small lines costs
        // the channel (and the host's wake-up) once.
        let lines: Vec<_> = std::iter::from_fn(|| decoder.next_line()).collect();
        if !lines.is_empty() && events.send(ChildEvent::Lines { epoch, lines }).await.is_err() {
            return;
        }
    }
}

/// Waits for the process to exit, killing its whole tree when asked to, and
/// reports the exit once, after every line it wrote: the host drops what a
/// finished generation says, and the last lines are often the ones that
/// matter (a turn's end, an abort).
async fn wait(
    mut child: tokio::process::Child,
    pid: Option<u32>,
    epoch: u64,
    reader: Option<tokio::task::JoinHandle<()>>,
    kill: CancellationToken,
    events: mpsc::Sender<ChildEvent>,
    processes: Arc<crate::agents::Processes>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        () = kill.cancelled() => {
            if let Some(pid) = pid {
                // The agent is a subreaper: everything its tools started is
                // below it, wherever it moved its process group or session.
                let _ = tokio::task::spawn_blocking(move || {
                    shard_agent::process_tree::kill_tree(pid, true)
                })
                .await;
            }
            let _ = child.start_kill();
            child.wait().await
        }
    };
    // However it died, what its tools were running must not outlive it:
    // killed from outside (the OOM killer, a stray `kill -9`), the agent
    // could not take its tree down, and the daemon, a subreaper, inherited
    // that tree.
    if let Some(pid) = pid {
        processes.ended(pid);
    }
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        shard_agent::process_tree::Managed::lock().remove(&pid);
    }
    let _ = tokio::task::spawn_blocking(shard_agent::process_tree::kill_orphans).await;
    if let Some(mut reader) = reader {
        // Its stdout ends with it, unless something it started still holds
        // the pipe: that gets a moment, not forever.
        if tokio::time::timeout(READER_DRAIN, &mut reader).await.is_err() {
            tracing::warn!("an agent's stdout stayed open after it exited; its reader was stopped");
            reader.abort();
        }
    }
    let (code, description) = describe_exit(status);
    let _ = events.send(ChildEvent::Exited { epoch, code, description }).await;
}

fn describe_exit(status: std::io::Result<std::process::ExitStatus>) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => (Some(code), format!("process exited with status {code}")),
            (None, Some(signal)) => (None, format!("process killed by signal {signal}")),
            (None, None) => (None, "process ended".to_owned()),
        },
        Err(error) => (None, format!("cannot wait for the process: {error}")),
    }
}

/// The agent's stderr goes to `agents/<id>/agent.log` (0600), restarted
/// when it grows past 1 MiB so it cannot fill the disk.
fn stderr_log(home: &Path, agent_id: &str) -> Stdio {
    use std::os::unix::fs::OpenOptionsExt;
    const MAX_LOG: u64 = 1024 * 1024;
    let path = crate::agents::manifest::agent_dir(home, agent_id).join("agent.log");
    let too_big = std::fs::metadata(&path).is_ok_and(|meta| meta.len() > MAX_LOG);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(!too_big)
        .write(true)
        .truncate(too_big)
        .mode(0o600)
        .open(&path);
    match file {
        Ok(file) => Stdio::from(file),
        Err(_) => Stdio::null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that writes a lot and exits at once: its exit must come
    /// after every line it wrote, however far behind its reader is, or the
    /// host (which drops a finished generation's lines) loses its last words.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_process_exit_is_reported_after_every_line_it_wrote() {
        use std::os::unix::fs::PermissionsExt;
        const LINES: usize = 50_000;
        let home = tempfile::tempdir().expect("home");
        let exe = home.path().join("fake-agent");
        std::fs::write(&exe, format!("#!/bin/sh\nseq 1 {LINES}\n")).expect("script");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("mode");
        let spawner =
            ProcessSpawner { exe, home: home.path().to_owned(), processes: Arc::default() };
        for epoch in 0..3 {
            // A small queue, read slowly: the reader is always behind.
            let (events, mut received) = mpsc::channel(1);
            let request = SpawnRequest {
                agent_id: "agent-x",
                cwd: "/",
                session_id: "s",
                epoch,
                tools: None,
                instructed: false,
                delegates: false,
            };
            let _runtime = spawner.spawn(&request, events).expect("spawn");
            let mut lines = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                match received.recv().await.expect("an exit at the end") {
                    ChildEvent::Lines { lines: read, .. } => lines += read.len(),
                    ChildEvent::Exited { .. } => break,
                }
            }
            assert_eq!(lines, LINES, "generation {epoch}: every line before the exit");
        }
    }

    #[test]
    fn the_stdin_queue_is_bounded_in_bytes_but_always_takes_one_message() {
        let (input, mut feed) = input_queue(10);
        assert!(input.push(Bytes::from_static(b"0123456789abcdef")).is_ok(), "one always fits");
        assert!(input.push(Bytes::from_static(b"x")).is_err(), "then the budget holds");
        assert!(feed.receiver.try_recv().is_ok());
        feed.queued.fetch_sub(16, Ordering::AcqRel);
        assert!(input.push(Bytes::from_static(b"0123456789")).is_ok(), "written bytes free room");
        assert!(input.push(Bytes::from_static(b"x")).is_err());
    }
}
