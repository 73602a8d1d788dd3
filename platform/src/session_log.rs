//! The session log: one append-only JSONL file per session, the durable truth
//! of a conversation. Every line is one [`Entry`] with an id; the first line is
//! the header. Only the writer task appends to the file, and it makes what it
//! was given durable (write + fsync) when asked to flush, which the runtime does
//! at every turn boundary, so a crash loses at most the unfinished turn (and
//! at once for what may not wait: a settings change, an accepted steer or
//! follow-up and its withdrawal).
//!
//! A log that does not parse, does not start with its header, repeats an id,
//! or ends in a torn line is SESSION_CORRUPT: it is refused and never
//! rewritten, so nothing a person might still recover is destroyed.
//!
//! Layout under `$SHARD_HOME/sessions/`:
//! `<session_id>/session.jsonl`, and a fork of it at
//! `<session_id>/forks/<fork_session_id>/session.jsonl` (forks nest).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_protocol::agent::StreamingBehavior;
use shard_protocol::types::{ContentBlock, Image, ToolResultContent, Usage};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

/// The log format's version, in the header.
pub const FORMAT_VERSION: u32 = 1;

/// How many appends may wait for the writer. Appends come from the agent's own
/// turn loop, a few per model call, so this only bounds a burst.
const WRITER_QUEUE: usize = 256;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    #[serde(flatten)]
    pub body: EntryBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EntryBody {
    Header {
        version: u32,
        session_id: String,
        cwd: String,
        created_at: u64,
        model: String,
        mode: String,
    },
    User {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
        /// The `queued` entry this message delivers (a steer or follow-up
        /// that waited for its turn), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queued_entry_id: Option<String>,
    },
    Assistant {
        content: Vec<ContentBlock>,
        model: String,
        /// Provider signatures of the thinking blocks, in order (Anthropic).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking_signatures: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Cut off by an abort while it streamed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        aborted: bool,
    },
    ToolResult {
        tool_call_id: String,
        tool_name: String,
        content: ToolResultContent,
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i64>,
    },
    /// A compaction checkpoint: the entries from the start of the live window
    /// up to `message_range.1` are replaced by `summary` from here on.
    Compaction {
        index: u64,
        summary: String,
        first_kept_entry_id: String,
        message_range: (String, String),
        tokens_before: u64,
        tokens_after: u64,
    },
    /// Roots a forked session (second line of its log): where it came from.
    Fork {
        artifact_kind: String,
        fork_id: String,
        source_session_id: String,
        source_entry_id: String,
    },
    /// An `allow_always` grant: this exact tool call is allowed from now on.
    Grant { tool_name: String, fingerprint: String },
    /// A steer or follow-up accepted while a turn ran, written and synced
    /// before the client hears it was accepted. A resumed agent delivers
    /// every one that no `user` entry delivered and no `unqueued` entry
    /// took back: the process that accepted it stopped first.
    Queued {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
        streaming_behavior: StreamingBehavior,
        /// Never taken back by `recall_steer` (a completion report).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pinned: bool,
    },
    /// A queued input taken back before it was delivered.
    Unqueued { queued_entry_id: String, reason: UnqueueReason },
    /// A mode, model or reasoning-level change, so a resumed agent keeps them.
    Settings {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_level: Option<String>,
    },
}

/// Why a queued input was never delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnqueueReason {
    /// `recall_steer` gave it back to the client.
    Recalled,
    /// `abort` dropped it with the turn.
    Aborted,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no session `{0}`")]
    NotFound(String),
    #[error("session log {path} is corrupt: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error("session log I/O: {0}")]
    Io(#[from] std::io::Error),
}

pub fn sessions_root(home: &Path) -> PathBuf {
    home.join("sessions")
}

/// Finds a session's directory: top-level sessions first, then forks at any
/// depth. Ids are generated (`sess-…`), so a name that is not one is refused
/// before it can become a path.
pub fn find_session(home: &Path, session_id: &str) -> Result<PathBuf, SessionError> {
    let valid = session_id.starts_with("sess-")
        && session_id.len() <= 64
        && session_id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-');
    if !valid {
        return Err(SessionError::NotFound(session_id.to_owned()));
    }
    let root = sessions_root(home);
    let direct = root.join(session_id);
    if direct.join("session.jsonl").is_file() {
        return Ok(direct);
    }
    // Breadth-first through forks/ folders; bounded by what exists on disk.
    let mut queue = vec![root];
    while let Some(dir) = queue.pop() {
        let Ok(children) = std::fs::read_dir(&dir) else { continue };
        for child in children.flatten() {
            let path = child.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|name| name == session_id)
                && path.join("session.jsonl").is_file()
            {
                return Ok(path);
            }
            let forks = path.join("forks");
            if forks.is_dir() {
                queue.push(forks);
            }
        }
    }
    Err(SessionError::NotFound(session_id.to_owned()))
}

