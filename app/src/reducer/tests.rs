//! The reducer, fed the daemon's frames natively: what the page would show
//! after each, and what it sent back.

use std::sync::{Arc, Mutex};

use leptos::prelude::{GetUntracked, Set, WithUntracked};
use serde_json::{Value, json};
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::types::AgentStatus;

use super::{Greeted, handle};
use crate::link::{Connection, NOT_CONNECTED};
use crate::questions::Question;
use crate::state::ClientState;
use crate::transcript::{Block, Item};

const AGENT: &str = "agent-a";
const OTHER: &str = "agent-b";

/// A page with a connection that records every frame it sends. Its signals
/// live under a root owner of their own (the daemon's build sandboxes
/// reactive arenas, as a browser tab has one).
fn page() -> (ClientState, Arc<Mutex<Vec<Value>>>) {
    let owner = leptos::prelude::Owner::new_root(None);
    owner.set();
    // The test's thread keeps it for the test's life.
    std::mem::forget(owner);
    let state = ClientState::new();
    let sent = Arc::new(Mutex::new(Vec::new()));
    record(&state, &sent);
    (state, sent)
}

/// Connects `state` to a daemon that records every frame it sends in `sent`.
fn record(state: &ClientState, sent: &Arc<Mutex<Vec<Value>>>) {
    let capture = sent.clone();
    state.link.connect(Box::new(move |text: String| {
        capture.lock().expect("lock").push(serde_json::from_str(&text).expect("JSON frame"));
    }));
}

fn feed(state: &ClientState, frame: Value) -> Greeted {
    handle(state, &frame.to_string())
}

fn take(sent: &Arc<Mutex<Vec<Value>>>) -> Vec<Value> {
    std::mem::take(&mut *sent.lock().expect("lock"))
}

/// Answers the last frame of `type` the page sent, as the daemon would.
fn answer(state: &ClientState, sent: &[Value], kind: &str, outcome: Value) {
    let frame = sent.iter().rev().find(|frame| frame["type"] == kind).expect("sent");
    let mut response = json!({"type": "response", "id": frame["id"], "command": kind});
    match outcome.get("error") {
        Some(error) => {
            response["success"] = json!(false);
            response["error"] = error.clone();
        }
        None => {
            response["success"] = json!(true);
            response["data"] = outcome;
        }
    }
    feed(state, response);
}

fn user(text: &str) -> Value {
    json!({"id": format!("u-{text}"), "role": "user", "content": [{"type": "text", "text": text}]})
}

fn assistant(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "assistant", "content": [{"type": "text", "text": text}]})
}

fn sync(epoch: u64, messages: Vec<Value>, pending: Vec<Value>) -> Value {
    json!({"type": "sync", "agent_id": AGENT, "status": "idle", "mode": "build", "runtime_epoch": epoch,
           "capabilities": ["mode-catalog"], "live_window": {"messages": messages}, "pending_requests": pending})
}

fn permission(agent: &str, request_id: &str) -> Value {
    json!({"type": "permission_request", "agent_id": agent, "request_id": request_id, "tool_name": "bash",
           "input": {"command": "true"}, "prompt": "run true", "options": ["allow", "deny"]})
}

fn texts(state: &ClientState) -> Vec<String> {
    crate::transcript::items(state.screen.transcript)
        .iter()
        .map(|item| match item {
            Item::User { text, .. } => format!("user: {text}"),
            Item::Assistant { blocks, .. } => {
                let text: String = blocks
                    .iter()
                    .map(|block| match block {
                        Block::Text(text) | Block::Thinking(text) => text.as_str(),
                    })
                    .collect();
                format!("assistant: {text}")
            }
            other => format!("{other:?}"),
        })
        .collect()
}

fn hello(version: &str) -> Value {
    json!({"type": "hello", "protocol_version": version, "server_version": "shard", "capabilities": ["websocket"]})
}

/// A connected page looking at AGENT.
fn attached() -> (ClientState, Arc<Mutex<Vec<Value>>>) {
    let (state, sent) = page();
    assert!(matches!(feed(&state, hello(shard_protocol::PROTOCOL_VERSION)), Greeted::Yes));
    state.select(Some(AGENT.to_owned()));
    take(&sent);
    (state, sent)
}

#[test]
fn a_sync_replaces_the_transcript_and_the_agents_questions() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one"), assistant("e-2", "first")], vec![]));
    assert_eq!(texts(&state), ["user: one", "assistant: first"]);
    assert_eq!(state.screen.epoch.get_untracked(), Some(0));
    let asked = take(&sent);
    assert!(asked.iter().any(|frame| frame["type"] == "list_modes" && frame["agent_id"] == AGENT));
    // A question of this agent, then a resync that no longer holds it but a
    // new one: the sync is the truth.
    feed(&state, permission(AGENT, "perm-1"));
    let pending = json!({"type": "permission_request", "request_id": "perm-2", "tool_name": "bash",
                         "input": {}, "prompt": "again", "options": ["allow", "deny"]});
    feed(&state, sync(1, vec![user("one"), assistant("e-2", "first"), user("two")], vec![pending]));
    assert_eq!(
        texts(&state),
        ["user: one", "assistant: first", "user: two"],
        "replaced, not appended"
    );
    let open: Vec<String> = state
        .questions
        .open
        .with_untracked(|questions| questions.keys().map(|(_, request)| request.clone()).collect());
    assert_eq!(open, ["perm-2"]);
    assert_eq!(state.screen.epoch.get_untracked(), Some(1));
}

#[test]
fn deltas_are_reconciled_by_their_complete_message_and_never_doubled() {
    let (state, _) = attached();
    feed(&state, sync(0, vec![user("hi")], vec![]));
    for piece in ["You ", "said"] {
        feed(
            &state,
            json!({"type": "message_delta", "agent_id": AGENT, "message_id": "msg-1",
                            "block_index": 0, "kind": "text", "text_delta": piece}),
        );
    }
    assert_eq!(texts(&state), ["user: hi", "assistant: You said"]);
    feed(
        &state,
        json!({"type": "message_complete", "agent_id": AGENT, "message_id": "msg-1",
                        "message": assistant("e-2", "You said: hi")}),
    );
    assert_eq!(texts(&state), ["user: hi", "assistant: You said: hi"], "one message, final text");
    // A reconnect's sync already holds it; a late complete must not add it again.
    feed(&state, sync(0, vec![user("hi"), assistant("e-2", "You said: hi")], vec![]));
    feed(
        &state,
        json!({"type": "message_complete", "agent_id": AGENT, "message_id": "msg-1",
                        "message": assistant("e-2", "You said: hi")}),
    );
    assert_eq!(texts(&state), ["user: hi", "assistant: You said: hi"]);
}

#[test]
fn questions_come_from_any_agent_and_go_when_resolved_elsewhere() {
    let (state, _) = attached();
    feed(&state, sync(0, vec![], vec![]));
    feed(&state, permission(AGENT, "perm-1"));
    feed(&state, permission(OTHER, "perm-9"));
    assert_eq!(state.questions.open.with_untracked(|questions| questions.len()), 2);
    // Another tab answered this agent's: its resolution closes it here.
    feed(
        &state,
        json!({"type": "permission_resolved", "agent_id": AGENT, "request_id": "perm-1",
                        "decision": "allow", "source": "web"}),
    );
    // The other agent, not attached here, went back to work: answered elsewhere.
    feed(
        &state,
        json!({"type": "agent_status_changed", "agent_id": OTHER, "status": "streaming",
                        "runtime_state": "running"}),
    );
    assert_eq!(state.questions.open.with_untracked(|questions| questions.len()), 0);
}

fn node(state: &str) -> Value {
    json!({"id": "box", "state": state, "since": 5, "error": "ssh: connection refused"})
}

