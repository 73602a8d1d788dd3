//! One node's link: its command runs, and its stdio is a connection to the
//! node's daemon ([`crate::upstream`]) on which the hub is one local
//! client. The link greets, lists the node's agents for the registry, then
//! routes each agent's events to the hub's generation of that agent that
//! listens ([`Link::route`]). When the command ends, the link is offline,
//! with why (its exit and the end of what it wrote on stderr), and runs it
//! again after a backoff: half a second, doubling to thirty, back to half
//! a second after a link that was online five seconds.
//!
//! Every node event the hub reads is about one of the node's agents, under
//! an id the node chose: one that is not a plain id is dropped, so that no
//! id a node sends can name a path or another node's agent here.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use shard_platform::nodes::NodeConfig;
use shard_protocol::agent::Empty;
use shard_protocol::message::Response;
use shard_protocol::node::{NodeChanged, NodeInfo, NodeState};
use shard_protocol::orchestrator::{AgentSpawned, AgentsResult, RuntimeListResult};
use shard_protocol::sandbox::SandboxInfo;
use shard_protocol::types::AgentInfo;
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::News;
use crate::agents::{Broadcast, Wire};
use crate::upstream::{Heard, Upstream};

/// Why a node taken out of config.toml is offline.
pub const REMOVED: &str = "taken out of config.toml";
/// Why a node's connection ended when its command changed.
const CHANGED: &str = "changed in config.toml";
/// The first wait after a link ends, and the longest.
const BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A link that was online this long starts its backoff over: a dropped
/// connection is tried again at once, a node that keeps failing soon
/// after it greets is tried ever more slowly.
const STABLE: Duration = Duration::from_secs(5);
/// How long the node's daemon may take to greet.
const HELLO_DEADLINE: Duration = Duration::from_secs(30);
/// Lines read from the node and not yet routed.
const READ: usize = 256;
/// Each agent's runs of events routed and not yet taken by its generation.
pub const ROUTE: usize = 8;
/// The most of an agent's events put in one run, and the most bytes of
/// lines (a run is closed past it; one line may be as long as the
/// decoder lets it be).
const RUN_ITEMS: usize = READ;
const RUN_BYTES: usize = 256 * 1024;
/// How much of the end of the command's stderr is kept, for the reason
/// a link ended.
const STDERR_TAIL: usize = 2048;
/// The longest agent id a node may use.
const MAX_REMOTE_ID: usize = 64;

/// One of an agent's events, as the node sent it.
pub enum Item {
    /// An event stamped with its number in the node's journal; `line` is
    /// the event without the stamp, as the agent would have written it.
    Stamped { seq: u64, line: String },
    /// Anything else about the agent (its `sync`), decoded.
    Message(Box<ServerMessage>),
    /// The answer to a command posted for the agent ([`posted_id`]), in
    /// its place among the agent's events.
    Answer { id: String, response: Response },
}

/// Events of one agent that came one after the other, in order: what
/// the link routes at once, so that a burst of deltas costs one hand-over
/// per run rather than one per delta.
pub type Run = Vec<Item>;

