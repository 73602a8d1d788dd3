//! Answers to the questions a turn asked: a `permission_response` or a
//! `ui_response` settles its open question once (a late, unknown or
//! invalid answer is dropped, §6.3, §9.5), announced to every client
//! before the turn takes it.

use shard_protocol::ServerMessage;
use shard_protocol::agent::{PermissionAnswer, PermissionResolved, UiResolved, UiValue};

use super::Agent;
use crate::shared::Pending;

impl Agent {
    pub(super) async fn answer_permission(&self, request_id: String, answer: PermissionAnswer) {
        let reply = {
            let mut state = self.shared.state();
            let Some(at) = state.pending.iter().position(|(id, _)| *id == request_id) else {
                return; // late or unknown: discarded silently (§6.3)
            };
            let valid = matches!(&state.pending[at].1, Pending::Permission { request, .. } if request.accepts(&answer));
            if !valid {
                return; // an unknown choice_id is not an answer (§9.5)
            }
            match state.pending.remove(at).1 {
                Pending::Permission { reply, .. } => reply,
                Pending::Ui { .. } => return,
            }
        };
        self.shared
            .emit(ServerMessage::PermissionResolved(PermissionResolved {
                request_id,
                answer: answer.clone(),
                source: None,
            }))
            .await;
        let _ = reply.send(answer);
    }

    pub(super) async fn answer_ui(&self, request_id: String, value: Option<UiValue>) {
        let reply = {
            let mut state = self.shared.state();
            let Some(at) = state.pending.iter().position(|(id, pending)| {
                *id == request_id && matches!(pending, Pending::Ui { .. })
            }) else {
                return;
            };
            match state.pending.remove(at).1 {
                Pending::Ui { reply, .. } => reply,
                Pending::Permission { .. } => return,
            }
        };
        self.shared
            .emit(ServerMessage::UiResolved(UiResolved {
                request_id,
                value: serde_json::to_value(&value).unwrap_or_default(),
            }))
            .await;
        let _ = reply.send(value);
    }
}
