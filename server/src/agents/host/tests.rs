//! The host's decisions under an injected clock, with fake agent processes:
//! the test plays the agent's side of the pipe line by line and moves time
//! by hand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use shard_protocol::identity::AgentIdentity;
use shard_protocol::orchestrator::AttachRole;
use shard_protocol::{ClientMessage, Envelope, ErrorCode, WireError};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{Context, Host, HostCommand, Verdict};
use crate::agents::delegation::Delegation;
use crate::agents::manifest::{MANIFEST_VERSION, Manifest};
use crate::agents::runtime::{ChildEvent, NotTaken, Runtime, SpawnRequest, Spawner};
use crate::agents::{Broadcast, Sub, Subscriber, SubscriberId, Wire};
use shard_protocol::agent::PendingKind;

/// A client connection that keeps what it was sent.
struct Recorder {
    id: SubscriberId,
    seen: Mutex<Vec<Value>>,
}

impl Recorder {
    fn new(id: SubscriberId) -> Arc<Self> {
        Arc::new(Self { id, seen: Mutex::new(Vec::new()) })
    }

    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.seen.lock().expect("lock"))
    }

    fn types(&self) -> Vec<String> {
        self.take()
            .iter()
            .map(|message| message["type"].as_str().unwrap_or("?").to_owned())
            .collect()
    }
}

impl Subscriber for Recorder {
    fn id(&self) -> SubscriberId {
        self.id
    }

    fn push(&self, bytes: Wire) -> bool {
        let value = serde_json::from_str(&bytes).expect("JSON");
        self.seen.lock().expect("lock").push(value);
        true
    }
}

#[derive(Default)]
struct Nowhere;

impl Broadcast for Nowhere {
    fn broadcast(&self, _: &Wire) {}
}

/// What the fake process was told.
#[derive(Default)]
struct Pipe {
    stdin: Vec<Value>,
    input_closed: bool,
    terminated: bool,
    killed: bool,
}

/// Every generation the host started, in order.
#[derive(Default)]
struct FakeSpawner {
    generations: Mutex<Vec<Arc<Mutex<Pipe>>>>,
}

struct FakeRuntime(Arc<Mutex<Pipe>>);

impl Runtime for FakeRuntime {
    fn send(&mut self, line: Bytes) -> Result<(), NotTaken> {
        let value = serde_json::from_slice(&line).expect("JSON line");
        self.0.lock().expect("lock").stdin.push(value);
        Ok(())
    }
    fn close_input(&mut self) {
        self.0.lock().expect("lock").input_closed = true;
    }
    fn terminate(&mut self) {
        self.0.lock().expect("lock").terminated = true;
    }
    fn kill(&mut self) {
        self.0.lock().expect("lock").killed = true;
    }
}

impl Spawner for FakeSpawner {
    fn spawn(
        &self,
        _: &SpawnRequest<'_>,
        _: mpsc::Sender<ChildEvent>,
    ) -> std::io::Result<Box<dyn Runtime>> {
        let pipe = Arc::new(Mutex::new(Pipe::default()));
        self.generations.lock().expect("lock").push(pipe.clone());
        Ok(Box::new(FakeRuntime(pipe)))
    }
}

impl FakeSpawner {
    fn count(&self) -> usize {
        self.generations.lock().expect("lock").len()
    }

    fn last(&self) -> Arc<Mutex<Pipe>> {
        self.generations.lock().expect("lock").last().cloned().expect("a generation")
    }
}

const HEADLESS: Duration = Duration::from_secs(300);
const IDLE: Duration = Duration::from_secs(600);

struct World {
    spawner: Arc<FakeSpawner>,
    context: Arc<Context>,
    _home: tempfile::TempDir,
}

fn world() -> World {
    world_telling(Arc::new(crate::agents::Unnoticed))
}

fn world_telling(notices: Arc<dyn crate::agents::Notices>) -> World {
    world_with(notices, shard_platform::limits::Limits::default())
}

fn world_with(
    notices: Arc<dyn crate::agents::Notices>,
    limits: shard_platform::limits::Limits,
) -> World {
    let home = tempfile::tempdir().expect("home");
    let spawner = Arc::new(FakeSpawner::default());
    let usage = Arc::new(crate::agents::usage::UsageBook::new(home.path()));
    let context = Arc::new(Context {
        home: home.path().to_owned(),
        spawner: spawner.clone(),
        broadcast: Arc::new(Nowhere),
        delegation: Arc::new(Delegation::default()),
        idle_timeout: IDLE,
        headless_timeout: HEADLESS,
        journal: super::JournalLimits::default(),
        usage: usage.clone(),
        budgets: Arc::new(crate::agents::budgets::Budgets::new(home.path(), Vec::new(), usage)),
        processes: Arc::default(),
        fleet: Arc::new(crate::agents::fleet::Fleet::new(Arc::default(), limits)),
        search: crate::search::Search::detached(),
        notices,
        step_up: None,
        nodes: Arc::new(crate::agents::nodes::Nodes::start(
            Vec::new(),
            Arc::new(Nowhere),
            tokio::sync::mpsc::channel(1).0,
            tokio_util::sync::CancellationToken::new(),
        )),
        sandbox: Arc::new(crate::sandbox::Sandbox {
            home: home.path().to_owned(),
            exe: "/bin/false".into(),
            containment: crate::sandbox::Containment::Available {
                program: "/bin/false".into(),
                version: "test".to_owned(),
            },
            user_home: None,
            resolver: Arc::default(),
            remote: false,
            git_dir_of: Box::new(|_| None),
        }),
    });
    World { spawner, context, _home: home }
}