#[test]
fn nodes_are_listed_on_greeting_and_their_agent_is_attached_again_once_its_node_is_back() {
    let (state, sent) = page();
    assert!(matches!(feed(&state, hello(shard_protocol::PROTOCOL_VERSION)), Greeted::Yes));
    let asked = take(&sent);
    answer(&state, &asked, "node.list", json!({"nodes": [node("offline")]}));
    assert!(!state.nodes.reachable(Some("box")));
    assert!(state.nodes.reachable(None), "the hub's own");
    let remote = "agent-r@box";
    let info = json!({"agent_id": remote, "cwd": "/", "status": "idle", "runtime_state": "stopped",
        "created_at": 0, "node": "box"});
    answer(&state, &asked, "agent.list", json!({"agents": [info]}));

    // Opened while its node is down: refused, it stays on screen.
    state.select(Some(remote.to_owned()));
    let attach = take(&sent);
    answer(
        &state,
        &attach,
        "agent.attach",
        json!({"error": {"code": "NODE_OFFLINE", "message": "the node box is offline"}}),
    );
    assert_eq!(state.screen.selected.get_untracked().as_deref(), Some(remote));
    assert!(state.screen.unreached.get_untracked());
    // Another node's news, or this one still connecting, asks nothing.
    feed(
        &state,
        json!({"type": "node_changed", "node": {"id": "other", "state": "online", "since": 6}}),
    );
    feed(&state, json!({"type": "node_changed", "node": node("connecting")}));
    assert!(take(&sent).is_empty());
    assert_eq!(state.nodes.all.with_untracked(Vec::len), 2);
    // Back: attached again, for a sync of all of it.
    feed(
        &state,
        json!({"type": "node_changed", "node": {"id": "box", "state": "online", "since": 7}}),
    );
    let again = take(&sent);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(
        (&again[0]["type"], &again[0]["agent_id"]),
        (&json!("agent.attach"), &json!(remote))
    );
    assert_eq!(again[0].get("after_seq"), None);
    assert!(state.nodes.reachable(Some("box")));
    answer(&state, &again, "agent.attach", json!({"status": "idle", "info": info}));
    assert!(!state.screen.unreached.get_untracked());
}

#[test]
fn the_new_agent_form_offers_the_chosen_machines_runtimes_and_drops_a_stale_answer() {
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let asked = take(&sent);
    let hubs = asked.iter().find(|frame| frame["type"] == "runtime.list").expect("asked");
    assert_eq!(hubs.get("node"), None, "the hub's own at the greeting");
    let listed = |ids: &[&str], cwd: &str| {
        let runtimes: Vec<Value> =
            ids.iter().map(|id| json!({"id": id, "protocol": "acp"})).collect();
        json!({"runtimes": runtimes, "suggested_cwd": cwd})
    };
    // The machine changes before the hub's answer comes: the answer is
    // out of date, and only the node's is taken.
    state.roster.list_runtimes("box");
    let boxes = take(&sent);
    assert_eq!(boxes[0]["node"], "box");
    assert!(state.roster.runtimes.with_untracked(Vec::is_empty), "nothing until it answers");
    answer(&state, &asked, "runtime.list", listed(&["shard", "on-hub"], "/hub"));
    assert!(state.roster.runtimes.with_untracked(Vec::is_empty), "{:?}", state.roster.runtimes);
    answer(&state, &boxes, "runtime.list", listed(&["shard", "on-box"], "/box"));
    assert_eq!(state.roster.runtimes.get_untracked(), ["shard", "on-box"]);
    assert_eq!(state.roster.defaults.get_untracked().1.as_deref(), Some("/box"));
    // A node that cannot answer offers Shard's own agent only.
    state.roster.list_runtimes("box");
    let again = take(&sent);
    answer(
        &state,
        &again,
        "runtime.list",
        json!({"error": {"code": "NODE_OFFLINE", "message": "down"}}),
    );
    assert!(state.roster.runtimes.with_untracked(Vec::is_empty));
    // Back to the hub.
    state.roster.list_runtimes("");
    let hub_again = take(&sent);
    assert_eq!(hub_again[0].get("node"), None);
    answer(&state, &hub_again, "runtime.list", listed(&["shard", "on-hub"], "/hub"));
    assert_eq!(state.roster.runtimes.get_untracked(), ["shard", "on-hub"]);
}

#[test]
fn a_refused_answer_opens_its_question_again_unless_it_was_resolved_meanwhile() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![], vec![]));
    let open = || state.questions.open.with_untracked(|questions| questions.len());
    for request_id in ["perm-1", "perm-2"] {
        feed(&state, permission(AGENT, request_id));
    }
    let question = |request_id: &str| {
        state.questions.open.with_untracked(|questions| {
            let mine = |q: &&Question| q.agent_id == AGENT && q.request.request_id() == request_id;
            questions.values().find(mine).cloned()
        })
    };
    // A deny refused (its node went down on the way): open again.
    let deny = crate::questions::Answer::Permission(
        shard_protocol::agent::PermissionAnswer::Decision(shard_protocol::agent::Decision::Deny),
    );
    state.questions.answer(&question("perm-1").expect("open"), deny.clone());
    assert_eq!(open(), 1);
    let refused = json!({"error": {"code": "NODE_OFFLINE", "message": "the node box is offline"}});
    answer(&state, &take(&sent), "permission_response", refused.clone());
    assert_eq!(open(), 2, "the refused answer's question is back");
    // Another agent's question under the same request id is not this
    // one: its refusal brings back only its own.
    feed(&state, permission(OTHER, "perm-1"));
    assert_eq!(open(), 3);
    let other = state.questions.open.with_untracked(|questions| {
        questions.values().find(|q| q.agent_id == OTHER).cloned().expect("open")
    });
    state.questions.answer(&question("perm-1").expect("open"), deny.clone());
    let sent_mine = take(&sent);
    state.questions.answer(&other, deny.clone());
    let sent_other = take(&sent);
    assert_eq!(open(), 1);
    let refused_other = {
        let frame =
            sent_other.iter().find(|frame| frame["type"] == "permission_response").expect("sent");
        json!({"type": "response", "id": frame["id"], "command": "permission_response", "success": false,
            "error": {"code": "NODE_OFFLINE", "message": "down"}})
    };
    feed(&state, refused_other);
    let back: Vec<String> = state
        .questions
        .open
        .with_untracked(|questions| questions.values().map(|q| q.agent_id.clone()).collect());
    assert_eq!(back.iter().filter(|agent| agent.as_str() == OTHER).count(), 1, "{back:?}");
    answer(&state, &sent_mine, "permission_response", json!({}));
    assert_eq!(open(), 2, "its own answer taken, the other's question back");
    // Answered in another tab before this tab's answer was refused: it
    // stays closed.
    state.questions.answer(&question("perm-2").expect("open"), deny);
    let answered = take(&sent);
    feed(
        &state,
        json!({"type": "permission_resolved", "agent_id": AGENT, "request_id": "perm-2",
                        "decision": "allow", "source": "web"}),
    );
    answer(&state, &answered, "permission_response", refused);
    assert_eq!(open(), 1);
    assert!(question("perm-2").is_none());
}

#[test]
fn the_fleet_is_watched_from_the_greeting_and_a_moved_budget_lists_the_open_panel_again() {
    let (state, sent) = attached();
    take(&sent);
    assert!(matches!(feed(&state, hello(shard_protocol::PROTOCOL_VERSION)), Greeted::Yes));
    let asked = take(&sent);
    assert!(asked.iter().any(|frame| frame["type"] == "fleet.watch" && frame["watch"] == true));
    let agent = |rss: u64| {
        json!({"agent_id": AGENT, "resources":
        {"rss_bytes": rss, "pss_bytes": rss / 2, "cpu_percent": 1.0}})
    };
    let fleet = |rss: u64| {
        json!({"agents": [agent(rss)], "agents_total": agent(rss)["resources"],
        "daemon": {"rss_bytes": 1, "pss_bytes": 1, "cpu_percent": 0.0},
        "limits": {"max_awake_agents": 2}, "spend": []})
    };
    answer(&state, &asked, "fleet.watch", fleet(8 << 20));
    assert_eq!(state.fleet.of(AGENT).map(|used| used.pss_bytes), Some(4 << 20));
    assert_eq!(state.fleet.of(OTHER), None, "not running");
    let mut moved = fleet(16 << 20);
    moved["type"] = json!("fleet_updated");
    feed(&state, moved);
    assert_eq!(state.fleet.of(AGENT).map(|used| used.pss_bytes), Some(8 << 20));
    let limits = state.fleet.now.with_untracked(|now| now.as_ref().map(|now| now.limits));
    assert_eq!(limits.map(|limits| limits.max_awake_agents), Some(2));

    // A budget moved: with the panel closed nothing is asked; open, the
    // agent's budgets are listed again.
    let budget = json!({"type": "budget_updated", "budget": {"scope": "agent", "agent_id": AGENT,
        "period": "day", "cap_usd": 1.0, "spent_usd": 1.5, "spent_tokens": 10, "state": "reached",
        "source": "set", "period_start": 0, "resets_at": 1}});
    feed(&state, budget.clone());
    assert!(take(&sent).is_empty());
    state.fleet.budgets_open.set(true);
    state.fleet.list_budgets(AGENT);
    let listed = take(&sent);
    assert_eq!(listed[0]["type"], "budget.list");
    answer(&state, &listed, "budget.list", json!({"budgets": [budget["budget"]]}));
    feed(&state, budget);
    let again = take(&sent);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!((&again[0]["type"], &again[0]["agent_id"]), (&json!("budget.list"), &json!(AGENT)));
}