impl Item {
    /// Whether it is a question (a permission or a ui request).
    fn asks(&self) -> bool {
        match self {
            Self::Stamped { line, .. } => {
                line.starts_with(r#"{"type":"permission_request""#)
                    || line.starts_with(r#"{"type":"ui_request""#)
            }
            Self::Message(message) => matches!(
                **message,
                ServerMessage::PermissionRequest(_) | ServerMessage::UiRequest(_)
            ),
            Self::Answer { .. } => false,
        }
    }

    /// What the item weighs in a run.
    fn weight(&self) -> usize {
        match self {
            Item::Stamped { line, .. } => line.len(),
            Item::Message(_) | Item::Answer { .. } => 256,
        }
    }
}

/// What the link's reader hears.
enum Event {
    Hello(shard_protocol::agent::Hello),
    /// The id is shared by the events of one agent that follow each other.
    Agent {
        agent_id: Arc<str>,
        item: Item,
    },
    Registry(Box<ServerMessage>),
    Closed,
}

pub struct Link {
    id: String,
    /// The command as config.toml says it now. The task running the link
    /// watches it: when it changes, the connection (or the wait for the
    /// next) ends at once, and the next is made with the new command.
    command: watch::Sender<Vec<String>>,
    /// Taken out of config.toml: not run, not listed, until put back.
    retired: AtomicBool,
    /// Connections made so far, for the next one's number.
    connections: AtomicU64,
    /// Held by the task that runs the link: one put back in config.toml
    /// just after it was taken out waits for the last to finish.
    alone: tokio::sync::Mutex<()>,
    info: Mutex<NodeInfo>,
    /// The connection while the node is online.
    connection: watch::Sender<Option<Arc<Upstream>>>,
    /// Where each of the node's agents' events go: the hub's generation of
    /// it that listens now, by the agent's id on the node.
    routes: Mutex<HashMap<String, mpsc::Sender<Run>>>,
    broadcast: Arc<dyn Broadcast>,
}

impl Link {
    pub fn new(config: NodeConfig, broadcast: Arc<dyn Broadcast>) -> Self {
        let info = NodeInfo {
            id: config.id.clone(),
            state: NodeState::Connecting,
            since: crate::clock::now_ms(),
            error: None,
            retry_at: None,
        };
        Self {
            id: config.id,
            command: watch::Sender::new(config.command),
            retired: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            alone: tokio::sync::Mutex::new(()),
            info: Mutex::new(info),
            connection: watch::Sender::new(None),
            routes: Mutex::default(),
            broadcast,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// config.toml gives the node `command` now: a connection made with
    /// another ends, and the next is made at once with this one.
    pub fn reconfigure(&self, command: Vec<String>) {
        self.command.send_if_modified(|now| {
            let changed = *now != command;
            *now = command;
            changed
        });
    }

    /// config.toml no longer names the node: its run is being stopped, and
    /// every client is told so at once.
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Release);
        self.set(NodeState::Offline, Some(REMOVED.to_owned()), None);
    }

    /// config.toml names the node again, with `command`: its run is about
    /// to start (and takes this command as it starts).
    pub fn put_back(&self, command: Vec<String>) {
        self.command.send_replace(command);
        self.retired.store(false, Ordering::Release);
    }

    pub fn retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    pub fn info(&self) -> NodeInfo {
        self.info.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Whether the link is up now.
    pub fn online(&self) -> bool {
        self.connection.borrow().is_some()
    }

    /// The connection as it is now (`None` while offline), and each change.
    pub fn watch(&self) -> watch::Receiver<Option<Arc<Upstream>>> {
        self.connection.subscribe()
    }

    /// Why the node cannot be reached now, said so that a person knows
    /// what to do.
    pub fn offline_reason(&self) -> String {
        let info = self.info();
        if self.retired() {
            return format!(
                "node `{}` was {REMOVED}; its agents answer again if it is put back",
                self.id
            );
        }
        let state = match info.state {
            NodeState::Connecting => "connecting",
            _ => "offline",
        };
        let why = info.error.map(|error| format!(" ({error})")).unwrap_or_default();
        format!("node `{}` is {state}{why}; its agents answer again once its link is back", self.id)
    }

    /// From now on, `agent_id`'s events go to `events`.
    pub fn route(&self, agent_id: &str, events: mpsc::Sender<Run>) {
        self.routes().insert(agent_id.to_owned(), events);
    }

    /// `agent_id`'s events go nowhere any more (if they still went to
    /// `events`).
    pub fn unroute(&self, agent_id: &str, events: &mpsc::Sender<Run>) {
        let mut routes = self.routes();
        if routes.get(agent_id).is_some_and(|routed| routed.same_channel(events)) {
            routes.remove(agent_id);
        }
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<Run>>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, state: NodeState, error: Option<String>, retry_at: Option<u64>) {
        let info = {
            let mut info = self.info.lock().unwrap_or_else(PoisonError::into_inner);
            *info = NodeInfo {
                id: self.id.clone(),
                state,
                since: crate::clock::now_ms(),
                error,
                retry_at,
            };
            info.clone()
        };
        let changed = ServerMessage::NodeChanged(NodeChanged { node: info });
        self.broadcast.broadcast(&Wire::from(Envelope::new(changed).to_json()));
    }
}

/// Keeps `link` up until `stop`: runs its command, and again after each
/// end, with a backoff; at once with a command config.toml changed.
pub async fn run(link: Arc<Link>, news: mpsc::Sender<News>, stop: CancellationToken) {
    let _alone = tokio::select! {
        alone = link.alone.lock() => alone,
        () = stop.cancelled() => return,
    };
    // Subscribed now: what changed before this task started is its
    // command already, not a change.
    let mut command = link.command.subscribe();
    let mut backoff = BACKOFF;
    while !stop.is_cancelled() {
        link.set(NodeState::Connecting, None, None);
        let generation = link.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let (why, changed) = connect(&link, &mut command, generation, &news, &stop).await;
        if stop.is_cancelled() {
            break;
        }
        let held = link.info();
        let online_for = (held.state == NodeState::Online)
            .then(|| Duration::from_millis(crate::clock::now_ms().saturating_sub(held.since)));
        backoff = if changed { BACKOFF } else { wait_after(backoff, online_for) };
        tracing::warn!(node = %link.id(), %why, "the node's link ended");
        let wait = if changed { Duration::ZERO } else { backoff };
        let retry_at = crate::clock::now_ms() + wait.as_millis() as u64;
        link.set(NodeState::Offline, Some(why), Some(retry_at));
        tokio::select! {
            () = tokio::time::sleep(wait) => backoff = (backoff * 2).min(MAX_BACKOFF),
            Ok(()) = command.changed() => backoff = BACKOFF,
            () = stop.cancelled() => break,
        }
    }
    // Taken out just as a connection began: it is not connecting.
    let info = link.info();
    if link.retired() && (info.state, info.error.as_deref()) != (NodeState::Offline, Some(REMOVED))
    {
        link.set(NodeState::Offline, Some(REMOVED.to_owned()), None);
    }
}

/// The wait before the next try, `backoff` as it grew so far: the first
/// again once the link had held online for [`STABLE`].
fn wait_after(backoff: Duration, online_for: Option<Duration>) -> Duration {
    match online_for {
        Some(held) if held >= STABLE => BACKOFF,
        _ => backoff,
    }
}

/// One run of the link's command, until it ends or `command` changes:
/// why it ended, and whether for a change. Nothing more is sent on the
/// connection once it ended, though the command may take a moment to exit.
async fn connect(
    link: &Link,
    command: &mut watch::Receiver<Vec<String>>,
    generation: u64,
    news: &mpsc::Sender<News>,
    stop: &CancellationToken,
) -> (String, bool) {
    let argv = command.borrow_and_update().clone();
    let Some((program, args)) = argv.split_first() else {
        return ("the node's command names no program".to_owned(), false);
    };
    let mut process = tokio::process::Command::new(program);
    process
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    // Held until the command has been waited for (in `end`).
    let (mut child, _kept) = match crate::children::spawn(&mut process) {
        Ok(child) => child,
        Err(error) => return (format!("cannot run `{program}`: {error}"), false),
    };
    let stderr = Arc::new(Mutex::new(Vec::new()));
    if let Some(pipe) = child.stderr.take() {
        tokio::spawn(keep_tail(pipe, stderr.clone()));
    }
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return ("the command's stdio could not be piped".to_owned(), false);
    };
    let (events, mut heard) = mpsc::channel(READ);
    let mut hearing = Hearing::default();
    let hear = move |line| hearing.hear(line);
    let upstream = Upstream::start((stdout, stdin), generation, "hub", hear, events, Event::Closed);
    let (why, changed) = tokio::select! {
        why = serve(link, &upstream, &mut heard, news) => (why, false),
        () = stop.cancelled() => ("the daemon is stopping".to_owned(), false),
        Ok(()) = command.changed() => (format!("its command {CHANGED}"), true),
    };
    // Offline from here: no command is taken for a connection that ended.
    link.connection.send_replace(None);
    drop(upstream);
    (end(child, &stderr, why).await, changed)
}

/// Greets, lists, then routes what the node says until the connection
/// ends: why it ended.
async fn serve(
    link: &Link,
    upstream: &Arc<Upstream>,
    heard: &mut mpsc::Receiver<Event>,
    news: &mpsc::Sender<News>,
) -> String {
    match tokio::time::timeout(HELLO_DEADLINE, heard.recv()).await {
        Ok(Some(Event::Hello(hello))) => {
            let major = |version: &str| version.split('.').next().map(str::to_owned);
            if major(&hello.protocol_version) != major(shard_protocol::PROTOCOL_VERSION) {
                return format!(
                    "the node speaks protocol {}, this daemon {}",
                    hello.protocol_version,
                    shard_protocol::PROTOCOL_VERSION
                );
            }
        }
        Ok(Some(Event::Closed) | None) => return "the link ended before the node greeted".into(),
        Ok(Some(_)) => return "the node spoke before it greeted".to_owned(),
        Err(_) => return format!("the node did not greet within {HELLO_DEADLINE:?}"),
    }
    let listed = match upstream.call(None, ClientMessage::AgentList(Empty {})).await {
        Ok(data) => serde_json::from_value::<AgentsResult>(data.unwrap_or_default()),
        Err(error) => return format!("the node did not list its agents: {}", error.message),
    };
    let agents = match listed {
        Ok(listed) => listed.agents,
        Err(error) => return format!("the node's list of agents is unreadable: {error}"),
    };
    let node = link.id().to_owned();
    if news.send(News::Listed { node: node.clone(), agents }).await.is_err() {
        return "the daemon is stopping".to_owned();
    }
    // Up before anyone is told so: a command sent on the news is taken.
    link.connection.send_replace(Some(upstream.clone()));
    link.set(NodeState::Online, None, None);
    let mut read = Vec::with_capacity(READ);
    let mut run = Running::default();
    while heard.recv_many(&mut read, READ).await > 0 {
        for event in read.drain(..) {
            let event = match event {
                Event::Agent { agent_id, item } => {
                    if let Some(full) = run.add(agent_id, item) {
                        route(link, full, news).await;
                    }
                    continue;
                }
                other => other,
            };
            // What is not an agent's event waits for the run before it.
            if let Some(run) = run.take() {
                route(link, run, news).await;
            }
            if let Some(why) = said(event, &node, news).await {
                return why;
            }
        }
        if let Some(run) = run.take() {
            route(link, run, news).await;
        }
    }
    "the link's connection ended".to_owned()
}

/// Hands `run` to the generation that listens to its agent, which takes
/// it in its turn; one that went is told nothing more. A question of an
/// agent the hub does not listen to (a delegated child's, which its node
/// puts to its parent's people, the hub's) has the hub listen to it: its
/// generation reads the question again from the node's `sync`.
async fn route(link: &Link, (agent_id, run): (Arc<str>, Run), news: &mpsc::Sender<News>) {
    let route = link.routes().get(&*agent_id).cloned();
    match route {
        Some(route) => {
            let _ = route.send(run).await;
        }
        None if run.iter().any(Item::asks) => {
            let asked = News::Asked { node: link.id().to_owned(), agent_id: agent_id.to_string() };
            let _ = news.send(asked).await;
        }
        None => {}
    }
}

/// The run being gathered: one agent's events read one after the other.
#[derive(Default)]
struct Running {
    agent_id: Option<Arc<str>>,
    items: Run,
    bytes: usize,
}

impl Running {
    /// Adds `item`; the run that was gathered, if `item` starts another
    /// (another agent's, or this one's past the bounds).
    fn add(&mut self, agent_id: Arc<str>, item: Item) -> Option<(Arc<str>, Run)> {
        let same = self.agent_id.as_deref() == Some(&*agent_id);
        let full = self.items.len() >= RUN_ITEMS || self.bytes >= RUN_BYTES;
        let done = if same && !full { None } else { self.take() };
        self.bytes += item.weight();
        self.items.push(item);
        self.agent_id = Some(agent_id);
        done
    }

    fn take(&mut self) -> Option<(Arc<str>, Run)> {
        let agent_id = self.agent_id.take()?;
        self.bytes = 0;
        Some((agent_id, std::mem::take(&mut self.items)))
    }
}

/// Acts on what the node said that is not an agent's event: why the link
/// ends, if it does.
async fn said(event: Event, node: &str, news: &mpsc::Sender<News>) -> Option<String> {
    let node = node.to_owned();
    match event {
        Event::Registry(message) => match *message {
            ServerMessage::AgentSpawned(spawned) => {
                let AgentSpawned { info, .. } = spawned;
                let info = Box::new(info);
                let _ = news.send(News::Spawned { node, info }).await;
            }
            // What the hub's row shows of an agent it does not listen to.
            ServerMessage::AgentStatusChanged(changed) if plain_id(&changed.agent_id) => {
                let _ = news.send(News::Status { node, changed }).await;
            }
            ServerMessage::AgentSandbox(told) if plain_id(&told.agent_id) => {
                let _ = news.send(News::Sandbox { node, told }).await;
            }
            told @ (ServerMessage::WorkspaceCreated(_)
            | ServerMessage::WorkspaceAttached(_)
            | ServerMessage::WorkspaceRetired(_)
            | ServerMessage::WorkspaceConflict(_)
            | ServerMessage::WorkspaceUpdated(_)) => {
                let _ = news.send(News::Workspace { node, told: Box::new(told) }).await;
            }
            _ => {}
        },
        Event::Hello(_) | Event::Agent { .. } => {}
        Event::Closed => return Some("the link's connection ended".to_owned()),
    }
    None
}

/// The command's end: its exit and the end of its stderr, beside `why`.
async fn end(mut child: tokio::process::Child, stderr: &Mutex<Vec<u8>>, why: String) -> String {
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => Some(status),
        _ => {
            let _ = child.start_kill();
            child.wait().await.ok()
        }
    };
    let tail = {
        let bytes = stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).trim().to_owned()
    };
    let mut said = why;
    if let Some(status) = status.filter(|status| !status.success()) {
        said.push_str(&format!(" ({status})"));
    }
    if !tail.is_empty() {
        said.push_str(": ");
        said.push_str(&tail);
    }
    shard_protocol::diagnostic::into_diagnostic(said)
}

