//! `shard bridge`: this process's stdin and stdout joined, byte for byte,
//! to the daemon's unix socket (CONTRACT.md, "`shard acp` and nodes").
//! Whatever gives a byte stream to another machine then reaches that
//! machine's daemon as a local client of the user who runs the bridge:
//! `ssh -T box shard bridge`, `kubectl exec -i pod -- shard bridge`. The
//! daemon checks the connection as it checks any on its socket (the
//! peer's user, the local connection slots); the bridge adds no authority
//! and reads nothing it carries (docs/NODES.md).
//!
//! It ends when either side does: the daemon closing the connection ends
//! it at once (what the daemon wrote is flushed first); the other side
//! closing stdin half-closes the socket, and the daemon's close follows.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

#[derive(Debug, Clone, clap::Args)]
pub struct BridgeArgs {
    /// The daemon's home (default: $SHARD_HOME, else ~/.shard).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

/// What one read moves at most, each way.
const CHUNK: usize = 64 * 1024;
/// The longest one write may take, either way: a reader that takes nothing
/// for this long is gone (toward stdout, the daemon's own deadline for a
/// slow client is shorter, so it has usually dropped the connection first).
const WRITE_DEADLINE: Duration = Duration::from_secs(60);
/// How often the watch looks at the writes under way.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Two threads, one each way, each reading and writing with plain
/// blocking calls: the bridge only copies bytes, and a thread of its own
/// each way copies them with no hand-off between threads on the way. A
/// third watches that no write takes longer than [`WRITE_DEADLINE`].
pub fn run(args: BridgeArgs) -> anyhow::Result<()> {
    let home = match args.home {
        Some(home) => home,
        None => shard_platform::config::shard_home()?,
    };
    let socket = home.join("daemon.sock");
    let stream = UnixStream::connect(&socket).map_err(|error| {
        anyhow::anyhow!(
            "no Shard daemon is running for {} ({error}): start one there with `shard daemon` \
             (the same SHARD_HOME)",
            home.display()
        )
    })?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().context("cannot use stdout")?;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().context("cannot use stdin")?;
    let (stdout, stdin) = (File::from(stdout), File::from(stdin));
    let to_daemon = stream.try_clone().context("cannot share the daemon's connection")?;
    let (down, up) = (Arc::new(Writing::default()), Arc::new(Writing::default()));
    let watched = [(down.clone(), "stdout"), (up.clone(), "the daemon")];
    std::thread::Builder::new()
        .name("watch".into())
        .spawn(move || watch(&watched))
        .context("cannot start the bridge's watch")?;
    // The other side closing stdin half-closes the connection: the daemon
    // then finishes and closes its side, which ends the bridge below.
    std::thread::Builder::new()
        .name("up".into())
        .spawn(move || {
            let relayed = relay(stdin, &to_daemon, &up, ("stdin", "the daemon"));
            let _ = to_daemon.shutdown(std::net::Shutdown::Write);
            if let Err(error) = relayed {
                eprintln!("shard bridge: {error:#}");
            }
        })
        .context("cannot start the bridge's writer")?;
    // The daemon's side decides: once it closed, nothing more can pass.
    relay(&stream, stdout, &down, ("the daemon", "stdout"))
}

/// When the write under way began, in milliseconds since [`Writing::epoch`]
/// plus one; zero while none is.
struct Writing {
    epoch: Instant,
    since: AtomicU64,
}

impl Default for Writing {
    fn default() -> Self {
        Self { epoch: Instant::now(), since: AtomicU64::new(0) }
    }
}

impl Writing {
    fn begin(&self) {
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        self.since.store(now, Ordering::Relaxed);
    }

    fn end(&self) {
        self.since.store(0, Ordering::Relaxed);
    }

    /// How long the write under way has taken, if one is.
    fn taken(&self) -> Option<Duration> {
        let since = self.since.load(Ordering::Relaxed).checked_sub(1)?;
        let now = self.epoch.elapsed().as_millis() as u64;
        Some(Duration::from_millis(now.saturating_sub(since)))
    }
}

/// Ends the bridge once a write has waited past [`WRITE_DEADLINE`]: the
/// side that takes nothing is gone.
fn watch(writes: &[(Arc<Writing>, &str)]) {
    loop {
        std::thread::sleep(WATCH_EVERY);
        if let Some(sink) = stalled(writes, WRITE_DEADLINE) {
            eprintln!("shard bridge: {sink} took nothing for {WRITE_DEADLINE:?}");
            std::process::exit(1);
        }
    }
}

/// The sink of the first write under way for longer than `deadline`.
fn stalled<'a>(writes: &'a [(Arc<Writing>, &'a str)], deadline: Duration) -> Option<&'a str> {
    let late = |writing: &Writing| writing.taken().is_some_and(|taken| taken > deadline);
    writes.iter().find(|(writing, _)| late(writing)).map(|(_, sink)| *sink)
}

/// Copies `from` to `to` until `from` ends.
fn relay(
    mut from: impl Read,
    mut to: impl Write,
    writing: &Writing,
    (source, sink): (&str, &str),
) -> anyhow::Result<()> {
    let mut buffer = vec![0; CHUNK];
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error).with_context(|| format!("cannot read {source}")),
        };
        writing.begin();
        let written = to.write_all(&buffer[..read]);
        writing.end();
        written.with_context(|| format!("cannot write to {sink}"))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_write_under_way_past_its_deadline_is_stalled() {
        let (down, up) = (Arc::new(Writing::default()), Arc::new(Writing::default()));
        let writes = [(down.clone(), "stdout"), (up.clone(), "the daemon")];
        let deadline = Duration::from_millis(10);
        up.begin();
        assert_eq!(stalled(&writes, Duration::from_secs(60)), None, "within its deadline");
        std::thread::sleep(deadline * 3);
        assert_eq!(stalled(&writes, deadline), Some("the daemon"));
        up.end();
        assert_eq!(stalled(&writes, deadline), None, "a write that ended is not waited on");
        down.begin();
        std::thread::sleep(deadline * 3);
        assert_eq!(stalled(&writes, deadline), Some("stdout"));
    }

    #[test]
    fn the_relay_copies_every_byte_and_marks_no_write_under_way_after() {
        let bytes: Vec<u8> = (0..200_000u32).map(|n| (n % 251) as u8).collect();
        let (writing, mut copied) = (Writing::default(), Vec::new());
        relay(bytes.as_slice(), &mut copied, &writing, ("here", "there")).unwrap();
        assert_eq!(copied, bytes);
        assert_eq!(writing.taken(), None);
    }
}
