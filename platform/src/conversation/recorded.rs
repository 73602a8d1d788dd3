//! What a session log records beyond its messages, read back from the
//! entries: the steers and follow-ups still owed, and the mode, model and
//! reasoning level as last set.

use shard_protocol::agent::StreamingBehavior;
use shard_protocol::types::Image;
use std::collections::HashSet;

use crate::session_log::{Entry, EntryBody};

/// A steer or follow-up the log holds as accepted and not yet delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct Undelivered {
    /// Its `queued` entry.
    pub entry_id: String,
    pub text: String,
    pub images: Vec<Image>,
    pub behavior: StreamingBehavior,
    pub pinned: bool,
}

/// The mode, model and reasoning level recorded in the log.
#[derive(Debug, Clone, Default)]
pub struct RecordedSettings {
    pub mode: Option<String>,
    pub model: Option<String>,
    pub reasoning_level: Option<String>,
}

/// The `queued` entries of a log that no `user` entry delivered and no
/// `unqueued` entry took back, oldest first.
pub fn undelivered_of(entries: &[Entry]) -> Vec<Undelivered> {
    let settled: HashSet<&str> = entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::User { queued_entry_id: Some(id), .. }
            | EntryBody::Unqueued { queued_entry_id: id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    entries
        .iter()
        .filter(|entry| !settled.contains(entry.id.as_str()))
        .filter_map(|entry| match &entry.body {
            EntryBody::Queued { text, images, streaming_behavior, pinned } => Some(Undelivered {
                entry_id: entry.id.clone(),
                text: text.clone(),
                images: images.clone(),
                behavior: *streaming_behavior,
                pinned: *pinned,
            }),
            _ => None,
        })
        .collect()
}

/// The mode, model and reasoning level a log records: the header's, then
/// every later settings change.
pub fn settings_of(entries: &[Entry]) -> RecordedSettings {
    let mut settings = RecordedSettings::default();
    for entry in entries {
        settings.apply(entry);
    }
    settings
}

impl RecordedSettings {
    /// Folds in one entry: the header sets, settings changes override.
    pub fn apply(&mut self, entry: &Entry) {
        match &entry.body {
            EntryBody::Header { model, mode, .. } => {
                self.model = Some(model.clone());
                self.mode = Some(mode.clone());
            }
            EntryBody::Settings { mode, model, reasoning_level } => {
                if mode.is_some() {
                    self.mode.clone_from(mode);
                }
                if model.is_some() {
                    self.model.clone_from(model);
                }
                if reasoning_level.is_some() {
                    self.reasoning_level.clone_from(reasoning_level);
                }
            }
            _ => {}
        }
    }
}
