//! Browser security on loopback, request by request (CONTRACT.md "HTTP
//! routes", "WebSocket upgrade"): each rejection with its status code.

use reqwest::StatusCode;
use reqwest::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, ORIGIN, RETRY_AFTER, SET_COOKIE,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::client::{Browser, Client, Ended, connect_ws, max_age, post};
use super::support::Daemon;

/// Sends a raw HTTP/1.1 request and returns the status code.
async fn raw(daemon: &Daemon, request: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(daemon.host()).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = vec![0; 1024];
    let read = stream.read(&mut response).await.expect("read");
    let head = String::from_utf8_lossy(&response[..read]);
    head.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn host_checks_come_first_and_are_exact() {
    let daemon = Daemon::start(&[]).await;
    let host = daemon.host();
    let port = host.rsplit(':').next().expect("port");
    assert_eq!(raw(&daemon, &format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n")).await, 200);
    for bad in [
        format!("localhost:{port}"),
        format!("127.0.0.2:{port}"),
        "127.0.0.1".to_owned(),
        format!("evil.example:{port}"),
        format!("127.0.0.1:{port}.evil.example"),
        // Malformed (CONTRACT.md): dropping the default `:80` must not make
        // these the expected host.
        format!("127.0.0.1:{port}:80"),
        format!("127.0.0.1:{port}:"),
        format!("127.0.0.1:{port}:{port}"),
        format!("user@127.0.0.1:{port}"),
        format!("127.0.0.1:+{port}"),
        format!("127.0.0.1:{port}/"),
        format!("[127.0.0.1]:{port}"),
    ] {
        let status = raw(&daemon, &format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n")).await;
        assert_eq!(status, 400, "Host {bad}");
    }
    let duplicate =
        raw(&daemon, &format!("GET / HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\n\r\n")).await;
    assert_eq!(duplicate, 400, "two Host headers");
    let absolute =
        raw(&daemon, &format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\n\r\n")).await;
    assert_eq!(absolute, 400, "absolute-form target");
    // Even the bundle is refused under another name.
    let status =
        raw(&daemon, &format!("GET /pkg/shard.js HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"))
            .await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn state_changing_requests_need_an_allowed_origin() {
    let daemon = Daemon::start(&[]).await;
    let code = daemon.enroll_code();
    let client = reqwest::Client::new();
    let body = json!({"code": code}).to_string();
    // The daemon's own origin with a second, default port: dropping `:80`
    // used to make it the allowed origin (found by fuzz/http_names).
    let two_ports = format!("{}:80", daemon.base);
    let origins = [
        None,
        Some("http://evil.example"),
        Some("null"),
        Some("http://localhost:1"),
        Some(&two_ports),
    ];
    for origin in origins {
        let mut request = client
            .post(daemon.url("/enroll"))
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(origin) = origin {
            request = request.header(ORIGIN, origin);
        }
        let response = request.send().await.expect("POST");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "Origin {origin:?}");
        assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
    }
    // The code was not consumed by those: it still enrolls.
    Browser::enroll(&daemon, &code).await;
}

#[tokio::test]
async fn enrollment_sets_a_strict_cookie_once_per_code() {
    let daemon = Daemon::start(&[]).await;
    let code = daemon.enroll_code();
    let response = post(&daemon, "/enroll", Some(json!({"code": code})), None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[CACHE_CONTROL], "no-store");
    let cookie = response.headers()[SET_COOKIE].to_str().expect("ascii").to_owned();
    assert!(cookie.starts_with("shard_session="), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
    assert!(!cookie.contains("Secure") && !cookie.contains("Domain"), "{cookie}");
    let body: serde_json::Value = response.json().await.expect("json");
    assert!(body["principal_id"].as_str().unwrap_or("").starts_with("principal-"));
    let again = post(&daemon, "/enroll", Some(json!({"code": code})), None).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED, "single use");
    assert!(again.headers().get(SET_COOKIE).is_none());

    // Wrong content type, wrong method.
    let text = reqwest::Client::new()
        .post(daemon.url("/enroll"))
        .header(ORIGIN, &daemon.base)
        .header(CONTENT_TYPE, "text/plain")
        .body(json!({"code": "x"}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(text.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    for path in ["/enroll", "/bootstrap", "/logout"] {
        let response = reqwest::get(daemon.url(path)).await.expect("GET");
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED, "GET {path}");
    }
}

#[tokio::test]
async fn wrong_codes_are_rate_limited_by_peer_address() {
    let daemon = Daemon::start(&[]).await;
    for attempt in 0..10 {
        let response =
            post(&daemon, "/enroll", Some(json!({"code": format!("wrong-{attempt}")})), None).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let limited = reqwest::Client::new()
        .post(daemon.url("/enroll"))
        .header(ORIGIN, &daemon.base)
        .header(CONTENT_TYPE, "application/json")
        .header("X-Forwarded-For", "203.0.113.9") // never changes the key
        .body(json!({"code": daemon.enroll_code()}).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 =
        limited.headers()[RETRY_AFTER].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&wait));
}

#[tokio::test]
async fn wrong_codes_in_flight_together_are_limited_like_sequential_ones() {
    let daemon = Daemon::start(&[]).await;
    let attempts = (0..40).map(|attempt| {
        let daemon = &daemon;
        async move {
            post(daemon, "/enroll", Some(json!({"code": format!("wrong-{attempt}")})), None)
                .await
                .status()
        }
    });
    let statuses = futures_util::future::join_all(attempts).await;
    let checked = statuses.iter().filter(|&&status| status == StatusCode::UNAUTHORIZED).count();
    let limited =
        statuses.iter().filter(|&&status| status == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!((checked, limited), (10, 30), "{statuses:?}");
}

#[tokio::test]
async fn a_live_session_is_never_rate_limited_however_often_it_comes() {
    // Sockets close as fast as they open here; the per-session cap is not
    // what this test is about.
    let daemon = Daemon::start(&["--max-session-connections", "1000"]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    // A dashboard reconnecting its tabs: far more than ten a minute.
    for round in 0..80 {
        let ticket = browser.ticket(&daemon).await;
        let socket = connect_ws(&daemon, Some(&ticket), &daemon.base).await;
        assert!(socket.is_ok(), "upgrade {round}: {:?}", socket.map(|_| ()));
    }
}

#[tokio::test]
async fn dead_credentials_are_limited_per_client_and_never_lock_the_owner_out() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    for attempt in 0..6 {
        let forged = format!("shard_session=forged-{attempt}");
        let refused = post(&daemon, "/bootstrap", None, Some(&forged)).await;
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    }
    for attempt in 0..4 {
        let refused = connect_ws(&daemon, Some(&format!("forged{attempt}")), &daemon.base).await;
        assert_eq!(ws_status(refused).await, 401);
    }
    // Ten failures in a minute: the eleventh, of either kind, is 429.
    let limited = post(&daemon, "/bootstrap", None, Some("shard_session=forged")).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.headers()[RETRY_AFTER].to_str().expect("ascii").parse::<u64>().is_ok());
    assert_eq!(ws_status(connect_ws(&daemon, Some("forged"), &daemon.base).await).await, 429);
    // The owner, from the same address, is not limited at all.
    let ticket = browser.ticket(&daemon).await;
    assert!(connect_ws(&daemon, Some(&ticket), &daemon.base).await.is_ok());
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    assert!(audit.contains("\"rate_limited\""), "{audit}");
}

#[tokio::test]
async fn one_session_cannot_take_every_connection_slot() {
    let daemon = Daemon::start(&["--max-session-connections", "2"]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let raw = async || {
        let ticket = browser.ticket(&daemon).await;
        connect_ws(&daemon, Some(&ticket), &daemon.base).await.expect("upgrade")
    };
    let first = raw().await;
    let _second = raw().await;
    let third = connect_ws(&daemon, Some(&browser.ticket(&daemon).await), &daemon.base).await;
    assert_eq!(ws_status(third).await, 503);
    // Another browser still gets in.
    let other = Browser::enroll(&daemon, &super::remote::new_code(&daemon).await).await;
    let _other = other.connect(&daemon).await;
    // A closed socket gives its slot back.
    drop(first);
    let mut reopened = None;
    for _ in 0..50 {
        let ticket = browser.ticket(&daemon).await;
        match connect_ws(&daemon, Some(&ticket), &daemon.base).await {
            Ok(socket) => {
                reopened = Some(socket);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    assert!(reopened.is_some(), "the closed socket's slot was never given back");
}

#[tokio::test]
async fn bootstrap_needs_a_live_plain_cookie() {
    let daemon = Daemon::start(&[]).await;
    assert_eq!(post(&daemon, "/bootstrap", None, None).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        post(&daemon, "/bootstrap", None, Some("shard_session=forged")).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let token = browser.cookie.trim_start_matches("shard_session=");
    // The Secure form over plain http is refused (§4.1.2 D4).
    let secure =
        post(&daemon, "/bootstrap", None, Some(&format!("__Host-shard_session={token}"))).await;
    assert_eq!(secure.status(), StatusCode::UNAUTHORIZED);
    // The cookie alone is not enough on loopback (it reaches every port of
    // 127.0.0.1): the page's browser secret must come with it.
    let alone = post(&daemon, "/bootstrap", None, Some(&browser.cookie)).await;
    assert_eq!(alone.status(), StatusCode::UNAUTHORIZED);
    let wrong = Browser { cookie: browser.cookie.clone(), secret: "x".repeat(43) };
    assert_eq!(wrong.bootstrap(&daemon).await.status(), StatusCode::UNAUTHORIZED);
    let other = Browser::enroll(&daemon, &super::remote::new_code(&daemon).await).await;
    let swapped = Browser { cookie: browser.cookie.clone(), secret: other.secret.clone() };
    assert_eq!(
        swapped.bootstrap(&daemon).await.status(),
        StatusCode::UNAUTHORIZED,
        "another browser's secret"
    );
    let ok = browser.bootstrap(&daemon).await;
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(ok.headers()[CACHE_CONTROL], "no-store");
    let body: serde_json::Value = ok.json().await.expect("json");
    assert_eq!(body["protocol"], "shard.v1");
    assert!(body["expires_in_ms"].as_u64().is_some_and(|ms| ms > 0 && ms <= 60_000));
    let ticket = body["ticket"].as_str().expect("ticket");
    assert!(
        ticket.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'),
        "base64url: {ticket}"
    );
}

/// The cookie and its lifetime, as the answer set them.
fn session_cookie(response: &reqwest::Response) -> (String, i64) {
    let set = response.headers()[SET_COOKIE].to_str().expect("ascii").to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set} lacks {attribute}");
    }
    assert!(!set.contains("Secure") && !set.contains("Domain"), "{set}");
    let seconds =
        max_age(&set).unwrap_or_else(|| panic!("{set} has no Max-Age: it dies with the browser"));
    (set.split(';').next().expect("pair").to_owned(), seconds)
}

#[tokio::test]
async fn the_session_cookie_outlives_the_browser_and_is_renewed_by_use() {
    // Idle window 4 s, absolute end an hour away: the cookie lasts the idle
    // window, and each /bootstrap moves it.
    let daemon = Daemon::start(&["--session-idle-timeout", "4", "--session-max-age", "3600"]).await;
    let code = daemon.enroll_code();
    let enrolled = post(&daemon, "/enroll", Some(json!({"code": code})), None).await;
    assert_eq!(enrolled.status(), StatusCode::OK);
    let (cookie, lifetime) = session_cookie(&enrolled);
    assert_eq!(lifetime, 4, "the idle window");
    let answer: serde_json::Value = enrolled.json().await.expect("json");
    let secret = answer["browser_secret"].as_str().expect("secret").to_owned();
    let browser = Browser { cookie: cookie.clone(), secret };
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    let renewed = browser.bootstrap(&daemon).await;
    assert_eq!(renewed.status(), StatusCode::OK);
    let (same, lifetime) = session_cookie(&renewed);
    assert_eq!(same, cookie, "the same session, only its lifetime renewed");
    assert_eq!(lifetime, 4, "a fresh idle window, not the 1 s left of the first");
    // Past the first window, and the renewed one still holds.
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    assert_eq!(browser.bootstrap(&daemon).await.status(), StatusCode::OK);
    // A refused bootstrap renews nothing.
    let alone = post(&daemon, "/bootstrap", None, Some(&browser.cookie)).await;
    assert_eq!(alone.status(), StatusCode::UNAUTHORIZED);
    assert!(alone.headers().get(SET_COOKIE).is_none());

    // Idle window an hour, absolute end 5 s after enrollment: the cookie
    // never outlives the session's end, however recently it was used.
    let daemon = Daemon::start(&["--session-idle-timeout", "3600", "--session-max-age", "5"]).await;
    let enrolled =
        post(&daemon, "/enroll", Some(json!({"code": daemon.enroll_code()})), None).await;
    let (cookie, lifetime) = session_cookie(&enrolled);
    assert_eq!(lifetime, 5, "the absolute end");
    let answer: serde_json::Value = enrolled.json().await.expect("json");
    let secret = answer["browser_secret"].as_str().expect("secret").to_owned();
    let browser = Browser { cookie, secret };
    tokio::time::sleep(std::time::Duration::from_millis(2200)).await;
    let renewed = browser.bootstrap(&daemon).await;
    assert_eq!(renewed.status(), StatusCode::OK);
    let (_, lifetime) = session_cookie(&renewed);
    assert!((1..=2).contains(&lifetime), "at most what is left of the session: {lifetime}");
}

async fn ws_status(result: Result<impl Sized, tokio_tungstenite::tungstenite::Error>) -> u16 {
    match result {
        Ok(_) => 101,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("unexpected failure: {other}"),
    }
}

#[tokio::test]
async fn websocket_tickets_are_single_use_and_origin_bound() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    assert_eq!(ws_status(connect_ws(&daemon, None, &daemon.base).await).await, 401, "no ticket");
    assert_eq!(
        ws_status(connect_ws(&daemon, Some("forged"), &daemon.base).await).await,
        401,
        "unknown ticket"
    );
    let ticket = browser.ticket(&daemon).await;
    assert_eq!(
        ws_status(connect_ws(&daemon, Some(&ticket), "http://evil.example").await).await,
        400,
        "wrong Origin: 400 first"
    );
    let ticket = browser.ticket(&daemon).await;
    let socket = connect_ws(&daemon, Some(&ticket), &daemon.base).await;
    assert_eq!(ws_status(socket).await, 101);
    assert_eq!(
        ws_status(connect_ws(&daemon, Some(&ticket), &daemon.base).await).await,
        401,
        "replayed"
    );
}

#[tokio::test]
async fn logout_closes_the_sessions_sockets_and_clears_the_cookie() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let other = Browser::enroll(&daemon, &{
        // A second browser, enrolled with a fresh code from `shard enroll`.
        let output = super::support::shard(&daemon.home, daemon.cwd.path())
            .arg("enroll")
            .output()
            .await
            .expect("enroll");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .split("#enroll=")
            .nth(1)
            .expect("code")
            .to_owned()
    })
    .await;
    let mut mine = browser.connect(&daemon).await;
    let mut theirs = other.connect(&daemon).await;
    let response = post(&daemon, "/logout", None, Some(&browser.cookie)).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let cleared = response.headers()[SET_COOKIE].to_str().expect("ascii");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    match mine.ended().await {
        Ended::Closed(code, reason) => {
            assert_eq!(code, 1008);
            assert!(reason.contains("logged out"), "{reason}");
        }
        Ended::Eof => panic!("closed without a reason"),
    }
    assert_eq!(browser.bootstrap(&daemon).await.status(), StatusCode::UNAUTHORIZED);
    // Another browser's socket is untouched.
    let listed = theirs.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true);
    // Logging out without a cookie is fine too.
    assert_eq!(post(&daemon, "/logout", None, None).await.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn html_cannot_be_framed() {
    let daemon = Daemon::start(&[]).await;
    let response = reqwest::Client::new()
        .get(daemon.url("/"))
        .header(HOST, daemon.host())
        .send()
        .await
        .expect("GET");
    assert!(
        response.headers()[CONTENT_SECURITY_POLICY]
            .to_str()
            .expect("ascii")
            .contains("frame-ancestors 'none'")
    );
}

#[tokio::test]
async fn a_client_that_stops_answering_pings_is_dropped() {
    use futures_util::StreamExt;
    let daemon = Daemon::start(&["--ws-ping-interval", "1"]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    // A live client: reading answers pings, so it stays.
    let mut live = browser.connect(&daemon).await;
    // A dead one: connected, then never read again (so no pong is sent).
    let ticket = browser.ticket(&daemon).await;
    let dead = connect_ws(&daemon, Some(&ticket), &daemon.base).await.expect("upgrade");
    let (_sink, mut stream) = dead.split();
    tokio::time::sleep(std::time::Duration::from_millis(4500)).await;
    // Now read what the server sent: pings, then its close. The daemon does
    // not keep a dead client's socket open for it: reading late, the client
    // finds either the close frame or a socket already gone (its reads try
    // to send the pongs it owes first).
    let mut ended = None;
    while let Ok(Some(message)) =
        tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await
    {
        match message {
            Ok(tokio_tungstenite::tungstenite::Message::Close(frame)) => {
                let frame = frame.map(|frame| (u16::from(frame.code), frame.reason.to_string()));
                assert_eq!(
                    frame,
                    Some((1001, "no pong".to_owned())),
                    "the silent client was dropped"
                );
                ended = Some("closed");
                break;
            }
            Ok(_) => {}
            Err(_) => {
                ended = Some("gone");
                break;
            }
        }
    }
    assert!(ended.is_some(), "the silent client was dropped");
    let listed = live.call("l", json!({"type": "agent.list"})).await;
    assert_eq!(listed["success"], true, "the answering client is still there");
}

#[tokio::test]
async fn the_page_allows_only_its_own_scripts_and_the_one_it_signs() {
    let daemon = Daemon::start(&[]).await;
    let mut nonces = Vec::new();
    for _ in 0..2 {
        let page = reqwest::get(daemon.url("/")).await.expect("GET /");
        let headers = page.headers().clone();
        let policy = headers[CONTENT_SECURITY_POLICY].to_str().expect("ascii").to_owned();
        for directive in [
            "default-src 'self'",
            "script-src 'self' 'nonce-",
            "'wasm-unsafe-eval'",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive} missing from {policy}");
        }
        assert!(!policy.contains("unsafe-inline") && !policy.contains("'unsafe-eval'"), "{policy}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["referrer-policy"], "no-referrer");
        assert_eq!(headers["cross-origin-opener-policy"], "same-origin");
        let nonce = policy
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .expect("a nonce")
            .to_owned();
        assert!(nonce.len() >= 16, "{nonce}");
        // Every inline script carries this response's nonce.
        let html = page.text().await.expect("html");
        let scripts = html.matches("<script").count();
        assert!(scripts >= 1, "{html}");
        assert_eq!(
            html.matches(&format!("<script type=\"module\" nonce=\"{nonce}\"")).count()
                + html.matches(&format!("<script nonce=\"{nonce}\"")).count(),
            scripts,
            "{html}"
        );
        nonces.push(nonce);
    }
    assert_ne!(nonces[0], nonces[1], "a nonce is used once");
    // Everything else runs no script at all.
    for path in ["/nowhere", "/pkg/shard.css"] {
        let response = reqwest::get(daemon.url(path)).await.expect("GET");
        let policy = response.headers()[CONTENT_SECURITY_POLICY].to_str().expect("ascii");
        assert!(policy.contains("script-src 'none'") && policy.contains("frame-ancestors 'none'"));
        assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    }
}

#[tokio::test]
async fn a_planted_session_cookie_shadows_nothing() {
    let daemon = Daemon::start(&[]).await;
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    // A page on another port of 127.0.0.1 can set cookies for this host:
    // neither the other name nor a dead one of the same name hides the real.
    let planted = Browser {
        cookie: format!("__Host-shard_session=x; shard_session=planted; {}", browser.cookie),
        secret: browser.secret.clone(),
    };
    assert_eq!(planted.bootstrap(&daemon).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn rejected_noise_cannot_rotate_the_evidence_out_of_the_audit_log() {
    let daemon = Daemon::start(&[]).await;
    let _browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    // Garbage anyone can send, far faster than the log should take it.
    for _ in 0..200 {
        let status = raw(&daemon, "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n").await;
        assert_eq!(status, 400);
    }
    let audit = std::fs::read_to_string(daemon.home.join("audit.log")).expect("audit");
    let count = |event: &str| audit.matches(&format!("\"event\":\"{event}\"")).count();
    assert_eq!(count("request_rejected"), 60, "recorded up to the per-client share");
    assert_eq!(count("audit_suppressed"), 1, "and said once that the rest was not");
    assert_eq!(count("enrolled"), 1, "the evidence that matters is all there");
}

#[tokio::test]
async fn files_left_readable_by_others_are_made_private_again() {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::TempDir::new().expect("home");
    let home = home.path().join("home");
    std::fs::create_dir(&home).expect("dir");
    for name in ["audit.log", "daemon.lock"] {
        let path = home.join(name);
        std::fs::write(&path, "").expect("file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let daemon = Daemon::start_in(&home, &[]).await;
    for name in ["audit.log", "daemon.lock"] {
        let mode = std::fs::metadata(home.join(name)).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    drop(daemon);
}

/// Runs `command` through the agent's `bash` tool (the demo model's
/// `run:`), allowed by `web`; the tool's result as JSON text.
async fn run_allowed(web: &mut Client, agent: &str, command: &str) -> String {
    let prompt = json!({"type": "prompt", "agent_id": agent, "message": format!("run: {command}")});
    web.call("p", prompt).await;
    let asked = web.permission_request(agent).await;
    let allow = json!({"type": "permission_response", "agent_id": agent,
                       "request_id": asked["request_id"], "decision": "allow"});
    web.call("allow", allow).await;
    let turn = web.until_agent(agent, |message| message["type"] == "turn_end").await;
    turn.iter()
        .find(|message| message["type"] == "tool_result")
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// A tool reads the environment of its agent and of the process above it
/// (the sandbox's first process, which holds the keys it hands down), as
/// the kernel shows them (`/proc/<pid>/environ`: what each was started
/// with): no key or hidden variable is there (in the sandbox neither file
/// can even be opened), and the rest is in the tool's own environment.
#[tokio::test]
async fn no_tool_finds_a_key_in_the_agent_or_the_daemon_environment() {
    let home = tempfile::TempDir::new().expect("home");
    std::fs::write(
        home.path().join("config.toml"),
        "[tools]\nhide_env = [\"MY_TOKEN\", \"CORP_*\"]\n",
    )
    .expect("config");
    let secrets = [
        ("OPENAI_API_KEY", "sk-daemon-canary-1"),
        ("ANTHROPIC_API_KEY", "sk-ant-daemon-canary-2"),
        ("MY_TOKEN", "tok-daemon-canary-3"),
        ("CORP_VAULT", "vault-daemon-canary-4"),
    ];
    let mut env = secrets.to_vec();
    env.push(("VISIBLE_SETTING", "plainly-visible"));
    let daemon = Daemon::start_with(home.path(), &[], &env, None).await;
    let project = tempfile::TempDir::new().expect("project");
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "reader").await;
    web.attach(&agent, "interactive").await;
    let command = "tr '\\0' '\\n' < /proc/$PPID/environ; echo agent-read; \
                   daemon=$(awk '/^PPid:/ {print $2}' /proc/$PPID/status); \
                   tr '\\0' '\\n' < /proc/$daemon/environ; echo daemon-read; \
                   env | grep VISIBLE_SETTING";
    let result = run_allowed(&mut web, &agent, command).await;
    assert!(result.contains("agent-read") && result.contains("daemon-read"), "{result}");
    assert!(result.contains("VISIBLE_SETTING=plainly-visible"), "{result}");
    for (name, value) in secrets {
        assert!(!result.contains(value), "{name} is readable: {result}");
    }
}

/// A tool's process (or anything it starts) is no person: on the daemon's
/// socket it could mint a browser enrollment, or attach and answer its own
/// agent's questions. It is refused with a clear error; the same command
/// from outside the agent works.
#[tokio::test]
async fn a_tool_cannot_use_the_daemon_socket() {
    let daemon = Daemon::start(&[]).await;
    let project = tempfile::TempDir::new().expect("project");
    let browser = Browser::enroll(&daemon, &daemon.enroll_code()).await;
    let mut web = browser.connect(&daemon).await;
    let agent = web.create(project.path(), "escaper").await;
    web.attach(&agent, "interactive").await;
    let shard = env!("CARGO_BIN_EXE_shard");
    let home = daemon.home.display().to_string();
    let command = format!("SHARD_HOME={home} {shard} enroll 2>&1; echo exit=$?");
    let result = run_allowed(&mut web, &agent, &command).await;
    assert!(result.contains("exit=1"), "{result}");
    assert!(result.contains("cannot use the daemon's socket"), "{result}");
    assert!(!result.contains("enroll: http"), "{result}");
    // From outside any agent, the same command is answered.
    let outside = std::process::Command::new(shard)
        .arg("enroll")
        .env("SHARD_HOME", &daemon.home)
        .output()
        .expect("shard enroll");
    let printed = String::from_utf8_lossy(&outside.stdout);
    assert!(outside.status.success() && printed.starts_with("enroll: http"), "{printed}");
}
