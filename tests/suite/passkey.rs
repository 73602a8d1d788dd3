//! Passkeys through the real daemon (docs/SECURITY.md, "Passkey step-up"),
//! with a software authenticator (`super::authenticator`): registration,
//! a guarded allow confirmed with an assertion made for that very call,
//! the cap, passkeys ending with their session, and who may add one.
//!
//! WebAuthn needs a host name, so the daemon runs as behind a proxy on
//! loopback, public as `shard.test` (as `push_delivery`'s proxied test and
//! Playwright's `passkey.spec.ts` do); the default `[step_up]` guards
//! every allow of `bash` from a browser in that mode.

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, ORIGIN};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::authenticator::Authenticator;
use super::client::Client;
use super::support::{Daemon, free_port};

const HOST: &str = "shard.test";
const PAGE: &str = "https://shard.test";

/// A daemon behind a (pretended) TLS proxy, and a local client that made
/// an agent and answers nothing, so that its questions wait.
struct Remote {
    daemon: Daemon,
    port: u16,
    local: Client,
    agents: Vec<(String, TempDir)>,
    _root: TempDir,
}

/// An enrolled browser: its cookie and its authenticator.
struct Browser {
    cookie: String,
    keys: Authenticator,
}

impl Remote {
    async fn start() -> Remote {
        Self::start_with(&[]).await
    }

    async fn start_with(extra: &[&str]) -> Remote {
        let root = TempDir::new().expect("root");
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let port = free_port("127.0.0.1");
        let public = format!("{HOST}:443");
        let port_text = port.to_string();
        let mut args = vec![
            "--port",
            &port_text,
            "--trust-proxy",
            "loopback",
            "--public-host",
            &public,
            "--allowed-origin",
            PAGE,
        ];
        args.extend_from_slice(extra);
        let daemon = Daemon::start_with(&home, &args, &[], None).await;
        let local = Client::unix(&daemon.socket()).await;
        Remote { daemon, port, local, agents: Vec::new(), _root: root }
    }

    /// A request as the proxy forwards it from the page.
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new()
            .post(format!("http://127.0.0.1:{}{path}", self.port))
            .header("host", HOST)
            .header(ORIGIN, PAGE)
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", HOST)
            .header(CONTENT_TYPE, "application/json")
    }

    async fn enroll_with(&self, code: &str) -> Browser {
        let enrolled = self
            .post("/enroll")
            .body(json!({"code": code}).to_string())
            .send()
            .await
            .expect("enroll");
        assert_eq!(enrolled.status(), StatusCode::OK);
        let cookie = super::client::session_cookie(&enrolled);
        Browser { cookie, keys: Authenticator::new(PAGE) }
    }

    /// A browser enrolled with a new code from `shard enroll`.
    async fn enroll(&mut self) -> Browser {
        let made = self.local.call("e", json!({"type": "daemon.enroll"})).await;
        let url = made["data"]["url"].as_str().expect("url").to_owned();
        let code = url.split("#enroll=").nth(1).expect("code").to_owned();
        self.enroll_with(&code).await
    }

    /// `POST path` with `browser`'s cookie and `body`: status and JSON.
    async fn call(&self, browser: &Browser, path: &str, body: &Value) -> (StatusCode, Value) {
        let response = self
            .post(path)
            .header(COOKIE, &browser.cookie)
            .body(body.to_string())
            .send()
            .await
            .expect("request");
        (response.status(), response.json().await.unwrap_or(Value::Null))
    }

    /// Adds a passkey to `browser` as the page does: the options, then a
    /// new credential (with an assertion of one it has, when asked to
    /// prove one); the finish's status and answer.
    async fn register(&self, browser: &mut Browser) -> (StatusCode, Value) {
        let (status, options) = self.call(browser, "/passkey/register/start", &json!({})).await;
        if status != StatusCode::OK {
            return (status, options);
        }
        let credential = browser.keys.create(&options);
        let body = match options.get("prove") {
            Some(prove) => {
                json!({"credential": credential, "assertion": browser.keys.get(prove, 0)})
            }
            None => credential,
        };
        self.call(browser, "/passkey/register/finish", &body).await
    }

    /// A new agent (attached by the local client), asked to run `command`:
    /// its id and the open question's request id.
    async fn ask(&mut self, command: &str) -> (String, String) {
        let project = TempDir::new().expect("project");
        let agent = self.local.create(project.path(), "guarded").await;
        self.local.attach(&agent, "interactive").await;
        let prompt =
            json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
        self.local.call("p", prompt).await;
        let request = self.local.permission_request(&agent).await;
        let request_id = request["request_id"].as_str().expect("request id").to_owned();
        self.agents.push((agent.clone(), project));
        (agent, request_id)
    }

    fn project(&self, agent: &str) -> &std::path::Path {
        self.agents.iter().find(|(id, _)| id == agent).expect("an agent of ours").1.path()
    }

    /// The options to confirm `agent`'s question `request_id`.
    async fn approve_start(&self, browser: &Browser, agent: &str, request_id: &str) -> Value {
        let body = json!({"agent_id": agent, "request_id": request_id});
        let (status, options) = self.call(browser, "/passkey/approve/start", &body).await;
        assert_eq!(status, StatusCode::OK, "{options}");
        options
    }

    fn store(&self) -> String {
        std::fs::read_to_string(self.daemon.home.join("security.json")).expect("store")
    }
}