#[test]
fn a_reconnect_lists_and_reattaches_and_old_answers_are_void() {
    let (state, sent) = attached();
    let mut first = sync(0, vec![], vec![]);
    first["seq"] = json!(4);
    feed(&state, first);
    // Events of the agent on screen move its cursor; another agent's do not.
    feed(&state, json!({"type": "status", "agent_id": AGENT, "seq": 7, "status": "idle"}));
    feed(&state, json!({"type": "status", "agent_id": OTHER, "seq": 90, "status": "idle"}));
    assert_eq!(state.screen.cursor.get_untracked(), Some(7));
    let before = take(&sent);
    let modes = before.iter().find(|frame| frame["type"] == "list_modes").expect("asked").clone();
    // The connection drops: what it was waiting for will never be answered.
    state.connection_lost();
    assert!(matches!(feed(&state, hello(shard_protocol::PROTOCOL_VERSION)), Greeted::Yes));
    let again = take(&sent);
    let kinds: Vec<&str> = again.iter().filter_map(|frame| frame["type"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "agent.list",
            "runtime.list",
            "fleet.watch",
            "node.list",
            "workspace.list",
            "agent.attach"
        ]
    );
    assert_eq!(again[5]["agent_id"], AGENT);
    assert_eq!(again[5]["after_seq"], 7, "it resumes from its cursor");
    answer(
        &state,
        &again,
        "agent.attach",
        json!({"status": "idle", "resumed": true,
        "info": {"agent_id": AGENT, "cwd": "/", "status": "idle", "runtime_state": "running", "created_at": 0}}),
    );
    assert_eq!(state.screen.resumed.get_untracked(), Some(true));
    assert_eq!(state.link.connection.get_untracked(), Connection::Connected);
    // A stray answer to the old connection's request changes nothing.
    state.screen.catalogs.mode.set("build".to_owned());
    feed(
        &state,
        json!({"type": "response", "id": modes["id"], "command": "list_modes", "success": true,
                        "data": {"modes": [], "active": "plan"}}),
    );
    assert_eq!(state.screen.catalogs.mode.get_untracked(), "build");
}

#[test]
fn another_protocol_version_stops_the_page_with_a_reason() {
    let (state, sent) = page();
    assert!(matches!(feed(&state, hello("9.0.0")), Greeted::Mismatch));
    assert_eq!(state.link.connection.get_untracked(), Connection::Mismatch { newer: true });
    assert!(state.link.connection.get_untracked().label().contains("reload"));
    assert!(take(&sent).is_empty(), "nothing is sent to a daemon it cannot speak to");
}

#[test]
fn a_superseded_runtimes_catalog_is_dropped() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![], vec![]));
    let old = take(&sent);
    feed(&state, sync(1, vec![], vec![]));
    let new = take(&sent);
    let modes = json!({"modes": [{"name": "plan", "description": "read only"}], "active": "plan"});
    answer(&state, &old, "list_modes", modes.clone());
    assert_eq!(state.screen.catalogs.mode.get_untracked(), "build", "epoch 0's answer is history");
    answer(&state, &new, "list_modes", modes);
    assert_eq!(state.screen.catalogs.mode.get_untracked(), "plan");
}

#[test]
fn a_prompt_is_shown_once_accepted_and_a_refused_one_returns_to_the_box() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![], vec![]));
    take(&sent);
    assert!(state.screen.prompt("first", None));
    assert!(texts(&state).is_empty(), "not shown before it is accepted");
    answer(&state, &take(&sent), "prompt", json!(null));
    assert_eq!(texts(&state), ["user: first"]);

    assert!(state.screen.prompt("second", None));
    let frames = take(&sent);
    answer(
        &state,
        &frames,
        "prompt",
        json!({"error": {"code": "RUNTIME_START_FAILED", "message": "no cwd"}}),
    );
    assert_eq!(texts(&state), ["user: first"]);
    assert_eq!(state.screen.drafts.draft.get_untracked(), "second");
    assert!(
        state.screen.drafts.prompt_error.get_untracked().unwrap_or_default().contains("no cwd")
    );
}

#[test]
fn another_agent_waiting_is_peeked_at_for_its_questions() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![], vec![]));
    take(&sent);
    // OTHER, not on screen and not attached here, now waits for an answer.
    feed(
        &state,
        json!({"type": "agent_status_changed", "agent_id": OTHER, "status": "waiting_for_permission",
               "runtime_state": "running"}),
    );
    let frames = take(&sent);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["type"], "agent.attach");
    assert_eq!(frames[0]["agent_id"], OTHER);
    assert_eq!(frames[0]["role"], "observer", "a peek never answers or prompts");
    // A second change while the peek is out asks nothing more.
    feed(
        &state,
        json!({"type": "agent_status_changed", "agent_id": OTHER, "status": "waiting_for_permission",
               "runtime_state": "running"}),
    );
    assert!(take(&sent).is_empty());
    // Its sync brings the question; the transcript on screen is untouched.
    feed(
        &state,
        json!({"type": "message_delta", "agent_id": AGENT, "message_id": "m-1",
                        "block_index": 0, "kind": "text", "text_delta": "mine"}),
    );
    let pending = json!({"type": "permission_request", "request_id": "perm-7", "tool_name": "bash",
                         "input": {}, "prompt": "run it", "options": ["allow", "deny"]});
    let mut other = sync(0, vec![user("theirs")], vec![pending]);
    other["agent_id"] = json!(OTHER);
    feed(&state, other);
    let open: Vec<(String, String)> =
        state.questions.open.with_untracked(|questions| questions.keys().cloned().collect());
    assert_eq!(open, [(OTHER.to_owned(), "perm-7".to_owned())]);
    assert_eq!(texts(&state), ["assistant: mine"]);
    let frames = take(&sent);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        (frames[0]["type"].as_str(), frames[0]["agent_id"].as_str()),
        (Some("agent.detach"), Some(OTHER))
    );
}

/// A job of `parent` as `subagent.status` answers it, its runs on `agents`.
fn job(job_id: &str, parent: &str, runs: &[(&str, &str, &str)]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .enumerate()
        .map(|(index, (run_id, agent_id, state))| {
            json!({"job_id": job_id, "run_id": run_id, "index": index, "name": agent_id,
                   "agent_id": agent_id, "alias": agent_id, "state": state})
        })
        .collect();
    json!({"job_id": job_id, "parent_agent_id": parent, "strategy": "parallel",
           "state": "running", "runs": runs, "created_at": 1})
}

