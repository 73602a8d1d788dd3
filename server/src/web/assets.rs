//! The browser bundle (`shard.js`, `shard_bg.wasm`, `shard.css`) and the files
//! of `public/`, embedded into the binary at build time so that `shard` serves
//! its client from any working directory. scripts/build assembles them in
//! `target/site` before the daemon is compiled.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../target/site"]
struct Site;

/// `GET /pkg/{*path}`: the bundle.
pub async fn pkg(Path(path): Path<String>, request: HeaderMap) -> Response {
    serve(&format!("pkg/{path}"), &request)
}

/// `GET /favicon.ico`.
pub async fn favicon(request: HeaderMap) -> Response {
    serve("favicon.ico", &request)
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(file) = Site::get(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()));
    // File names are not content-hashed, so browsers must revalidate each
    // time; a matching ETag makes that a body-less 304.
    let unchanged = request
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|tag| tag.trim() == etag));
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Response::new(Body::from(file.data))
    };
    let headers = response.headers_mut();
    if !unchanged {
        if let Ok(value) = HeaderValue::from_str(file.metadata.mimetype()) {
            headers.insert(header::CONTENT_TYPE, value);
        }
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(16).map(|byte| format!("{byte:02x}")).collect()
}
