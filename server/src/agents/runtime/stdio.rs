//! Shard's own agent as a runtime: `shard agent --stdio`, re-executed from
//! this binary for the agent's cwd and session. Its stdin is fed through a
//! queue bounded in bytes that never blocks the host; its stdout is read
//! into lines, one message per read; its exit is reported once, after every
//! line it wrote; its stderr goes to `agents/<id>/agent.log`. Stopping it
//! three ways: close stdin (graceful: the agent finishes and exits),
//! SIGTERM (the agent aborts its turn, flushes its log, kills what its tools
//! left and exits), or a forced kill of the whole process tree.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shard_protocol::jsonl::LineDecoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{ChildEvent, NotTaken, Runtime, SpawnRequest};
use crate::queue::{ByteQueue, ByteReceiver, byte_queue};

/// After a process exits, how long its stdout reader may take to hand over
/// what is left in the pipe (a host that is not reading holds it up).
const READER_DRAIN: Duration = Duration::from_secs(5);
/// Bytes that may wait for one agent's stdin: room for a few of the largest
/// messages a client may send (a prompt with images, 16 MiB), never more.
pub const INPUT_BYTES: usize = 48 * 1024 * 1024;

/// The real spawner: re-executes this binary as `shard agent --stdio` for
/// the agent's cwd and session, stderr into `agents/<id>/agent.log`.
pub struct ProcessSpawner {
    pub exe: PathBuf,
    pub home: PathBuf,
    /// Where each process is recorded as its agent's while it runs.
    pub processes: Arc<crate::agents::Processes>,
}

impl ProcessSpawner {
    /// Starts generation `request.epoch`, in `jail` if there is one; its
    /// lines and its exit (exactly one `Exited`) come back through `events`.
    pub fn spawn(
        &self,
        request: &SpawnRequest<'_>,
        jail: Option<&crate::sandbox::Jail>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let mut command = match jail {
            Some(jail) => jailed_command(jail, &self.home, request.agent_id),
            None => agent_command(&self.exe, &self.home, request.agent_id),
        };
        if jail.is_some() {
            command.arg(&self.exe);
        }
        command
            .args([
                "agent",
                "--stdio",
                "--cwd",
                request.cwd,
                "--session",
                request.record.session_id(),
            ])
            .env("SHARD_HOME", &self.home);
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
        let (mut child, pid) = spawn_managed(&mut command, &self.processes, request.agent_id)?;
        if let (Some(pid), Some(_)) = (pid, jail) {
            self.processes.contained(pid);
        }
        let epoch = request.epoch;
        let (input, queued) = byte_queue(INPUT_BYTES);
        if let Some(stdin) = child.stdin.take() {
            tokio::spawn(feed(queued, stdin));
        }
        let reader = child
            .stdout
            .take()
            .map(|stdout| tokio::spawn(read_lines(stdout, epoch, events.clone())));
        let spawned = Spawned { child, pid, contained: jail.is_some() };
        Ok(supervised(spawned, epoch, reader, events, self.processes.clone(), input))
    }
}

/// An agent process's command inside its sandbox: bubblewrap with the
/// jail's arguments, the agent's own command to be added after them.
pub(super) fn jailed_command(jail: &crate::sandbox::Jail, home: &Path, agent_id: &str) -> Command {
    let (program, arguments) = jail.argv.split_first().map_or_else(
        || (std::ffi::OsStr::new("bwrap"), &[][..]),
        |(program, arguments)| (program.as_os_str(), arguments),
    );
    let mut command = agent_command(Path::new(program), home, agent_id);
    command.args(arguments);
    command
}

