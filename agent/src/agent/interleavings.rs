//! No lost wake-ups in the controller: seeded random scripts of prompts,
//! steers, follow-ups, aborts and answers, fired at random moments against
//! a real [`Agent`] (the demo model, a real session log), must each end with
//! every command that carried an `id` answered exactly once and the agent
//! `idle`, without any further input, and nothing its session log holds as
//! queued left undelivered.
//!
//! A failure names its seed and script; `SHARD_INTERLEAVING_SEED=N` replays
//! that seed alone. Interleavings come from the script and from how many
//! times the driver yields to the scheduler between commands (the runtime
//! is single-threaded, as the agent's is), so a seed replays the same
//! schedule up to the timing of file writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use shard_protocol::types::AgentStatus;
use shard_protocol::{Envelope, ServerMessage};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Agent, Inbound, Startup};
use crate::config::Config;
use crate::conversation::Conversation;

/// Agents per run, and scripts per agent: together a few thousand
/// interleavings. A fresh agent every few dozen keeps each session short.
const AGENTS: u64 = 40;
const SCRIPTS_PER_AGENT: u64 = 60;
/// Longest a script may take to settle: a lost wake-up hangs forever, a
/// healthy script settles in milliseconds.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// splitmix64: small, seedable, good enough to pick test actions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// What the agent said, as the driver needs it.
#[derive(Default)]
struct Observed {
    responses: HashMap<String, usize>,
    status: Option<AgentStatus>,
    open_permissions: Vec<String>,
    open_questions: Vec<String>,
    turn_ends: usize,
    /// Model calls completed (`message_complete`).
    completed: usize,
    /// Ids of commands answered `success: false`.
    refused: Vec<String>,
}

struct Harness {
    lines: mpsc::Sender<Inbound>,
    observed: Arc<Mutex<Observed>>,
    changed: Arc<Notify>,
    next_id: u64,
    sent: Vec<String>,
    script: Vec<String>,
}

impl Harness {
    fn observed(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn send(&mut self, mut command: Value) {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        command["id"] = json!(id);
        self.script.push(command.to_string());
        self.sent.push(id);
        let _ = self.lines.send(Inbound::Line(Ok(command.to_string()))).await;
    }

    /// One random action.
    async fn act(&mut self, rng: &mut Rng) {
        let message = match rng.below(5) {
            0 => "stream: 3".to_owned(),
            1 => format!("burst: {}", 1 + rng.below(40)),
            2 => "run: true".to_owned(),
            3 => "ask: which one?".to_owned(),
            _ => "hello there".to_owned(),
        };
        match rng.below(11) {
            0..=2 => self.send(json!({"type": "prompt", "message": message})).await,
            3 => {
                self.send(
                    json!({"type": "prompt", "message": message, "streaming_behavior": "steer"}),
                )
                .await;
            }
            4 => {
                let behavior = "follow_up";
                self.send(
                    json!({"type": "prompt", "message": message, "streaming_behavior": behavior}),
                )
                .await;
            }
            5 => self.send(json!({"type": "steer", "message": message})).await,
            6 => self.send(json!({"type": "abort"})).await,
            7 => {
                let open = self.observed().open_permissions.last().cloned();
                let request_id = open.unwrap_or_else(|| "perm-unknown".to_owned());
                let decision = if rng.below(2) == 0 { "allow" } else { "deny" };
                self.send(json!({"type": "permission_response", "request_id": request_id,
                                 "decision": decision}))
                    .await;
            }
            8 => {
                let open = self.observed().open_questions.last().cloned();
                let request_id = open.unwrap_or_else(|| "ui-unknown".to_owned());
                self.send(json!({"type": "ui_response", "request_id": request_id, "value": "b"}))
                    .await;
            }
            9 => self.send(json!({"type": "list_modes"})).await,
            // The daemon holds or releases the agent (a budget): a turn
            // waits at its next model call, paused, until released.
            _ => {
                let held = rng.below(2) == 0;
                self.send(json!({"type": "hold", "held": held, "reason": "budget"})).await;
            }
        }
    }

    /// Answers whatever is still open and waits until every id is answered
    /// and the agent is idle; then proves the controller is free with one
    /// more command.
    async fn settle(&mut self) -> Result<(), String> {
        // Held, a turn would wait for ever: the script ends released.
        self.send(json!({"type": "hold", "held": false})).await;
        loop {
            let (permission, question, done) = {
                let observed = self.observed();
                let answered = self.sent.iter().all(|id| observed.responses.contains_key(id));
                let idle = observed.status.is_none_or(|status| status == AgentStatus::Idle);
                let quiet =
                    observed.open_permissions.is_empty() && observed.open_questions.is_empty();
                (
                    observed.open_permissions.first().cloned(),
                    observed.open_questions.first().cloned(),
                    answered && idle && quiet,
                )
            };
            if done {
                break;
            }
            if let Some(request_id) = permission {
                self.send(json!({"type": "permission_response", "request_id": request_id,
                                 "decision": "deny"}))
                    .await;
            } else if let Some(request_id) = question {
                self.send(json!({"type": "ui_response", "request_id": request_id, "value": null}))
                    .await;
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), self.changed.notified()).await;
        }
        self.send(json!({"type": "list_modes"})).await;
        let probe = self.sent.last().cloned().unwrap_or_default();
        while !self.observed().responses.contains_key(&probe) {
            let _ = tokio::time::timeout(Duration::from_millis(50), self.changed.notified()).await;
        }
        let observed = self.observed();
        if let Some((id, count)) = observed.responses.iter().find(|(_, count)| **count != 1) {
            return Err(format!("{id} was answered {count} times"));
        }
        match observed.status {
            Some(AgentStatus::Idle) | None => Ok(()),
            other => Err(format!("settled {other:?}, not idle")),
        }
    }
}