/// Reads and validates a whole log.
pub fn read_log(path: &Path) -> Result<Vec<Entry>, SessionError> {
    decode_log(path, read_whole(path)?)
}

/// Opens a session log to read. Shard's own agent can write its sessions'
/// folder from its sandbox, so the daemon, which reads them too, takes
/// nothing there on trust: not a symlink (which could name another
/// agent's log, or any file the daemon may read), and nothing but a
/// regular file (a FIFO would hold the reader forever).
pub fn open_to_read(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags.bits()).open(path)?;
    if !file.metadata()?.is_file() {
        let why = format!("{} is not a regular file", path.display());
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    }
    Ok(file)
}

fn read_whole(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_to_read(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Validates the bytes of a whole log read from `path` (named in errors).
pub fn decode_log(path: &Path, bytes: Vec<u8>) -> Result<Vec<Entry>, SessionError> {
    let corrupt = |why: String| SessionError::Corrupt { path: path.to_owned(), why };
    if bytes.is_empty() {
        return Err(corrupt("the file is empty".into()));
    }
    if bytes.last() != Some(&b'\n') {
        return Err(corrupt("the last line is truncated".into()));
    }
    let text = String::from_utf8(bytes).map_err(|_| corrupt("not UTF-8".into()))?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (number, line) in text.lines().enumerate() {
        let entry = decode_entry(line.as_bytes())
            .map_err(|error| corrupt(format!("line {}: {error}", number + 1)))?;
        if !ids.insert(entry.id.clone()) {
            return Err(corrupt(format!("line {}: duplicate id `{}`", number + 1, entry.id)));
        }
        if number == 0 && !matches!(entry.body, EntryBody::Header { .. }) {
            return Err(corrupt("the first line is not a header".into()));
        }
        if number > 0 && matches!(entry.body, EntryBody::Header { .. }) {
            return Err(corrupt(format!("line {}: a second header", number + 1)));
        }
        if let EntryBody::Compaction { first_kept_entry_id, message_range, .. } = &entry.body {
            for id in [first_kept_entry_id, &message_range.0, &message_range.1] {
                if !ids.contains(id) {
                    return Err(corrupt(format!(
                        "line {}: compaction refers to unknown entry `{id}`",
                        number + 1
                    )));
                }
            }
        }
        entries.push(entry);
    }
    if let Some(Entry { body: EntryBody::Header { version, .. }, .. }) = entries.first()
        && *version != FORMAT_VERSION
    {
        return Err(corrupt(format!("unsupported format version {version}")));
    }
    Ok(entries)
}

/// One line as an entry. A line that parses but holds something this
/// version cannot write back (a content block of an unknown type, say) is
/// refused too: every entry must be sendable in a `sync`, and a log of
/// format 1 holds nothing a version-1 writer did not write.
fn decode_entry(line: &[u8]) -> Result<Entry, BadEntry> {
    let entry: Entry = serde_json::from_slice(line).map_err(BadEntry::Unreadable)?;
    serde_json::to_writer(std::io::sink(), &entry).map_err(BadEntry::NotWritable)?;
    Ok(entry)
}

/// Why one line of a log is not an entry; the caller says which line.
#[derive(Debug, thiserror::Error)]
enum BadEntry {
    /// Not JSON, or not the JSON of any entry.
    #[error("{0}")]
    Unreadable(serde_json::Error),
    /// Read, but this version could not write it again.
    #[error("holds what this version cannot write back: {0}")]
    NotWritable(serde_json::Error),
}

enum WriterCommand {
    Append(Vec<u8>, oneshot::Sender<std::io::Result<()>>),
    Flush(oneshot::Sender<std::io::Result<()>>),
}

/// The handle to a session file's single writer task.
#[derive(Clone)]
pub struct Writer {
    commands: mpsc::Sender<WriterCommand>,
}

impl Writer {
    /// Opens `path` for appending (creating it) and starts the writer task.
    pub async fn open(path: &Path) -> std::io::Result<Self> {
        let mut options = tokio::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        options.mode(0o600).custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits());
        let file = options.open(path).await?;
        crate::private::tighten(path, 0o600)?;
        // A log is opened only after it was read whole (or is new), so its
        // length is where its last whole line ends.
        let whole = file.metadata().await?.len();
        let (commands, receiver) = mpsc::channel(WRITER_QUEUE);
        tokio::spawn(write_loop(file, whole, receiver));
        Ok(Self { commands })
    }

    /// Writes one entry as one line, with one `write`: when this returns, any
    /// reader of the file (the daemon building a `sync`) sees it, and a killed
    /// process cannot leave half of it behind. Durable at the next
    /// [`flush`](Self::flush).
    pub async fn append(&self, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let (ack, done) = oneshot::channel();
        self.commands.send(WriterCommand::Append(line, ack)).await.map_err(|_| closed())?;
        done.await.map_err(|_| closed())?
    }

    /// Makes everything written so far durable (fsync): the turn boundary.
    pub async fn flush(&self) -> std::io::Result<()> {
        let (ack, done) = oneshot::channel();
        self.commands.send(WriterCommand::Flush(ack)).await.map_err(|_| closed())?;
        done.await.map_err(|_| closed())?
    }
}

fn closed() -> std::io::Error {
    std::io::Error::other("the session writer has stopped")
}

/// Serves one file's writes in order. `whole` is the length of the file up to
/// its last whole line.
///
/// A write that fails (the disk full, a file-size limit) may have written part
/// of its line: the file is cut back to `whole`, so the log still loads, and
/// the append reports the error; later appends try again, since space may
/// come back. Only if the cut fails too, or an fsync fails (after which the
/// kernel may have dropped the pages it could not write), does every later
/// command fail with that first error, since writing more would bury a torn
/// or lost line.
async fn write_loop(
    mut file: tokio::fs::File,
    mut whole: u64,
    mut commands: mpsc::Receiver<WriterCommand>,
) {
    let mut failed: Option<String> = None;
    while let Some(command) = commands.recv().await {
        let (result, ack) = match command {
            WriterCommand::Append(line, ack) => match &failed {
                Some(why) => (Err(std::io::Error::other(why.clone())), ack),
                None => match write_line(&mut file, &line).await {
                    Ok(()) => {
                        whole += line.len() as u64;
                        (Ok(()), ack)
                    }
                    Err(error) => {
                        tracing::error!(%error, "session log write failed");
                        if let Err(cut) = file.set_len(whole).await {
                            tracing::error!(error = %cut, "cutting the torn line failed");
                            failed = Some(format!("{error}; the log could not be repaired: {cut}"));
                        }
                        (Err(error), ack)
                    }
                },
            },
            WriterCommand::Flush(ack) => match &failed {
                Some(why) => (Err(std::io::Error::other(why.clone())), ack),
                None => {
                    let result = file.sync_data().await;
                    if let Err(error) = &result {
                        tracing::error!(%error, "session log fsync failed");
                        failed = Some(error.to_string());
                    }
                    (result, ack)
                }
            },
        };
        let _ = ack.send(result);
    }
}

/// Writes one line: tokio's File hands writes to a blocking thread, and
/// flush() waits until the bytes are in the kernel (or the write failed).
async fn write_line(file: &mut tokio::fs::File, line: &[u8]) -> std::io::Result<()> {
    file.write_all(line).await?;
    file.flush().await
}

/// A read-only view of a session log that another process is appending to:
/// the daemon keeps one per agent and reads only what was added since.
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    entries: Vec<Entry>,
}

