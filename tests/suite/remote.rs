//! Remote access (PROTOCOL.md §4.1.2, CONTRACT.md): every startup refusal,
//! direct non-loopback mode on a second loopback address, the trusted-proxy
//! mode with forwarded headers from the upstream and from anyone else, the
//! scheme-driven cookie, session administration and expiry, rate limits, the
//! audit log and log hygiene.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, ORIGIN, SET_COOKIE};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::client::{Client, Ended};
use super::support::{Daemon, free_port, shard};

/// A client that reaches `host` at `ip:port`, from `local` when given.
fn http(host: &str, ip: &str, port: u16, local: Option<&str>) -> reqwest::Client {
    let mut builder =
        reqwest::Client::builder().resolve(host, format!("{ip}:{port}").parse().expect("addr"));
    if let Some(local) = local {
        builder = builder.local_address(local.parse::<std::net::IpAddr>().expect("ip"));
    }
    builder.build().expect("client")
}

pub(super) async fn new_code(daemon: &Daemon) -> String {
    let output =
        shard(&daemon.home, daemon.cwd.path()).arg("enroll").output().await.expect("enroll");
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .split("#enroll=")
        .nth(1)
        .expect("code")
        .to_owned()
}

fn set_cookie(response: &reqwest::Response) -> String {
    response.headers()[SET_COOKIE].to_str().expect("ascii").to_owned()
}

#[tokio::test]
async fn unsafe_or_malformed_flags_are_refused_before_binding() {
    let cases: &[(&[&str], &str)] = &[
        (&["--web-host", "127.0.0.2"], "--public-host"),
        (&["--web-host", "127.0.0.2", "--public-host", "a.test:8787"], "--allowed-origin"),
        (
            &[
                "--web-host",
                "127.0.0.2",
                "--public-host",
                "a.test:8787",
                "--allowed-origin",
                "http://a.test:8787",
            ],
            "--allow-insecure-remote",
        ),
        (&["--web-host", "shard.example.com"], "--web-host"),
        (
            &[
                "--trust-proxy",
                "10.0.0.0/8",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://a.test",
            ],
            "--trust-proxy",
        ),
        (
            &[
                "--trust-proxy",
                "proxy.internal",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://a.test",
            ],
            "--trust-proxy",
        ),
        (&["--trust-proxy", "loopback", "--allowed-origin", "https://a.test"], "--public-host"),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test",
                "--allowed-origin",
                "https://a.test",
            ],
            "--public-host",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "https://a.test:443",
                "--allowed-origin",
                "https://a.test",
            ],
            "--public-host",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://*.a.test",
            ],
            "--allowed-origin",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "null",
            ],
            "--allowed-origin",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://a.test/",
            ],
            "--allowed-origin",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://a.test/app",
            ],
            "--allowed-origin",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "http://a.test",
            ],
            "--allow-insecure-remote",
        ),
        (
            &[
                "--trust-proxy",
                "loopback",
                "--public-host",
                "a.test:443",
                "--allowed-origin",
                "https://a.test",
                "--allow-insecure-remote",
            ],
            "--allow-insecure-remote",
        ),
        (&["--allowed-origin", "http://127.0.0.1:1"], "--allowed-origin"),
        (&["--public-host", "a.test:1"], "--public-host"),
        (&["--allow-insecure-remote"], "--allow-insecure-remote"),
        (&["--forwarded-host-header", "not a header"], "--forwarded-host-header"),
    ];
    let parent = TempDir::new().expect("parent");
    for (args, flag) in cases {
        let home = parent.path().join("never-created");
        let output =
            shard(&home, parent.path()).arg("daemon").args(*args).output().await.expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(flag), "{args:?}: stderr does not name {flag}: {stderr}");
        assert!(!String::from_utf8_lossy(&output.stdout).contains("listening"), "{args:?} bound");
        assert!(!home.exists(), "{args:?}: nothing is touched before validation");
    }
}

