//! User input arriving while a turn runs: `prompt` and `steer` queued as
//! steers or follow-ups (recorded in the session log before they are
//! accepted, bounded by count and bytes), strict steers for one turn,
//! `recall_steer`, and what is taken back from the queues.

use std::collections::VecDeque;

use shard_protocol::agent::{Prompt, RecallSteerResult, Steer, StreamingBehavior};
use shard_protocol::message::Response;

use super::{Agent, Answer, MAX_QUEUED_BYTES, MAX_QUEUED_INPUTS, Refusal, ok};
use crate::session_log::{EntryBody, UnqueueReason};
use crate::shared::{StrictReply, UserInput};
use crate::turn::Opening;

impl Agent {
    /// `prompt`: a turn now when idle, else queued as its
    /// `streaming_behavior` says.
    pub(super) async fn take_prompt(&mut self, prompt: Prompt, id: Option<String>, command: &str) {
        let Prompt { message, images, streaming_behavior, pinned } = prompt;
        let input = UserInput {
            text: message,
            images: images.unwrap_or_default(),
            strict: None,
            queued: 0,
            pinned: pinned.unwrap_or(false),
            queued_entry_id: None,
        };
        self.prompt(input, streaming_behavior, id, command).await;
    }

    /// `steer`: a prompt delivered as a steer, or a strict steer when it
    /// names the turn it is for.
    pub(super) async fn take_steer(&mut self, steer: Steer, id: Option<String>, command: &str) {
        let mut input = UserInput {
            text: steer.message,
            images: steer.images.unwrap_or_default(),
            strict: None,
            queued: 0,
            pinned: false,
            queued_entry_id: None,
        };
        if let Some(turn_id) = steer.turn_id {
            input.strict = Some(StrictReply { id: id.clone(), command: command.to_owned() });
            self.strict_steer(input, &turn_id, id, command).await;
            return;
        }
        self.prompt(input, Some(StreamingBehavior::Steer), id, command).await;
    }

    /// `recall_steer`: the newest queued input that may be taken back, taken
    /// out of its queue and out of the log's debts.
    pub(super) async fn recall_steer(&self) -> Answer {
        let taken = self.shared.state().recall();
        let recalled = match taken {
            Some((recalled, entry)) => {
                self.unqueue(entry, UnqueueReason::Recalled).await;
                Some(recalled)
            }
            None => None,
        };
        ok(RecallSteerResult { recalled })
    }

    pub(super) async fn prompt(
        &mut self,
        input: UserInput,
        behavior: Option<StreamingBehavior>,
        id: Option<String>,
        command: &str,
    ) {
        if self.turn.is_none() {
            // Idle: the response, then the turn (CONTRACT.md ordering).
            self.shared.respond(id, Response::accepted(command)).await;
            self.start_turn(Opening::Input(input));
            return;
        }
        // A client that saw `turn_end` may prompt before the controller has
        // reaped the turn: that prompt is the next turn, not a steer, and
        // starts as this one winds down. So is one that reaches a resumed
        // agent busy with what its last process owed.
        let (ended, resumed) = {
            let state = self.shared.state();
            (state.turn_ended, state.resumed_work)
        };
        let behavior = match behavior {
            None if ended || resumed => Some(StreamingBehavior::FollowUp),
            behavior => behavior,
        };
        let room = {
            let state = self.shared.state();
            let weight: usize =
                state.steers.iter().chain(state.follow_ups.iter()).map(UserInput::size).sum();
            let full = |queue: &VecDeque<UserInput>| {
                queue.len() >= MAX_QUEUED_INPUTS || weight + input.size() > MAX_QUEUED_BYTES
            };
            match behavior {
                Some(StreamingBehavior::Steer) if full(&state.steers) => {
                    Err(Refusal::QueueFull { which: "steer" })
                }
                Some(StreamingBehavior::FollowUp) if full(&state.follow_ups) => {
                    Err(Refusal::QueueFull { which: "follow-up" })
                }
                Some(behavior) => Ok(behavior),
                None => Err(Refusal::MidTurn),
            }
        };
        let queued = match room {
            Ok(behavior) => self.queue(behavior, input).await,
            Err(problem) => Err(problem),
        };
        let response = match queued {
            Ok(()) => Response::accepted(command),
            Err(problem) => Response::failed(command, problem.into()),
        };
        self.shared.respond(id, response).await;
    }

