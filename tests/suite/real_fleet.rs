//! The fleet governor (docs/PROTOCOL-NOTES.md, "The fleet" and "Budgets")
//! with an agent nobody here wrote: Claude Code
//! (`@zed-industries/claude-agent-acp`) under Shard through ACP, offline
//! against the scripted model server, set up as tests/suite/real_acp.rs
//! sets it up. What its whole process tree holds is measured and told;
//! what its model reported is what Shard counts; over `max_awake_agents`
//! it hibernates and its next prompt wakes it with its conversation; at a
//! budget's cap what is prompted next waits until the cap is set higher.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::budgets::{budget_question, is, ok, paused, seen_since_or_next};
use super::client::Client;
use super::fleet::{entry, exited, listed, number, state_of};
use super::real_acp::{ModelServer, RESOLVE, runtime_config, said, turn};
use super::support::{Daemon, proc_kib, wait_until_within};

/// A daemon whose runtime `claude` is Claude Code, reaching the scripted
/// model server, with `config` added to its `config.toml`. Dropped in
/// order: the daemon (its agents' sandboxes end with it), the server, the
/// directories.
struct Fleet {
    daemon: Daemon,
    project: PathBuf,
    /// The model server's log: one JSON line per request it answered.
    log: PathBuf,
    _server: ModelServer,
    _scratch: TempDir,
}

impl Fleet {
    async fn start(config: &str) -> Fleet {
        let scratch = TempDir::new().unwrap();
        let home = scratch.path().join("home");
        let state = scratch.path().join("claude");
        let project = scratch.path().join("project");
        for dir in [&home, &state, &project] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let project = project.canonicalize().unwrap();
        let log = scratch.path().join("model.log");
        let server = ModelServer::start(&log).await;
        let runtime = runtime_config("claude", &state, server.port);
        std::fs::write(home.join("config.toml"), format!("{config}\n{runtime}")).unwrap();
        let daemon = Daemon::start_in(&home, &RESOLVE).await;
        Fleet { daemon, project, log, _server: server, _scratch: scratch }
    }

    async fn client(&self) -> Client {
        Client::unix(&self.daemon.socket()).await
    }

    /// Creates a Claude Code agent and attaches `client` to it.
    async fn claude(&self, client: &mut Client) -> String {
        let cwd = self.project.to_str().unwrap();
        let create = json!({"type": "agent.create", "cwd": cwd, "runtime": "claude"});
        let made = client.call_within("create-claude", create, Duration::from_secs(60)).await;
        let agent = ok(&made)["agent_id"].as_str().unwrap().to_owned();
        client.attach(&agent, "interactive").await;
        agent
    }

    /// The Messages API calls the model server answered, in order, as it
    /// logged them (each with the `usage` it reported).
    fn model_calls(&self) -> Vec<Value> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
            .filter(|call| call["usage"].is_object())
            .collect()
    }

    /// The daemon's descendants now.
    fn processes(&self) -> Vec<Process> {
        descendants(self.daemon.child.id().expect("running"))
    }
}

/// A process on this machine, as `/proc` shows it.
#[derive(Clone)]
struct Process {
    pid: u32,
    command: String,
}

/// Every process under `root` (not `root` itself), by their parents'
/// pids in `/proc`.
fn descendants(root: u32) -> Vec<Process> {
    let mut all = Vec::new();
    for found in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = found.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // After the command's closing parenthesis: the state, then the parent.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        let Some(parent) = parent.and_then(|parent| parent.parse::<u32>().ok()) else { continue };
        let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let command = String::from_utf8_lossy(&command).replace('\0', " ");
        all.push((parent, Process { pid, command }));
    }
    let mut under = vec![root];
    let mut tree = Vec::new();
    while let Some(parent) = under.pop() {
        let (children, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(|(p, _)| *p == parent);
        all = rest;
        for (_, child) in children {
            under.push(child.pid);
            tree.push(child);
        }
    }
    tree
}

