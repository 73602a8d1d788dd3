//! Search across every agent's sessions (docs/PROTOCOL-NOTES.md, "Search";
//! docs/ARCHITECTURE.md, "Search"): what a demo agent said is found by its
//! words, from a browser and a local client; query syntax is only words;
//! the index survives a restart, is rebuilt from the session logs when it
//! is lost, stays within its bounds, and follows its agents and sessions.

use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::{Browser, Client};
use super::support::Daemon;

/// How long a message may take to be searchable after its turn ended (the
/// index reads the log as soon as the host tells it; a restart catches up).
const INDEXED_WITHIN: Duration = Duration::from_secs(15);

async fn say(client: &mut Client, agent: &str, message: &str) {
    let response =
        client.call("say", json!({"type": "prompt", "agent_id": agent, "message": message})).await;
    assert_eq!(response["success"], true, "{response}");
    client.until_agent(agent, |m| m["type"] == "turn_end").await;
}

async fn search(client: &mut Client, query: Value) -> Value {
    let mut command = json!({"type": "search.query"});
    for (key, value) in query.as_object().expect("query") {
        command[key] = value.clone();
    }
    client.call("search", command).await
}

/// The results of searching `words`, once there are `count` of them.
async fn found(client: &mut Client, words: &str, count: usize) -> Vec<Value> {
    let started = std::time::Instant::now();
    loop {
        let response = search(client, json!({"query": words})).await;
        assert_eq!(response["success"], true, "{response}");
        let results = response["data"]["results"].as_array().cloned().unwrap_or_default();
        if results.len() >= count {
            return results;
        }
        assert!(
            started.elapsed() < INDEXED_WITHIN,
            "`{words}`: {} results, not {count}: {response}",
            results.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The number of results for `words` now.
async fn count(client: &mut Client, words: &str) -> usize {
    let response = search(client, json!({"query": words})).await;
    assert_eq!(response["success"], true, "{response}");
    response["data"]["results"].as_array().map_or(0, Vec::len)
}

/// The snippet's text, with `[` `]` around what matched.
fn snippet(result: &Value) -> String {
    result["snippet"]
        .as_array()
        .expect("snippet")
        .iter()
        .map(|part| {
            let text = part["text"].as_str().expect("text");
            if part["hit"] == true { format!("[{text}]") } else { text.to_owned() }
        })
        .collect()
}

fn entry_ids(sync: &Value) -> Vec<String> {
    sync["live_window"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| message["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test]
async fn search_finds_what_an_agent_said_and_names_where_it_is() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut local = Client::unix(&daemon.socket()).await;
    let deployer = local.create(project.path(), "deployer").await;
    local.attach(&deployer, "interactive").await;
    say(&mut local, &deployer, "please run the zanzibar deployment tonight").await;
    let other = local.create(project.path(), "bystander").await;
    local.attach(&other, "interactive").await;
    say(&mut local, &other, "nothing about islands here").await;

    // The prompt and the demo model's echo of it, best first.
    let results = found(&mut local, "zanzibar", 2).await;
    assert_eq!(results.len(), 2, "{results:?}");
    let roles: Vec<&str> = results.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert!(roles.contains(&"user") && roles.contains(&"assistant"), "{roles:?}");
    let mut watcher = Client::unix(&daemon.socket()).await;
    let entries = entry_ids(&watcher.attach(&deployer, "observer").await);
    for result in &results {
        assert_eq!(result["agent_id"], deployer);
        assert_eq!(result["agent_name"], "deployer");
        assert_eq!(result["active"], true);
        assert!(result["at"].as_u64().unwrap() > 1_700_000_000_000, "{result}");
        let entry = result["entry_id"].as_str().unwrap();
        assert!(entries.iter().any(|known| known == entry), "{entry} not in {entries:?}");
        assert!(snippet(result).contains("[zanzibar]"), "{}", snippet(result));
    }
    let session = results[0]["session_id"].as_str().unwrap();
    assert!(session.starts_with("sess-"));

    // Every word must be there, the last one may be a word's start, case
    // and accents do not matter.
    assert_eq!(found(&mut local, "ZANZIBAR deploy", 2).await.len(), 2);
    assert_eq!(count(&mut local, "zanzibar islands").await, 0);
    assert_eq!(found(&mut local, "islands", 2).await[0]["agent_id"], other);

    // One agent's only; a limit.
    let only = search(&mut local, json!({"query": "zanzibar", "agent_id": other})).await;
    assert_eq!(only["data"]["results"], json!([]), "{only}");
    let one = search(&mut local, json!({"query": "zanzibar", "limit": 1})).await;
    assert_eq!(one["data"]["results"].as_array().unwrap().len(), 1);

    // A browser searches the same index.
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut tab = browser.connect(&daemon).await;
    assert_eq!(found(&mut tab, "zanzibar", 2).await, results);
}

#[tokio::test]
async fn query_syntax_is_only_words_and_bad_queries_are_refused_clearly() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "syntax").await;
    client.attach(&agent, "interactive").await;
    say(&mut client, &agent, "the quokka said \"near\" and -5 * 3 (maybe) col:value").await;
    found(&mut client, "quokka", 2).await;

    // What FTS5 would take for syntax is words, or nothing.
    for query in [
        "\"quokka",
        "quokka\"",
        "\"quokka\"",
        "quok*",
        "quokka*",
        "-quokka",
        "quokka -5",
        "NEAR",
        "NEAR(quokka said)",
        "quokka OR",
        "OR quokka",
        "AND",
        "NOT quokka",
        "(quokka",
        "quokka)",
        "col:value",
        "^quokka",
        "quokka + said",
        "{quokka}",
        "quokka ' said",
        "'",
        "\\",
        "\u{2028}quokka",
        "quokka\u{0}",
    ] {
        let response = search(&mut client, json!({"query": query})).await;
        match response["success"].as_bool() {
            Some(true) => {}
            _ => assert_eq!(response["error"]["code"], "INVALID_REQUEST", "{query:?}: {response}"),
        }
    }
    for query in ["\"quokka\"", "quok*", "NEAR quokka", "(quokka)", "quokka said"] {
        let response = search(&mut client, json!({"query": query})).await;
        let results = response["data"]["results"].as_array().map_or(0, Vec::len);
        assert_eq!(results, 2, "{query:?} finds the message: {response}");
    }
    assert_eq!(count(&mut client, "NOT quokka").await, 0, "NOT is a word");

    // Refusals say what is wrong, and the connection goes on.
    for (query, code, says) in [
        (json!({"query": "   "}), "INVALID_REQUEST", "empty"),
        (json!({"query": "* - \" ( )"}), "INVALID_REQUEST", "no words"),
        (json!({"query": "x".repeat(1001)}), "INVALID_REQUEST", "longer than 1000"),
        (json!({"query": "quokka", "limit": 0}), "INVALID_REQUEST", "limit"),
        (json!({"query": 5}), "INVALID_REQUEST", "query"),
        (json!({}), "INVALID_REQUEST", "query"),
        (json!({"query": "quokka", "agent_id": "agent-nobody"}), "NOT_FOUND", "agent-nobody"),
    ] {
        let response = search(&mut client, query.clone()).await;
        assert_eq!(response["success"], false, "{query}: {response}");
        assert_eq!(response["error"]["code"], code, "{query}: {response}");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }
    // A limit past the cap is the cap.
    let many = search(&mut client, json!({"query": "quokka", "limit": 100_000})).await;
    assert_eq!(many["success"], true, "{many}");
    assert_eq!(found(&mut client, "quokka", 2).await.len(), 2);
}

#[tokio::test]
async fn results_survive_a_restart_and_a_lost_index_is_rebuilt_from_the_logs() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "durable").await;
    client.attach(&agent, "interactive").await;
    say(&mut client, &agent, "remember the axolotl").await;
    let before = found(&mut client, "axolotl", 2).await;
    drop(client);
    daemon.terminate().await;

    // The index is a private file of the home, like every other.
    use std::os::unix::fs::PermissionsExt;
    let index = home.path().join("search.db");
    let mode = std::fs::metadata(&index).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");

    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    assert_eq!(found(&mut client, "axolotl", 2).await, before, "kept across the restart");
    drop(client);
    daemon.terminate().await;

    // Lost (or deleted by hand): made again from the session logs.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(home.path().join(format!("search.db{suffix}")));
    }
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    assert_eq!(found(&mut client, "axolotl", 2).await, before, "rebuilt from the logs");
    // And it goes on following the agent.
    client.attach(&agent, "interactive").await;
    say(&mut client, &agent, "and the pangolin").await;
    assert_eq!(found(&mut client, "pangolin", 2).await.len(), 2);
}

