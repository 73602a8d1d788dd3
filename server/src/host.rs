//! One agent's host: an actor that owns the agent's process generations
//! (spawn, readiness, restore, reaping, kill), projects its state for `sync`
//! and the registry, and multiplexes its events to every attached connection
//! (PROTOCOL.md §6, §10.1).
//!
//! Everything about one agent happens in this one task, in order, so the
//! attach sequence is exact: the `response`, then the `sync`, then every
//! later event once. Events are serialized once: a child's line is tagged
//! with `agent_id` by splicing it into the bytes it arrived as.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use shard_agent::session_log::LogTail;
use shard_protocol::agent::{
    Decision, LiveWindow, PendingKind, PendingRequest, PermissionAnswer, PermissionResponse, Sync,
    UiResponse,
};
use shard_protocol::jsonl::LineDecoder;
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{
    ActivityPhase, AgentActivity, AgentExited, AgentStatusChanged, AttachResult, AttachRole,
    TerminateResult,
};
use shard_protocol::types::{AgentInfo, AgentStatus, RuntimeState, Usage};
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::delegation::Delegation;
use crate::hub::{ConnId, Hub, Outbox};
use crate::manifest::Manifest;

/// How long a new process may take to say `hello` and `sync`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// After SIGTERM, how long a process may take before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// Commands queued for a host. Connections wait when it is full: one agent
/// cannot be flooded faster than it answers.
pub const HOST_QUEUE: usize = 256;
/// Child lines buffered between its stdout reader and the host.
const CHILD_LINES: usize = 1024;

/// What hosts share: the daemon's home, configuration and connections.
pub struct Context {
    pub home: PathBuf,
    pub exe: PathBuf,
    pub hub: Arc<Hub>,
    pub delegation: Arc<Delegation>,
    pub idle_timeout: Duration,
    pub headless_timeout: Duration,
}

