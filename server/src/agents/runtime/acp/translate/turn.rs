//! A turn: a prompt in, the agent's chunks out as deltas reconciled by
//! `message_complete`, its result as usage and `turn_end`. Follow-ups wait
//! for the turn's end, recorded first so that no process's end loses them;
//! ACP has no way into a running turn, so a steer is refused.

use agent_client_protocol_schema::v1::{
    self as acp, AgentResponse, CancelNotification, ClientNotification, ClientRequest,
    ContentChunk, PromptRequest, StopReason,
};
use shard_platform::conversation::Undelivered;
use shard_platform::session_log::{EntryBody, UnqueueReason};
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    DeltaKind, MessageComplete, MessageDelta, Prompt, RecallSteerResult, RecalledInput,
    StreamingBehavior, TurnEnd, TurnStart,
};
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, ContentBlock, Image, Message, Role, Usage};

use super::opening::Session;
use super::{Out, Queueing, Translator, error_event, event, respond, status};
use crate::agents::runtime::acp::error::AcpError;

/// The most follow-ups waiting at once, and their bytes.
const MAX_QUEUED: usize = 32;
const MAX_QUEUED_BYTES: usize = 1 << 20;

/// What a waiting follow-up weighs.
fn bytes(text: &str, images: &[Image]) -> usize {
    text.len() + images.iter().map(|image| image.data.len()).sum::<usize>()
}

/// A turn in progress: Shard's ids for it and for the message streaming.
pub(super) struct Turn {
    pub turn_id: String,
    pub prompt: i64,
    pub message_id: String,
    pub blocks: Vec<ContentBlock>,
    /// The session's cost when the turn started, as the agent said it.
    pub cost_before: Option<f64>,
    /// A client aborted it.
    pub aborted: bool,
    /// The follow-ups the abort dropped, told with the turn's end.
    pub dropped: Vec<String>,
}

impl Translator {
    pub(super) fn prompt(&mut self, id: Option<String>, prompt: Prompt) -> Vec<Out> {
        let images = prompt.images.unwrap_or_default();
        if !images.is_empty() && !self.opening.takes_images() {
            return vec![respond(id, Response::failed("prompt", AcpError::NoImages.into()))];
        }
        let session = match self.opening.for_prompt() {
            // Waits, recorded, for the session to be back.
            Session::Reopening => {
                return vec![Out::Queue(Queueing {
                    reply: id,
                    text: prompt.message,
                    images,
                    behavior: StreamingBehavior::FollowUp,
                    pinned: prompt.pinned.unwrap_or(false),
                })];
            }
            Session::NotYet => {
                return vec![respond(id, Response::failed("prompt", AcpError::NoSession.into()))];
            }
            Session::Ready(session) => session.clone(),
        };
        if self.turn.is_none() && self.queue.is_empty() {
            let mut out = vec![respond(id, Response::accepted("prompt"))];
            out.extend(self.begin(session, prompt.message, images, None));
            return out;
        }
        let behavior = match prompt.streaming_behavior {
            Some(StreamingBehavior::FollowUp) => StreamingBehavior::FollowUp,
            Some(StreamingBehavior::Steer) => {
                return vec![respond(id, Response::failed("prompt", AcpError::Steer.into()))];
            }
            None => {
                return vec![respond(id, Response::failed("prompt", AcpError::TurnRunning.into()))];
            }
        };
        let weight: usize =
            self.queue.iter().map(|queued| bytes(&queued.text, &queued.images)).sum();
        let adding = bytes(&prompt.message, &images);
        if self.queue.len() >= MAX_QUEUED || weight + adding > MAX_QUEUED_BYTES {
            let full = AcpError::QueueFull.into();
            return vec![respond(id, Response::failed("prompt", full))];
        }
        vec![Out::Queue(Queueing {
            reply: id,
            text: prompt.message,
            images,
            behavior,
            pinned: prompt.pinned.unwrap_or(false),
        })]
    }

