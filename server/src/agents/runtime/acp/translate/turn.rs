//! A turn: a prompt in, the agent's chunks out as deltas reconciled by
//! `message_complete`, its result as usage and `turn_end`. Follow-ups wait
//! for the turn's end, recorded first so that no process's end loses them;
//! ACP has no way into a running turn, so a steer is refused.

use std::collections::VecDeque;

use agent_client_protocol_schema::v1::{
    self as acp, AgentResponse, CancelNotification, ClientNotification, ClientRequest,
    ContentChunk, PromptRequest, StopReason,
};
use shard_platform::conversation::Undelivered;
use shard_platform::session_log::{EntryBody, UnqueueReason};
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    DeltaKind, MessageComplete, MessageDelta, Prompt, RecallSteerResult, RecalledInput, Status,
    StreamingBehavior, TurnEnd, TurnStart,
};
use shard_protocol::message::Response;
use shard_protocol::types::{AgentStatus, ContentBlock, Image, Message, Role, Usage};

use super::ids::Ids;
use super::opening::Session;
use super::{Out, Queueing, error_event, event, respond, status};
use crate::agents::runtime::acp::error::AcpError;
use crate::agents::runtime::acp::wire::{self, Outstanding};

/// The most follow-ups waiting at once, and their bytes.
const MAX_QUEUED: usize = 32;
const MAX_QUEUED_BYTES: usize = 1 << 20;

/// What a waiting follow-up weighs.
fn bytes(text: &str, images: &[Image]) -> usize {
    text.len() + images.iter().map(|image| image.data.len()).sum::<usize>()
}

/// A turn in progress: Shard's ids for it and for the message streaming.
struct Turn {
    turn_id: String,
    /// The request id of the turn's `session/prompt`.
    prompt: i64,
    message_id: String,
    blocks: Vec<ContentBlock>,
    /// The session's cost when the turn started, as the agent said it.
    cost_before: Option<f64>,
    /// A client aborted it.
    aborted: bool,
    /// The follow-ups the abort dropped, told with the turn's end.
    dropped: Vec<String>,
}

/// The session's turns: the one in progress, the follow-ups waiting for
/// its end, and what the agent last said of the session's cost and context.
pub(super) struct Turns {
    current: Option<Turn>,
    /// Follow-ups recorded and waiting for the turn's end.
    queue: VecDeque<Undelivered>,
    /// The agent's running cost of the session, as it last said.
    cost: Option<f64>,
    /// The context the agent last said it holds, in tokens.
    context: Option<u64>,
    /// Why the daemon holds the agent (`hold`: a budget reached), if it
    /// does. An ACP agent's model calls happen inside it, so the turn in
    /// progress runs to its end; what is prompted next waits, recorded.
    held: Option<String>,
}

/// A turn the agent answered the prompt of: its message completed, and
/// what is left to tell of it.
pub(super) struct Stopped {
    /// The message streaming, completed and recorded.
    pub completed: Vec<Out>,
    turn: Turn,
}

impl Stopped {
    /// A client aborted the turn.
    pub(super) fn aborted(&self) -> bool {
        self.turn.aborted
    }
}

/// What an abort gives of the turns.
pub(super) struct Abort {
    /// The follow-ups dropped, recorded as taken back.
    pub unqueued: Vec<Out>,
    /// `session/cancel`, when a turn is in progress; the turn ends when
    /// the agent answers its prompt.
    pub cancel: Option<Out>,
}

impl Turns {
    /// No turn yet; `owed`, the follow-ups Shard's record says were
    /// accepted and never delivered, wait for the session.
    pub(super) fn new(owed: Vec<Undelivered>) -> Self {
        Self { current: None, queue: owed.into(), cost: None, context: None, held: None }
    }

    pub(super) fn in_turn(&self) -> bool {
        self.current.is_some()
    }

    /// Whether request `id` is the prompt of the turn in progress.
    pub(super) fn prompted(&self, id: i64) -> bool {
        self.current.as_ref().is_some_and(|turn| turn.prompt == id)
    }

    /// A follow-up is in Shard's record: it waits for the turn's end.
    pub(super) fn enqueue(&mut self, input: Undelivered) {
        self.queue.push_back(input);
    }

