//! Streamed text held for the next frame: a burst delivers thousands of
//! `message_delta`s between two frames, and showing each one as it comes
//! would change the page (and have the browser lay it out) thousands of
//! times for one picture. Deltas are folded here as they arrive, in order,
//! and the screen shows them once a frame, or at once when any other event
//! of the agent comes, so nothing is ever shown out of order.

use shard_protocol::agent::DeltaKind;

/// Deltas not yet shown: runs of one block of one message joined.
#[derive(Default)]
pub struct Held {
    runs: Vec<(String, DeltaKind, String)>,
}

impl Held {
    /// Adds a delta; `true` when nothing was held before it, so a frame is
    /// to be asked for.
    pub fn add(&mut self, message_id: &str, kind: DeltaKind, text: &str) -> bool {
        let first = self.runs.is_empty();
        match self.runs.last_mut() {
            Some((id, held_kind, held)) if id == message_id && *held_kind == kind => {
                held.push_str(text)
            }
            _ => self.runs.push((message_id.to_owned(), kind, text.to_owned())),
        }
        first
    }

    /// What is held, in arrival order, leaving nothing.
    pub fn take(&mut self) -> Vec<(String, DeltaKind, String)> {
        std::mem::take(&mut self.runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_one_block_are_joined_and_order_is_kept() {
        let mut held = Held::default();
        assert!(held.add("m-1", DeltaKind::Thinking, "hm"), "the first asks for a frame");
        assert!(!held.add("m-1", DeltaKind::Thinking, "m. "));
        assert!(!held.add("m-1", DeltaKind::Text, "One"));
        assert!(!held.add("m-1", DeltaKind::Text, ", two"));
        assert!(!held.add("m-2", DeltaKind::Text, "other"));
        assert!(!held.add("m-1", DeltaKind::Text, ", three"));
        let taken = held.take();
        let taken: Vec<(&str, DeltaKind, &str)> =
            taken.iter().map(|(id, kind, text)| (id.as_str(), *kind, text.as_str())).collect();
        assert_eq!(
            taken,
            [
                ("m-1", DeltaKind::Thinking, "hmm. "),
                ("m-1", DeltaKind::Text, "One, two"),
                ("m-2", DeltaKind::Text, "other"),
                ("m-1", DeltaKind::Text, ", three"),
            ]
        );
        assert!(held.take().is_empty(), "nothing is shown twice");
        assert!(held.add("m-3", DeltaKind::Text, "x"), "after a take, the next asks again");
    }
}
