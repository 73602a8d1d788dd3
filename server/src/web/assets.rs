//! The browser bundle (`shard.js`, `shard_bg.wasm`, `shard.css`) and the files
//! of `public/`, embedded into the binary at build time so that `shard` serves
//! its client from any working directory. scripts/build assembles them in
//! `target/site` before the daemon is compiled, with brotli and gzip copies
//! of the bundle beside it (`.br`, `.gz`): a request that accepts one gets
//! that copy as it is, never compressed per request.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../target/site"]
struct Site;

/// `GET /pkg/{*path}`: the bundle.
pub async fn pkg(Path(path): Path<String>, request: HeaderMap) -> Response {
    serve(&format!("pkg/{path}"), &request)
}

/// The files of `public/` served at the root, each by its own route: the
/// favicon, the app's manifest and icons, and its service worker (which
/// must sit at the root for its scope to be the page).
pub const PUBLIC: [&str; 5] =
    ["favicon.ico", "manifest.webmanifest", "icon-192.png", "icon-512.png", "sw.js"];

/// `GET /{file}` for each of [`PUBLIC`].
pub async fn public(uri: Uri, request: HeaderMap) -> Response {
    match PUBLIC.iter().find(|file| uri.path().strip_prefix('/') == Some(**file)) {
        Some(file) => serve(file, &request),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The precompressed copies, best first: (`Content-Encoding`, file suffix).
const ENCODINGS: [(&str, &str); 2] = [("br", ".br"), ("gzip", ".gz")];

/// Whether `Accept-Encoding` allows `coding` (RFC 9110 §12.5.3: listed, or
/// by `*`, and without `q=0`).
fn accepts(request: &HeaderMap, coding: &str) -> bool {
    let Some(header) = request.get(header::ACCEPT_ENCODING).and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let mut allowed = None;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let token = parts.next().unwrap_or("").trim();
        let quality = parts
            .filter_map(|param| param.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if token.eq_ignore_ascii_case(coding) {
            return quality > 0.0;
        }
        if token == "*" {
            allowed = Some(quality > 0.0);
        }
    }
    allowed.unwrap_or(false)
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(original) = Site::get(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (file, encoding) = ENCODINGS
        .iter()
        .filter(|(coding, _)| accepts(request, coding))
        .find_map(|(coding, suffix)| Some((Site::get(&format!("{path}{suffix}"))?, Some(*coding))))
        .unwrap_or((original.clone(), None));
    let etag = format!("\"{}\"", crate::id::hex(&file.metadata.sha256_hash()[..16]));
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
        if let Ok(value) = HeaderValue::from_str(original.metadata.mimetype()) {
            headers.insert(header::CONTENT_TYPE, value);
        }
        if let Some(encoding) = encoding {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
        }
    }
    // Caches must keep one copy per encoding.
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue, header};

    use super::accepts;

    fn asking(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(value).expect("header"));
        headers
    }

    #[test]
    fn accept_encoding_is_read_as_browsers_send_it() {
        let browser = asking("gzip, deflate, br, zstd");
        assert!(accepts(&browser, "br") && accepts(&browser, "gzip"));
        assert!(!accepts(&asking("gzip;q=0, br"), "gzip"));
        assert!(accepts(&asking("gzip;q=0, br"), "br"));
        assert!(!accepts(&asking("identity"), "br"));
        assert!(accepts(&asking("*"), "gzip"));
        assert!(!accepts(&asking("*;q=0"), "gzip"));
        assert!(!accepts(&asking("br;q=0, *"), "br"), "an explicit refusal beats *");
        assert!(accepts(&asking("BR"), "br"));
        assert!(!accepts(&HeaderMap::new(), "gzip"), "no header: identity only");
    }
}