    /// `prompt`: a turn started, a follow-up to record, or why neither,
    /// as the `session` stands (and whether its agent `takes_images`).
    pub(super) fn prompt(
        &mut self,
        ids: &mut Ids,
        outstanding: &mut Outstanding,
        id: Option<String>,
        prompt: Prompt,
        session: Session<'_>,
        takes_images: bool,
    ) -> Vec<Out> {
        let images = prompt.images.unwrap_or_default();
        if !images.is_empty() && !takes_images {
            return vec![respond(id, Response::failed("prompt", AcpError::NoImages.into()))];
        }
        let session = match session {
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
            Session::Ready(session) => session,
        };
        if self.current.is_none() && self.queue.is_empty() && self.held.is_none() {
            let mut out = vec![respond(id, Response::accepted("prompt"))];
            out.extend(self.begin(ids, outstanding, session, prompt.message, images, None));
            return out;
        }
        let behavior = match prompt.streaming_behavior {
            // Held between turns: it waits for the release as a follow-up.
            _ if self.held.is_some() && self.current.is_none() => StreamingBehavior::FollowUp,
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

    /// Starts a turn in `session` with `text` and `images` (a queued
    /// entry's, when it delivers one).
    fn begin(
        &mut self,
        ids: &mut Ids,
        outstanding: &mut Outstanding,
        session: &acp::SessionId,
        text: String,
        images: Vec<Image>,
        queued_entry_id: Option<String>,
    ) -> Vec<Out> {
        let mut blocks = vec![acp::ContentBlock::from(text.clone())];
        blocks.extend(images.iter().map(|image| {
            acp::ContentBlock::Image(acp::ImageContent::new(&image.data, &image.mime_type))
        }));
        let request = PromptRequest::new(session.clone(), blocks);
        let (prompt, line) = outstanding.request(ClientRequest::PromptRequest(request));
        let turn_id = ids.fresh("turn");
        let message_id = ids.fresh("msg");
        self.current = Some(Turn {
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

    /// The oldest follow-up waiting, as a turn of its own in the `session`
    /// open, if no turn is in progress.
    pub(super) fn next_queued(
        &mut self,
        ids: &mut Ids,
        outstanding: &mut Outstanding,
        session: Option<&acp::SessionId>,
    ) -> Vec<Out> {
        let Some(session) = session.filter(|_| self.current.is_none()) else {
            return Vec::new();
        };
        if let Some(reason) = self.held.clone().filter(|_| !self.queue.is_empty()) {
            let paused = Status { status: AgentStatus::Paused, detail: Some(reason) };
            return vec![event(ServerMessage::Status(paused))];
        }
        match self.queue.pop_front() {
            Some(Undelivered { entry_id, text, images, .. }) => {
                self.begin(ids, outstanding, session, text, images, Some(entry_id))
            }
            None => Vec::new(),
        }
    }

    /// `hold`: whether the next turn waits, and why. Released, the oldest
    /// follow-up that waited starts ([`Turns::next_queued`]).
    pub(super) fn hold(&mut self, held: Option<String>) {
        self.held = held;
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

    /// An abort: the follow-ups dropped with the turn, and the turn in
    /// progress in `session` cancelled (it ends when the agent answers its
    /// prompt).
    pub(super) fn abort(&mut self, session: Option<&acp::SessionId>) -> Abort {
        let mut unqueued = Vec::new();
        let mut texts = Vec::new();
        for dropped in std::mem::take(&mut self.queue) {
            texts.push(dropped.text);
            unqueued.push(Out::Log(EntryBody::Unqueued {
                queued_entry_id: dropped.entry_id,
                reason: UnqueueReason::Aborted,
            }));
        }
        let (Some(session), Some(turn)) = (session, &mut self.current) else {
            return Abort { unqueued, cancel: None };
        };
        turn.aborted = true;
        turn.dropped = texts;
        let cancel =
            ClientNotification::CancelNotification(CancelNotification::new(session.clone()));
        Abort { unqueued, cancel: Some(Out::Agent(wire::notification(cancel))) }
    }

    pub(super) fn chunk(&mut self, chunk: ContentChunk, kind: DeltaKind) -> Vec<Out> {
        let acp::ContentBlock::Text(text) = chunk.content else { return Vec::new() };
        self.text_chunk(text.text, kind)
    }

    /// A chunk of the message's text or thinking, streamed as a delta.
    pub(super) fn text_chunk(&mut self, text: String, kind: DeltaKind) -> Vec<Out> {
        let Some(turn) = &mut self.current else { return Vec::new() };
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

    /// The message streaming so far, completed and recorded (as `model`'s)
    /// with `more` blocks after it (a tool call); the next chunk starts
    /// another.
    pub(super) fn complete_message(
        &mut self,
        ids: &mut Ids,
        model: &str,
        more: Vec<ContentBlock>,
    ) -> Vec<Out> {
        self.end_message(ids, model, more, false)
    }

    /// The same, `aborted` when an abort cut the message off.
    fn end_message(
        &mut self,
        ids: &mut Ids,
        model: &str,
        more: Vec<ContentBlock>,
        aborted: bool,
    ) -> Vec<Out> {
        let next = ids.fresh("msg");
        let Some(turn) = &mut self.current else { return Vec::new() };
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
            streaming: false,
        };
        vec![
            event(ServerMessage::MessageComplete(MessageComplete { message_id, message })),
            Out::Log(EntryBody::Assistant {
                content: blocks,
                model: model.to_owned(),
                thinking_signatures: Vec::new(),
                usage: None,
                aborted,
            }),
        ]
    }

    /// The agent answered the turn's prompt: the message is complete (as
    /// `model`'s), and the turn is no longer in progress.
    pub(super) fn stop(&mut self, ids: &mut Ids, model: &str) -> Option<Stopped> {
        let aborted = self.current.as_ref().is_some_and(|turn| turn.aborted);
        let completed = self.end_message(ids, model, Vec::new(), aborted);
        let turn = self.current.take()?;
        Some(Stopped { completed, turn })
    }

    /// The rest of a stopped turn's end: its usage counted, an error if
    /// the agent gave one, `turn_end`, idle; and what an aborted turn
    /// started apart from the agent reaped.
    pub(super) fn ended(
        &self,
        stopped: Stopped,
        result: Result<AgentResponse, acp::Error>,
        model: &str,
    ) -> Vec<Out> {
        let turn = stopped.turn;
        let mut out = Vec::new();
        let usage = match &result {
            Ok(AgentResponse::PromptResponse(done)) => {
                self.usage(done.usage.as_ref(), turn.cost_before, model)
            }
            _ => None,
        };
        match result {
            Ok(AgentResponse::PromptResponse(done)) if done.stop_reason == StopReason::Refusal => {
                out.push(error_event(AcpError::Refused.into()));
            }
            Ok(_) => {}
            Err(error) => out.push(error_event(AcpError::PromptFailed(wire::said(&error)).into())),
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
        if aborted {
            out.push(Out::Reap);
        }
        out
    }

    /// What the agent says of the session's use so far: its context, and
    /// its running cost in dollars.
    pub(super) fn usage_now(&mut self, usage: acp::UsageUpdate) {
        self.context = Some(usage.used);
        if let Some(cost) = usage.cost.filter(|cost| cost.currency == "USD") {
            self.cost = Some(cost.amount);
        }
    }

    /// The turn's usage: tokens from the prompt's result, cost from what the
    /// session's running cost grew by, the context from the last update.
    fn usage(
        &self,
        tokens: Option<&acp::Usage>,
        cost_before: Option<f64>,
        model: &str,
    ) -> Option<Usage> {
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
            model: Some(model.to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{host, types};
    use super::*;
    use crate::agents::runtime::acp::wire::Incoming;

    fn prompt(json: Value) -> Prompt {
        serde_json::from_value(json).expect("a prompt")
    }

    fn undelivered(entry_id: &str, text: &str, pinned: bool) -> Undelivered {
        Undelivered {
            entry_id: entry_id.to_owned(),
            text: text.to_owned(),
            images: Vec::new(),
            behavior: StreamingBehavior::FollowUp,
            pinned,
        }
    }

    /// A session's turns, and what they send it through.
    struct Driven {
        turns: Turns,
        ids: Ids,
        outstanding: Outstanding,
        session: acp::SessionId,
    }

    impl Driven {
        fn new(owed: Vec<Undelivered>) -> Self {
            Self {
                turns: Turns::new(owed),
                ids: Ids::new("t".to_owned()),
                outstanding: Outstanding::default(),
                session: acp::SessionId::new("s-1"),
            }
        }

        fn prompt(&mut self, json: Value) -> Vec<Out> {
            let session = Session::Ready(&self.session);
            let (ids, outstanding) = (&mut self.ids, &mut self.outstanding);
            self.turns.prompt(ids, outstanding, Some("c".into()), prompt(json), session, false)
        }

        /// The agent answers the turn's prompt with `result`: the turn's end.
        fn end(&mut self, result: Value) -> Vec<Out> {
            let Some(turn) = &self.turns.current else { panic!("no turn") };
            let line = json!({"jsonrpc": "2.0", "id": turn.prompt, "result": result});
            let Incoming::Response { id, result, .. } =
                wire::decode(&line.to_string(), &mut self.outstanding)
            else {
                panic!("not an answer");
            };
            assert!(self.turns.prompted(id));
            let mut stopped = self.turns.stop(&mut self.ids, "m1").expect("a turn");
            let mut out = std::mem::take(&mut stopped.completed);
            out.extend(self.turns.ended(stopped, result.map(|r| *r), "m1"));
            out
        }
    }

    #[test]
    fn a_prompt_starts_a_turn_only_in_a_session_open_to_it() {
        let mut driven = Driven::new(Vec::new());
        let (ids, outstanding) = (&mut driven.ids, &mut driven.outstanding);
        let hello = || prompt(json!({"message": "hi"}));
        let early = driven.turns.prompt(ids, outstanding, None, hello(), Session::NotYet, true);
        assert_eq!(host(&early)[0]["error"]["code"], "CONFLICT");
        let waits = driven.turns.prompt(ids, outstanding, None, hello(), Session::Reopening, true);
        assert!(matches!(
            &waits[..],
            [Out::Queue(Queueing { behavior: StreamingBehavior::FollowUp, .. })]
        ));
        let image = prompt(json!({"message": "see", "images": [
            {"type": "image", "data": "aGk=", "mime_type": "image/png"}]}));
        let session = Session::Ready(&driven.session);
        let refused = driven.turns.prompt(ids, outstanding, None, image, session, false);
        assert_eq!(host(&refused)[0]["error"]["code"], "INVALID_REQUEST");
        assert!(!driven.turns.in_turn());

        let out = driven.prompt(json!({"message": "hello"}));
        assert!(matches!(out[1], Out::Watch));
        assert_eq!(types(&host(&out)), ["response", "turn_start", "status"]);
        assert_eq!(host(&out)[1]["turn_id"], "turn-t-1");
        let Some(Out::Agent(line)) = out.last() else { panic!("the prompt sent") };
        let sent: Value = serde_json::from_str(line).expect("json");
        assert_eq!(
            (sent["method"].as_str(), sent["params"]["prompt"][0]["text"].as_str()),
            (Some("session/prompt"), Some("hello"))
        );
        assert!(driven.turns.in_turn());
    }

    #[test]
    fn during_a_turn_only_a_follow_up_is_taken_and_only_so_many() {
        let mut driven = Driven::new(Vec::new());
        driven.prompt(json!({"message": "first"}));
        let running = driven.prompt(json!({"message": "more"}));
        assert!(host(&running)[0]["error"]["message"].as_str().unwrap().contains("follow-up"));
        let steer = driven.prompt(json!({"message": "x", "streaming_behavior": "steer"}));
        assert_eq!(host(&steer)[0]["error"]["code"], "CONFLICT");
        let follow = driven.prompt(json!({"message": "next", "streaming_behavior": "follow_up"}));
        assert!(matches!(&follow[..], [Out::Queue(Queueing { text, .. })] if text == "next"));

        for n in 0..MAX_QUEUED {
            driven.turns.enqueue(undelivered(&format!("e-{n}"), "x", false));
        }
        let full = driven.prompt(json!({"message": "one more", "streaming_behavior": "follow_up"}));
        assert!(host(&full)[0]["error"]["message"].as_str().unwrap().contains("too many"));
    }

    #[test]
    fn chunks_stream_as_deltas_and_the_turns_end_completes_and_counts_them() {
        let mut driven = Driven::new(Vec::new());
        driven.turns.usage_now(
            serde_json::from_value(
                json!({"used": 10, "size": 100, "cost": {"amount": 1.0, "currency": "USD"}}),
            )
            .expect("usage"),
        );
        driven.prompt(json!({"message": "hello"}));
        let thought = driven.turns.text_chunk("hmm".to_owned(), DeltaKind::Thinking);
        let first = driven.turns.text_chunk("hi ".to_owned(), DeltaKind::Text);
        let second = driven.turns.text_chunk("there".to_owned(), DeltaKind::Text);
        let indices: Vec<Value> = [thought, first, second]
            .iter()
            .map(|out| host(out)[0]["block_index"].clone())
            .collect();
        assert_eq!(indices, [json!(0), json!(1), json!(1)]);
        driven.turns.usage_now(
            serde_json::from_value(
                json!({"used": 40, "size": 100, "cost": {"amount": 1.25, "currency": "USD"}}),
            )
            .expect("usage"),
        );

        let ended = driven.end(json!({"stopReason": "end_turn",
            "usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}}));
        let lines = host(&ended);
        assert_eq!(types(&lines), ["message_complete", "usage", "turn_end", "status"]);
        assert_eq!(lines[0]["message"]["content"][1]["text"], "hi there");
        assert!(ended.iter().any(
            |out| matches!(out, Out::Log(EntryBody::Assistant { model, .. }) if model == "m1")
        ));
        assert_eq!((lines[1]["input"].as_u64(), lines[1]["cost"].as_f64()), (Some(7), Some(0.25)));
        assert_eq!(lines[1]["context_tokens"], 40);
        assert_eq!(lines[3]["status"], "idle");
        assert!(!driven.turns.in_turn());
        assert!(driven.turns.text_chunk("late".to_owned(), DeltaKind::Text).is_empty());
    }

    #[test]
    fn a_refusal_or_a_failure_is_said_before_the_turn_ends() {
        let mut driven = Driven::new(Vec::new());
        driven.prompt(json!({"message": "hello"}));
        let refused = host(&driven.end(json!({"stopReason": "refusal"})));
        assert_eq!(types(&refused), ["error", "turn_end", "status"]);
        assert_eq!(refused[0]["code"], "PROVIDER_ERROR");
    }

    #[test]
    fn follow_ups_wait_their_turn_and_the_newest_not_pinned_may_be_taken_back() {
        let owed = vec![undelivered("e-1", "one", false), undelivered("e-2", "two", true)];
        let mut driven = Driven::new(owed);
        let session = driven.session.clone();
        let (ids, outstanding) = (&mut driven.ids, &mut driven.outstanding);
        assert!(driven.turns.next_queued(ids, outstanding, None).is_empty(), "no session yet");
        let first = driven.turns.next_queued(ids, outstanding, Some(&session));
        assert!(first.iter().any(|out| matches!(out,
            Out::Prompted { text, queued_entry_id: Some(entry), .. } if text == "one" && entry == "e-1")));
        assert!(
            driven.turns.next_queued(ids, outstanding, Some(&session)).is_empty(),
            "one turn at a time"
        );

        let recalled = driven.turns.recall(None);
        assert_eq!(host(&recalled)[0]["data"], json!({"recalled": null}), "pinned: kept");
        driven.turns.enqueue(undelivered("e-3", "three", false));
        let recalled = driven.turns.recall(None);
        assert!(
            matches!(&recalled[0], Out::Log(EntryBody::Unqueued { queued_entry_id, .. }) if queued_entry_id == "e-3")
        );
        assert_eq!(host(&recalled)[0]["data"]["recalled"]["message"], "three");
    }

    #[test]
    fn an_abort_drops_the_follow_ups_and_the_turns_end_names_them() {
        let mut driven = Driven::new(Vec::new());
        let none = driven.turns.abort(Some(&driven.session));
        assert!(none.cancel.is_none() && none.unqueued.is_empty(), "no turn to cancel");
        driven.prompt(json!({"message": "hello"}));
        driven.turns.text_chunk("half a".to_owned(), DeltaKind::Text);
        driven.turns.enqueue(undelivered("e-1", "later", false));
        let abort = driven.turns.abort(Some(&driven.session));
        assert!(matches!(&abort.unqueued[..], [Out::Log(EntryBody::Unqueued { .. })]));
        let Some(Out::Agent(cancel)) = &abort.cancel else { panic!("cancelled") };
        assert!(cancel.contains("session/cancel"), "{cancel}");

        let ended = driven.end(json!({"stopReason": "cancelled"}));
        let lines = host(&ended);
        assert_eq!(lines[0]["message"]["aborted"], true);
        assert_eq!(lines[1]["dropped"], json!(["later"]));
        assert!(matches!(ended.last(), Some(Out::Reap)));
    }
}
