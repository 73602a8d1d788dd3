//! Subagent background jobs (PROTOCOL.md §10.3) through the real daemon and
//! the demo model: single, parallel and chain jobs; wait, steer, relaunch,
//! status and stop; completion reports into idle and busy parents; the
//! lease guard; ownership; restart rules; and task text kept private.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::agent_support::live_texts;
use super::client::Client;
use super::support::{Daemon, agent_pids, wait_until};

/// A daemon, a project and a parent agent, with a unix client.
struct Setup {
    daemon: Daemon,
    project: TempDir,
    client: Client,
    parent: String,
}

impl Setup {
    async fn new() -> Setup {
        let daemon = Daemon::start(&[]).await;
        let project = TempDir::new().expect("project");
        let mut client = Client::unix(&daemon.socket()).await;
        let parent = client.create(project.path(), "lead").await;
        // The §10.3 commands act on the parent: like its prompts, they
        // need an interactive attachment (docs/SECURITY.md).
        client.attach(&parent, "interactive").await;
        Setup { daemon, project, client, parent }
    }

    /// A §10.3 command on behalf of the parent; the response.
    async fn call(&mut self, id: &str, kind: &str, mut body: Value) -> Value {
        body["type"] = json!(kind);
        body["parent_agent_id"] = json!(self.parent);
        self.client.call(id, body).await
    }

    async fn create(&mut self, body: Value) -> Value {
        let response = self.call("create", "subagent.create", body).await;
        assert_eq!(response["success"], true, "{response}");
        response["data"].clone()
    }

    async fn wait(&mut self, handles: &[&str], extra: Value) -> Value {
        let mut body = json!({"handles": handles});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let response = self.call("wait", "subagent.wait", body).await;
        assert_eq!(response["success"], true, "{response}");
        response["data"].clone()
    }

    /// Reads until a run reaches `state`.
    async fn run_reaches(&mut self, run_id: &str, state: &str) {
        self.client
            .until(|m| {
                m["type"] == "subagent_run_changed" && m["run_id"] == run_id && m["state"] == state
            })
            .await;
    }
}

