//! Streaming one model call: the request (the live window, the system
//! prompt, the tools), each provider event folded into the message being
//! assembled and sent on as a `message_delta`, and the reply with the tool
//! calls it planned and its priced usage.

use std::sync::Arc;

use serde_json::Value;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{DeltaKind, MessageDelta};
use shard_protocol::types::{ContentBlock, JsonObject, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Ending, report};
use crate::config::Price;
use crate::provider::{self, ProviderEvent, ProviderRequest};
use crate::shared::Shared;
use crate::util::new_id;

/// Provider events buffered between the provider task and the turn.
const PROVIDER_EVENTS: usize = 256;

const SYSTEM_PROMPT: &str = "You are a coding agent working in the user's project directory. \
Use the tools to read, search and change files and to run commands. Keep answers short.";

/// A block being assembled from deltas.
enum Block {
    Text(String),
    Thinking(String),
    Tool { id: String, name: String, args: String },
}

struct Assembler {
    message_id: String,
    blocks: Vec<Block>,
    signatures: Vec<String>,
}

impl Assembler {
    /// Folds one provider event in; returns the delta to emit.
    fn apply(&mut self, event: ProviderEvent) -> Option<MessageDelta> {
        let message_id = self.message_id.clone();
        let delta = move |block_index: usize, kind| MessageDelta {
            message_id: message_id.clone(),
            block_index: u32::try_from(block_index).unwrap_or(u32::MAX),
            kind,
            text_delta: None,
            tool_call_id: None,
            name: None,
            args_delta: None,
        };
        match event {
            ProviderEvent::Text(text) | ProviderEvent::Thinking(text) if text.is_empty() => None,
            ProviderEvent::Text(text) => {
                let at = self.append(DeltaKind::Text, &text);
                Some(MessageDelta { text_delta: Some(text), ..delta(at, DeltaKind::Text) })
            }
            ProviderEvent::Thinking(text) => {
                let at = self.append(DeltaKind::Thinking, &text);
                Some(MessageDelta { text_delta: Some(text), ..delta(at, DeltaKind::Thinking) })
            }
            ProviderEvent::ThinkingSignature(signature) => {
                self.signatures.push(signature);
                None
            }
            ProviderEvent::ToolCallStart { id, name } => {
                self.blocks.push(Block::Tool {
                    id: id.clone(),
                    name: name.clone(),
                    args: String::new(),
                });
                Some(MessageDelta {
                    tool_call_id: Some(id),
                    name: Some(name),
                    ..delta(self.blocks.len() - 1, DeltaKind::ToolCall)
                })
            }
            ProviderEvent::ToolArgs { id, delta: piece } => {
                let at = self.blocks.iter().rposition(
                    |block| matches!(block, Block::Tool { id: known, .. } if *known == id),
                )?;
                if let Block::Tool { args, .. } = &mut self.blocks[at] {
                    args.push_str(&piece);
                }
                Some(MessageDelta { args_delta: Some(piece), ..delta(at, DeltaKind::ToolCall) })
            }
            ProviderEvent::Usage(_) => None,
        }
    }

    /// Appends text to the last block if it is of the same kind, else opens
    /// a new block; returns the block's index.
    fn append(&mut self, kind: DeltaKind, text: &str) -> usize {
        match (self.blocks.last_mut(), kind) {
            (Some(Block::Text(current)), DeltaKind::Text)
            | (Some(Block::Thinking(current)), DeltaKind::Thinking) => {
                current.push_str(text);
            }
            (_, DeltaKind::Thinking) => self.blocks.push(Block::Thinking(text.to_owned())),
            _ => self.blocks.push(Block::Text(text.to_owned())),
        }
        self.blocks.len() - 1
    }

