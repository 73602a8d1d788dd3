//! Compaction, deterministic (no model call): the summarized range of the
//! live window is replaced by an extractive summary naming each request,
//! tool call and answer, and the exact messages stay in the log, where
//! `recall` pages through them.

use shard_protocol::types::ContentBlock;

use super::history::Conversation;
use super::window::{entry_tokens, estimate_tokens, is_message};
use crate::session_log::{Entry, EntryBody};
use crate::util::truncate_chars;

/// A planned compaction: everything before `cut` in the window is summarized.
pub struct CompactionPlan {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub message_range: (String, String),
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl Conversation {
    /// Plans a compaction that keeps at least `keep_recent_tokens` of the most
    /// recent conversation, cutting only before a user prompt so that no tool
    /// call is separated from its result. `None`: no safe cut.
    pub fn plan_compaction(&self, keep_recent_tokens: u64) -> Option<CompactionPlan> {
        let window = self.window();
        let tokens_before: u64 = window.iter().map(|entry| entry_tokens(entry)).sum();
        let is_prompt = |entry: &&Entry| matches!(entry.body, EntryBody::User { .. });
        // Walk back from the newest entry until enough is kept.
        let mut kept = 0;
        let mut reached = None;
        for (at, entry) in window.iter().enumerate().rev() {
            kept += entry_tokens(entry);
            if kept >= keep_recent_tokens {
                reached = Some(at);
                break;
            }
        }
        let reached = reached?;
        // The nearest prompt at or before that point, else the nearest after
        // it; something must stay on each side of the cut.
        let cut = (1..=reached)
            .rev()
            .find(|&at| is_prompt(&window[at]))
            .or_else(|| (reached + 1..window.len()).find(|&at| is_prompt(&window[at])))?;
        let summarized = &window[..cut];
        if !summarized.iter().any(|entry| is_message(entry)) {
            return None;
        }
        let first = match &summarized[0].body {
            EntryBody::Compaction { message_range, .. } => message_range.0.clone(),
            _ => summarized[0].id.clone(),
        };
        let last = summarized.last()?.id.clone();
        let summary = summarize(summarized);
        let tokens_after = estimate_tokens(&summary)
            + window[cut..].iter().map(|entry| entry_tokens(entry)).sum::<u64>();
        Some(CompactionPlan {
            summary,
            first_kept_entry_id: window[cut].id.clone(),
            message_range: (first, last),
            tokens_before,
            tokens_after,
        })
    }

    /// The exact messages a compaction summarized, `limit` at a time.
    pub fn recall(&self, index: u64, offset: usize, limit: usize) -> Option<(Vec<&Entry>, usize)> {
        let (first, last) = self.entries().iter().find_map(|entry| match &entry.body {
            EntryBody::Compaction { index: found, message_range, .. } if *found == index => {
                Some(message_range.clone())
            }
            _ => None,
        })?;
        let (from, to) = (self.position(&first)?, self.position(&last)?);
        let range: Vec<&Entry> =
            self.entries()[from..=to].iter().filter(|entry| is_message(entry)).collect();
        let total = range.len();
        Some((range.into_iter().skip(offset).take(limit).collect(), total))
    }
}

fn summarize(entries: &[&Entry]) -> String {
    const LINE: usize = 240;
    let mut lines = Vec::new();
    for entry in entries {
        match &entry.body {
            EntryBody::Compaction { summary, .. } => lines.push(truncate_chars(summary, 2000)),
            EntryBody::User { text, .. } => {
                lines.push(format!("- user asked: {}", truncate_chars(text, LINE)))
            }
            EntryBody::Assistant { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            lines.push(format!("- assistant said: {}", truncate_chars(text, LINE)))
                        }
                        ContentBlock::ToolCall { name, args, .. } => lines.push(format!(
                            "- assistant called {name} {}",
                            truncate_chars(
                                &serde_json::Value::Object(args.clone()).to_string(),
                                LINE
                            )
                        )),
                        _ => {}
                    }
                }
            }
            EntryBody::ToolResult { tool_name, is_error, exit_code, .. } => {
                let outcome = match (is_error, exit_code) {
                    (_, Some(code)) => format!("exit code {code}"),
                    (true, None) => "error".to_owned(),
                    (false, None) => "ok".to_owned(),
                };
                lines.push(format!("- {tool_name} finished: {outcome}"));
            }
            _ => {}
        }
    }
    lines.join("\n")
}
