//! Step-up by effect (docs/SECURITY.md, "Passkey step-up"): what needs a
//! passkey from away is decided by what a call does, whatever it is named.
//! A browser's allow of a write that changes what runs (`.git/`,
//! `$SHARD_HOME`, a shell start-up file), of a write outside the cwd, of an
//! ACP agent's `execute` or out-of-cwd `edit`, is refused until a passkey
//! confirms it; an ordinary write inside the cwd is not. And an agent's
//! `cwd` is never a folder that holds Shard's own files.

use serde_json::{Value, json};
use tempfile::TempDir;

use super::client::{Browser, Client};
use super::runtimes::scripted_runtime;
use super::support::Daemon;

/// A daemon whose step-up applies on loopback too (`when = "always"`),
/// with `extra` config, an enrolled browser's tab and a local client, both
/// attached to an agent of `runtime` (`None`: Shard's own) in `project`.
struct Setup {
    daemon: Daemon,
    local: Client,
    tab: Client,
    agent: String,
    project: TempDir,
    _home: TempDir,
}

async fn setup(runtime: Option<&str>) -> Setup {
    let home = TempDir::new().unwrap();
    let config = format!("[step_up]\nwhen = \"always\"\n\n{}", scripted_runtime());
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let project = TempDir::new().unwrap();
    let mut local = Client::unix(&daemon.socket()).await;
    let mut create = json!({"type": "agent.create", "cwd": project.path(), "name": "guarded"});
    if let Some(runtime) = runtime {
        create["runtime"] = json!(runtime);
    }
    let made = local.call("c", create).await;
    assert_eq!(made["success"], true, "{made}");
    let agent = made["data"]["agent_id"].as_str().unwrap().to_owned();
    local.attach(&agent, "interactive").await;
    let mut tab = browser.connect(&daemon).await;
    tab.attach(&agent, "interactive").await;
    Setup { daemon, local, tab, agent, project, _home: home }
}

impl Setup {
    /// Prompts `message`; the permission question it raises.
    async fn ask(&mut self, message: &str) -> Value {
        let prompt = json!({"type": "prompt", "agent_id": self.agent, "message": message});
        assert_eq!(self.local.call("p", prompt).await["success"], true);
        self.local.permission_request(&self.agent).await
    }

    /// The tab's allow of `request`: its answer.
    async fn allow_from_the_tab(&mut self, request: &Value) -> Value {
        let allow = json!({"type": "permission_response", "agent_id": self.agent,
                           "request_id": request["request_id"], "decision": "allow"});
        self.tab.call("a", allow).await
    }

    /// Answers `request` from the local client, and waits for the turn.
    async fn answer_locally(&mut self, request: &Value, decision: &str) {
        let answer = json!({"type": "permission_response", "agent_id": self.agent,
                            "request_id": request["request_id"], "decision": decision});
        assert_eq!(self.local.call("l", answer).await["success"], true);
        let agent = self.agent.clone();
        self.local.until_agent(&agent, |message| message["type"] == "turn_end").await;
    }
}

fn refused_for_its_passkey(answer: &Value) {
    assert_eq!(answer["success"], false, "{answer}");
    assert_eq!(answer["error"]["code"], "PERMISSION_DENIED", "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("passkey"), "{answer}");
}

#[tokio::test]
async fn a_write_that_changes_what_runs_needs_the_passkey_even_inside_the_cwd() {
    let mut setup = setup(None).await;
    let home = setup.daemon.home.clone();
    let planted = "[core]\n\tfsmonitor = /tmp/planted\n";
    let git_dir = setup.project.path().join(".git");
    std::fs::create_dir_all(&git_dir).unwrap();
    for path in [
        ".git/config".to_owned(),
        ".bashrc".to_owned(),
        "sub/.envrc".to_owned(),
        home.join("config.toml").display().to_string(),
        "../elsewhere.txt".to_owned(),
    ] {
        let request = setup.ask(&format!("write: {path}\n{planted}")).await;
        refused_for_its_passkey(&setup.allow_from_the_tab(&request).await);
        setup.answer_locally(&request, "deny").await;
    }
    assert!(!git_dir.join("config").exists(), "nothing was written");
    assert!(!std::fs::read_to_string(home.join("config.toml")).unwrap().contains("planted"));

    // An ordinary file inside the cwd is the tab's to allow.
    let request = setup.ask("write: notes.txt\nhello").await;
    assert_eq!(setup.allow_from_the_tab(&request).await["success"], true);
    let agent = setup.agent.clone();
    setup.local.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert!(setup.project.path().join("notes.txt").exists());
}

#[tokio::test]
async fn an_acp_agents_command_needs_the_passkey_whatever_its_title() {
    let mut setup = setup(Some("fake")).await;
    // `run:` is an `execute` call titled `Run touch …`.
    let request = setup.ask("run: touch ran.txt").await;
    assert!(!request["tool_name"].as_str().unwrap().contains("bash"), "{request}");
    let details = request["details"].to_string();
    assert!(details.contains("execute"), "the call's kind is shown: {request}");
    refused_for_its_passkey(&setup.allow_from_the_tab(&request).await);
    assert!(!setup.project.path().join("ran.txt").exists());
    // The local client is the machine's own user: its allow counts.
    setup.answer_locally(&request, "allow").await;
    assert!(setup.project.path().join("ran.txt").exists());
}

#[tokio::test]
async fn an_agents_cwd_is_never_the_root_nor_shards_home_nor_a_folder_holding_it() {
    let daemon = Daemon::start(&[]).await;
    let mut local = Client::unix(&daemon.socket()).await;
    let home = daemon.home.canonicalize().unwrap();
    let mut folders = vec![home.clone()];
    folders.extend(home.ancestors().skip(1).map(std::path::Path::to_path_buf));
    assert!(folders.iter().any(|folder| folder.as_os_str() == "/"));
    for cwd in &folders {
        let create = json!({"type": "agent.create", "cwd": cwd});
        let refused = local.call("c", create).await;
        assert_eq!(refused["success"], false, "{}: {refused}", cwd.display());
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("Shard's home"));
    }
    // A folder beside the home is a folder like any other.
    let project = TempDir::new().unwrap();
    let made = local.call("c", json!({"type": "agent.create", "cwd": project.path()})).await;
    assert_eq!(made["success"], true, "{made}");
}