    /// The finished content, and each tool call with its parsed arguments
    /// (or why they could not be parsed).
    fn finish(self, keep_tool_calls: bool) -> (Vec<ContentBlock>, Vec<String>, Vec<PlannedCall>) {
        let mut content = Vec::new();
        let mut calls = Vec::new();
        for block in self.blocks {
            match block {
                Block::Text(text) => content.push(ContentBlock::Text { text }),
                Block::Thinking(text) => content.push(ContentBlock::Thinking { text }),
                Block::Tool { .. } if !keep_tool_calls => {}
                Block::Tool { id, name, args } => {
                    let parsed = if args.trim().is_empty() {
                        Ok(JsonObject::new())
                    } else {
                        match serde_json::from_str::<Value>(&args) {
                            Ok(Value::Object(map)) => Ok(map),
                            Ok(_) => Err(BadArguments::NotObject),
                            Err(problem) => Err(BadArguments::NotJson(problem)),
                        }
                    };
                    content.push(ContentBlock::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        args: parsed.as_ref().cloned().unwrap_or_default(),
                    });
                    calls.push(PlannedCall { id, name, args: parsed });
                }
            }
        }
        (content, self.signatures, calls)
    }
}

pub(super) struct PlannedCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) args: Result<JsonObject, BadArguments>,
}

/// Why a planned call's streamed arguments cannot be run with.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadArguments {
    #[error("the arguments are not a JSON object")]
    NotObject,
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
}

/// What one model call produced.
pub(super) struct ModelReply {
    /// The id the deltas carried; `message_complete` repeats it.
    pub(super) message_id: String,
    pub(super) content: Vec<ContentBlock>,
    pub(super) signatures: Vec<String>,
    pub(super) calls: Vec<PlannedCall>,
    pub(super) usage: Option<Usage>,
    /// Set when the call ended the turn (aborted or failed).
    pub(super) ending: Option<Ending>,
}

/// The built-in instructions, then a manager's (a subagent's brief), then
/// where the agent works.
fn system_prompt(shared: &Shared) -> String {
    let mut system = SYSTEM_PROMPT.to_owned();
    if let Some(instructions) = &shared.instructions {
        system.push_str("\n\n");
        system.push_str(instructions);
    }
    system.push_str(&format!("\nWorking directory: {}", shared.cwd.display()));
    system
}

/// One provider call, streamed to the client. A failed or aborted call still
/// yields what arrived (without tool calls), so the transcript stays whole.
pub(super) async fn call_model(shared: &Arc<Shared>, cancel: &CancellationToken) -> ModelReply {
    // The model is read here, at the call boundary: a set_model during the
    // previous stream takes effect now, never mid-stream (§9.2).
    let (model, reasoning_level) = shared.active_model();
    let (model_id, price) = (model.id.clone(), shared.config.price(&model.id));
    let window = {
        let conversation = shared.conversation.lock().await;
        conversation.window().into_iter().cloned().collect()
    };
    let request = ProviderRequest {
        model,
        reasoning_level,
        system: system_prompt(shared),
        window,
        tools: shared.toolset.definitions(),
    };
    let (sender, mut events) = mpsc::channel(PROVIDER_EVENTS);
    let call = provider::stream(request, sender);
    tokio::pin!(call);
    let message_id = format!("msg-{}", new_id());
    let mut assembler =
        Assembler { message_id: message_id.clone(), blocks: Vec::new(), signatures: Vec::new() };
    let mut usage = None;
    let mut outcome: Option<Result<(), provider::ProviderError>> = None;
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(ProviderEvent::Usage(reported)) => {
                    usage = Some(priced(reported, &model_id, price));
                }
                Some(event) => {
                    if let Some(delta) = assembler.apply(event) {
                        shared.emit(ServerMessage::MessageDelta(delta)).await;
                    }
                }
                None => break,
            },
            result = &mut call, if outcome.is_none() => outcome = Some(result),
            () = cancel.cancelled() => {
                let (content, signatures, _) = assembler.finish(false);
                return ModelReply { message_id, content, signatures, calls: Vec::new(), usage, ending: Some(Ending::Aborted) };
            }
        }
    }
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => call.await,
    };
    let (content, signatures, calls) = assembler.finish(outcome.is_ok());
    let ending = match outcome {
        Ok(()) => None,
        Err(problem) => {
            report(shared, problem, false).await;
            Some(Ending::Failed)
        }
    };
    ModelReply { message_id, content, signatures, calls, usage, ending }
}

/// A call's usage with its model and, when `config.toml` prices that model
/// and the provider reported no cost of its own, its cost.
fn priced(mut usage: Usage, model_id: &str, price: Option<Price>) -> Usage {
    if usage.cost.is_none() {
        usage.cost = price.map(|price| price.cost(&usage));
    }
    if usage.model.is_none() {
        usage.model = Some(model_id.to_owned());
    }
    usage
}