/// A command line sent the instant a message is seen, in the same poll that
/// saw it: the fastest a client can possibly react.
type Reflex = Box<dyn FnMut(&ServerMessage) -> Option<String> + Send>;

/// Folds the agent's output into what the driver watches.
async fn observe(
    mut out: mpsc::Receiver<Envelope<ServerMessage>>,
    observed: Arc<Mutex<Observed>>,
    changed: Arc<Notify>,
    mut reflex: Option<(Reflex, mpsc::Sender<Inbound>)>,
) {
    while let Some(envelope) = out.recv().await {
        if let Some((react, lines)) = &mut reflex
            && let Some(line) = react(&envelope.message)
        {
            let _ = lines.try_send(Inbound::Line(Ok(line)));
        }
        {
            let mut seen = observed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match envelope.message {
                ServerMessage::Response(response) => {
                    if let Some(id) = envelope.id {
                        if !response.success() {
                            seen.refused.push(id.clone());
                        }
                        *seen.responses.entry(id).or_default() += 1;
                    }
                }
                ServerMessage::TurnEnd(_) => seen.turn_ends += 1,
                ServerMessage::MessageComplete(_) => seen.completed += 1,
                ServerMessage::Status(status) => seen.status = Some(status.status),
                ServerMessage::PermissionRequest(request) => {
                    seen.open_permissions.push(request.request_id)
                }
                ServerMessage::PermissionResolved(resolved) => {
                    seen.open_permissions.retain(|id| *id != resolved.request_id)
                }
                ServerMessage::UiRequest(request) => seen.open_questions.push(request.request_id),
                ServerMessage::UiResolved(resolved) => {
                    seen.open_questions.retain(|id| *id != resolved.request_id)
                }
                _ => {}
            }
        }
        changed.notify_waiters();
    }
}

/// A real agent on a fresh home, driven through a [`Harness`]. Dropping the
/// home removes its session; `stop` ends the agent.
struct Driven {
    harness: Harness,
    stop: CancellationToken,
    running: tokio::task::JoinHandle<super::Exit>,
    _home: tempfile::TempDir,
}

