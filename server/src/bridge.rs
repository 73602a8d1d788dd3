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

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

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

pub async fn run(args: BridgeArgs) -> anyhow::Result<()> {
    let home = match args.home {
        Some(home) => home,
        None => shard_platform::config::shard_home()?,
    };
    let socket = home.join("daemon.sock");
    let stream = UnixStream::connect(&socket).await.map_err(|error| {
        anyhow::anyhow!(
            "no Shard daemon is running for {} ({error}): start one there with `shard daemon` \
             (the same SHARD_HOME)",
            home.display()
        )
    })?;
    let (from_daemon, to_daemon) = stream.into_split();
    let down = tokio::spawn(daemon_to_stdout(from_daemon));
    let up = tokio::spawn(stdin_to_daemon(to_daemon));
    // The daemon's side decides: once it closed, nothing more can pass.
    let ended = down.await.context("the bridge's reader stopped")?;
    up.abort();
    ended
}

/// Everything the daemon sends, to stdout, until it closes the connection.
async fn daemon_to_stdout(daemon: tokio::net::unix::OwnedReadHalf) -> anyhow::Result<()> {
    relay(daemon, tokio::io::stdout(), ("the daemon", "stdout")).await
}

/// Everything on stdin, to the daemon; at its end, the socket's write side
/// is closed so that the daemon sees the client leave.
async fn stdin_to_daemon(mut daemon: tokio::net::unix::OwnedWriteHalf) -> anyhow::Result<()> {
    relay(tokio::io::stdin(), &mut daemon, ("stdin", "the daemon")).await?;
    daemon.shutdown().await.context("cannot close the daemon's connection")
}

/// Copies `from` to `to` until `from` ends, each write (and its flush)
/// within [`WRITE_DEADLINE`]; `names` say which is which in an error.
async fn relay(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    (source, sink): (&str, &str),
) -> anyhow::Result<()> {
    let mut buffer = vec![0; CHUNK];
    loop {
        let read = from.read(&mut buffer).await.with_context(|| format!("cannot read {source}"))?;
        if read == 0 {
            return Ok(());
        }
        let write = async {
            to.write_all(&buffer[..read]).await?;
            to.flush().await
        };
        match tokio::time::timeout(WRITE_DEADLINE, write).await {
            Ok(written) => written.with_context(|| format!("cannot write to {sink}"))?,
            Err(_) => anyhow::bail!("{sink} took nothing for {WRITE_DEADLINE:?}"),
        }
    }
}