#[tokio::test]
async fn a_passkeys_assertion_allows_the_call_it_was_made_for_and_no_other() {
    let mut remote = Remote::start().await;
    let mut browser = remote.enroll().await;
    assert_eq!(remote.register(&mut browser).await.0, StatusCode::NO_CONTENT);
    let (first, first_request) = remote.ask("echo one > one.txt").await;
    let (second, second_request) = remote.ask("echo two > two.txt").await;

    // An assertion made for the first question, sent once the second's
    // ceremony has begun: refused, and the second stays open.
    let for_first = remote.approve_start(&browser, &first, &first_request).await;
    let made_for_first = browser.keys.get(&for_first, 0);
    remote.approve_start(&browser, &second, &second_request).await;
    let (status, said) = remote.call(&browser, "/passkey/approve/finish", &made_for_first).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");
    assert_eq!(said["code"], "PERMISSION_DENIED");
    assert!(!remote.project(&second).join("two.txt").exists());

    // One made for that call allows it, and it runs.
    let options = remote.approve_start(&browser, &first, &first_request).await;
    let assertion = browser.keys.get(&options, 0);
    let (status, said) = remote.call(&browser, "/passkey/approve/finish", &assertion).await;
    assert_eq!((status, &said), (StatusCode::OK, &json!({"decision": "allow"})));
    let resolved = remote
        .local
        .until_agent(&first, |message| message["type"] == "permission_resolved")
        .await
        .pop()
        .expect("resolved");
    assert_eq!(
        (resolved["decision"].as_str(), resolved["source"].as_str()),
        (Some("allow"), Some("web"))
    );
    remote.local.until_agent(&first, |message| message["type"] == "turn_end").await;
    assert!(remote.project(&first).join("one.txt").exists());

    // The same assertion again, now for the second question: refused.
    remote.approve_start(&browser, &second, &second_request).await;
    let (status, _) = remote.call(&browser, "/passkey/approve/finish", &assertion).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!remote.project(&second).join("two.txt").exists());
}

#[tokio::test]
async fn passkey_ceremony_options_are_never_stored() {
    let mut remote = Remote::start().await;
    let mut browser = remote.enroll().await;
    let start = remote
        .post("/passkey/register/start")
        .header(COOKIE, &browser.cookie)
        .body("{}")
        .send()
        .await
        .expect("start");
    assert_eq!(start.status(), StatusCode::OK);
    assert_eq!(
        start.headers().get(CACHE_CONTROL).map(|value| value.as_bytes()),
        Some(&b"no-store"[..])
    );
    assert_eq!(remote.register(&mut browser).await.0, StatusCode::NO_CONTENT);
    let (agent, request_id) = remote.ask("echo x > x.txt").await;
    let approve = remote
        .post("/passkey/approve/start")
        .header(COOKIE, &browser.cookie)
        .body(json!({"agent_id": agent, "request_id": request_id}).to_string())
        .send()
        .await
        .expect("approve");
    assert_eq!(approve.status(), StatusCode::OK);
    assert_eq!(
        approve.headers().get(CACHE_CONTROL).map(|value| value.as_bytes()),
        Some(&b"no-store"[..])
    );
}

#[tokio::test]
async fn a_browser_keeps_at_most_eight_passkeys() {
    let mut remote = Remote::start().await;
    let mut browser = remote.enroll().await;
    for _ in 0..8 {
        let (status, said) = remote.register(&mut browser).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{said}");
    }
    let (status, said) = remote.register(&mut browser).await;
    assert_eq!((status, said["code"].as_str()), (StatusCode::CONFLICT, Some("CONFLICT")), "{said}");
    assert_eq!(browser.keys.len(), 8, "no ninth credential was even asked for");
}

