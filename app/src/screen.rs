//! The agent on screen: which one it is (the tab's one interactive
//! attachment), how far the tab has read it (its cursor) and how its last
//! attachment began, its status, its transcript and the window of it in
//! view, the pickers' catalogs ([`catalogs`]) and what is being written to
//! it ([`drafts`]). It applies that agent's `sync` and its events, and
//! sends the commands the agent view offers.

mod catalogs;
mod drafts;
mod held;

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::ErrorCode;
use shard_protocol::ServerMessage;
use shard_protocol::agent::{
    DeltaKind, Empty, PendingRequest, Prompt, RecallSteerResult, SetMode, SetModel,
    SetReasoningLevel, StreamingBehavior, Sync,
};
use shard_protocol::message::Response;
use shard_protocol::orchestrator::{
    AgentKill, AgentTarget, AttachResult, AttachRole, TerminateResult,
};
use shard_protocol::types::AgentStatus;

pub use catalogs::{Catalogs, Wanted};
pub use drafts::Drafts;
use held::Held;

use crate::ledger::Ledger;
use crate::link::{Link, Request};
use crate::roster::Roster;
use crate::transcript::{self, Item, Rows};

/// Whether an agent in `status` has no turn under way.
fn settled(status: AgentStatus) -> bool {
    matches!(status, AgentStatus::Idle | AgentStatus::Error)
}

/// A prompt the agent on screen was sent, as its answer finds it.
pub struct Sent {
    pub agent_id: String,
    pub text: String,
    pub queued: bool,
}

#[derive(Clone, Copy)]
pub struct Screen {
    /// The agent shown (and the only interactive attachment).
    pub selected: RwSignal<Option<String>>,
    /// The `seq` of the last event of the agent on screen: after a dropped
    /// connection the page re-attaches with it and gets only what it
    /// missed (docs/PROTOCOL-NOTES.md, "Event sequence numbers").
    pub cursor: RwSignal<Option<u64>>,
    /// How the last attachment of the agent on screen began: `Some(true)`
    /// resumed from the cursor, `Some(false)` with a `sync`.
    pub resumed: RwSignal<Option<bool>>,
    /// The runtime of the agent on screen stopped since its last `sync`:
    /// the next one may have settled what it left (a tool call closed as
    /// interrupted) with no event saying so, so only a `sync` shows it.
    pub needs_sync: RwSignal<bool>,
    /// The agent on screen runs on a node that was out of reach when the
    /// page attached: it is attached again once the node is back.
    pub unreached: RwSignal<bool>,
    /// The selected agent's runtime generation, from its last `sync`.
    pub epoch: RwSignal<Option<u64>>,
    pub status: RwSignal<AgentStatus>,
    pub transcript: Rows,
    /// The first transcript row on the page, when the user paged back;
    /// `None` follows the end (the transcript view pages it).
    pub window_start: RwSignal<Option<usize>>,
    /// Bumped to bring the transcript's end into view (an agent opened, a
    /// prompt sent).
    pub scroll_to_end: RwSignal<u64>,
    pub catalogs: Catalogs,
    pub drafts: Drafts,
    /// Streamed text not shown yet: it is shown once a frame.
    held: StoredValue<Held>,
    link: Link,
}

impl Screen {
    pub fn new(link: Link) -> Self {
        Self {
            selected: RwSignal::new(None),
            cursor: RwSignal::new(None),
            resumed: RwSignal::new(None),
            needs_sync: RwSignal::new(false),
            unreached: RwSignal::new(false),
            epoch: RwSignal::new(None),
            status: RwSignal::new(AgentStatus::Idle),
            transcript: RwSignal::new(Vec::new()),
            window_start: RwSignal::new(None),
            scroll_to_end: RwSignal::new(0),
            catalogs: Catalogs::new(),
            drafts: Drafts::new(),
            held: StoredValue::new(Held::default()),
            link,
        }
    }

    /// Whether `agent_id` is on screen (untracked).
    pub fn shows(&self, agent_id: &str) -> bool {
        self.selected.with_untracked(|selected| selected.as_deref() == Some(agent_id))
    }