/// An agent process's command, as every runtime starts one: its protocol on
/// piped stdin and stdout, stderr to its log, a process group of its own
/// (Ctrl-C in the daemon's terminal is the daemon's to handle, not every
/// agent's), killed if dropped, told the daemon's pid (to die with it),
/// and the keys this daemon took out of its own environment handed down
/// (Shard's own agent takes them out of its environment before any tool
/// runs).
pub(super) fn agent_command(program: &Path, home: &Path, agent_id: &str) -> Command {
    let mut command = Command::new(program);
    command
        .env(shard_platform::PARENT_PID_ENV, std::process::id().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr_log(home, agent_id))
        .process_group(0)
        .kill_on_drop(true);
    shard_agent::keys::hand_down(&mut command);
    command
}

/// A process just started: its pid, and whether bubblewrap started it.
pub(super) struct Spawned {
    pub(super) child: tokio::process::Child,
    pub(super) pid: Option<u32>,
    pub(super) contained: bool,
}

/// A started process under supervision: [`wait`] reports its exit once
/// `reader` (what reads its stdout) has ended, and kills its tree when the
/// host asks. The host's handle to it.
pub(super) fn supervised(
    spawned: Spawned,
    epoch: u64,
    reader: Option<tokio::task::JoinHandle<()>>,
    events: mpsc::Sender<ChildEvent>,
    processes: Arc<crate::agents::Processes>,
    input: ByteQueue<Bytes>,
) -> Box<dyn Runtime> {
    let (pid, contained) = (spawned.pid, spawned.contained);
    let kill = CancellationToken::new();
    tokio::spawn(wait(spawned, epoch, reader, kill.clone(), events, processes));
    Box::new(Process { pid, input: Some(input), kill, contained })
}

pub(super) struct Process {
    pub(super) pid: Option<u32>,
    /// Started by bubblewrap, which passes on no signal: a SIGTERM goes to
    /// its child, the sandbox's first process, which passes it on.
    pub(super) contained: bool,
    pub(super) input: Option<ByteQueue<Bytes>>,
    pub(super) kill: CancellationToken,
}

impl Runtime for Process {
    fn send(&mut self, line: Bytes) -> Result<(), NotTaken> {
        match &self.input {
            Some(input) => input.push(line).map_err(|_| NotTaken::Full),
            None => Err(NotTaken::Full),
        }
    }

    fn close_input(&mut self) {
        self.input = None;
    }

