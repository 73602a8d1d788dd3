//! The sandbox around every agent (CONTRACT.md, "Sandbox";
//! docs/SANDBOX.md), through the real binary: what an agent's commands
//! cannot read or write, the `network` question its egress proxy asks, and
//! who may widen the policy.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::Client;
use super::support::Daemon;

/// A machine as an agent's user has it: a home with secrets in it, a
/// repository to work in, and a daemon whose `$SHARD_HOME` is in that home.
struct Machine {
    root: TempDir,
    daemon: Daemon,
}

impl Machine {
    async fn start(config: &str, extra_args: &[&str]) -> Machine {
        let root = TempDir::new().expect("root");
        let user = root.path().join("user");
        let home = user.join(".shard");
        std::fs::create_dir_all(user.join(".ssh")).expect("ssh");
        std::fs::write(user.join(".ssh/id_ed25519"), "SECRET-SSH-KEY").expect("key");
        std::fs::write(user.join(".netrc"), "machine x password SECRET-NETRC").expect("netrc");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::write(home.join("config.toml"), config).expect("config");
        let project = root.path().join("project");
        std::fs::create_dir_all(&project).expect("project");
        git(&project, &["init", "-q", "-b", "main"]);
        std::fs::write(project.join("README"), "hello\n").expect("readme");
        let user_home = user.display().to_string();
        let env = [("HOME", user_home.as_str())];
        let daemon = Daemon::start_with(&home, extra_args, &env, None).await;
        Machine { root, daemon }
    }

