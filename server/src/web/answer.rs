//! An answer to one exact call given by a route rather than a connection:
//! a notification's Allow or Deny (`POST /push/act`) or an allow after a
//! passkey step-up (`POST /passkey/approve/finish`). Both are admitted by
//! the command table as a tab's answer is, then go to the agent's host
//! (the first answer wins) bound to the fingerprint of the call they were
//! made for (`crate::commands::routed::answer_bound`); here is only how
//! the browser is told what came of it.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shard_protocol::agent::Decision;

use super::Web;
use crate::agents::host::Verdict;
use crate::commands::routed::{Bound, NotTaken};

/// How long a route waits for the agent's host to take its answer.
const WAIT: Duration = Duration::from_secs(10);

/// Hands `bound` to its agent's host through the command table: the
/// verdict, or the reply for an answer that was not taken.
pub async fn answer(web: &Web, bound: Bound) -> Result<Verdict, Response> {
    let verdict = match crate::commands::routed::answer_bound(web.daemon.as_ref(), bound) {
        Ok(verdict) => verdict,
        Err(NotTaken::NotRunning) => {
            return Err(refused(StatusCode::CONFLICT, "NOT_FOUND", "the agent is not running"));
        }
        Err(NotTaken::Refused(error)) => {
            let error = shard_protocol::WireError::from(error);
            return Err(refused(StatusCode::FORBIDDEN, error.code.as_str(), &error.message));
        }
    };
    match tokio::time::timeout(WAIT, verdict).await {
        Ok(Ok(verdict)) => Ok(verdict),
        _ => Err(refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "TIMEOUT",
            "the agent did not take the answer",
        )),
    }
}

/// The browser's reply for `verdict` on an answer of `decision`.
pub fn reply(verdict: Verdict, decision: Decision) -> Response {
    let conflict = |message| refused(StatusCode::CONFLICT, "CONFLICT", message);
    match verdict {
        Verdict::Won => {
            let decision = if decision == Decision::Deny { "deny" } else { "allow" };
            no_store(axum::Json(json!({"decision": decision})).into_response())
        }
        Verdict::Answered => conflict("someone answered this question first"),
        Verdict::Unknown => conflict("this question has closed"),
        Verdict::Changed => conflict("the call is not the one this was for; open Shard to see it"),
        Verdict::Invalid => conflict("this question does not take that answer"),
        Verdict::Busy => {
            refused(StatusCode::SERVICE_UNAVAILABLE, "TIMEOUT", "the agent is busy; try again")
        }
        Verdict::Unreachable => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "NODE_OFFLINE",
            "the agent's node is offline; answer again once it is back",
        ),
        Verdict::StepUp => refused(
            StatusCode::UNAUTHORIZED,
            "STEP_UP",
            "allowing this call needs your passkey: open Shard to allow it there",
        ),
    }
}

/// A refusal as the protocol writes errors: `{code, message}`, not stored.
pub fn refused(status: StatusCode, code: &str, message: &str) -> Response {
    no_store((status, axum::Json(json!({"code": code, "message": message}))).into_response())
}

pub fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