/// What `processes` hold together, in bytes: resident, and proportional.
fn held(processes: &[Process]) -> (u64, u64) {
    let sum = |file: &str, field: &str| -> u64 {
        let kib = processes.iter().filter_map(|process| proc_kib(process.pid, file, field));
        kib.sum::<u64>() * 1024
    };
    (sum("status", "VmRSS"), sum("smaps_rollup", "Pss"))
}

/// Whether `figure` is within a quarter of `measured`, as the memory of
/// processes doing nothing stays between two looks.
fn about(figure: u64, measured: u64) -> bool {
    figure * 4 >= measured * 3 && figure * 3 <= measured * 4
}

/// The Claude Code of this daemon, by its command line: the ACP adapter,
/// and Claude Code it starts.
const ADAPTER: &str = "claude-agent-acp/dist/index.js";
const CLAUDE_CODE: &str = "claude-agent-sdk/cli.js";

#[tokio::test]
async fn claude_codes_whole_process_tree_and_what_its_model_reported_are_counted() {
    let fleet = Fleet::start("").await;
    let mut client = fleet.client().await;
    let mut watcher = fleet.client().await;
    ok(&watcher.call("w", json!({"type": "fleet.watch"})).await);
    let agent = fleet.claude(&mut client).await;

    // A reply, and a command: a turn of two model calls.
    let first = turn(&mut client, &agent, "hello zebra42", "deny").await;
    assert!(said(&first).contains("echo: hello zebra42"), "{first:?}");
    let second = turn(&mut client, &agent, "run: echo fleet-tree", "allow").await;
    assert!(said(&second).contains("done: fleet-tree"), "{second:?}");

    // Memory: the whole tree, the sandbox's processes, the adapter and
    // Claude Code under it, measured once the turn is over and a look
    // has been taken since.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let tree = fleet.processes();
    let commands: Vec<&str> = tree.iter().map(|process| process.command.as_str()).collect();
    assert!(
        commands.iter().any(|c| c.contains(ADAPTER))
            && commands.iter().any(|c| c.contains(CLAUDE_CODE)),
        "Claude Code runs under its adapter: {commands:#?}"
    );
    let (rss, pss) = held(&tree);
    let list = client.call("l", json!({"type": "agent.list"})).await;
    let info = listed(&list, &agent);
    let resources = &info["resources"];
    let (listed_rss, listed_pss) =
        (number(&resources["rss_bytes"]), number(&resources["pss_bytes"]));
    assert!(about(listed_rss, rss), "rss {listed_rss} of the tree's {rss}: {commands:#?}");
    assert!(about(listed_pss, pss), "pss {listed_pss} of the tree's {pss}: {commands:#?}");
    assert!(listed_pss <= listed_rss, "{info}");
    // What the adapter alone holds is not the tree's: Claude Code is
    // counted too.
    let adapter: Vec<Process> =
        tree.iter().filter(|process| process.command.contains(ADAPTER)).cloned().collect();
    let (adapter_rss, _) = held(&adapter);
    assert!(listed_rss > adapter_rss * 3 / 2, "{listed_rss} is the adapter's {adapter_rss}");

    // The watcher was told of the agent's tree as well: its latest word
    // is what agent.list says, or within a look of it. (Its answer comes
    // after whatever the daemon told it before.)
    ok(&watcher.call("wl", json!({"type": "agent.list"})).await);
    let latest = watcher
        .seen
        .iter()
        .rev()
        .find_map(|event| {
            (event["type"] == "fleet_updated").then(|| entry(event, &agent)).flatten()
        })
        .unwrap_or_else(|| panic!("never told: {:?}", watcher.seen));
    assert!(about(number(&latest["rss_bytes"]), rss), "{latest} of the tree's {rss}");
    assert!(number(&latest["pss_bytes"]) > 0, "{latest}");

    // Spend: the tokens the model server reported, call by call, are the
    // agent's, in the turns' `usage`, in `usage.agent`, in agent.list and
    // in `agent_usage` to every connection; the cost is Claude Code's own.
    let calls = fleet.model_calls();
    assert!(calls.len() >= 3, "a reply, then a command and its result: {calls:#?}");
    let reported =
        |field: &str| calls.iter().map(|call| number(&call["usage"][field])).sum::<u64>();
    let (input, output) = (reported("input_tokens"), reported("output_tokens"));
    assert!(input > 0 && output > 0, "{calls:#?}");
    let turn_usage: Vec<&Value> =
        first.iter().chain(&second).filter(|event| is(event, "usage", &agent)).collect();
    assert_eq!(turn_usage.len(), 2, "one per turn: {turn_usage:?}");
    let summed = |field: &str| turn_usage.iter().map(|usage| number(&usage[field])).sum::<u64>();
    assert_eq!((summed("input"), summed("output")), (input, output), "{turn_usage:?}");

    let usage = client.call("u", json!({"type": "usage.agent", "agent_id": agent})).await;
    let total = &ok(&usage)["total"];
    assert_eq!((number(&total["input"]), number(&total["output"])), (input, output), "{total}");
    assert_eq!(total["turns"], 2, "{total}");
    let cost = total["cost"].as_f64().expect("Claude Code says what it cost");
    assert!(cost > 0.0, "{total}");
    assert_eq!(total["unpriced_calls"], 0, "{total}");
    let listed_usage = &info["usage"];
    assert_eq!(
        (number(&listed_usage["input"]), number(&listed_usage["output"])),
        (input, output),
        "{info}"
    );
    let told = watcher.seen.iter().rev().find(|event| is(event, "agent_usage", &agent));
    let told = &told.expect("agent_usage to a connection not attached")["usage"];
    assert_eq!((number(&told["input"]), number(&told["output"])), (input, output), "{told}");
}