    fn terminate(&mut self) {
        let pid = match self.contained {
            true => self
                .pid
                .and_then(|pid| shard_platform::process_tree::children(pid).first().copied()),
            false => self.pid,
        };
        if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
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

/// The agent's stdin, fed from a queue bounded in bytes that never blocks
/// the host. Dropping the queue ends the feed once what is queued has been
/// written, closing the pipe.
/// Starts `command` as agent `agent_id`'s process, registered as spawned
/// under the lock the orphan killer lists under (an agent is never taken
/// for an orphan) and recorded as that agent's while it runs.
pub(super) fn spawn_managed(
    command: &mut tokio::process::Command,
    processes: &crate::agents::Processes,
    agent_id: &str,
) -> std::io::Result<(tokio::process::Child, Option<u32>)> {
    let child = {
        let mut managed = shard_platform::process_tree::Managed::lock();
        let child = command.spawn()?;
        if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
            managed.insert(pid);
        }
        child
    };
    let pid = child.id();
    if let Some(pid) = pid {
        processes.started(pid, agent_id);
    }
    Ok((child, pid))
}

pub(super) async fn feed(mut queue: ByteReceiver<Bytes>, mut stdin: tokio::process::ChildStdin) {
    while let Some(bytes) = queue.recv().await {
        let written = match stdin.write_all(&bytes).await {
            Ok(()) => stdin.flush().await,
            Err(error) => Err(error),
        };
        if written.is_err() {
            break; // the process is gone; `wait` reports its exit
        }
    }
    // Dropping stdin closes it: the agent finishes and exits.
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
pub(super) async fn wait(
    spawned: Spawned,
    epoch: u64,
    reader: Option<tokio::task::JoinHandle<()>>,
    kill: CancellationToken,
    events: mpsc::Sender<ChildEvent>,
    processes: Arc<crate::agents::Processes>,
) {
    let Spawned { mut child, pid, contained } = spawned;
    let status = tokio::select! {
        status = child.wait() => status,
        () = kill.cancelled() => {
            if let Some(pid) = pid {
                // The agent is a subreaper: everything its tools started is
                // below it, wherever it moved its process group or session.
                let _ = tokio::task::spawn_blocking(move || {
                    shard_platform::process_tree::kill_tree(pid, true)
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
        shard_platform::process_tree::Managed::lock().remove(&pid);
    }
    let _ = tokio::task::spawn_blocking(shard_platform::process_tree::kill_orphans).await;
    if let Some(mut reader) = reader {
        // Its stdout ends with it, unless something it started still holds
        // the pipe: that gets a moment, not forever.
        if tokio::time::timeout(READER_DRAIN, &mut reader).await.is_err() {
            tracing::warn!("an agent's stdout stayed open after it exited; its reader was stopped");
            reader.abort();
        }
    }
    let (code, description) = describe_exit(status, contained);
    let _ = events.send(ChildEvent::Exited { epoch, code, description }).await;
}

/// `contained`: the process was bubblewrap, which exits with its
/// command's status, and 128 + N for a command that signal N ended (the
/// sandbox's first process cannot die of a signal it sends itself).
fn describe_exit(
    status: std::io::Result<std::process::ExitStatus>,
    contained: bool,
) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code @ 129..=192), _) if contained => {
                (None, format!("process killed by signal {}", code - 128))
            }
            (Some(code), _) => (Some(code), format!("process exited with status {code}")),
            (None, Some(signal)) => (None, format!("process killed by signal {signal}")),
            (None, None) => (None, "process ended".to_owned()),
        },
        Err(error) => (None, format!("cannot wait for the process: {error}")),
    }
}

/// Where an agent process's stderr goes.
pub(crate) fn agent_log(home: &Path, agent_id: &str) -> PathBuf {
    crate::agents::manifest::agent_dir(home, agent_id).join("agent.log")
}

/// How long the agent's log is: what a process about to start writes
/// follows this.
pub fn log_length(home: &Path, agent_id: &str) -> u64 {
    std::fs::metadata(agent_log(home, agent_id)).map_or(0, |meta| meta.len())
}

/// The launch options of `agent.create` that Shard's own agent takes,
/// checked: a tool allowlist of tools it has, and a brief it reads whole.
pub fn check_launch(
    request: &shard_protocol::orchestrator::AgentCreate,
) -> Result<(), crate::agents::error::AgentError> {
    use crate::agents::error::AgentError;
    let tools = request.tools.iter().flatten();
    if let Some(unknown) = tools.into_iter().find(|name| !shard_agent::tools::is_known(name)) {
        return Err(AgentError::UnknownTool(unknown.clone()));
    }
    let brief = request.system_prompt.as_ref();
    if brief.is_some_and(|text| text.len() > shard_agent::MAX_INSTRUCTIONS) {
        return Err(AgentError::BriefTooLong { max: shard_agent::MAX_INSTRUCTIONS });
    }
    Ok(())
}

/// Logs an agent process's end, and says why it ended: `description`,
/// and for one that never became `ready`, what it wrote to its log from
/// `from` on. That goes to the clients; the daemon's own log names the
/// file and quotes none of it: what an agent prints is its own, and may
/// hold what it was given.
pub fn ended(home: &Path, agent_id: &str, exit: Ended, description: String) -> String {
    if exit.expected {
        tracing::info!(agent = %agent_id, %description, "agent process stopped");
    } else {
        let log = agent_log(home, agent_id);
        tracing::warn!(agent = %agent_id, %description, log = %log.display(), "agent process exited");
    }
    let said = match exit.ready {
        true => None,
        false => log_since(home, agent_id, exit.log_from),
    };
    match said {
        Some(said) => format!("{description}; it said: {said}"),
        None => description,
    }
}

/// How an agent process ended, for [`ended`].
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    /// Its end was asked for.
    pub expected: bool,
    /// It had said `hello` and `sync`.
    pub ready: bool,
    /// Where its lines begin in the agent's log.
    pub log_from: u64,
}

