//! A session's lineage: forking a session at an entry into a new one under
//! its `forks/`, and listing the whole lineage (`session_op list`) with a
//! summary of each session.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use shard_protocol::agent::{ForkOrigin, ForkResult, SessionSummary};
use shard_protocol::diagnostic;

use super::history::Conversation;
use super::recorded::settings_of;
use crate::session_log::{Entry, EntryBody, SessionError, read_log};
use crate::util::{new_id, truncate_chars};

/// At most this many sessions in `session_op list`. Each is a log read
/// whole; a lineage forked more often than this is an accident, and a list
/// a person cannot scan anyway.
const MAX_LISTED_SESSIONS: usize = 256;

/// Characters of a session's title (its first line), `…` included.
const TITLE_CHARS: usize = 80;

impl Conversation {
    /// Materializes the live window as it stood at `from_entry_id` into a new
    /// session under this one's `forks/`. This session is not touched.
    pub async fn fork(&self, from_entry_id: &str) -> Result<ForkResult, SessionError> {
        let at = self
            .position(from_entry_id)
            .ok_or_else(|| SessionError::NotFound(from_entry_id.to_owned()))?;
        let fork_id = format!("fork-{}", new_id());
        let session_id = format!("sess-{}", new_id());
        let settings = settings_of(&self.entries()[..=at]);
        let mut rest = vec![EntryBody::Fork {
            artifact_kind: "fork".into(),
            fork_id: fork_id.clone(),
            source_session_id: self.session_id.clone(),
            source_entry_id: from_entry_id.to_owned(),
        }];
        for entry in &self.entries()[..=at] {
            if let EntryBody::Grant { .. } = entry.body {
                rest.push(entry.body.clone());
            }
        }
        for entry in self.window_until(at + 1) {
            rest.push(match &entry.body {
                EntryBody::Compaction { summary, .. } => EntryBody::User {
                    text: summary.clone(),
                    images: Vec::new(),
                    queued_entry_id: None,
                },
                // What this message delivered was queued in the source.
                EntryBody::User { text, images, .. } => EntryBody::User {
                    text: text.clone(),
                    images: images.clone(),
                    queued_entry_id: None,
                },
                other => other.clone(),
            });
        }
        let dir = self.dir.join("forks").join(&session_id);
        let fork = Self::start(
            dir,
            session_id.clone(),
            &self.cwd,
            settings.model.as_deref().unwrap_or("demo"),
            settings.mode.as_deref().unwrap_or("build"),
            rest,
        )
        .await?;
        let head_entry_id = fork.head_entry_id().unwrap_or_default().to_owned();
        Ok(ForkResult { fork_id, session_id, head_entry_id })
    }

    /// The whole lineage (`session_op list`): the root session above this
    /// one and every fork below the root at any depth, oldest first; at most
    /// [`MAX_LISTED_SESSIONS`], this one always among them. A log that
    /// cannot be read is left out.
    pub fn list_sessions(&self) -> Vec<SessionSummary> {
        // This one from memory: the file may not hold the running turn yet.
        let mut sessions = vec![self.summary()];
        let mut dirs = VecDeque::from([lineage_root(&self.dir)]);
        // Breadth-first, so a bushy lineage shows its older generations.
        while let Some(dir) = dirs.pop_front() {
            if sessions.len() >= MAX_LISTED_SESSIONS {
                break;
            }
            if dir.file_name() != Some(self.session_id.as_ref()) {
                let read = read_log(&dir.join("session.jsonl"));
                if let Some(summary) = read.ok().as_deref().and_then(summary_of) {
                    sessions.push(summary);
                }
            }
            if let Ok(forks) = std::fs::read_dir(dir.join("forks")) {
                let room = MAX_LISTED_SESSIONS.saturating_sub(sessions.len() + dirs.len());
                dirs.extend(forks.flatten().map(|fork| fork.path()).take(room));
            }
        }
        sessions.sort_by(|a, b| (a.created_at, &a.session_id).cmp(&(b.created_at, &b.session_id)));
        sessions
    }

    fn summary(&self) -> SessionSummary {
        summary_of(self.entries()).unwrap_or_else(|| SessionSummary {
            session_id: self.session_id.clone(),
            created_at: 0,
            updated_at: None,
            entries: 0,
            head_entry_id: None,
            title: None,
            latest: None,
            forked_from: None,
        })
    }
}

