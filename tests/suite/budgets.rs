//! Budgets (CONTRACT.md, "Fleet limits and budgets"; docs/PROTOCOL-NOTES.md,
//! "Budgets"): an agent at its cap pauses after the model call in progress,
//! every client hears of it and of the question to raise it, a raise
//! resumes exactly what waited, and a subagent's spend counts for its
//! parent.

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::Client;
use super::support::Daemon;

/// The demo model priced so that a call's cost is its input tokens plus
/// twice its output tokens, in dollars: the first call reaches any cap of
/// a dollar.
const PRICED_DEMO: &str = "[prices.demo]\ninput = 1000000.0\noutput = 2000000.0\n";

pub(super) fn ok(response: &Value) -> &Value {
    assert_eq!(response["success"], true, "{response}");
    &response["data"]
}

pub(super) fn is(event: &Value, kind: &str, agent: &str) -> bool {
    event["type"] == kind && event["agent_id"] == agent
}

/// The first event `matches` among those seen, or the next one to come.
async fn seen_or_next(client: &mut Client, matches: impl Fn(&Value) -> bool) -> Value {
    seen_since_or_next(client, 0, matches).await
}

/// The first event `matches` among those seen from `from` on, or the next
/// one to come.
pub(super) async fn seen_since_or_next(
    client: &mut Client,
    from: usize,
    matches: impl Fn(&Value) -> bool,
) -> Value {
    if let Some(seen) = client.seen[from..].iter().find(|event| matches(event)) {
        return seen.clone();
    }
    client.until(matches).await.pop().expect("seen")
}

/// The budget question the daemon asks of `agent`.
pub(super) async fn budget_question(client: &mut Client, agent: &str) -> Value {
    let asked =
        |event: &Value| is(event, "permission_request", agent) && event["tool_name"] == "budget";
    seen_or_next(client, asked).await
}

pub(super) async fn paused(client: &mut Client, agent: &str) -> Value {
    seen_or_next(client, |event| is(event, "status", agent) && event["status"] == "paused").await
}

/// Waits a moment, then reads up to the answer of a command: whatever the
/// daemon would have sent meanwhile is among `seen`.
async fn settle(client: &mut Client) {
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    ok(&client.call("settle", json!({"type": "agent.list"})).await);
}

fn usage_events(events: &[Value], agent: &str) -> usize {
    events.iter().filter(|event| is(event, "usage", agent)).count()
}

#[tokio::test]
async fn a_budget_reached_mid_task_pauses_after_the_call_and_a_raise_from_another_tab_resumes_it() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), PRICED_DEMO).unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut first = Client::unix(&daemon.socket()).await;
    let mut second = Client::unix(&daemon.socket()).await;
    let agent = first.create(project.path(), "spender").await;
    first.attach(&agent, "interactive").await;
    second.attach(&agent, "interactive").await;

    // What one turn costs, then a cap a dollar above it: at 80 % already.
    let warm = json!({"type": "prompt", "agent_id": agent, "message": "hello there"});
    ok(&first.call("warm", warm).await);
    first.until(|event| is(event, "turn_end", &agent)).await;
    let usage = first.call("u", json!({"type": "usage.agent", "agent_id": agent})).await;
    let spent = ok(&usage)["total"]["cost"].as_f64().expect("priced");
    let set = json!({"type": "budget.set", "scope": "agent", "agent_id": agent,
                     "period": "day", "usd": spent + 1.0});
    let set = first.call("set", set).await;
    assert_eq!(ok(&set)["budget"]["state"], "warning", "{set}");
    let told = second.until(|event| event["type"] == "budget_updated").await;
    assert_eq!(told.last().unwrap()["budget"]["agent_id"], agent.as_str());

    // A task of two model calls: the first passes the cap; the agent
    // pauses after it, before the second, whatever the tool did between.
    let task = json!({"type": "prompt", "agent_id": agent, "message": "run: echo budgeted"});
    ok(&first.call("task", task).await);
    let reached = second
        .until(|event| event["type"] == "budget_updated" && event["budget"]["state"] == "reached")
        .await;
    let status = &reached.last().unwrap()["budget"];
    assert!(status["spent_usd"].as_f64().unwrap() >= status["cap_usd"].as_f64().unwrap());
    let asked = first.permission_request(&agent).await;
    first.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": asked["request_id"], "decision": "allow"}));
    let pause = paused(&mut second, &agent).await;
    assert!(pause["detail"].as_str().unwrap().contains("budget reached"), "{pause}");
    let question = budget_question(&mut second, &agent).await;
    assert_eq!(question["choices"][0]["id"], "raise", "{question}");
    let list = second.call("l", json!({"type": "agent.list"})).await;
    let info = ok(&list)["agents"].as_array().unwrap().iter().find(|a| a["agent_id"] == agent);
    assert_eq!(info.unwrap()["status"], "paused");
    settle(&mut second).await;
    assert_eq!(usage_events(&second.seen, &agent), 2, "the warm-up's call and the task's first");

    // The second tab raises it: the question closes everywhere, and the
    // paused turn makes its second call and ends.
    let from = first.seen.len();
    second.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": question["request_id"], "choice_id": "raise"}));
    let closed = seen_since_or_next(&mut first, from, |event| {
        is(event, "permission_resolved", &agent) && event["request_id"] == question["request_id"]
    })
    .await;
    assert_eq!(closed["choice_id"], "raise", "{closed}");
    let raised = seen_since_or_next(&mut first, from, |event| {
        event["type"] == "budget_updated" && event["budget"]["source"] == "raised"
    })
    .await;
    assert_eq!(raised["budget"]["state"], "ok", "told of the raise before the next call");
    let rest = second.until(|event| is(event, "turn_end", &agent)).await;
    assert_eq!(usage_events(&rest, &agent), 1, "the call that waited");
    assert!(
        rest.iter()
            .any(|e| is(e, "message_complete", &agent) && e.to_string().contains("exit code 0")),
        "the task went on where it paused: {rest:?}"
    );
}