impl LogTail {
    /// Reads and validates the whole log.
    pub fn open(path: &Path) -> Result<Self, SessionError> {
        // One read: the offset is where what was parsed ends. (The length
        // asked for after the read could take in lines the agent appended
        // meanwhile, which would then never be read, or land mid-line.) A
        // writer may be mid-line: only complete lines count, and `refresh`
        // reads the rest once it is whole.
        let mut bytes = read_whole(path)?;
        if let Some(end) = bytes.iter().rposition(|&byte| byte == b'\n') {
            bytes.truncate(end + 1);
        }
        let offset = bytes.len() as u64;
        let entries = decode_log(path, bytes)?;
        Ok(Self { path: path.to_owned(), offset, entries })
    }

    /// Reads complete lines appended since the last read. A line that does
    /// not parse stops the read there (the writer may be mid-line).
    pub fn refresh(&mut self) -> Result<(), SessionError> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = open_to_read(&self.path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut added = Vec::new();
        file.read_to_end(&mut added)?;
        let Some(end) = added.iter().rposition(|&byte| byte == b'\n') else { return Ok(()) };
        for line in added[..end].split(|&byte| byte == b'\n') {
            let entry = decode_entry(line).map_err(|error| SessionError::Corrupt {
                path: self.path.clone(),
                why: format!("appended line: {error}"),
            })?;
            self.entries.push(entry);
        }
        self.offset += end as u64 + 1;
        Ok(())
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Drops the first `count` entries (a reader that needs only the end),
    /// handing them over once more.
    pub fn forget(&mut self, count: usize) -> std::vec::Drain<'_, Entry> {
        self.entries.drain(..count.min(self.entries.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_that_is_a_symlink_or_a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        // Another agent's log, whole and valid: read directly, it is fine.
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, format!("{}\n", serde_json::to_string(&header()).unwrap())).unwrap();
        assert_eq!(read_log(&other).unwrap().len(), 1);
        let planted = dir.path().join("planted.jsonl");
        std::os::unix::fs::symlink(&other, &planted).unwrap();
        assert!(read_log(&planted).is_err());
        assert!(LogTail::open(&planted).is_err());
        let fifo = dir.path().join("fifo.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Without O_NONBLOCK and the type check this would wait for a writer.
        let (done, finished) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || done.send(LogTail::open(&path).is_err()).unwrap());
        let refused = finished.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(refused, Ok(true), "a FIFO held the reader or was read");
    }

    fn header() -> Entry {
        Entry {
            id: "e-0".into(),
            ts: 1,
            body: EntryBody::Header {
                version: FORMAT_VERSION,
                session_id: "sess-1".into(),
                cwd: "/tmp".into(),
                created_at: 1,
                model: "demo".into(),
                mode: "build".into(),
            },
        }
    }

    #[tokio::test]
    async fn an_appended_entry_is_visible_to_a_reader_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("session.jsonl");
        let writer = Writer::open(&path).await.expect("open");
        writer.append(&header()).await.expect("append");
        let mut tail = LogTail::open(&path).expect("valid log");
        assert_eq!(tail.entries(), [header()]);
        let user = Entry {
            id: "e-1".into(),
            ts: 2,
            body: EntryBody::User { text: "hi".into(), images: Vec::new(), queued_entry_id: None },
        };
        writer.append(&user).await.expect("append");
        writer.flush().await.expect("flush");
        tail.refresh().expect("refresh");
        assert_eq!(tail.entries(), [header(), user]);
        tail.refresh().expect("nothing new");
        assert_eq!(tail.entries().len(), 2);
    }