#[test]
fn run_changes_update_the_known_job_and_fetch_the_parent_s_jobs_when_it_ends() {
    let (state, sent) = page();
    feed(
        &state,
        json!({"type": "hello", "protocol_version": "0.1.0", "server_version": "t", "capabilities": []}),
    );
    let child = json!({"agent_id": OTHER, "cwd": "/", "status": "idle", "runtime_state": "stopped",
                       "created_at": 2, "parent_agent_id": AGENT, "alias": "scout"});
    let parent = json!({"agent_id": AGENT, "cwd": "/", "status": "idle", "runtime_state": "stopped", "created_at": 1});
    answer(&state, &take(&sent), "agent.list", json!({"agents": [parent, child]}));
    // The list names a parent: its jobs are asked for.
    let asked = take(&sent);
    let status = asked.iter().find(|frame| frame["type"] == "subagent.status").expect("asked");
    assert_eq!(status["parent_agent_id"], AGENT);
    answer(
        &state,
        &asked,
        "subagent.status",
        json!({"agents": [], "jobs": [job("job-1", AGENT, &[("run-1", OTHER, "queued")])]}),
    );
    assert_eq!(
        state.jobs.run_of(OTHER).map(|run| run.state),
        Some(shard_protocol::subagent::RunState::Queued)
    );

    // A move of a known run shows at once and asks nothing.
    feed(
        &state,
        json!({"type": "subagent_run_changed", "parent_agent_id": AGENT, "job_id": "job-1",
                        "run_id": "run-1", "agent_id": OTHER, "state": "active", "previous_state": "queued"}),
    );
    assert_eq!(
        state.jobs.run_of(OTHER).map(|run| run.state),
        Some(shard_protocol::subagent::RunState::Active)
    );
    assert!(take(&sent).is_empty());
    // Its end, or a job the page never saw, fetches the parent's jobs again.
    feed(
        &state,
        json!({"type": "subagent_run_changed", "parent_agent_id": AGENT, "job_id": "job-1",
                        "run_id": "run-1", "agent_id": OTHER, "state": "completed", "ended_at": 9}),
    );
    let asked = take(&sent);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["type"], "subagent.status");
    feed(
        &state,
        json!({"type": "subagent_run_changed", "parent_agent_id": AGENT, "job_id": "job-2",
                        "run_id": "run-2", "agent_id": OTHER, "state": "queued"}),
    );
    assert_eq!(take(&sent).len(), 1);
    let jobs = state.jobs.all.with_untracked(|jobs| jobs["job-1"].runs[0].ended_at);
    assert_eq!(jobs, Some(9));
}

fn workspace(lifecycle: &str) -> Value {
    json!({"workspace_id": "ws-1", "label": "fix", "cwd": "/home/.shard/worktrees/ws-1",
           "repository_cwd": "/src/app", "lifecycle": lifecycle, "branch": "shard/fix",
           "integration_target": "main", "created_at": 1, "agent_count": 1})
}

#[test]
fn a_workspace_launch_opens_its_agent_and_the_panel_follows_retirement() {
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let asked = take(&sent);
    let list = asked.iter().find(|frame| frame["type"] == "workspace.list").expect("asked");
    assert_eq!(list["include_retired"], true, "retired ones still head their agents");
    answer(&state, &asked, "workspace.list", json!({"workspaces": []}));

    // The runtimes the daemon has are the new-agent form's choices.
    let runtimes = json!({"runtimes": [{"id": "shard", "protocol": "shard"},
                                       {"id": "claude", "protocol": "acp"}]});
    answer(&state, &asked, "runtime.list", runtimes);
    assert_eq!(state.roster.runtimes.get_untracked(), ["shard", "claude"]);

    // The form's workspace.create: the agent it made is opened.
    let agent = crate::roster::NewAgent {
        node: "",
        cwd: " /src/app ",
        name: "fix",
        model: "",
        mode: "",
        runtime: "claude",
        sandbox: crate::sandbox::narrowing("", "deny"),
    };
    state.workspaces.create(crate::workspaces::NewWorkspace { agent, branch: "", base: "" });
    let asked = take(&sent);
    assert_eq!(asked[0]["type"], "workspace.create");
    assert_eq!(asked[0]["runtime"], "claude", "its agent runs the runtime chosen");
    assert_eq!(asked[0]["sandbox"], json!({"network": "deny"}), "only what it narrows");
    assert_eq!(asked[0]["cwd"], "/src/app");
    assert_eq!(asked[0]["label"], "fix");
    assert_eq!(asked[0]["name"], "fix");
    assert!(asked[0].get("branch").is_none(), "an empty branch is the daemon's to choose");
    let mut detail = workspace("active");
    detail["agent_ids"] = json!([AGENT]);
    answer(
        &state,
        &asked,
        "workspace.create",
        json!({"agent_id": AGENT, "session_id": "s-1", "workspace": detail}),
    );
    assert_eq!(state.screen.selected.get_untracked().as_deref(), Some(AGENT));
    assert!(state.workspaces.all.with_untracked(|known| known.contains_key("ws-1")));
    let agent = json!({"agent_id": AGENT, "cwd": "/home/.shard/worktrees/ws-1", "status": "idle",
                       "runtime_state": "running", "created_at": 1});
    feed(&state, json!({"type": "agent_spawned", "agent_id": AGENT, "info": agent}));
    assert_eq!(state.shown_workspace().map(|shown| shown.workspace_id), Some("ws-1".to_owned()));
    take(&sent);

    // An unmerged branch: the daemon asks, the page asks the user.
    state.workspaces.retire("ws-1", shard_protocol::workspace::BranchDisposition::DeleteIfMerged);
    let asked = take(&sent);
    assert_eq!(asked[0]["branch_disposition"], "delete_if_merged");
    answer(
        &state,
        &asked,
        "workspace.retire",
        json!({"error": {"code": "CONFLICT",
        "message": "branch `shard/fix` is not merged into `main`",
        "data": {"kind": "confirmation_required", "workspace_id": "ws-1", "reason": "r",
                 "confirmation_disposition": "delete_confirmed"}}}),
    );
    assert!(matches!(
        state.workspaces.retire_problem.get_untracked(),
        Some(crate::workspaces::RetireProblem::Confirm { workspace_id, .. }) if workspace_id == "ws-1"
    ));
    // Another refusal is shown in the daemon's words.
    let dirty = json!({"error": {"code": "CONFLICT",
        "message": "the worktree has 1 uncommitted changes", "data": {"kind": "dirty"}}});
    answer(&state, &asked, "workspace.retire", dirty.clone());
    assert!(
        matches!(
            state.workspaces.retire_problem.get_untracked(),
            Some(crate::workspaces::RetireProblem::Confirm { .. })
        ),
        "a second answer to one id is ignored"
    );
    state.workspaces.retire("ws-1", shard_protocol::workspace::BranchDisposition::Keep);
    answer(&state, &take(&sent), "workspace.retire", dirty);
    assert_eq!(
        state.workspaces.retire_problem.get_untracked(),
        Some(crate::workspaces::RetireProblem::Refused(
            "the worktree has 1 uncommitted changes".to_owned()
        ))
    );

    // Retired in another tab: the event updates the record and the panel
    // asks for a fresh status, whose answer it shows.
    feed(&state, json!({"type": "workspace_retired", "workspace": workspace("retired")}));
    let lifecycle = state.workspaces.all.with_untracked(|known| known["ws-1"].lifecycle);
    assert_eq!(lifecycle, shard_protocol::workspace::WorkspaceLifecycle::Retired);
    let asked = take(&sent);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["type"], "workspace.status");
    answer(&state, &asked, "workspace.status", json!({"workspace": workspace("retired")}));
    let shown = state
        .workspaces
        .detail
        .with_untracked(|detail| detail.as_ref().map(|d| d.decoded().unwrap().summary.lifecycle));
    assert_eq!(shown, Some(shard_protocol::workspace::WorkspaceLifecycle::Retired));
}

fn agent_row(agent_id: &str) -> Value {
    json!({"agent_id": agent_id, "cwd": "/p", "status": "idle", "runtime_state": "running", "created_at": 1})
}