#[tokio::test]
async fn a_subagents_spend_holds_its_parent_whose_prompt_waits_until_the_cap_is_set_higher() {
    let home = TempDir::new().unwrap();
    let budget = "[[budgets]]\nscope = \"agent\"\nperiod = \"day\"\nusd = 1.0\n";
    std::fs::write(home.path().join("config.toml"), format!("{PRICED_DEMO}{budget}")).unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let parent = client.create(project.path(), "parent").await;
    let created = client
        .call(
            "c",
            json!({"type": "agent.create", "cwd": project.path().display().to_string(),
                          "name": "child", "parent_agent_id": parent}),
        )
        .await;
    let child = ok(&created)["agent_id"].as_str().unwrap().to_owned();
    client.attach(&parent, "interactive").await;
    client.attach(&child, "interactive").await;

    // The child's one call passes its parent's cap too (and its own).
    ok(&client.call("p1", json!({"type": "prompt", "agent_id": child, "message": "hi"})).await);
    client.until(|event| is(event, "turn_end", &child)).await;
    let list = client.call("b", json!({"type": "budget.list", "agent_id": child})).await;
    let budgets = ok(&list)["budgets"].as_array().unwrap().clone();
    let of =
        |owner: &str| budgets.iter().find(|b| b["agent_id"] == owner).cloned().expect("listed");
    assert_eq!(of(&parent)["state"], "reached", "{budgets:?}");
    assert_eq!(of(&parent)["spent_usd"], of(&child)["spent_usd"]);
    assert_eq!(of(&parent)["source"], "config");

    // The parent, though it spent nothing itself, pauses before its call;
    // its prompt is taken and waits, and so does the child's next one.
    ok(&client.call("p2", json!({"type": "prompt", "agent_id": parent, "message": "go"})).await);
    paused(&mut client, &parent).await;
    let question = budget_question(&mut client, &parent).await;
    ok(&client.call("p3", json!({"type": "prompt", "agent_id": child, "message": "again"})).await);
    paused(&mut client, &child).await;
    settle(&mut client).await;
    assert_eq!(usage_events(&client.seen, &parent), 0);

    // An agent's own process may not raise anything.
    let cut = json!({"type": "hold", "agent_id": parent, "held": false});
    let refused = client.call("h", cut).await;
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED", "{refused}");

    // Set higher for good: both go on, and the open question is withdrawn.
    let from = client.seen.len();
    for (id, owner) in [("s1", &parent), ("s2", &child)] {
        let set = json!({"type": "budget.set", "scope": "agent", "agent_id": owner,
                         "period": "day", "usd": 100000.0});
        assert_eq!(ok(&client.call(id, set).await)["budget"]["source"], "set");
    }
    let withdrawn = seen_since_or_next(&mut client, from, |event| {
        is(event, "permission_resolved", &parent) && event["request_id"] == question["request_id"]
    })
    .await;
    assert_eq!(withdrawn["source"], "withdrawn");
    seen_since_or_next(&mut client, from, |event| is(event, "turn_end", &parent)).await;
    seen_since_or_next(&mut client, from, |event| is(event, "turn_end", &child)).await;
}