fn states(wait: &Value) -> Vec<String> {
    wait["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["state"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn run_id(created: &Value, index: usize) -> String {
    created["runs"][index]["run_id"].as_str().expect("run id").to_owned()
}

#[tokio::test]
async fn single_parallel_and_chain_jobs_complete_with_their_final_texts() {
    let mut setup = Setup::new().await;
    let single = setup.create(json!({"name": "echo", "task": "hello there"})).await;
    assert_eq!(single["strategy"], "single");
    assert_eq!(single["runs"][0]["state"], "queued");
    assert_eq!(single["runs"][0]["alias"], "echo");
    assert!(single["job_id"].as_str().unwrap().starts_with("job-"));
    let job = single["job_id"].as_str().unwrap().to_owned();
    let waited = setup.wait(&[&job], json!({})).await;
    assert_eq!(waited["timed_out"], false);
    assert_eq!(waited["aggregate_state"], "completed");
    assert_eq!(waited["runs"][0]["final_text"], "You said: hello there", "{waited}");
    assert!(waited["runs"][0]["usage"]["output"].as_u64().unwrap() > 0, "{waited}");

    // Each child is an agent under its parent, with its alias.
    let child = single["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    let info = setup.client.call("st", json!({"type": "agent.status", "agent_id": child})).await;
    assert_eq!(info["data"]["agents"][0]["parent_agent_id"], setup.parent.as_str());
    assert_eq!(info["data"]["agents"][0]["alias"], "echo");

    let parallel = setup
        .create(json!({"strategy": "parallel", "tasks": [
            {"name": "left", "task": "one"}, {"name": "right", "task": "two"}]}))
        .await;
    let job = parallel["job_id"].as_str().unwrap().to_owned();
    let waited = setup.wait(&[&job], json!({"mode": "all"})).await;
    assert_eq!(states(&waited), ["completed", "completed"]);
    assert_eq!(waited["runs"][0]["final_text"], "You said: one");
    assert_eq!(waited["runs"][1]["final_text"], "You said: two");

    // A chain feeds each step's final text to the next.
    let chain = setup
        .create(json!({"strategy": "chain", "tasks": [
            {"name": "first", "task": "alpha"},
            {"name": "second", "task": "beta after {previous}"}]}))
        .await;
    let job = chain["job_id"].as_str().unwrap().to_owned();
    let waited = setup.wait(&[&job], json!({})).await;
    assert_eq!(states(&waited), ["completed", "completed"], "{waited}");
    assert_eq!(waited["runs"][1]["final_text"], "You said: beta after You said: alpha");
    // Aliases are unique per parent: a second `echo` would be `echo-2`.
    let again = setup.create(json!({"name": "ECHO", "task": "x"})).await;
    assert_eq!(again["runs"][0]["alias"], "ECHO-2");
}

#[tokio::test]
async fn a_failing_chain_step_cancels_the_rest() {
    let mut setup = Setup::new().await;
    let chain = setup
        .create(json!({"strategy": "chain", "tasks": [
            {"name": "ok", "task": "fine"},
            {"name": "bad", "task": "fail: the provider broke"},
            {"name": "never", "task": "unreached"}]}))
        .await;
    let job = chain["job_id"].as_str().unwrap().to_owned();
    let waited = setup.wait(&[&job], json!({})).await;
    assert_eq!(states(&waited), ["completed", "failed", "cancelled"], "{waited}");
    assert_eq!(waited["aggregate_state"], "failed");
    assert!(waited["runs"][1]["error"].as_str().unwrap().contains("the provider broke"));
    // The cancelled step's child never ran a process.
    let never = waited["runs"][2]["agent_id"].as_str().unwrap();
    let info = setup.client.call("st", json!({"type": "agent.status", "agent_id": never})).await;
    assert_eq!(info["data"]["agents"][0]["runtime_state"], "stopped");
    assert!(info["data"]["agents"][0]["usage"].is_null(), "{info}");
}

#[tokio::test]
async fn wait_polls_times_out_without_cancelling_and_returns_on_any_or_all() {
    let mut setup = Setup::new().await;
    let job = setup
        .create(json!({"strategy": "parallel", "tasks": [
            {"name": "quick", "task": "hi"}, {"name": "slow", "task": "stream: 300"}]}))
        .await;
    let (quick, slow) = (run_id(&job, 0), run_id(&job, 1));
    let polled = setup.wait(&[&quick, &slow], json!({"timeout": 0})).await;
    assert_eq!(polled["timed_out"], true, "a poll never waits: {polled}");
    let any = setup.wait(&["quick", "slow"], json!({"mode": "any"})).await;
    assert_eq!(any["timed_out"], false);
    assert_eq!(states(&any)[0], "completed", "{any}");
    assert!(!["completed"].contains(&states(&any)[1].as_str()), "{any}");
    let short = setup.wait(&[&slow], json!({"timeout": 0.2})).await;
    assert_eq!(short["timed_out"], true);
    assert_eq!(short["runs"][0]["state"], "active", "a timeout stops only the wait");
    let all = setup.wait(&[job["job_id"].as_str().unwrap()], json!({"mode": "all"})).await;
    assert_eq!(states(&all), ["completed", "completed"]);
    assert!(all["runs"][1]["final_text"].as_str().unwrap().contains("tick-300"));
}

#[tokio::test]
async fn steer_is_injected_into_the_active_turn_and_conflicts_otherwise() {
    let mut setup = Setup::new().await;
    let job = setup.create(json!({"name": "worker", "task": "stream: 300"})).await;
    let run = run_id(&job, 0);
    setup.run_reaches(&run, "active").await;
    let steered = setup
        .call("s1", "subagent.steer", json!({"target": "worker", "message": "also mention pears"}))
        .await;
    assert_eq!(steered["data"]["status"], "injected", "{steered}");
    assert_eq!(steered["data"]["run_id"], run.as_str());
    assert!(steered["data"]["turn_id"].as_str().unwrap().starts_with("turn-"));
    assert!(steered["data"]["correlation_id"].as_str().unwrap().starts_with("steer-"));
    let waited = setup.wait(&[&run], json!({})).await;
    // Delivered into the same turn: the model answered it before the end.
    assert_eq!(waited["runs"][0]["final_text"], "You said: also mention pears", "{waited}");
    let late =
        setup.call("s2", "subagent.steer", json!({"target": run, "message": "too late"})).await;
    assert_eq!(late["success"], false);
    assert_eq!(late["error"]["code"], "CONFLICT", "{late}");
    // The refused steer never became a later prompt of the child.
    let child = job["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    let sync = setup.client.attach(&child, "observer").await;
    let texts = live_texts(&sync);
    assert!(!texts.iter().any(|text| text.contains("too late")), "{texts:?}");
    assert!(texts.contains(&"also mention pears"), "{texts:?}");
}

#[tokio::test]
async fn stop_cancels_one_parallel_run_or_a_whole_job() {
    let mut setup = Setup::new().await;
    let job = setup
        .create(json!({"strategy": "parallel", "tasks": [
            {"name": "keep", "task": "stream: 200"}, {"name": "drop", "task": "stream: 3000"}]}))
        .await;
    let (keep, dropped) = (run_id(&job, 0), run_id(&job, 1));
    setup.run_reaches(&dropped, "active").await;
    let stopped = setup.call("stop", "subagent.stop", json!({"handle": "drop"})).await;
    assert_eq!(stopped["success"], true, "{stopped}");
    assert_eq!(stopped["data"]["cancelled"][0]["run_id"], dropped.as_str());
    assert_eq!(stopped["data"]["cancelled"][0]["state"], "cancelled");
    let waited = setup.wait(&[&keep, &dropped], json!({})).await;
    assert_eq!(states(&waited), ["completed", "cancelled"], "a sibling continues: {waited}");

    let whole = setup
        .create(json!({"strategy": "parallel", "tasks": [
            {"name": "a", "task": "stream: 3000"}, {"name": "b", "task": "stream: 3000"}]}))
        .await;
    let job_id = whole["job_id"].as_str().unwrap().to_owned();
    setup.run_reaches(&run_id(&whole, 1), "active").await;
    let stopped = setup.call("stop2", "subagent.stop", json!({"handle": job_id})).await;
    assert_eq!(stopped["data"]["cancelled"].as_array().unwrap().len(), 2, "{stopped}");
    let status = setup.call("st", "subagent.status", json!({})).await;
    let listed = &status["data"]["jobs"][0];
    assert_eq!(listed["job_id"], job_id.as_str(), "newest first: {status}");
    assert_eq!(listed["state"], "cancelled");
    assert!(listed["stopped_at"].as_u64().is_some());
    // Records are kept: the earlier job is still listed.
    assert_eq!(status["data"]["jobs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn whoever_steers_an_agent_stops_what_its_children_delegated_and_no_more() {
    let mut setup = Setup::new().await;
    // The child hands the work on: its own run ends with its turn, and the
    // grandchild's goes on.
    let job = setup.create(json!({"name": "mid", "task": "spawn: grand: stream: 3000"})).await;
    let mid = job["runs"][0]["agent_id"].as_str().expect("child").to_owned();
    let seen = setup
        .client
        .until(|m| {
            m["type"] == "subagent_run_changed"
                && m["parent_agent_id"] == mid.as_str()
                && m["state"] == "active"
        })
        .await;
    let grand = seen.last().expect("event")["run_id"].as_str().expect("run").to_owned();
    let on_mid = |kind: &str, body: Value| {
        let mut body = body;
        body["type"] = json!(kind);
        body["parent_agent_id"] = json!(mid);
        body
    };
    // Widening stays refused: steering or relaunching the child's work
    // needs the child itself.
    for (kind, body) in [
        ("subagent.steer", json!({"target": grand, "message": "faster"})),
        ("subagent.relaunch", json!({"target": grand, "task": "more"})),
    ] {
        let answer = setup.client.call("w", on_mid(kind, body)).await;
        assert_eq!(answer["error"]["code"], "NOT_ATTACHED", "{kind}: {answer}");
    }
    // A client attached to no ancestor may not stop it either.
    let mut stranger = Client::unix(&setup.daemon.socket()).await;
    let other = stranger.create(setup.project.path(), "elsewhere").await;
    stranger.attach(&other, "interactive").await;
    let answer = stranger.call("s", on_mid("subagent.stop", json!({"handle": grand}))).await;
    assert_eq!(answer["error"]["code"], "NOT_ATTACHED", "{answer}");
    // The person on the grandparent stops it.
    let stopped =
        setup.client.call("stop", on_mid("subagent.stop", json!({"handle": grand}))).await;
    assert_eq!(stopped["success"], true, "{stopped}");
    assert_eq!(stopped["data"]["cancelled"][0]["run_id"], grand.as_str(), "{stopped}");
    assert_eq!(stopped["data"]["cancelled"][0]["state"], "cancelled", "{stopped}");
}

#[tokio::test]
async fn relaunch_reuses_the_child_and_its_history() {
    let mut setup = Setup::new().await;
    let job = setup.create(json!({"name": "helper", "task": "first task"})).await;
    let child = job["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    setup.wait(&[job["job_id"].as_str().unwrap()], json!({})).await;
    let relaunched = setup
        .call("r", "subagent.relaunch", json!({"target": "helper", "task": "second task"}))
        .await;
    assert_eq!(relaunched["success"], true, "{relaunched}");
    let data = &relaunched["data"];
    assert_eq!(data["agent_id"], child.as_str(), "the same durable agent");
    assert_eq!(data["alias"], "helper");
    assert_eq!(data["state"], "queued");
    assert_ne!(data["job_id"], job["job_id"], "a new job");
    // A second relaunch while this one is queued or active conflicts.
    let twice =
        setup.call("r2", "subagent.relaunch", json!({"target": child, "task": "third"})).await;
    assert_eq!(twice["error"]["code"], "CONFLICT", "{twice}");
    let waited = setup.wait(&[data["run_id"].as_str().unwrap()], json!({})).await;
    assert_eq!(waited["runs"][0]["final_text"], "You said: second task");
    let sync = setup.client.attach(&child, "observer").await;
    let texts = live_texts(&sync);
    assert_eq!(texts[..2], ["first task", "You said: first task"], "history kept: {texts:?}");
}

#[tokio::test]
async fn the_completion_report_wakes_an_idle_parent() {
    let mut setup = Setup::new().await;
    let parent = setup.parent.clone();
    setup.client.attach(&parent, "interactive").await;
    // The parent's own model launches the job with its subagent tool.
    setup
        .client
        .call(
            "p",
            json!({"type": "prompt", "agent_id": parent, "message": "spawn: scout: look around"}),
        )
        .await;
    let read = setup.client.until_agent(&parent, |m| m["type"] == "turn_end").await;
    let result = read.iter().find(|m| m["type"] == "tool_result").expect("the tool's result");
    let job = result["content"]["value"]["job_id"].as_str().expect("a job id").to_owned();
    // The report arrives as a new turn of the idle parent.
    let read = setup
        .client
        .until_agent(&parent, |m| {
            m["type"] == "message_complete"
                && m["message"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains("[subagent report]"))
        })
        .await;
    assert!(read.iter().any(|m| m["type"] == "turn_start"), "the parent woke");
    let report = read.last().unwrap()["message"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(report.contains("`scout`") && report.contains(&job), "{report}");
    assert!(report.contains("completed") && report.contains("> You said: look around"), "{report}");
}

#[tokio::test]
async fn the_completion_report_steers_into_a_busy_parent() {
    let mut setup = Setup::new().await;
    let parent = setup.parent.clone();
    setup.client.attach(&parent, "interactive").await;
    let before = setup.client.seen.len();
    setup
        .client
        .call("p", json!({"type": "prompt", "agent_id": parent, "message": "stream: 400"}))
        .await;
    setup.create(json!({"name": "fast", "task": "quick one"})).await;
    setup.client.until_agent(&parent, |m| m["type"] == "turn_end").await;
    let read = &setup.client.seen[before..];
    let starts = read.iter().filter(|m| m["type"] == "turn_start").count();
    let texts: Vec<&str> = read
        .iter()
        .filter(|m| m["type"] == "message_complete")
        .filter_map(|m| m["message"]["content"][0]["text"].as_str())
        .collect();
    assert_eq!(starts, 1, "one turn: the report was steered into it");
    assert!(
        texts.last().is_some_and(|text| text.starts_with("You said: [subagent report]")),
        "{texts:?}"
    );
}

#[tokio::test]
async fn a_leased_child_refuses_direct_prompts_and_takes_steer_and_abort_through_the_coordinator() {
    let mut setup = Setup::new().await;
    let job = setup.create(json!({"name": "busy", "task": "stream: 3000"})).await;
    let run = run_id(&job, 0);
    let child = job["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    setup.run_reaches(&run, "active").await;
    setup.client.attach(&child, "interactive").await;
    let prompted = setup
        .client
        .call("p", json!({"type": "prompt", "agent_id": child, "message": "do something else"}))
        .await;
    assert_eq!(prompted["error"]["code"], "CONFLICT", "{prompted}");
    // A person's steer is strict: it waits for the turn's next boundary
    // (this one streams for 30 s), and the abort below ends the turn first.
    setup.client.send(json!({"type": "steer", "id": "s", "agent_id": child, "message": "a note"}));
    let aborted = setup.client.call("a", json!({"type": "abort", "agent_id": child})).await;
    assert_eq!(aborted["success"], true, "{aborted}");
    let steered = setup.client.until(|m| m["type"] == "response" && m["id"] == "s").await;
    let steered = steered.last().unwrap();
    assert_eq!(steered["error"]["code"], "CONFLICT", "dropped with its turn: {steered}");
    let waited = setup.wait(&[&run], json!({})).await;
    assert_eq!(waited["runs"][0]["state"], "cancelled", "{waited}");
    // Both were recorded against the run.
    let status = setup.call("st", "subagent.status", json!({"targets": [run]})).await;
    assert_eq!(status["data"]["agents"][0]["run"]["state"], "cancelled", "{status}");
    // The lease is gone with the run: once idle, the child takes prompts.
    let idle = |m: &Value| m["agent_id"] == child && m["type"] == "status" && m["status"] == "idle";
    if !setup.client.seen.iter().any(idle) {
        setup.client.until(idle).await;
    }
    let free = setup
        .client
        .call("p2", json!({"type": "prompt", "agent_id": child, "message": "now you may"}))
        .await;
    assert_eq!(free["success"], true, "{free}");
}

#[tokio::test]
async fn ownership_never_crosses_parents() {
    let mut setup = Setup::new().await;
    let other = setup.client.create(setup.project.path(), "other").await;
    setup.client.attach(&other, "interactive").await;
    let job = setup.create(json!({"name": "mine", "task": "stream: 100"})).await;
    let handles = [
        job["job_id"].as_str().unwrap().to_owned(),
        run_id(&job, 0),
        job["runs"][0]["agent_id"].as_str().unwrap().to_owned(),
        "mine".to_owned(),
    ];
    for handle in &handles {
        for (kind, body) in [
            ("subagent.wait", json!({"handles": [handle], "timeout": 0})),
            ("subagent.status", json!({"targets": [handle]})),
            ("subagent.stop", json!({"handle": handle})),
            ("subagent.steer", json!({"target": handle, "message": "hi"})),
            ("subagent.relaunch", json!({"target": handle, "task": "hi"})),
        ] {
            let mut body = body;
            body["type"] = json!(kind);
            body["parent_agent_id"] = json!(other);
            let answer = setup.client.call("x", body).await;
            assert_eq!(answer["error"]["code"], "NOT_FOUND", "{kind} {handle}: {answer}");
        }
    }
    let status =
        setup.client.call("s", json!({"type": "subagent.status", "parent_agent_id": other})).await;
    assert_eq!(status["data"]["jobs"], json!([]), "{status}");
    assert_eq!(status["data"]["agents"], json!([]), "{status}");
}

#[tokio::test]
async fn a_create_is_checked_whole_before_anything_is_made() {
    let mut setup = Setup::new().await;
    let before = setup.client.call("l", json!({"type": "agent.list"})).await;
    for (body, code) in [
        (
            json!({"tasks": [{"name": "ok", "task": "x"}, {"name": "", "task": "y"}], "strategy": "parallel"}),
            "INVALID_REQUEST",
        ),
        (
            json!({"tasks": [{"name": "ok", "task": "x"}, {"name": "job-like", "task": "y"}], "strategy": "chain"}),
            "INVALID_REQUEST",
        ),
        (json!({"name": "ok", "task": "   "}), "INVALID_REQUEST"),
        (json!({"name": "ok", "task": "x", "model": "no-such-model"}), "NOT_FOUND"),
        (
            json!({"tasks": (0..9).map(|n| json!({"name": format!("t{n}"), "task": "x"})).collect::<Vec<_>>(), "strategy": "parallel"}),
            "INVALID_REQUEST",
        ),
    ] {
        let answer = setup.call("c", "subagent.create", body.clone()).await;
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    }
    let unknown = setup
        .client
        .call("u", json!({"type": "subagent.create", "parent_agent_id": "agent-000000000000", "name": "a", "task": "b"}))
        .await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND");
    let after = setup.client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(before["data"], after["data"], "no child was made");
}

#[tokio::test]
async fn task_text_appears_in_no_response_event_log_or_agent_info() {
    let home = TempDir::new().expect("home");
    let stderr = home.path().join("daemon.stderr");
    let daemon = Daemon::start_with(home.path(), &[], &[], Some(&stderr)).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let parent = client.create(project.path(), "lead").await;
    const SECRET: &str = "zebra-quartz-7731";
    // Acting needs an interactive attachment; between commands the client
    // only watches, so that the children's questions are denied headless.
    let mut call = async |id: &str, kind: &str, mut body: Value| {
        let acts = !matches!(kind, "subagent.wait" | "subagent.status");
        if acts {
            client.attach(&parent, "interactive").await;
        }
        body["type"] = json!(kind);
        body["parent_agent_id"] = json!(parent);
        let answer = client.call(id, body).await;
        client.attach(&parent, "observer").await;
        answer
    };
    let created = call(
        "c",
        "subagent.create",
        json!({"strategy": "chain", "tasks": [
            {"name": "one", "task": format!("run: echo {SECRET}")},
            {"name": "two", "task": format!("run: echo {SECRET} again")}]}),
    )
    .await;
    let job = created["data"]["job_id"].as_str().unwrap().to_owned();
    call("w", "subagent.wait", json!({"handles": [job]})).await;
    call("s", "subagent.status", json!({})).await;
    call("t", "subagent.status", json!({"targets": [job, "one", "two"]})).await;
    let child = created["data"]["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    call("r", "subagent.relaunch", json!({"target": child, "task": format!("run: echo {SECRET}")}))
        .await;
    call("w2", "subagent.wait", json!({"handles": ["one"]})).await;
    client.call("l", json!({"type": "agent.list"})).await;
    let seen = serde_json::to_string(&client.seen).expect("json");
    assert!(seen.contains("subagent_run_changed") && seen.contains("agent_spawned"));
    assert!(!seen.contains(SECRET), "a task leaked to a client: {seen}");
    drop(daemon);
    let mut logs = std::fs::read_to_string(&stderr).unwrap_or_default();
    for entry in std::fs::read_dir(home.path().join("agents")).expect("agents").flatten() {
        logs.push_str(&std::fs::read_to_string(entry.path().join("agent.log")).unwrap_or_default());
        let manifest =
            std::fs::read_to_string(entry.path().join("manifest.json")).expect("manifest");
        assert!(!manifest.contains(SECRET), "a task in a manifest: {manifest}");
    }
    assert!(!logs.contains(SECRET), "a task in a log");
}

#[tokio::test]
async fn a_daemon_killed_mid_run_leaves_no_child_and_restarts_with_runs_interrupted() {
    let home = TempDir::new().expect("home");
    let mut daemon = Daemon::start_in(home.path(), &[]).await;
    let project = TempDir::new().expect("project");
    let marker = project.path().canonicalize().expect("path").display().to_string();
    let mut client = Client::unix(&daemon.socket()).await;
    let parent = client.create(project.path(), "lead").await;
    client.attach(&parent, "interactive").await;
    let created = client
        .call("c", json!({"type": "subagent.create", "parent_agent_id": parent, "strategy": "chain",
            "tasks": [{"name": "long", "task": "stream: 3000"}, {"name": "after", "task": "never"}]}))
        .await;
    let data = created["data"].clone();
    let run = run_id(&data, 0);
    client
        .until(|m| {
            m["type"] == "subagent_run_changed" && m["run_id"] == run && m["state"] == "active"
        })
        .await;
    assert_eq!(agent_pids(&marker).len(), 2, "the parent and its child run");
    daemon.signal("KILL").await;
    wait_until("the child to die with its daemon", || agent_pids(&marker).is_empty()).await;

    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    // Not attached: the states, without what the runs said.
    let status =
        client.call("s", json!({"type": "subagent.status", "parent_agent_id": parent})).await;
    let job = &status["data"]["jobs"][0];
    assert_eq!(job["runs"][0]["state"], "interrupted", "{status}");
    assert_eq!(job["runs"][1]["state"], "cancelled", "a dependent step: {status}");
    assert_eq!(job["state"], "failed");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(agent_pids(&marker).is_empty(), "nothing replayed");
    client.attach(&parent, "interactive").await;
    let relaunched = client
        .call(
            "r",
            json!({"type": "subagent.relaunch", "parent_agent_id": parent,
            "target": "long", "task": "pick up again"}),
        )
        .await;
    assert_eq!(relaunched["success"], true, "{relaunched}");
    let waited = client
        .call(
            "w",
            json!({"type": "subagent.wait", "parent_agent_id": parent,
            "handles": [relaunched["data"]["run_id"]]}),
        )
        .await;
    assert_eq!(waited["data"]["runs"][0]["state"], "completed", "{waited}");
    assert_eq!(waited["data"]["runs"][0]["final_text"], "You said: pick up again");
}

/// `agent.create` with extra fields in `cwd`; the response.
async fn create_with(client: &mut Client, cwd: &std::path::Path, extra: Value) -> Value {
    let mut body = json!({"type": "agent.create", "cwd": cwd.display().to_string()});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    client.call("create", body).await
}

/// Prompts `agent` (attached) and returns the turn's final assistant text.
async fn reply(client: &mut Client, agent: &str, message: &str) -> (String, Vec<Value>) {
    client.call("p", json!({"type": "prompt", "agent_id": agent, "message": message})).await;
    let read = client.until_agent(agent, |m| m["type"] == "turn_end").await;
    let text = read
        .iter()
        .filter(|m| m["type"] == "message_complete")
        .filter_map(|m| m["message"]["content"][0]["text"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_owned();
    (text, read)
}

#[tokio::test]
async fn agent_create_honours_tools_brief_and_launch_policy() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;

    let unknown =
        create_with(&mut client, project.path(), json!({"tools": ["read", "teleport"]})).await;
    assert_eq!(unknown["error"]["code"], "INVALID_REQUEST", "{unknown}");
    // An allowlist: the model is offered only those tools.
    let reader = create_with(&mut client, project.path(), json!({"tools": ["read", "ls"]})).await;
    let reader = reader["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&reader, "interactive").await;
    let (text, _) = reply(&mut client, &reader, "run: echo hi").await;
    assert_eq!(text, "The bash call failed: there is no tool named `bash`", "{text}");

    // A brief is part of what the model reads: the demo counts it as input.
    let plain = client.create(project.path(), "plain").await;
    let briefed = create_with(
        &mut client,
        project.path(),
        json!({"system_prompt": "Be brief and careful. ".repeat(200)}),
    )
    .await;
    let briefed = briefed["data"]["agent_id"].as_str().unwrap().to_owned();
    let mut input = Vec::new();
    for agent in [&plain, &briefed] {
        client.attach(agent, "interactive").await;
        let (_, read) = reply(&mut client, agent, "same words").await;
        let end = read.last().unwrap();
        input.push(end["usage"]["input"].as_u64().unwrap());
    }
    assert!(input[1] > input[0] + 500, "the brief was read: {input:?}");
    let too_long =
        create_with(&mut client, project.path(), json!({"system_prompt": "x".repeat(70_000)}))
            .await;
    assert_eq!(too_long["error"]["code"], "INVALID_REQUEST");

    // A launch policy: at most 2 tasks a job and one level of children.
    let lead = create_with(
        &mut client,
        project.path(),
        json!({"launch_policy": {"maxTasks": 2, "maxDepth": 1}, "names": ["alpha", "beta"]}),
    )
    .await;
    let lead = lead["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&lead, "interactive").await;
    let three = client
        .call("c3", json!({"type": "subagent.create", "parent_agent_id": lead, "strategy": "parallel",
            "tasks": [{"name": "a", "task": "x"}, {"name": "b", "task": "x"}, {"name": "c", "task": "x"}]}))
        .await;
    assert_eq!(three["error"]["code"], "INVALID_REQUEST", "{three}");
    let two = client
        .call("c2", json!({"type": "subagent.create", "parent_agent_id": lead, "strategy": "parallel",
            "tasks": [{"name": "reviewer", "task": "spawn: deeper: x"}, {"name": "writer", "task": "hi"}]}))
        .await;
    let runs = &two["data"]["runs"];
    // Aliases come from the pool; the task name is the definition.
    assert_eq!(runs[0]["alias"], "alpha", "{two}");
    assert_eq!(runs[0]["definition_name"], "reviewer");
    assert_eq!(runs[0]["display_name"], "reviewer · alpha");
    assert_eq!(runs[1]["alias"], "beta");
    let waited = client
        .call("w", json!({"type": "subagent.wait", "parent_agent_id": lead, "handles": [two["data"]["job_id"]]}))
        .await;
    // A child at the depth limit is offered no subagent tools ...
    assert_eq!(
        waited["data"]["runs"][0]["final_text"],
        "The subagent_create call failed: there is no tool named `subagent_create`",
        "{waited}"
    );
    // ... and the daemon refuses it anyway.
    let child = runs[0]["agent_id"].as_str().unwrap();
    client.attach(child, "interactive").await;
    let deeper = client
        .call(
            "c4",
            json!({"type": "subagent.create", "parent_agent_id": child, "name": "z", "task": "x"}),
        )
        .await;
    assert_eq!(deeper["error"]["code"], "CONFLICT", "{deeper}");
    let under_child =
        create_with(&mut client, project.path(), json!({"parent_agent_id": child})).await;
    assert_eq!(under_child["error"]["code"], "CONFLICT", "{under_child}");
}

#[tokio::test]
async fn a_child_never_gets_more_than_its_parents_mode() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    let planner = create_with(&mut client, project.path(), json!({"mode": "plan"})).await;
    let planner = planner["data"]["agent_id"].as_str().unwrap().to_owned();
    client.attach(&planner, "interactive").await;
    let escalated = client
        .call(
            "c",
            json!({"type": "subagent.create", "parent_agent_id": planner, "name": "w",
            "task": "x", "mode": "build"}),
        )
        .await;
    assert_eq!(escalated["error"]["code"], "PERMISSION_DENIED", "{escalated}");
    let inherited = client
        .call("c2", json!({"type": "subagent.create", "parent_agent_id": planner, "name": "w", "task": "x"}))
        .await;
    let child = inherited["data"]["runs"][0]["agent_id"].as_str().unwrap();
    let info = client.call("s", json!({"type": "agent.status", "agent_id": child})).await;
    assert_eq!(info["data"]["agents"][0]["mode"], "plan", "{info}");
}

#[tokio::test]
async fn headless_policy_queue_keeps_a_childs_question_open_until_someone_answers() {
    let daemon = Daemon::start(&[]).await;
    let project = TempDir::new().expect("project");
    let mut client = Client::unix(&daemon.socket()).await;
    // Starting a job needs an interactive attachment to the parent; it
    // then watches as an observer, which never answers (§6.3).
    let spawn = async |client: &mut Client, parent: &str, task: &str| {
        client.attach(parent, "interactive").await;
        let created = client
            .call("c", json!({"type": "subagent.create", "parent_agent_id": parent, "name": "w", "task": task}))
            .await;
        client.attach(parent, "observer").await;
        created["data"].clone()
    };
    // By default a question nobody can answer is denied at once.
    let plain = client.create(project.path(), "plain").await;
    let job = spawn(&mut client, &plain, "run: echo now").await;
    let waited = client
        .call(
            "w",
            json!({"type": "subagent.wait", "parent_agent_id": plain, "handles": [job["job_id"]]}),
        )
        .await;
    let text = waited["data"]["runs"][0]["final_text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("Permission denied"), "{waited}");

    // Under `queue` (which children inherit) it waits for someone.
    let patient =
        create_with(&mut client, project.path(), json!({"headless_policy": "queue"})).await;
    let patient = patient["data"]["agent_id"].as_str().unwrap().to_owned();
    let job = spawn(&mut client, &patient, "run: echo later").await;
    let child = job["runs"][0]["agent_id"].as_str().unwrap().to_owned();
    let asking = |m: &Value| {
        m["type"] == "agent_status_changed"
            && m["agent_id"] == child
            && m["status"] == "waiting_for_permission"
    };
    if !client.seen.iter().any(asking) {
        client.until(asking).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = client.call("s", json!({"type": "agent.status", "agent_id": child})).await;
    assert_eq!(
        status["data"]["agents"][0]["status"], "waiting_for_permission",
        "still open: {status}"
    );
    // Someone attaches to the parent: the child's question is theirs.
    let sync = client.attach(&patient, "interactive").await;
    let pending = &sync["pending_requests"][0];
    assert_eq!(pending["agent_id"], child.as_str(), "{sync}");
    client
        .call(
            "a",
            json!({"type": "permission_response", "agent_id": child,
            "request_id": pending["request_id"], "choice_id": "allow-once"}),
        )
        .await;
    let waited = client
        .call("w2", json!({"type": "subagent.wait", "parent_agent_id": patient, "handles": [job["job_id"]]}))
        .await;
    assert_eq!(waited["data"]["runs"][0]["final_text"], "exit code 0\nlater", "{waited}");
}

#[tokio::test]
async fn a_parent_s_abort_cancels_its_wait_and_never_the_work() {
    let mut setup = Setup::new().await;
    let parent = setup.parent.clone();
    setup.client.attach(&parent, "interactive").await;
    let (text, _) = reply(&mut setup.client, &parent, "spawn: slow: stream: 200").await;
    assert!(text.starts_with("subagent_create: "), "{text}");
    setup.client.call("w", json!({"type": "prompt", "agent_id": parent, "message": "wait:"})).await;
    setup
        .client
        .until_agent(&parent, |m| m["type"] == "tool_call" && m["name"] == "subagent_wait")
        .await;
    let before = setup.client.seen.len();
    setup.client.call("a", json!({"type": "abort", "agent_id": parent})).await;
    setup.client.until_agent(&parent, |m| m["type"] == "turn_end").await;
    let read = &setup.client.seen[before..];
    let result = read.iter().find(|m| m["type"] == "tool_result").expect("the wait's result");
    assert_eq!(result["is_error"], true, "{result}");
    // The job plays out regardless.
    let waited = setup.wait(&["slow"], json!({})).await;
    assert_eq!(waited["runs"][0]["state"], "completed", "{waited}");
}