#[test]
fn the_daemons_usage_rollup_sets_each_agents_total_and_a_usage_event_adds_nothing() {
    let (state, sent) = attached();
    state.roster.list();
    let list = take(&sent);
    answer(&state, &list, "agent.list", json!({"agents": [agent_row(AGENT), agent_row(OTHER)]}));
    let totals = json!({"input": 100, "output": 20, "cost": 0.5, "calls": 1, "unpriced_calls": 0, "turns": 1});
    feed(&state, json!({"type": "agent_usage", "agent_id": AGENT, "usage": totals}));
    // The agent's own usage event (this tab is attached) follows the
    // rollup: it must not be counted again.
    feed(
        &state,
        json!({"type": "usage", "agent_id": AGENT, "seq": 9, "input": 100, "output": 20,
                        "cost": 0.5, "context_tokens": 700}),
    );
    feed(
        &state,
        json!({"type": "agent_usage", "agent_id": OTHER, "usage": {"input": 5, "output": 1}}),
    );
    let usage = |agent: &str| {
        state.roster.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|known| known.agent_id == agent)
                .and_then(|known| known.usage.clone())
        })
    };
    let mine = usage(AGENT).expect("a total");
    assert_eq!((mine.input, mine.output, mine.cost), (100, 20, Some(0.5)));
    assert_eq!(mine.context_tokens, Some(700));
    assert_eq!(usage(OTHER).map(|other| other.input), Some(5));
    // With its usage panel open, the agent on screen's rollup is fetched
    // again; another agent's change fetches nothing.
    state.ledger.usage_open.set(true);
    take(&sent);
    feed(
        &state,
        json!({"type": "agent_usage", "agent_id": OTHER, "usage": {"input": 6, "output": 1}}),
    );
    assert!(take(&sent).is_empty());
    feed(&state, json!({"type": "agent_usage", "agent_id": AGENT, "usage": totals}));
    assert_eq!(take(&sent).iter().filter(|frame| frame["type"] == "usage.agent").count(), 1);
}

#[test]
fn an_agents_sandbox_follows_agent_sandbox_and_a_host_is_taken_back_by_revoke() {
    let (state, sent) = attached();
    state.roster.list();
    let list = take(&sent);
    let mut row = agent_row(AGENT);
    row["sandbox"] = json!({"mode": "workspace-write", "network": "ask"});
    answer(&state, &list, "agent.list", json!({"agents": [row, agent_row(OTHER)]}));
    let sandbox = |agent: &str| {
        state.roster.agents.with_untracked(|agents| {
            agents
                .iter()
                .find(|known| known.agent_id == agent)
                .and_then(|known| known.sandbox.clone())
        })
    };
    assert_eq!(sandbox(AGENT).map(|sandbox| sandbox.granted_hosts), Some(vec![]));
    // A host allowed always, in another tab: every client is told.
    let granted = json!({"mode": "workspace-write", "network": "ask",
        "allowed_hosts": ["example.test:8080"], "granted_hosts": ["example.test:8080"]});
    feed(&state, json!({"type": "agent_sandbox", "agent_id": AGENT, "sandbox": granted}));
    let now = sandbox(AGENT).expect("a sandbox");
    assert_eq!(now.granted_hosts, ["example.test:8080"]);
    assert_eq!(sandbox(OTHER), None, "another agent's row is its own");

    state.roster.revoke(AGENT.to_owned(), "example.test:8080".to_owned());
    let asked = take(&sent);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["type"], "sandbox.revoke");
    assert_eq!(
        (asked[0]["agent_id"].as_str(), asked[0]["host"].as_str()),
        (Some(AGENT), Some("example.test:8080"))
    );
    let back = json!({"mode": "workspace-write", "network": "ask"});
    answer(&state, &asked, "sandbox.revoke", json!({"agent_id": AGENT, "sandbox": back.clone()}));
    feed(&state, json!({"type": "agent_sandbox", "agent_id": AGENT, "sandbox": back}));
    assert!(sandbox(AGENT).expect("a sandbox").granted_hosts.is_empty());
    assert_eq!(state.link.notice.get_untracked(), None);
    // Taken back already (elsewhere): the page says why nothing happened.
    state.roster.revoke(AGENT.to_owned(), "example.test:8080".to_owned());
    let asked = take(&sent);
    let gone =
        json!({"error": {"code": "NOT_FOUND", "message": "example.test:8080 is not granted"}});
    answer(&state, &asked, "sandbox.revoke", gone);
    assert!(state.link.notice.get_untracked().is_some_and(|notice| notice.contains("not granted")));
}

#[test]
fn a_queued_prompt_taken_back_leaves_the_transcript_and_returns_to_the_box() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one")], vec![]));
    feed(&state, json!({"type": "status", "agent_id": AGENT, "status": "streaming"}));
    take(&sent);
    assert!(
        state.screen.prompt(
            "wait, use the other file",
            Some(shard_protocol::agent::StreamingBehavior::Steer)
        )
    );
    let frames = take(&sent);
    answer(&state, &frames, "prompt", json!(null));
    assert_eq!(state.screen.drafts.queued.get_untracked(), 1);
    assert_eq!(texts(&state), ["user: one", "user: wait, use the other file"]);
    state.screen.recall();
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "recall_steer");
    assert_eq!(frames[0]["agent_id"], AGENT);
    answer(
        &state,
        &frames,
        "recall_steer",
        json!({"recalled": {"message": "wait, use the other file", "streaming_behavior": "steer"}}),
    );
    assert_eq!(texts(&state), ["user: one"], "its row is gone");
    assert_eq!(state.screen.drafts.draft.get_untracked(), "wait, use the other file");
    assert_eq!(state.screen.drafts.queued.get_untracked(), 0);
    // Nothing left: said so, and nothing else changes.
    state.screen.recall();
    let frames = take(&sent);
    answer(&state, &frames, "recall_steer", json!({"recalled": null}));
    let note = state.ledger.note.get_untracked().expect("a note");
    assert!(note.text.contains("Nothing to take back"), "{note:?}");
    assert_eq!(texts(&state), ["user: one"]);
}

#[test]
fn an_aborted_turn_is_marked_and_gives_back_only_what_this_tab_queued() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one")], vec![]));
    feed(&state, json!({"type": "status", "agent_id": AGENT, "status": "streaming"}));
    take(&sent);
    // Two follow-ups with the same text, and one another tab queued.
    for _ in 0..2 {
        assert!(state.screen.prompt("again", Some(StreamingBehavior::FollowUp)));
        let frames = take(&sent);
        answer(&state, &frames, "prompt", json!(null));
    }
    assert_eq!(texts(&state), ["user: one", "user: again", "user: again"]);
    let ended = json!({"type": "turn_end", "agent_id": AGENT, "turn_id": "t", "aborted": true,
                       "dropped": ["again", "from elsewhere", "again"]});
    feed(&state, ended);
    let notice = "Notice { text: \"Stopped here: the turn was aborted. What you had queued was not \
                  sent; it is back in the message box.\", error: false, retry: None }";
    assert_eq!(texts(&state), ["user: one", notice]);
    assert_eq!(state.screen.drafts.draft.get_untracked(), "again\n\nagain");
    assert_eq!(state.screen.drafts.queued.get_untracked(), 0);

    // Something new in the box stays; the note names what was not sent.
    state.screen.drafts.draft.set("new words".to_owned());
    assert!(state.screen.prompt("later", Some(StreamingBehavior::FollowUp)));
    let frames = take(&sent);
    answer(&state, &frames, "prompt", json!(null));
    state.screen.drafts.draft.set("new words".to_owned());
    feed(
        &state,
        json!({"type": "turn_end", "agent_id": AGENT, "turn_id": "u", "aborted": true,
                        "dropped": ["later"]}),
    );
    assert_eq!(state.screen.drafts.draft.get_untracked(), "new words");
    let last = texts(&state).pop().expect("a line");
    assert!(last.contains("Stopped here: the turn was aborted. Not sent: later"), "{last}");

    // A turn that ended by itself adds nothing.
    let before = texts(&state).len();
    feed(&state, json!({"type": "turn_end", "agent_id": AGENT, "turn_id": "v"}));
    assert_eq!(texts(&state).len(), before);
}

