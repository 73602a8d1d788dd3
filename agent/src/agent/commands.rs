//! Reading a command line: decoded into an envelope (or answered with why
//! not), then routed to the part of the controller that owns it. Every
//! command is answered once: by its own part, or here.

use shard_protocol::agent::Empty;
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::envelope::MessageSet;
use shard_protocol::message::Response;
use shard_protocol::{ClientMessage, Envelope, ServerMessage, WireError};

use super::{Agent, Refusal, to_response};

impl Agent {
    pub(super) async fn handle_line(
        &mut self,
        line: Result<String, shard_protocol::jsonl::LineError>,
    ) {
        let line = match line {
            Ok(line) => line,
            Err(problem) => {
                return self.report(None, None, Refusal::BadLine(problem).into()).await;
            }
        };
        match Envelope::<ClientMessage>::from_json(&line) {
            Ok(envelope) => self.handle(envelope).await,
            Err(problem) => {
                let command = problem.type_name().map(str::to_owned);
                self.report(problem.id().map(str::to_owned), command, problem.to_wire_error())
                    .await;
            }
        }
    }

    /// An error answer: a `response` when the command had an `id`, else an
    /// `error` event (CONTRACT.md).
    pub(super) async fn report(
        &self,
        id: Option<String>,
        command: Option<String>,
        problem: WireError,
    ) {
        match id {
            Some(id) => {
                let command = command.unwrap_or_else(|| "unknown".to_owned());
                self.shared.respond(Some(id), Response::failed(command, problem)).await;
            }
            None => {
                self.shared
                    .emit(ServerMessage::Error(shard_protocol::agent::ErrorEvent {
                        code: problem.code,
                        message: into_diagnostic(problem.message),
                        fatal: Some(false),
                    }))
                    .await;
            }
        }
    }

    pub(super) async fn handle(&mut self, envelope: Envelope<ClientMessage>) {
        let Envelope { id, message, .. } = envelope;
        let command = MessageSet::type_name(&message);
        let result = match message {
            ClientMessage::Prompt(prompt) => return self.take_prompt(prompt, id, command).await,
            ClientMessage::Steer(steer) => return self.take_steer(steer, id, command).await,
            ClientMessage::Abort(Empty {}) => {
                self.abort_turn().await;
                Ok(None)
            }
            ClientMessage::SetMode(set) => self.set_mode(set.mode).await,
            ClientMessage::ListModes(Empty {}) => self.list_modes(),
            ClientMessage::ListModels(Empty {}) => self.list_models(),
            ClientMessage::ListCommands(Empty {}) => self.list_commands(),
            ClientMessage::SetModel(set) => self.set_model(set.model).await,
            ClientMessage::ListReasoningLevels(Empty {}) => self.list_reasoning_levels(),
            ClientMessage::SetReasoningLevel(set) => {
                self.set_reasoning_level(set.model, set.effort).await
            }
            ClientMessage::SessionOp(op) => {
                self.session_op(op, id, command).await;
                return;
            }
            ClientMessage::RecallSteer(Empty {}) => self.recall_steer().await,
            ClientMessage::Hold(hold) => {
                let reason = hold.reason.unwrap_or_else(|| "held by the daemon".to_owned());
                self.shared.hold.send_replace(hold.held.then_some(reason));
                Ok(None)
            }
            ClientMessage::PermissionResponse(response) => {
                self.answer_permission(response.request_id, response.answer).await;
                Ok(None)
            }
            ClientMessage::UiResponse(response) => {
                self.answer_ui(response.request_id, response.value).await;
                Ok(None)
            }
            other => Err(Refusal::DaemonCommand(MessageSet::type_name(&other))),
        };
        self.shared.respond(id, to_response(command, result)).await;
    }
}