    #[test]
    fn a_line_that_is_no_entry_says_why_in_the_same_words() {
        let unreadable = decode_entry(b"not json").expect_err("not json").to_string();
        let serde = serde_json::from_slice::<Entry>(b"not json").expect_err("not json");
        assert_eq!(unreadable, serde.to_string());
        let unknown = br#"{"id":"e-1","ts":1,"kind":"assistant","content":[{"type":"hologram"}],"model":"demo"}"#;
        let said = decode_entry(unknown).expect_err("an unknown block").to_string();
        assert_eq!(
            said,
            "holds what this version cannot write back: \
             the enum variant ContentBlock::Unknown cannot be serialized"
        );
    }

    #[test]
    fn torn_and_malformed_logs_are_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("session.jsonl");
        let line = serde_json::to_string(&header()).expect("json");
        for (content, why) in [
            (format!("{line}\n{{\"id\":\"e-1\""), "truncated"),
            (format!("{line}\nnot json\n"), "line 2"),
            (format!("{line}\n{line}\n"), "duplicate"),
            ("{\"id\":\"e-1\",\"ts\":1,\"kind\":\"user\",\"text\":\"hi\"}\n".to_owned(), "header"),
            (String::new(), "empty"),
        ] {
            std::fs::write(&path, &content).expect("write");
            match read_log(&path) {
                Err(SessionError::Corrupt { why: got, .. }) => {
                    assert!(got.contains(why), "{content:?}: {got}")
                }
                other => panic!("{content:?}: {other:?}"),
            }
        }
    }
}