fn manifest(agent_id: &str, parent: Option<&str>) -> Manifest {
    Manifest {
        version: MANIFEST_VERSION,
        agent_id: agent_id.to_owned(),
        identity: AgentIdentity {
            parent_agent_id: parent.map(str::to_owned),
            ..AgentIdentity::default()
        },
        cwd: "/".to_owned(),
        model: None,
        mode: None,
        session_id: format!("sess-{agent_id}"),
        created_at: 0,
        ..Manifest::default()
    }
}

/// The agent's side: one line from generation `epoch`.
fn says(host: &mut Host, epoch: u64, line: Value, now: Instant) {
    host.child_event(ChildEvent::Lines { epoch, lines: vec![Ok(line.to_string())] }, now);
}

/// The current generation becomes ready: `hello`, then `sync`.
fn ready(host: &mut Host, epoch: u64, now: Instant) {
    says(
        host,
        epoch,
        json!({"type": "hello", "protocol_version": "0.1", "server_version": "fake", "capabilities": []}),
        now,
    );
    says(
        host,
        epoch,
        json!({"type": "sync", "status": "idle", "mode": "build",
                             "live_window": {"messages": []}, "pending_requests": []}),
        now,
    );
}

fn attach(host: &mut Host, client: &Arc<Recorder>, role: AttachRole, now: Instant) {
    let subscriber: Sub = client.clone();
    host.command(
        HostCommand::Attach { subscriber, role, id: Some("attach".into()), after_seq: None },
        now,
    );
}

fn permission_request(request_id: &str) -> Value {
    json!({"type": "permission_request", "request_id": request_id, "tool_name": "bash",
           "input": {"command": "true"}, "prompt": "run true", "options": ["allow", "deny"]})
}

fn answer(host: &mut Host, client: &Arc<Recorder>, request_id: &str, decision: &str, now: Instant) {
    let text = if decision == "nonsense" {
        json!({"type": "permission_response", "request_id": request_id, "choice_id": "no-such-choice"})
    } else {
        json!({"type": "permission_response", "request_id": request_id, "decision": decision})
    };
    let message =
        Envelope::<ClientMessage>::from_json(&text.to_string()).expect("an answer").message;
    let subscriber: Sub = client.clone();
    host.command(
        HostCommand::Answer {
            subscriber,
            id: Some("answer".into()),
            message,
            answerer: shard_protocol::approvals::Answerer {
                source: "test".into(),
                ..Default::default()
            },
        },
        now,
    );
}

