//! The agent's event journal (docs/PROTOCOL-NOTES.md, "Event sequence
//! numbers and resume"): every per-agent event a client receives carries a
//! `seq`, strictly increasing for the agent's whole life, and the latest
//! ones are kept in `<agent dir>/journal.log` so that a client that dropped
//! resumes from its cursor with exactly what it missed.
//!
//! - Each event is stamped (`{"agent_id":…,"seq":N,…}`) and appended as
//!   `N<TAB>event` through a buffer the host flushes after every batch of
//!   the agent's output and before it reads the journal.
//! - Numbers are reserved ahead in `journal.next` (written before a number
//!   past the reservation is used), so a daemon killed with unflushed
//!   events never hands out a number twice. A clean stop records the exact
//!   next number; after an unclean one the journal starts over past the
//!   reservation, since what it lost cannot be told apart from what it
//!   kept, and every older cursor gets a fresh `sync`.
//! - Retention is bounded by events and bytes: once the file holds twice
//!   either bound, it is rewritten with the newest events that fit.
//! - The file is opened only while the host is awake: a dormant agent
//!   holds no descriptor and no buffer.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agents::Wire;

/// Numbers reserved at a time.
const RESERVE: u64 = 4096;
const LOG: &str = "journal.log";
const NEXT: &str = "journal.next";

/// How much of an agent's history the journal keeps.
#[derive(Debug, Clone, Copy)]
pub struct JournalLimits {
    pub events: usize,
    pub bytes: usize,
}