/// Keeps the last [`STDERR_TAIL`] bytes the command writes on stderr.
async fn keep_tail(mut pipe: tokio::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buffer = [0; 4096];
    while let Ok(read) = pipe.read(&mut buffer).await {
        if read == 0 {
            return;
        }
        let mut kept = tail.lock().unwrap_or_else(PoisonError::into_inner);
        kept.extend_from_slice(&buffer[..read]);
        let over = kept.len().saturating_sub(STDERR_TAIL);
        kept.drain(..over);
    }
}

/// The link's reader's ear: it keeps the id of the agent it heard last,
/// which the next events nearly always share.
#[derive(Default)]
struct Hearing {
    last: Option<Arc<str>>,
}

impl Hearing {
    /// What one line from the node is. An agent's event stamped by the
    /// node's journal is taken apart without decoding it, in place
    /// (nearly all of the traffic is deltas); anything else is decoded.
    fn hear(&mut self, mut line: String) -> Heard<Event> {
        let Some((agent_id, seq, start)) = stamp(&line) else { return hear(line) };
        if !plain_id(agent_id) {
            tracing::warn!("a node's event for an agent id that is not plain; dropped");
            return Heard::Nothing;
        }
        let agent_id = match &self.last {
            Some(last) if **last == *agent_id => last.clone(),
            _ => self.last.insert(Arc::from(agent_id)).clone(),
        };
        line.replace_range(..start, "{");
        Heard::Event(Event::Agent { agent_id, item: Item::Stamped { seq, line } })
    }
}