#[tokio::test]
async fn budget_commands_say_what_is_wrong() {
    let home = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    for (command, code, said) in [
        (json!({"scope": "agent", "period": "day", "usd": 1.0}), "INVALID_REQUEST", "agent_id"),
        (
            json!({"scope": "agent", "agent_id": "nobody", "period": "day", "usd": 1.0}),
            "NOT_FOUND",
            "nobody",
        ),
        (
            json!({"scope": "workspace", "workspace_id": "nowhere", "period": "month", "tokens": 5}),
            "NOT_FOUND",
            "nowhere",
        ),
        (json!({"scope": "daemon", "period": "week", "usd": 1.0}), "INVALID_REQUEST", "period"),
        (json!({"scope": "daemon", "period": "day"}), "INVALID_REQUEST", "usd"),
    ] {
        let mut command = command;
        command["type"] = json!("budget.set");
        let answer = client.call("s", command.clone()).await;
        assert_eq!(answer["error"]["code"], code, "{command}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(said), "{answer}");
    }
    let empty = client.call("l", json!({"type": "budget.list"})).await;
    assert_eq!(ok(&empty)["budgets"], json!([]));
}

#[tokio::test]
async fn with_nobody_attached_the_budget_question_waits_for_a_person_past_the_headless_timeout() {
    let home = TempDir::new().unwrap();
    std::fs::write(home.path().join("config.toml"), PRICED_DEMO).unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &["--headless-timeout", "1"]).await;
    let mut first = Client::unix(&daemon.socket()).await;
    let mut watcher = Client::unix(&daemon.socket()).await;
    let agent = first.create(project.path(), "unattended").await;
    first.attach(&agent, "interactive").await;
    let warm = json!({"type": "prompt", "agent_id": agent, "message": "hello there"});
    ok(&first.call("warm", warm).await);
    first.until(|event| is(event, "turn_end", &agent)).await;

    // A cap below what it spent: reached at once. The next prompt waits,
    // and its client leaves: nobody is attached who could answer.
    let set = json!({"type": "budget.set", "scope": "agent", "agent_id": agent,
                     "period": "day", "usd": 0.0001});
    assert_eq!(ok(&first.call("set", set).await)["budget"]["state"], "reached");
    let next = json!({"type": "prompt", "agent_id": agent, "message": "hello again"});
    ok(&first.call("next", next).await);
    ok(&first.call("leave", json!({"type": "agent.detach", "agent_id": agent})).await);
    let paused = |event: &Value| {
        event["type"] == "agent_status_changed"
            && event["agent_id"] == agent
            && event["status"] == "paused"
    };
    seen_or_next(&mut watcher, paused).await;

    // Past the headless timeout the question is still open: a person who
    // comes back (or a phone told by a push) finds it, and a raise lets the
    // prompt that waited go on.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let mut person = Client::unix(&daemon.socket()).await;
    let sync = person.attach(&agent, "interactive").await;
    let pending = sync["pending_requests"].as_array().expect("pending").clone();
    let question = pending
        .iter()
        .find(|pending| pending.to_string().contains("\"tool_name\":\"budget\""))
        .unwrap_or_else(|| panic!("the budget question is still open: {sync}"));
    let request_id = question.to_string();
    let request_id = pending_id(question).unwrap_or_else(|| panic!("an id in {request_id}"));
    person.send(json!({"type": "permission_response", "agent_id": agent,
        "request_id": request_id, "choice_id": "raise"}));
    let turn = person.until(|event| is(event, "turn_end", &agent)).await;
    assert!(
        turn.iter().any(|e| is(e, "message_complete", &agent)
            && e.to_string().contains("You said: hello again")),
        "{turn:?}"
    );
}

/// The `request_id` of a pending question as `sync` lists it, whatever
/// its nesting.
fn pending_id(pending: &Value) -> Option<String> {
    let found = pending["request_id"].as_str().or(pending["request"]["request_id"].as_str());
    found.or(pending["permission"]["request_id"].as_str()).map(str::to_owned)
}
