//! `shard acp` (docs/EDITORS.md) driven by an independent ACP client: the
//! official TypeScript SDK's (tests/editors/driver.mjs), as an editor runs
//! it, beside the daemon's own clients (a unix-socket client standing for a
//! tab: it answers questions as a person in a browser would).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::client::{Browser, Client};
use super::support::{Daemon, binary};

const WAIT: Duration = Duration::from_secs(90);

/// Whose ACP client plays the editor.
#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    /// `@agentclientprotocol/sdk` (tests/editors/driver.mjs).
    TypeScript,
    /// `agent-client-protocol` (tests/editors/driver.py); it has no
    /// `$/cancel_request`.
    Python,
}

/// Each scenario once with each SDK's client.
macro_rules! with_each_sdk {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn typescript() {
                super::$name(super::Sdk::TypeScript).await;
            }

            #[tokio::test]
            async fn python() {
                super::$name(super::Sdk::Python).await;
            }
        }
    )*};
}

with_each_sdk!(
    a_new_session_streams_its_reply_and_every_tab_sees_the_agent,
    a_session_started_in_a_tab_is_listed_loaded_with_its_history_and_prompted,
    a_question_answered_in_a_tab_ends_in_the_editor,
    a_question_answered_in_the_editor_closes_in_every_tab,
    cancel_ends_the_turn_as_cancelled,
    a_delegated_childs_question_is_asked_in_its_parents_session,
    mode_model_and_runtime_are_options_and_a_change_anywhere_shows,
    a_ui_choice_is_answered_in_the_editor_and_a_typed_answer_in_a_tab,
    two_editors_on_one_session_see_the_same_reply,
    an_editor_resumes_a_session_without_its_history_and_goes_on,
    an_editor_that_joins_mid_reply_gets_the_reply_so_far,
    after_a_daemon_restart_the_editor_loads_its_session_again,
);

/// An editor: an SDK's client with `shard acp` as its agent.
struct Editor {
    _driver: Child,
    commands: ChildStdin,
    said: Lines<BufReader<ChildStdout>>,
    /// Everything it was told, in order.
    seen: Vec<Value>,
}

impl Editor {
    async fn start(sdk: Sdk, home: &Path, args: &[&str]) -> Editor {
        let (program, driver) = match sdk {
            Sdk::TypeScript => {
                ("node", concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/editors/driver.mjs"))
            }
            Sdk::Python => {
                ("python3", concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/editors/driver.py"))
            }
        };
        let mut child = Command::new(program)
            .arg(driver)
            .args(args)
            .env("SHARD_BIN", binary())
            .env("SHARD_HOME", home)
            .env("SHARD_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the driver runs (scripts/test installs the SDKs)");
        let commands = child.stdin.take().expect("stdin");
        let said = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut editor = Editor { _driver: child, commands, said, seen: Vec::new() };
        let initialized = editor.ask(json!({"do": "initialize"})).await;
        assert_eq!(initialized["result"]["protocolVersion"], 1, "{initialized}");
        assert_eq!(initialized["result"]["agentCapabilities"]["loadSession"], true);
        editor
    }

    async fn send(&mut self, command: Value) {
        let line = format!("{command}\n");
        self.commands.write_all(line.as_bytes()).await.expect("the driver takes commands");
    }

    /// The next thing the editor was told.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.said.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!("nothing from the editor in {WAIT:?}; seen: {:#?}", self.seen)
            })
            .expect("read")
            .expect("the driver is running");
        let event: Value = serde_json::from_str(&line).expect("a JSON line");
        self.seen.push(event.clone());
        event
    }

    /// Reads until `matches`; returns what was read, the match last.
    async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut read = Vec::new();
        loop {
            let event = self.next().await;
            let done = matches(&event);
            read.push(event);
            if done {
                return read;
            }
        }
    }

    /// Sends a request and reads to its answer.
    async fn ask(&mut self, command: Value) -> Value {
        let to = command["do"].as_str().expect("do").to_owned();
        self.send(command).await;
        self.until(|event| event["event"] == "answer" && event["to"] == to)
            .await
            .pop()
            .expect("answer")
    }

    async fn new_session(&mut self, cwd: &Path) -> String {
        let answer = self.ask(json!({"do": "new", "cwd": cwd})).await;
        answer["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{answer}")).to_owned()
    }

    /// Reads until a piece of the agent's reply holds `word`; returns what
    /// was read.
    async fn until_said(&mut self, word: &str) -> Vec<Value> {
        self.until(|event| {
            event["update"]["sessionUpdate"] == "agent_message_chunk"
                && event["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains(word))
        })
        .await
    }

    /// Loads a session and reads to the answer (the history comes first);
    /// returns what was read.
    async fn load(&mut self, session: &str) -> Vec<Value> {
        self.send(json!({"do": "load", "session": session})).await;
        self.until(|event| event["event"] == "answer" && event["to"] == "load").await
    }

    /// Prompts and reads to the prompt's answer; returns what was read.
    async fn prompt(&mut self, session: &str, text: &str) -> Vec<Value> {
        self.send(json!({"do": "prompt", "session": session, "text": text})).await;
        self.until(|event| event["event"] == "answer" && event["to"] == "prompt").await
    }
}