/// The session at the top of `dir`'s lineage. A fork lives at
/// `<source>/forks/<session_id>/`, so each step up is two folders, taken
/// while the folder above is a session.
pub(crate) fn lineage_root(dir: &Path) -> PathBuf {
    let mut root = dir;
    for _ in 0..MAX_LISTED_SESSIONS {
        let source = root
            .parent()
            .filter(|forks| forks.file_name() == Some("forks".as_ref()))
            .and_then(Path::parent)
            .filter(|source| source.join("session.jsonl").is_file());
        match source {
            Some(source) => root = source,
            None => break,
        }
    }
    root.to_owned()
}

/// The first line of the first user message, made safe to show (it is what
/// a person typed, or a model wrote for a subagent), at most [`TITLE_CHARS`].
fn title_of(entries: &[Entry]) -> Option<String> {
    first_line(user_texts(entries).next()?)
}

/// The same of the newest user message, when there is more than one.
fn latest_of(entries: &[Entry]) -> Option<String> {
    let mut texts = user_texts(entries);
    texts.next()?;
    first_line(texts.last()?)
}

fn user_texts(entries: &[Entry]) -> impl DoubleEndedIterator<Item = &str> {
    entries.iter().filter_map(|entry| match &entry.body {
        EntryBody::User { text, .. } => Some(text.as_str()),
        _ => None,
    })
}

fn first_line(text: &str) -> Option<String> {
    let shown = diagnostic(text);
    let line = shown.lines().map(str::trim).find(|line| !line.is_empty())?;
    if line.chars().count() > TITLE_CHARS {
        Some(truncate_chars(line, TITLE_CHARS - 1))
    } else {
        Some(line.to_owned())
    }
}

fn summary_of(entries: &[Entry]) -> Option<SessionSummary> {
    let Some(Entry { body: EntryBody::Header { session_id, created_at, .. }, .. }) =
        entries.first()
    else {
        return None;
    };
    let forked_from = entries.iter().find_map(|entry| match &entry.body {
        EntryBody::Fork { source_session_id, source_entry_id, .. } => Some(ForkOrigin {
            session_id: source_session_id.clone(),
            entry_id: source_entry_id.clone(),
        }),
        _ => None,
    });
    Some(SessionSummary {
        session_id: session_id.clone(),
        created_at: *created_at,
        updated_at: entries.iter().map(|entry| entry.ts).max(),
        entries: entries.len() as u64,
        head_entry_id: entries.last().map(|entry| entry.id.clone()),
        title: title_of(entries),
        latest: latest_of(entries),
        forked_from,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Entry {
        Entry {
            id: new_id(),
            ts: 1,
            body: EntryBody::User {
                text: text.to_owned(),
                images: Vec::new(),
                queued_entry_id: None,
            },
        }
    }

    #[test]
    fn a_title_is_the_first_line_of_the_first_user_message() {
        let entries = [user("\n  Fix the build  \r\nthen the tests"), user("later")];
        assert_eq!(title_of(&entries).as_deref(), Some("Fix the build"));
        assert_eq!(title_of(&[]), None);
    }

    #[test]
    fn latest_is_the_newest_user_message_when_there_are_two() {
        assert_eq!(latest_of(&[user("only one")]), None);
        let entries = [user("Fix the build"), user("then the tests\nall of them"), user("  ")];
        assert_eq!(latest_of(&entries), None, "a blank newest message has no line to show");
        let entries = [user("Fix the build"), user("x"), user("\u{1b}[31mand lint\nnow")];
        assert_eq!(latest_of(&entries).as_deref(), Some("and lint"));
    }

    #[test]
    fn a_title_is_safe_to_show_and_at_most_80_characters() {
        let title = title_of(&[user("\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{202e}alert")]);
        assert_eq!(title.as_deref(), Some("red\u{fffd}alert"));
        let exact = "é".repeat(TITLE_CHARS);
        assert_eq!(title_of(&[user(&exact)]), Some(exact));
        let long = title_of(&[user(&"é".repeat(TITLE_CHARS + 1))]).expect("title");
        assert_eq!(long.chars().count(), TITLE_CHARS);
        assert!(long.ends_with("é…"));
    }

    #[test]
    fn the_lineage_root_is_found_above_nested_forks() {
        let home = tempfile::TempDir::new().expect("home");
        let root = home.path().join("sess-root");
        let child = root.join("forks/sess-child");
        let grandchild = child.join("forks/sess-grandchild");
        for dir in [&root, &child, &grandchild] {
            std::fs::create_dir_all(dir).expect("dir");
            std::fs::write(dir.join("session.jsonl"), "{}\n").expect("log");
        }
        assert_eq!(lineage_root(&grandchild), root);
        assert_eq!(lineage_root(&root), root);
    }
}