#[tokio::test]
async fn direct_mode_pins_the_public_host_and_warns_about_plaintext() {
    let home = TempDir::new().expect("home");
    let stderr = home.path().join("stderr.log");
    let port = free_port("127.0.0.2");
    let public = format!("shard.test:{port}");
    let origin = format!("http://shard.test:{port}");
    let daemon = Daemon::start_with(
        &home.path().join("home"),
        &[
            "--web-host",
            "127.0.0.2",
            "--port",
            &port.to_string(),
            "--public-host",
            &public,
            "--allowed-origin",
            &origin,
            "--allow-insecure-remote",
        ],
        &[],
        Some(&stderr),
    )
    .await;
    assert_eq!(daemon.base, format!("http://127.0.0.2:{port}"));
    assert!(daemon.enroll_url.starts_with(&format!("{origin}/#enroll=")), "{}", daemon.enroll_url);
    let warnings = std::fs::read_to_string(&stderr).expect("stderr");
    assert!(warnings.contains("plain http") && warnings.contains("cookie"), "{warnings}");

    let client = http("shard.test", "127.0.0.2", port, None);
    let url = |path: &str| format!("http://shard.test:{port}{path}");
    assert_eq!(client.get(url("/")).send().await.expect("GET").status(), StatusCode::OK);
    // Loopback names are not this daemon's any more.
    let loopback =
        reqwest::Client::new().get(format!("http://127.0.0.2:{port}/")).send().await.expect("GET");
    assert_eq!(loopback.status(), StatusCode::BAD_REQUEST, "the address itself as Host");
    let code = daemon.enroll_code();
    let body = json!({"code": code}).to_string();
    let wrong_origin = client
        .post(url("/enroll"))
        .header(ORIGIN, format!("http://127.0.0.1:{port}"))
        .header(CONTENT_TYPE, "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("POST");
    assert_eq!(wrong_origin.status(), StatusCode::BAD_REQUEST, "the loopback Origin");
    let enrolled = client
        .post(url("/enroll"))
        .header(ORIGIN, &origin)
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .expect("POST");
    assert_eq!(enrolled.status(), StatusCode::OK);
    let cookie = set_cookie(&enrolled);
    assert!(
        cookie.starts_with("shard_session=") && !cookie.contains("Secure"),
        "plain http: {cookie}"
    );
    let pair = cookie.split(';').next().expect("pair").to_owned();
    let ticket: Value = client
        .post(url("/bootstrap"))
        .header(ORIGIN, &origin)
        .header(COOKIE, &pair)
        .send()
        .await
        .expect("POST")
        .json()
        .await
        .expect("json");
    let ticket = ticket["ticket"].as_str().expect("ticket");
    let mut request = format!("ws://127.0.0.2:{port}/ws").into_client_request().expect("request");
    request.headers_mut().insert("host", public.parse().expect("header"));
    request.headers_mut().insert("origin", origin.parse().expect("header"));
    request.headers_mut().insert(
        "sec-websocket-protocol",
        format!("shard.v1, shard.ticket.{ticket}").parse().expect("header"),
    );
    let (_socket, response) = tokio_tungstenite::connect_async(request).await.expect("upgrade");
    assert_eq!(response.status(), 101);
}

/// A request through the "proxy": from `local`, with forwarded headers.
fn proxied(
    client: &reqwest::Client,
    port: u16,
    path: &str,
    forwarded: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    proxied_as(client, port, path, "shard.test", forwarded)
}

/// The same with an explicit Host (`shard.test:443` stays the public host
/// even when the effective scheme is http).
fn proxied_as(
    client: &reqwest::Client,
    port: u16,
    path: &str,
    host: &str,
    forwarded: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(format!("http://127.0.0.1:{port}{path}"))
        .header("host", host)
        .header(ORIGIN, "https://shard.test");
    for (name, value) in forwarded {
        request = request.header(*name, *value);
    }
    request
}

/// A daemon on loopback behind a "proxy" on loopback, public as
/// `https://shard.test`: its home (kept alive), port and handle.
async fn behind_a_proxy() -> (TempDir, u16, Daemon) {
    let home = TempDir::new().expect("home");
    let port = free_port("127.0.0.1");
    let daemon = Daemon::start_with(
        &home.path().join("home"),
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
    (home, port, daemon)
}

const HTTPS: &[(&str, &str)] =
    &[("x-forwarded-proto", "https"), ("x-forwarded-host", "shard.test")];

#[tokio::test]
async fn a_trusted_proxy_makes_the_scheme_https_and_the_cookie_secure() {
    let (_home, port, daemon) = behind_a_proxy().await;
    assert!(daemon.enroll_url.starts_with("https://shard.test/#enroll="), "{}", daemon.enroll_url);
    let upstream = reqwest::Client::new();
    let code = daemon.enroll_code();
    let enrolled = proxied(&upstream, port, "/enroll", HTTPS)
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"code": code}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(enrolled.status(), StatusCode::OK);
    let cookie = set_cookie(&enrolled);
    assert!(cookie.starts_with("__Host-shard_session="), "{cookie}");
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    assert!(!cookie.contains("Domain"));
    // It outlives the browser: the idle window (7 days) is the nearer end.
    assert_eq!(super::client::max_age(&cookie), Some(7 * 24 * 3600), "{cookie}");
    let pair = cookie.split(';').next().expect("pair").to_owned();
    let ok = proxied(&upstream, port, "/bootstrap", HTTPS)
        .header(COOKIE, &pair)
        .send()
        .await
        .expect("POST");
    assert_eq!(ok.status(), StatusCode::OK);
    // Use renews it, still in its `__Host-` form.
    let renewed = set_cookie(&ok);
    assert!(renewed.starts_with(&format!("{pair};")), "{renewed}");
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(renewed.contains(attribute), "{renewed} lacks {attribute}");
    }
    assert!(!renewed.contains("Domain"));
    assert_eq!(super::client::max_age(&renewed), Some(7 * 24 * 3600), "{renewed}");
    // `shard.test:443` is the same https host.
    let explicit_port = proxied(
        &upstream,
        port,
        "/bootstrap",
        &[("x-forwarded-proto", "https"), ("x-forwarded-host", "shard.test:443")],
    )
    .header(COOKIE, &pair)
    .send()
    .await
    .expect("POST");
    assert_eq!(explicit_port.status(), StatusCode::OK);
    // A plain-named cookie planted before it (by a page on plain http, say)
    // shadows nothing: over https only the `__Host-` name is read.
    let shadowed = proxied(&upstream, port, "/bootstrap", HTTPS)
        .header(COOKIE, format!("shard_session=planted; {pair}"))
        .send()
        .await
        .expect("POST");
    assert_eq!(shadowed.status(), StatusCode::OK);
    // Behind TLS the `__Host-` cookie stands alone; a browser secret sent
    // anyway must be the session's own.
    let wrong_secret = proxied(&upstream, port, "/bootstrap", HTTPS)
        .header(COOKIE, &pair)
        .header("shard-browser-secret", "not-the-secret")
        .send()
        .await
        .expect("POST");
    assert_eq!(wrong_secret.status(), StatusCode::UNAUTHORIZED);
    // The Secure cookie over a request whose effective scheme is http.
    let plain = proxied_as(
        &upstream,
        port,
        "/bootstrap",
        "shard.test:443",
        &[("x-forwarded-host", "shard.test:443")],
    )
    .header(COOKIE, &pair)
    .send()
    .await
    .expect("POST");
    assert_eq!(plain.status(), StatusCode::UNAUTHORIZED);

    // The forwarded host is only cross-checked: a mismatch, a duplicate, a
    // list or an empty value is a 400.
    for forwarded in [
        vec![("x-forwarded-proto", "https"), ("x-forwarded-host", "evil.test")],
        vec![
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "shard.test"),
            ("x-forwarded-host", "shard.test"),
        ],
        vec![("x-forwarded-proto", "https"), ("x-forwarded-host", "shard.test, evil.test")],
        vec![("x-forwarded-proto", "https"), ("x-forwarded-host", "")],
    ] {
        let response = proxied(&upstream, port, "/bootstrap", &forwarded)
            .header(COOKIE, &pair)
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{forwarded:?}");
    }
    // The Host is never derived from the forwarded host.
    let wrong_host = upstream
        .post(format!("http://127.0.0.1:{port}/bootstrap"))
        .header("host", format!("127.0.0.1:{port}"))
        .header(ORIGIN, "https://shard.test")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "shard.test")
        .header(COOKIE, &pair)
        .send()
        .await
        .expect("POST");
    assert_eq!(wrong_host.status(), StatusCode::BAD_REQUEST);

    // From a peer that is not the upstream, forwarded headers mean nothing:
    // the request is plain http, so no Secure cookie is issued or honored.
    let stranger = http("shard.test", "127.0.0.1", port, Some("127.0.0.2"));
    let ignored = proxied_as(&stranger, port, "/bootstrap", "shard.test:443", HTTPS)
        .header(COOKIE, &pair)
        .send()
        .await
        .expect("POST");
    assert_eq!(ignored.status(), StatusCode::UNAUTHORIZED);
    let code = new_code(&daemon).await;
    let plain_enroll = proxied_as(&stranger, port, "/enroll", "shard.test:443", HTTPS)
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"code": code}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(plain_enroll.status(), StatusCode::OK);
    let plain_cookie = set_cookie(&plain_enroll);
    assert!(
        plain_cookie.starts_with("shard_session=") && !plain_cookie.contains("Secure"),
        "{plain_cookie}"
    );
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    assert!(audit.contains("\"forwarded_headers_ignored\""), "{audit}");
    assert!(audit.contains("\"mode\":\"proxy\""));
}

