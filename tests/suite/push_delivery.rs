//! Web Push as the daemon sends it (docs/NOTIFICATIONS.md), received by a
//! fake push service on loopback (`--insecure-push-endpoints`) and opened
//! by an independent implementation: `tests/push/webpush.py`, on the Python
//! packages `http-ece` and `py-vapid`, checks the VAPID signature and
//! decrypts the body. Then a notification's actions through `/push/act`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::{CONTENT_TYPE, COOKIE, ORIGIN};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::mpsc;

use super::client::{Browser, Client};
use super::support::Daemon;

const PUSH_WAIT: Duration = Duration::from_secs(20);

/// One request the fake push service took.
struct Received {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A push service on loopback: takes every POST, answers with the next
/// scripted status (201 once the script is used up).
struct PushService {
    base: String,
    received: mpsc::UnboundedReceiver<Received>,
    script: Arc<Mutex<VecDeque<(StatusCode, Duration)>>>,
}

#[derive(Clone)]
struct Service {
    received: mpsc::UnboundedSender<Received>,
    script: Arc<Mutex<VecDeque<(StatusCode, Duration)>>>,
}

impl PushService {
    async fn start() -> PushService {
        let (sender, received) = mpsc::unbounded_channel();
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let service = Service { received: sender, script: script.clone() };
        let app =
            axum::Router::new().route("/{*path}", axum::routing::post(take)).with_state(service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        PushService { base, received, script }
    }

    fn answer_next(&self, statuses: &[StatusCode]) {
        let answers = statuses.iter().map(|status| (*status, Duration::ZERO));
        self.script.lock().expect("script").extend(answers);
    }

    /// The next push is answered with `status`, but only after `hold`.
    fn answer_next_after(&self, status: StatusCode, hold: Duration) {
        self.script.lock().expect("script").push_back((status, hold));
    }

    async fn next(&mut self) -> Received {
        tokio::time::timeout(PUSH_WAIT, self.received.recv())
            .await
            .expect("a push within the wait")
            .expect("the service runs")
    }

    /// Nothing arrives for `millis`.
    async fn quiet_for(&mut self, millis: u64) {
        let got = tokio::time::timeout(Duration::from_millis(millis), self.received.recv()).await;
        assert!(
            got.is_err(),
            "expected no push, got one at {:?}",
            got.ok().flatten().map(|r| r.path)
        );
    }
}

async fn take(
    State(service): State<Service>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let next = service.script.lock().expect("script").pop_front();
    let (status, hold) = next.unwrap_or((StatusCode::CREATED, Duration::ZERO));
    let _ = service.received.send(Received { path: uri.path().to_owned(), headers, body });
    tokio::time::sleep(hold).await;
    status
}

/// A browser's keys for a subscription, made by the independent side.
struct Keys {
    p256dh: String,
    auth: String,
    private: String,
}

fn python(args: &[&str], input: Option<&Value>) -> Value {
    use std::io::Write;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/push/webpush.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/test installs http-ece and py-vapid)");
    if let Some(input) = input {
        child.stdin.take().expect("stdin").write_all(input.to_string().as_bytes()).expect("write");
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().expect("python3");
    assert!(
        output.status.success(),
        "webpush.py {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("json from webpush.py")
}

fn browser_keys() -> Keys {
    let made = python(&["keys"], None);
    let field = |name: &str| made[name].as_str().expect("key").to_owned();
    Keys { p256dh: field("p256dh"), auth: field("auth"), private: field("private") }
}

/// Checks a push as a browser's push service and the browser would, and
/// returns what it carried.
fn open(received: &Received, keys: &Keys, endpoint: &str, vapid_public: &str) -> Value {
    let headers: serde_json::Map<String, Value> = received
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), json!(value.to_str().expect("ascii header"))))
        .collect();
    let opened = python(
        &["open"],
        Some(&json!({
            "private": keys.private, "auth": keys.auth, "vapid_public": vapid_public,
            "endpoint": endpoint, "headers": headers,
            "body": URL_SAFE_NO_PAD.encode(&received.body),
        })),
    );
    opened["payload"].clone()
}