async fn start_agent(reflex: Option<Reflex>) -> Result<Driven, String> {
    // tmpfs where there is one: the log's fsyncs cost nothing there.
    let base = std::path::Path::new("/dev/shm");
    let home = if base.is_dir() { tempfile::tempdir_in(base) } else { tempfile::tempdir() }
        .map_err(|problem| problem.to_string())?;
    let cwd = home.path().join("project");
    std::fs::create_dir(&cwd).map_err(|problem| problem.to_string())?;
    let config = Config::load(home.path()).map_err(|problem| problem.to_string())?;
    let model = config.default_model.clone();
    let conversation =
        Conversation::create(home.path(), &cwd.display().to_string(), &model, "build")
            .await
            .map_err(|problem| problem.to_string())?;
    let (out, outbound) = mpsc::channel(super::OUTBOUND_QUEUE);
    let start = Startup {
        config,
        cwd,
        home: home.path().to_owned(),
        mode: "build".to_owned(),
        model,
        reasoning_level: None,
        toolset: crate::tools::Toolset::default(),
        instructions: None,
    };
    let agent = Agent::new(start, conversation, out);
    let (lines, inbound) = mpsc::channel(crate::stdio::INBOUND_QUEUE);
    let observed = Arc::new(Mutex::new(Observed::default()));
    let changed = Arc::new(Notify::new());
    let reflex = reflex.map(|react| (react, lines.clone()));
    tokio::spawn(observe(outbound, observed.clone(), changed.clone(), reflex));
    let stop = CancellationToken::new();
    let running = tokio::spawn(agent.run(inbound, stop.clone()));
    let harness =
        Harness { lines, observed, changed, next_id: 0, sent: Vec::new(), script: Vec::new() };
    Ok(Driven { harness, stop, running, _home: home })
}

async fn run_agent(seed: u64, scripts: u64) -> Result<(), String> {
    let Driven { mut harness, stop, running, _home } = start_agent(None).await?;
    let mut rng = Rng(seed);
    for script in 0..scripts {
        harness.script.clear();
        for _ in 0..1 + rng.below(6) {
            harness.act(&mut rng).await;
            match rng.below(4) {
                0 => {}
                1 | 2 => {
                    for _ in 0..rng.below(64) {
                        tokio::task::yield_now().await;
                    }
                }
                _ => tokio::time::sleep(Duration::from_millis(rng.below(25))).await,
            }
        }
        let settled = tokio::time::timeout(SETTLE_TIMEOUT, harness.settle()).await;
        let failure = match settled {
            Ok(Ok(())) => owed(_home.path()).err(),
            Ok(Err(problem)) => Some(problem),
            Err(_) => {
                let observed = harness.observed();
                let missing: Vec<&String> = harness
                    .sent
                    .iter()
                    .filter(|id| !observed.responses.contains_key(*id))
                    .collect();
                Some(format!(
                    "did not settle within {SETTLE_TIMEOUT:?}: unanswered {missing:?}, status {:?}",
                    observed.status
                ))
            }
        };
        if let Some(problem) = failure {
            return Err(format!(
                "seed {seed}, script {script}: {problem}\nscript:\n{}",
                harness.script.join("\n")
            ));
        }
    }
    stop.cancel();
    let _ = running.await;
    Ok(())
}

/// An idle agent owes nothing: every steer and follow-up its log holds as
/// queued was delivered, recalled or dropped by an abort, and says so.
fn owed(home: &std::path::Path) -> Result<(), String> {
    let sessions = crate::session_log::sessions_root(home);
    let session = std::fs::read_dir(&sessions)
        .and_then(|mut dirs| dirs.next().ok_or_else(|| std::io::Error::other("no session")))
        .and_then(|dir| dir)
        .map_err(|problem| problem.to_string())?;
    let entries = crate::session_log::read_log(&session.path().join("session.jsonl"))
        .map_err(|problem| problem.to_string())?;
    match crate::conversation::undelivered_of(&entries).as_slice() {
        [] => Ok(()),
        owed => Err(format!("idle, yet the log still owes {owed:?}")),
    }
}

#[test]
fn every_command_is_answered_and_the_agent_settles_idle_whatever_the_interleaving() {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let seeds: Vec<u64> = match std::env::var("SHARD_INTERLEAVING_SEED") {
        Ok(seed) => vec![seed.parse().expect("a numeric seed")],
        Err(_) => (1..=AGENTS).collect(),
    };
    for seed in seeds {
        if let Err(problem) = runtime.block_on(run_agent(seed, SCRIPTS_PER_AGENT)) {
            panic!("{problem}");
        }
    }
}

