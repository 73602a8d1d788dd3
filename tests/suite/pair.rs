//! Pairing a device from an enrolled browser (docs/SECURITY.md, "Pairing a
//! device"): `POST /pair` needs what `/bootstrap` needs, and its link is an
//! enrollment code like `shard enroll`'s: single use, short-lived, never
//! printed or logged, one live link per session.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, ORIGIN, RETRY_AFTER};
use serde_json::{Value, json};

use super::client::{Browser, post};
use super::support::Daemon;

/// `POST /pair` as the page sends it: the cookie, the secret, a JSON body.
async fn pair(daemon: &Daemon, browser: &Browser) -> reqwest::Response {
    pair_with(daemon, browser, "application/json", "{}").await
}

/// `POST /pair` from the page's origin with the browser's credentials and
/// the body given.
async fn pair_with(
    daemon: &Daemon,
    browser: &Browser,
    content_type: &str,
    body: &'static str,
) -> reqwest::Response {
    reqwest::Client::new()
        .post(daemon.url("/pair"))
        .header(ORIGIN, &daemon.base)
        .header(COOKIE, &browser.cookie)
        .header("shard-browser-secret", &browser.secret)
        .header(CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .expect("POST /pair")
}

/// A pairing link's answer: the URL, its code, and its lifetime.
struct Link {
    url: String,
    code: String,
    expires_in_ms: u64,
    qr_svg: String,
}

async fn link(daemon: &Daemon, browser: &Browser) -> Link {
    let response = pair(daemon, browser).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
    let answer: Value = response.json().await.expect("json");
    let url = answer["url"].as_str().expect("url").to_owned();
    let code = url
        .strip_prefix(&format!("{}/#enroll=", daemon.base))
        .unwrap_or_else(|| panic!("not an enrollment link of this daemon: {url}"))
        .to_owned();
    Link {
        url,
        code,
        expires_in_ms: answer["expires_in_ms"].as_u64().expect("expires_in_ms"),
        qr_svg: answer["qr_svg"].as_str().expect("qr_svg").to_owned(),
    }
}

/// Whatever the daemon printed on stdout since it announced itself.
fn printed(daemon: &mut Daemon) -> String {
    let mut lines = String::new();
    while let Ok(line) = daemon.stdout.try_recv() {
        lines.push_str(&line);
        lines.push('\n');
    }
    lines
}

#[tokio::test]
async fn pairing_needs_what_bootstrap_needs() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let json_post = |origin: &str| {
        reqwest::Client::new()
            .post(daemon.url("/pair"))
            .header(ORIGIN, origin)
            .header(CONTENT_TYPE, "application/json")
            .body("{}")
    };
    // No cookie, a forged one, the cookie without its secret, a wrong secret.
    let no_cookie = json_post(&daemon.base).send().await.expect("POST");
    assert_eq!(no_cookie.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(no_cookie.headers()[CACHE_CONTROL], "no-store");
    let forged = Browser { cookie: "shard_session=forged".into(), secret: browser.secret.clone() };
    assert_eq!(pair(&daemon, &forged).await.status(), StatusCode::UNAUTHORIZED);
    let alone = json_post(&daemon.base).header(COOKIE, &browser.cookie).send().await.expect("POST");
    assert_eq!(alone.status(), StatusCode::UNAUTHORIZED, "the cookie alone, on loopback");
    let wrong = Browser { cookie: browser.cookie.clone(), secret: "x".repeat(43) };
    assert_eq!(pair(&daemon, &wrong).await.status(), StatusCode::UNAUTHORIZED);
    // Another site's page, riding on the cookie: 400 before anything else.
    let evil = json_post("http://evil.example")
        .header(COOKIE, &browser.cookie)
        .header("shard-browser-secret", &browser.secret)
        .send()
        .await
        .expect("POST");
    assert_eq!(evil.status(), StatusCode::BAD_REQUEST);
    // A JSON body, by POST only.
    let form = pair_with(&daemon, &browser, "application/x-www-form-urlencoded", "a=b").await;
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let get = reqwest::get(daemon.url("/pair")).await.expect("GET");
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    // Dead credentials count with /bootstrap's: four so far, six more, then 429.
    for _ in 0..6 {
        let refused = post(&daemon, "/bootstrap", None, Some("shard_session=forged")).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    }
    let limited = pair(&daemon, &forged).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.headers().contains_key(RETRY_AFTER));
    // The owner is never limited.
    assert_eq!(pair(&daemon, &browser).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_pairing_link_enrolls_one_device_once_and_is_never_printed_or_logged() {
    let home = tempfile::TempDir::new().expect("home");
    let stderr = home.path().join("stderr.log");
    let mut daemon = Daemon::start_with(
        &home.path().join("home"),
        &[],
        &[("SHARD_LOG", "trace")],
        Some(&stderr),
    )
    .await;
    let first = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let project = tempfile::TempDir::new().expect("project");
    let mut web = first.connect(&daemon).await;
    web.create(project.path(), "seen from the other device").await;

    let link = link(&daemon, &first).await;
    assert!(link.code.len() >= 22, "at least 128 bits: {}", link.code);
    assert_eq!(link.expires_in_ms, 600_000, "valid 10 minutes, as `shard enroll`'s");
    assert!(link.qr_svg.contains("<svg") && link.qr_svg.trim_end().ends_with("</svg>"));
    assert!(!link.qr_svg.contains("<script"), "{}", link.qr_svg);

    // A second page of this browser, and one of another, are watching.
    let mut watching = first.connect(&daemon).await;
    let stranger = Browser::enroll(&daemon, &super::remote::new_code(&daemon).await).await;
    let mut unrelated = stranger.connect(&daemon).await;

    // The other device enrolls by it and sees the agents.
    let second = Browser::enroll(&daemon, &link.code).await;
    // Every page of the session whose link it was hears that it was used;
    // no other browser does.
    for page in [&mut web, &mut watching] {
        let used = page.until(|message| message["type"] == "pair_used").await;
        assert!(used.last().unwrap()["at"].as_u64().unwrap() > 0, "{used:?}");
    }
    let pinged = unrelated.call("n", json!({"type": "agent.list"})).await;
    assert_eq!(pinged["success"], true);
    assert!(unrelated.seen.iter().all(|message| message["type"] != "pair_used"));
    let mut other = second.connect(&daemon).await;
    let listed = other.call("l", json!({"type": "agent.list"})).await;
    let names: Vec<&str> = listed["data"]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|agent| agent["name"].as_str())
        .collect();
    assert_eq!(names, ["seen from the other device"]);
    // Once.
    let again = post(&daemon, "/enroll", Some(json!({"code": link.code})), None).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED, "single use");

    // One live link per session: asking again retires the one not used.
    let unused = self::link(&daemon, &first).await;
    let newer = self::link(&daemon, &first).await;
    let retired = post(&daemon, "/enroll", Some(json!({"code": unused.code})), None).await;
    assert_eq!(retired.status(), StatusCode::UNAUTHORIZED, "replaced by the newer link");
    // A link dies with the session that made it.
    let revoked = post(&daemon, "/logout", None, Some(&first.cookie)).await;
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let orphan = post(&daemon, "/enroll", Some(json!({"code": newer.code})), None).await;
    assert_eq!(orphan.status(), StatusCode::UNAUTHORIZED, "its session was revoked");
    // `shard enroll`'s codes are untouched by all this.
    Browser::enroll(&daemon, &super::remote::new_code(&daemon).await).await;

    // Neither stdout nor the logs nor the audit log ever held a code; the
    // audit log says who paired whom.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stdout = printed(&mut daemon);
    let logs = std::fs::read_to_string(&stderr).expect("logs");
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    for code in [&link.code, &unused.code, &newer.code] {
        assert!(!stdout.contains(code.as_str()), "stdout holds a pairing code: {stdout}");
        assert!(!logs.contains(code.as_str()), "the logs hold a pairing code");
        assert!(!audit.contains(code.as_str()), "the audit log holds a pairing code");
    }
    let issued: Vec<Value> = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["event"] == "pair_link_issued")
        .collect();
    assert_eq!(issued.len(), 3, "{audit}");
    let paired = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|entry| entry["event"] == "enrolled" && entry["paired_by"].is_string())
        .unwrap_or_else(|| panic!("no paired enrollment in {audit}"));
    assert_eq!(paired["paired_by"], issued[0]["session_id"], "{paired}");
}

#[tokio::test]
async fn a_pairing_link_expires() {
    let daemon = Daemon::start(&["--enroll-code-ttl", "1"]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let link = link(&daemon, &browser).await;
    assert_eq!(link.expires_in_ms, 1000);
    assert!(link.url.starts_with(&daemon.base));
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let late = post(&daemon, "/enroll", Some(json!({"code": link.code})), None).await;
    assert_eq!(late.status(), StatusCode::UNAUTHORIZED, "expired");
    // The lifetime can only be shortened: CONTRACT.md's 10 minutes is the most.
    let refused = super::support::shard(&daemon.home, daemon.cwd.path())
        .args(["daemon", "--port", "0", "--enroll-code-ttl", "601"])
        .output()
        .await
        .expect("run");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--enroll-code-ttl"));
}
