//! The web client as the daemon serves it: the server-rendered page and the
//! embedded bundle, from a working directory that has no project files.

use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, VARY,
};

use super::support::Daemon;

async fn get(url: &str) -> reqwest::Response {
    reqwest::get(url).await.unwrap_or_else(|error| panic!("GET {url}: {error}"))
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> &str {
    response
        .headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .expect("ascii header")
}

#[tokio::test]
async fn serves_the_rendered_app_with_its_security_headers() {
    let daemon = Daemon::start(&[]).await;
    let response = get(&daemon.url("/")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(header(&response, CONTENT_TYPE).starts_with("text/html"));
    assert!(header(&response, CONTENT_SECURITY_POLICY).contains("frame-ancestors 'none'"));
    let html = response.text().await.expect("body");
    assert!(html.contains("<title>Shard</title>"), "title rendered on the server: {html}");
    assert!(html.contains("data-hydrated=\"false\""), "server HTML is pre-hydration");
    // The hydration script names the bundle that /pkg serves.
    assert!(html.contains("/pkg/shard.js"), "loads the bundle: {html}");
    assert!(html.contains("shard_bg.wasm"), "loads the wasm: {html}");
}

#[tokio::test]
async fn serves_the_embedded_bundle_from_any_directory() {
    // The daemon runs in an empty temporary directory: everything it serves
    // must come from the binary itself.
    let daemon = Daemon::start(&[]).await;
    assert_eq!(std::fs::read_dir(daemon.cwd.path()).expect("cwd").count(), 0);

    let wasm = get(&daemon.url("/pkg/shard_bg.wasm")).await;
    assert_eq!(wasm.status(), StatusCode::OK, "bundle missing: build it with scripts/build");
    assert_eq!(header(&wasm, CONTENT_TYPE), "application/wasm");
    let bytes = wasm.bytes().await.expect("wasm body");
    assert_eq!(&bytes[..4], b"\0asm", "a WebAssembly module");

    for (path, mime) in [
        ("/pkg/shard.js", "text/javascript"),
        ("/pkg/shard.css", "text/css"),
        ("/favicon.ico", "image/"),
    ] {
        let response = get(&daemon.url(path)).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert!(header(&response, CONTENT_TYPE).starts_with(mime), "{path}");
        assert_eq!(header(&response, CACHE_CONTROL), "no-cache", "{path}");
    }
    assert_eq!(get(&daemon.url("/pkg/nope.js")).await.status(), StatusCode::NOT_FOUND);

    // Any other page: a plain 404 page, with nothing for the bundle to hydrate.
    let missing = get(&daemon.url("/no/such/page")).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body = missing.text().await.expect("body");
    assert!(body.contains("Not found"), "{body}");
    assert!(!body.contains("shard.js"), "no hydration scripts: {body}");
}

#[tokio::test]
async fn the_bundle_is_served_precompressed_as_the_browser_accepts() {
    let daemon = Daemon::start(&[]).await;
    let fetch = |accept: Option<&'static str>| {
        let mut request = reqwest::Client::new().get(daemon.url("/pkg/shard_bg.wasm"));
        if let Some(accept) = accept {
            request = request.header(ACCEPT_ENCODING, accept);
        }
        async move { request.send().await.expect("GET") }
    };
    let plain = fetch(None).await;
    assert!(plain.headers().get(CONTENT_ENCODING).is_none(), "no Accept-Encoding: identity");
    assert_eq!(header(&plain, VARY), "accept-encoding");
    let raw = plain.bytes().await.expect("body");
    assert_eq!(&raw[..4], b"\0asm");

    let gzip = fetch(Some("gzip")).await;
    assert_eq!(header(&gzip, CONTENT_ENCODING), "gzip");
    assert_eq!(header(&gzip, CONTENT_TYPE), "application/wasm");
    let gzipped = gzip.bytes().await.expect("body");
    assert_eq!(&gzipped[..2], [0x1f, 0x8b], "a gzip stream");
    assert!(gzipped.len() * 2 < raw.len(), "{} of {} bytes", gzipped.len(), raw.len());

    // A browser's header: brotli when the build had it, else gzip.
    let best = fetch(Some("gzip, deflate, br, zstd")).await;
    let encoding = header(&best, CONTENT_ENCODING).to_owned();
    assert!(encoding == "br" || encoding == "gzip", "{encoding}");
    let best = best.bytes().await.expect("body");
    assert!(best.len() <= gzipped.len());

    let refused = fetch(Some("gzip;q=0")).await;
    assert!(refused.headers().get(CONTENT_ENCODING).is_none(), "q=0 refuses it");
}

#[tokio::test]
async fn the_page_is_compressed_as_the_browser_accepts_and_reads_the_same() {
    use std::io::Read;
    let daemon = Daemon::start(&[]).await;
    let fetch = |accept: Option<&'static str>| {
        let mut request = reqwest::Client::new().get(daemon.url("/"));
        if let Some(accept) = accept {
            request = request.header(ACCEPT_ENCODING, accept);
        }
        async move {
            let response = request.send().await.expect("GET /");
            assert_eq!(response.status(), StatusCode::OK);
            assert!(header(&response, CONTENT_SECURITY_POLICY).contains("'nonce-"));
            let encoding = response.headers().get(CONTENT_ENCODING).cloned();
            (encoding, response.bytes().await.expect("body"))
        }
    };
    // The nonce differs per response; the rest of the page does not.
    let without_nonce = |page: &str| {
        let nonce = page.split("nonce=\"").nth(1).and_then(|rest| rest.split('"').next());
        page.replace(nonce.expect("a script nonce"), "")
    };
    let (encoding, plain) = fetch(None).await;
    assert_eq!(encoding, None, "no Accept-Encoding: identity");
    let plain = String::from_utf8(plain.to_vec()).expect("html");
    assert!(plain.contains("/pkg/shard.js"), "{plain}");

    let (encoding, brotli) = fetch(Some("gzip, deflate, br, zstd")).await;
    assert_eq!(encoding.as_ref().map(|value| value.as_bytes()), Some(&b"br"[..]));
    assert!(brotli.len() * 2 < plain.len(), "{} of {} bytes", brotli.len(), plain.len());
    let mut read = String::new();
    brotli::Decompressor::new(&brotli[..], 4096).read_to_string(&mut read).expect("brotli");
    assert_eq!(without_nonce(&read), without_nonce(&plain));

    // Chromium asks for gzip over plain http (loopback).
    let (encoding, gzip) = fetch(Some("gzip, deflate")).await;
    assert_eq!(encoding.as_ref().map(|value| value.as_bytes()), Some(&b"gzip"[..]));
    let mut read = String::new();
    flate2::read::GzDecoder::new(&gzip[..]).read_to_string(&mut read).expect("gzip");
    assert_eq!(without_nonce(&read), without_nonce(&plain));
}