#[test]
fn a_reply_an_abort_cut_off_says_so_live_and_after_a_sync() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one")], vec![]));
    feed(&state, json!({"type": "status", "agent_id": AGENT, "status": "streaming"}));
    take(&sent);
    let cut = |items: Vec<Item>| {
        items
            .into_iter()
            .filter_map(|item| match item {
                Item::Assistant { aborted, .. } => Some(aborted),
                _ => None,
            })
            .collect::<Vec<bool>>()
    };
    feed(
        &state,
        json!({"type": "message_delta", "agent_id": AGENT, "message_id": "m-1",
                        "block_index": 0, "kind": "text", "text_delta": "tick-1 tick-2"}),
    );
    feed(
        &state,
        json!({"type": "message_complete", "agent_id": AGENT, "message_id": "m-1",
                        "message": {"id": "e-2", "role": "assistant", "aborted": true,
                                    "content": [{"type": "text", "text": "tick-1 tick-2"}]}}),
    );
    assert_eq!(cut(crate::transcript::items(state.screen.transcript)), [true]);
    // The reply says where it stopped: the turn's end adds no line of its own.
    feed(&state, json!({"type": "turn_end", "agent_id": AGENT, "turn_id": "t", "aborted": true}));
    assert_eq!(texts(&state), ["user: one", "assistant: tick-1 tick-2"]);
    // A message queued behind it, from another tab: only that is said.
    feed(
        &state,
        json!({"type": "turn_end", "agent_id": AGENT, "turn_id": "t", "aborted": true,
                        "dropped": ["elsewhere"]}),
    );
    let last = texts(&state).pop().expect("a line");
    assert!(last.contains("\"A message queued behind it was dropped.\""), "{last}");

    // A tab that syncs later shows the same mark, and keeps it on a resync.
    let (later, _) = attached();
    let mut reply = assistant("e-2", "tick-1 tick-2");
    reply["aborted"] = json!(true);
    feed(&later, sync(0, vec![user("one"), reply.clone()], vec![]));
    assert_eq!(cut(crate::transcript::items(later.screen.transcript)), [true]);
    feed(&later, sync(0, vec![user("one"), reply, user("two"), assistant("e-4", "done")], vec![]));
    assert_eq!(cut(crate::transcript::items(later.screen.transcript)), [true, false]);
}

#[test]
fn a_fork_offers_the_switch_and_a_switch_refused_says_why() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one"), assistant("e-2", "first")], vec![]));
    take(&sent);
    state.ledger.fork_at("e-2");
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "session_op");
    assert_eq!(frames[0]["args"]["from_entry_id"], "e-2");
    answer(
        &state,
        &frames,
        "session_op",
        json!({"fork_id": "fork-1", "session_id": "sess-f", "head_entry_id": "e-9"}),
    );
    assert_eq!(state.ledger.forked.get_untracked().as_deref(), Some("sess-f"));
    assert!(state.ledger.sessions_open.get_untracked(), "the sessions panel opens");
    let frames = take(&sent);
    assert!(frames.iter().any(|frame| frame["type"] == "session_op" && frame["op"] == "list"));
    state.ledger.activate_session("sess-f");
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "session.activate");
    assert_eq!(frames[0]["agent_id"], AGENT);
    answer(
        &state,
        &frames,
        "session.activate",
        json!({"error": {"code": "CONFLICT", "message": "the agent has work in hand"}}),
    );
    let note = state.ledger.note.get_untracked().expect("a note");
    assert!(note.error && note.text.contains("work in hand"), "{note:?}");
    assert_eq!(state.ledger.forked.get_untracked().as_deref(), Some("sess-f"), "still offered");
}

#[test]
fn a_terminate_put_off_until_the_reply_ends_says_so() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("one")], vec![]));
    take(&sent);
    state.screen.terminate();
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "agent.terminate");
    answer(&state, &frames, "agent.terminate", json!({"deferred": true}));
    let last = texts(&state).pop().expect("a line");
    assert!(last.contains("Terminating once the reply in progress ends"), "{last}");
    // At once: nothing to say, the status says it.
    let before = texts(&state).len();
    state.screen.terminate();
    let frames = take(&sent);
    answer(&state, &frames, "agent.terminate", json!({"deferred": false}));
    assert_eq!(texts(&state).len(), before);
}

#[test]
fn edit_forks_before_the_message_switches_there_and_puts_it_in_the_box() {
    let (state, sent) = attached();
    let messages =
        vec![user("one"), assistant("e-2", "first"), user("two"), assistant("e-4", "2nd")];
    feed(&state, sync(0, messages, vec![]));
    take(&sent);
    // The first message has nothing before it; the second forks at the reply.
    let rows = state.screen.transcript;
    assert_eq!(crate::transcript::entry_before(rows, "u-one"), None);
    assert_eq!(crate::transcript::entry_before(rows, "u-two").as_deref(), Some("e-2"));
    state.ledger.edit_from("e-2", "two".to_owned());
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "session_op");
    assert_eq!(frames[0]["op"], "fork");
    assert_eq!(frames[0]["args"]["from_entry_id"], "e-2");
    answer(
        &state,
        &frames,
        "session_op",
        json!({"fork_id": "fork-1", "session_id": "sess-f", "head_entry_id": "e-9"}),
    );
    assert_eq!(state.screen.drafts.draft.get_untracked(), "two", "the message, to change");
    let frames = take(&sent);
    assert_eq!(frames[0]["type"], "session.activate", "switched at once: {frames:?}");
    assert_eq!(frames[0]["session_id"], "sess-f");
    answer(
        &state,
        &frames,
        "session.activate",
        json!({"agent_id": AGENT, "session_id": "sess-f", "previous_session_id": "sess-1"}),
    );
    let note = state.ledger.note.get_untracked().expect("a note");
    assert!(note.text.contains("change it and send it"), "{note:?}");
    assert_eq!(state.ledger.forked.get_untracked(), None, "no switch left to offer");

    // Something new in the box stays there; a refused fork says why.
    state.screen.drafts.draft.set("mine".to_owned());
    state.ledger.edit_from("e-2", "two".to_owned());
    let frames = take(&sent);
    answer(
        &state,
        &frames,
        "session_op",
        json!({"error": {"code": "CONFLICT", "message": "mid-turn"}}),
    );
    assert_eq!(state.screen.drafts.draft.get_untracked(), "mine");
    let note = state.ledger.note.get_untracked().expect("a note");
    assert!(note.error && note.text.contains("Could not edit there: mid-turn"), "{note:?}");
    assert!(take(&sent).iter().all(|frame| frame["type"] != "session.activate"));
}

#[test]
fn a_stopped_runtime_leaves_nothing_streaming_or_waiting_on_screen() {
    let (state, sent) = attached();
    feed(&state, sync(0, vec![user("run")], vec![]));
    feed(&state, json!({"type": "status", "agent_id": AGENT, "status": "waiting_for_permission"}));
    feed(&state, permission(AGENT, "perm-1"));
    feed(&state, permission(OTHER, "perm-9"));
    state.screen.drafts.queued.set(1);
    // Killed: the registry says so; the process will say nothing more.
    feed(
        &state,
        json!({"type": "agent_status_changed", "agent_id": AGENT, "status": "idle",
               "runtime_state": "stopped"}),
    );
    assert_eq!(state.screen.status.get_untracked(), AgentStatus::Idle);
    assert_eq!(state.screen.drafts.queued.get_untracked(), 0);
    let open: Vec<String> = state
        .questions
        .open
        .with_untracked(|questions| questions.keys().map(|(_, request)| request.clone()).collect());
    assert_eq!(open, ["perm-9"], "another agent's question stays");
    // What the next runtime settled (a call closed as interrupted) only a
    // sync tells: a reconnect asks for one instead of resuming.
    state.connection_lost();
    take(&sent);
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let again = take(&sent);
    let attach = again.iter().find(|frame| frame["type"] == "agent.attach").expect("attached");
    assert!(attach.get("after_seq").is_none(), "a sync, not a resume: {attach}");
    let mut synced = sync(1, vec![user("run")], vec![]);
    synced["seq"] = json!(12);
    feed(&state, synced);
    state.connection_lost();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let again = take(&sent);
    let attach = again.iter().find(|frame| frame["type"] == "agent.attach").expect("attached");
    assert_eq!(attach["after_seq"], 12, "synced since: a resume is enough");
}

#[test]
fn a_sync_settles_what_the_tab_had_queued() {
    let (state, _) = attached();
    feed(&state, sync(0, vec![], vec![]));
    feed(&state, json!({"type": "status", "agent_id": AGENT, "status": "streaming"}));
    state.screen.drafts.queued.set(2);
    let mut streaming = sync(1, vec![user("hi")], vec![]);
    streaming["status"] = json!("streaming");
    feed(&state, streaming);
    assert_eq!(state.screen.drafts.queued.get_untracked(), 2, "mid-turn, they may still land");
    feed(&state, sync(1, vec![user("hi")], vec![]));
    assert_eq!(state.screen.status.get_untracked(), AgentStatus::Idle);
    assert_eq!(state.screen.drafts.queued.get_untracked(), 0);
}