#[tokio::test]
async fn the_index_keeps_the_newest_messages_within_its_bound() {
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start(&["--search-max-messages", "4"]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "chatty").await;
    client.attach(&agent, "interactive").await;
    // Two messages a turn (the prompt and its echo): four turns, eight.
    for word in ["alpaca", "bison", "caribou", "dingo"] {
        say(&mut client, &agent, &format!("a word: {word}")).await;
        found(&mut client, word, 2).await;
    }
    assert_eq!(count(&mut client, "alpaca").await, 0, "evicted first");
    assert_eq!(count(&mut client, "bison").await, 0, "evicted next");
    assert_eq!(count(&mut client, "caribou").await, 2);
    assert_eq!(count(&mut client, "dingo").await, 2);
    assert_eq!(count(&mut client, "word").await, 4, "four messages in all");
}

#[tokio::test]
async fn a_session_is_found_with_the_agent_that_runs_it_until_its_agent_is_gone() {
    let home = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let agent = client.create(project.path(), "switcher").await;
    client.attach(&agent, "interactive").await;
    say(&mut client, &agent, "first about the okapi").await;
    let first = found(&mut client, "okapi", 2).await;
    let first_session = first[0]["session_id"].as_str().unwrap().to_owned();

    // A fork, switched to: the first session is still found, not active.
    let mut watcher = Client::unix(&daemon.socket()).await;
    let at = entry_ids(&watcher.attach(&agent, "observer").await)[0].clone();
    drop(watcher);
    let fork = client
        .call(
            "fork",
            json!({"type": "session_op", "agent_id": agent, "op": "fork",
                   "args": {"from_entry_id": at}}),
        )
        .await;
    assert_eq!(fork["success"], true, "{fork}");
    let fork_session = fork["data"]["session_id"].as_str().unwrap().to_owned();
    let switched = client
        .call(
            "activate",
            json!({"type": "session.activate", "agent_id": agent, "session_id": fork_session}),
        )
        .await;
    assert_eq!(switched["success"], true, "{switched}");
    client.until_agent(&agent, |m| m["type"] == "sync").await;
    say(&mut client, &agent, "then about the tapir").await;
    let tapir = found(&mut client, "tapir", 2).await;
    assert!(tapir.iter().all(|r| r["session_id"] == fork_session && r["active"] == true));
    // The first session's two, and the fork's copy of the prompt it began at.
    let okapi = found(&mut client, "okapi", 3).await;
    let old: Vec<&Value> = okapi.iter().filter(|r| r["session_id"] == first_session).collect();
    assert_eq!(old.len(), 2, "{okapi:?}");
    assert!(old.iter().all(|r| r["active"] == false && r["agent_id"] == agent));
    assert!(okapi.iter().all(|r| r["session_id"] == first_session || r["active"] == true));

    // A stopped agent keeps its sessions, and so its results.
    let killed =
        client.call("kill", json!({"type": "agent.kill", "agent_id": agent, "force": true})).await;
    assert_eq!(killed["success"], true, "{killed}");
    let other = client.create(project.path(), "survivor").await;
    client.attach(&other, "interactive").await;
    say(&mut client, &other, "the survivor mentions the okapi too").await;
    let okapi = found(&mut client, "okapi", 5).await;
    assert_eq!(okapi.iter().filter(|r| r["agent_id"] == agent).count(), 3, "{okapi:?}");
    drop(client);
    daemon.terminate().await;

    // An agent removed by hand (Shard never removes one) takes its
    // sessions' results with it at the next start; the others stay.
    std::fs::remove_dir_all(home.path().join("agents").join(&agent)).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let started = std::time::Instant::now();
    loop {
        let results = found(&mut client, "okapi", 1).await;
        if results.iter().all(|r| r["agent_id"] == other) {
            assert_eq!(results.len(), 2, "the survivor's prompt and echo: {results:?}");
            break;
        }
        assert!(started.elapsed() < INDEXED_WITHIN, "still listed: {results:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count(&mut client, "tapir").await, 0);
}