/// What a line from the node that is not an agent's stamped event is.
fn hear(line: String) -> Heard<Event> {
    let envelope = match Envelope::<ServerMessage>::from_json(&line) {
        Ok(envelope) => envelope,
        Err(error) => {
            tracing::debug!(%error, "a line from a node this build cannot read");
            return Heard::Nothing;
        }
    };
    match (envelope.id, envelope.agent_id, envelope.message) {
        (Some(id), _, ServerMessage::Response(response)) => match posted_for(&id) {
            Some(agent_id) => {
                let agent_id = Arc::from(agent_id);
                Heard::Event(Event::Agent { agent_id, item: Item::Answer { id, response } })
            }
            None => Heard::Answer(id, response),
        },
        (_, _, ServerMessage::Hello(hello)) => Heard::Event(Event::Hello(hello)),
        (_, Some(agent_id), message) if plain_id(&agent_id) => {
            let agent_id = Arc::from(agent_id);
            Heard::Event(Event::Agent { agent_id, item: Item::Message(Box::new(message)) })
        }
        (_, Some(_), _) => Heard::Nothing,
        (_, None, message) => Heard::Event(Event::Registry(Box::new(message))),
    }
}

/// `{"agent_id":"ID","seq":N,REST` (the journal's stamp, PROTOCOL-NOTES
/// "Event sequence numbers"): the id, the number, and where `REST` starts.
fn stamp(line: &str) -> Option<(&str, u64, usize)> {
    let rest = line.strip_prefix("{\"agent_id\":\"")?;
    let (agent_id, rest) = rest.split_once('"')?;
    let rest = rest.strip_prefix(",\"seq\":")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let seq = rest[..digits].parse().ok()?;
    let rest = rest[digits..].strip_prefix(',')?;
    Some((agent_id, seq, line.len() - rest.len()))
}

