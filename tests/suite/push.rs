//! Web Push subscriptions (docs/NOTIFICATIONS.md): the daemon's VAPID key,
//! and subscribing and unsubscribing a browser session, with what `/pair`
//! needs and only to a push service on the public internet.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, ORIGIN};
use serde_json::{Value, json};

use super::client::Browser;
use super::support::{Daemon, shard};

/// A subscription as `PushSubscription.toJSON()` gives it to the page.
fn subscription(endpoint: &str) -> Value {
    let browser = p256::SecretKey::from_slice(&[5u8; 32]).expect("a scalar");
    let point = browser.public_key().to_encoded_point(false);
    json!({
        "endpoint": endpoint,
        "expirationTime": null,
        "keys": {"p256dh": URL_SAFE_NO_PAD.encode(point.as_bytes()), "auth": URL_SAFE_NO_PAD.encode([9u8; 16])},
    })
}

/// A `POST` to a push route as the page sends it, with the browser's
/// credentials (or not) and the page's Origin (or another).
async fn post(
    daemon: &Daemon,
    path: &str,
    browser: Option<&Browser>,
    origin: &str,
    body: &Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(daemon.url(path))
        .header(ORIGIN, origin)
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string());
    if let Some(browser) = browser {
        request =
            request.header(COOKIE, &browser.cookie).header("shard-browser-secret", &browser.secret);
    }
    request.send().await.expect("POST")
}

async fn public_key(daemon: &Daemon, browser: &Browser) -> String {
    let response = reqwest::Client::new()
        .get(daemon.url("/push/key"))
        .header(COOKIE, &browser.cookie)
        .header("shard-browser-secret", &browser.secret)
        .send()
        .await
        .expect("GET /push/key");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
    let answer: Value = response.json().await.expect("json");
    answer["public_key"].as_str().expect("public_key").to_owned()
}

async fn sessions_list(daemon: &Daemon) -> String {
    let output = shard(&daemon.home, daemon.cwd.path())
        .args(["sessions", "list"])
        .output()
        .await
        .expect("shard sessions list");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn the_vapid_key_is_made_once_kept_private_and_given_only_to_an_enrolled_browser() {
    let home = tempfile::tempdir().expect("home");
    let log = home.path().join("daemon.log");
    let mut daemon = Daemon::start_with(home.path(), &[], &[], Some(&log)).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let key = public_key(&daemon, &browser).await;
    let point = URL_SAFE_NO_PAD.decode(&key).expect("base64url");
    assert_eq!((point.len(), point[0]), (65, 4), "an uncompressed P-256 point");

    let stranger = reqwest::get(daemon.url("/push/key")).await.expect("GET");
    assert_eq!(stranger.status(), StatusCode::UNAUTHORIZED);

    // The private half: in the home, 0600, and never in what the daemon
    // printed or logged.
    use std::os::unix::fs::PermissionsExt;
    let file = home.path().join("push.json");
    assert_eq!(std::fs::metadata(&file).expect("push.json").permissions().mode() & 0o777, 0o600);
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).unwrap();
    let private = stored["vapid_private_key"].as_str().expect("private key").to_owned();
    let mut printed = String::new();
    while let Ok(line) = daemon.stdout.try_recv() {
        printed.push_str(&line);
    }
    daemon.terminate().await;
    printed.push_str(&std::fs::read_to_string(&log).expect("log"));
    let audit = std::fs::read_to_string(home.path().join("audit.log")).unwrap_or_default();
    for (what, text) in [("printed", &printed), ("audited", &audit)] {
        assert!(!text.contains(&private), "the private key was {what}");
    }

    // The same key after a restart: every subscription is bound to it.
    let daemon = Daemon::start_in(home.path(), &[]).await;
    assert_eq!(public_key(&daemon, &browser).await, key);
}

#[tokio::test]
async fn a_session_subscribes_with_the_checks_of_pair_and_only_to_a_public_push_service() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let good = subscription("https://push.example.com/send/abc123");
    let page = daemon.base.clone();

    // Without credentials, or from another site's page riding on them (400
    // before anything else, as everywhere): refused, nothing kept.
    let refused = post(&daemon, "/push/subscribe", None, &page, &good).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let elsewhere =
        post(&daemon, "/push/subscribe", Some(&browser), "http://evil.example", &good).await;
    assert_eq!(elsewhere.status(), StatusCode::BAD_REQUEST);
    assert!(!sessions_list(&daemon).await.contains("push via"));

    // Endpoints into the user's own network, or not https, and keys that
    // are not RFC 8291's: refused, saying why.
    for (endpoint, why) in [
        ("http://push.example.com/x", "not https"),
        ("https://127.0.0.1:9/x", "not public"),
        ("https://192.168.0.10/x", "not public"),
        ("https://169.254.169.254/latest", "not public"),
        ("https://[::1]/x", "not public"),
        ("https://localhost/x", "not public"),
        ("https://nas.local/x", "not public"),
    ] {
        let body = subscription(endpoint);
        let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &body).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{endpoint}");
        let text = response.text().await.expect("text");
        assert!(text.contains(why), "{endpoint}: {text}");
    }
    // 65 bytes that start as an uncompressed point does, off the curve: no
    // push could ever be encrypted to it.
    let mut off_curve = good.clone();
    off_curve["keys"]["p256dh"] =
        json!(URL_SAFE_NO_PAD.encode([[4u8].as_slice(), &[7u8; 64]].concat()));
    let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &off_curve).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let text = response.text().await.expect("text");
    assert!(text.contains("not an uncompressed point of P-256"), "{text}");
    let mut short_secret = good.clone();
    short_secret["keys"]["auth"] = json!(URL_SAFE_NO_PAD.encode([9u8; 8]));
    let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &short_secret).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert!(!sessions_list(&daemon).await.contains("push via"));

    // A good one is kept and listed by its service's host alone.
    let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &good).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let listed = sessions_list(&daemon).await;
    assert!(listed.contains("push via push.example.com"), "{listed}");
    assert!(!listed.contains("abc123"), "the endpoint is a capability: {listed}");

    // Unsubscribing forgets it.
    let response = post(&daemon, "/push/unsubscribe", Some(&browser), &page, &json!({})).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(!sessions_list(&daemon).await.contains("push via"));
}

