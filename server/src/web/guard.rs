//! What every request passes first: the effective scheme (forwarded
//! headers only from the trusted upstream), the Host exactly the expected
//! one (DNS rebinding), and for state-changing requests and `/ws` an
//! allowed Origin (another site's page in the same browser). A request
//! that fails is a 400, audited, before anything else is looked at.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shard_protocol::web::{
    appended_forwarded_for, normalize_host, normalize_origin, well_formed_host,
};

use super::{Effective, Web};

/// Why a request was refused before anything else was looked at; its
/// words are the 400's body and the audit's reason.
#[derive(Debug, thiserror::Error)]
pub(super) enum Rejected {
    #[error("exactly one {0} header is required")]
    NotOne(HeaderName),
    #[error("malformed {0} header")]
    Malformed(HeaderName),
    #[error("more than one {0} header")]
    Repeated(HeaderName),
    #[error("absolute-form request targets are refused")]
    AbsoluteForm,
    #[error("malformed Host {0:?}")]
    MalformedHost(String),
    #[error("unexpected Host {0:?}")]
    UnexpectedHost(String),
    #[error("a single allowed Origin header is required")]
    NoOrigin,
    #[error("Origin {0:?} is not allowed")]
    Origin(String),
    #[error("{0} must be exactly one host")]
    ForwardedHostMalformed(HeaderName),
    #[error("{header} {host:?} does not match the public host")]
    ForwardedHostMismatch { header: HeaderName, host: String },
}

/// The one value of a header that must appear exactly once.
fn single(headers: &HeaderMap, name: HeaderName) -> Result<&str, Rejected> {
    let mut values = headers.get_all(&name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(Rejected::NotOne(name));
    };
    value.to_str().map_err(|_| Rejected::Malformed(name))
}

fn check_host(request: &Request, web: &Web, scheme: &str) -> Result<(), Rejected> {
    if request.uri().scheme().is_some() || request.uri().authority().is_some() {
        return Err(Rejected::AbsoluteForm);
    }
    let host = single(request.headers(), header::HOST)?;
    if !well_formed_host(host) {
        return Err(Rejected::MalformedHost(host.to_owned()));
    }
    if normalize_host(host, scheme) != normalize_host(&web.expected_host, scheme) {
        return Err(Rejected::UnexpectedHost(host.to_owned()));
    }
    Ok(())
}

fn check_origin(request: &Request, web: &Web) -> Result<String, Rejected> {
    let origin = single(request.headers(), header::ORIGIN).map_err(|_| Rejected::NoOrigin)?;
    let normalized = normalize_origin(origin);
    if !web.allowed_origins.contains(&normalized) {
        return Err(Rejected::Origin(origin.to_owned()));
    }
    Ok(normalized)
}

/// Decides the effective scheme. Forwarded headers count only from the
/// trusted upstream (§4.1.2 D2); from anyone else they are ignored (and
/// audited). `X-Forwarded-For` and `Forwarded` are never read.
fn effective(request: &Request, web: &Web, peer: SocketAddr) -> Result<Effective, Rejected> {
    let config = &web.config;
    let headers = request.headers();
    let present =
        headers.contains_key(&config.proto_header) || headers.contains_key(&config.host_header);
    let trusted = config.trust_proxy.is_some_and(|upstream| upstream.matches(peer.ip()));
    if !trusted {
        if present {
            web.audit.record(
                "forwarded_headers_ignored",
                json!({"peer": peer.ip().to_string(), "path": request.uri().path()}),
            );
        }
        return Ok(Effective { https: false, peer, client: peer.ip() });
    }
    let https = match headers.get_all(&config.proto_header).iter().count() {
        0 => false,
        1 => single(headers, config.proto_header.clone())?.trim().eq_ignore_ascii_case("https"),
        _ => return Err(Rejected::Repeated(config.proto_header.clone())),
    };
    let scheme = if https { "https" } else { "http" };
    if headers.contains_key(&config.host_header) {
        let forwarded = single(headers, config.host_header.clone())?.trim();
        if !well_formed_host(forwarded) {
            return Err(Rejected::ForwardedHostMalformed(config.host_header.clone()));
        }
        let pinned = config.public_host.as_deref().unwrap_or(&web.expected_host);
        // Cross-checked only: the pinned public host is always the expected one.
        if normalize_host(forwarded, scheme) != normalize_host(pinned, scheme) {
            let header = config.host_header.clone();
            return Err(Rejected::ForwardedHostMismatch { header, host: forwarded.to_owned() });
        }
    }
    Ok(Effective { https, peer, client: forwarded_for(headers).unwrap_or(peer.ip()) })
}

/// The address the trusted upstream appended to the last `X-Forwarded-For`.
fn forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let last = headers.get_all("x-forwarded-for").iter().next_back()?.to_str().ok()?;
    appended_forwarded_for(last)
}

/// Forwarded scheme and host, then Host, then Origin for POSTs and `/ws`;
/// `no-store` on the auth routes. Every rejection is a 400, audited.
pub(super) async fn guard(
    State(web): State<Arc<Web>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let sensitive = matches!(path.as_str(), "/enroll" | "/bootstrap" | "/logout" | "/pair" | "/ws");
    let needs_origin = request.method() == Method::POST || path == "/ws";
    let verdict = effective(&request, &web, peer).and_then(|effective| {
        check_host(&request, &web, effective.scheme())?;
        if needs_origin {
            check_origin(&request, &web)?;
        }
        Ok(effective)
    });
    let mut response = match verdict {
        Ok(effective) => {
            request.extensions_mut().insert(effective);
            next.run(request).await
        }
        Err(why) => {
            let why = why.to_string();
            tracing::info!(%path, reason = %why, "request rejected");
            let event = if path == "/ws" { "upgrade_rejected" } else { "request_rejected" };
            web.audit.record(
                event,
                json!({"path": path, "status": 400, "reason": why, "peer": peer.ip().to_string()}),
            );
            (StatusCode::BAD_REQUEST, why).into_response()
        }
    };
    if sensitive {
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