/// The agent's words among `events`, its message chunks joined.
fn replied(events: &[Value]) -> String {
    events
        .iter()
        .filter(|event| event["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|event| event["update"]["content"]["text"].as_str())
        .collect()
}

/// A browser tab: enrolled, and connected over the daemon's WebSocket as
/// the web client is.
async fn browser_tab(daemon: &Daemon) -> Client {
    let browser = Browser::enroll(daemon, &daemon.enroll_code()).await;
    browser.connect(daemon).await
}

fn project() -> TempDir {
    TempDir::new().expect("a project")
}

fn cwd_of(project: &TempDir) -> String {
    project.path().canonicalize().expect("cwd").display().to_string()
}

#[tokio::test]
async fn an_acp_runtimes_plan_is_the_editors_plan() {
    let home = TempDir::new().expect("home");
    std::fs::write(home.path().join("config.toml"), super::runtimes::scripted_runtime())
        .expect("config");
    let _daemon = Daemon::start_in(home.path(), &[]).await;
    let project = project();
    let mut editor = Editor::start(Sdk::TypeScript, home.path(), &["--runtime", "fake"]).await;
    let session = editor.new_session(project.path()).await;
    let read = editor.prompt(&session, "plan").await;
    let plans: Vec<&Value> = read
        .iter()
        .filter(|event| event["update"]["sessionUpdate"] == "plan")
        .map(|event| &event["update"]["entries"])
        .collect();
    let shown = |entries: &Value| -> Vec<(String, String)> {
        let entries = entries.as_array().expect("entries").iter();
        let pair = |entry: &Value| {
            let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
            (text("content"), text("status"))
        };
        entries.map(pair).collect()
    };
    let plans: Vec<Vec<(String, String)>> = plans.into_iter().map(shown).collect();
    let pair = |content: &str, status: &str| (content.to_owned(), status.to_owned());
    assert_eq!(
        plans,
        [
            vec![pair("read the code", "in_progress"), pair("fix the bug", "pending")],
            vec![pair("read the code", "completed"), pair("fix the bug", "in_progress")],
        ],
        "the plan, then the whole plan again as it changed: {read:#?}"
    );
    assert!(
        !read.iter().any(|event| event["update"]["sessionUpdate"] == "tool_call"
            || event["update"]["sessionUpdate"] == "tool_call_update"),
        "no card besides: {read:#?}"
    );
    assert_eq!(replied(&read).trim_end(), "planned");
}

#[tokio::test]
async fn without_a_daemon_shard_acp_exits_at_once_saying_how_to_start_one() {
    // At once: before the editor says anything, its stdin still open.
    super::support::refuses_without_a_daemon("acp").await;
}

async fn a_new_session_streams_its_reply_and_every_tab_sees_the_agent(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let answer = editor.ask(json!({"do": "new", "cwd": cwd_of(&project)})).await;
    let session = answer["result"]["sessionId"].as_str().expect("a session").to_owned();
    let modes = &answer["result"]["modes"];
    assert_eq!(modes["currentModeId"], "build", "{answer}");
    assert!(modes["availableModes"].as_array().is_some_and(|modes| modes.len() >= 2), "{answer}");

    let read = editor.prompt(&session, "hello editor").await;
    let answer = read.last().expect("answer");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(replied(&read), "You said: hello editor");
    // What the turn used: its tokens in the answer, the context it filled
    // (of the model's window) as it went.
    let used = &answer["result"]["usage"];
    assert!(used["inputTokens"].as_u64().is_some_and(|tokens| tokens > 0), "{answer}");
    assert!(used["totalTokens"].as_u64() >= used["outputTokens"].as_u64(), "{answer}");
    let context = read
        .iter()
        .find(|event| event["update"]["sessionUpdate"] == "usage_update")
        .unwrap_or_else(|| panic!("no usage_update in {read:#?}"));
    let (filled, size) = (context["update"]["used"].as_u64(), context["update"]["size"].as_u64());
    assert!(filled.is_some_and(|filled| filled > 0) && size > filled, "{context}");
    // Pieces 10 ms apart reach the editor as they come (pieces already
    // queued behind one another may come as one).
    let read = editor.prompt(&session, "stream: 5").await;
    let chunks = read
        .iter()
        .filter(|event| event["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert!(chunks > 1, "the reply streams in pieces: {read:#?}");

    // The session is the daemon's agent: listed for every client, with the
    // conversation in its log.
    let mut tab = browser_tab(&daemon).await;
    let listed = tab.call("list", json!({"type": "agent.list"})).await;
    let agents = listed["data"]["agents"].as_array().expect("agents").clone();
    let agent = agents.iter().find(|agent| agent["agent_id"] == session).expect("listed");
    assert_eq!(agent["cwd"], cwd_of(&project));
    let sync = tab.attach(&session, "observer").await;
    let said: Vec<(String, String)> = sync["live_window"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .take(2)
        .map(|message| {
            let text = message["content"][0]["text"].as_str().unwrap_or_default().to_owned();
            (message["role"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect();
    let expected = [("user", "hello editor"), ("assistant", "You said: hello editor")];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(role, text)| ((*role).to_owned(), (*text).to_owned())).collect();
    assert_eq!(said, expected, "{sync}");
}

async fn a_session_started_in_a_tab_is_listed_loaded_with_its_history_and_prompted(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let other = self::project();
    let mut tab = browser_tab(&daemon).await;
    let agent = tab.create(project.path(), "from-the-tab").await;
    let elsewhere = tab.create(other.path(), "elsewhere").await;
    tab.attach(&agent, "interactive").await;
    tab.send(json!({"type": "prompt", "agent_id": agent, "message": "first from the tab"}));
    tab.until_agent(&agent, |event| event["type"] == "turn_end").await;

    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let listed = editor.ask(json!({"do": "list", "cwd": cwd_of(&project)})).await;
    let sessions = listed["result"]["sessions"].as_array().expect("sessions").clone();
    assert_eq!(sessions.len(), 1, "only this folder's: {listed}");
    assert_eq!(sessions[0]["sessionId"], agent);
    assert_eq!(sessions[0]["title"], "from-the-tab");
    let all = editor.ask(json!({"do": "list"})).await;
    let ids: Vec<&Value> = all["result"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| &s["sessionId"])
        .collect();
    assert!(ids.contains(&&json!(elsewhere)) && ids.contains(&&json!(agent)), "{all}");

    // Loaded: the history comes first, then the answer.
    let read = editor.load(&agent).await;
    let answer = read.last().expect("answer");
    assert!(answer.get("error").is_none(), "{answer}");
    let told: Vec<(&str, &str)> = read
        .iter()
        .filter(|event| event["event"] == "update")
        .map(|event| {
            let update = &event["update"];
            (
                update["sessionUpdate"].as_str().unwrap(),
                update["content"]["text"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            ("user_message_chunk", "first from the tab"),
            ("agent_message_chunk", "You said: first from the tab")
        ]
    );

    // Prompted from the editor: the tab sees that turn too.
    let read = editor.prompt(&agent, "then from the editor").await;
    assert_eq!(replied(&read), "You said: then from the editor");
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn");
    let seen = tab.until_agent(&agent, |event| event["type"] == "turn_end").await;
    assert!(
        seen.iter().any(|event| event["type"] == "user_message" && event["text"] == "then from the editor"),
        "{seen:#?}"
    );

    // A prompt from the tab shows in the editor as the person's message.
    tab.send(json!({"type": "prompt", "agent_id": agent, "message": "and the tab again"}));
    let read = editor.until_said("again").await;
    assert!(
        read.iter().any(|event| event["update"]["sessionUpdate"] == "user_message_chunk"
            && event["update"]["content"]["text"] == "and the tab again"),
        "{read:#?}"
    );
}

/// An editor prompting `run: echo asked` on a fresh session, with a tab
/// attached to the same agent; returns both once both were asked.
async fn asked_in_both(
    sdk: Sdk,
    daemon: &Daemon,
    project: &TempDir,
) -> (Editor, Client, String, Value, Value) {
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let session = editor.new_session(project.path()).await;
    let mut tab = browser_tab(daemon).await;
    tab.attach(&session, "interactive").await;
    editor.send(json!({"do": "prompt", "session": session, "text": "run: echo asked"})).await;
    let asked = editor.until(|event| event["event"] == "asked").await.pop().expect("asked");
    let params = &asked["params"];
    assert_eq!(params["sessionId"], session.as_str());
    let kinds: Vec<&str> = params["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"allow_once") && kinds.contains(&"reject_once"), "{asked}");
    assert!(
        params["toolCall"]["title"].as_str().is_some_and(|title| title.contains("echo asked")),
        "{asked}"
    );
    let request = tab.permission_request(&session).await;
    (editor, tab, session, asked, request)
}

async fn a_question_answered_in_a_tab_ends_in_the_editor(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let (mut editor, tab, session, asked, request) = asked_in_both(sdk, &daemon, &project).await;
    tab.send(json!({"type": "permission_response", "agent_id": session,
                    "request_id": request["request_id"], "decision": "allow"}));
    let read = editor.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    // The question's card shows it answered; an SDK that knows
    // `$/cancel_request` closes its dialog too.
    let card = format!("question:{}", request["request_id"].as_str().expect("id"));
    assert!(
        read.iter().any(|event| event["update"]["toolCallId"] == card.as_str()
            && event["update"]["status"] == "completed"),
        "{read:#?}"
    );
    if sdk == Sdk::TypeScript {
        assert!(
            read.iter()
                .any(|event| event["event"] == "taken_back"
                    && event["question"] == asked["question"]),
            "the editor's dialog is closed: {read:#?}"
        );
    }
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn");
    assert!(replied(&read).contains("exit code 0"), "the tab's allow ran it: {read:#?}");
}

async fn a_question_answered_in_the_editor_closes_in_every_tab(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let (mut editor, mut tab, session, asked, request) =
        asked_in_both(sdk, &daemon, &project).await;
    editor.send(json!({"do": "answer", "question": asked["question"], "option": "deny"})).await;
    let resolved = tab
        .until_agent(&session, |event| event["type"] == "permission_resolved")
        .await
        .pop()
        .expect("resolved");
    assert_eq!(resolved["request_id"], request["request_id"]);
    assert_eq!(resolved["decision"], "deny");
    let read = editor.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    assert!(!read.iter().any(|event| event["event"] == "taken_back"), "answered, not taken back");
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn");
    assert!(!replied(&read).contains("exit code 0"), "denied, so not run: {read:#?}");
}

async fn a_ui_choice_is_answered_in_the_editor_and_a_typed_answer_in_a_tab(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let session = editor.new_session(project.path()).await;
    let mut tab = browser_tab(&daemon).await;
    tab.attach(&session, "interactive").await;

    // A choice: its options are the editor's, and its answer the tab's too.
    editor
        .send(json!({"do": "prompt", "session": session, "text": "ask-select: Which colour? | red | green"}))
        .await;
    let asked = editor.until(|event| event["event"] == "asked").await.pop().expect("asked");
    let params = &asked["params"];
    assert_eq!(params["toolCall"]["title"], "Which colour?", "{asked}");
    let options: Vec<(&str, &str)> = params["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|option| Some((option["optionId"].as_str()?, option["name"].as_str()?)))
        .collect();
    assert_eq!(options, [("ui:0", "red"), ("ui:1", "green"), ("dismiss", "Dismiss")]);
    editor.send(json!({"do": "answer", "question": asked["question"], "option": "ui:1"})).await;
    let resolved = tab
        .until_agent(&session, |event| event["type"] == "ui_resolved")
        .await
        .pop()
        .expect("resolved");
    assert_eq!(resolved["value"], "green", "{resolved}");
    let read = editor.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    assert!(replied(&read).contains("You answered: green"), "{read:#?}");

    // A text to type: a card in the editor, answered in the tab.
    editor.send(json!({"do": "prompt", "session": session, "text": "ask: Your name?"})).await;
    let card = editor
        .until(|event| {
            event["update"]["sessionUpdate"] == "tool_call"
                && event["update"]["toolCallId"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("question:"))
        })
        .await
        .pop()
        .expect("card");
    assert_eq!(card["update"]["title"], "Your name?", "{card}");
    // Pending: the status ACP leaves out as its default.
    assert!(matches!(card["update"]["status"].as_str(), None | Some("pending")), "{card}");
    let shown = card["update"]["content"][0]["content"]["text"].as_str().expect("text");
    assert!(shown.starts_with("Answer it in a Shard tab"), "the title says the question: {shown}");
    let request = tab
        .until_agent(&session, |event| event["type"] == "ui_request")
        .await
        .pop()
        .expect("asked");
    assert_eq!(
        card["update"]["toolCallId"],
        format!("question:{}", request["request_id"].as_str().expect("id"))
    );
    tab.send(
        json!({"type": "ui_response", "agent_id": session, "request_id": request["request_id"],
                    "value": "Ada"}),
    );
    let read = editor.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    assert!(
        read.iter().any(|event| event["update"]["toolCallId"] == card["update"]["toolCallId"]
            && event["update"]["status"] == "completed"),
        "the card shows it answered: {read:#?}"
    );
    assert!(!read.iter().any(|event| event["event"] == "asked"), "nothing to choose: {read:#?}");
    assert!(replied(&read).contains("You answered: Ada"), "{read:#?}");
}

/// `id`'s option among `options`: its category, current value and the
/// values it offers.
fn option(options: &Value, id: &str) -> (String, String, Vec<String>) {
    let option = options
        .as_array()
        .and_then(|options| options.iter().find(|option| option["id"] == id))
        .unwrap_or_else(|| panic!("no option {id} in {options}"));
    let values = option["options"].as_array().expect("a choice").iter();
    (
        option["category"].as_str().unwrap_or_default().to_owned(),
        option["currentValue"].as_str().expect("current").to_owned(),
        values.filter_map(|value| value["value"].as_str().map(str::to_owned)).collect(),
    )
}

async fn mode_model_and_runtime_are_options_and_a_change_anywhere_shows(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let made = editor.ask(json!({"do": "new", "cwd": project.path()})).await;
    let session = made["result"]["sessionId"].as_str().expect("session").to_owned();
    let options = &made["result"]["configOptions"];
    let (category, mode, modes) = option(options, "mode");
    assert_eq!((category.as_str(), mode.as_str()), ("mode", "build"), "{options}");
    assert!(modes.contains(&"plan".to_owned()), "{modes:?}");
    let (category, model, models) = option(options, "model");
    assert_eq!(category, "model");
    let other_model = models.iter().find(|id| **id != model).expect("another model").clone();
    let (category, runtime, runtimes) = option(options, "runtime");
    // Shard's own category; a client may drop one it does not know (the
    // Python SDK's does).
    assert!(matches!(category.as_str(), "_runtime" | ""), "{category}");
    assert_eq!(runtime, "shard");
    assert_eq!(runtimes, ["shard"]);

    // The editor chooses a mode: the agent has it, and the answer says so.
    let mut tab = browser_tab(&daemon).await;
    tab.attach(&session, "interactive").await;
    let set = editor
        .ask(json!({"do": "set_option", "session": session, "config": "mode", "value": "plan"}))
        .await;
    assert_eq!(option(&set["result"]["configOptions"], "mode").1, "plan", "{set}");
    let changed = tab
        .until_agent(&session, |event| event["type"] == "mode_changed")
        .await
        .pop()
        .expect("changed");
    assert_eq!(changed["mode"], "plan");

    // A tab chooses a model: the editor's menu follows.
    let switched = tab
        .call("m", json!({"type": "set_model", "agent_id": session, "model": other_model}))
        .await;
    assert_eq!(switched["success"], true, "{switched}");
    let update = editor
        .until(|event| {
            event["update"]["sessionUpdate"] == "config_option_update"
                && option(&event["update"]["configOptions"], "model").1 == other_model
        })
        .await
        .pop()
        .expect("update");
    assert_eq!(option(&update["update"]["configOptions"], "mode").1, "plan", "{update}");

    // The runtime is the one the session was made with.
    let kept = editor
        .ask(json!({"do": "set_option", "session": session, "config": "runtime", "value": "shard"}))
        .await;
    assert!(kept.get("error").is_none(), "{kept}");
    let refused = editor
        .ask(
            json!({"do": "set_option", "session": session, "config": "runtime", "value": "claude"}),
        )
        .await;
    let said = refused["error"]["data"].as_str().or(refused["error"]["message"].as_str());
    assert!(said.is_some_and(|said| said.contains("keeps the runtime")), "{refused}");
    let unknown = editor
        .ask(json!({"do": "set_option", "session": session, "config": "colour", "value": "red"}))
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");
}

/// Has `child` (attached from a client of its own) run `run: touch FILE`
/// with nobody attached to it: its question goes to its parent's session.
async fn delegated_run(daemon: &Daemon, child: &str, file: &str) {
    let mut driver = Client::unix(&daemon.socket()).await;
    driver.attach(child, "interactive").await;
    let prompt = format!("run: touch {file}");
    driver.send(json!({"id": "p", "type": "prompt", "agent_id": child, "message": prompt}));
    driver.call("d", json!({"type": "agent.detach", "agent_id": child})).await;
}

async fn until_made(path: &Path) {
    let started = std::time::Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < WAIT, "{} was not made", path.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_delegated_childs_question_is_asked_in_its_parents_session(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let session = editor.new_session(project.path()).await;
    // A child spawned under the session once the editor follows it.
    let mut client = Client::unix(&daemon.socket()).await;
    let made = client
        .call(
            "c",
            json!({"type": "agent.create", "cwd": project.path(), "name": "child",
                          "parent_agent_id": session}),
        )
        .await;
    let child = made["data"]["agent_id"].as_str().expect("child").to_owned();
    delegated_run(&daemon, &child, "delegated.txt").await;
    let asked = editor.until(|event| event["event"] == "asked").await.pop().expect("asked");
    assert_eq!(asked["params"]["sessionId"], session.as_str(), "{asked}");
    let title = asked["params"]["toolCall"]["title"].as_str().expect("title");
    assert!(title.contains("delegated.txt"), "{asked}");
    editor.send(json!({"do": "answer", "question": asked["question"], "option": "allow"})).await;
    until_made(&project.path().join("delegated.txt")).await;

    // An editor that loads the session later knows the child too.
    let mut later = Editor::start(sdk, &daemon.home, &[]).await;
    later.load(&session).await;
    delegated_run(&daemon, &child, "again.txt").await;
    let asked = later.until(|event| event["event"] == "asked").await.pop().expect("asked");
    assert_eq!(asked["params"]["sessionId"], session.as_str(), "{asked}");
    later.send(json!({"do": "answer", "question": asked["question"], "option": "allow"})).await;
    until_made(&project.path().join("again.txt")).await;
    // The first editor's request for it ends (taken back, or its card
    // shows the answer).
    editor
        .until(|event| {
            event["event"] == "taken_back"
                || (event["update"]["sessionUpdate"] == "tool_call_update"
                    && event["update"]["status"] == "completed")
        })
        .await;
}

async fn cancel_ends_the_turn_as_cancelled(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut editor = Editor::start(sdk, &daemon.home, &[]).await;
    let session = editor.new_session(project.path()).await;
    editor.send(json!({"do": "prompt", "session": session, "text": "stream: 500"})).await;
    editor.until(|event| event["update"]["sessionUpdate"] == "agent_message_chunk").await;
    editor.send(json!({"do": "cancel", "session": session})).await;
    let answer = editor.until(|event| event["event"] == "answer").await.pop().expect("answer");
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // The session goes on.
    let read = editor.prompt(&session, "still here").await;
    assert_eq!(replied(&read), "You said: still here");
}

async fn an_editor_resumes_a_session_without_its_history_and_goes_on(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut first = Editor::start(sdk, &daemon.home, &[]).await;
    let session = first.new_session(project.path()).await;
    first.prompt(&session, "before the resume").await;
    let mut second = Editor::start(sdk, &daemon.home, &[]).await;
    let initialized = second.seen[0].clone();
    let capabilities = &initialized["result"]["agentCapabilities"]["sessionCapabilities"];
    assert!(capabilities.get("resume").is_some(), "{initialized}");
    second.send(json!({"do": "resume", "session": session})).await;
    let read = second.until(|event| event["event"] == "answer" && event["to"] == "resume").await;
    let answer = read.last().expect("answer");
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["result"]["modes"]["currentModeId"], "build", "{answer}");
    // The editor has the conversation: nothing of it is replayed.
    assert!(read.iter().all(|event| event["event"] != "update"), "{read:#?}");
    let read = second.prompt(&session, "after the resume").await;
    assert_eq!(replied(&read), "You said: after the resume");
}

async fn two_editors_on_one_session_see_the_same_reply(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut first = Editor::start(sdk, &daemon.home, &[]).await;
    let session = first.new_session(project.path()).await;
    let mut second = Editor::start(sdk, &daemon.home, &[]).await;
    let loaded = second.ask(json!({"do": "load", "session": session})).await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let read = first.prompt(&session, "for both of you").await;
    assert_eq!(replied(&read), "You said: for both of you");
    let seen = second.until_said("you").await;
    assert!(
        seen.iter().any(|event| event["update"]["content"]["text"] == "for both of you"),
        "the second editor sees the first's message as the person's: {seen:#?}"
    );
    let rest = replied(&seen);
    assert_eq!(rest, "You said: for both of you");
}

async fn an_editor_that_joins_mid_reply_gets_the_reply_so_far(sdk: Sdk) {
    let daemon = Daemon::start(&[]).await;
    let project = project();
    let mut first = Editor::start(sdk, &daemon.home, &[]).await;
    let session = first.new_session(project.path()).await;
    first.send(json!({"do": "prompt", "session": session, "text": "stream: 1000"})).await;
    // Ten seconds of reply: time enough for a second editor to start
    // (an SDK's start-up on a busy machine) and load it mid-reply.
    first.until_said("tick-20 ").await;

    // The second loads it mid-reply: its history ends with the reply so
    // far, and the rest follows on from it.
    let mut second = Editor::start(sdk, &daemon.home, &[]).await;
    let history = second.load(&session).await;
    let so_far = replied(&history);
    assert!(so_far.starts_with("tick-1 tick-2 ") && so_far.contains("tick-20 "), "{so_far}");
    assert!(!so_far.contains("tick-1000"), "loaded before the end: {so_far}");
    let rest = second.until_said("tick-1000").await;
    let whole: String = (1..=1000).map(|tick| format!("tick-{tick} ")).collect();
    assert_eq!(format!("{so_far}{}", replied(&rest)).trim_end(), whole.trim_end());
    // What the first editor saw from the start.
    let read = first.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    let seen_first = replied(&first.seen);
    assert_eq!(seen_first.trim_end(), whole.trim_end(), "{read:#?}");
}

async fn after_a_daemon_restart_the_editor_loads_its_session_again(sdk: Sdk) {
    let home = TempDir::new().expect("home");
    let project = project();
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let mut editor = Editor::start(sdk, home.path(), &[]).await;
    let session = editor.new_session(project.path()).await;
    let read = editor.prompt(&session, "before the restart").await;
    assert_eq!(replied(&read), "You said: before the restart");

    assert!(daemon.terminate().await.success());
    // While it is down, a request says so; `shard acp` itself stays.
    let answer = editor.ask(json!({"do": "list"})).await;
    let said = answer["error"]["data"].as_str().unwrap_or_default();
    assert!(said.contains("no Shard daemon is running"), "{answer}");

    let _daemon = Daemon::start_in(home.path(), &[]).await;
    let read = editor.load(&session).await;
    assert!(read.last().expect("answer").get("error").is_none(), "{read:#?}");
    assert_eq!(replied(&read), "You said: before the restart", "its history, from the log");
    let read = editor.prompt(&session, "after the restart").await;
    assert_eq!(replied(&read), "You said: after the restart");
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn");
}

/// Claude Code (tests/acp, offline against the scripted model server of
/// real_acp.rs) behind `shard acp --runtime claude`: the editor starts it,
/// streams its reply, answers its question, and another editor loads the
/// session with its history.
#[tokio::test]
async fn claude_code_behind_shard_acp_streams_asks_and_is_loaded_again() {
    use super::real_acp::{ModelServer, RESOLVE, runtime_config};

    let scratch = TempDir::new().expect("scratch");
    let (home, state, project) = (
        scratch.path().join("home"),
        scratch.path().join("claude"),
        scratch.path().join("project"),
    );
    for dir in [&home, &state, &project] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    let project = project.canonicalize().expect("project");
    let server = ModelServer::start(&scratch.path().join("model.log")).await;
    std::fs::write(home.join("config.toml"), runtime_config("claude", &state, server.port))
        .expect("config");
    let daemon = Daemon::start_in(&home, &RESOLVE).await;

    let mut editor = Editor::start(Sdk::TypeScript, &home, &["--runtime", "claude"]).await;
    let session = editor.new_session(&project).await;
    let mut tab = browser_tab(&daemon).await;
    let listed = tab.call("list", json!({"type": "agent.list"})).await;
    let agent = listed["data"]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|agent| agent["agent_id"] == session.as_str())
        .cloned()
        .expect("listed");
    assert_eq!(agent["runtime"], "claude", "{agent}");

    let read = editor.prompt(&session, "hello zebra42").await;
    assert!(replied(&read).contains("echo: hello zebra42"), "{read:#?}");
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn");

    editor
        .send(json!({"do": "prompt", "session": session, "text": "run: touch allowed.txt"}))
        .await;
    let asked = editor.until(|event| event["event"] == "asked").await.pop().expect("asked");
    let allow = asked["params"]["options"]
        .as_array()
        .expect("options")
        .iter()
        .find(|option| option["kind"] == "allow_once")
        .and_then(|option| option["optionId"].as_str())
        .expect("an allow option")
        .to_owned();
    editor.send(json!({"do": "answer", "question": asked["question"], "option": allow})).await;
    let read = editor.until(|event| event["event"] == "answer" && event["to"] == "prompt").await;
    assert_eq!(read.last().expect("answer")["result"]["stopReason"], "end_turn", "{read:#?}");
    assert!(project.join("allowed.txt").exists(), "Claude Code ran it: {read:#?}");
    // Claude Code tells its call before it asks.
    let told = &editor.seen;
    assert!(told.iter().any(|event| event["update"]["sessionUpdate"] == "tool_call"), "{told:#?}");
    // Its slash commands, as the editor offers them.
    let offered = told
        .iter()
        .filter(|event| event["update"]["sessionUpdate"] == "available_commands_update")
        .filter_map(|event| event["update"]["availableCommands"].as_array())
        .next_back()
        .unwrap_or_else(|| panic!("no commands told: {told:#?}"));
    assert!(offered.iter().all(|command| command["name"].is_string()), "{offered:?}");
    assert!(!offered.is_empty());

    let mut other = Editor::start(Sdk::Python, &home, &[]).await;
    let read = other.load(&session).await;
    assert!(read.last().expect("answer").get("error").is_none(), "{read:#?}");
    assert!(
        read.iter().any(|event| event["update"]["sessionUpdate"] == "user_message_chunk"
            && event["update"]["content"]["text"] == "hello zebra42"),
        "the history replayed: {read:#?}"
    );
    assert!(replied(&read).contains("echo: hello zebra42"), "{read:#?}");
}