#[tokio::test]
async fn a_subscription_ends_with_its_session() {
    let home = tempfile::tempdir().expect("home");
    let daemon = Daemon::start_in(home.path(), &[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let good = subscription("https://push.example.com/send/kept");
    let response = post(&daemon, "/push/subscribe", Some(&browser), &daemon.base, &good).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let store = || std::fs::read_to_string(home.path().join("security.json")).expect("store");
    assert!(store().contains("https://push.example.com/send/kept"));

    let output = shard(&daemon.home, daemon.cwd.path())
        .args(["sessions", "revoke", "--all"])
        .output()
        .await
        .expect("revoke");
    assert!(output.status.success());
    assert!(!store().contains("push.example.com"), "a revoked session keeps no subscription");
    assert!(!sessions_list(&daemon).await.contains("push via"));
}

#[tokio::test]
async fn a_local_address_in_another_spelling_is_no_push_service() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let page = daemon.base.clone();
    for endpoint in [
        // IPv6 that embeds a private or loopback IPv4: judged by the IPv4.
        "https://[64:ff9b::7f00:1]/x",
        "https://[64:ff9b::a00:1]/x",
        "https://[::127.0.0.1]/x",
        "https://[::ffff:10.0.0.1]/x",
        "https://[::ffff:0:a00:1]/x",
        "https://[2002:a00:1::1]/x",
        "https://[2002:c0a8:101::1]/x",
        // Special-purpose IPv6: site-local, local-use NAT64, discard,
        // Teredo and the IETF's, documentation, SRv6.
        "https://[fec0::1]/x",
        "https://[64:ff9b:1::a00:1]/x",
        "https://[100::1]/x",
        "https://[2001::1]/x",
        "https://[3fff::1]/x",
        "https://[5f00::1]/x",
        // Special-purpose IPv4: benchmarking, IETF protocol assignments,
        // the 6to4 relay, AS112, multicast, reserved.
        "https://198.18.0.1/x",
        "https://198.19.255.1/x",
        "https://192.0.0.8/x",
        "https://192.88.99.1/x",
        "https://192.175.48.1/x",
        "https://224.0.0.1/x",
        "https://250.1.2.3/x",
    ] {
        let body = subscription(endpoint);
        let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &body).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{endpoint}");
        let text = response.text().await.expect("text");
        assert!(text.contains("not public"), "{endpoint}: {text}");
    }
    assert!(!sessions_list(&daemon).await.contains("push via"));
    // The same forms around a public IPv4 are public.
    for endpoint in ["https://[64:ff9b::808:808]/x", "https://[2002:808:808::1]/x"] {
        let body = subscription(endpoint);
        let response = post(&daemon, "/push/subscribe", Some(&browser), &page, &body).await;
        assert_eq!(response.status(), StatusCode::NO_CONTENT, "{endpoint}");
    }
}

#[tokio::test]
async fn the_test_flag_that_lifts_the_push_guards_warns_and_is_audited() {
    let home = tempfile::tempdir().expect("home");
    let stderr = home.path().join("stderr.log");
    let daemon = Daemon::start_with(
        &home.path().join("home"),
        &["--insecure-push-endpoints"],
        &[],
        Some(&stderr),
    )
    .await;
    let warned = std::fs::read_to_string(&stderr).expect("stderr");
    assert!(
        warned.contains("--insecure-push-endpoints") && warned.contains("local network"),
        "{warned}"
    );
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    let startup: Value = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|record| record["event"] == "startup")
        .expect("a startup record");
    assert_eq!(startup["insecure_push_endpoints"], true, "{startup}");
    assert!(startup["warnings"].to_string().contains("--insecure-push-endpoints"), "{startup}");

    // Without it: neither.
    let other = tempfile::tempdir().expect("home");
    let quiet = other.path().join("stderr.log");
    let daemon = Daemon::start_with(&other.path().join("home"), &[], &[], Some(&quiet)).await;
    let said = std::fs::read_to_string(&quiet).expect("stderr");
    assert!(!said.contains("--insecure-push-endpoints"), "{said}");
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    assert!(!audit.contains("--insecure-push-endpoints"), "{audit}");
    assert!(audit.contains("\"insecure_push_endpoints\":false"), "{audit}");
}
