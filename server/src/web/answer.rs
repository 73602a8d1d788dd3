//! An answer to one exact call given by a route rather than a connection:
//! a notification's Allow or Deny (`POST /push/act`) or an allow after a
//! passkey step-up (`POST /passkey/approve/finish`). Both go through the
//! agent's host as a tab's answer does (the first answer wins), bound to
//! the fingerprint of the call they were made for, and both reply to the
//! browser with what came of it.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{Decision, PermissionAnswer, PermissionResponse};
use shard_protocol::approvals::Answerer;

use super::Web;
use crate::agents::host::{HostCommand, Verdict};

/// How long a route waits for the agent's host to take its answer.
const WAIT: Duration = Duration::from_secs(10);

/// One answer to one call.
pub struct Checked {
    pub agent_id: String,
    pub request_id: String,
    pub decision: Decision,
    /// The call it was made for ([`crate::agents::host::fingerprint`]).
    pub fingerprint: String,
    pub answerer: Answerer,
    /// A passkey assertion made for this call was verified.
    pub stepped_up: bool,
}

/// Hands `checked` to its agent's host: the verdict, or the reply for an
/// agent that did not take it.
pub async fn answer(web: &Web, checked: Checked) -> Result<Verdict, Response> {
    let message = ClientMessage::PermissionResponse(PermissionResponse {
        request_id: checked.request_id,
        answer: PermissionAnswer::Decision(checked.decision),
        reason: None,
    });
    let (reply, verdict) = tokio::sync::oneshot::channel();
    let command = HostCommand::AnswerChecked {
        message,
        answerer: checked.answerer,
        fingerprint: checked.fingerprint,
        stepped_up: checked.stepped_up,
        reply,
    };
    if web.daemon.registry().send(&checked.agent_id, command).is_err() {
        return Err(refused(StatusCode::CONFLICT, "NOT_FOUND", "the agent is not running"));
    }
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
