//! The daemon's HTTP surface (CONTRACT.md "HTTP routes"): the Leptos app and
//! its bundle for now; enrollment, tickets and `/ws` arrive with the daemon
//! issue, behind the same router.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;
use leptos::prelude::LeptosOptions;
use leptos_axum::{LeptosRoutes, generate_route_list};
use shard_app::{App, OUTPUT_NAME, shell};
use tower_http::set_header::SetResponseHeaderLayer;

/// `frame-ancestors 'none'`: no other site may frame the client
/// (clickjacking a permission dialog is the attack this stops).
const CONTENT_SECURITY_POLICY: &str = "frame-ancestors 'none'";

/// Builds the router for a daemon listening on `local`.
pub fn router(local: SocketAddr) -> Router {
    let options = LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_pkg_dir("pkg")
        .site_addr(local)
        .build();
    let routes = generate_route_list(App);
    Router::new()
        .leptos_routes(&options, routes, {
            let options = options.clone();
            move || shell(options.clone())
        })
        .route("/pkg/{*path}", get(crate::assets::pkg))
        .route("/favicon.ico", get(crate::assets::favicon))
        .fallback(not_found)
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .with_state(options)
}

/// Any other path: the app renders its not-found view, answered as a 404.
async fn not_found(State(options): State<LeptosOptions>, request: Request) -> Response {
    let render = leptos_axum::render_app_to_stream(move || shell(options.clone()));
    let mut response = render(request).await;
    if response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NOT_FOUND;
    }
    response
}