    fn user(&self) -> PathBuf {
        self.root.path().join("user")
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    async fn client(&self) -> Client {
        Client::unix(&self.daemon.socket()).await
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?}");
}

/// Prompts `command` through the demo model's `run:`, allows the `bash`
/// question, and returns the turn's `tool_result` as text.
async fn run_allowed(client: &mut Client, agent: &str, command: &str) -> String {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
    client.call("p", prompt).await;
    let asked = client.permission_request(agent).await;
    assert_eq!(asked["tool_name"], "bash", "{asked}");
    answer(client, agent, &asked, "allow");
    let read = client.until_agent(agent, |message| message["type"] == "turn_end").await;
    let result = read.iter().find(|message| message["type"] == "tool_result").expect("result");
    result.to_string()
}

fn answer(client: &Client, agent: &str, asked: &Value, decision: &str) {
    client.send(json!({"type": "permission_response", "agent_id": agent,
                        "request_id": asked["request_id"], "decision": decision}));
}

#[tokio::test]
async fn shard_s_own_agent_reads_no_secret_and_writes_only_its_directory() {
    // A runtime's environment may hold a key: the agent reads config.toml,
    // never that.
    let config = "[[runtimes]]\nid = \"other\"\nprotocol = \"acp\"\ncommand = \"true\"\n\
                  env = { OTHER_KEY = \"SECRET-RUNTIME-KEY\" }\n";
    let machine = Machine::start(config, &[]).await;
    let mut client = machine.client().await;
    let project = machine.project();
    let agent = client.create(&project, "boxed").await;
    client.attach(&agent, "interactive").await;
    let user = machine.user();
    let home = &machine.daemon.home;
    let outside = machine.root.path().join("outside.txt");
    let command = format!(
        "cat {ssh} {netrc} {config}; ls -a {home}; \
         echo planted > {outside}; echo planted > {home}/planted; \
         printf '#!/bin/sh\\necho hooked\\n' > .git/hooks/pre-commit; \
         printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' >> .git/config; \
         echo mine > made.txt && echo wrote-own-dir",
        ssh = user.join(".ssh/id_ed25519").display(),
        netrc = user.join(".netrc").display(),
        config = home.join("config.toml").display(),
        home = home.display(),
        outside = outside.display(),
    );
    let result = run_allowed(&mut client, &agent, &command).await;
    assert!(!result.contains("SECRET"), "a secret was read: {result}");
    assert!(result.contains("other"), "config.toml is read, without the key: {result}");
    assert!(!result.contains("agents"), "$SHARD_HOME was listed: {result}");
    assert!(result.contains("wrote-own-dir"), "{result}");
    assert_eq!(std::fs::read_to_string(project.join("made.txt")).expect("made"), "mine\n");
    assert!(!outside.exists(), "wrote outside its directory");
    assert!(!home.join("planted").exists(), "wrote in $SHARD_HOME");
    assert!(!project.join(".git/hooks/pre-commit").exists(), "planted a hook");
    let config = std::fs::read_to_string(project.join(".git/config")).expect("config");
    assert!(!config.contains("fsmonitor"), "changed .git/config: {config}");

    let listed = client.call("l", json!({"type": "agent.list"})).await;
    let info = &listed["data"]["agents"][0];
    assert_eq!(info["sandbox"]["mode"], "workspace-write", "{info}");
    assert_eq!(info["sandbox"]["network"], "ask", "{info}");
}

/// A server on this machine that answers any request with `body`, and
/// counts the connections it accepted.
pub(super) async fn server(
    body: &'static str,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0; 4096];
                let _ = stream.read(&mut buffer).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn a_host_not_allowed_is_a_question_any_client_answers() {
    let (port, accepted) = server("hello-from-the-host").await;
    let resolve = "example.test=127.0.0.1".to_owned();
    let allowed = format!("[sandbox]\nallow_hosts = [\"allowed.test:{port}\"]\n");
    let machine = Machine::start(
        &allowed,
        &["--egress-resolve", &resolve, "--egress-resolve", "allowed.test=127.0.0.1"],
    )
    .await;
    let mut driver = machine.client().await;
    let mut answerer = machine.client().await;
    let agent = driver.create(&machine.project(), "asking").await;
    driver.attach(&agent, "interactive").await;
    answerer.attach(&agent, "interactive").await;
    let curl = |host: &str| format!("curl -sS --max-time 30 http://{host}:{port}/");

    // Allowed by config.toml: through, without a network question.
    let result = run_allowed(&mut driver, &agent, &curl("allowed.test")).await;
    assert!(result.contains("hello-from-the-host"), "{result}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);

    // Any other host asks; a second client allows it while the first watches.
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": format!("run: {}", curl("example.test"))});
    driver.call("p", prompt).await;
    let bash = driver.permission_request(&agent).await;
    answer(&driver, &agent, &bash, "allow");
    let asked = answerer
        .until_agent(&agent, |message| {
            message["type"] == "permission_request" && message["tool_name"] == "network"
        })
        .await
        .pop()
        .expect("a network question");
    assert_eq!(asked["input"], json!({"host": "example.test", "port": port}), "{asked}");
    // Which process asked, as the sandbox saw it.
    let process = asked["details"]
        .as_array()
        .expect("details")
        .iter()
        .find(|detail| detail["label"] == "process")
        .expect("the process that asked");
    assert!(process["value"].as_str().unwrap_or_default().starts_with("curl (pid "), "{asked}");
    answer(&answerer, &agent, &asked, "allow");
    let read = driver.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved = read
        .iter()
        .find(|message| {
            message["type"] == "permission_resolved" && message["request_id"] == asked["request_id"]
        })
        .expect("the driver saw it resolved");
    assert_eq!(resolved["decision"], "allow", "{resolved}");
    let result = read.iter().find(|message| message["type"] == "tool_result").expect("result");
    assert!(result.to_string().contains("hello-from-the-host"), "{result}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Denied: the command's connection fails, nothing reaches the server.
    driver.call("p2", json!({"type": "prompt", "agent_id": agent, "message": format!("run: {}", curl("example.test"))})).await;
    let bash = driver.permission_request(&agent).await;
    answer(&driver, &agent, &bash, "allow_always");
    let asked = driver
        .until_agent(&agent, |message| message["type"] == "permission_request")
        .await
        .pop()
        .expect("a network question");
    assert_eq!(asked["tool_name"], "network");
    answer(&driver, &agent, &asked, "deny");
    let read = driver.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let result = read.iter().find(|message| message["type"] == "tool_result").expect("result");
    assert!(!result.to_string().contains("hello-from-the-host"), "{result}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);

    // Nobody to answer: the headless policy denies it (the command itself
    // runs on the grant just made).
    drop(answerer);
    let mut observer = machine.client().await;
    observer.attach(&agent, "observer").await;
    driver.send(json!({"id": "p3", "type": "prompt", "agent_id": agent, "message": format!("run: {}", curl("example.test"))}));
    driver.call("d", json!({"type": "agent.detach", "agent_id": agent})).await;
    let read = observer.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved =
        read.iter().find(|message| message["type"] == "permission_resolved").expect("resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("deny"), Some("headless")),
        "{resolved}"
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_network_question_whose_program_gave_up_is_withdrawn_in_every_client() {
    let (port, accepted) = server("never-reached").await;
    let resolve = "example.test=127.0.0.1".to_owned();
    let machine = Machine::start("", &["--egress-resolve", &resolve]).await;
    let mut driver = machine.client().await;
    let mut watcher = machine.client().await;
    let agent = driver.create(&machine.project(), "giving-up").await;
    driver.attach(&agent, "interactive").await;
    watcher.attach(&agent, "interactive").await;
    // Nobody answers curl's network question; curl is then stopped, as a
    // program that gives up waiting ends (its connection closes).
    let command = format!("curl -sS --max-time 60 http://example.test:{port}/gave-up");
    driver
        .call(
            "p",
            json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")}),
        )
        .await;
    let bash = driver.permission_request(&agent).await;
    answer(&driver, &agent, &bash, "allow");
    let is_asked = |message: &Value| {
        message["type"] == "permission_request" && message["tool_name"] == "network"
    };
    let asked = watcher.until_agent(&agent, is_asked).await.pop().expect("a network question");
    let stopped = std::process::Command::new("pkill")
        .args(["-f", &format!("example.test:{port}/gave-up")])
        .status()
        .expect("pkill runs");
    assert!(stopped.success(), "no curl to stop");
    // The question is withdrawn in both clients. The turn goes on, and may
    // end before the proxy has seen the connection close: the two come in
    // either order.
    let is_withdrawn = |message: &Value| {
        message["type"] == "permission_resolved" && message["request_id"] == asked["request_id"]
    };
    let mut read = watcher.until_agent(&agent, is_withdrawn).await;
    let (mut withdrawn, mut ended) = (false, false);
    while !withdrawn || !ended {
        let more = driver
            .until_agent(&agent, |message| is_withdrawn(message) || message["type"] == "turn_end")
            .await;
        withdrawn |= more.iter().any(is_withdrawn);
        ended |= more.iter().any(|message| message["type"] == "turn_end");
        read.extend(more);
    }
    for resolved in read.iter().filter(|message| is_withdrawn(message)) {
        assert_eq!(
            (&resolved["decision"], &resolved["source"]),
            (&json!("deny"), &json!("withdrawn")),
            "{resolved}"
        );
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn allow_always_keeps_the_host_for_this_agent_only() {
    let (port, accepted) = server("kept").await;
    let machine = Machine::start("", &["--egress-resolve", "kept.test=127.0.0.1"]).await;
    let mut client = machine.client().await;
    let curl = format!("curl -sS --max-time 30 http://kept.test:{port}/");
    let first = client.create(&machine.project(), "first").await;
    client.attach(&first, "interactive").await;
    let prompt = json!({"type": "prompt", "agent_id": first, "message": format!("run: {curl}")});
    client.call("p", prompt).await;
    let bash = client.permission_request(&first).await;
    answer(&client, &first, &bash, "allow_always");
    let asked = client.permission_request(&first).await;
    assert_eq!(asked["tool_name"], "network");
    answer(&client, &first, &asked, "allow_always");
    let granted = client.until_agent(&first, |message| message["type"] == "turn_end").await;
    // Again: neither question.
    let read = client
        .call("p2", json!({"type": "prompt", "agent_id": first, "message": format!("run: {curl}")}))
        .await;
    assert_eq!(read["success"], true);
    let read = client.until_agent(&first, |message| message["type"] == "turn_end").await;
    assert!(read.iter().all(|message| message["type"] != "permission_request"), "{read:?}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    let listed = client.call("l", json!({"type": "agent.status", "agent_id": first})).await;
    let sandbox = &listed["data"]["agents"][0]["sandbox"];
    assert_eq!(sandbox["granted_hosts"], json!([format!("kept.test:{port}")]), "{listed}");
    // Every client heard of it as it happened.
    let told = granted.iter().find(|message| message["type"] == "agent_sandbox").expect("told");
    assert_eq!(told["sandbox"]["granted_hosts"], json!([format!("kept.test:{port}")]), "{told}");

    // Taken back: listed no more, and the next connection asks again.
    let host = format!("kept.test:{port}");
    let unknown = json!({"type": "sandbox.revoke", "agent_id": first, "host": "other.test"});
    let refused = client.call("r0", unknown).await;
    assert_eq!(refused["error"]["code"], "NOT_FOUND", "{refused}");
    let revoke = json!({"type": "sandbox.revoke", "agent_id": first, "host": host});
    let revoked = client.call("r", revoke).await;
    assert_eq!(revoked["success"], true, "{revoked}");
    assert!(revoked["data"]["sandbox"]["granted_hosts"].is_null(), "{revoked}");
    let listed = client.call("l2", json!({"type": "agent.status", "agent_id": first})).await;
    assert!(listed["data"]["agents"][0]["sandbox"]["granted_hosts"].is_null(), "{listed}");
    client
        .call("p4", json!({"type": "prompt", "agent_id": first, "message": format!("run: {curl}")}))
        .await;
    let asked = client.permission_request(&first).await;
    assert_eq!(asked["tool_name"], "network", "asked again: {asked}");
    answer(&client, &first, &asked, "deny");
    client.until_agent(&first, |message| message["type"] == "turn_end").await;

    // Another agent is asked.
    let second = client.create(&machine.project(), "second").await;
    client.attach(&second, "interactive").await;
    client
        .call(
            "p3",
            json!({"type": "prompt", "agent_id": second, "message": format!("run: {curl}")}),
        )
        .await;
    let bash = client.permission_request(&second).await;
    answer(&client, &second, &bash, "allow");
    let asked = client.permission_request(&second).await;
    assert_eq!(asked["tool_name"], "network", "{asked}");
    answer(&client, &second, &asked, "deny");
    client.until_agent(&second, |message| message["type"] == "turn_end").await;
}

#[tokio::test]
async fn a_client_narrows_the_sandbox_and_never_widens_it() {
    let machine = Machine::start("", &[]).await;
    let mut client = machine.client().await;
    let cwd = machine.project().display().to_string();
    let wider = client
        .call("w", json!({"type": "agent.create", "cwd": cwd, "sandbox": {"mode": "off"}}))
        .await;
    assert_eq!(wider["error"]["code"], "PERMISSION_DENIED", "{wider}");
    let wider = client
        .call("w2", json!({"type": "agent.create", "cwd": cwd, "sandbox": {"network": "allow"}}))
        .await;
    assert_eq!(wider["error"]["code"], "PERMISSION_DENIED", "{wider}");
    let narrow = client
        .call("n", json!({"type": "agent.create", "cwd": cwd, "sandbox": {"mode": "read-only", "network": "deny"}}))
        .await;
    assert_eq!(narrow["success"], true, "{narrow}");
    let agent = narrow["data"]["agent_id"].as_str().expect("id").to_owned();
    client.attach(&agent, "interactive").await;
    let result = run_allowed(&mut client, &agent, "echo x > made.txt || echo refused-write").await;
    assert!(result.contains("refused-write"), "{result}");
    assert!(!machine.project().join("made.txt").exists());
    let listed = client.call("l", json!({"type": "agent.status", "agent_id": agent})).await;
    let sandbox = &listed["data"]["agents"][0]["sandbox"];
    assert_eq!(
        (sandbox["mode"].as_str(), sandbox["network"].as_str()),
        (Some("read-only"), Some("deny"))
    );
}

#[tokio::test]
async fn the_owner_turns_it_off_in_config_toml_only() {
    let machine = Machine::start("[sandbox]\nmode = \"off\"\n", &[]).await;
    let mut client = machine.client().await;
    let agent = client.create(&machine.project(), "free").await;
    client.attach(&agent, "interactive").await;
    let outside = machine.root.path().join("outside.txt");
    let result =
        run_allowed(&mut client, &agent, &format!("echo out > {}", outside.display())).await;
    assert!(outside.exists(), "off is off: {result}");
    let listed = client.call("l", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(listed["data"]["agents"][0]["sandbox"]["mode"], "off");
}

#[tokio::test]
async fn no_sandbox_here_means_no_agent_and_says_why() {
    // A PATH without bubblewrap on it: the daemon says so at start-up and
    // every agent is refused with the reason and the opt-out.
    let root = TempDir::new().expect("root");
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    for tool in ["git", "sh", "bash", "true"] {
        if let Some(found) = which(tool) {
            std::os::unix::fs::symlink(found, bin.join(tool)).expect("link");
        }
    }
    let path = bin.display().to_string();
    let stderr = root.path().join("stderr");
    let daemon = Daemon::start_with(&home, &[], &[("PATH", path.as_str())], Some(&stderr)).await;
    let mut client = Client::unix(&daemon.socket()).await;
    let project = TempDir::new().expect("project");
    let refused = client
        .call("c", json!({"type": "agent.create", "cwd": project.path().display().to_string()}))
        .await;
    assert_eq!(refused["error"]["code"], "SANDBOX_UNAVAILABLE", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("bubblewrap") && message.contains(r#"mode = "off""#), "{message}");
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(log.contains("cannot be contained"), "{log}");
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["data"]["agents"], json!([]), "no identity was made");
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(tool)).find(|path| path.is_file())
}

/// A daemon of `home` behind a TLS proxy (`--trust-proxy`), public as
/// `https://shard.test`, and a browser from afar enrolled and connected to
/// it over WebSocket, as the proxy forwards it.
pub(super) async fn behind_a_proxy(home: &Path) -> (Daemon, Client) {
    use reqwest::header::{CONTENT_TYPE, COOKIE, HOST, ORIGIN};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let port = super::support::free_port("127.0.0.1");
    let args = [
        "--port",
        &port.to_string(),
        "--trust-proxy",
        "loopback",
        "--public-host",
        "shard.test:443",
        "--allowed-origin",
        "https://shard.test",
    ];
    let daemon = Daemon::start_with(home, &args, &[], None).await;
    let forwarded = [("x-forwarded-proto", "https"), ("x-forwarded-host", "shard.test")];
    let post = |path: &str| {
        let mut request = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}{path}"))
            .header(HOST, "shard.test")
            .header(ORIGIN, "https://shard.test");
        for (name, value) in forwarded {
            request = request.header(name, value);
        }
        request
    };
    let enrolled = post("/enroll")
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"code": daemon.enroll_code()}).to_string())
        .send()
        .await
        .expect("enroll");
    assert_eq!(enrolled.status(), 200);
    let cookie = super::client::session_cookie(&enrolled);
    let secret = enrolled.json::<Value>().await.expect("json")["browser_secret"].clone();
    let booted = post("/bootstrap")
        .header(COOKIE, &cookie)
        .header("shard-browser-secret", secret.as_str().expect("secret"))
        .send()
        .await
        .expect("bootstrap");
    assert_eq!(booted.status(), 200);
    let ticket = booted.json::<Value>().await.expect("json")["ticket"].clone();
    let mut request = format!("ws://127.0.0.1:{port}/ws").into_client_request().expect("request");
    let headers = request.headers_mut();
    let protocols = format!("shard.v1, shard.ticket.{}", ticket.as_str().expect("ticket"));
    headers.insert("sec-websocket-protocol", protocols.parse().expect("header"));
    headers.insert(ORIGIN, "https://shard.test".parse().expect("header"));
    headers.insert(HOST, "shard.test".parse().expect("header"));
    for (name, value) in forwarded {
        headers.insert(name, value.parse().expect("header"));
    }
    let (socket, _) = tokio_tungstenite::connect_async(request).await.expect("upgrade");
    (daemon, Client::over(socket).await)
}

/// Behind a TLS proxy, with the sandbox off in config.toml: a browser from
/// afar is refused an agent without a sandbox, and may still start one
/// narrowed to a sandbox; a client on this machine starts one as
/// configured.
#[tokio::test]
async fn a_remote_browser_never_starts_an_agent_without_a_sandbox() {
    let root = TempDir::new().expect("root");
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(home.join("config.toml"), "[sandbox]\nmode = \"off\"\n").expect("config");
    let (daemon, mut web) = behind_a_proxy(&home).await;

    let project = TempDir::new().expect("project");
    let cwd = project.path().display().to_string();
    let refused = web.call("c", json!({"type": "agent.create", "cwd": cwd})).await;
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("remote browser"), "{message}");
    let asked_off = json!({"type": "agent.create", "cwd": cwd, "sandbox": {"mode": "off"}});
    let refused = web.call("c2", asked_off).await;
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED", "{refused}");
    let narrowed =
        json!({"type": "agent.create", "cwd": cwd, "sandbox": {"mode": "workspace-write"}});
    let made = web.call("c3", narrowed).await;
    assert_eq!(made["success"], true, "{made}");
    let mut local = Client::unix(&daemon.socket()).await;
    let made = local.call("c4", json!({"type": "agent.create", "cwd": cwd})).await;
    assert_eq!(made["success"], true, "this machine's owner starts it as configured: {made}");
    let listed = local.call("l", json!({"type": "agent.list"})).await;
    let modes: Vec<&str> = listed["data"]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|agent| agent["sandbox"]["mode"].as_str())
        .collect();
    assert_eq!(modes, ["workspace-write", "off"], "{listed}");
}

/// A workspace agent commits in its worktree, and cannot plant what the
/// safety-round-4 attacks planted in the repository's git directory (its
/// config, its hooks, the worktree's link to it): the sandbox alone stops
/// it, before any of the daemon's own git hardening comes into play.
#[tokio::test]
async fn a_workspace_agent_commits_but_cannot_plant_in_the_repository_s_git() {
    let machine = Machine::start("", &[]).await;
    let project = machine.project();
    git(&project, &["add", "README"]);
    git(&project, &["commit", "-q", "-m", "first"]);
    let mut client = machine.client().await;
    let made = client
        .call("w", json!({"type": "workspace.create", "cwd": project.display().to_string(), "label": "boxed"}))
        .await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().expect("agent").to_owned();
    client.attach(&agent, "interactive").await;
    let common = project.join(".git");
    let command = format!(
        "git config core.fsmonitor 'touch /tmp/pwned' || echo refused-config; \
         printf '#!/bin/sh\\ntouch {pwned}\\n' > {common}/hooks/post-checkout || echo refused-hook; \
         echo 'gitdir: /tmp' > .git || echo refused-link; \
         echo work > work.txt && git add work.txt && \
         git -c user.name=a -c user.email=a@a commit -q -m work && echo committed",
        pwned = machine.root.path().join("pwned").display(),
        common = common.display(),
    );
    let result = run_allowed(&mut client, &agent, &command).await;
    for expected in ["refused-config", "refused-hook", "refused-link", "committed"] {
        assert!(result.contains(expected), "{expected}: {result}");
    }
    let config = std::fs::read_to_string(common.join("config")).expect("config");
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!common.join("hooks/post-checkout").exists());
    // The commit is in the repository, on the workspace's branch.
    let log = std::process::Command::new("git")
        .args(["log", "--all", "--format=%s"])
        .current_dir(&project)
        .output()
        .expect("git log");
    assert!(String::from_utf8_lossy(&log.stdout).contains("work"), "the commit landed");
    // Git on this machine, in the repository, runs nothing planted.
    git(&project, &["status", "--short"]);
    assert!(!machine.root.path().join("pwned").exists());
}

/// `allow_inside`: a command, and a write in the agent's own directory,
/// run without asking, answered by the sandbox itself for every client to
/// see; what would leave the sandbox still asks: a write outside, a host.
#[tokio::test]
async fn with_allow_inside_only_what_leaves_the_sandbox_asks() {
    let (port, accepted) = server("inside").await;
    let config = "[sandbox]\nallow_inside = true\n";
    let machine = Machine::start(config, &["--egress-resolve", "out.test=127.0.0.1"]).await;
    let mut client = machine.client().await;
    let project = machine.project();
    let agent = client.create(&project, "trusted-box").await;
    client.attach(&agent, "interactive").await;

    let prompt = json!({"type": "prompt", "agent_id": agent, "message": "run: echo ran > ran.txt"});
    client.call("p", prompt).await;
    let read = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved = read
        .iter()
        .find(|message| message["type"] == "permission_resolved")
        .expect("asked and answered at once");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("allow"), Some("sandbox"))
    );
    assert_eq!(std::fs::read_to_string(project.join("ran.txt")).expect("ran"), "ran\n");

    let inside =
        json!({"type": "prompt", "agent_id": agent, "message": "write: inside.txt\nhello"});
    client.call("w", inside).await;
    let read = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert!(read.iter().any(|message| message["source"] == "sandbox"), "{read:?}");
    assert!(project.join("inside.txt").exists());

    let outside = machine.root.path().join("outside.txt");
    let message = format!("write: {}\nhello", outside.display());
    client.call("o", json!({"type": "prompt", "agent_id": agent, "message": message})).await;
    let asked = client.permission_request(&agent).await;
    assert_eq!(asked["tool_name"], "write", "a write outside asks: {asked}");
    answer(&client, &agent, &asked, "deny");
    client.until_agent(&agent, |message| message["type"] == "turn_end").await;

    let curl = format!("run: curl -sS --max-time 20 http://out.test:{port}/");
    client.call("n", json!({"type": "prompt", "agent_id": agent, "message": curl})).await;
    // The command itself is held by the sandbox; the host is asked.
    let read = client
        .until_agent(&agent, |message| {
            message["type"] == "permission_request" && message["tool_name"] == "network"
        })
        .await;
    let asked = read.last().expect("a network question").clone();
    let bash = read.iter().find(|message| message["tool_name"] == "bash").expect("bash");
    let held = read.iter().any(|message| {
        message["type"] == "permission_resolved"
            && message["request_id"] == bash["request_id"]
            && message["source"] == "sandbox"
    });
    assert!(held, "{read:?}");
    answer(&client, &agent, &asked, "allow");
    let read = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let result = read.iter().find(|message| message["type"] == "tool_result").expect("result");
    assert!(result.to_string().contains("inside"), "{result}");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    let listed = client.call("l", json!({"type": "agent.status", "agent_id": agent})).await;
    assert_eq!(listed["data"]["agents"][0]["sandbox"]["allow_inside"], true, "{listed}");
}

/// `allow_inside` for an ACP agent: its own `execute` question is answered
/// by the sandbox, as Shard's own agent's `bash` is.
#[tokio::test]
async fn with_allow_inside_an_acp_agent_s_command_is_held_by_the_sandbox() {
    let config =
        format!("{}sandbox = {{ allow_inside = true }}\n", super::runtimes::scripted_runtime());
    let machine = Machine::start(&config, &[]).await;
    let mut client = machine.client().await;
    let project = machine.project();
    let create =
        json!({"type": "agent.create", "cwd": project.display().to_string(), "runtime": "fake"});
    let made = client.call("c", create).await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().expect("agent").to_owned();
    client.attach(&agent, "interactive").await;
    let prompt =
        json!({"type": "prompt", "agent_id": agent, "message": "run: echo held > held.txt"});
    client.call("p", prompt).await;
    let read = client.until_agent(&agent, |message| message["type"] == "turn_end").await;
    let resolved = read
        .iter()
        .find(|message| message["type"] == "permission_resolved")
        .expect("asked and answered at once");
    assert_eq!(resolved["source"], "sandbox", "{read:?}");
    assert!(project.join("held.txt").exists(), "{read:?}");
}