    /// Queues a steer or follow-up once its `queued` entry is in the
    /// session log and synced: a client told it was accepted can count on
    /// it, whatever becomes of this process (a resumed agent delivers it,
    /// [`Agent::greet`]). The controller queues nothing else meanwhile, and
    /// a turn only takes from the queues, so the room checked still holds.
    pub(super) async fn queue(
        &self,
        behavior: StreamingBehavior,
        mut input: UserInput,
    ) -> Result<(), Refusal> {
        let entry = EntryBody::Queued {
            text: input.text.clone(),
            images: input.images.clone(),
            streaming_behavior: behavior,
            pinned: input.pinned,
        };
        input.queued_entry_id = Some(self.record(entry).await?);
        self.shared.state().enqueue(behavior, input);
        Ok(())
    }

    /// Records that queued inputs were taken back, so that no resumed agent
    /// delivers them. The client has its answer either way; a log that
    /// cannot take the record is reported here, and the worst a resume can
    /// then do is deliver what was taken back.
    pub(super) async fn unqueue(
        &self,
        entries: impl IntoIterator<Item = String>,
        reason: UnqueueReason,
    ) {
        let mut entries = entries.into_iter().peekable();
        if entries.peek().is_none() {
            return;
        }
        let mut conversation = self.shared.conversation.lock().await;
        let written = async {
            for queued_entry_id in entries {
                conversation.push(EntryBody::Unqueued { queued_entry_id, reason }).await?;
            }
            conversation.flush().await
        };
        if let Err(problem) = written.await {
            tracing::error!(%problem, "cannot record queued inputs as taken back");
        }
    }

    /// A strict steer (PROTOCOL.md §10.3 `subagent.steer`): queued only if
    /// `turn_id` is the turn running now and has not ended; answered when
    /// delivered, or CONFLICT.
    pub(super) async fn strict_steer(
        &mut self,
        input: UserInput,
        turn_id: &str,
        id: Option<String>,
        command: &str,
    ) {
        let refused = {
            let mut state = self.shared.state();
            let current = self.turn.is_some()
                && !state.turn_ended
                && state.turn_id.as_deref() == Some(turn_id);
            let weight: usize =
                state.steers.iter().chain(state.follow_ups.iter()).map(UserInput::size).sum();
            if !current {
                Some(Refusal::TurnNotRunning(turn_id.to_owned()))
            } else if state.steers.len() >= MAX_QUEUED_INPUTS
                || weight + input.size() > MAX_QUEUED_BYTES
            {
                Some(Refusal::QueueFull { which: "steer" })
            } else {
                state.enqueue(StreamingBehavior::Steer, input);
                None
            }
        };
        if let Some(problem) = refused {
            self.shared.respond(id, Response::failed(command, problem.into())).await;
        }
    }

    /// Strict steers still queued when their turn ends (or is aborted) are
    /// answered CONFLICT and dropped, never delivered into a later turn.
    pub(super) async fn refuse_strict_steers(&self) {
        let refused: Vec<StrictReply> = {
            let mut state = self.shared.state();
            let (strict, kept): (Vec<UserInput>, Vec<UserInput>) =
                state.steers.drain(..).partition(|input| input.strict.is_some());
            state.steers.extend(kept);
            strict.into_iter().filter_map(|input| input.strict).collect()
        };
        for reply in refused {
            let problem = Refusal::SteerTooLate.into();
            self.shared.respond(reply.id, Response::failed(reply.command, problem)).await;
        }
    }
}