/// The last lines written to the agent's log from `from` on, to say why a
/// process did not start: at most three lines and 400 characters, control
/// characters dropped, `None` when it wrote nothing.
pub fn log_since(home: &Path, agent_id: &str, from: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 4096;
    const LINES: usize = 3;
    const CHARS: usize = 400;
    // No link or FIFO followed, as for every file read from an agent's folder.
    let mut file = shard_platform::session_log::open_to_read(&agent_log(home, agent_id)).ok()?;
    let length = file.metadata().ok()?.len();
    // Restarted when it grew too big: all of it is this process's.
    let from = if length < from { 0 } else { from };
    let start = from.max(length.saturating_sub(TAIL));
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(TAIL).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<String> = text
        .lines()
        .map(|line| line.chars().filter(|c| !c.is_control()).collect::<String>())
        .map(|line| line.trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect();
    let last = lines[lines.len().saturating_sub(LINES)..].join(" / ");
    if last.is_empty() {
        return None;
    }
    let mut said: String = last.chars().take(CHARS).collect();
    if said.len() < last.len() {
        said.push('…');
    }
    Some(said)
}

/// The agent's stderr goes to `agents/<id>/agent.log` (0600), restarted
/// when it grows past 1 MiB so it cannot fill the disk.
pub(super) fn stderr_log(home: &Path, agent_id: &str) -> Stdio {
    use std::os::unix::fs::OpenOptionsExt;
    const MAX_LOG: u64 = 1024 * 1024;
    let path = agent_log(home, agent_id);
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

    #[test]
    fn what_a_process_wrote_is_its_last_lines_bounded_and_printable() {
        let home = tempfile::tempdir().expect("home");
        let log = agent_log(home.path(), "a");
        std::fs::create_dir_all(log.parent().expect("dir")).expect("dir");
        assert_eq!(log_since(home.path(), "a", 0), None, "no log yet");
        std::fs::write(&log, "before\n").expect("write");
        let from = log_length(home.path(), "a");
        assert_eq!(log_since(home.path(), "a", from), None, "nothing new");
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("open");
        std::io::Write::write_all(&mut file, b"one\ntwo\n\x1b[31mthree\x1b[0m\nfour\n")
            .expect("write");
        let said = log_since(home.path(), "a", from).expect("said");
        assert_eq!(said, "two / [31mthree[0m / four", "three lines, no escape bytes");
        // Restarted when too big: shorter than where it was, all of it is new.
        std::fs::write(&log, "fresh\n").expect("write");
        assert_eq!(log_since(home.path(), "a", 1_000).as_deref(), Some("fresh"));
        std::fs::write(&log, "x".repeat(10_000)).expect("write");
        let said = log_since(home.path(), "a", 0).expect("said");
        assert_eq!(said.chars().count(), 401, "400 characters and an ellipsis");
        assert!(said.ends_with('…'));
    }

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
                runtime: shard_platform::runtimes::BUILTIN,
                cwd: "/",
                record: crate::agents::runtime::SessionRecord::new(home.path(), "s"),
                epoch,
                tools: None,
                instructed: false,
                delegates: false,
                sandbox: None,
                remote: None,
            };
            let _runtime = spawner.spawn(&request, None, events).expect("spawn");
            let mut lines = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                match received.recv().await.expect("an exit at the end") {
                    ChildEvent::Lines { lines: read, .. } => lines += read.len(),
                    ChildEvent::Exited { .. } => break,
                    ChildEvent::Ask { .. } | ChildEvent::Withdraw { .. } => {}
                }
            }
            assert_eq!(lines, LINES, "generation {epoch}: every line before the exit");
        }
    }
}
