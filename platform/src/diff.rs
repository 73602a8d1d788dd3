//! An edit as Shard shows it: unified-diff hunks of whole lines.

use shard_protocol::types::Hunk;
use similar::{ChangeTag, TextDiff};

/// Unified-diff hunks with three lines of context (docs/PROTOCOL-NOTES.md).
pub fn hunks(before: &str, after: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(before, after);
    diff.grouped_ops(3)
        .into_iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old = first.old_range().start..last.old_range().end;
            let new = first.new_range().start..last.new_range().end;
            let lines = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|change| {
                    let sign = match change.tag() {
                        ChangeTag::Equal => ' ',
                        ChangeTag::Delete => '-',
                        ChangeTag::Insert => '+',
                    };
                    format!("{sign}{}", change.value().trim_end_matches(['\n', '\r']))
                })
                .collect();
            // Unified-diff convention: an empty side starts at the line before.
            let start = |range: &std::ops::Range<usize>| {
                if range.is_empty() { range.start as u64 } else { range.start as u64 + 1 }
            };
            Some(Hunk {
                old_start: start(&old),
                old_lines: old.len() as u64,
                new_start: start(&new),
                new_lines: new.len() as u64,
                lines,
            })
        })
        .collect()
}