    /// Shows `agent_id` (or none) in place of `previous`: nothing of the
    /// last agent stays, its draft aside, and the new one is attached.
    pub fn show(&self, previous: Option<String>, agent_id: Option<String>) {
        self.drafts.switch(previous.as_deref(), agent_id.as_deref());
        // One whose node was out of reach may not be attached (or only by
        // an attach on its way as its node came back): its detach may fail.
        if let Some(previous) = previous {
            let quiet = self.unreached.get_untracked();
            self.link.detach(&previous, if quiet { Request::Quiet } else { Request::Detach });
        }
        self.unreached.set(false);
        // What streamed for the last agent is not this one's.
        self.drop_held();
        self.transcript.set(Vec::new());
        self.window_start.set(None);
        self.catalogs.clear();
        self.epoch.set(None);
        self.cursor.set(None);
        self.resumed.set(None);
        self.needs_sync.set(false);
        self.selected.set(agent_id.clone());
        if let Some(agent_id) = agent_id {
            self.attach(&agent_id, None);
        }
    }

    fn attach(&self, agent_id: &str, after_seq: Option<u64>) {
        let request = Request::Attach { agent_id: agent_id.to_owned() };
        self.link.attach(agent_id, AttachRole::Interactive, after_seq, request);
    }

    /// Re-attaches the agent on screen from its cursor, if the page has one
    /// and what followed it is enough.
    pub fn resume(&self, agent_id: &str) {
        let cursor = self.cursor.get_untracked().filter(|_| !self.needs_sync.get_untracked());
        self.attach(agent_id, cursor);
    }

    /// Attaches the agent on screen again for a `sync` of all of it.
    pub fn resync(&self, agent_id: &str) {
        self.attach(agent_id, None);
    }

    /// Sends a per-agent command to the agent on screen.
    fn command(&self, message: ClientMessage, request: Request) -> bool {
        let Some(agent_id) = self.selected.get_untracked() else { return false };
        self.link.send(message, Some(agent_id), request)
    }

    pub fn terminate(&self) {
        if let Some(agent_id) = self.selected.get_untracked() {
            let request = Request::Terminate { agent_id: agent_id.clone() };
            self.link.send(ClientMessage::AgentTerminate(AgentTarget { agent_id }), None, request);
        }
    }

    pub fn kill(&self) {
        if let Some(agent_id) = self.selected.get_untracked() {
            // SIGTERM first: the agent ends its turn and keeps the reply
            // so far in its log (a forced kill follows if it does not).
            let kill = AgentKill { agent_id, force: None };
            self.link.send(ClientMessage::AgentKill(kill), None, Request::Command);
        }
    }

    pub fn set_mode(&self, mode: String) {
        self.command(ClientMessage::SetMode(SetMode { mode }), Request::Command);
    }

    pub fn set_model(&self, model: String) {
        self.command(ClientMessage::SetModel(SetModel { model }), Request::Command);
    }

    pub fn set_reasoning_level(&self, model: String, effort: String) {
        let set = SetReasoningLevel { model, effort };
        self.command(ClientMessage::SetReasoningLevel(set), Request::Command);
    }

    pub fn abort(&self) {
        self.command(ClientMessage::Abort(Empty {}), Request::Command);
    }

    /// Asks the runtime on screen for its catalogs, as its capabilities
    /// allow.
    fn query_catalogs(&self, wanted: Wanted) {
        let epoch = self.epoch.get_untracked();
        if wanted.modes {
            self.command(ClientMessage::ListModes(Empty {}), Request::Modes { epoch });
        }
        if wanted.models {
            self.command(ClientMessage::ListModels(Empty {}), Request::Models { epoch });
        }
        if wanted.levels {
            let list = ClientMessage::ListReasoningLevels(Empty {});
            self.command(list, Request::Levels { epoch });
        } else {
            self.catalogs.levels.set(Vec::new());
        }
        if wanted.commands {
            self.command(ClientMessage::ListCommands(Empty {}), Request::Commands { epoch });
        }
    }

