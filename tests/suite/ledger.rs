//! The daemon's durable records beside the journal (docs/PROTOCOL-NOTES.md,
//! "Usage rollups" and "Approval history"): what every turn, session, agent
//! and the whole daemon spent, with cost where config.toml prices the
//! model, and every question an agent asked with who answered it, from
//! where and when; both across a daemon restart.

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::{Browser, Client};
use super::support::Daemon;

/// The demo model priced so that a call's cost is its input tokens plus
/// twice its output tokens, exactly.
const PRICED_DEMO: &str = "[prices.demo]\ninput = 1000000.0\noutput = 2000000.0\n";

fn data(response: &Value) -> &Value {
    assert_eq!(response["success"], true, "{response}");
    &response["data"]
}

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or_else(|| panic!("not a number: {value}"))
}

/// Runs one prompt to its end, answering every permission question with
/// `decision`; returns the turn's events.
async fn turn(client: &mut Client, agent: &str, message: &str, decision: &str) -> Vec<Value> {
    let id = format!("prompt-{message}");
    let response =
        client.call(&id, json!({"type": "prompt", "agent_id": agent, "message": message}));
    assert_eq!(response.await["success"], true);
    let mut read = Vec::new();
    loop {
        let message = client.next().await;
        if message["agent_id"] != agent {
            read.push(message);
            continue;
        }
        if message["type"] == "permission_request" {
            client.send(json!({"type": "permission_response", "agent_id": agent,
                "request_id": message["request_id"], "decision": decision}));
        }
        let done = message["type"] == "turn_end";
        read.push(message);
        if done {
            return read;
        }
    }
}

/// Tokens and calls of the `usage` events among `events`.
fn spent(events: &[Value], agent: &str) -> (u64, u64, u64) {
    let calls: Vec<&Value> =
        events.iter().filter(|m| m["type"] == "usage" && m["agent_id"] == agent).collect();
    let input = calls.iter().map(|m| number(&m["input"])).sum();
    let output = calls.iter().map(|m| number(&m["output"])).sum();
    (input, output, calls.len() as u64)
}