impl Default for JournalLimits {
    fn default() -> Self {
        Self { events: 10_000, bytes: 2 * 1024 * 1024 }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct NextRecord {
    /// The first number not yet given out (clean) or reserved (not clean).
    next_seq: u64,
    clean: bool,
}

/// The journal's state once read from disk.
struct Open {
    next_seq: u64,
    reserved: u64,
    /// The oldest number the file holds (`next_seq` when it holds none).
    first_seq: u64,
    count: usize,
    bytes: usize,
    writer: Option<BufWriter<File>>,
    /// A write failed: the journal goes on in numbers only (resumes reset).
    broken: bool,
}

pub struct Journal {
    dir: PathBuf,
    limits: JournalLimits,
    open: Option<Open>,
    /// The agent id the last event was stamped with, and it as JSON: the
    /// same for every event, so quoted once.
    quoted: Option<(String, String)>,
}

impl Journal {
    pub fn new(dir: PathBuf, limits: JournalLimits) -> Self {
        Self { dir, limits, open: None, quoted: None }
    }

    /// The last number given out (0: none yet).
    pub fn last_seq(&mut self) -> u64 {
        self.state().next_seq - 1
    }

    /// `line` (one event of the agent, serialized) tagged with the agent
    /// and its number, and recorded.
    pub fn stamp(&mut self, agent_id: &str, line: &str) -> Wire {
        // Borrowed field by field: this runs for every event, and cloning
        // the path would allocate each time.
        let Self { dir, limits, open, quoted } = self;
        let (dir, limits) = (dir.as_path(), *limits);
        let state = open.get_or_insert_with(|| load(dir));
        let seq = state.next_seq;
        state.next_seq += 1;
        if seq >= state.reserved && !state.broken {
            state.reserved = seq + RESERVE;
            let reserved = state.reserved;
            if let Err(error) = write_next(dir, reserved, false) {
                state.fail(&error);
            }
        }
        let quoted = match quoted {
            Some((id, quoted)) if id == agent_id => quoted,
            _ => {
                let json = Value::String(agent_id.to_owned()).to_string();
                &quoted.insert((agent_id.to_owned(), json)).1
            }
        };
        let rest = line.trim().strip_prefix('{').unwrap_or(line);
        let separator = if rest.trim_start().starts_with('}') { "" } else { "," };
        let event = format!("{{\"agent_id\":{quoted},\"seq\":{seq}{separator}{rest}");
        if !state.broken {
            // `N<TAB>event`, written in parts: no second copy of the event.
            let record = |writer: &mut BufWriter<File>| {
                write!(writer, "{seq}\t")?;
                writer.write_all(event.as_bytes())?;
                writer.write_all(b"\n")
            };
            let digits = seq.checked_ilog10().unwrap_or(0) as usize + 1;
            match state.writer(dir).and_then(record) {
                Ok(()) => {
                    state.count += 1;
                    state.bytes += digits + event.len() + 2;
                    if (state.count > 2 * limits.events || state.bytes > 2 * limits.bytes)
                        && let Err(error) = state.compact(dir, limits)
                    {
                        state.fail(&error);
                    }
                }
                Err(error) => state.fail(&error),
            }
        }
        Wire::from(event)
    }

    /// The events after `after`, oldest first, when the journal holds all
    /// of them and they fit in `budget` bytes; `None` when a client at
    /// `after` needs a fresh `sync` instead.
    pub fn since(&mut self, after: u64, budget: usize) -> Option<Vec<Wire>> {
        let dir = self.dir.clone();
        let state = self.state();
        if after >= state.next_seq || state.broken {
            return None;
        }
        if after + 1 == state.next_seq {
            return Some(Vec::new());
        }
        if after + 1 < state.first_seq {
            return None;
        }
        if let Some(writer) = &mut state.writer
            && let Err(error) = writer.flush()
        {
            state.fail(&error);
            return None;
        }
        let file = File::open(dir.join(LOG)).ok()?;
        let mut events = Vec::new();
        let mut size = 0;
        for line in BufReader::new(file).lines() {
            let line = line.ok()?;
            let Some((seq, event)) = parse(&line) else { continue };
            if seq <= after {
                continue;
            }
            size += event.len();
            if size > budget {
                return None;
            }
            events.push(Wire::from(event.to_owned()));
        }
        Some(events)
    }

    /// Writes out what is buffered.
    pub fn flush(&mut self) {
        if let Some(state) = &mut self.open
            && let Some(writer) = &mut state.writer
            && let Err(error) = writer.flush()
        {
            state.fail(&error);
        }
    }

    /// The host goes dormant or stops: flush, record a clean stop, close.
    pub fn close(&mut self) {
        let dir = self.dir.clone();
        let Some(state) = &mut self.open else { return };
        let Some(mut writer) = state.writer.take() else { return };
        if let Err(error) = writer.flush() {
            state.fail(&error);
            return;
        }
        drop(writer);
        if let Err(error) = write_next(&dir, state.next_seq, true) {
            state.fail(&error);
            return;
        }
        state.reserved = state.next_seq;
    }

    /// Every cursor given out so far gets a fresh `sync` from now on: the
    /// agent switched sessions, and the events before tell of another
    /// conversation. The file is emptied and one number is skipped, so even
    /// a client that had every event finds its cursor outside the journal.
    pub fn start_over(&mut self) {
        let dir = self.dir.clone();
        let state = self.state();
        state.writer = None;
        if let Err(error) = crate::home::write_private(&dir.join(LOG), b"") {
            state.fail(&error);
        }
        state.next_seq += 1;
        state.first_seq = state.next_seq;
        state.count = 0;
        state.bytes = 0;
        // A clean point: nothing is in flight, and the next write reserves
        // again before it numbers anything.
        state.reserved = state.next_seq;
        if let Err(error) = write_next(&dir, state.next_seq, true) {
            state.fail(&error);
        }
    }

    fn state(&mut self) -> &mut Open {
        let dir = &self.dir;
        self.open.get_or_insert_with(|| load(dir))
    }
}

impl Open {
    fn writer(&mut self, dir: &std::path::Path) -> std::io::Result<&mut BufWriter<File>> {
        if self.writer.is_none() {
            if self.reserved <= self.next_seq {
                // Reopened after a clean close: reserve before writing.
                self.reserved = self.next_seq + RESERVE;
                write_next(dir, self.reserved, false)?;
            }
            crate::home::prepare_dir(dir).map_err(std::io::Error::other)?;
            let file = private_append(&dir.join(LOG))?;
            self.writer = Some(BufWriter::with_capacity(64 * 1024, file));
        }
        self.writer.as_mut().ok_or_else(|| std::io::Error::other("journal writer"))
    }

    fn fail(&mut self, error: &dyn std::fmt::Display) {
        if !self.broken {
            tracing::error!(%error, "the event journal cannot be written; resumes will get a fresh sync");
        }
        self.broken = true;
        self.writer = None;
        self.first_seq = self.next_seq;
    }

    /// Rewrites the file with the newest events within `limits`.
    fn compact(&mut self, dir: &std::path::Path, limits: JournalLimits) -> std::io::Result<()> {
        if let Some(writer) = &mut self.writer {
            writer.flush()?;
        }
        self.writer = None;
        let path = dir.join(LOG);
        let lines: Vec<String> =
            BufReader::new(File::open(&path)?).lines().collect::<Result<_, _>>()?;
        let mut kept = Vec::new();
        let mut bytes = 0;
        for line in lines.iter().rev() {
            if kept.len() == limits.events || bytes + line.len() + 1 > limits.bytes {
                break;
            }
            bytes += line.len() + 1;
            kept.push(line.as_str());
        }
        kept.reverse();
        let mut text = String::with_capacity(bytes);
        for line in &kept {
            text.push_str(line);
            text.push('\n');
        }
        crate::home::write_private(&path, text.as_bytes()).map_err(std::io::Error::other)?;
        self.first_seq =
            kept.first().and_then(|line| parse(line)).map_or(self.next_seq, |(seq, _)| seq);
        self.count = kept.len();
        self.bytes = bytes;
        Ok(())
    }
}

/// `N<TAB>event`.
fn parse(line: &str) -> Option<(u64, &str)> {
    let (seq, event) = line.split_once('\t')?;
    Some((seq.parse().ok()?, event))
}

fn private_append(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

fn write_next(dir: &std::path::Path, next_seq: u64, clean: bool) -> std::io::Result<()> {
    crate::home::prepare_dir(dir).map_err(std::io::Error::other)?;
    let bytes = serde_json::to_vec(&NextRecord { next_seq, clean })?;
    crate::home::write_private(&dir.join(NEXT), &bytes).map_err(std::io::Error::other)
}

/// Reads the journal of `dir`: its numbers and what the file holds. After
/// an unclean stop (which is also the only way to leave a torn last line)
/// the file is emptied and numbering goes on past the reservation.
fn load(dir: &std::path::Path) -> Open {
    let next: Option<NextRecord> =
        std::fs::read(dir.join(NEXT)).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let mut first_seq = None;
    let mut last_seq = 0;
    let mut count = 0;
    let mut bytes = 0;
    if let Ok(file) = File::open(dir.join(LOG)) {
        for line in BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let Some((seq, _)) = parse(&line) else { break };
            first_seq.get_or_insert(seq);
            last_seq = seq;
            count += 1;
            bytes += line.len() + 1;
        }
    }
    // An empty file after a clean stop (the journal started over) goes on
    // from the recorded number.
    let clean = match &next {
        Some(next) if next.clean => count == 0 || next.next_seq == last_seq + 1,
        Some(_) => false,
        None => count == 0,
    };
    let next_seq = match &next {
        Some(next) if clean && count == 0 => next.next_seq.max(1),
        _ => last_seq + 1,
    };
    let mut open = Open {
        next_seq,
        reserved: 0,
        first_seq: first_seq.unwrap_or(next_seq),
        count,
        bytes,
        writer: None,
        broken: false,
    };
    if clean {
        open.reserved = open.next_seq;
        return open;
    }
    let past = next.map_or(0, |next| next.next_seq).max(last_seq + 1);
    tracing::warn!(dir = %dir.display(), "the event journal was not closed cleanly; older cursors get a fresh sync");
    if let Err(error) = crate::home::write_private(&dir.join(LOG), b"") {
        open.fail(&error);
    }
    open.next_seq = past;
    open.first_seq = past;
    open.count = 0;
    open.bytes = 0;
    open.reserved = past;
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(dir: &std::path::Path, events: usize) -> Journal {
        Journal::new(dir.to_path_buf(), JournalLimits { events, bytes: 1 << 20 })
    }

    fn seq_of(wire: &Wire) -> u64 {
        let value: Value = serde_json::from_str(wire.as_str()).expect("json");
        value["seq"].as_u64().expect("seq")
    }

    #[test]
    fn numbers_survive_a_clean_close_and_a_crash_never_reuses_one() {
        let dir = tempfile::tempdir().expect("dir");
        let mut first = journal(dir.path(), 100);
        for n in 1..=5 {
            let wire = first.stamp("a1", r#"{"type":"status","status":"idle"}"#);
            assert_eq!(seq_of(&wire), n);
        }
        assert_eq!(first.since(2, usize::MAX).map(|events| events.len()), Some(3));
        first.close();
        // A clean close: the next host goes on, and old cursors resume.
        let mut second = journal(dir.path(), 100);
        assert_eq!(second.last_seq(), 5);
        let resumed = second.since(3, usize::MAX).expect("within retention");
        assert_eq!(resumed.iter().map(seq_of).collect::<Vec<_>>(), [4, 5]);
        let wire = second.stamp("a1", r#"{"type":"usage"}"#);
        assert_eq!(seq_of(&wire), 6);
        second.flush();
        drop(second); // no close: as if the daemon were killed
        let mut third = journal(dir.path(), 100);
        assert!(third.last_seq() >= 6 + RESERVE - 1, "past the reservation");
        assert!(third.since(5, usize::MAX).is_none(), "a cursor before the crash resets");
        let next = seq_of(&third.stamp("a1", "{}"));
        assert!(next > 6);
        assert_eq!(third.since(next - 1, usize::MAX).map(|events| events.len()), Some(1));
        assert_eq!(third.since(next, usize::MAX).map(|events| events.len()), Some(0));
        assert!(third.since(next + 1, usize::MAX).is_none(), "a cursor from the future resets");
    }

    #[test]
    fn retention_keeps_the_newest_events_within_bounds() {
        let dir = tempfile::tempdir().expect("dir");
        let mut journal = journal(dir.path(), 10);
        for _ in 0..95 {
            journal.stamp("a1", r#"{"type":"message_delta","text_delta":"x"}"#);
        }
        assert!(journal.since(1, usize::MAX).is_none(), "compacted away");
        let kept = journal.since(85, usize::MAX).expect("the newest ten");
        assert_eq!(kept.iter().map(seq_of).collect::<Vec<_>>(), (86..=95).collect::<Vec<_>>());
        assert!(journal.since(85, 100).is_none(), "more than the budget: a sync instead");
        let text = std::fs::read_to_string(dir.path().join(LOG)).expect("log");
        assert!(text.lines().count() <= 20, "bounded on disk");
    }

    #[test]
    fn starting_over_resets_every_older_cursor_and_survives_a_clean_close() {
        let dir = tempfile::tempdir().expect("dir");
        let mut first = journal(dir.path(), 100);
        for _ in 0..3 {
            first.stamp("a1", r#"{"type":"status","status":"idle"}"#);
        }
        first.start_over();
        assert!(first.since(3, usize::MAX).is_none(), "even a caught-up cursor resets");
        assert!(first.since(1, usize::MAX).is_none());
        let synced = first.last_seq();
        assert_eq!(first.since(synced, usize::MAX).map(|events| events.len()), Some(0));
        let next = seq_of(&first.stamp("a1", "{}"));
        assert_eq!(next, synced + 1);
        first.close();
        let mut second = journal(dir.path(), 100);
        assert_eq!(second.last_seq(), next);
        assert_eq!(second.since(synced, usize::MAX).map(|events| events.len()), Some(1));
        assert!(second.since(3, usize::MAX).is_none());
        // Started over and closed with nothing new: the number goes on.
        second.start_over();
        let gap = second.last_seq();
        second.close();
        let mut third = journal(dir.path(), 100);
        assert_eq!(third.last_seq(), gap);
        assert_eq!(third.since(gap, usize::MAX).map(|events| events.len()), Some(0));
    }
}