    /// Sends a prompt; it joins the transcript once the agent accepts it,
    /// and a refused one goes back into the box with its reason. `false`
    /// when it could not be sent at all.
    pub fn prompt(&self, text: &str, behavior: Option<StreamingBehavior>) -> bool {
        let Some(agent_id) = self.selected.get_untracked() else { return false };
        self.drafts.prompt_error.set(None);
        let prompt = Prompt {
            message: text.to_owned(),
            images: None,
            streaming_behavior: behavior,
            pinned: None,
        };
        let queued = behavior.is_some();
        let request = Request::Prompt { agent_id: agent_id.clone(), text: text.to_owned(), queued };
        self.link.send(ClientMessage::Prompt(prompt), Some(agent_id), request)
    }

    /// Takes back the newest steer or follow-up queued to the agent on
    /// screen, before it lands.
    pub fn recall(&self) {
        let Some(agent_id) = self.selected.get_untracked() else { return };
        self.command(ClientMessage::RecallSteer(Empty {}), Request::Recall { agent_id });
    }

    /// An event of the agent on screen carried `seq`: the cursor moves on.
    pub fn saw(&self, seq: u64) {
        self.cursor.update(|cursor| *cursor = Some(cursor.map_or(seq, |known| known.max(seq))));
    }

    /// A `sync`: what the agent is now, in full. Everything the tab knew of
    /// it that the sync does not hold goes (a streamed message that never
    /// completed, a tool card without its result), so that the tab shows
    /// what a freshly opened one shows. Its open questions are returned,
    /// for the questions slice.
    pub fn synced(&self, sync: Sync, seq: Option<u64>) -> Vec<PendingRequest> {
        // What streamed before it is in it.
        self.drop_held();
        // The sync's `seq` travels in the envelope (the decoder takes it there).
        self.cursor.set(sync.seq.or(seq));
        self.resumed.set(Some(false));
        self.needs_sync.set(false);
        self.epoch.set(sync.runtime_epoch);
        self.status.set(sync.status);
        // Settled: nothing this tab queued is still waiting to land.
        if settled(sync.status) {
            self.drafts.landed();
        }
        let wanted = self.catalogs.synced(sync.mode, sync.capabilities.unwrap_or_default());
        // A first sync of the agent just opened shows its end; a resync
        // leaves the view where the user has it.
        if self.transcript.with_untracked(Vec::is_empty) {
            self.scroll_to_end.update(|bump| *bump += 1);
        }
        let window = &sync.live_window;
        transcript::reconcile(
            self.transcript,
            transcript::from_sync(&window.messages, window.compaction_index),
        );
        self.query_catalogs(wanted);
        sync.pending_requests
    }

    /// Holds a delta until the next frame, asking for one if none is due.
    fn hold(&self, message_id: &str, kind: DeltaKind, text: &str) {
        let first = self.held.try_update_value(|held| held.add(message_id, kind, text));
        if first != Some(true) {
            return;
        }
        // In the browser, at the next frame; elsewhere (the tests that
        // play the daemon) there are no frames, so at once.
        #[cfg(feature = "hydrate")]
        {
            let screen = *self;
            request_animation_frame(move || screen.show_held());
        }
        #[cfg(not(feature = "hydrate"))]
        self.show_held();
    }

    fn drop_held(&self) {
        self.held.update_value(|held| drop(held.take()));
    }

    /// Shows the streamed text held so far.
    pub fn show_held(&self) {
        let runs = self.held.try_update_value(Held::take).unwrap_or_default();
        for (message_id, kind, text) in runs {
            transcript::delta(self.transcript, &message_id, kind, &text);
        }
    }

