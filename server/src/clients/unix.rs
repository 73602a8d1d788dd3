//! The unix socket `$SHARD_HOME/daemon.sock`: JSONL, local trust (§4.2). The
//! socket is 0600 and every peer's uid is checked against the daemon's. A
//! stale socket left by a dead daemon is removed; anything else at that path
//! (a live daemon, a file that is not a socket, a socket of another user) is
//! refused and never deleted. Local clients have connection slots of their
//! own, so `shard enroll` and `shard sessions` get through however many
//! browsers are connected.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use shard_protocol::agent::ErrorEvent;
use shard_protocol::diagnostic::into_diagnostic;
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::{Envelope, ErrorCode, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::connection::Transport;
use super::hub::Hub;
use super::writer::{Frame, FrameSink, Goodbye};
use super::{FrameSource, Incoming, Limits, Setup};
use crate::commands::Daemon;

/// Local connections served at once, apart from the browsers' slots.
pub const LOCAL_CONNECTIONS: usize = 64;
/// Bytes asked of the socket per read. The buffer exists only for the read:
/// most local clients sit idle for hours between commands, and one held per
/// connection was most of what an idle one cost.
const READ_CHUNK: usize = 64 * 1024;
/// Bytes of lines gathered before they are written: a burst goes out in
/// writes of about this size, and the writer flushes whenever its outbox is
/// empty anyway. The buffer is let go at each flush, so an idle connection
/// holds none.
const WRITE_CHUNK: usize = 8 * 1024;

/// Binds the socket, cleaning up only what is provably a dead daemon's.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                bail!("{} exists and is not a socket; refusing to touch it", path.display());
            }
            if meta.uid() != nix::unistd::getuid().as_raw() {
                bail!("{} belongs to another user; refusing to touch it", path.display());
            }
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => bail!("another daemon is listening on {}", path.display()),
                Err(_) => {
                    tracing::info!(path = %path.display(), "removing the stale socket of a dead daemon");
                    std::fs::remove_file(path)
                        .with_context(|| format!("cannot remove {}", path.display()))?;
                }
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot inspect {}", path.display()));
        }
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set {} to 0600", path.display()))?;
    Ok(listener)
}

/// Accepts connections until `shutdown`.
pub async fn serve(
    listener: UnixListener,
    daemon: Arc<dyn Daemon>,
    hub: Arc<Hub>,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(LOCAL_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let uid = nix::unistd::getuid().as_raw();
        let pid = match stream.peer_cred() {
            Ok(credentials) if credentials.uid() == uid => {
                credentials.pid().and_then(|pid| u32::try_from(pid).ok())
            }
            Ok(credentials) => {
                tracing::warn!(
                    peer_uid = credentials.uid(),
                    "refused a unix client of another user"
                );
                continue;
            }
            Err(error) => {
                tracing::warn!(%error, "refused a unix client without credentials");
                continue;
            }
        };
        if let Some(agent) = pid.and_then(|pid| started_by_agent(pid, daemon.registry())) {
            // A tool of an agent (or anything it started) speaking for a
            // person could answer its own agent's questions, steer others,
            // or mint a browser enrollment: it gets no connection.
            tracing::warn!(%agent, "refused a unix client started by an agent's tools");
            tokio::spawn(refuse(stream, agent));
            continue;
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!("too many local connections; refused a unix client");
            continue;
        };
        let setup = Setup {
            daemon: daemon.clone(),
            hub: hub.clone(),
            transport: Transport::Unix,
            session: None,
            peer: super::connection::Peer { pid, ..Default::default() },
            limits,
            ping_interval: None,
        };
        tokio::spawn(async move {
            let (reader, writer) = stream.into_split();
            let source = Lines { reader, decoder: LineDecoder::default() };
            super::serve(source, Sink { writer, pending: Vec::new() }, setup).await;
            drop(permit);
        });
    }
}

/// The agent whose process `pid` descends from, if any: `pid` is then one of
/// its tools' processes. An agent's own process is not (it speaks for
/// itself through its `subagent_*` tools).
fn started_by_agent(pid: u32, registry: &crate::agents::registry::Registry) -> Option<String> {
    let processes = &registry.context.processes;
    if processes.speaking(pid).is_some() {
        return None;
    }
    shard_platform::process_tree::ancestors(pid)
        .into_iter()
        .find_map(|ancestor| processes.agent_of(ancestor))
}