#[tokio::test]
async fn claude_code_hibernated_over_the_awake_limit_wakes_with_its_conversation() {
    let fleet = Fleet::start("[limits]\nmax_awake_agents = 2\n").await;
    let mut client = fleet.client().await;
    let mut other = fleet.client().await;
    ok(&other.call("w", json!({"type": "fleet.watch"})).await);
    let claude = fleet.claude(&mut client).await;
    let events = turn(&mut client, &claude, "remember zebra42", "deny").await;
    assert!(said(&events).contains("echo: remember zebra42"), "{events:?}");
    let before = fleet.model_calls().len();

    // Two of Shard's own agents: the second start is one more than the
    // limit, and Claude Code, idle and used least recently, hibernates.
    let demo = client.create(&fleet.project, "demo").await;
    let list = client.call("l1", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &claude), "running", "two awake is the limit: {list}");
    let third = client.create(&fleet.project, "third").await;
    let gone = exited(&mut other, &claude).await;
    assert_eq!(gone["runtime_state"], "hibernated", "{gone}");
    let reason = gone["reason"].as_str().unwrap();
    assert!(reason.contains("max_awake_agents") && reason.contains(&third), "{reason}");
    wait_until_within("Claude Code's processes to end", Duration::from_secs(10), || {
        !fleet.processes().iter().any(|process| process.command.contains(ADAPTER))
    })
    .await;
    // The next look finds nothing of it running.
    other.until(|event| event["type"] == "fleet_updated" && entry(event, &claude).is_none()).await;
    let list = client.call("l2", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &claude), "hibernated", "{list}");
    assert_eq!(listed(&list, &claude)["status"], "idle", "{list}");
    assert!(listed(&list, &claude).get("resources").is_none(), "nothing of it runs: {list}");
    // While it went, it was not counted awake: nobody else went for it.
    assert_eq!(state_of(&list, &demo), "running", "{list}");
    assert_eq!(state_of(&list, &third), "running", "{list}");

    // Its next prompt starts it again in its session: the model is sent
    // the earlier conversation; the agent Shard's own now used least
    // recently makes room.
    let from = client.seen.len();
    let events = turn(&mut client, &claude, "recall zebra42", "deny").await;
    assert!(said(&events).contains("recall: remembered"), "{events:?}");
    let woke = &client.seen[from..];
    let warned = woke.iter().find(|event| event["type"] == "error");
    assert!(warned.is_none(), "the session was taken up, not begun anew: {warned:?}");
    // The one call of the turn carried the earlier exchange too.
    let calls = fleet.model_calls();
    assert_eq!(calls.len(), before + 1, "{calls:#?}");
    let sent = number(&calls[before]["summary"]["n_messages"]);
    assert!(sent >= 3, "the earlier prompt and reply, then this one: {:#}", calls[before]);
    assert!(fleet.processes().iter().any(|process| process.command.contains(ADAPTER)));
    let made_room = exited(&mut other, &demo).await;
    assert_eq!(made_room["runtime_state"], "hibernated", "{made_room}");
    let list = client.call("l3", json!({"type": "agent.list"})).await;
    assert_eq!(state_of(&list, &claude), "running", "{list}");
    let awake = [&claude, &demo, &third].into_iter().filter(|id| state_of(&list, id) == "running");
    assert_eq!(awake.count(), 2, "{list}");
}