    /// An event of the agent on screen.
    pub fn apply(&self, message: ServerMessage) {
        let rows = self.transcript;
        if let ServerMessage::MessageDelta(delta) = &message {
            if let Some(text) = &delta.text_delta {
                self.hold(&delta.message_id, delta.kind, text);
            }
            return;
        }
        // Whatever streamed before this event is shown before it.
        self.show_held();
        match message {
            ServerMessage::Status(status) => {
                // Idle: whatever this tab queued has landed.
                if status.status == AgentStatus::Idle {
                    self.drafts.landed();
                }
                self.status.set(status.status);
            }
            ServerMessage::MessageComplete(complete) => {
                transcript::complete(rows, &complete.message_id, &complete.message)
            }
            ServerMessage::UserMessage(said) => {
                transcript::said(rows, &said.entry_id, &said.text);
            }
            ServerMessage::TurnEnd(end) if end.aborted => self.aborted(&end.dropped),
            ServerMessage::ToolCall(call) => transcript::tool_call(rows, call),
            ServerMessage::ToolResult(result) => transcript::tool_result(rows, result),
            ServerMessage::Compaction(compaction) => transcript::push(
                rows,
                Item::Compaction {
                    index: compaction.index,
                    tokens_before: compaction.tokens_before,
                    tokens_after: compaction.tokens_after,
                },
            ),
            ServerMessage::Error(error) => {
                // A failed model call can be tried again with the prompt
                // it answered.
                let retry = (error.code == ErrorCode::ProviderError)
                    .then(|| transcript::last_prompt(rows))
                    .flatten();
                let text = format!("{}: {}", error.code, error.message);
                transcript::push(rows, Item::Notice { text, error: true, retry });
            }
            message @ (ServerMessage::ModeChanged(_)
            | ServerMessage::ModelChanged(_)
            | ServerMessage::ReasoningLevelChanged(_)
            | ServerMessage::CommandsChanged(_)) => {
                if let Some(wanted) = self.catalogs.changed(message) {
                    self.query_catalogs(wanted);
                }
            }
            _ => {}
        }
    }

    /// The turn on screen was cut short. A reply it cut off says so itself
    /// (in every tab, and after a reload); otherwise a line here says
    /// where. What this tab had queued behind it, dropped unsent, goes back
    /// into the box (unless something new is being written there).
    fn aborted(&self, dropped: &[String]) {
        // This tab's dropped lines go first: the reply is then the last.
        let mine = transcript::unsent(self.transcript, dropped);
        let stopped = match transcript::ends_cut_off(self.transcript) {
            true => "",
            false => "Stopped here: the turn was aborted. ",
        };
        let said = if mine.is_empty() {
            match dropped.len() {
                0 => String::new(),
                1 => "A message queued behind it was dropped.".to_owned(),
                count => format!("{count} messages queued behind it were dropped."),
            }
        } else {
            self.drafts.landed();
            let back = mine.join("\n\n");
            if self.drafts.is_blank() {
                self.drafts.draft.set(back);
                "What you had queued was not sent; it is back in the message box.".to_owned()
            } else {
                format!("Not sent: {back}")
            }
        };
        let text = format!("{stopped}{said}");
        let text = text.trim_end();
        if !text.is_empty() {
            let text = text.to_owned();
            transcript::push(self.transcript, Item::Notice { text, error: false, retry: None });
        }
    }

    /// The answer to Terminate: put off while a reply is in progress, the
    /// transcript says so (else the reply streams on and nothing seems to
    /// happen); a refusal is told like any.
    pub fn terminated(&self, agent_id: &str, response: &Response) {
        match response.data::<TerminateResult>() {
            Ok(TerminateResult { deferred: true }) if self.shows(agent_id) => {
                let text = "Terminating once the reply in progress ends (Kill stops it now).";
                transcript::push(
                    self.transcript,
                    Item::Notice { text: text.to_owned(), error: false, retry: None },
                );
            }
            Ok(_) => {}
            Err(_) => self.link.answered(response),
        }
    }

    /// A line of the transcript that is no message: a notice of the agent
    /// (`ui_request` of kind `notify`) or of its runtime (an error).
    pub fn notice(&self, text: String, error: bool) {
        transcript::push(self.transcript, Item::Notice { text, error, retry: None });
    }