pub enum HostCommand {
    Attach {
        outbox: Outbox,
        role: AttachRole,
        id: Option<String>,
    },
    Detach {
        outbox: Outbox,
        id: Option<String>,
    },
    /// A per-agent command (not an answer) to forward to the agent.
    Forward {
        outbox: Outbox,
        id: Option<String>,
        message: ClientMessage,
    },
    /// A `permission_response` or `ui_response`; `source` names the answerer.
    Answer {
        outbox: Outbox,
        id: Option<String>,
        message: ClientMessage,
        source: String,
    },
    Disconnected {
        conn: ConnId,
    },
    /// Start a process now (a new agent); replies once it is ready or failed.
    Start {
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    Terminate {
        reply: oneshot::Sender<TerminateResult>,
    },
    Kill {
        force: bool,
        reply: oneshot::Sender<()>,
    },
    /// Daemon shutdown: stop when inactive (graceful) or now (force).
    Shutdown {
        force: bool,
        reply: oneshot::Sender<()>,
    },
}

/// The registry's handle to a host.
#[derive(Clone)]
pub struct HostHandle {
    pub commands: mpsc::Sender<HostCommand>,
    pub info: Arc<Mutex<AgentInfo>>,
}

impl HostHandle {
    pub fn info(&self) -> AgentInfo {
        self.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

enum ChildEvent {
    Line { epoch: u64, line: Result<String, shard_protocol::jsonl::LineError> },
    Exited { epoch: u64, code: Option<i32>, description: String },
}

struct Proc {
    epoch: u64,
    stdin: mpsc::UnboundedSender<Bytes>,
    kill: CancellationToken,
    pid: Option<u32>,
    ready: bool,
    started: Instant,
    /// Closing stdin was asked for (terminate, reap, shutdown): the exit is
    /// expected and the agent stays `stopped`, not `failed`.
    stopping: bool,
    saw_hello: bool,
}

struct Pending {
    request: PendingKind,
    /// The question as it was sent, tagged: re-sent when the responders
    /// change (a delegated child's question moving up to an ancestor).
    announcement: Bytes,
    /// Set when every responder left: answer headless at this instant.
    headless_at: Option<Instant>,
    /// Who answered, once the daemon forwarded an answer.
    source: Option<String>,
}

struct Inflight {
    /// `None`: the daemon's own command (its response is swallowed).
    outbox: Option<Outbox>,
    client_id: Option<String>,
    command: &'static str,
}

/// Deferred work that needs a ready process.
enum Waiting {
    Attach { outbox: Outbox, role: AttachRole, id: Option<String> },
    Forward { outbox: Outbox, id: Option<String>, message: Box<ClientMessage> },
    Start { reply: oneshot::Sender<Result<(), WireError>> },
}

pub struct Host {
    context: Arc<Context>,
    manifest: Manifest,
    info: Arc<Mutex<AgentInfo>>,
    proc: Option<Proc>,
    /// Generations started so far; the current one's `runtime_epoch` is this
    /// minus one.
    generations: u64,
    runtime_state: RuntimeState,
    status: AgentStatus,
    mode: Option<String>,
    model: Option<String>,
    capabilities: Option<Vec<String>>,
    usage: Usage,
    log: Option<LogTail>,
    pending: Vec<Pending>,
    attached: HashMap<ConnId, (Outbox, AttachRole)>,
    inflight: HashMap<String, Inflight>,
    next_internal: u64,
    waiting: Vec<Waiting>,
    terminate_when_inactive: bool,
    shutdown: Option<(bool, Vec<oneshot::Sender<()>>)>,
    kill_waiters: Vec<oneshot::Sender<()>>,
    last_active: Instant,
    activity: (ActivityPhase, Option<String>, AgentStatus),
    events: mpsc::Sender<ChildEvent>,
}

pub fn spawn(context: Arc<Context>, manifest: Manifest) -> HostHandle {
    let info = Arc::new(Mutex::new(initial_info(&manifest)));
    let (commands, inbox) = mpsc::channel(HOST_QUEUE);
    let (events, child_events) = mpsc::channel(CHILD_LINES);
    context.delegation.set_parent(&manifest.agent_id, manifest.parent_agent_id.as_deref());
    let host = Host {
        context,
        manifest,
        info: info.clone(),
        proc: None,
        generations: 0,
        runtime_state: RuntimeState::Stopped,
        status: AgentStatus::Idle,
        mode: None,
        model: None,
        capabilities: None,
        usage: Usage::default(),
        log: None,
        pending: Vec::new(),
        attached: HashMap::new(),
        inflight: HashMap::new(),
        next_internal: 0,
        waiting: Vec::new(),
        terminate_when_inactive: false,
        shutdown: None,
        kill_waiters: Vec::new(),
        last_active: Instant::now(),
        activity: (ActivityPhase::Idle, None, AgentStatus::Idle),
        events,
    };
    tokio::spawn(host.run(inbox, child_events));
    HostHandle { commands, info }
}

fn initial_info(manifest: &Manifest) -> AgentInfo {
    AgentInfo {
        agent_id: manifest.agent_id.clone(),
        name: manifest.name.clone(),
        cwd: manifest.cwd.clone(),
        model: manifest.model.clone(),
        provider: None,
        mode: manifest.mode.clone(),
        status: AgentStatus::Idle,
        runtime_state: RuntimeState::Stopped,
        created_at: manifest.created_at,
        usage: None,
        parent_agent_id: manifest.parent_agent_id.clone(),
        alias: manifest.alias.clone(),
        definition_name: manifest.definition_name.clone(),
        display_name: manifest.display_name.clone(),
    }
}

/// `{"agent_id":"…",` spliced in front of a child's serialized event.
fn tag(agent_id: &str, line: &str) -> Bytes {
    let quoted = Value::String(agent_id.to_owned()).to_string();
    let rest = line.trim_start().strip_prefix('{').unwrap_or(line);
    let separator = if rest.trim_start().starts_with('}') { "" } else { "," };
    Bytes::from(format!("{{\"agent_id\":{quoted}{separator}{rest}"))
}

fn encode(envelope: &Envelope<ServerMessage>) -> Bytes {
    Bytes::from(envelope.to_json())
}

impl Host {
    fn id(&self) -> &str {
        &self.manifest.agent_id
    }

    async fn run(
        mut self,
        mut inbox: mpsc::Receiver<HostCommand>,
        mut child: mpsc::Receiver<ChildEvent>,
    ) {
        loop {
            let deadline = self.next_deadline();
            tokio::select! {
                command = inbox.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => break,
                },
                Some(event) = child.recv() => self.child_event(event).await,
                () = sleep_until(deadline) => self.timers().await,
            }
            if self.shutdown.is_some() && self.proc.is_none() {
                if let Some((_, waiters)) = self.shutdown.take() {
                    for waiter in waiters {
                        let _ = waiter.send(());
                    }
                }
                // Stay alive to answer the registry until the daemon exits.
            }
        }
        if let Some(proc) = &self.proc {
            proc.kill.cancel();
        }
    }

    // -- timers ------------------------------------------------------------

    fn next_deadline(&self) -> Option<Instant> {
        let mut deadlines = Vec::new();
        if let Some(proc) = &self.proc {
            if !proc.ready {
                deadlines.push(proc.started + START_TIMEOUT);
            } else if self.reapable() {
                deadlines.push(self.last_active + self.context.idle_timeout);
            }
        }
        deadlines.extend(self.pending.iter().filter_map(|pending| pending.headless_at));
        deadlines.into_iter().min()
    }

    /// Inactive, nothing open, nothing in flight: the process may be stopped.
    fn reapable(&self) -> bool {
        matches!(self.status, AgentStatus::Idle | AgentStatus::Error)
            && self.pending.is_empty()
            && self.inflight.is_empty()
            && self.proc.as_ref().is_some_and(|proc| proc.ready && !proc.stopping)
    }

    async fn timers(&mut self) {
        let now = Instant::now();
        if let Some(proc) = &self.proc {
            if !proc.ready && now >= proc.started + START_TIMEOUT {
                tracing::warn!(agent = %self.id(), "agent process did not become ready in time");
                proc.kill.cancel();
                self.fail_waiting("the agent process did not become ready in time");
            }
        }
        if self.reapable() && now >= self.last_active + self.context.idle_timeout {
            tracing::info!(agent = %self.id(), "stopping idle runtime");
            self.stop_process();
        }
        let expired: Vec<String> = self
            .pending
            .iter()
            .filter(|pending| pending.headless_at.is_some_and(|at| now >= at))
            .map(|pending| pending.request.request_id().to_owned())
            .collect();
        for request_id in expired {
            self.answer_headless(&request_id).await;
        }
    }

    // -- process generations ----------------------------------------------

    /// Starts a new generation unless one is running or starting.
    fn ensure_process(&mut self) {
        if self.proc.is_some() {
            return;
        }
        let epoch = self.generations;
        self.generations += 1;
        let mut command = tokio::process::Command::new(&self.context.exe);
        command
            .args([
                "agent",
                "--stdio",
                "--cwd",
                &self.manifest.cwd,
                "--session",
                &self.manifest.session_id,
            ])
            .env("SHARD_HOME", &self.context.home)
            .env(shard_agent::PARENT_PID_ENV, std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_log(&self.context.home, self.id()))
            // Its own process group: Ctrl-C in the daemon's terminal is the
            // daemon's to handle, not every agent's.
            .process_group(0)
            .kill_on_drop(true);
        let spawned = command.spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(error) => {
                tracing::error!(agent = %self.id(), %error, "cannot start the agent process");
                self.set_runtime_state(RuntimeState::Failed);
                self.fail_waiting(&format!("cannot start the agent process: {error}"));
                return;
            }
        };
        let pid = child.id();
        let (stdin_sender, mut stdin_queue) = mpsc::unbounded_channel::<Bytes>();
        if let Some(mut stdin) = child.stdin.take() {
            tokio::spawn(async move {
                while let Some(bytes) = stdin_queue.recv().await {
                    if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
                        break;
                    }
                }
                // Dropping stdin closes it: the agent finishes and exits.
            });
        }
        if let Some(mut stdout) = child.stdout.take() {
            let events = self.events.clone();
            tokio::spawn(async move {
                let mut decoder = LineDecoder::default();
                let mut buffer = vec![0; 64 * 1024];
                loop {
                    let read = match stdout.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => read,
                    };
                    decoder.feed(&buffer[..read]);
                    while let Some(line) = decoder.next_line() {
                        if events.send(ChildEvent::Line { epoch, line }).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
        let kill = CancellationToken::new();
        {
            let kill = kill.clone();
            let events = self.events.clone();
            tokio::spawn(async move {
                let status = tokio::select! {
                    status = child.wait() => status,
                    () = kill.cancelled() => {
                        let _ = child.start_kill();
                        child.wait().await
                    }
                };
                let (code, description) = describe_exit(status);
                let _ = events.send(ChildEvent::Exited { epoch, code, description }).await;
            });
        }
        self.proc = Some(Proc {
            epoch,
            stdin: stdin_sender,
            kill,
            pid,
            ready: false,
            started: Instant::now(),
            stopping: false,
            saw_hello: false,
        });
        self.set_runtime_state(RuntimeState::Starting);
    }

    /// Graceful stop: close stdin; the agent finishes its work and exits.
    fn stop_process(&mut self) {
        if let Some(proc) = &mut self.proc {
            proc.stopping = true;
            // Replacing the sender drops the only one: the writer task ends
            // and closes the pipe.
            let (closed, _) = mpsc::unbounded_channel();
            proc.stdin = closed;
        }
    }

    fn signal_process(&self, signal: nix::sys::signal::Signal) {
        if let Some(pid) = self.proc.as_ref().and_then(|proc| proc.pid) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
            }
        }
    }

    fn send_to_child(&mut self, envelope: &Envelope<ClientMessage>) {
        if let Some(proc) = &self.proc {
            let mut line = envelope.to_json().into_bytes();
            line.push(b'\n');
            let _ = proc.stdin.send(Bytes::from(line));
        }
    }

    fn internal_id(&mut self) -> String {
        self.next_internal += 1;
        format!("d-{}", self.next_internal)
    }

    fn fail_waiting(&mut self, why: &str) {
        self.fail_waiting_with(WireError::new(ErrorCode::RuntimeStartFailed, why));
    }

    /// Answers every piece of work that was waiting for a ready process.
    fn fail_waiting_with(&mut self, error: WireError) {
        for waiting in std::mem::take(&mut self.waiting) {
            match waiting {
                Waiting::Start { reply } => {
                    let _ = reply.send(Err(error.clone()));
                }
                Waiting::Attach { outbox, id, .. } => {
                    respond(
                        &outbox,
                        id,
                        Some(self.id()),
                        Response::failed("agent.attach", error.clone()),
                        false,
                    );
                }
                Waiting::Forward { outbox, id, message } => {
                    let command = shard_protocol::envelope::MessageSet::type_name(message.as_ref());
                    respond(
                        &outbox,
                        id,
                        Some(self.id()),
                        Response::failed(command, error.clone()),
                        true,
                    );
                }
            }
        }
    }

    async fn child_event(&mut self, event: ChildEvent) {
        match event {
            ChildEvent::Line { epoch, line } => {
                if self.proc.as_ref().is_none_or(|proc| proc.epoch != epoch) {
                    return; // a superseded generation
                }
                match line {
                    Ok(line) => self.child_line(line).await,
                    Err(problem) => {
                        tracing::warn!(agent = %self.id(), %problem, "bad line from agent")
                    }
                }
            }
            ChildEvent::Exited { epoch, code, description } => {
                if self.proc.as_ref().is_none_or(|proc| proc.epoch != epoch) {
                    return;
                }
                self.process_exited(code, description).await;
            }
        }
    }

    async fn process_exited(&mut self, code: Option<i32>, description: String) {
        let Some(proc) = self.proc.take() else { return };
        let expected = proc.stopping || self.shutdown.is_some();
        if !proc.ready {
            self.fail_waiting(&format!(
                "the agent process exited before it was ready: {description}"
            ));
        }
        // Questions of a dead process can no longer be answered.
        for pending in std::mem::take(&mut self.pending) {
            let request_id = pending.request.request_id().to_owned();
            self.broadcast_resolution(&pending.request, &request_id, "runtime_exited");
        }
        self.publish_pending();
        for (_, inflight) in std::mem::take(&mut self.inflight) {
            if let Some(outbox) = inflight.outbox {
                let error = WireError::new(ErrorCode::InternalError, "the agent process exited");
                respond(
                    &outbox,
                    inflight.client_id,
                    Some(self.id()),
                    Response::failed(inflight.command, error),
                    true,
                );
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
            self.context.hub.broadcast(&encode(&Envelope::new(ServerMessage::AgentExited(exited))));
        }
        self.emit_activity();
        self.terminate_when_inactive = false;
        // Work that arrived while it was stopping starts the next generation.
        if !self.waiting.is_empty() && self.shutdown.is_none() {
            self.ensure_process();
        }
    }

    async fn child_line(&mut self, line: String) {
        let envelope = match Envelope::<ServerMessage>::from_json(&line) {
            Ok(envelope) => envelope,
            Err(problem) => {
                tracing::warn!(agent = %self.id(), %problem, "unreadable event from agent");
                return;
            }
        };
        let ready = self.proc.as_ref().is_some_and(|proc| proc.ready);
        if !ready {
            self.startup_message(envelope).await;
            return;
        }
        self.last_active = Instant::now();
        match envelope.message {
            ServerMessage::Response(response) => self.child_response(envelope.id, response),
            ServerMessage::Hello(_) | ServerMessage::Sync(_) => {}
            ServerMessage::PermissionRequest(request) => {
                self.raise(PendingKind::Permission(request), &line).await;
            }
            ServerMessage::UiRequest(request) => {
                if request.kind == shard_protocol::agent::UiKind::Notify {
                    self.fan_out(tag(self.id(), &line));
                } else {
                    self.raise(PendingKind::Ui(request), &line).await;
                }
            }
            ServerMessage::PermissionResolved(mut resolved) => {
                let source = self.settle(&resolved.request_id);
                if resolved.source.is_none() {
                    resolved.source = source;
                }
                let bytes = encode(
                    &Envelope::new(ServerMessage::PermissionResolved(resolved))
                        .for_agent(self.id()),
                );
                self.deliver_question(bytes);
            }
            ServerMessage::UiResolved(resolved) => {
                self.settle(&resolved.request_id);
                self.deliver_question(tag(self.id(), &line));
            }
            other => {
                self.observe(&other);
                self.fan_out(tag(self.id(), &line));
            }
        }
    }

    /// `hello` then `sync` from a new process.
    async fn startup_message(&mut self, envelope: Envelope<ServerMessage>) {
        match envelope.message {
            ServerMessage::Hello(hello) => {
                self.capabilities = Some(hello.capabilities);
                if let Some(proc) = &mut self.proc {
                    proc.saw_hello = true;
                }
            }
            ServerMessage::Sync(sync) if self.proc.as_ref().is_some_and(|proc| proc.saw_hello) => {
                self.status = sync.status;
                self.mode = Some(sync.mode);
                if sync.capabilities.is_some() {
                    self.capabilities = sync.capabilities;
                }
                self.log = shard_agent::session_log::find_session(
                    &self.context.home,
                    &self.manifest.session_id,
                )
                .ok()
                .and_then(|dir| LogTail::open(&dir.join("session.jsonl")).ok());
                self.model = self
                    .log
                    .as_ref()
                    .and_then(|log| shard_agent::conversation::settings_of(log.entries()).model);
                if let Some(proc) = &mut self.proc {
                    proc.ready = true;
                }
                self.last_active = Instant::now();
                self.set_runtime_state(RuntimeState::Running);
                self.emit_activity();
                // §9.1: a replacement generation re-syncs existing attachments.
                if self.generations > 1 {
                    let sync = encode(
                        &Envelope::new(ServerMessage::Sync(self.daemon_sync()))
                            .for_agent(self.id()),
                    );
                    self.fan_out(sync);
                }
                for waiting in std::mem::take(&mut self.waiting) {
                    match waiting {
                        Waiting::Start { reply } => {
                            let _ = reply.send(Ok(()));
                        }
                        Waiting::Attach { outbox, role, id } => self.attach(outbox, role, id),
                        Waiting::Forward { outbox, id, message } => {
                            self.forward(outbox, id, *message)
                        }
                    }
                }
            }
            ServerMessage::Error(error) => {
                tracing::error!(agent = %self.id(), code = %error.code, message = %error.message, "agent refused to start");
                let why = format!("{}: {}", error.code, error.message);
                let code = error.code;
                let failure = WireError::new(
                    if code == ErrorCode::SessionCorrupt {
                        code
                    } else {
                        ErrorCode::RuntimeStartFailed
                    },
                    why,
                );
                self.fail_waiting_with(failure);
            }
            _ => {}
        }
    }

    /// Keeps the projection current from an event.
    fn observe(&mut self, message: &ServerMessage) {
        match message {
            ServerMessage::Status(status) => {
                let changed = self.status != status.status;
                self.status = status.status;
                if changed {
                    self.publish_info();
                    let event = AgentStatusChanged {
                        agent_id: self.id().to_owned(),
                        status: self.status,
                        runtime_state: self.runtime_state,
                        detail: status.detail.clone(),
                    };
                    self.context.hub.broadcast(&encode(&Envelope::new(
                        ServerMessage::AgentStatusChanged(event),
                    )));
                }
                self.emit_activity();
                if self.terminate_when_inactive && !self.status.is_active() {
                    self.stop_process();
                }
                if let Some((false, _)) = &self.shutdown {
                    if !self.status.is_active() {
                        self.stop_process();
                    }
                }
            }
            ServerMessage::ModeChanged(changed) => {
                self.mode = Some(changed.mode.clone());
                self.publish_info();
            }
            ServerMessage::ModelChanged(changed) => {
                self.model = Some(changed.active.id.clone());
                if changed.capabilities.is_some() {
                    self.capabilities.clone_from(&changed.capabilities);
                }
                self.publish_info();
            }
            ServerMessage::Usage(usage) => {
                self.usage.input += usage.input;
                self.usage.output += usage.output;
                if let Some(cost) = usage.cost {
                    self.usage.cost = Some(self.usage.cost.unwrap_or(0.0) + cost);
                }
                self.usage.context_tokens = usage.context_tokens.or(self.usage.context_tokens);
                self.usage.model.clone_from(&usage.model);
                self.publish_info();
            }
            ServerMessage::MessageDelta(delta) => {
                let phase = match delta.kind {
                    shard_protocol::agent::DeltaKind::Thinking => ActivityPhase::Thinking,
                    _ => ActivityPhase::Streaming,
                };
                self.set_activity(phase, None);
            }
            ServerMessage::ToolCall(call) => {
                self.set_activity(ActivityPhase::Tool, Some(call.name.clone()))
            }
            ServerMessage::ToolResult(_) => self.set_activity(ActivityPhase::Streaming, None),
            _ => {}
        }
    }

    fn child_response(&mut self, id: Option<String>, response: Response) {
        let Some(inflight) = id.and_then(|id| self.inflight.remove(&id)) else { return };
        if let Some(outbox) = inflight.outbox {
            let envelope = Envelope {
                id: inflight.client_id,
                agent_id: Some(self.id().to_owned()),
                message: ServerMessage::Response(response),
            };
            outbox.push(encode(&envelope));
        }
    }

    // -- questions (§6.3) -------------------------------------------------

    async fn raise(&mut self, request: PendingKind, line: &str) {
        let request_id = request.request_id().to_owned();
        let announcement = tag(self.id(), line);
        self.pending.push(Pending {
            request,
            announcement: announcement.clone(),
            headless_at: None,
            source: None,
        });
        self.publish_pending();
        self.deliver_question(announcement);
        if self.context.delegation.responders(self.id()).is_empty() {
            // Nobody anywhere in the hierarchy can answer: deny at once.
            self.answer_headless(&request_id).await;
        }
    }

    /// Sends a question (or its resolution) to every attachment of this agent
    /// and to the responders it is delegated to, each connection once.
    fn deliver_question(&self, bytes: Bytes) {
        let mut sent = std::collections::HashSet::new();
        for (outbox, _) in self.attached.values() {
            if sent.insert(outbox.id) {
                outbox.push(bytes.clone());
            }
        }
        for outbox in self.context.delegation.responders(self.id()) {
            if sent.insert(outbox.id) {
                outbox.push(bytes.clone());
            }
        }
    }

    /// Removes a settled question; returns who answered it, if known.
    fn settle(&mut self, request_id: &str) -> Option<String> {
        let at =
            self.pending.iter().position(|pending| pending.request.request_id() == request_id)?;
        let pending = self.pending.remove(at);
        self.publish_pending();
        self.emit_activity();
        pending.source
    }

    fn publish_pending(&self) {
        let open = self.pending.iter().map(|pending| pending.request.clone()).collect();
        self.context.delegation.set_pending(self.id(), open);
    }

    /// The headless answer: deny, or a null UI value (CONTRACT.md).
    async fn answer_headless(&mut self, request_id: &str) {
        let Some(pending) =
            self.pending.iter_mut().find(|pending| pending.request.request_id() == request_id)
        else {
            return;
        };
        if pending.source.is_some() {
            return;
        }
        pending.source = Some("headless".to_owned());
        pending.headless_at = None;
        let message = match &pending.request {
            PendingKind::Permission(_) => ClientMessage::PermissionResponse(PermissionResponse {
                request_id: request_id.to_owned(),
                answer: PermissionAnswer::Decision(Decision::Deny),
                reason: Some("no interactive client is attached".to_owned()),
            }),
            PendingKind::Ui(_) => ClientMessage::UiResponse(UiResponse {
                request_id: request_id.to_owned(),
                value: None,
            }),
        };
        let id = self.internal_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        self.inflight.insert(id.clone(), Inflight { outbox: None, client_id: None, command });
        self.send_to_child(&Envelope::new(message).with_id(id));
    }

    /// A client's answer: the first valid one wins and is forwarded; later or
    /// invalid ones are dropped silently (§6.3, §9.5).
    fn answer(
        &mut self,
        outbox: &Outbox,
        id: Option<String>,
        message: ClientMessage,
        source: String,
    ) {
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        // The daemon acknowledges every answer itself: accepted, not errored.
        respond(outbox, id, Some(self.id()), Response::accepted(command), false);
        let request_id = match &message {
            ClientMessage::PermissionResponse(response) => &response.request_id,
            ClientMessage::UiResponse(response) => &response.request_id,
            _ => return,
        };
        let Some(pending) =
            self.pending.iter_mut().find(|pending| pending.request.request_id() == request_id)
        else {
            return;
        };
        if pending.source.is_some() {
            return; // already answered: late answers are dropped
        }
        let valid = match (&pending.request, &message) {
            (PendingKind::Permission(request), ClientMessage::PermissionResponse(response)) => {
                request.accepts(&response.answer)
            }
            (PendingKind::Ui(_), ClientMessage::UiResponse(_)) => true,
            _ => false,
        };
        if !valid {
            return; // an unknown choice_id is not an answer
        }
        pending.source = Some(source);
        pending.headless_at = None;
        let internal = self.internal_id();
        self.inflight.insert(internal.clone(), Inflight { outbox: None, client_id: None, command });
        self.send_to_child(&Envelope::new(message).with_id(internal));
    }

    fn broadcast_resolution(&self, request: &PendingKind, request_id: &str, source: &str) {
        let message = match request {
            PendingKind::Permission(_) => {
                ServerMessage::PermissionResolved(shard_protocol::agent::PermissionResolved {
                    request_id: request_id.to_owned(),
                    answer: PermissionAnswer::Decision(Decision::Deny),
                    source: Some(source.to_owned()),
                })
            }
            PendingKind::Ui(_) => ServerMessage::UiResolved(shard_protocol::agent::UiResolved {
                request_id: request_id.to_owned(),
                value: Value::Null,
            }),
        };
        self.deliver_question(encode(&Envelope::new(message).for_agent(self.id())));
    }

    /// After a responder left: questions nobody can answer any more start
    /// their headless timeout.
    fn responders_changed(&mut self) {
        let nobody = self.context.delegation.responders(self.id()).is_empty();
        let timeout = self.context.headless_timeout;
        for pending in &mut self.pending {
            if pending.source.is_some() {
                continue;
            }
            pending.headless_at = if nobody {
                Some(pending.headless_at.unwrap_or_else(|| Instant::now() + timeout))
            } else {
                None
            };
        }
    }

    // -- commands ---------------------------------------------------------

    async fn command(&mut self, command: HostCommand) {
        match command {
            HostCommand::Attach { outbox, role, id } => {
                if self.ready() {
                    self.attach(outbox, role, id);
                } else {
                    self.waiting.push(Waiting::Attach { outbox, role, id });
                    self.ensure_process();
                }
            }
            HostCommand::Detach { outbox, id } => {
                self.detach(outbox.id);
                respond(&outbox, id, None, Response::accepted("agent.detach"), false);
            }
            HostCommand::Forward { outbox, id, message } => self.route(outbox, id, message),
            HostCommand::Answer { outbox, id, message, source } => {
                self.answer(&outbox, id, message, source)
            }
            HostCommand::Disconnected { conn } => self.detach(conn),
            HostCommand::Start { reply } => {
                if self.ready() {
                    let _ = reply.send(Ok(()));
                } else {
                    self.waiting.push(Waiting::Start { reply });
                    self.ensure_process();
                }
            }
            HostCommand::Terminate { reply } => {
                let active = self.status.is_active() && self.proc.is_some();
                if active {
                    self.terminate_when_inactive = true;
                } else {
                    self.stop_process();
                }
                let _ = reply.send(TerminateResult { deferred: active });
            }
            HostCommand::Kill { force, reply } => {
                if self.proc.is_none() {
                    let _ = reply.send(());
                    return;
                }
                self.kill_waiters.push(reply);
                if let Some(proc) = &mut self.proc {
                    proc.stopping = true;
                }
                if force {
                    if let Some(proc) = &self.proc {
                        proc.kill.cancel();
                    }
                } else {
                    self.signal_process(nix::sys::signal::Signal::SIGTERM);
                    let kill = self.proc.as_ref().map(|proc| proc.kill.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(KILL_GRACE).await;
                        if let Some(kill) = kill {
                            kill.cancel();
                        }
                    });
                }
            }
            HostCommand::Shutdown { force, reply } => {
                self.waiting.clear();
                let waiters = match self.shutdown.take() {
                    Some((_, mut waiters)) => {
                        waiters.push(reply);
                        waiters
                    }
                    None => vec![reply],
                };
                self.shutdown = Some((force, waiters));
                if self.proc.is_none() {
                    return;
                }
                if force {
                    if let Some(proc) = &self.proc {
                        proc.kill.cancel();
                    }
                } else if !self.status.is_active() {
                    self.stop_process();
                }
            }
        }
    }

    fn ready(&self) -> bool {
        self.proc.as_ref().is_some_and(|proc| proc.ready && !proc.stopping)
    }

    fn attach(&mut self, outbox: Outbox, role: AttachRole, id: Option<String>) {
        let info = self.current_info();
        let result = AttachResult { status: self.status, info };
        // §6.4: the response, then the sync, then live events.
        respond(&outbox, id, None, Response::ok("agent.attach", result), false);
        outbox.push(encode(
            &Envelope::new(ServerMessage::Sync(self.daemon_sync())).for_agent(self.id()),
        ));
        if role == AttachRole::Interactive {
            self.context.delegation.attach(self.id(), &outbox);
        }
        self.attached.insert(outbox.id, (outbox, role));
        self.responders_changed();
    }

    fn detach(&mut self, conn: ConnId) {
        if let Some((_, role)) = self.attached.remove(&conn) {
            self.context.delegation.detach(self.id(), conn);
            self.responders_changed();
            if role == AttachRole::Interactive {
                // Open questions now go to whoever answers instead (an
                // interactive ancestor, §6.3); clients dedupe by request id.
                let open: Vec<Bytes> = self
                    .pending
                    .iter()
                    .filter(|pending| pending.source.is_none())
                    .map(|pending| pending.announcement.clone())
                    .collect();
                for announcement in open {
                    for outbox in self.context.delegation.responders(self.id()) {
                        outbox.push(announcement.clone());
                    }
                }
            }
        }
        self.inflight
            .retain(|_, inflight| inflight.outbox.as_ref().is_none_or(|outbox| outbox.id != conn));
    }

    /// Per-agent commands other than answers.
    fn route(&mut self, outbox: Outbox, id: Option<String>, message: ClientMessage) {
        if self.ready() {
            self.forward(outbox, id, message);
            return;
        }
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        match message {
            // Listing never wakes a stopped runtime (§9.2).
            ClientMessage::ListModes(_)
            | ClientMessage::ListModels(_)
            | ClientMessage::ListReasoningLevels(_)
                if self.proc.is_none() =>
            {
                let error = WireError::new(
                    ErrorCode::Conflict,
                    "the agent's runtime is stopped; send work or re-attach to restore it",
                );
                respond(&outbox, id, Some(self.id()), Response::failed(command, error), true);
            }
            ClientMessage::Abort(_) if self.proc.is_none() => {
                respond(&outbox, id, Some(self.id()), Response::accepted(command), true);
            }
            message => {
                self.waiting.push(Waiting::Forward { outbox, id, message: Box::new(message) });
                if self.proc.as_ref().is_none_or(|proc| !proc.stopping) {
                    self.ensure_process();
                }
            }
        }
    }

    fn forward(&mut self, outbox: Outbox, id: Option<String>, message: ClientMessage) {
        let internal = self.internal_id();
        let command = shard_protocol::envelope::MessageSet::type_name(&message);
        self.inflight
            .insert(internal.clone(), Inflight { outbox: Some(outbox), client_id: id, command });
        self.last_active = Instant::now();
        self.send_to_child(&Envelope::new(message).with_id(internal));
    }

    // -- projection -------------------------------------------------------

    /// The daemon's own `sync`, projected from the child (§6.4, §9.1).
    fn daemon_sync(&mut self) -> Sync {
        let (messages, compaction_index) = match &mut self.log {
            Some(log) => {
                if let Err(problem) = log.refresh() {
                    tracing::warn!(agent = %self.manifest.agent_id, %problem, "cannot read the session log");
                }
                (
                    shard_agent::conversation::live_messages_of(log.entries()),
                    shard_agent::conversation::compaction_index_of(log.entries()),
                )
            }
            None => (Vec::new(), None),
        };
        let mut pending_requests: Vec<PendingRequest> = self
            .pending
            .iter()
            .filter(|pending| pending.source.is_none())
            .map(|pending| PendingRequest { agent_id: None, request: pending.request.clone() })
            .collect();
        pending_requests.extend(self.context.delegation.delegated_pending(self.id()));
        Sync {
            status: self.status,
            mode: self.mode.clone().unwrap_or_else(|| shard_agent::modes::BUILD.to_owned()),
            capabilities: self.capabilities.clone(),
            runtime_epoch: Some(self.generations.saturating_sub(1)),
            live_window: LiveWindow { messages, compaction_index },
            pending_requests,
        }
    }

    fn current_info(&self) -> AgentInfo {
        let mut info = initial_info(&self.manifest);
        info.status = self.status;
        info.runtime_state = self.runtime_state;
        info.mode = self.mode.clone().or(info.mode);
        info.model = self.model.clone().or(info.model);
        info.provider = info.model.as_deref().map(|model| {
            if model.starts_with("demo") { "builtin" } else { "configured" }.to_owned()
        });
        info.usage = (self.usage.input + self.usage.output > 0).then(|| self.usage.clone());
        info
    }

    fn publish_info(&self) {
        let info = self.current_info();
        *self.info.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = info;
    }

    fn set_runtime_state(&mut self, state: RuntimeState) {
        if self.runtime_state == state {
            return;
        }
        self.runtime_state = state;
        self.publish_info();
        let event = AgentStatusChanged {
            agent_id: self.id().to_owned(),
            status: self.status,
            runtime_state: state,
            detail: None,
        };
        self.context
            .hub
            .broadcast(&encode(&Envelope::new(ServerMessage::AgentStatusChanged(event))));
    }

    fn set_activity(&mut self, phase: ActivityPhase, tool: Option<String>) {
        if self.activity.0 == phase && self.activity.1 == tool && self.activity.2 == self.status {
            return;
        }
        self.activity = (phase, tool, self.status);
        self.broadcast_activity();
    }

    /// The phase implied by the status (used on status changes).
    fn emit_activity(&mut self) {
        let phase = match self.status {
            AgentStatus::Idle => ActivityPhase::Idle,
            AgentStatus::WaitingForPermission | AgentStatus::WaitingForUi => ActivityPhase::Waiting,
            AgentStatus::Compacting => ActivityPhase::Compacting,
            AgentStatus::Error => ActivityPhase::Error,
            AgentStatus::Streaming | AgentStatus::Unknown => {
                if matches!(self.activity.0, ActivityPhase::Tool | ActivityPhase::Thinking) {
                    self.activity.0
                } else {
                    ActivityPhase::Streaming
                }
            }
        };
        let tool = if phase == ActivityPhase::Tool { self.activity.1.clone() } else { None };
        self.set_activity(phase, tool);
    }

    /// `agent_activity`: coarse and sanitized — a phase, the status and at
    /// most a tool's name; never text, arguments, results or paths.
    fn broadcast_activity(&self) {
        let event = AgentActivity {
            agent_id: self.id().to_owned(),
            timestamp: now_ms(),
            phase: self.activity.0,
            status: self.status,
            tool_name: self.activity.1.clone(),
        };
        self.context.hub.broadcast(&encode(&Envelope::new(ServerMessage::AgentActivity(event))));
    }

    fn fan_out(&self, bytes: Bytes) {
        for (outbox, _) in self.attached.values() {
            outbox.push(bytes.clone());
        }
    }
}

/// Sends a response; `routed` adds the agent's id as the routing tag.
fn respond(
    outbox: &Outbox,
    id: Option<String>,
    agent_id: Option<&str>,
    response: Response,
    routed: bool,
) {
    let agent_id = if routed { agent_id.map(str::to_owned) } else { None };
    outbox.push(encode(&Envelope { id, agent_id, message: ServerMessage::Response(response) }));
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
fn stderr_log(home: &std::path::Path, agent_id: &str) -> Stdio {
    use std::os::unix::fs::OpenOptionsExt;
    const MAX_LOG: u64 = 1024 * 1024;
    let path = crate::manifest::agent_dir(home, agent_id).join("agent.log");
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

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
}