#[tokio::test]
async fn claude_code_at_its_token_budget_holds_the_next_prompt_until_the_cap_is_set_higher() {
    let budget = "[[budgets]]\nscope = \"agent\"\nperiod = \"day\"\ntokens = 100\n";
    let fleet = Fleet::start(budget).await;
    let mut client = fleet.client().await;
    let mut other = fleet.client().await;
    let claude = fleet.claude(&mut client).await;

    // The turn that passes the cap runs to its end: its model calls
    // happen inside Claude Code.
    let events = turn(&mut client, &claude, "remember zebra42", "deny").await;
    assert!(said(&events).contains("echo: remember zebra42"), "{events:?}");
    let reached = seen_since_or_next(&mut other, 0, |event| {
        event["type"] == "budget_updated"
            && event["budget"]["agent_id"] == claude.as_str()
            && event["budget"]["state"] == "reached"
    })
    .await;
    let status = &reached["budget"];
    assert_eq!(status["cap_tokens"], 100, "{reached}");
    let spent = number(&status["spent_tokens"]);
    let reported: u64 = fleet
        .model_calls()
        .iter()
        .map(|call| {
            number(&call["usage"]["input_tokens"]) + number(&call["usage"]["output_tokens"])
        })
        .sum();
    assert_eq!(spent, reported, "what the model reported is what counts: {reached}");

    // A prompt sent now is taken, and waits: paused, the question asked,
    // nothing sent to the model.
    let calls = fleet.model_calls().len();
    let from = client.seen.len();
    let prompt = json!({"type": "prompt", "agent_id": claude, "message": "recall zebra42"});
    ok(&client.call("held", prompt).await);
    let pause = paused(&mut client, &claude).await;
    assert!(pause["detail"].as_str().unwrap().contains("budget reached"), "{pause}");
    let question = budget_question(&mut client, &claude).await;
    let list = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed(&list, &claude)["status"], "paused", "{list}");
    assert_eq!(state_of(&list, &claude), "running", "a paused agent keeps its process: {list}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    ok(&client.call("l2", json!({"type": "agent.list"})).await);
    let started = client.seen[from..].iter().find(|event| is(event, "turn_start", &claude));
    assert!(started.is_none(), "the prompt waits: {started:?}");
    assert_eq!(fleet.model_calls().len(), calls, "nothing went to the model");

    // The cap set higher: the question is withdrawn, and the prompt that
    // waited runs, in the same conversation.
    let set = json!({"type": "budget.set", "scope": "agent", "agent_id": claude,
                     "period": "day", "tokens": 10_000_000});
    let set = client.call("set", set).await;
    assert_eq!(ok(&set)["budget"]["state"], "ok", "{set}");
    let withdrawn = seen_since_or_next(&mut client, from, |event| {
        is(event, "permission_resolved", &claude) && event["request_id"] == question["request_id"]
    })
    .await;
    assert_eq!(withdrawn["source"], "withdrawn", "{withdrawn}");
    seen_since_or_next(&mut client, from, |event| is(event, "turn_end", &claude)).await;
    let ran: Vec<Value> = client.seen[from..].to_vec();
    assert!(said(&ran).contains("recall: remembered"), "{ran:?}");
    assert_eq!(fleet.model_calls().len(), calls + 1, "the waiting prompt's one call");
}
