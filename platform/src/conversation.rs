//! The conversation of one session: its entries in memory, the log writer, and
//! what is derived from them. The *live window* is what the model sees and what
//! `sync` shows: the latest compaction summary (if any) followed by every
//! message since that compaction's first kept entry.
//!
//! - `history`: the [`Conversation`] type: opening, appending, flushing.
//! - `window`: the live window, its wire form and its token weight.
//! - `compaction`: planning a compaction and recalling what it summarized.
//! - `lineage`: forks and the list of a session's lineage.
//! - `recorded`: what the log owes (queued inputs) and its settings.

mod compaction;
mod history;
mod lineage;
mod recorded;
mod window;

pub use self::compaction::CompactionPlan;
pub use self::history::Conversation;
pub(crate) use self::lineage::lineage_root;
pub use self::recorded::{RecordedSettings, Undelivered, settings_of, undelivered_of};
pub use self::window::{
    compaction_index_of, entry_tokens, estimate_tokens, forgettable_prefix, is_message,
    live_messages_of, summary_heading, to_wire_message, tool_result_text, window_of,
};