#[tokio::test]
async fn the_app_installs_from_its_manifest_icons_and_a_worker_scoped_to_the_page() {
    let daemon = Daemon::start(&[]).await;
    let page = get(&daemon.url("/")).await.text().await.expect("page");
    assert!(page.contains(r#"<link rel="manifest" href="/manifest.webmanifest">"#), "{page}");

    let response = get(&daemon.url("/manifest.webmanifest")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header(&response, CONTENT_TYPE), "application/manifest+json");
    let manifest: serde_json::Value = response.json().await.expect("a JSON manifest");
    for (field, value) in [("start_url", "/"), ("scope", "/"), ("display", "standalone")] {
        assert_eq!(manifest[field], value, "{field}");
    }
    assert_eq!(manifest["name"], "Shard");
    // Each icon is the PNG of the size it claims; 192 and 512 are there.
    let icons = manifest["icons"].as_array().expect("icons");
    for icon in icons {
        let response = get(&daemon.url(icon["src"].as_str().expect("src"))).await;
        assert_eq!(response.status(), StatusCode::OK, "{icon}");
        assert_eq!(header(&response, CONTENT_TYPE), "image/png");
        let png = response.bytes().await.expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!(icon["sizes"], format!("{width}x{height}"));
    }
    for size in ["192x192", "512x512"] {
        assert!(icons.iter().any(|icon| icon["sizes"] == size), "{size}");
    }
    assert!(icons.iter().any(|icon| icon["purpose"] == "maskable"));

    // The worker sits at the root (so its scope can be the page) and may
    // load no script of any kind itself; it is revalidated on every check.
    let worker = get(&daemon.url("/sw.js")).await;
    assert_eq!(worker.status(), StatusCode::OK);
    assert_eq!(header(&worker, CONTENT_TYPE), "text/javascript");
    assert!(header(&worker, CONTENT_SECURITY_POLICY).contains("script-src 'none'"));
    assert_eq!(header(&worker, CACHE_CONTROL), "no-cache");
    assert!(worker.headers().get("service-worker-allowed").is_none(), "no wider scope");
    // Only these files are served at the root; nothing else of the bundle.
    for path in ["/shard.css", "/sw.js.map", "/icon-64.png", "/pkg"] {
        assert_eq!(get(&daemon.url(path)).await.status(), StatusCode::NOT_FOUND, "{path}");
    }
}

#[tokio::test]
async fn unchanged_assets_revalidate_with_a_304() {
    let daemon = Daemon::start(&[]).await;
    let first = get(&daemon.url("/pkg/shard.js")).await;
    let etag = header(&first, ETAG).to_owned();
    let again = reqwest::Client::new()
        .get(daemon.url("/pkg/shard.js"))
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await
        .expect("conditional GET");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert!(again.bytes().await.expect("body").is_empty());
    let stale = reqwest::Client::new()
        .get(daemon.url("/pkg/shard.js"))
        .header(IF_NONE_MATCH, "\"something-else\"")
        .send()
        .await
        .expect("conditional GET");
    assert_eq!(stale.status(), StatusCode::OK);
}

/// The first load's budget in bytes on the wire (brotli): 300 KB
/// (docs/PERFORMANCE.md, "First load"). Something that grows it past that
/// loads on first use, as the panels do, or makes room.
const FIRST_LOAD_BUDGET: usize = 300 * 1024;

/// What a browser fetches to show the dashboard, as `shard-bench --only
/// bundle` counts it: the page, what it links, and the modules its scripts
/// import as they load; not the chunks of panels not yet opened.
#[tokio::test]
async fn the_first_load_stays_under_its_ceiling_and_panels_load_apart() {
    let daemon = Daemon::start(&[]).await;
    let client = reqwest::Client::new();
    let fetch = |path: String| {
        let request = client.get(daemon.url(&path)).header(ACCEPT_ENCODING, "br");
        async move {
            let response = request.send().await.expect("GET");
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let encoding = response.headers().get(CONTENT_ENCODING).cloned();
            (encoding, response.bytes().await.expect("body"))
        }
    };
    let (encoding, page) = fetch("/".to_owned()).await;
    assert_eq!(encoding.as_ref().map(|value| value.as_bytes()), Some(&b"br"[..]), "/");
    let mut total = page.len();
    let page = reqwest::get(daemon.url("/")).await.expect("GET /").text().await.expect("page");
    let mut paths = vec!["/".to_owned()];
    for marker in ["href=\"/", "src=\"/", "'/pkg/"] {
        for piece in page.split(marker).skip(1) {
            let end = piece.find(['"', '\'']).unwrap_or(piece.len());
            let path = format!("/{}", &piece[..end]);
            if !paths.contains(&path) && !fetched_apart(&path) {
                paths.push(path);
            }
        }
    }
    let mut next = 1;
    while next < paths.len() {
        let path = paths[next].clone();
        next += 1;
        let (encoding, body) = fetch(path.clone()).await;
        if path.ends_with(".wasm") || path.ends_with(".js") {
            assert_eq!(encoding.as_ref().map(|value| value.as_bytes()), Some(&b"br"[..]), "{path}");
        }
        total += body.len();
        if path.ends_with(".js") {
            let script = reqwest::get(daemon.url(&path)).await.expect("GET").text().await.unwrap();
            let folder = &path[..path.rfind('/').map_or(0, |slash| slash + 1)];
            for piece in script.split("from \"./").skip(1) {
                let imported = format!("{folder}{}", &piece[..piece.find('"').unwrap_or(0)]);
                if !paths.contains(&imported) {
                    paths.push(imported);
                }
            }
        }
    }
    assert!(paths.iter().any(|path| path.ends_with("shard_bg.wasm")), "{paths:?}");
    assert!(paths.iter().any(|path| path.ends_with("__wasm_split.js")), "{paths:?}");
    assert!(
        total <= FIRST_LOAD_BUDGET,
        "the first load is {:.1} KB on the wire, over its budget of {} KB: {paths:?}",
        total as f64 / 1024.0,
        FIRST_LOAD_BUDGET / 1024
    );

    // The panels' chunks are served apart, as WASM, and none of them is
    // part of the first load.
    let loader = reqwest::get(daemon.url("/pkg/__wasm_split.js")).await.unwrap().text().await;
    let loader = loader.expect("loader");
    let chunks: Vec<&str> = loader
        .split("new URL(\"./")
        .skip(1)
        .map(|piece| &piece[..piece.find('"').unwrap_or(0)])
        .collect();
    assert!(chunks.iter().any(|chunk| chunk.starts_with("split_create_form.")), "{chunks:?}");
    for chunk in chunks {
        let path = format!("/pkg/{chunk}");
        assert!(!paths.contains(&path), "{path} is in the first load");
        let response = get(&daemon.url(&path)).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(header(&response, CONTENT_TYPE), "application/wasm", "{path}");
    }
}

/// What a browser fetches apart from showing the page, so not part of its
/// first load: the icons and the app's manifest (asked for when the browser
/// checks whether the page installs as an app).
fn fetched_apart(path: &str) -> bool {
    path.contains("favicon") || path.ends_with(".png") || path.ends_with(".webmanifest")
}