#[tokio::test]
async fn forwarded_header_names_are_configurable() {
    let home = TempDir::new().expect("home");
    let port = free_port("127.0.0.1");
    let daemon = Daemon::start_with(
        &home.path().join("home"),
        &[
            "--port",
            &port.to_string(),
            "--trust-proxy",
            "127.0.0.1",
            "--public-host",
            "shard.test:443",
            "--allowed-origin",
            "https://shard.test",
            "--forwarded-proto-header",
            "X-Edge-Scheme",
            "--forwarded-host-header",
            "X-Edge-Host",
        ],
        &[],
        None,
    )
    .await;
    let upstream = reqwest::Client::new();
    let code = daemon.enroll_code();
    // The default names are not read any more: plain http.
    let defaults = proxied_as(&upstream, port, "/enroll", "shard.test:443", HTTPS)
        .header(CONTENT_TYPE, "application/json")
        .body(json!({"code": code}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(defaults.status(), StatusCode::OK);
    assert!(!set_cookie(&defaults).contains("Secure"));
    let code = new_code(&daemon).await;
    let renamed = proxied(
        &upstream,
        port,
        "/enroll",
        &[("x-edge-scheme", "https"), ("x-edge-host", "shard.test")],
    )
    .header(CONTENT_TYPE, "application/json")
    .body(json!({"code": code}).to_string())
    .send()
    .await
    .expect("POST");
    assert!(set_cookie(&renamed).starts_with("__Host-shard_session="));
}

async fn enrolled_loopback(daemon: &Daemon) -> super::client::Browser {
    super::client::Browser::enroll(daemon, &new_code(daemon).await).await
}

async fn sessions_cli(daemon: &Daemon, args: &[&str]) -> String {
    let output = shard(&daemon.home, daemon.cwd.path())
        .arg("sessions")
        .args(args)
        .output()
        .await
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn sessions_are_listed_and_revoking_one_closes_its_sockets() {
    let daemon = Daemon::start(&[]).await;
    let mine = enrolled_loopback(&daemon).await;
    let theirs = enrolled_loopback(&daemon).await;
    let browser = &mine;
    let mut socket = browser.connect(&daemon).await;
    let listed = sessions_cli(&daemon, &["list"]).await;
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    let open = lines.iter().find(|line| line.ends_with("1 open")).expect("the connected session");
    let session_id = open.split_whitespace().next().expect("id").to_owned();
    assert!(session_id.starts_with("session-"));
    assert!(
        !listed.contains(mine.cookie.trim_start_matches("shard_session=")),
        "no token in the listing"
    );
    assert!(!listed.contains(&mine.secret), "no secret in the listing");

    let revoked = sessions_cli(&daemon, &["revoke", &session_id]).await;
    assert_eq!(revoked.trim(), format!("revoked {session_id}"));
    match socket.ended().await {
        Ended::Closed(code, reason) => {
            assert_eq!((code, reason.as_str()), (1008, "session revoked"))
        }
        Ended::Eof => panic!("closed without a reason"),
    }
    assert_eq!(mine.bootstrap(&daemon).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(theirs.bootstrap(&daemon).await.status(), StatusCode::OK);
    sessions_cli(&daemon, &["revoke", "--all"]).await;
    assert_eq!(theirs.bootstrap(&daemon).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(sessions_cli(&daemon, &["list"]).await.trim(), "no browser sessions");
    let unknown = shard(&daemon.home, daemon.cwd.path())
        .args(["sessions", "revoke", "session-nope"])
        .output()
        .await
        .expect("run");
    assert!(!unknown.status.success());
    // Session administration is local: a browser cannot do it.
    let mut web = enrolled_loopback(&daemon).await.connect(&daemon).await;
    let refused = web.call("s", json!({"type": "daemon.sessions"})).await;
    assert_eq!(refused["error"]["code"], "PERMISSION_DENIED");
}

#[tokio::test]
async fn idle_sessions_expire() {
    let daemon = Daemon::start(&["--session-idle-timeout", "1"]).await;
    let browser = enrolled_loopback(&daemon).await;
    assert_eq!(browser.bootstrap(&daemon).await.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(browser.bootstrap(&daemon).await.status(), StatusCode::UNAUTHORIZED);
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    assert!(audit.contains("\"session_expired\""), "{audit}");
}

#[tokio::test]
async fn an_open_socket_closes_when_its_session_expires() {
    for lifetime in ["--session-idle-timeout", "--session-max-age"] {
        let daemon = Daemon::start(&[lifetime, "2"]).await;
        let browser = enrolled_loopback(&daemon).await;
        let mut web = browser.connect(&daemon).await;
        // Well before the expiry the socket works.
        let listed = web.call("l", json!({"type": "agent.list"})).await;
        assert_eq!(listed["success"], true, "{listed}");
        match web.ended().await {
            Ended::Closed(_, reason) => assert!(reason.contains("expired"), "{lifetime}: {reason}"),
            Ended::Eof => panic!("{lifetime}: closed without a reason"),
        }
        assert_eq!(sessions_cli(&daemon, &["list"]).await.trim(), "no browser sessions");
        let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
        assert!(audit.contains("\"session_expired\""), "{audit}");
    }
}

#[tokio::test]
async fn behind_the_trusted_proxy_failures_count_against_the_client_it_names() {
    let (_home, port, daemon) = behind_a_proxy().await;
    let upstream = reqwest::Client::new();
    let enroll = |code: String, client: &str| {
        // What the client wrote comes first; the proxy appends the peer.
        let forwarded = format!("198.51.100.1, {client}");
        let request = proxied(&upstream, port, "/enroll", HTTPS)
            .header("x-forwarded-for", forwarded)
            .header(CONTENT_TYPE, "application/json")
            .body(json!({"code": code}).to_string());
        async move { request.send().await.expect("POST").status() }
    };
    for attempt in 0..10 {
        assert_eq!(enroll(format!("wrong-{attempt}"), "203.0.113.9").await, 401);
    }
    assert_eq!(enroll("wrong".into(), "203.0.113.9").await, 429, "that client is limited");
    // Everyone else behind the same proxy is not: the owner enrolls.
    assert_eq!(enroll(new_code(&daemon).await, "203.0.113.10").await, 200);
    // A guess spread over many clients is limited in all: after 100 wrong
    // codes in a minute, nobody enrolls until the minute has passed.
    let mut statuses = Vec::new();
    for attempt in 0..90u32 {
        let client = format!("192.0.2.{attempt}");
        statuses.push(enroll(format!("wrong-{attempt}"), &client).await);
    }
    assert!(statuses.iter().all(|&status| status == 401), "{statuses:?}");
    assert_eq!(enroll(new_code(&daemon).await, "203.0.113.11").await, 429);
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test]
async fn the_audit_log_and_the_logs_hold_no_secret() {
    use std::os::unix::fs::PermissionsExt;
    let home = TempDir::new().expect("home");
    let stderr = home.path().join("stderr.log");
    let daemon = Daemon::start_with(
        &home.path().join("home"),
        &[],
        &[("SHARD_LOG", "trace")],
        Some(&stderr),
    )
    .await;
    let first_code = daemon.enroll_code();
    let response =
        super::client::post(&daemon, "/enroll", Some(json!({"code": first_code})), None).await;
    let cookie = set_cookie(&response).split(';').next().expect("pair").to_owned();
    let token = cookie.trim_start_matches("shard_session=").to_owned();
    let answer: Value = response.json().await.expect("json");
    let secret = answer["browser_secret"].as_str().expect("browser secret").to_owned();
    let browser = super::client::Browser { cookie, secret: secret.clone() };
    let ticket: Value = browser.bootstrap(&daemon).await.json().await.expect("json");
    let ticket = ticket["ticket"].as_str().expect("ticket").to_owned();
    let socket =
        super::client::connect_ws(&daemon, Some(&ticket), &daemon.base).await.expect("upgrade");
    drop(socket);
    let replayed = super::client::connect_ws(&daemon, Some(&ticket), &daemon.base).await;
    assert!(replayed.is_err());
    let wrong = super::client::post(
        &daemon,
        "/enroll",
        Some(json!({"code": "WrongCodeWrongCode12"})),
        None,
    )
    .await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let evil = reqwest::Client::new()
        .post(daemon.url("/bootstrap"))
        .header(ORIGIN, "http://evil.test")
        .send()
        .await
        .expect("POST");
    assert_eq!(evil.status(), StatusCode::BAD_REQUEST);
    let mut client = Client::unix(&daemon.socket()).await;
    let listed = client.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);

    let audit_path = daemon.home.join("audit.log");
    assert_eq!(std::fs::metadata(&audit_path).expect("audit").permissions().mode() & 0o777, 0o600);
    let audit = read(&audit_path);
    for event in ["startup", "enrolled", "enroll_failed", "request_rejected", "upgrade_rejected"] {
        assert!(audit.contains(&format!("\"event\":\"{event}\"")), "no {event} in {audit}");
    }
    for line in audit.lines() {
        serde_json::from_str::<Value>(line).expect("JSON lines");
    }
    let logs = read(&stderr);
    assert!(logs.len() > 100, "trace logging was on");
    for (name, secret) in [
        ("code", first_code.as_str()),
        ("cookie", token.as_str()),
        ("ticket", ticket.as_str()),
        ("browser secret", secret.as_str()),
    ] {
        assert!(!audit.contains(secret), "the audit log holds the {name}");
        assert!(!logs.contains(secret), "the logs hold the {name}");
    }
    assert!(!logs.contains("WrongCodeWrongCode12"), "not even a wrong code");
}