    /// Starts a turn with `text` and `images` (a queued entry's, when it
    /// delivers one).
    fn begin(
        &mut self,
        session: acp::SessionId,
        text: String,
        images: Vec<Image>,
        queued_entry_id: Option<String>,
    ) -> Vec<Out> {
        let mut blocks = vec![acp::ContentBlock::from(text.clone())];
        blocks.extend(images.iter().map(|image| {
            acp::ContentBlock::Image(acp::ImageContent::new(&image.data, &image.mime_type))
        }));
        let request = PromptRequest::new(session, blocks);
        let (prompt, line) = self.outstanding.request(ClientRequest::PromptRequest(request));
        let turn_id = self.fresh("turn");
        let message_id = self.fresh("msg");
        self.turn = Some(Turn {
            turn_id: turn_id.clone(),
            prompt,
            message_id,
            blocks: Vec::new(),
            cost_before: self.cost,
            aborted: false,
            dropped: Vec::new(),
        });
        vec![
            Out::Watch,
            event(ServerMessage::TurnStart(TurnStart { turn_id: turn_id.clone() })),
            Out::Prompted { text, images, queued_entry_id, turn_id },
            status(AgentStatus::Streaming),
            Out::Agent(line),
        ]
    }

    /// The oldest follow-up waiting, as a turn of its own.
    pub(super) fn next_queued(&mut self) -> Vec<Out> {
        let Some(session) = self.opening.ready_session().cloned() else { return Vec::new() };
        if self.turn.is_some() {
            return Vec::new();
        }
        match self.queue.pop_front() {
            Some(Undelivered { entry_id, text, images, .. }) => {
                self.begin(session, text, images, Some(entry_id))
            }
            None => Vec::new(),
        }
    }

    /// `recall_steer`: the newest follow-up a person may take back.
    pub(super) fn recall(&mut self, id: Option<String>) -> Vec<Out> {
        let at = self.queue.iter().rposition(|queued| !queued.pinned);
        let taken = at.and_then(|at| self.queue.remove(at));
        let mut out = Vec::new();
        let recalled = taken.map(|taken| {
            out.push(Out::Log(EntryBody::Unqueued {
                queued_entry_id: taken.entry_id,
                reason: UnqueueReason::Recalled,
            }));
            RecalledInput { message: taken.text, streaming_behavior: taken.behavior, images: 0 }
        });
        out.push(respond(id, Response::ok("recall_steer", RecallSteerResult { recalled })));
        out
    }

    /// `session/cancel`, every open question answered `cancelled` as ACP
    /// requires, and the follow-ups dropped with the turn; the turn ends
    /// when the agent answers the prompt.
    pub(super) fn abort(&mut self, id: Option<String>) -> Vec<Out> {
        let mut out = vec![respond(id, Response::accepted("abort"))];
        let mut texts = Vec::new();
        for dropped in std::mem::take(&mut self.queue) {
            texts.push(dropped.text);
            out.push(Out::Log(EntryBody::Unqueued {
                queued_entry_id: dropped.entry_id,
                reason: UnqueueReason::Aborted,
            }));
        }
        let Some(session) = self.opening.session().cloned().filter(|_| self.turn.is_some()) else {
            return out;
        };
        if let Some(turn) = &mut self.turn {
            turn.aborted = true;
            turn.dropped = texts;
        }
        let asked = !self.questions.is_empty() || !self.forms.is_empty();
        out.extend(self.forms.left_open());
        out.extend(self.questions.cancel_all());
        if asked {
            out.push(self.status_now());
        }
        let cancel = ClientNotification::CancelNotification(CancelNotification::new(session));
        out.push(Out::Agent(super::wire::notification(cancel)));
        out
    }

    pub(super) fn chunk(&mut self, chunk: ContentChunk, kind: DeltaKind) -> Vec<Out> {
        let acp::ContentBlock::Text(text) = chunk.content else { return Vec::new() };
        self.text_chunk(text.text, kind)
    }

    /// A chunk of the message's text or thinking, streamed as a delta.
    pub(super) fn text_chunk(&mut self, text: String, kind: DeltaKind) -> Vec<Out> {
        let Some(turn) = &mut self.turn else { return Vec::new() };
        let same_kind = matches!(
            (turn.blocks.last(), kind),
            (Some(ContentBlock::Text { .. }), DeltaKind::Text)
                | (Some(ContentBlock::Thinking { .. }), DeltaKind::Thinking)
        );
        if !same_kind {
            turn.blocks.push(match kind {
                DeltaKind::Thinking => ContentBlock::Thinking { text: String::new() },
                _ => ContentBlock::Text { text: String::new() },
            });
        }
        if let Some(ContentBlock::Text { text: all } | ContentBlock::Thinking { text: all }) =
            turn.blocks.last_mut()
        {
            all.push_str(&text);
        }
        let delta = MessageDelta {
            message_id: turn.message_id.clone(),
            block_index: u32::try_from(turn.blocks.len() - 1).unwrap_or(u32::MAX),
            kind,
            text_delta: Some(text),
            tool_call_id: None,
            name: None,
            args_delta: None,
        };
        vec![event(ServerMessage::MessageDelta(delta))]
    }