#[tokio::test]
async fn an_ended_session_takes_its_passkeys_with_it() {
    let mut remote = Remote::start().await;
    let (agent, request_id) = remote.ask("echo late > late.txt").await;

    // Logged out between its assertion and the finish.
    let mut leaving = remote.enroll().await;
    assert_eq!(remote.register(&mut leaving).await.0, StatusCode::NO_CONTENT);
    let credential = leaving.keys.credential_id(0);
    assert!(remote.store().contains(&credential), "kept while the session lives");
    let options = remote.approve_start(&leaving, &agent, &request_id).await;
    let assertion = leaving.keys.get(&options, 0);
    let (status, _) = remote.call(&leaving, "/logout", &json!({})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = remote.call(&leaving, "/passkey/approve/finish", &assertion).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!remote.store().contains(&credential), "dropped at logout");

    // Revoked by the owner between its assertion and the finish.
    let mut revoked = remote.enroll().await;
    assert_eq!(remote.register(&mut revoked).await.0, StatusCode::NO_CONTENT);
    let credential = revoked.keys.credential_id(0);
    let options = remote.approve_start(&revoked, &agent, &request_id).await;
    let assertion = revoked.keys.get(&options, 0);
    let listed = remote.local.call("s", json!({"type": "daemon.sessions"})).await;
    let session =
        listed["data"]["sessions"][0]["session_id"].as_str().expect("one live").to_owned();
    let gone = remote
        .local
        .call("r", json!({"type": "daemon.revoke_session", "session_id": session}))
        .await;
    assert_eq!(gone["success"], true, "{gone}");
    let (status, _) = remote.call(&revoked, "/passkey/approve/finish", &assertion).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!remote.store().contains(&credential), "dropped at revocation");
    assert!(!remote.project(&agent).join("late.txt").exists());
}

#[tokio::test]
async fn a_second_passkey_needs_an_assertion_of_the_first() {
    let mut remote = Remote::start().await;
    let mut browser = remote.enroll().await;
    assert_eq!(remote.register(&mut browser).await.0, StatusCode::NO_CONTENT);

    // The cookie alone: a new credential, no assertion. Refused.
    let (status, options) = remote.call(&browser, "/passkey/register/start", &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let alone = browser.keys.create(&options);
    let (status, said) = remote.call(&browser, "/passkey/register/finish", &alone).await;
    assert_eq!(
        (status, said["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("PERMISSION_DENIED")),
        "{said}"
    );

    // An assertion by a key this browser never registered: refused.
    let (status, options) = remote.call(&browser, "/passkey/register/start", &json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let mut stranger = Authenticator::new(PAGE);
    stranger.create(&options);
    let forged = json!({"credential": browser.keys.create(&options),
                        "assertion": stranger.get(&options["prove"], 0)});
    let (status, said) = remote.call(&browser, "/passkey/register/finish", &forged).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");

    // Neither key was kept: an assertion of either allows nothing.
    let (agent, request_id) = remote.ask("echo sneaked > sneaked.txt").await;
    for at in [1, 2] {
        let options = remote.approve_start(&browser, &agent, &request_id).await;
        let assertion = browser.keys.get(&options, at);
        let (status, said) = remote.call(&browser, "/passkey/approve/finish", &assertion).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "key {at}: {said}");
    }
    assert!(!remote.project(&agent).join("sneaked.txt").exists());

    // With an assertion of the first: added, and it allows.
    let (status, said) = remote.register(&mut browser).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{said}");
    let options = remote.approve_start(&browser, &agent, &request_id).await;
    let assertion = browser.keys.get(&options, browser.keys.len() - 1);
    let (status, said) = remote.call(&browser, "/passkey/approve/finish", &assertion).await;
    assert_eq!(status, StatusCode::OK, "{said}");
}

#[tokio::test]
async fn a_first_passkey_needs_a_fresh_enrollment_from_shard_enroll() {
    // Codes (and so freshness) last 3 s here instead of 10 minutes.
    let mut remote = Remote::start_with(&["--enroll-code-ttl", "3"]).await;
    let mut stale = remote.enroll().await;
    let mut owner = remote.enroll().await;
    assert_eq!(remote.register(&mut owner).await.0, StatusCode::NO_CONTENT, "fresh");

    // A device paired by that browser's link (which its cookie alone can
    // ask for) is not the owner at the daemon's machine.
    let (status, paired) = remote.call(&owner, "/pair", &json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paired}");
    let code = paired["url"].as_str().expect("url").split("#enroll=").nth(1).expect("code");
    let mut phone = remote.enroll_with(code).await;
    let (status, said) = remote.register(&mut phone).await;
    assert_eq!(
        (status, said["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("PERMISSION_DENIED")),
        "{said}"
    );
    assert!(said["message"].as_str().expect("message").contains("shard enroll"), "{said}");

    // A session enrolled longer ago than a code lives: refused too.
    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    let (status, said) = remote.register(&mut stale).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{said}");
    assert_eq!((phone.keys.len(), stale.keys.len()), (0, 0), "no ceremony was even started");
}