fn browser_request(daemon: &Daemon, path: &str, browser: &Browser) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(daemon.url(path))
        .header(ORIGIN, &daemon.base)
        .header(COOKIE, &browser.cookie)
        .header("shard-browser-secret", &browser.secret)
        .header(CONTENT_TYPE, "application/json")
}

async fn subscribe(daemon: &Daemon, browser: &Browser, endpoint: &str, keys: &Keys) -> String {
    let body = json!({"endpoint": endpoint, "keys": {"p256dh": keys.p256dh, "auth": keys.auth}});
    let response = browser_request(daemon, "/push/subscribe", browser)
        .body(body.to_string())
        .send()
        .await
        .expect("subscribe");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let key = reqwest::Client::new()
        .get(daemon.url("/push/key"))
        .header(COOKIE, &browser.cookie)
        .header("shard-browser-secret", &browser.secret)
        .send()
        .await
        .expect("key");
    let key: Value = key.json().await.expect("json");
    key["public_key"].as_str().expect("key").to_owned()
}

/// A notification's action as the service worker sends it: the cookie and
/// the page's Origin, no browser secret (a worker cannot read it).
async fn act(daemon: &Daemon, cookie: &str, token: &Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(daemon.url("/push/act"))
        .header(ORIGIN, &daemon.base)
        .header(COOKIE, cookie)
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"token": token}).to_string())
        .send()
        .await
        .expect("act");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn token(payload: &Value, action: &str) -> Value {
    payload["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .find(|candidate| candidate["action"] == action)
        .map(|found| found["token"].clone())
        .unwrap_or_else(|| panic!("no {action} action in {payload}"))
}

struct Setup {
    daemon: Daemon,
    service: PushService,
    browser: Browser,
    keys: Keys,
    endpoint: String,
    vapid: String,
    local: Client,
    agent: String,
    _project: TempDir,
    _home: Option<TempDir>,
}

/// A daemon that may push to loopback, a subscribed browser with no tab
/// open, and an agent a local client answers for (so that its questions
/// wait instead of resolving headless).
async fn setup(extra: &[&str]) -> Setup {
    let home = TempDir::new().expect("home");
    let mut setup = setup_in(&home, extra).await;
    setup._home = Some(home);
    setup
}

async fn setup_in(home: &TempDir, extra: &[&str]) -> Setup {
    let mut args = vec!["--insecure-push-endpoints"];
    args.extend_from_slice(extra);
    let daemon = Daemon::start_in(home.path(), &args).await;
    let service = PushService::start().await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let keys = browser_keys();
    let endpoint = format!("{}/push/browser-one", service.base);
    let vapid = subscribe(&daemon, &browser, &endpoint, &keys).await;
    let project = TempDir::new().expect("project");
    let mut local = Client::unix(&daemon.socket()).await;
    let agent = local.create(project.path(), "builder").await;
    local.attach(&agent, "interactive").await;
    Setup {
        daemon,
        service,
        browser,
        keys,
        endpoint,
        vapid,
        local,
        agent,
        _project: project,
        _home: None,
    }
}

impl Setup {
    async fn ask(&mut self, command: &str) -> Value {
        let agent = self.agent.clone();
        let prompt =
            json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
        self.local.call("p", prompt).await;
        self.local.permission_request(&agent).await
    }

    async fn next_push(&mut self) -> (Received, Value) {
        let received = self.service.next().await;
        let payload = open(&received, &self.keys, &self.endpoint, &self.vapid);
        (received, payload)
    }

    async fn answer_locally(&mut self, request: &Value, decision: &str) {
        let answer = json!({"type": "permission_response", "agent_id": self.agent,
                            "request_id": request["request_id"], "decision": decision});
        self.local.call("a", answer).await;
        let agent = self.agent.clone();
        self.local.until_agent(&agent, |message| message["type"] == "turn_end").await;
    }
}

#[tokio::test]
async fn a_waiting_question_is_pushed_encrypted_signed_and_retried_and_its_end_follows() {
    let mut setup = setup(&[]).await;
    // The push service is busy once: the daemon tries again.
    setup.service.answer_next(&[StatusCode::SERVICE_UNAVAILABLE]);
    let request = setup.ask("echo API_KEY=hunter2 visible > out.txt").await;

    let (busy, first) = setup.next_push().await;
    let (taken, payload) = setup.next_push().await;
    assert_eq!(first, payload, "the retry carries the same notification");
    assert_eq!(taken.path, "/push/browser-one");
    assert_eq!(payload["kind"], "question");
    assert_eq!(payload["agent_id"], setup.agent);
    assert_eq!(payload["agent"], "builder");
    assert_eq!(payload["request_id"], request["request_id"]);
    assert_eq!(payload["title"], "builder asks to use bash");
    assert_eq!(payload["body"], "echo API_KEY=••• visible > out.txt", "secrets masked");
    assert!(!payload.to_string().contains("hunter2"));
    let actions: Vec<&str> = payload["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .map(|action| action["action"].as_str().expect("action"))
        .collect();
    assert_eq!(actions, ["allow", "deny"]);
    for received in [&busy, &taken] {
        assert_eq!(received.headers["urgency"], "high");
        assert_eq!(received.headers["ttl"], "600");
        assert_eq!(received.headers["topic"].len(), 32);
        assert!(received.body.len() < 4096, "within what every push service takes");
    }
    // The body is ciphertext: nothing of the payload shows through.
    assert!(!String::from_utf8_lossy(&taken.body).contains("builder"));

    // Answered from a local client: the end goes to the same browser, under
    // the question's Topic, so that its notification closes.
    setup.answer_locally(&request, "deny").await;
    let (closed, end) = setup.next_push().await;
    assert_eq!(end["kind"], "closed");
    assert_eq!(end["request_id"], request["request_id"]);
    assert_eq!(closed.headers["topic"], taken.headers["topic"]);
    assert_eq!(closed.headers["urgency"], "normal");
}

#[tokio::test]
async fn a_browser_with_a_tab_on_screen_is_not_pushed_and_a_gone_subscription_is_forgotten() {
    let mut setup = setup(&[]).await;
    let mut tab = setup.browser.connect(&setup.daemon).await;
    let shown = tab.call("v", json!({"type": "client.presence", "visible": true})).await;
    assert_eq!(shown["success"], true, "{shown}");
    let seen_on_screen = setup.ask("echo one").await;
    setup.answer_locally(&seen_on_screen, "deny").await;

    // Hidden now: the next question is the first push of all (pushes to one
    // browser go out in order, so none was made for the first).
    let hidden = tab.call("h", json!({"type": "client.presence", "visible": false})).await;
    assert_eq!(hidden["success"], true);
    let away = setup.ask("echo two").await;
    let (_, payload) = setup.next_push().await;
    assert_eq!(payload["request_id"], away["request_id"]);
    setup.answer_locally(&away, "deny").await;
    let (_, end) = setup.next_push().await;
    assert_eq!((end["kind"].as_str(), &end["request_id"]), (Some("closed"), &away["request_id"]));

    // A tab that closes counts no more: its presence goes with it.
    let mut shown_again = setup.browser.connect(&setup.daemon).await;
    shown_again.call("v", json!({"type": "client.presence", "visible": true})).await;
    drop(shown_again);
    drop(tab);
    // The push service says the subscription is gone: it is forgotten, and
    // what was queued behind that push (the question's end) is not sent.
    setup.service.answer_next_after(StatusCode::GONE, Duration::from_millis(1500));
    let mut gone_seen = false;
    for _ in 0..50 {
        // The closed tabs' sockets end in the background: ask until one
        // question is pushed.
        let request = setup.ask("echo three").await;
        let pushed =
            tokio::time::timeout(Duration::from_millis(300), setup.service.received.recv()).await;
        setup.answer_locally(&request, "deny").await;
        if pushed.is_ok() {
            gone_seen = true;
            break;
        }
    }
    assert!(gone_seen, "a push once no tab is on screen");
    let mut forgotten = false;
    for _ in 0..100 {
        let choices = reqwest::Client::new()
            .get(setup.daemon.url("/push/choices"))
            .header(COOKIE, &setup.browser.cookie)
            .header("shard-browser-secret", &setup.browser.secret)
            .send()
            .await
            .expect("choices");
        let choices: Value = choices.json().await.expect("json");
        if choices["subscribed"] == false {
            forgotten = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(forgotten, "a 410 forgets the subscription");
    let request = setup.ask("echo four").await;
    setup.answer_locally(&request, "deny").await;
    setup.service.quiet_for(500).await;
}

#[tokio::test]
async fn choices_leave_out_a_muted_agent_and_a_test_push_arrives() {
    let mut setup = setup(&[]).await;
    let response = browser_request(&setup.daemon, "/push/choices", &setup.browser)
        .body(json!({"mute": setup.agent}).to_string())
        .send()
        .await
        .expect("choose");
    assert_eq!(response.status(), StatusCode::OK);
    let chosen: Value = response.json().await.expect("json");
    assert_eq!(chosen["choices"]["muted"], json!([setup.agent]));
    let muted = setup.ask("echo muted").await;
    setup.answer_locally(&muted, "deny").await;
    // The test push is the first to arrive: nothing came of the muted agent.
    let response = browser_request(&setup.daemon, "/push/test", &setup.browser)
        .send()
        .await
        .expect("test push");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let (_, payload) = setup.next_push().await;
    assert_eq!(payload["kind"], "test");

    let unknown = browser_request(&setup.daemon, "/push/choices", &setup.browser)
        .body(json!({"shout": true}).to_string())
        .send()
        .await
        .expect("choose");
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    let stranger = reqwest::Client::new()
        .post(setup.daemon.url("/push/test"))
        .header(ORIGIN, &setup.daemon.base)
        .send()
        .await
        .expect("test push");
    assert_eq!(stranger.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_notification_action_answers_once_as_push_and_replays_strangers_and_late_ones_are_refused()
 {
    let mut setup = setup(&[]).await;
    let request = setup.ask("echo allowed > allowed.txt").await;
    let (_, payload) = setup.next_push().await;
    let (allow, deny) = (token(&payload, "allow"), token(&payload, "deny"));

    // Another enrolled browser cannot use this one's token, and using it
    // burns it.
    let code = super::remote::new_code(&setup.daemon).await;
    let stranger = Browser::enroll(&setup.daemon, &code).await;
    let (status, refusal) = act(&setup.daemon, &stranger.cookie, &deny).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refusal}");
    let (status, _) = act(&setup.daemon, &setup.browser.cookie, &deny).await;
    assert_eq!(status, StatusCode::GONE, "a stolen token is burned");
    // Without the session cookie, nothing.
    let (status, _) = act(&setup.daemon, "shard_session=made-up", &allow).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Its pair was burned with it: this question is now answered in a tab.
    setup.answer_locally(&request, "deny").await;
    let (status, refusal) = act(&setup.daemon, &setup.browser.cookie, &allow).await;
    assert_eq!(status, StatusCode::GONE, "{refusal}");
    assert!(refusal["message"].as_str().expect("message").contains("already used"), "{refusal}");

    // A fresh question, allowed from the notification.
    let _closed = setup.next_push().await;
    let request = setup.ask("echo allowed > allowed.txt").await;
    let (_, payload) = setup.next_push().await;
    let allow = token(&payload, "allow");
    let (status, answer) = act(&setup.daemon, &setup.browser.cookie, &allow).await;
    assert_eq!((status, &answer["decision"]), (StatusCode::OK, &json!("allow")), "{answer}");
    let agent = setup.agent.clone();
    let resolved = setup
        .local
        .until_agent(&agent, |message| message["type"] == "permission_resolved")
        .await
        .pop()
        .expect("resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("allow"), Some("push"))
    );
    setup.local.until_agent(&agent, |message| message["type"] == "turn_end").await;
    assert!(setup._project.path().join("allowed.txt").exists(), "the call ran");
    // Replayed: refused, nothing else happens.
    let (status, _) = act(&setup.daemon, &setup.browser.cookie, &allow).await;
    assert_eq!(status, StatusCode::GONE);
    let history = setup.local.call("h", json!({"type": "approval.list", "agent_id": agent})).await;
    let record = history["data"]["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .find(|record| record["request_id"] == request["request_id"])
        .cloned()
        .expect("recorded");
    assert_eq!(record["answered_by"]["source"], "push", "{record}");
    assert_eq!(record["outcome"], "allow");
}

#[tokio::test]
async fn an_expired_action_is_refused_and_changes_nothing() {
    let mut setup = setup(&["--push-action-ttl", "1"]).await;
    let request = setup.ask("echo late > late.txt").await;
    let (_, payload) = setup.next_push().await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (status, refusal) =
        act(&setup.daemon, &setup.browser.cookie, &token(&payload, "allow")).await;
    assert_eq!(status, StatusCode::GONE);
    assert!(refusal["message"].as_str().expect("message").contains("expired"), "{refusal}");
    // Still open, for a tab to answer.
    setup.answer_locally(&request, "deny").await;
    assert!(!setup._project.path().join("late.txt").exists());
}

#[tokio::test]
async fn a_failed_turn_is_pushed_with_its_code_and_nothing_of_its_message() {
    // A provider whose key is not in the environment: the turn fails at once.
    let home = TempDir::new().expect("home");
    let config = "default_model = \"keyless\"\n\n[[models]]\nid = \"keyless\"\n\
                  provider = \"anthropic\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9\"\n\
                  api_key_env = \"SHARD_TEST_NO_SUCH_KEY\"\ncontext_window = 1000\n";
    std::fs::write(home.path().join("config.toml"), config).expect("config");
    let mut setup = setup_in(&home, &[]).await;
    let agent = setup.agent.clone();
    setup.local.call("p", json!({"type": "prompt", "agent_id": agent, "message": "hello"})).await;
    let error = setup.local.until_agent(&agent, |message| message["type"] == "error").await;
    let error = error.last().expect("error");
    assert!(error["message"].as_str().expect("message").contains("SHARD_TEST_NO_SUCH_KEY"));
    let (_, payload) = setup.next_push().await;
    assert_eq!(payload["kind"], "error");
    assert_eq!(payload["title"], "builder: the turn failed");
    assert!(payload["body"].as_str().expect("body").contains("PROVIDER_ERROR"), "{payload}");
    assert!(!payload.to_string().contains("SHARD_TEST_NO_SUCH_KEY"), "no message: {payload}");

    // Chosen off: the next failure is not pushed (the test push comes first).
    let response = browser_request(&setup.daemon, "/push/choices", &setup.browser)
        .body(json!({"errors": false}).to_string())
        .send()
        .await
        .expect("choose");
    assert_eq!(response.status(), StatusCode::OK);
    setup.local.call("q", json!({"type": "prompt", "agent_id": agent, "message": "again"})).await;
    setup.local.until_agent(&agent, |message| message["type"] == "error").await;
    browser_request(&setup.daemon, "/push/test", &setup.browser).send().await.expect("test");
    let (_, payload) = setup.next_push().await;
    assert_eq!(payload["kind"], "test");
}

/// `[step_up]` in `config.toml`, with `when = "always"` so that it applies
/// on loopback too.
fn step_up_always(home: &TempDir) {
    std::fs::write(home.path().join("config.toml"), "[step_up]\nwhen = \"always\"\n")
        .expect("config");
}

#[tokio::test]
async fn a_guarded_allow_from_a_browser_or_a_notification_needs_the_passkey_and_a_deny_does_not() {
    let home = TempDir::new().expect("home");
    step_up_always(&home);
    let mut setup = setup_in(&home, &[]).await;
    let agent = setup.agent.clone();
    let mut tab = setup.browser.connect(&setup.daemon).await;
    tab.attach(&agent, "interactive").await;

    // From a browser's tab: refused, saying why; the question stays open.
    let request = setup.ask("echo guarded > guarded.txt").await;
    let allow = json!({"type": "permission_response", "agent_id": agent,
                       "request_id": request["request_id"], "decision": "allow"});
    let refused = tab.call("a", allow).await;
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED");
    assert!(
        refused["error"]["message"].as_str().expect("message").contains("passkey"),
        "{refused}"
    );
    // From a notification: refused with STEP_UP; the tab is told to take it.
    let (_, payload) = setup.next_push().await;
    let (status, said) = act(&setup.daemon, &setup.browser.cookie, &token(&payload, "allow")).await;
    assert_eq!(
        (status, said["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("STEP_UP")),
        "{said}"
    );
    // On loopback there is no host name for a passkey to be bound to.
    let start = browser_request(&setup.daemon, "/passkey/approve/start", &setup.browser)
        .body(json!({"agent_id": agent, "request_id": request["request_id"]}).to_string())
        .send()
        .await
        .expect("approve start");
    assert_eq!(start.status(), StatusCode::CONFLICT);
    let finish = browser_request(&setup.daemon, "/passkey/approve/finish", &setup.browser)
        .body(json!({"id": "x", "rawId": "eA", "type": "public-key", "response": {}}).to_string())
        .send()
        .await
        .expect("approve finish");
    assert_ne!(finish.status(), StatusCode::OK, "no assertion, no allow");
    // A local client is not "from away": its allow counts.
    setup.answer_locally(&request, "allow").await;
    assert!(setup._project.path().join("guarded.txt").exists());

    // A deny never needs one.
    let request = setup.ask("echo denied > denied.txt").await;
    let deny = json!({"type": "permission_response", "agent_id": agent,
                      "request_id": request["request_id"], "decision": "deny"});
    assert_eq!(tab.call("d", deny).await["success"], true);
    let resolved = setup
        .local
        .until_agent(&agent, |message| message["type"] == "permission_resolved")
        .await
        .pop()
        .expect("resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("deny"), Some("web"))
    );
}

#[tokio::test]
async fn behind_a_proxy_a_passkey_is_asked_for_the_public_host_and_a_bad_assertion_allows_nothing()
{
    let root = TempDir::new().expect("root");
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let port = super::support::free_port("127.0.0.1");
    let daemon = Daemon::start_with(
        &home,
        &[
            "--port",
            &port.to_string(),
            "--trust-proxy",
            "loopback",
            "--public-host",
            "shard.test:443",
            "--allowed-origin",
            "https://shard.test",
        ],
        &[],
        None,
    )
    .await;
    let proxied = |path: &str| {
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}{path}"))
            .header("host", "shard.test")
            .header(ORIGIN, "https://shard.test")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "shard.test")
            .header(CONTENT_TYPE, "application/json")
    };
    let enrolled = proxied("/enroll")
        .body(json!({"code": daemon.enroll_code()}).to_string())
        .send()
        .await
        .expect("enroll");
    assert_eq!(enrolled.status(), StatusCode::OK);
    let cookie = super::client::session_cookie(&enrolled);

    let options =
        proxied("/passkey/register/start").header(COOKIE, &cookie).send().await.expect("start");
    assert_eq!(options.status(), StatusCode::OK);
    let options: Value = options.json().await.expect("json");
    assert_eq!(options["publicKey"]["rp"]["id"], "shard.test", "{options}");
    assert_eq!(options["publicKey"]["authenticatorSelection"]["userVerification"], "required");
    assert!(options["publicKey"]["challenge"].as_str().expect("challenge").len() >= 40);
    // A made-up credential is refused and nothing is kept.
    let forged = json!({"id": "AAAA", "rawId": "AAAA", "type": "public-key",
                        "response": {"clientDataJSON": "e30", "attestationObject": "oA"}});
    let finish = proxied("/passkey/register/finish")
        .header(COOKIE, &cookie)
        .body(forged.to_string())
        .send()
        .await
        .expect("finish");
    assert_eq!(finish.status(), StatusCode::BAD_REQUEST);
    // Without a passkey, no approval starts; without a cookie, nothing.
    let approve = proxied("/passkey/approve/start")
        .header(COOKIE, &cookie)
        .body(json!({"agent_id": "agent-x", "request_id": "r"}).to_string())
        .send()
        .await
        .expect("approve");
    assert_eq!(approve.status(), StatusCode::CONFLICT);
    let stranger = proxied("/passkey/register/start").send().await.expect("start");
    assert_eq!(stranger.status(), StatusCode::UNAUTHORIZED);
}

/// `config.toml` with the scripted ACP agent (tests/fixtures/acp) as `fake`.
fn acp_runtime() -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/acp/fake_acp_agent.py");
    format!(
        "[[runtimes]]\nid = \"fake\"\nprotocol = \"acp\"\ncommand = \"python3\"\nargs = [{script:?}]\n"
    )
}

impl Setup {
    /// Another agent, attached by the local client, so that its questions
    /// wait too.
    async fn another_agent(&mut self, runtime: &str, name: &str) -> (String, TempDir) {
        let project = TempDir::new().expect("project");
        let made = self
            .local
            .call(
                "c",
                json!({"type": "agent.create", "cwd": project.path().display().to_string(),
                       "runtime": runtime, "name": name}),
            )
            .await;
        assert_eq!(made["success"], true, "{made}");
        let agent = made["data"]["agent_id"].as_str().expect("agent id").to_owned();
        self.local.attach(&agent, "interactive").await;
        (agent, project)
    }

    async fn ask_agent(&mut self, agent: &str, command: &str) -> Value {
        let prompt =
            json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
        self.local.call("p", prompt).await;
        self.local.permission_request(agent).await
    }

    async fn deny(&mut self, agent: &str, request: &Value) {
        let answer = json!({"type": "permission_response", "agent_id": agent,
                            "request_id": request["request_id"], "decision": "deny"});
        self.local.call("a", answer).await;
        self.local.until_agent(agent, |message| message["type"] == "turn_end").await;
    }
}

#[tokio::test]
async fn what_looks_like_a_credential_reaches_no_lock_screen() {
    let home = TempDir::new().expect("home");
    std::fs::write(home.path().join("config.toml"), acp_runtime()).expect("config");
    let mut setup = setup_in(&home, &[]).await;
    let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let clone = format!("git clone https://oauth2:{token}@github.com/org/repo.git");
    for (command, shown, secret) in [
        (clone.as_str(), "git clone https://•••@github.com/org/repo.git", token),
        (
            "psql postgresql://admin:hunter2@db.example.com/app",
            "psql postgresql://•••@db.example.com/app",
            "hunter2",
        ),
        (
            "curl -u admin:hunter2 https://api.example.com/",
            "curl -u admin:••• https://api.example.com/",
            "hunter2",
        ),
        (
            "curl -H 'Authorization: Bearer hunter2' x.test",
            "curl -H 'Authorization: ••• ••• x.test",
            "hunter2",
        ),
        ("DB_PASSWORD=hunter2 ./migrate", "DB_PASSWORD=••• ./migrate", "hunter2"),
    ] {
        let request = setup.ask(command).await;
        let (_, payload) = setup.next_push().await;
        assert_eq!(payload["request_id"], request["request_id"]);
        assert_eq!(payload["body"], shown, "{command}");
        assert!(!payload.to_string().contains(secret), "{command}: {payload}");
        let agent = setup.agent.clone();
        setup.deny(&agent, &request).await;
        let (_, end) = setup.next_push().await;
        assert_eq!(end["kind"], "closed");
    }

    // An ACP agent names its call after the command line: its title is
    // masked as a command is.
    let (claude, _project) = setup.another_agent("fake", "claude").await;
    let request = setup.ask_agent(&claude, &format!("export GH_TOKEN={token}")).await;
    let (_, payload) = setup.next_push().await;
    assert_eq!(payload["request_id"], request["request_id"]);
    assert_eq!(payload["agent"], "claude");
    assert_eq!(payload["title"], "claude asks to use Run export GH_TOKEN=•••", "{payload}");
    assert!(!payload.to_string().contains(&token[4..12]), "{payload}");
    setup.deny(&claude, &request).await;
}

#[tokio::test]
async fn two_agents_questions_of_the_same_id_keep_their_own_notifications() {
    let mut setup = setup(&[]).await;
    let first = setup.agent.clone();
    let (second, _project) = setup.another_agent("shard", "tester").await;
    let one = setup.ask_agent(&first, "echo one").await;
    let (_, asked_one) = setup.next_push().await;
    let two = setup.ask_agent(&second, "echo two").await;
    let (_, asked_two) = setup.next_push().await;
    // Each agent numbers its own questions: the same request id.
    assert_eq!(one["request_id"], two["request_id"]);
    assert_eq!(asked_two["agent_id"], second);
    let tag = |payload: &Value| payload["tag"].as_str().map(str::to_owned);
    let (tag_one, tag_two) = (tag(&asked_one), tag(&asked_two));
    assert!(tag_one.is_some() && tag_two.is_some(), "{asked_one} {asked_two}");
    assert_ne!(tag_one, tag_two, "the second would replace the first on the lock screen");

    // The first's end closes the first's notification, not the second's.
    setup.deny(&first, &one).await;
    let (_, closed) = setup.next_push().await;
    assert_eq!((closed["kind"].as_str(), tag(&closed)), (Some("closed"), tag_one));
    setup.deny(&second, &two).await;
    let (_, closed) = setup.next_push().await;
    assert_eq!((closed["kind"].as_str(), tag(&closed)), (Some("closed"), tag_two));
}

/// A TCP listener on loopback that tells of every connection and what it
/// first said (a TLS hello, or a proxy's `CONNECT`).
struct Tap {
    port: u16,
    seen: mpsc::UnboundedReceiver<Vec<u8>>,
}

impl Tap {
    async fn start() -> Tap {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (told, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let told = told.clone();
                tokio::spawn(async move {
                    let mut first = vec![0u8; 512];
                    let read =
                        tokio::time::timeout(Duration::from_secs(2), stream.read(&mut first));
                    let length = read.await.ok().and_then(Result::ok).unwrap_or(0);
                    first.truncate(length);
                    let _ = told.send(first);
                });
            }
        });
        Tap { port, seen }
    }

    fn quiet(&mut self) -> Result<(), String> {
        match self.seen.try_recv() {
            Ok(first) => Err(String::from_utf8_lossy(&first).into_owned()),
            Err(_) => Ok(()),
        }
    }
}

/// A daemon whose push client finds `push.example.com` at 127.0.0.1 (the
/// hidden `--push-resolve`, as if its DNS said so), with a proxy in its
/// environment; a browser subscribed at that name, and a test push asked.
async fn push_to_a_name_of_this_machine(
    home: &TempDir,
    extra: &[&str],
    proxy: &Tap,
    service: &Tap,
) -> Daemon {
    let proxy = format!("http://127.0.0.1:{}", proxy.port);
    let mut args = vec!["--push-resolve", "push.example.com=127.0.0.1"];
    args.extend_from_slice(extra);
    let env = [
        ("HTTPS_PROXY", proxy.as_str()),
        ("https_proxy", proxy.as_str()),
        ("ALL_PROXY", proxy.as_str()),
    ];
    let stderr = home.path().join("stderr.log");
    let daemon = Daemon::start_with(&home.path().join("home"), &args, &env, Some(&stderr)).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let endpoint = format!("https://push.example.com:{}/push/browser-one", service.port);
    subscribe(&daemon, &browser, &endpoint, &browser_keys()).await;
    let response =
        browser_request(&daemon, "/push/test", &browser).send().await.expect("test push");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    daemon
}

#[tokio::test]
async fn a_push_service_name_that_resolves_into_this_machine_gets_nothing_and_no_proxy_is_asked() {
    let (mut service, mut proxy) = (Tap::start().await, Tap::start().await);
    // Guarded, as every real daemon is: the resolver refuses the name, and
    // the proxy is never asked to reach it instead.
    let home = TempDir::new().expect("home");
    let _guarded = push_to_a_name_of_this_machine(&home, &[], &proxy, &service).await;
    let stderr = home.path().join("stderr.log");
    let mut refused = false;
    for _ in 0..200 {
        if let Err(asked) = proxy.quiet() {
            panic!("the proxy was asked for the push service: {asked:?}");
        }
        let said = std::fs::read_to_string(&stderr).unwrap_or_default();
        if said.contains("push.example.com") && said.contains("no public address") {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        refused,
        "the resolver said nothing: {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(service.quiet(), Ok(()), "a connection into this machine");
    assert_eq!(proxy.quiet(), Ok(()), "the proxy was asked");

    // With the test flag that lifts the guards, the same name leads to the
    // listener, straight (a TLS hello): what the guard above stopped.
    let lifted = TempDir::new().expect("home");
    let _lifted =
        push_to_a_name_of_this_machine(&lifted, &["--insecure-push-endpoints"], &proxy, &service)
            .await;
    let first = tokio::time::timeout(PUSH_WAIT, service.seen.recv())
        .await
        .expect("a connection within the wait")
        .expect("the tap runs");
    assert_eq!(first.first(), Some(&0x16), "a TLS handshake: {first:?}");
    assert_eq!(proxy.quiet(), Ok(()), "the proxy was asked");
}
