//! A node's agent as a runtime of the hub's host (docs/NODES.md): a
//! generation here is the hub attached to the agent on the node, over the
//! node's link, as one interactive client. The host gets the agent's
//! events as it gets any runtime's lines, and sends it commands the same
//! way; its journal, questions, inbox and pushes work unchanged.
//!
//! What the seam asks of a runtime, kept here:
//!
//! 1. **Lines.** Each of the agent's events the node sends, without the
//!    node's stamp (the hub's journal numbers them again); a `hello`, then
//!    the node's `sync` (or, resuming, one made from the attach's answer),
//!    then its open questions as questions.
//! 2. **The record.** The hub's copy of the node's session ([`mirror`]),
//!    written before the event reaches the host.
//! 3. **Its exit, once and last**, when the host stops it (the hub stops
//!    listening: the agent goes on on the node, under the node's own
//!    supervision), or when the node no longer has the agent.
//!
//! A dropped link does not end a generation. The hub resumes from the
//! number of the last event it took ([`Cursors`]), so every event reaches
//! the host exactly once; meanwhile every command, and every answer to a
//! question, is refused as `NODE_OFFLINE` (the question stays open, and is
//! shown again). A node that cannot resume (its journal no longer holds
//! what the hub missed) sends a `sync` instead: the copy is replaced and
//! the generation ends, so that the host starts one on the new copy and
//! every hub client gets it.

pub mod mirror;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use shard_protocol::agent::{Hello, PendingKind, Sync};
use shard_protocol::error::{ErrorCode, WireError};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{AgentAttach, AgentTarget, AttachResult, AttachRole};
use shard_protocol::{ClientMessage, Envelope, ServerMessage};
use tokio::sync::{mpsc, watch};

use self::mirror::Mirror;
use super::{ChildEvent, NotTaken, Runtime, SpawnRequest};
use crate::agents::manifest::Remote;
use crate::agents::nodes::link::{Item, Link, ROUTE, Run, posted_id};
use crate::agents::nodes::{Nodes, Offline};
use crate::upstream::Upstream;

/// Lines from the host waiting to go to the node.
const INPUT: usize = 256;
/// The most of the agent's events handed to the host as one batch (past
/// it, the run being taken is finished first).
const BATCH: usize = 256;

/// The number of the last event of each node's agent the hub took, by the
/// agent's id here: where the next generation resumes. Only within one run
/// of the daemon: after a restart, the first generation starts from the
/// node's `sync`, and the copy is made again from it.
pub type Cursors = Arc<Mutex<HashMap<String, u64>>>;

pub struct RemoteSpawner {
    pub home: PathBuf,
    pub nodes: Arc<Nodes>,
    pub cursors: Cursors,
}

impl RemoteSpawner {
    /// Attaches to `remote` on its node, as generation `request.epoch` of
    /// the hub's agent.
    pub fn spawn(
        &self,
        remote: &Remote,
        request: &SpawnRequest<'_>,
        events: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let Some(link) = self.nodes.link(&remote.node) else {
            let why = format!("there is no node `{}` in config.toml any more", remote.node);
            return Err(Offline::io(why));
        };
        if link.watch().borrow().is_none() {
            return Err(Offline::io(link.offline_reason()));
        }
        let mirror = Mirror::open(&self.home, request.record.session_id())?;
        let (input, inputs) = mpsc::channel(INPUT);
        let (stop, stopped) = watch::channel(false);
        let generation = Generation {
            agent_id: request.agent_id.to_owned(),
            remote_id: remote.agent_id.clone(),
            epoch: request.epoch,
            link: link.clone(),
            events,
            mirror,
            cursors: self.cursors.clone(),
            greeted: false,
            posted: 0,
        };
        tokio::spawn(generation.run(inputs, stopped));
        Ok(Box::new(RemoteRuntime { input, stop, link: link.clone() }))
    }
}

/// The host's handle on a generation.
struct RemoteRuntime {
    input: mpsc::Sender<Bytes>,
    stop: watch::Sender<bool>,
    link: Arc<Link>,
}

impl Runtime for RemoteRuntime {
    /// Refused at once while the link is down; taken while it is up, to go
    /// to the node once the generation is attached again (if the link goes
    /// down before, its answer is `NODE_OFFLINE`, and an answer to a
    /// question is taken back).
    fn send(&mut self, line: Bytes) -> Result<(), NotTaken> {
        if !self.link.online() {
            return Err(NotTaken::Unreachable(self.link.offline_reason()));
        }
        self.input.try_send(line).map_err(|_| NotTaken::Full)
    }