/// The most characters the hub keeps of each name, model, mode or runtime
/// a node gives one of its agents (a name made on the hub is at most 200).
pub(super) const MAX_TEXT: usize = 200;
/// The most characters kept of a node's agent's working directory.
pub(super) const MAX_CWD: usize = 4096;

/// `info` as the hub keeps it: each text the node said about the agent cut
/// to a bound, so that no node can have every hub client carry a name a
/// megabyte long.
pub fn bounded(mut info: AgentInfo) -> AgentInfo {
    let identity = &mut info.identity;
    let texts = [
        &mut identity.name,
        &mut identity.alias,
        &mut identity.definition_name,
        &mut identity.display_name,
        &mut info.model,
        &mut info.mode,
        &mut info.runtime,
    ];
    for text in texts.into_iter().flatten() {
        cut(text, MAX_TEXT);
    }
    cut(&mut info.cwd, MAX_CWD);
    info.sandbox = info.sandbox.map(bounded_sandbox);
    info
}

/// The most hosts of a node's agent's sandbox the hub keeps.
const MAX_HOSTS: usize = 64;

/// A node's agent's sandbox as the hub keeps it: at most [`MAX_HOSTS`]
/// hosts in each list, each cut as a name is.
pub fn bounded_sandbox(mut sandbox: SandboxInfo) -> SandboxInfo {
    for hosts in [&mut sandbox.allowed_hosts, &mut sandbox.granted_hosts] {
        hosts.truncate(MAX_HOSTS);
        for host in hosts.iter_mut() {
            cut(host, MAX_TEXT);
        }
    }
    sandbox
}

