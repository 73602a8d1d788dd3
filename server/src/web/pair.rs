//! `POST /pair`: an enrolled browser asks for a one-time enrollment link for
//! another device (a phone, say), where running `shard enroll` in a
//! terminal is impractical (docs/SECURITY.md, "Pairing a device").
//!
//! It needs exactly what `/bootstrap` needs (the guard's exact Host and
//! Origin, the session cookie and, on loopback, the browser secret; a dead
//! credential counts as a failure like one at `/bootstrap`), and a JSON
//! body. The link's code is an enrollment code like `shard enroll`'s:
//! single use, valid as long (10 minutes), under the same limits at
//! `/enroll`, kept only hashed and never printed or logged; it replaces the
//! session's previous link and dies with the session. The QR code is drawn
//! here, as SVG, so the browser bundle carries no encoder.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shard_protocol::web::PairAnswer;

use super::{AppState, EnrolledRequest};

/// The QR code's smallest side in SVG units: large enough to scan from a
/// screen at arm's length once the page scales it.
const QR_SIDE: u32 = 256;

/// `url` as a QR code, an SVG document (black on white, with its quiet
/// zone, as cameras expect).
pub fn qr_svg(url: &str) -> Option<String> {
    use qrcode::render::svg;
    let code = qrcode::QrCode::with_error_correction_level(url, qrcode::EcLevel::M).ok()?;
    let svg = code
        .render::<svg::Color<'_>>()
        .min_dimensions(QR_SIDE, QR_SIDE)
        .dark_color(svg::Color("#000000"))
        .light_color(svg::Color("#ffffff"))
        .build();
    Some(svg)
}

pub async fn pair(
    State(state): State<AppState>,
    EnrolledRequest { session, effective, .. }: EnrolledRequest<false>,
) -> Response {
    let web = state.web.clone();
    let auth = web.auth.clone();
    let issuer = session.clone();
    // Hashing the code with argon2 is deliberately slow: off the workers.
    let Ok(code) = tokio::task::spawn_blocking(move || auth.pair_code(&issuer)).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let url = format!("{}/#enroll={code}", web.origin);
    let Some(qr_svg) = qr_svg(&url) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    web.audit.record(
        "pair_link_issued",
        json!({"principal_id": session.principal_id, "session_id": session.session_id,
               "peer": effective.client.to_string()}),
    );
    let expires_in_ms = u64::try_from(web.auth.code_ttl().as_millis()).unwrap_or(u64::MAX);
    // On loopback the link names 127.0.0.1, which a phone would open on
    // itself: the page says the link is for this computer only.
    let local_only = web.config.mode == super::config::Mode::Loopback;
    axum::Json(PairAnswer { url, expires_in_ms, qr_svg, local_only }).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_becomes_an_svg_qr_code_without_script() {
        let svg = qr_svg("https://shard.example.com/#enroll=AAAAAAAAAAAAAAAAAAAAAA").expect("svg");
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("<script") && !svg.contains("href"), "{svg}");
    }
}
