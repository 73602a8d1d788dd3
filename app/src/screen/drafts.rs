//! What is being written to each agent: the prompt in the box of the agent
//! on screen, the half-written ones of the others, why the last prompt was
//! refused, and how many steers and follow-ups this tab queued that may
//! not have landed yet. All of it outlives a reconnect and a failed send.

use std::collections::BTreeMap;

use leptos::prelude::*;

#[derive(Clone, Copy)]
pub struct Drafts {
    /// The prompt being written to the agent on screen.
    pub draft: RwSignal<String>,
    /// Half-written prompts to the agents not on screen.
    pub others: RwSignal<BTreeMap<String, String>>,
    /// Why the last prompt to the agent on screen was not sent.
    pub prompt_error: RwSignal<Option<String>>,
    /// Steers and follow-ups this tab queued to the agent on screen that
    /// may not have landed yet: "Take back" is offered while there are.
    pub queued: RwSignal<usize>,
}

impl Drafts {
    pub fn new() -> Self {
        Self {
            draft: RwSignal::new(String::new()),
            others: RwSignal::new(BTreeMap::new()),
            prompt_error: RwSignal::new(None),
            queued: RwSignal::new(0),
        }
    }

    /// The screen goes from `previous` to `next`: each agent keeps its own
    /// half-written prompt.
    pub fn switch(&self, previous: Option<&str>, next: Option<&str>) {
        let draft = self.draft.get_untracked();
        self.others.update(|others| {
            if let Some(previous) = previous {
                if draft.is_empty() {
                    others.remove(previous);
                } else {
                    others.insert(previous.to_owned(), draft);
                }
            }
        });
        let draft =
            next.and_then(|next| self.others.with_untracked(|others| others.get(next).cloned()));
        self.draft.set(draft.unwrap_or_default());
        self.prompt_error.set(None);
        self.queued.set(0);
    }

    /// Whether nothing new is being written (untracked).
    pub fn is_blank(&self) -> bool {
        self.draft.with_untracked(|draft| draft.trim().is_empty())
    }

    /// A prompt to the agent on screen was refused: back into the box,
    /// unless something new is being written, with its reason.
    pub fn refused(&self, text: String, why: &str) {
        if self.is_blank() {
            self.draft.set(text);
        }
        self.prompt_error.set(Some(format!("Not sent: {why}")));
    }

    /// A prompt to `agent_id`, no longer on screen, was refused: kept as
    /// its draft, for when it is opened again.
    pub fn keep_for(&self, agent_id: &str, text: String) {
        self.others.update(|others| {
            others.entry(agent_id.to_owned()).or_insert(text);
        });
    }

    /// A message to edit (crate::ledger::Ledger::edit_from): into the box,
    /// unless something new is being written there; the keyboard to it.
    pub fn editing(&self, text: String) {
        if self.is_blank() {
            self.draft.set(text);
        }
        #[cfg(feature = "hydrate")]
        crate::reveal::reveal(".prompt".to_owned(), Some("textarea"));
    }

    /// Nothing this tab queued is still waiting to land.
    pub fn landed(&self) {
        self.queued.set(0);
    }
}

impl Default for Drafts {
    fn default() -> Self {
        Self::new()
    }
}