/// The most runtimes of a node's `runtime.list` the hub passes on.
const MAX_RUNTIMES: usize = 64;

/// A node's `runtime.list` as the hub passes it on: at most
/// [`MAX_RUNTIMES`], each text cut as an agent's are.
pub fn bounded_runtimes(mut listed: RuntimeListResult) -> RuntimeListResult {
    listed.runtimes.truncate(MAX_RUNTIMES);
    for runtime in &mut listed.runtimes {
        cut(&mut runtime.id, MAX_TEXT);
        cut(&mut runtime.protocol, MAX_TEXT);
    }
    if let Some(model) = &mut listed.default_model {
        cut(model, MAX_TEXT);
    }
    if let Some(cwd) = &mut listed.suggested_cwd {
        cut(cwd, MAX_CWD);
    }
    listed
}

/// `text`, cut to `max` characters.
pub(super) fn cut(text: &mut String, max: usize) {
    if let Some((at, _)) = text.char_indices().nth(max) {
        text.truncate(at);
    }
}

/// The id a command posted for `agent_id` goes under (its answer comes
/// back among the agent's events, in order): `post-N-AGENT`.
pub fn posted_id(number: u64, agent_id: &str) -> String {
    format!("post-{number}-{agent_id}")
}

/// The agent a posted command's id is for.
fn posted_for(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("post-")?;
    let (number, agent_id) = rest.split_once('-')?;
    (number.bytes().all(|byte| byte.is_ascii_digit()) && plain_id(agent_id)).then_some(agent_id)
}