/// A client that sees `turn_end` may prompt at once, with no
/// `streaming_behavior`: even when that prompt is in before the controller
/// has reaped the turn, it is the next turn, never refused as mid-turn.
#[test]
fn a_prompt_sent_the_instant_a_turn_ends_is_accepted() {
    const TURNS: usize = 300;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let mut prompted = 0;
        let reflex: Reflex = Box::new(move |message| {
            if !matches!(message, ServerMessage::TurnEnd(_)) || prompted == TURNS {
                return None;
            }
            prompted += 1;
            let line = json!({"id": format!("r{prompted}"), "type": "prompt", "message": "next"});
            Some(line.to_string())
        });
        let Driven { mut harness, stop, running, _home } =
            start_agent(Some(reflex)).await.expect("agent");
        harness.send(json!({"type": "prompt", "message": "first"})).await;
        loop {
            let notified = harness.changed.notified();
            let (refused, turn_ends) = {
                let observed = harness.observed();
                (observed.refused.clone(), observed.turn_ends)
            };
            assert!(refused.is_empty(), "refused: {refused:?}");
            if turn_ends > TURNS {
                break;
            }
            let waited = tokio::time::timeout(SETTLE_TIMEOUT, notified).await;
            assert!(waited.is_ok(), "stuck after {} turns", harness.observed().turn_ends);
        }
        tokio::time::timeout(SETTLE_TIMEOUT, harness.settle())
            .await
            .expect("settles")
            .expect("settles idle, every command answered once");
        {
            let observed = harness.observed();
            assert!(observed.refused.is_empty(), "refused: {:?}", observed.refused);
            let reflexes = observed.responses.keys().filter(|id| id.starts_with('r')).count();
            assert_eq!(reflexes, TURNS, "every instant prompt answered");
            assert_eq!(observed.turn_ends, TURNS + 1);
        }
        stop.cancel();
        let _ = running.await;
    });
}

/// Held, a turn pauses before its model call (`status: "paused"`, with the
/// reason) and no call is made however long it waits; released, the same
/// turn goes on and ends. An abort ends a paused turn.
#[test]
fn a_held_agent_pauses_before_its_model_call_and_goes_on_when_released() {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let Driven { mut harness, stop, running, _home } = start_agent(None).await.expect("agent");
        let wait_for = |harness: &Harness, what: &'static str, done: fn(&Observed) -> bool| {
            let observed = harness.observed.clone();
            let changed = harness.changed.clone();
            async move {
                let waited = tokio::time::timeout(SETTLE_TIMEOUT, async {
                    loop {
                        let notified = changed.notified();
                        if done(&observed.lock().unwrap()) {
                            return;
                        }
                        notified.await;
                    }
                });
                assert!(waited.await.is_ok(), "never {what}");
            }
        };
        harness.send(json!({"type": "hold", "held": true, "reason": "budget reached"})).await;
        harness.send(json!({"type": "prompt", "message": "hello there"})).await;
        wait_for(&harness, "paused", |seen| seen.status == Some(AgentStatus::Paused)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(harness.observed().completed, 0, "no model call while held");
        harness.send(json!({"type": "hold", "held": false})).await;
        wait_for(&harness, "ended", |seen| seen.turn_ends == 1).await;
        assert_eq!(harness.observed().completed, 1, "the waiting turn went on");

        // Paused again, then aborted: the turn ends without a call.
        harness.send(json!({"type": "hold", "held": true})).await;
        harness.send(json!({"type": "prompt", "message": "again"})).await;
        wait_for(&harness, "paused again", |seen| seen.status == Some(AgentStatus::Paused)).await;
        harness.send(json!({"type": "abort"})).await;
        wait_for(&harness, "aborted", |seen| seen.turn_ends == 2).await;
        assert_eq!(harness.observed().completed, 1);
        tokio::time::timeout(SETTLE_TIMEOUT, harness.settle())
            .await
            .expect("settles")
            .expect("settles idle, every command answered once");
        stop.cancel();
        let _ = running.await;
    });
}