#[test]
fn a_resume_that_finds_the_agent_settled_asks_for_a_sync() {
    let (state, sent) = attached();
    let mut first = sync(0, vec![user("run")], vec![]);
    first["seq"] = json!(4);
    feed(&state, first);
    feed(
        &state,
        json!({"type": "status", "agent_id": AGENT, "seq": 5, "status": "waiting_for_permission"}),
    );
    // The daemon restarts: the page reconnects and resumes from its cursor,
    // but the agent settled meanwhile, with no event saying how.
    state.connection_lost();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let again = take(&sent);
    let info = json!({"agent_id": AGENT, "cwd": "/", "status": "idle", "runtime_state": "running",
                      "created_at": 0});
    answer(
        &state,
        &again,
        "agent.attach",
        json!({"status": "idle", "resumed": true, "info": info}),
    );
    let asked = take(&sent);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["type"], "agent.attach");
    assert_eq!(asked[0]["agent_id"], AGENT);
    assert!(asked[0].get("after_seq").is_none(), "a sync, not a resume: {}", asked[0]);
    // Resumed mid-turn (still busy): the events that follow are enough.
    feed(&state, json!({"type": "status", "agent_id": AGENT, "seq": 6, "status": "streaming"}));
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    let again = take(&sent);
    let busy = json!({"status": "streaming", "resumed": true, "info": info});
    answer(&state, &again, "agent.attach", busy);
    assert!(take(&sent).is_empty());
}

#[test]
fn the_not_connected_notice_goes_once_connected_again() {
    let (state, sent) = page();
    state.link.disconnect();
    state.roster.list();
    assert_eq!(state.link.notice.get_untracked().as_deref(), Some(NOT_CONNECTED));
    record(&state, &sent);
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    assert_eq!(state.link.notice.get_untracked(), None);
    assert!(!take(&sent).is_empty());
    // Any other notice is still worth reading.
    state.link.notice.set(Some("This browser is now enrolled.".to_owned()));
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    assert_eq!(state.link.notice.get_untracked().as_deref(), Some("This browser is now enrolled."));
}

/// An `agent.list` answer listing `agents` as (id, status).
fn listing(agents: &[(&str, &str)]) -> Value {
    let agents: Vec<Value> = agents
        .iter()
        .map(|(id, status)| {
            json!({"agent_id": id, "cwd": "/", "status": status, "runtime_state": "running", "created_at": 0})
        })
        .collect();
    json!({"agents": agents})
}

#[test]
fn after_a_reconnect_the_inbox_is_what_the_daemon_says_not_what_the_page_had() {
    const THIRD: &str = "agent-c";
    let (state, sent) = attached();
    feed(&state, sync(0, vec![], vec![]));
    // Before the drop the page knew a question of OTHER and one of THIRD.
    let known = |agent: &str, request_id: &str| {
        crate::questions::Question {
        agent_id: agent.to_owned(),
        request: serde_json::from_value(json!({"type": "permission_request", "request_id": request_id,
            "tool_name": "bash", "input": {}, "prompt": "asked before", "options": ["allow", "deny"]}))
        .expect("request"),
    }
    };
    state.questions.add(known(OTHER, "perm-1"));
    state.questions.add(known(THIRD, "perm-9"));
    take(&sent);
    // Offline, both were answered elsewhere, and OTHER asked something new.
    state.connection_lost();
    assert!(matches!(feed(&state, hello(shard_protocol::PROTOCOL_VERSION)), Greeted::Yes));
    let again = take(&sent);
    answer(
        &state,
        &again,
        "agent.list",
        listing(&[(AGENT, "idle"), (OTHER, "waiting_for_permission"), (THIRD, "idle")]),
    );
    // THIRD waits for nothing: its question leaves the inbox at once.
    let open = |state: &ClientState| -> Vec<(String, String)> {
        state.questions.open.with_untracked(|questions| questions.keys().cloned().collect())
    };
    assert_eq!(open(&state), [(OTHER.to_owned(), "perm-1".to_owned())]);
    // OTHER waits: its questions are asked again, though one was known.
    let frames = take(&sent);
    let peek = frames
        .iter()
        .find(|frame| frame["type"] == "agent.attach" && frame["agent_id"] == OTHER)
        .expect("OTHER is peeked at again");
    assert_eq!(peek["role"], "observer");
    let mut other = sync(
        0,
        vec![],
        vec![json!({"type": "permission_request", "request_id": "perm-2",
        "tool_name": "bash", "input": {}, "prompt": "new", "options": ["allow", "deny"]})],
    );
    other["agent_id"] = json!(OTHER);
    feed(&state, other);
    assert_eq!(open(&state), [(OTHER.to_owned(), "perm-2".to_owned())]);
}

#[test]
fn workspace_actions_come_with_the_daemon_and_go_from_preview_to_result() {
    use crate::workspaces::{Acting, Action};
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    assert!(!state.workspaces.actions.get_untracked(), "an older daemon offers none");
    let mut greeting = hello(shard_protocol::PROTOCOL_VERSION);
    greeting["capabilities"] = json!(["websocket", "workspace-actions"]);
    feed(&state, greeting);
    assert!(state.workspaces.actions.get_untracked());
    feed(&state, json!({"type": "workspace_created", "workspace": workspace("active")}));
    let agent = json!({"agent_id": AGENT, "cwd": "/home/.shard/worktrees/ws-1", "status": "idle",
                       "runtime_state": "running", "created_at": 1});
    feed(&state, json!({"type": "agent_spawned", "agent_id": AGENT, "info": agent}));
    state.select(Some(AGENT.to_owned()));
    take(&sent);

    // The dry run, then its preview waiting for a yes.
    state.workspaces.preview("ws-1", Action::Merge);
    let asked = take(&sent);
    assert_eq!(asked[0]["type"], "workspace.merge");
    assert_eq!(asked[0]["dry_run"], true);
    assert_eq!(state.workspaces.acting.get_untracked(), Some(Acting::Previewing(Action::Merge)));
    let preview = json!({"workspace_id": "ws-1", "summary": "Fast-forwards `main`.",
                         "fingerprint": "f-1", "branch": "shard/fix", "file_count": 1,
                         "files": [{"status": "A", "path": "a.txt"}], "commits": 1,
                         "merge": "fast_forward", "target": "main"});
    answer(&state, &asked, "workspace.merge", preview);
    let Some(Acting::Preview(Action::Merge, shown)) = state.workspaces.acting.get_untracked()
    else {
        panic!("a preview")
    };
    let shown = shown.decoded().expect("the panel reads the preview");
    assert_eq!(shown.files[0].path, "a.txt");

    // The yes: the fingerprint goes back; the result and the fresh status show.
    state.workspaces.act("ws-1", Action::Merge, shown.fingerprint, "ignored".to_owned());
    let asked = take(&sent);
    assert_eq!(asked[0]["fingerprint"], "f-1");
    assert!(asked[0].get("dry_run").is_none() && asked[0].get("message").is_none(), "{asked:?}");
    let mut detail = workspace("active");
    detail["agent_ids"] = json!([AGENT]);
    detail["merged"] = json!(true);
    answer(
        &state,
        &asked,
        "workspace.merge",
        json!({"summary": "Fast-forwarded `main`.", "commit": "c0ffee", "workspace": detail}),
    );
    assert_eq!(
        state.workspaces.acting.get_untracked(),
        Some(Acting::Done("Fast-forwarded `main`.".to_owned()))
    );
    assert_eq!(
        state.workspaces.detail.with_untracked(|d| d.as_ref().and_then(|d| d
            .decoded()
            .unwrap()
            .state
            .merged)),
        Some(true)
    );

    // A refusal, in the daemon's words; a commit sends its message.
    state.workspaces.act("ws-1", Action::Commit, "f-2".to_owned(), "Add a".to_owned());
    let asked = take(&sent);
    assert_eq!(
        (&asked[0]["type"], &asked[0]["message"]),
        (&json!("workspace.commit"), &json!("Add a"))
    );
    let stale = json!({"error": {"code": "CONFLICT", "message": "the workspace changed since the preview",
                                 "data": {"kind": "stale"}}});
    answer(&state, &asked, "workspace.commit", stale);
    assert_eq!(
        state.workspaces.acting.get_untracked(),
        Some(Acting::Refused("the workspace changed since the preview".to_owned()))
    );
}