    /// The runtime of the agent on screen stopped (killed, terminated,
    /// failed, switched to another session): the status is the registry's
    /// `status`, and the rest waits for the next runtime's `sync` (the
    /// daemon sends one to this tab when a runtime starts again; after a
    /// reconnect the tab asks for one).
    pub fn runtime_gone(&self, status: AgentStatus) {
        // A stopped runtime is never mid-turn, whatever the registry last said.
        let status = if status == AgentStatus::Error { status } else { AgentStatus::Idle };
        self.status.set(status);
        self.drafts.landed();
        self.needs_sync.set(true);
    }

    /// The answer to attaching the agent on screen.
    pub fn attached(&self, agent_id: &str, response: &Response) {
        // The answer to an attach of an agent since left: its leaving sent
        // the detach.
        if !self.shows(agent_id) {
            return;
        }
        if let Ok(result) = response.data::<AttachResult>()
            && result.resumed == Some(true)
        {
            self.resumed.set(Some(true));
            // The tab saw the agent mid-turn and it has settled since,
            // or its runtime stopped: a runtime that stopped meanwhile
            // (a daemon restart) settles with no event saying so, so
            // what it settled to (its status, a tool call closed as
            // interrupted) is asked for in a sync.
            let busy = !settled(self.status.get_untracked());
            if (self.needs_sync.get_untracked() || (busy && settled(result.status)))
                && let Some(agent_id) = self.selected.get_untracked()
            {
                self.resync(&agent_id);
            }
        }
        self.unreached.set(false);
        if let Err(error) = &response.outcome {
            // Its node is out of reach: it stays on screen, as the hub
            // last had it, until the node is back.
            if error.code == ErrorCode::NodeOffline {
                self.unreached.set(true);
                return;
            }
            // The agent on screen is gone (or was never there: a stale
            // tab): show none rather than a ghost.
            self.selected.set(None);
            self.transcript.set(Vec::new());
            self.link.tell(format!("Could not open the agent: {}", error.message));
        }
    }

    /// The answer to a prompt: accepted, it is part of the conversation;
    /// refused, it goes back where it was written.
    pub fn prompted(&self, sent: Sent, response: &Response, roster: &Roster) {
        let shown = self.shows(&sent.agent_id);
        match &response.outcome {
            Ok(_) if shown => {
                if sent.queued {
                    self.drafts.queued.update(|count| *count += 1);
                }
                transcript::push(self.transcript, Item::User { entry_id: None, text: sent.text });
                self.window_start.set(None);
                self.scroll_to_end.update(|bump| *bump += 1);
            }
            Ok(_) => {}
            Err(error) if shown => self.drafts.refused(sent.text, &error.message),
            Err(error) => {
                self.drafts.keep_for(&sent.agent_id, sent.text);
                let name = roster.name_of(&sent.agent_id);
                self.link.tell(format!("A prompt to {name} was not sent: {}", error.message));
            }
        }
    }

    /// The answer to `recall_steer` of `agent_id`: the prompt taken back
    /// leaves the transcript for the box (or, if something new is being
    /// written, the note says what it was).
    pub fn recalled(&self, agent_id: &str, response: &Response, ledger: &Ledger) {
        if !self.shows(agent_id) {
            return;
        }
        match response.data::<RecallSteerResult>() {
            Ok(RecallSteerResult { recalled: Some(recalled) }) => {
                self.drafts.queued.update(|queued| *queued = queued.saturating_sub(1));
                transcript::take_back(self.transcript, &recalled.message);
                if self.drafts.is_blank() {
                    self.drafts.draft.set(recalled.message);
                    ledger.note.set(None);
                } else {
                    ledger.tell(format!("Taken back: {}", recalled.message), false);
                }
            }
            Ok(RecallSteerResult { recalled: None }) => {
                self.drafts.landed();
                ledger.tell("Nothing to take back: it has already reached the agent.", false);
            }
            Err(error) => ledger.tell(format!("Could not take it back: {}", error.message), true),
        }
    }

    /// The answer to a catalog query.
    pub fn catalog_answered(&self, request: Request, response: Response) {
        self.catalogs.answered(request, response, self.epoch.get_untracked());
    }
}