/// Answers the agent received on stdin, as `(request_id, decision)`.
fn forwarded(pipe: &Arc<Mutex<Pipe>>) -> Vec<(String, String)> {
    pipe.lock()
        .expect("lock")
        .stdin
        .iter()
        .filter(|line| line["type"] == "permission_response")
        .map(|line| {
            (
                line["request_id"].as_str().unwrap_or("").to_owned(),
                line["decision"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// An attached, ready agent and its interactive client.
fn running(world: &World, agent: &str, now: Instant) -> (Host, Arc<Recorder>) {
    let (mut host, _) = Host::new(world.context.clone(), manifest(agent, None), now);
    let client = Recorder::new(1);
    attach(&mut host, &client, AttachRole::Interactive, now);
    ready(&mut host, 0, now);
    assert_eq!(client.types(), ["response", "sync"]);
    (host, client)
}

#[test]
fn the_first_valid_answer_wins_and_later_ones_are_dropped() {
    let world = world();
    let now = Instant::now();
    let (mut host, first) = running(&world, "agent-a", now);
    let second = Recorder::new(2);
    attach(&mut host, &second, AttachRole::Interactive, now);
    second.take();
    says(&mut host, 0, permission_request("perm-1"), now);
    assert_eq!(first.types(), ["permission_request"]);
    assert_eq!(second.types(), ["permission_request"]);

    // An unknown choice is not an answer; then two clients race.
    answer(&mut host, &second, "perm-1", "nonsense", now);
    answer(&mut host, &first, "perm-1", "allow", now);
    answer(&mut host, &second, "perm-1", "deny", now);
    let pipe = world.spawner.last();
    assert_eq!(forwarded(&pipe), [("perm-1".to_owned(), "allow".to_owned())], "only the first");
    // Every answer is acknowledged; the resolution names the winner.
    assert_eq!(first.types(), ["response"]);
    assert_eq!(second.types(), ["response", "response"]);
    says(
        &mut host,
        0,
        json!({"type": "permission_resolved", "request_id": "perm-1", "decision": "allow"}),
        now,
    );
    let resolved = first.take();
    assert_eq!(resolved[0]["type"], "permission_resolved");
    assert_eq!(resolved[0]["source"], "test");
    assert_eq!(second.take()[0]["type"], "permission_resolved", "every tab's dialog closes");
}

#[test]
fn an_answer_cut_off_on_its_way_to_a_nodes_agent_opens_the_question_again() {
    let world = world();
    let now = Instant::now();
    let (mut host, first) = running(&world, "agent-a", now);
    let second = Recorder::new(2);
    attach(&mut host, &second, AttachRole::Interactive, now);
    second.take();
    says(&mut host, 0, permission_request("perm-1"), now);
    first.take();
    second.take();
    answer(&mut host, &first, "perm-1", "allow", now);
    let pipe = world.spawner.last();
    let sent = pipe.lock().expect("lock").stdin.last().cloned().expect("the answer went");
    assert_eq!(sent["type"], "permission_response");
    // The link went down before the node took it: the runtime answers so.
    let offline = json!({"type": "response", "id": sent["id"], "command": "permission_response",
        "success": false, "error": {"code": "NODE_OFFLINE", "message": "node `box` is offline"}});
    says(&mut host, 0, offline, now);
    // Shown again to every tab, in the next sync, and taken once more.
    assert_eq!(second.types(), ["permission_request"]);
    let client = Recorder::new(3);
    attach(&mut host, &client, AttachRole::Observer, now);
    let sync = client.take().into_iter().find(|message| message["type"] == "sync").expect("sync");
    assert_eq!(sync["pending_requests"][0]["request_id"], "perm-1", "{sync}");
    answer(&mut host, &second, "perm-1", "deny", now);
    let answers = forwarded(&pipe);
    assert_eq!(answers.last(), Some(&("perm-1".to_owned(), "deny".to_owned())), "{answers:?}");
    // Any other refusal of an answer leaves the question answered.
    let refused = pipe.lock().expect("lock").stdin.last().cloned().expect("the answer went");
    let other = json!({"type": "response", "id": refused["id"], "command": "permission_response",
        "success": false, "error": {"code": "CONFLICT", "message": "no"}});
    second.take();
    says(&mut host, 0, other, now);
    assert!(second.types().is_empty(), "not shown again");
}

#[test]
fn a_question_nobody_can_answer_is_denied_at_once() {
    let world = world();
    let now = Instant::now();
    let (mut host, _) = Host::new(world.context.clone(), manifest("agent-h", None), now);
    let watcher = Recorder::new(1);
    attach(&mut host, &watcher, AttachRole::Observer, now);
    ready(&mut host, 0, now);
    watcher.take();
    says(&mut host, 0, permission_request("perm-1"), now);
    let pipe = world.spawner.last();
    assert_eq!(forwarded(&pipe), [("perm-1".to_owned(), "deny".to_owned())], "headless deny");
    says(
        &mut host,
        0,
        json!({"type": "permission_resolved", "request_id": "perm-1", "decision": "deny"}),
        now,
    );
    let seen = watcher.take();
    assert_eq!(seen.last().expect("resolved")["source"], "headless", "{seen:?}");
}

#[test]
fn a_question_left_alone_is_denied_after_the_headless_timeout_and_not_before() {
    let world = world();
    let start = Instant::now();
    let (mut host, client) = running(&world, "agent-t", start);
    says(&mut host, 0, permission_request("perm-1"), start);
    let left = start + Duration::from_secs(10);
    host.command(HostCommand::Disconnected { subscriber: client.id }, left);
    assert_eq!(host.next_deadline(), Some(left + HEADLESS));
    let pipe = world.spawner.last();
    host.timers(left + HEADLESS - Duration::from_millis(1));
    assert!(forwarded(&pipe).is_empty(), "still open just before the timeout");
    host.timers(left + HEADLESS);
    assert_eq!(forwarded(&pipe), [("perm-1".to_owned(), "deny".to_owned())]);

    // A responder that comes back in time stops the clock.
    let later = left + HEADLESS + Duration::from_secs(1);
    let back = Recorder::new(3);
    attach(&mut host, &back, AttachRole::Interactive, later);
    says(&mut host, 0, permission_request("perm-2"), later);
    host.command(HostCommand::Disconnected { subscriber: back.id }, later);
    assert_eq!(host.next_deadline(), Some(later + HEADLESS));
    let again = Recorder::new(4);
    attach(&mut host, &again, AttachRole::Interactive, later + HEADLESS / 2);
    assert_eq!(host.next_deadline(), None, "answerable again: no headless clock");
    host.timers(later + HEADLESS * 2);
    assert_eq!(forwarded(&pipe).len(), 1, "perm-2 waits for its answer");
}

#[test]
fn a_childs_question_goes_to_the_nearest_interactive_ancestor_when_its_own_client_leaves() {
    let world = world();
    let now = Instant::now();
    let (mut root, root_client) = running(&world, "agent-root", now);
    let (mut middle, _) =
        Host::new(world.context.clone(), manifest("agent-mid", Some("agent-root")), now);
    let (mut child, _) =
        Host::new(world.context.clone(), manifest("agent-kid", Some("agent-mid")), now);
    // The middle agent has only an observer: it never answers.
    let watcher = Recorder::new(7);
    attach(&mut middle, &watcher, AttachRole::Observer, now);
    ready(&mut middle, 0, now);
    let child_client = Recorder::new(8);
    attach(&mut child, &child_client, AttachRole::Interactive, now);
    ready(&mut child, 0, now);
    says(&mut child, 0, permission_request("perm-kid"), now);
    assert_eq!(child_client.types(), ["response", "sync", "permission_request"]);
    assert!(root_client.take().is_empty(), "the child answers for itself while attached");

    child.command(HostCommand::Disconnected { subscriber: child_client.id }, now);
    let moved = root_client.take();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0]["type"], "permission_request");
    assert_eq!(moved[0]["agent_id"], "agent-kid", "it keeps the child's id");
    assert!(watcher.take().iter().all(|message| message["type"] != "permission_request"));
    assert_eq!(child.next_deadline(), None, "an ancestor can answer: no headless clock");
    // The ancestor's sync re-shows it, and its answer is the child's.
    let sync: Value = serde_json::from_str(&root.sync_bytes(false)).expect("JSON");
    let pending = sync["pending_requests"].as_array().expect("pending requests");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0]["agent_id"], "agent-kid");
    answer(&mut child, &root_client, "perm-kid", "allow", now);
    let pipe = world.spawner.last();
    assert_eq!(forwarded(&pipe), [("perm-kid".to_owned(), "allow".to_owned())]);
}

#[test]
fn an_active_runtime_is_never_reaped_and_an_idle_one_is() {
    let world = world();
    let start = Instant::now();
    let (mut host, client) = running(&world, "agent-r", start);
    let pipe = world.spawner.last();
    host.command(HostCommand::Disconnected { subscriber: client.id }, start);
    says(&mut host, 0, json!({"type": "status", "status": "streaming"}), start);
    host.timers(start + IDLE * 10);
    assert!(!pipe.lock().expect("lock").input_closed, "never while streaming");
    assert_eq!(host.next_deadline(), None);

    let done = start + IDLE * 10;
    says(&mut host, 0, json!({"type": "status", "status": "idle"}), done);
    assert_eq!(host.next_deadline(), Some(done + IDLE));
    host.timers(done + IDLE - Duration::from_millis(1));
    assert!(!pipe.lock().expect("lock").input_closed);
    host.timers(done + IDLE);
    assert!(pipe.lock().expect("lock").input_closed, "reaped once idle long enough");
}

#[test]
fn a_runtime_with_work_in_flight_is_not_reaped() {
    let world = world();
    let start = Instant::now();
    let (mut host, client) = running(&world, "agent-w", start);
    let pipe = world.spawner.last();
    let text = json!({"type": "list_modes"}).to_string();
    let message = Envelope::<ClientMessage>::from_json(&text).expect("command").message;
    let subscriber: Sub = client.clone();
    host.command(HostCommand::Forward { subscriber, id: Some("m".into()), message }, start);
    host.timers(start + IDLE * 2);
    assert!(!pipe.lock().expect("lock").input_closed, "a command is in flight");
}

#[test]
fn attaching_to_a_stopped_agent_restores_it_with_the_next_epoch() {
    let world = world();
    let start = Instant::now();
    let (mut host, client) = running(&world, "agent-s", start);
    host.command(HostCommand::Disconnected { subscriber: client.id }, start);
    host.timers(start + IDLE);
    host.child_event(
        ChildEvent::Exited { epoch: 0, code: Some(0), description: "exited".into() },
        start + IDLE,
    );
    assert_eq!(host.current_info().runtime_state, shard_protocol::types::RuntimeState::Stopped);
    assert_eq!(world.spawner.count(), 1);

    let later = start + IDLE * 2;
    let returning = Recorder::new(5);
    attach(&mut host, &returning, AttachRole::Interactive, later);
    assert_eq!(world.spawner.count(), 2, "attach started a new generation");
    assert!(returning.take().is_empty(), "nothing until it is ready");
    // A line of the old generation is history.
    says(&mut host, 0, json!({"type": "status", "status": "streaming"}), later);
    ready(&mut host, 1, later);
    let seen = returning.take();
    assert_eq!(seen[0]["type"], "response");
    assert_eq!(seen[0]["success"], true);
    assert_eq!(seen[1]["type"], "sync");
    assert_eq!(seen[1]["runtime_epoch"], 1);
    assert_eq!(seen[1]["status"], "idle");
}

#[test]
fn a_graceful_kill_becomes_a_forced_one_after_the_grace() {
    let world = world();
    let start = Instant::now();
    let (mut host, _) = running(&world, "agent-k", start);
    let pipe = world.spawner.last();
    let (reply, mut done) = oneshot::channel();
    host.command(HostCommand::Kill { force: false, reply }, start);
    assert!(pipe.lock().expect("lock").terminated);
    assert!(!pipe.lock().expect("lock").killed);
    let grace = start + super::process::KILL_GRACE;
    assert_eq!(host.next_deadline(), Some(grace));
    host.timers(grace);
    assert!(pipe.lock().expect("lock").killed, "killed after the grace");
    assert!(done.try_recv().is_err(), "answers only once the process is gone");
    host.child_event(
        ChildEvent::Exited { epoch: 0, code: None, description: "killed".into() },
        grace,
    );
    assert!(done.try_recv().is_ok());
}

#[test]
fn a_shutdown_drains_a_busy_agent_then_escalates_to_sigterm_and_to_a_kill() {
    use super::ShutdownMode;
    let world = world();
    let dir = crate::agents::manifest::agent_dir(&world.context.home, "agent-d");
    std::fs::create_dir_all(dir).expect("the agent's folder");
    let start = Instant::now();
    let (mut host, _) = running(&world, "agent-d", start);
    let pipe = world.spawner.last();
    says(&mut host, 0, permission_request("perm-1"), start);
    says(&mut host, 0, json!({"type": "status", "status": "waiting_for_permission"}), start);

    // Draining leaves the turn in hand alone...
    let (reply, mut drained) = oneshot::channel();
    host.command(HostCommand::Shutdown { mode: ShutdownMode::Drain, reply }, start);
    let told = |pipe: &Arc<Mutex<Pipe>>| {
        let pipe = pipe.lock().expect("lock");
        (pipe.input_closed, pipe.terminated, pipe.killed)
    };
    assert_eq!(told(&pipe), (false, false, false), "a busy agent is left to finish");
    // ... a SIGTERM'd daemon stops it now, the agent's own way ...
    let (reply, mut terminated) = oneshot::channel();
    host.command(HostCommand::Shutdown { mode: ShutdownMode::Terminate, reply }, start);
    assert_eq!(told(&pipe), (false, true, false), "SIGTERM: abort, flush, exit");
    let grace = start + super::process::KILL_GRACE;
    assert_eq!(host.next_deadline(), Some(grace), "bounded by the kill grace");
    // ... and a milder mode asked later does not undo it.
    let (reply, _) = oneshot::channel();
    host.command(HostCommand::Shutdown { mode: ShutdownMode::Drain, reply }, start);
    assert_eq!(host.next_deadline(), Some(grace));
    host.timers(grace);
    assert_eq!(told(&pipe), (false, true, true), "killed after the grace");
    assert!(drained.try_recv().is_err() && terminated.try_recv().is_err(), "not before the exit");
    host.child_event(
        ChildEvent::Exited { epoch: 0, code: None, description: "killed".into() },
        grace,
    );
    assert!(drained.try_recv().is_ok() && terminated.try_recv().is_ok(), "every waiter told");
    // The question its killed process never settled is settled as such.
    let approvals = crate::agents::approvals::list(&world.context.home, "agent-d", 10);
    assert_eq!(approvals[0].request_id, "perm-1");
    assert_eq!(approvals[0].outcome.as_deref(), Some("deny"));
    assert_eq!(
        approvals[0].answered_by.as_ref().map(|by| by.source.as_str()),
        Some("runtime_exited")
    );
}

/// No lost wake-ups between a host going dormant and commands sent to it:
/// seeded random scripts of senders, each command awaiting its answer,
/// with random yields between them so that sends land before, during and
/// after each retirement. `SHARD_INTERLEAVING_SEED=N` replays one seed.
#[test]
fn commands_racing_a_host_going_dormant_are_all_answered() {
    use crate::agents::hosts::Hosts;
    const SENDERS: usize = 3;
    const STEPS: usize = 200;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let seeds: Vec<u64> = match std::env::var("SHARD_INTERLEAVING_SEED") {
        Ok(seed) => vec![seed.parse().expect("a numeric seed")],
        Err(_) => (1..=20).collect(),
    };
    for seed in seeds {
        runtime.block_on(async {
            let world = world();
            let hosts = Arc::new(Hosts::default());
            let now = Instant::now();
            hosts.insert(Box::new(Host::dormant(world.context.clone(), manifest("agent-d", None), now)));
            let mut senders = Vec::new();
            for sender in 0..SENDERS {
                let hosts = hosts.clone();
                let mut rng = fastrand::Rng::with_seed(seed * 100 + sender as u64);
                senders.push(tokio::spawn(async move {
                    for step in 0..STEPS {
                        for _ in 0..rng.usize(0..4) {
                            tokio::task::yield_now().await;
                        }
                        let (reply, answered) = oneshot::channel();
                        let sent = match rng.usize(0..3) {
                            0 => hosts.send("agent-d", HostCommand::Kill { force: false, reply }),
                            1 => {
                                let (terminated, answered) = oneshot::channel();
                                drop(reply);
                                let command = HostCommand::Terminate { reply: terminated };
                                let sent = hosts.send_waiting("agent-d", command).await;
                                let waited = tokio::time::timeout(Duration::from_secs(5), answered);
                                assert!(
                                    matches!(waited.await, Ok(Ok(_))),
                                    "seed {seed}, sender {sender}, step {step}: terminate unanswered"
                                );
                                sent.map(|_| ())?;
                                continue;
                            }
                            _ => {
                                assert!(hosts.info("agent-d").is_some(), "listed throughout");
                                drop(reply);
                                continue;
                            }
                        };
                        sent.map_err(|refused| format!("{refused:?}"))
                            .unwrap_or_else(|refused| panic!("seed {seed}: refused {refused}"));
                        let waited = tokio::time::timeout(Duration::from_secs(5), answered).await;
                        assert!(
                            matches!(waited, Ok(Ok(()))),
                            "seed {seed}, sender {sender}, step {step}: kill unanswered"
                        );
                    }
                    Ok::<(), crate::agents::hosts::Refused>(())
                }));
            }
            // Counts the host's trips to dormancy while the senders run.
            let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
            let watcher = {
                let (hosts, running) = (hosts.clone(), running.clone());
                tokio::spawn(async move {
                    let (mut trips, mut was_awake) = (0, false);
                    while running.load(std::sync::atomic::Ordering::Relaxed) {
                        let awake = hosts.awake() == 1;
                        trips += usize::from(was_awake && !awake);
                        was_awake = awake;
                        tokio::task::yield_now().await;
                    }
                    trips
                })
            };
            for sender in senders {
                sender.await.expect("a sender panicked").expect("refused");
            }
            running.store(false, std::sync::atomic::Ordering::Relaxed);
            let trips = watcher.await.expect("the watcher");
            assert!(trips >= STEPS / 10, "seed {seed}: only {trips} trips to dormancy");
            // With nothing left to do, it settles dormant.
            for _ in 0..1000 {
                if hosts.awake() == 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert_eq!(hosts.awake(), 0, "seed {seed}: the host went dormant at the end");
        });
    }
}

fn activate(host: &mut Host, session: &str, now: Instant) -> Result<String, WireError> {
    let (reply, mut answer) = oneshot::channel();
    host.command(HostCommand::Activate { session_id: session.to_owned(), reply }, now);
    answer.try_recv().expect("answered at once").map_err(WireError::from)
}

#[test]
fn a_session_switch_waits_for_an_accepted_prompts_turn_and_a_process_that_fails_is_not_restarted_in_a_loop()
 {
    let world = world();
    let now = Instant::now();
    let (mut host, client) = running(&world, "agent-s", now);
    client.take();
    let subscriber: Sub = client.clone();
    let prompt = Envelope::<ClientMessage>::from_json(r#"{"type":"prompt","message":"hi"}"#)
        .expect("a prompt")
        .message;
    host.command(HostCommand::Forward { subscriber, id: Some("p".into()), message: prompt }, now);
    let sent = world.spawner.last().lock().expect("lock").stdin.last().cloned().expect("sent");
    // The agent accepts the prompt before it says it is streaming: the
    // switch must not slip in between.
    says(
        &mut host,
        0,
        json!({"type": "response", "id": sent["id"], "command": "prompt", "success": true}),
        now,
    );
    let refused = activate(&mut host, "sess-other", now).expect_err("mid-turn");
    assert_eq!(refused.code, ErrorCode::Conflict);
    says(&mut host, 0, json!({"type": "status", "status": "streaming"}), now);
    assert!(activate(&mut host, "sess-other", now).is_err());
    says(&mut host, 0, json!({"type": "turn_end", "turn_id": "t1"}), now);
    says(&mut host, 0, json!({"type": "status", "status": "idle"}), now);
    assert_eq!(activate(&mut host, "sess-other", now).expect("idle now"), "sess-agent-s");
    assert!(world.spawner.last().lock().expect("lock").input_closed, "the old process stops");

    // It exits; someone watches, so the new session's process starts...
    host.child_event(
        ChildEvent::Exited { epoch: 0, code: Some(0), description: "exit 0".into() },
        now,
    );
    assert_eq!(world.spawner.count(), 2);
    // ...and when that one dies before it is ready, it is not started again
    // and again for the watcher: the next work or attach retries.
    host.child_event(
        ChildEvent::Exited { epoch: 1, code: Some(1), description: "exit 1".into() },
        now,
    );
    assert_eq!(world.spawner.count(), 2, "no restart loop");
    client.take();
    // A process that does come up gives every attachment the new session.
    attach(&mut host, &client, AttachRole::Interactive, now);
    assert_eq!(world.spawner.count(), 3);
    ready(&mut host, 2, now);
    let synced: Vec<String> = client.types();
    assert!(synced.iter().filter(|kind| *kind == "sync").count() >= 1, "{synced:?}");
}

fn checked(host: &mut Host, request_id: &str, fingerprint: &str, now: Instant) -> Verdict {
    let (reply, mut verdict) = tokio::sync::oneshot::channel();
    let message = ClientMessage::PermissionResponse(shard_protocol::agent::PermissionResponse {
        request_id: request_id.to_owned(),
        answer: shard_protocol::agent::PermissionAnswer::Decision(
            shard_protocol::agent::Decision::Allow,
        ),
        reason: None,
    });
    let answerer =
        shard_protocol::approvals::Answerer { source: "push".into(), ..Default::default() };
    let fingerprint = fingerprint.to_owned();
    let command =
        HostCommand::AnswerChecked { message, answerer, fingerprint, stepped_up: false, reply };
    host.command(command, now);
    verdict.try_recv().expect("a verdict at once")
}

fn fingerprint_of(line: &Value) -> String {
    let request: shard_protocol::agent::PermissionRequest =
        serde_json::from_value(line.clone()).expect("a permission request");
    super::fingerprint(&request)
}

#[test]
fn a_checked_answer_takes_only_the_call_it_was_made_for_and_only_first() {
    let world = world();
    let now = Instant::now();
    let (mut host, client) = running(&world, "agent-c", now);
    let asked = permission_request("perm-1");
    let shown = fingerprint_of(&asked);
    let mut changed = asked.clone();
    changed["input"]["command"] = json!("rm -rf ~");
    assert_ne!(fingerprint_of(&changed), shown, "the arguments are in the fingerprint");

    assert_eq!(checked(&mut host, "perm-1", &shown, now), Verdict::Unknown, "not asked yet");
    // The same request id, another call: what the notification showed is
    // not what would run.
    says(&mut host, 0, changed, now);
    assert_eq!(checked(&mut host, "perm-1", &shown, now), Verdict::Changed);
    assert!(forwarded(&world.spawner.last()).is_empty(), "nothing passed on");
    says(
        &mut host,
        0,
        json!({"type": "permission_resolved", "request_id": "perm-1", "decision": "deny"}),
        now,
    );
    client.take();

    says(&mut host, 0, asked, now);
    assert_eq!(checked(&mut host, "perm-1", &shown, now), Verdict::Won);
    assert_eq!(forwarded(&world.spawner.last()), [("perm-1".to_owned(), "allow".to_owned())]);
    assert_eq!(checked(&mut host, "perm-1", &shown, now), Verdict::Answered, "first only");
    answer(&mut host, &client, "perm-1", "deny", now);
    assert_eq!(forwarded(&world.spawner.last()).len(), 1, "a tab after it is dropped too");
}

/// Records what a host tells [`Notices`].
#[derive(Default)]
struct Told(Mutex<Vec<String>>);

impl crate::agents::Notices for Told {
    fn asked(&self, agent: &crate::agents::NoticeAgent<'_>, request: &PendingKind) {
        let told = format!("asked {} {}", agent.agent_id, request.request_id());
        self.0.lock().expect("lock").push(told);
    }
    fn settled(&self, agent_id: &str, request_id: &str) {
        self.0.lock().expect("lock").push(format!("settled {agent_id} {request_id}"));
    }
    fn failed(&self, agent: &crate::agents::NoticeAgent<'_>, code: &str) {
        self.0.lock().expect("lock").push(format!("failed {} {code}", agent.agent_id));
    }
}

#[test]
fn notices_hear_of_a_waiting_question_its_end_and_a_failed_turn_but_not_a_headless_answer() {
    let told = Arc::new(Told::default());
    let world = world_telling(told.clone());
    let now = Instant::now();
    let (mut host, client) = running(&world, "agent-n", now);
    says(&mut host, 0, permission_request("perm-1"), now);
    answer(&mut host, &client, "perm-1", "allow", now);
    says(
        &mut host,
        0,
        json!({"type": "permission_resolved", "request_id": "perm-1", "decision": "allow"}),
        now,
    );
    says(
        &mut host,
        0,
        json!({"type": "error", "code": "PROVIDER_ERROR", "message": "key sk-1"}),
        now,
    );
    assert_eq!(
        *told.0.lock().expect("lock"),
        ["asked agent-n perm-1", "settled agent-n perm-1", "failed agent-n PROVIDER_ERROR"]
    );

    // Nobody to answer: denied at once, so nobody is asked.
    told.0.lock().expect("lock").clear();
    let (mut alone, _) = Host::new(world.context.clone(), manifest("agent-m", None), now);
    ready(&mut alone, 0, now);
    says(&mut alone, 0, permission_request("perm-2"), now);
    assert!(told.0.lock().expect("lock").iter().all(|told| !told.starts_with("asked")));
}

#[test]
fn a_process_that_exits_before_it_is_ready_is_refused_with_what_it_wrote_this_time() {
    let world = world();
    let now = Instant::now();
    let log = crate::agents::manifest::agent_dir(&world.context.home, "agent-e").join("agent.log");
    std::fs::create_dir_all(log.parent().expect("dir")).expect("agent dir");
    std::fs::write(&log, "an earlier run's last words\n").expect("log");
    let (mut host, _) = Host::new(world.context.clone(), manifest("agent-e", None), now);
    let client = Recorder::new(1);
    attach(&mut host, &client, AttachRole::Interactive, now);
    assert_eq!(world.spawner.count(), 1);
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).expect("open");
    std::io::Write::write_all(&mut file, b"\nError: cannot read the instructions\n\n")
        .expect("write");
    let exited =
        ChildEvent::Exited { epoch: 0, code: Some(1), description: "exited with 1".into() };
    host.child_event(exited, now);
    let seen = client.take();
    assert_eq!(seen[0]["type"], "response", "{seen:?}");
    let message = seen[0]["error"]["message"].as_str().expect("a message");
    assert!(
        message.ends_with("exited with 1; it said: Error: cannot read the instructions"),
        "{message}"
    );
    assert!(!message.contains("earlier run"), "only this process's words: {message}");
}

#[test]
fn the_fleet_hears_of_an_agent_left_idle_after_its_creation_and_of_one_going() {
    use super::process::Because;
    use crate::agents::fleet::governor::Full;
    let limits = shard_platform::limits::Limits { max_awake_agents: 2, ..Default::default() };
    let world = world_with(Arc::new(crate::agents::Unnoticed), limits);
    let fleet = world.context.fleet.clone();
    let start = Instant::now();
    let (mut host, _) = Host::new(world.context.clone(), manifest("agent-a", None), start);
    let (reply, mut started) = oneshot::channel();
    host.command(HostCommand::Start { reply }, start);
    ready(&mut host, 0, start);
    assert!(matches!(started.try_recv(), Ok(Ok(()))), "its creation is answered");
    // What the host's loop does after each step: nothing is left to do,
    // though nothing published it since.
    host.tell_fleet();
    assert!(fleet.admit("agent-b").is_ok(), "two awake");
    let room = fleet.admit("agent-c");
    assert!(room.is_ok(), "the idle one hibernates to make room: {room:?}");

    // Told to (as the fleet's order says), it goes: it is not counted
    // awake while its process exits, so no other agent goes for it.
    host.command(HostCommand::Limit(Because::Hibernated("to make room".into())), start);
    assert!(world.spawner.last().lock().expect("lock").input_closed);
    host.tell_fleet();
    let full = fleet.admit("agent-d");
    assert!(matches!(full, Err(Full::Awake { awake: 2, .. })), "b and c only: {full:?}");
}

#[test]
fn the_fleet_hibernates_only_an_idle_agent_and_stops_one_over_its_ceiling_at_once() {
    use super::process::Because;
    use shard_protocol::types::{AgentStatus, RuntimeState};
    let world = world();
    let start = Instant::now();
    let (mut host, _client) = running(&world, "agent-f", start);
    let pipe = world.spawner.last();

    // Busy: a hibernation is not carried out.
    says(&mut host, 0, json!({"type": "status", "status": "streaming"}), start);
    host.command(HostCommand::Limit(Because::Hibernated("room".into())), start);
    assert!(!pipe.lock().expect("lock").input_closed, "never mid-turn");

    // Idle: its input is closed, and its end reads as a hibernation.
    says(&mut host, 0, json!({"type": "status", "status": "idle"}), start);
    host.command(HostCommand::Limit(Because::Hibernated("to make room".into())), start);
    assert!(pipe.lock().expect("lock").input_closed, "stopped the gentle way");
    let exited = ChildEvent::Exited { epoch: 0, code: Some(0), description: "exited".into() };
    host.child_event(exited, start);
    let info = host.current_info();
    assert_eq!((info.runtime_state, info.status), (RuntimeState::Hibernated, AgentStatus::Idle));

    // Over its ceiling: killed at once, whatever it was doing.
    attach(&mut host, &Recorder::new(2), AttachRole::Interactive, start);
    ready(&mut host, 1, start);
    let pipe = world.spawner.last();
    says(&mut host, 1, json!({"type": "status", "status": "streaming"}), start);
    host.command(HostCommand::Limit(Because::OverCeiling("held 600 MB".into())), start);
    assert!(pipe.lock().expect("lock").killed, "its tree is killed");
    let exited = ChildEvent::Exited { epoch: 1, code: None, description: "killed".into() };
    host.child_event(exited, start);
    let info = host.current_info();
    assert_eq!((info.runtime_state, info.status), (RuntimeState::Stopped, AgentStatus::Error));
}