    /// The message streaming so far, completed and recorded with `more`
    /// blocks after it (a tool call); the next chunk starts another.
    pub(super) fn complete_message(&mut self, more: Vec<ContentBlock>) -> Vec<Out> {
        self.end_message(more, false)
    }

    /// The same, `aborted` when an abort cut the message off.
    fn end_message(&mut self, more: Vec<ContentBlock>, aborted: bool) -> Vec<Out> {
        let next = self.fresh("msg");
        let Some(turn) = &mut self.turn else { return Vec::new() };
        let mut blocks = std::mem::take(&mut turn.blocks);
        blocks.extend(more);
        let message_id = std::mem::replace(&mut turn.message_id, next);
        if blocks.is_empty() {
            return Vec::new();
        }
        let message = Message {
            id: message_id.clone(),
            role: Role::Assistant,
            content: blocks.clone(),
            aborted,
        };
        vec![
            event(ServerMessage::MessageComplete(MessageComplete { message_id, message })),
            Out::Log(EntryBody::Assistant {
                content: blocks,
                model: self.settings.model_name(),
                thinking_signatures: Vec::new(),
                usage: None,
                aborted,
            }),
        ]
    }

    /// The agent answered the turn's prompt: the message is complete, the
    /// turn's usage counted, and the turn ends (an error says why, then
    /// ends it too). A follow-up waiting starts the next.
    pub(super) fn turn_ended(&mut self, result: Result<AgentResponse, acp::Error>) -> Vec<Out> {
        let aborted = self.turn.as_ref().is_some_and(|turn| turn.aborted);
        let mut out = self.end_message(Vec::new(), aborted);
        let Some(turn) = self.turn.take() else { return out };
        out.extend(self.tools.left_open());
        out.extend(self.plan.left_open());
        out.extend(self.forms.left_open());
        let usage = match &result {
            Ok(AgentResponse::PromptResponse(done)) => {
                self.usage(done.usage.as_ref(), turn.cost_before)
            }
            _ => None,
        };
        match result {
            Ok(AgentResponse::PromptResponse(done)) if done.stop_reason == StopReason::Refusal => {
                out.push(error_event(AcpError::Refused.into()));
            }
            Ok(_) => {}
            Err(error) => {
                out.push(error_event(AcpError::PromptFailed(super::wire::said(&error)).into()))
            }
        }
        if let Some(usage) = &usage {
            out.push(event(ServerMessage::Usage(usage.clone())));
        }
        let (aborted, dropped) = (turn.aborted, turn.dropped);
        out.push(event(ServerMessage::TurnEnd(TurnEnd {
            turn_id: turn.turn_id,
            usage,
            aborted,
            dropped,
        })));
        out.push(status(AgentStatus::Idle));
        if turn.aborted {
            out.push(Out::Reap);
            let reopened = self.opening.reopen(&mut self.outstanding);
            if !reopened.is_empty() {
                out.extend(reopened);
                return out;
            }
        }
        out.extend(self.next_queued());
        out
    }

    /// The turn's usage: tokens from the prompt's result, cost from what the
    /// session's running cost grew by, the context from the last update.
    fn usage(&self, tokens: Option<&acp::Usage>, cost_before: Option<f64>) -> Option<Usage> {
        let cost = match (self.cost, cost_before) {
            (Some(now), Some(before)) => Some((now - before).max(0.0)),
            (Some(now), None) => Some(now),
            _ => None,
        };
        if tokens.is_none() && cost.is_none() {
            return None;
        }
        let tokens = tokens.cloned().unwrap_or_else(|| acp::Usage::new(0, 0, 0));
        Some(Usage {
            input: tokens.input_tokens,
            output: tokens.output_tokens,
            cache_read: tokens.cached_read_tokens,
            cache_write: tokens.cached_write_tokens,
            cost,
            context_tokens: self.context,
            model: Some(self.settings.model_name()),
        })
    }
}
