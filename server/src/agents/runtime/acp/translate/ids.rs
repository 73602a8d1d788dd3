//! Shard's ids for what the translator shows (turns, messages, questions,
//! forms, the plan's card): one counter for all of them, behind a prefix
//! random to the process, so that no id of an earlier process (still
//! shown by clients after a restart) recurs. Passed to each part that
//! mints one.

/// The ids handed out by one translator.
pub(super) struct Ids {
    /// What this process's ids start with.
    process: String,
    /// The last number handed out.
    last: u64,
}

impl Ids {
    /// Ids behind a prefix of their own.
    pub(super) fn new(process: String) -> Self {
        Self { process, last: 0 }
    }

    /// Ids behind a random prefix.
    pub(super) fn random() -> Self {
        Self::new(crate::id::random_hex())
    }

    /// The next id, as `{prefix}-{process}-{n}`.
    pub(super) fn fresh(&mut self, prefix: &str) -> String {
        self.last += 1;
        format!("{prefix}-{}-{}", self.process, self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_counter_numbers_every_kind_of_id_in_turn() {
        let mut ids = Ids::new("abc".to_owned());
        assert_eq!(ids.fresh("turn"), "turn-abc-1");
        assert_eq!(ids.fresh("msg"), "msg-abc-2");
        assert_eq!(ids.fresh("perm"), "perm-abc-3");
    }

    #[test]
    fn two_processes_never_hand_out_the_same_id() {
        assert_ne!(Ids::random().fresh("msg"), Ids::random().fresh("msg"));
    }
}