#[tokio::test]
async fn usage_adds_up_across_turns_sessions_agents_and_a_restart() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), PRICED_DEMO).unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;

    // Agent one: a plain turn, then a turn with a tool (two calls).
    let one = client.create(project.path(), "priced").await;
    client.attach(&one, "interactive").await;
    let first = turn(&mut client, &one, "hello there", "allow").await;
    let second = turn(&mut client, &one, "run: echo hi", "allow").await;
    let (in1, out1, calls1) = spent(&first, &one);
    let (in2, out2, calls2) = spent(&second, &one);
    assert_eq!((calls1, calls2), (1, 2), "a tool turn calls the model twice");
    let cost = |input: u64, output: u64| (input + 2 * output) as f64;
    // Every usage event carried its cost, and turn_end the turn's sum.
    for call in first.iter().chain(&second).filter(|m| m["type"] == "usage") {
        assert_eq!(
            call["cost"].as_f64(),
            Some(cost(number(&call["input"]), number(&call["output"])))
        );
    }
    let end = second.iter().find(|m| m["type"] == "turn_end").unwrap();
    assert_eq!((number(&end["usage"]["input"]), number(&end["usage"]["output"])), (in2, out2));

    // The daemon announced the agent's new total with each call.
    let announced: Vec<&Value> =
        second.iter().filter(|m| m["type"] == "agent_usage" && m["agent_id"] == one).collect();
    assert_eq!(announced.len(), 2, "one announcement per call");
    assert_eq!(number(&announced[1]["usage"]["input"]), in1 + in2);

    let usage = client.call("u1", json!({"type": "usage.agent", "agent_id": one})).await;
    let usage = data(&usage).clone();
    let total = &usage["total"];
    assert_eq!((number(&total["input"]), number(&total["output"])), (in1 + in2, out1 + out2));
    assert_eq!((number(&total["calls"]), number(&total["turns"])), (3, 2));
    assert_eq!(number(&total["unpriced_calls"]), 0);
    assert_eq!(total["cost"].as_f64(), Some(cost(in1 + in2, out1 + out2)));
    let turns = usage["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["turn_id"], end["turn_id"], "newest first");
    assert_eq!(turns[0]["state"], "ended");
    assert_eq!(
        (number(&turns[0]["usage"]["input"]), number(&turns[0]["usage"]["calls"])),
        (in2, 2)
    );
    assert_eq!(turns[0]["model"], "demo");
    assert_eq!(number(&turns[1]["usage"]["output"]), out1);
    let sessions = usage["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["usage"], *total);
    let session_id = sessions[0]["session_id"].as_str().unwrap().to_owned();

    // Agent two, on a model with no price: tokens count, cost does not.
    let two = client.create(project.path(), "unpriced").await;
    client.attach(&two, "interactive").await;
    let set = client
        .call("m", json!({"type": "set_model", "agent_id": two, "model": "demo-think"}))
        .await;
    assert_eq!(set["success"], true, "{set}");
    let third = turn(&mut client, &two, "think about it", "allow").await;
    let (in3, out3, calls3) = spent(&third, &two);
    assert!(third.iter().filter(|m| m["type"] == "usage").all(|m| m.get("cost").is_none()));

    let global = client.call("g", json!({"type": "usage.global"})).await;
    let global = data(&global).clone();
    let total = &global["total"];
    assert_eq!(number(&total["input"]), in1 + in2 + in3);
    assert_eq!(number(&total["output"]), out1 + out2 + out3);
    assert_eq!((number(&total["calls"]), number(&total["turns"])), (3 + calls3, 3));
    assert_eq!(number(&total["unpriced_calls"]), calls3);
    assert_eq!(total["cost"].as_f64(), Some(cost(in1 + in2, out1 + out2)), "a lower bound");
    let lines: Vec<&str> = global["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["agent_id"].as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.contains(&one.as_str()) && lines.contains(&two.as_str()));

    // The registry shows it too.
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let info =
        data(&listed)["agents"].as_array().unwrap().iter().find(|a| a["agent_id"] == one).cloned();
    let info = info.expect("listed");
    assert_eq!(number(&info["usage"]["input"]), in1 + in2);
    assert_eq!(info["usage"]["cost"].as_f64(), Some(cost(in1 + in2, out1 + out2)));

    let session =
        client.call("s", json!({"type": "usage.session", "session_id": session_id})).await;
    let session = data(&session).clone();
    assert_eq!(session["agent_ids"], json!([one]));
    assert_eq!(number(&session["total"]["input"]), in1 + in2);
    let unknown =
        client.call("s2", json!({"type": "usage.session", "session_id": "sess-nope"})).await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND", "{unknown}");
    let nobody = client.call("a2", json!({"type": "usage.agent", "agent_id": "agent-nope"})).await;
    assert_eq!(nobody["error"]["code"], "NOT_FOUND", "{nobody}");

    // A graceful restart keeps every figure.
    drop(client);
    assert!(daemon.terminate().await.success());
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let again = client.call("g", json!({"type": "usage.global"})).await;
    assert_eq!(data(&again)["total"], global["total"]);
    let again = client.call("u", json!({"type": "usage.agent", "agent_id": one})).await;
    assert_eq!(data(&again)["turns"], usage["turns"]);
    // And the registry, for the agent not running since: what the
    // dashboard's rows and its all-agents total are built from.
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let agents = data(&listed)["agents"].as_array().unwrap().clone();
    let info = agents.iter().find(|a| a["agent_id"] == one).expect("listed");
    assert_eq!(number(&info["usage"]["input"]), in1 + in2, "{info}");
    assert_eq!(info["usage"]["cost"].as_f64(), Some(cost(in1 + in2, out1 + out2)));

    // A daemon killed mid-turn keeps the calls already made; the turn it
    // never saw end comes back as interrupted.
    client.attach(&one, "interactive").await;
    client.call("p", json!({"type": "prompt", "agent_id": one, "message": "run: sleep 30"})).await;
    let request = client.permission_request(&one).await;
    assert_eq!(request["tool_name"], "bash");
    let before = client.call("u", json!({"type": "usage.agent", "agent_id": one})).await;
    let calls_before = number(&data(&before)["total"]["calls"]);
    assert_eq!(calls_before, 4, "the call that asked to run the tool is counted");
    drop(client);
    let mut daemon = daemon;
    daemon.signal("KILL").await;
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let after = client.call("u", json!({"type": "usage.agent", "agent_id": one})).await;
    let after = data(&after);
    assert_eq!(number(&after["total"]["calls"]), calls_before);
    assert_eq!(after["turns"][0]["state"], "interrupted", "{after}");
}

async fn approvals(client: &mut Client, agent: &str) -> Vec<Value> {
    let response = client.call("h", json!({"type": "approval.list", "agent_id": agent})).await;
    data(&response)["approvals"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn the_approval_history_says_what_was_asked_who_answered_from_where_and_when() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &["--headless-timeout", "1"]).await;
    let mut local = Client::unix(&daemon.socket()).await;
    let agent = local.create(project.path(), "asker").await;

    // The one who could answer leaves with the question open: after the
    // headless timeout, denied headless. An observer sees it happen.
    let mut observer = Client::unix(&daemon.socket()).await;
    observer.attach(&agent, "observer").await;
    local.attach(&agent, "interactive").await;
    local
        .call("p0", json!({"type": "prompt", "agent_id": agent, "message": "run: echo nobody"}))
        .await;
    local.permission_request(&agent).await;
    local.call("d", json!({"type": "agent.detach", "agent_id": agent})).await;
    observer.until_agent(&agent, |m| m["type"] == "permission_resolved").await;
    observer.until_agent(&agent, |m| m["type"] == "turn_end").await;
    let records = approvals(&mut observer, &agent).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "deny");
    assert_eq!(records[0]["answered_by"]["source"], "headless");
    drop(observer);

    // A browser allows one; the local client denies the next.
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    web.attach(&agent, "interactive").await;
    local.attach(&agent, "interactive").await;
    local
        .call("p1", json!({"type": "prompt", "agent_id": agent, "message": "run: echo from-web"}))
        .await;
    let request = web.permission_request(&agent).await;
    web.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": request["request_id"], "decision": "allow"}));
    local.until_agent(&agent, |m| m["type"] == "turn_end").await;
    local
        .call("p2", json!({"type": "prompt", "agent_id": agent, "message": "run: echo from-unix"}))
        .await;
    let request = local.permission_request(&agent).await;
    local.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": request["request_id"], "decision": "deny"}));
    local.until_agent(&agent, |m| m["type"] == "turn_end").await;
    // A UI question, answered from the browser.
    local
        .call("p3", json!({"type": "prompt", "agent_id": agent, "message": "ask: Which branch?"}))
        .await;
    let asked = web.until_agent(&agent, |m| m["type"] == "ui_request").await.pop().unwrap();
    web.send(json!({"type": "ui_response", "agent_id": agent,
        "request_id": asked["request_id"], "value": "main"}));
    local.until_agent(&agent, |m| m["type"] == "turn_end").await;
    // A question left open when the agent is killed.
    local
        .call("p4", json!({"type": "prompt", "agent_id": agent, "message": "run: echo never"}))
        .await;
    local.permission_request(&agent).await;
    let killed =
        local.call("k", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    assert_eq!(killed["success"], true);

    let records = approvals(&mut local, &agent).await;
    let summary: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or_default().to_owned(),
                r["outcome"].as_str().unwrap_or_default().to_owned(),
                r["answered_by"]["source"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expect = |kind: &str, outcome: &str, source: &str| {
        (kind.to_owned(), outcome.to_owned(), source.to_owned())
    };
    assert_eq!(
        summary,
        [
            expect("permission", "deny", "runtime_exited"),
            expect("ui", "answered", "web"),
            expect("permission", "deny", "unix"),
            expect("permission", "allow", "web"),
            expect("permission", "deny", "headless"),
        ],
        "newest first: {records:#?}"
    );
    let by_web = &records[3];
    assert_eq!(by_web["tool_name"], "bash");
    assert!(by_web["prompt"].as_str().unwrap().contains("echo from-web"), "{by_web}");
    assert!(by_web["answered_by"]["principal_id"].as_str().is_some_and(|p| !p.is_empty()));
    assert_eq!(by_web["answered_by"]["address"], "127.0.0.1");
    assert!(number(&by_web["resolved_at"]) >= number(&by_web["asked_at"]));
    assert!(records[2]["answered_by"].get("principal_id").is_none(), "a local client has none");
    assert_eq!(records[1]["prompt"], "Which branch?");
    assert!(records[1].to_string().find("main").is_none(), "what was typed is not kept");

    // A limit, an unknown agent, and the record across a restart.
    let two =
        local.call("h2", json!({"type": "approval.list", "agent_id": agent, "limit": 2})).await;
    assert_eq!(data(&two)["approvals"].as_array().unwrap().len(), 2);
    let none = local.call("h3", json!({"type": "approval.list", "agent_id": "agent-nope"})).await;
    assert_eq!(none["error"]["code"], "NOT_FOUND");
    drop((local, web));
    assert!(daemon.terminate().await.success());
    let daemon = Daemon::start_in(home.path(), &["--headless-timeout", "1"]).await;
    let mut local = Client::unix(&daemon.socket()).await;
    let unattached = local.call("h4", json!({"type": "approval.list", "agent_id": agent})).await;
    assert_eq!(unattached["error"]["code"], "NOT_ATTACHED", "a read needs an attachment");
    local.attach(&agent, "observer").await;
    assert_eq!(approvals(&mut local, &agent).await, records);
}