fn hit(agent: &str, session: &str, entry: &str, active: bool) -> Value {
    json!({"agent_id": agent, "agent_name": "finder", "session_id": session, "active": active,
           "entry_id": entry, "role": "user", "at": 1,
           "snippet": [{"text": "the "}, {"text": "wombat", "hit": true}]})
}

/// The entry of the row marked on screen, if any.
fn marked_entry(state: &ClientState) -> Option<String> {
    let key = state.find.marked.get_untracked()?;
    state.screen.transcript.with_untracked(|rows| {
        rows.iter().find(|row| row.key == key).and_then(crate::transcript::entry_of)
    })
}

fn entry(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}]})
}

#[test]
fn typing_in_the_search_box_keeps_one_query_out_and_drops_stale_answers() {
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    take(&sent);
    state.search.typed("wom".into());
    state.search.typed("womb".into());
    state.search.typed("wombat".into());
    let asked = take(&sent);
    assert_eq!(asked.len(), 1, "one query at a time: {asked:?}");
    assert_eq!(asked[0]["query"], "wom");
    // The answer for words no longer in the box asks for the box's words.
    answer(&state, &asked, "search.query", json!({"results": [hit(OTHER, "sess-1", "e-1", true)]}));
    let next = take(&sent);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0]["query"], "wombat");
    assert_eq!(state.search.outcome.get_untracked(), crate::search::Outcome::Searching);
    let results = json!({"results": [hit(AGENT, "sess-1", "e-1", true), hit(OTHER, "sess-2", "e-3", true),
                                     hit(AGENT, "sess-1", "e-2", true)]});
    answer(&state, &next, "search.query", results);
    let crate::search::Outcome::Found(found) = state.search.outcome.get_untracked() else {
        panic!("no results")
    };
    let groups = crate::search::grouped(found.decoded().expect("the panel reads them").results);
    let grouped: Vec<(&str, usize)> =
        groups.iter().map(|group| (group.agent_id.as_str(), group.hits.len())).collect();
    assert_eq!(grouped, [(AGENT, 2), (OTHER, 1)], "by agent, in the order of each one's best");
    // A refusal is said; an empty box asks nothing.
    state.search.typed("*".into());
    let refused = take(&sent);
    answer(
        &state,
        &refused,
        "search.query",
        json!({"error": {"code": "INVALID_REQUEST", "message": "no words"}}),
    );
    assert_eq!(
        state.search.outcome.get_untracked(),
        crate::search::Outcome::Failed("no words".into())
    );
    state.search.typed("  ".into());
    assert!(take(&sent).is_empty());
    assert_eq!(state.search.outcome.get_untracked(), crate::search::Outcome::Nothing);
}

#[test]
fn a_search_result_opens_its_agent_and_marks_its_message_once_the_sync_holds_it() {
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    take(&sent);
    let found: shard_protocol::search::SearchHit =
        serde_json::from_value(hit(AGENT, "sess-1", "e-2", true)).expect("hit");
    state.search.open.set(true);
    state.open_hit(&found);
    assert!(!state.search.open.get_untracked(), "the panel closes");
    assert_eq!(state.screen.selected.get_untracked().as_deref(), Some(AGENT));
    assert!(take(&sent).iter().any(|frame| frame["type"] == "agent.attach"));
    assert_eq!(marked_entry(&state), None, "nothing to mark before the sync");
    feed(
        &state,
        sync(
            0,
            vec![entry("e-1", "hello"), entry("e-2", "the wombat"), assistant("e-3", "ok")],
            vec![],
        ),
    );
    assert_eq!(marked_entry(&state).as_deref(), Some("e-2"));
    // Sent a prompt: the mark lets the view follow the end again.
    assert!(state.screen.prompt("more", None));
    let prompted = take(&sent);
    answer(&state, &prompted, "prompt", json!(null));
    assert_eq!(marked_entry(&state), None);

    // On screen already: a sync tells the entries of rows shown before
    // they were known (this tab's own prompt), then marks the message.
    let mine: shard_protocol::search::SearchHit =
        serde_json::from_value(hit(AGENT, "sess-1", "e-4", true)).expect("hit");
    state.open_hit(&mine);
    assert!(take(&sent).iter().any(|frame| frame["type"] == "agent.attach"), "a fresh sync");
    let window = vec![entry("e-1", "hello"), entry("e-2", "the wombat"), assistant("e-3", "ok")];
    let mut later = window.clone();
    later.push(entry("e-4", "more"));
    feed(&state, sync(0, later, vec![]));
    assert_eq!(marked_entry(&state).as_deref(), Some("e-4"));
    // A message compaction took away: said so.
    let gone: shard_protocol::search::SearchHit =
        serde_json::from_value(hit(AGENT, "sess-1", "e-0", true)).expect("hit");
    state.open_hit(&gone);
    feed(&state, sync(0, window, vec![]));
    assert_eq!(marked_entry(&state), None);
    let note = state.ledger.note.get_untracked().expect("a note");
    assert_eq!(note.text, crate::find::COMPACTED);
}

#[test]
fn a_result_in_another_session_waits_for_the_switch_to_it() {
    let (state, sent) = page();
    feed(&state, hello(shard_protocol::PROTOCOL_VERSION));
    take(&sent);
    let found: shard_protocol::search::SearchHit =
        serde_json::from_value(hit(AGENT, "sess-old", "e-2", false)).expect("hit");
    state.open_hit(&found);
    assert_eq!(state.ledger.elsewhere.get_untracked().as_deref(), Some("sess-old"));
    assert!(state.ledger.sessions_open.get_untracked(), "the sessions panel offers the switch");
    // The agent's session now has an e-2 too, of another conversation.
    feed(&state, sync(0, vec![entry("e-1", "now"), entry("e-2", "other e-2")], vec![]));
    assert_eq!(marked_entry(&state), None, "not that session's e-2");
    state.ledger.activate_session("sess-old");
    let asked = take(&sent);
    answer(
        &state,
        &asked,
        "session.activate",
        json!({"agent_id": AGENT, "session_id": "sess-old", "previous_session_id": "sess-now"}),
    );
    assert_eq!(state.ledger.elsewhere.get_untracked(), None);
    feed(&state, sync(1, vec![entry("e-1", "then"), entry("e-2", "the wombat")], vec![]));
    assert_eq!(marked_entry(&state).as_deref(), Some("e-2"));
}

#[test]
fn find_sees_the_whole_transcript_and_moves_the_window_to_what_it_marks() {
    let (state, _sent) = attached();
    let mut messages = vec![entry("e-0", "the Capybara password")];
    for at in 1..=400 {
        messages.push(assistant(&format!("e-{at}"), &format!("filler {at}")));
    }
    messages.push(entry("e-401", "capybara again"));
    feed(&state, sync(0, messages, vec![]));
    assert_eq!(state.screen.window_start.get_untracked(), None, "following the end");
    let find = state.find;
    find.find("CAPYBARA".into());
    assert_eq!(find.count_label(), "1 of 2");
    assert_eq!(marked_entry(&state).as_deref(), Some("e-0"));
    // The first row is far outside the 300 rendered: the window moves to it.
    let start = state.screen.window_start.get_untracked();
    assert!(crate::transcript::shown(start, 402).contains(&0), "{start:?}");
    find.step(true);
    assert_eq!(
        (find.count_label().as_str(), marked_entry(&state).as_deref()),
        ("2 of 2", Some("e-401"))
    );
    let start = state.screen.window_start.get_untracked();
    assert!(crate::transcript::shown(start, 402).contains(&401), "{start:?}");
    find.step(true);
    assert_eq!(marked_entry(&state).as_deref(), Some("e-0"), "round the end");
    find.step(false);
    assert_eq!(marked_entry(&state).as_deref(), Some("e-401"), "and back");
    find.find("no such thing".into());
    assert_eq!((find.count_label().as_str(), marked_entry(&state)), ("no match", None));
    // Another agent on screen: nothing found in this one stays.
    find.find("filler 7".into());
    assert!(find.hits.with_untracked(|hits| hits.len()) >= 1);
    state.select(Some(OTHER.to_owned()));
    assert!(!find.open.get_untracked());
    assert_eq!(find.hits.with_untracked(Vec::len), 0);
    assert_eq!(find.marked.get_untracked(), None);
}
