//! The unix socket `$SHARD_HOME/daemon.sock`: JSONL, local trust (§4.2). The
//! socket is 0600 and every peer's uid is checked against the daemon's. A
//! stale socket left by a dead daemon is removed; anything else at that path
//! (a live daemon, a file that is not a socket, a socket of another user) is
//! refused and never deleted.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use shard_protocol::agent::ErrorEvent;
use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::{Envelope, ErrorCode, ServerMessage};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, Daemon};
use crate::hub::{DEFAULT_OUTBOX_BYTES, Hub, outbox};

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
    limit: Arc<Semaphore>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, _)) = accepted else { continue };
        let uid = nix::unistd::getuid().as_raw();
        match stream.peer_cred() {
            Ok(credentials) if credentials.uid() == uid => {}
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
        }
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            tracing::warn!("too many connections; refused a unix client");
            continue;
        };
        let daemon = daemon.clone();
        let hub = hub.clone();
        tokio::spawn(async move {
            connection(stream, daemon, hub).await;
            drop(permit);
        });
    }
}

async fn connection(stream: UnixStream, daemon: Arc<dyn Daemon>, hub: Arc<Hub>) {
    let (mut reader, writer) = stream.into_split();
    let (outbox, mut queue) = outbox(hub.next_id(), DEFAULT_OUTBOX_BYTES);
    hub.register(outbox.clone(), None);
    let mut connection = Connection::new(outbox.clone(), daemon, "unix", true);
    connection.hello("unix");
    let closing = outbox.closing.clone();
    let writing = {
        let outbox = outbox.clone();
        tokio::spawn(async move {
            let mut writer = tokio::io::BufWriter::new(writer);
            loop {
                tokio::select! {
                    bytes = queue.recv() => {
                        let Some(bytes) = bytes else { break };
                        if writer.write_all(&bytes).await.is_err() || writer.write_all(b"\n").await.is_err() {
                            break;
                        }
                        if queue.is_empty() && writer.flush().await.is_err() {
                            break;
                        }
                    }
                    () = outbox.closing.cancelled() => {
                        // The reason goes out as a last, fatal error line.
                        let reason = outbox.close_reason().unwrap_or_else(|| "closing".to_owned());
                        let event = ErrorEvent { code: ErrorCode::ProtocolError, message: reason, fatal: Some(true) };
                        let line = frame(&Envelope::new(ServerMessage::Error(event)).to_json());
                        let _ = writer.write_all(&line).await;
                        let _ = writer.flush().await;
                        break;
                    }
                }
            }
        })
    };
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = reader.read(&mut buffer) => read,
            () = closing.cancelled() => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(read) => decoder.feed(&buffer[..read]),
        }
        while let Some(line) = decoder.next_line() {
            match line {
                Ok(line) => connection.frame(&line).await,
                Err(problem) => connection.frame_error(&problem.to_string()),
            }
        }
    }
    connection.closed().await;
    hub.unregister(outbox.id);
    if outbox.closing.is_cancelled() {
        let _ = writing.await; // let the reason reach the client
    } else {
        writing.abort();
    }
}