/// Tells a refused peer why, as a fatal error line, within a deadline.
async fn refuse(stream: tokio::net::UnixStream, agent: String) {
    let message = format!(
        "a process started by agent `{agent}`'s tools cannot use the daemon's socket; a person answers and steers from a client"
    );
    let event = ErrorEvent { code: ErrorCode::PermissionDenied, message, fatal: Some(true) };
    let line = frame(&Envelope::new(ServerMessage::Error(event)).to_json());
    let mut stream = stream;
    // The peer may be writing its command meanwhile: what it sends is read
    // and dropped (a little, briefly), so that it gets to read the reason
    // rather than a broken pipe.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        stream.write_all(&line).await?;
        stream.shutdown().await?;
        let mut sink = [0; 4096];
        for _ in 0..16 {
            if stream.read(&mut sink).await? == 0 {
                break;
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}

/// JSONL in: one message per line.
struct Lines {
    reader: OwnedReadHalf,
    decoder: LineDecoder,
}

impl FrameSource for Lines {
    async fn next(&mut self) -> Incoming {
        loop {
            if let Some(line) = self.decoder.next_line() {
                return match line {
                    Ok(line) => Incoming::Text(line),
                    Err(problem) => Incoming::Invalid(problem.to_string()),
                };
            }
            // Waits holding no buffer; one is taken only once there is
            // something to read, and given back once it is decoded.
            if self.reader.readable().await.is_err() {
                return Incoming::End;
            }
            let mut chunk = Vec::with_capacity(READ_CHUNK);
            match self.reader.try_read_buf(&mut chunk) {
                Ok(0) => return Incoming::End,
                Ok(_) => self.decoder.feed(&chunk),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return Incoming::End,
            }
        }
    }
}

/// JSONL out: lines gathered up to [`WRITE_CHUNK`] and written when that
/// fills or the outbox is empty (the writer's flush).
struct Sink {
    writer: OwnedWriteHalf,
    pending: Vec<u8>,
}

impl Sink {
    /// Writes what is gathered, keeping the buffer for the rest of the batch.
    async fn write_pending(&mut self) -> std::io::Result<()> {
        self.writer.write_all(&self.pending).await?;
        self.pending.clear();
        Ok(())
    }
}

impl FrameSink for Sink {
    async fn feed(&mut self, frame: Frame) -> std::io::Result<()> {
        let Frame::Data(bytes) = frame else { return Ok(()) };
        if self.pending.len() + bytes.len() >= WRITE_CHUNK {
            self.write_pending().await?;
        }
        if bytes.len() >= WRITE_CHUNK {
            // A large line goes out as it is, not copied.
            self.writer.write_all(bytes.as_bytes()).await?;
        } else {
            if self.pending.capacity() == 0 {
                self.pending.reserve(WRITE_CHUNK);
            }
            self.pending.extend_from_slice(bytes.as_bytes());
        }
        self.pending.push(b'\n');
        Ok(())
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        self.write_pending().await?;
        // The outbox is empty: the connection may now be idle for hours.
        self.pending = Vec::new();
        self.writer.flush().await
    }

    /// The reason goes out as a last, fatal error line.
    async fn close(&mut self, goodbye: Goodbye) -> std::io::Result<()> {
        let message = match goodbye {
            Goodbye::Policy(reason) | Goodbye::GoingAway(reason) => reason,
            Goodbye::Silent => "no answer".to_owned(),
        };
        let message = into_diagnostic(message);
        let event = ErrorEvent { code: ErrorCode::ProtocolError, message, fatal: Some(true) };
        self.write_pending().await?;
        self.writer
            .write_all(&frame(&Envelope::new(ServerMessage::Error(event)).to_json()))
            .await?;
        self.writer.flush().await?;
        self.writer.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixStream;

    use super::*;
    use crate::agents::Wire;

    #[tokio::test]
    async fn lines_small_and_large_go_out_whole_and_in_order_with_nothing_held_after() {
        let (ours, mut theirs) = UnixStream::pair().expect("a socket pair");
        let (_reader, writer) = ours.into_split();
        let mut sink = Sink { writer, pending: Vec::new() };
        let large = "x".repeat(3 * WRITE_CHUNK);
        let lines = ["first".to_owned(), large, "y".repeat(WRITE_CHUNK - 3), "last".to_owned()];
        for line in &lines {
            sink.feed(Frame::Data(Wire::from(line.clone()))).await.expect("fed");
        }
        sink.flush().await.expect("flushed");
        assert_eq!(sink.pending.capacity(), 0, "an idle connection holds no buffer");
        drop(sink);
        let mut written = String::new();
        theirs.read_to_string(&mut written).await.expect("read");
        assert_eq!(written, lines.map(|line| line + "\n").concat());
    }

    #[tokio::test]
    async fn lines_split_across_reads_are_decoded_whole() {
        let (ours, mut theirs) = UnixStream::pair().expect("a socket pair");
        let (reader, _writer) = ours.into_split();
        let mut lines = Lines { reader, decoder: LineDecoder::default() };
        let long = "z".repeat(3 * READ_CHUNK);
        let sent = format!("{{\"a\":1}}\n{long}\n");
        // Written while read: more than a socket buffer holds.
        tokio::spawn(async move { theirs.write_all(sent.as_bytes()).await });
        assert!(matches!(lines.next().await, Incoming::Text(text) if text == "{\"a\":1}"));
        assert!(matches!(lines.next().await, Incoming::Text(text) if text == long));
        assert!(matches!(lines.next().await, Incoming::End));
    }
}
