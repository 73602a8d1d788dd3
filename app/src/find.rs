//! Finding in the transcript of the agent on screen, and bringing one of
//! its rows into view. The transcript view renders a window of the rows
//! (crate::transcript::WINDOW_ROWS), so the browser's own find sees only
//! that window: this one reads the whole transcript as the page holds it,
//! moves the window to the row it marks, and the view scrolls to it.
//!
//! A search result (crate::search) is a row to bring into view too: its
//! message is a [`Target`], marked once a `sync` of its session holds it.
//!
//! A marked row holds the view: the transcript stops following its end
//! until the mark goes (the find bar closed, a prompt sent, "Jump to the
//! latest", another agent opened).

use leptos::prelude::*;

use crate::transcript::{self, Rows};

/// A search result waiting for the transcript that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub agent_id: String,
    pub session_id: String,
    pub entry_id: String,
    /// Whether the agent runs that session now (else the user switches to
    /// it first, and its `sync` brings the message).
    pub active: bool,
}

/// Said above the prompt box when a result's message is not in its
/// session's transcript: compaction replaced it with a summary.
pub const COMPACTED: &str =
    "That message is no longer in the transcript: compaction replaced it with a summary.";

#[derive(Clone, Copy)]
pub struct Find {
    /// Whether the find bar is open.
    pub open: RwSignal<bool>,
    pub text: RwSignal<String>,
    /// The keys of the rows holding the text, in transcript order.
    pub hits: RwSignal<Vec<u64>>,
    /// Which of them is the current one.
    pub current: RwSignal<Option<usize>>,
    /// The row marked on screen: the current hit, or a result's message.
    pub marked: RwSignal<Option<u64>>,
    /// Bumped whenever the marked row is to be scrolled into view.
    pub reveal: RwSignal<u64>,
    target: StoredValue<Option<Target>>,
    rows: Rows,
    /// The transcript view's window (the screen's).
    window: RwSignal<Option<usize>>,
}

impl Find {
    pub fn new(rows: Rows, window: RwSignal<Option<usize>>) -> Self {
        Self {
            open: RwSignal::new(false),
            text: RwSignal::new(String::new()),
            hits: RwSignal::new(Vec::new()),
            current: RwSignal::new(None),
            marked: RwSignal::new(None),
            reveal: RwSignal::new(0),
            target: StoredValue::new(None),
            rows,
            window,
        }
    }

    /// Another agent is on screen: nothing found in the last one stays.
    pub fn clear(&self) {
        self.open.set(false);
        self.text.set(String::new());
        self.forget_hits();
        self.target.set_value(None);
    }

    fn forget_hits(&self) {
        self.hits.set(Vec::new());
        self.current.set(None);
        self.marked.set(None);
    }

    /// The user went back to the end (sent a prompt): no row holds the
    /// view any more.
    pub fn unmark(&self) {
        if self.marked.get_untracked().is_some() {
            self.marked.set(None);
        }
    }

    pub fn close(&self) {
        self.open.set(false);
        self.forget_hits();
    }

    /// The keys of the rows holding `needle` (lower case).
    fn matching(&self, needle: &str) -> Vec<u64> {
        self.rows.with_untracked(|rows| {
            rows.iter()
                .filter(|row| transcript::text_of(row).to_lowercase().contains(needle))
                .map(|row| row.key)
                .collect()
        })
    }

    /// Finds `text` (any case) in the whole transcript and marks the first
    /// row that holds it.
    pub fn find(&self, text: String) {
        let needle = text.trim().to_lowercase();
        self.text.set(text);
        if needle.is_empty() {
            self.forget_hits();
            return;
        }
        let hits = self.matching(&needle);
        let first = hits.first().copied();
        self.hits.set(hits);
        match first {
            Some(key) => {
                self.current.set(Some(0));
                self.mark(key);
            }
            None => {
                self.current.set(None);
                self.marked.set(None);
            }
        }
    }

    /// The next (or previous) row holding the text, round the end. The
    /// transcript may have grown since: the rows are found again, and the
    /// step is from the current one.
    pub fn step(&self, forward: bool) {
        let needle = self.text.get_untracked().trim().to_lowercase();
        if needle.is_empty() {
            return;
        }
        let hits = self.matching(&needle);
        if hits.is_empty() {
            self.hits.set(hits);
            self.current.set(None);
            self.marked.set(None);
            return;
        }
        let len = hits.len();
        let here = self.marked.get_untracked().and_then(|key| hits.iter().position(|&k| k == key));
        let next = match here {
            Some(at) if forward => (at + 1) % len,
            Some(at) => (at + len - 1) % len,
            None if forward => 0,
            None => len - 1,
        };
        let key = hits[next];
        self.hits.set(hits);
        self.current.set(Some(next));
        self.mark(key);
    }

    /// Marks the row `key`, moves the window to it and asks the view to
    /// scroll there.
    fn mark(&self, key: u64) {
        let place = self.rows.with_untracked(|rows| {
            rows.iter().position(|row| row.key == key).map(|index| (index, rows.len()))
        });
        if let Some((index, len)) = place {
            let start = transcript::showing(self.window.get_untracked(), index, len);
            if start != self.window.get_untracked() {
                self.window.set(start);
            }
        }
        self.marked.set(Some(key));
        self.reveal.update(|bump| *bump += 1);
    }

    /// A search result to bring into view once its session's transcript is
    /// on screen.
    pub fn aim(&self, target: Target) {
        self.target.set_value(Some(target));
    }

    /// The agent switched to `session_id`: a result in it is now in the
    /// transcript its `sync` brings.
    pub fn activated(&self, session_id: &str) {
        self.target.update_value(|target| {
            if let Some(target) = target.as_mut().filter(|target| target.session_id == session_id) {
                target.active = true;
            }
        });
    }

    /// The transcript of `agent_id` is on screen (a `sync` came, or it was
    /// there already): the result waiting for it is marked. Returns what
    /// to tell the user when its message is not there.
    pub fn seek(&self, agent_id: &str) -> Option<&'static str> {
        let wanted = self.target.with_value(|target| {
            target.as_ref().is_some_and(|t| t.active && t.agent_id == agent_id)
        });
        if !wanted {
            return None;
        }
        let target = self.target.try_update_value(Option::take).flatten()?;
        let key = self.rows.with_untracked(|rows| {
            rows.iter()
                .find(|row| transcript::entry_of(row).as_deref() == Some(target.entry_id.as_str()))
                .map(|row| row.key)
        });
        match key {
            Some(key) => {
                self.mark(key);
                None
            }
            None => Some(COMPACTED),
        }
    }

    /// "n of m", or why there is nothing to step through.
    pub fn count_label(&self) -> String {
        let total = self.hits.with(Vec::len);
        match (self.current.get(), total) {
            (_, 0) if self.text.with(|text| text.trim().is_empty()) => String::new(),
            (_, 0) => "no match".to_owned(),
            (Some(at), total) => format!("{} of {total}", at + 1),
            (None, total) => format!("{total} found"),
        }
    }
}