/// An agent id a node may use: letters, digits, `-` and `_`, at most
/// [`MAX_REMOTE_ID`] of them.
pub fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REMOTE_ID
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_event_is_taken_apart_without_decoding_it() {
        let mut hearing = Hearing::default();
        let mut ids = Vec::new();
        for (n, text) in ["hi", "there"].into_iter().enumerate() {
            let line = format!(
                r#"{{"agent_id":"agent-1","seq":{},"type":"message_delta","text_delta":"{text}"}}"#,
                n + 42
            );
            let Heard::Event(Event::Agent { agent_id, item: Item::Stamped { seq, line } }) =
                hearing.hear(line)
            else {
                panic!("a stamped event");
            };
            assert_eq!((&*agent_id, seq), ("agent-1", n as u64 + 42));
            let unstamped = format!(r#"{{"type":"message_delta","text_delta":"{text}"}}"#);
            assert_eq!(line, unstamped);
            ids.push(agent_id);
        }
        assert!(Arc::ptr_eq(&ids[0], &ids[1]), "one id for the agent's events in a row");
        for other in [
            r#"{"type":"sync","agent_id":"agent-1"}"#,
            r#"{"agent_id":"agent-1","seq":,"type":"x"}"#,
            r#"{"agent_id":"agent-1","seq":4}"#,
        ] {
            assert!(stamp(other).is_none(), "{other}");
        }
    }

    #[test]
    fn an_agents_events_in_a_row_are_one_run_within_its_bounds() {
        let stamped = |text: &str| Item::Stamped { seq: 1, line: text.to_owned() };
        let (one, two): (Arc<str>, Arc<str>) = ("agent-1".into(), "agent-2".into());
        let mut running = Running::default();
        assert!(running.add(one.clone(), stamped("a")).is_none());
        assert!(running.add(one.clone(), stamped("b")).is_none());
        let (agent_id, run) = running.add(two.clone(), stamped("c")).expect("another agent's");
        assert_eq!((&*agent_id, run.len()), ("agent-1", 2));
        let big = "x".repeat(RUN_BYTES);
        assert!(running.add(two.clone(), stamped(&big)).is_none());
        let (_, run) = running.add(two.clone(), stamped("d")).expect("past the bytes");
        assert_eq!(run.len(), 2);
        let (_, run) = running.take().expect("the last run");
        assert_eq!(run.len(), 1);
        assert!(running.take().is_none(), "taken once");
        for n in 0..RUN_ITEMS {
            assert!(running.add(one.clone(), stamped("e")).is_none(), "{n}");
        }
        let (_, run) = running.add(one.clone(), stamped("f")).expect("past the count");
        assert_eq!(run.len(), RUN_ITEMS);
    }

    #[test]
    fn the_backoff_starts_over_only_after_a_link_that_held() {
        let grown = Duration::from_secs(16);
        assert_eq!(wait_after(grown, Some(STABLE)), BACKOFF, "a dropped connection");
        assert_eq!(
            wait_after(grown, Some(STABLE / 2)),
            grown,
            "a node failing soon after it greets"
        );
        assert_eq!(wait_after(grown, None), grown, "a node that never came up");
    }

    #[test]
    fn what_a_node_says_of_an_agent_is_kept_within_bounds() {
        let long = "é".repeat(100_000);
        let info: AgentInfo = serde_json::from_value(serde_json::json!({
            "agent_id": "agent-1", "cwd": long, "status": "idle", "runtime_state": "stopped",
            "created_at": 1, "name": long, "alias": long, "model": long, "mode": "build",
        }))
        .expect("agent info");
        let kept = bounded(info);
        let chars = |text: &Option<String>| text.as_deref().map(|text| text.chars().count());
        assert_eq!(chars(&kept.identity.name), Some(MAX_TEXT));
        assert_eq!(chars(&kept.identity.alias), Some(MAX_TEXT));
        assert_eq!(chars(&kept.model), Some(MAX_TEXT));
        assert_eq!(kept.cwd.chars().count(), MAX_CWD);
        assert_eq!(kept.mode.as_deref(), Some("build"), "a short one is kept whole");
    }

    #[test]
    fn what_a_node_says_of_its_runtimes_is_kept_within_bounds() {
        let long = "é".repeat(10_000);
        let runtimes: Vec<serde_json::Value> = (0..100)
            .map(|n| serde_json::json!({"id": format!("{long}{n}"), "protocol": long}))
            .collect();
        let listed: RuntimeListResult = serde_json::from_value(serde_json::json!({
            "runtimes": runtimes, "default_model": long, "suggested_cwd": long,
        }))
        .expect("runtime list");
        let kept = bounded_runtimes(listed);
        assert_eq!(kept.runtimes.len(), MAX_RUNTIMES);
        let chars = |text: &str| text.chars().count();
        assert!(kept.runtimes.iter().all(|runtime| chars(&runtime.id) == MAX_TEXT));
        assert!(kept.runtimes.iter().all(|runtime| chars(&runtime.protocol) == MAX_TEXT));
        assert_eq!(kept.default_model.as_deref().map(chars), Some(MAX_TEXT));
        assert_eq!(kept.suggested_cwd.as_deref().map(chars), Some(MAX_CWD));
    }

    #[test]
    fn only_plain_ids_are_taken_from_a_node() {
        assert!(plain_id("agent-0a1b2c3d4e5f") && plain_id("agent_x"));
        for bad in ["", "../x", "a@b", "a/b", "a\\\"b", &"x".repeat(65)] {
            assert!(!plain_id(bad), "{bad}");
        }
        let line = r#"{"agent_id":"../../etc","seq":1,"type":"status","status":"idle"}"#;
        assert!(matches!(hear(line.to_owned()), Heard::Nothing));
    }

    #[test]
    fn a_posted_commands_answer_is_the_agents_and_a_calls_is_the_callers() {
        let id = posted_id(7, "agent-1");
        let line =
            format!(r#"{{"type":"response","id":"{id}","command":"prompt","success":true}}"#);
        let Heard::Event(Event::Agent { agent_id, item: Item::Answer { id: answered, .. } }) =
            hear(line)
        else {
            panic!("routed to the agent");
        };
        assert_eq!((&*agent_id, answered), ("agent-1", id));
        let call = r#"{"type":"response","id":"hub-3","command":"agent.list","success":true}"#;
        assert!(matches!(hear(call.to_owned()), Heard::Answer(..)));
        let forged = r#"{"type":"response","id":"post-1-../x","command":"prompt","success":true}"#;
        assert!(matches!(hear(forged.to_owned()), Heard::Answer(..)), "not routed anywhere");
    }
}