    // However the host stops it, the hub only stops listening: the agent
    // is the node's, and stops there as the node decides (a person's
    // `agent.terminate` or `agent.kill` goes to the node as a command).
    fn close_input(&mut self) {
        self.stop.send_replace(true);
    }

    fn terminate(&mut self) {
        self.stop.send_replace(true);
    }

    fn kill(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Why an attachment did not hold.
enum Unattached {
    /// The link went down on the way: attach again once it is back.
    Down,
    /// The node refused, or no longer has the agent: the generation ends.
    Refused(String),
    /// The node's history had to be replaced: the generation ends so that
    /// the host starts one on the new copy.
    Replaced,
}

/// One generation's task.
struct Generation {
    agent_id: String,
    remote_id: String,
    epoch: u64,
    link: Arc<Link>,
    events: mpsc::Sender<ChildEvent>,
    mirror: Mirror,
    cursors: Cursors,
    /// The host has had its `hello` and `sync`.
    greeted: bool,
    /// The number of the next command sent to the node.
    posted: u64,
}

/// A command of the host's sent to the node, by the id it went under:
/// the host's id, and the command.
type Inflight = HashMap<String, (Option<String>, &'static str)>;

impl Generation {
    async fn run(mut self, mut inputs: mpsc::Receiver<Bytes>, mut stop: watch::Receiver<bool>) {
        let (route, mut items) = mpsc::channel(ROUTE);
        self.link.route(&self.remote_id, route.clone());
        let mut connection = self.link.watch();
        let mut inflight = Inflight::new();
        let ending = 'generation: loop {
            // What the last connection had in hand, it never answers.
            self.cut_off(&mut inflight).await;
            let upstream = connection.borrow_and_update().clone();
            let attached = match upstream {
                None => None,
                Some(upstream) => match self.attach(&upstream, &mut items).await {
                    Ok(after) => {
                        if let Err(why) = self.take(after, &mut items, &mut inflight).await {
                            break 'generation why;
                        }
                        Some(upstream)
                    }
                    Err(Unattached::Down) => None,
                    Err(Unattached::Refused(why)) => break 'generation Some(why),
                    Err(Unattached::Replaced) => break 'generation Some(replaced()),
                },
            };
            loop {
                tokio::select! {
                    changed = connection.changed() => match changed {
                        Ok(()) => continue 'generation,
                        Err(_) => break 'generation Some("the node's link is gone".to_owned()),
                    },
                    Some(run) = items.recv() => {
                        if let Err(why) = self.take(run, &mut items, &mut inflight).await {
                            break 'generation why;
                        }
                    }
                    line = inputs.recv() => match line {
                        Some(line) => self.forward(&line, attached.as_ref(), &mut inflight).await,
                        None => break 'generation None,
                    },
                    _ = stop.changed() => break 'generation None,
                }
            }
        };
        self.cut_off(&mut inflight).await;
        self.end(&route, ending).await;
    }

    /// Attaches on `upstream` from where the hub left off, or from the
    /// node's `sync`: the agent's events already read after it.
    async fn attach(
        &mut self,
        upstream: &Arc<Upstream>,
        items: &mut mpsc::Receiver<Run>,
    ) -> Result<Run, Unattached> {
        let after_seq = self.cursor();
        let attach = AgentAttach {
            agent_id: self.remote_id.clone(),
            role: Some(AttachRole::Interactive),
            after_seq,
        };
        let attached = match upstream.call(None, ClientMessage::AgentAttach(attach)).await {
            Ok(data) => serde_json::from_value::<AttachResult>(data.unwrap_or_default())
                .map_err(|error| Unattached::Refused(format!("the node's answer: {error}")))?,
            Err(_) if upstream.closed() => return Err(Unattached::Down),
            Err(error) if error.code == ErrorCode::NotFound => {
                let why = format!("node `{}` no longer has this agent", self.link.id());
                return Err(Unattached::Refused(why));
            }
            Err(error) => return Err(Unattached::Refused(error.message)),
        };
        let model = attached.info.model.clone();
        if attached.resumed == Some(true) {
            // Exactly the events after the cursor follow.
            if !self.greeted {
                let sync = Sync {
                    status: attached.status,
                    mode: attached.info.mode.unwrap_or_else(|| "build".to_owned()),
                    capabilities: None,
                    runtime_epoch: None,
                    live_window: Default::default(),
                    pending_requests: Vec::new(),
                    seq: None,
                    reset: None,
                };
                self.greet(&sync).await;
            }
            return Ok(Run::new());
        }
        // A `sync` follows; what came before it for this agent is older.
        loop {
            let run = tokio::time::timeout(crate::upstream::CALL_DEADLINE, items.recv()).await;
            let Ok(Some(run)) = run else { return Err(Unattached::Down) };
            let mut run = run.into_iter();
            while let Some(item) = run.next() {
                let Item::Message(message) = item else { continue };
                let ServerMessage::Sync(sync) = *message else { continue };
                self.replace(&sync, model.as_deref()).await?;
                if self.greeted {
                    return Err(Unattached::Replaced);
                }
                self.greet(&sync).await;
                return Ok(run.collect());
            }
        }
    }

    /// The copy becomes the node's window, and the cursor its number.
    async fn replace(&mut self, sync: &Sync, model: Option<&str>) -> Result<(), Unattached> {
        if let Err(error) = self.mirror.replace(sync, model).await {
            let why = format!("cannot write the hub's copy of the session: {error}");
            return Err(Unattached::Refused(why));
        }
        match sync.seq {
            Some(seq) => self.keep_cursor(seq),
            None => self.forget_cursor(),
        }
        Ok(())
    }

    /// The host's `hello` and `sync`, then each question open on the node.
    async fn greet(&mut self, sync: &Sync) {
        let hello = Hello {
            protocol_version: shard_protocol::PROTOCOL_VERSION.to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            capabilities: vec!["remote".to_owned()],
        };
        let mut lines = vec![
            Envelope::new(ServerMessage::Hello(hello)).to_json(),
            Envelope::new(ServerMessage::Sync(sync.clone())).to_json(),
        ];
        for pending in sync.pending_requests.iter().filter(|pending| pending.agent_id.is_none()) {
            let asked = match &pending.request {
                PendingKind::Permission(request) => {
                    ServerMessage::PermissionRequest(request.clone())
                }
                PendingKind::Ui(request) => ServerMessage::UiRequest(request.clone()),
            };
            lines.push(Envelope::new(asked).to_json());
        }
        self.greeted = true;
        self.hand_on(lines).await;
    }

    /// A run of the agent's events, and every run already behind it while
    /// there is room in the batch: each event recorded, then all handed to
    /// the host together, in order. An event at or before the cursor was
    /// taken already and is dropped.
    async fn take(
        &mut self,
        run: Run,
        items: &mut mpsc::Receiver<Run>,
        inflight: &mut Inflight,
    ) -> Result<(), Option<String>> {
        let mut lines = Vec::new();
        let was = self.cursor();
        let mut cursor = was;
        let mut next = Some(run);
        while let Some(run) = next.take() {
            for item in run {
                match item {
                    Item::Stamped { seq, line } => {
                        if cursor.is_some_and(|cursor| seq <= cursor) {
                            continue;
                        }
                        self.record(&line).await;
                        cursor = Some(seq);
                        lines.push(line);
                    }
                    Item::Message(message) => match *message {
                        ServerMessage::Sync(sync) => {
                            // The node replaced what the hub knew (a reset).
                            if let Some(cursor) = cursor.filter(|_| cursor != was) {
                                self.keep_cursor(cursor);
                            }
                            self.hand_on(std::mem::take(&mut lines)).await;
                            return match self.replace(&sync, None).await {
                                Ok(()) => Err(Some(replaced())),
                                Err(Unattached::Refused(why)) => Err(Some(why)),
                                Err(_) => Err(Some(replaced())),
                            };
                        }
                        ServerMessage::Response(_) => {}
                        other => lines.push(Envelope::new(other).to_json()),
                    },
                    Item::Answer { id, response } => {
                        if let Some((host_id, _)) = inflight.remove(&id) {
                            lines.push(answer_line(host_id, response));
                        }
                    }
                }
            }
            if lines.len() < BATCH {
                next = items.try_recv().ok();
            }
        }
        // Kept once a batch: the lines are the host's from here on.
        if let Some(cursor) = cursor.filter(|_| cursor != was) {
            self.keep_cursor(cursor);
        }
        self.hand_on(lines).await;
        Ok(())
    }

    /// What the event adds to the session, in the copy. Deltas, nearly
    /// all of the traffic, add nothing and are not decoded.
    async fn record(&mut self, line: &str) {
        if line.starts_with(r#"{"type":"message_delta""#) {
            return;
        }
        let Ok(envelope) = Envelope::<ServerMessage>::from_json(line) else { return };
        if let Err(error) = self.mirror.observe(&envelope.message).await {
            tracing::error!(agent = %self.agent_id, %error, "cannot write the hub's copy of the session");
        }
    }

    /// A command of the host's, to the node under an id of the link's own;
    /// its answer comes back under the host's id, in its place among the
    /// agent's events.
    async fn forward(
        &mut self,
        line: &[u8],
        attached: Option<&Arc<Upstream>>,
        inflight: &mut Inflight,
    ) {
        let Ok(text) = std::str::from_utf8(line) else { return };
        let Ok(envelope) = Envelope::<ClientMessage>::from_json(text.trim_end()) else {
            tracing::warn!(agent = %self.agent_id, "a command for a node's agent this build cannot read");
            return;
        };
        let id = envelope.id;
        let command = shard_protocol::envelope::MessageSet::type_name(&envelope.message);
        let Some(upstream) = attached else {
            let error = WireError::new(ErrorCode::NodeOffline, self.link.offline_reason());
            return self.respond(id, Response::failed(command, error)).await;
        };
        self.posted += 1;
        let posted = posted_id(self.posted, &self.remote_id);
        match upstream.post(posted.clone(), &self.remote_id, envelope.message) {
            Ok(()) => {
                inflight.insert(posted, (id, command));
            }
            Err(_) => {
                let error = WireError::new(
                    ErrorCode::Conflict,
                    "the node's link is not taking commands fast enough; retry in a moment",
                );
                self.respond(id, Response::failed(command, error)).await;
            }
        }
    }

    /// The commands a connection had in hand when it went: `NODE_OFFLINE`.
    async fn cut_off(&mut self, inflight: &mut Inflight) {
        if inflight.is_empty() {
            return;
        }
        let why = self.link.offline_reason();
        let lines = inflight.drain().map(|(_, (id, command))| {
            let error = WireError::new(ErrorCode::NodeOffline, why.clone());
            answer_line(id, Response::failed(command, error))
        });
        let lines = lines.collect();
        self.hand_on(lines).await;
    }

    async fn respond(&mut self, id: Option<String>, response: Response) {
        self.hand_on(vec![answer_line(id, response)]).await;
    }

    async fn hand_on(&mut self, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        let lines = lines.into_iter().map(Ok).collect();
        let _ = self.events.send(ChildEvent::Lines { epoch: self.epoch, lines }).await;
    }

    /// The hub stops listening (and says so to the node while it can), and
    /// the host hears the generation end.
    async fn end(self, route: &mpsc::Sender<Run>, ending: Option<String>) {
        self.link.unroute(&self.remote_id, route);
        if let Some(upstream) = self.link.watch().borrow().clone() {
            let detach = AgentTarget { agent_id: self.remote_id.clone() };
            // Its answer is not waited for: the hub has stopped listening.
            let _ = upstream.begin(None, ClientMessage::AgentDetach(detach));
        }
        let (code, description) = match ending {
            None => (Some(0), "the hub stopped listening".to_owned()),
            Some(why) => (None, why),
        };
        let exited = ChildEvent::Exited { epoch: self.epoch, code, description };
        let _ = self.events.send(exited).await;
    }

    fn cursor(&self) -> Option<u64> {
        self.cursors.lock().unwrap_or_else(PoisonError::into_inner).get(&self.agent_id).copied()
    }

    fn keep_cursor(&self, seq: u64) {
        self.cursors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.agent_id.clone(), seq);
    }

    fn forget_cursor(&self) {
        self.cursors.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.agent_id);
    }
}

fn replaced() -> String {
    "the node could not resume where the hub left off; the agent is read again from the node"
        .to_owned()
}

/// A response to the host, under its id.
fn answer_line(id: Option<String>, response: Response) -> String {
    let mut envelope = Envelope::new(ServerMessage::Response(response));
    envelope.id = id;
    envelope.to_json()
}
