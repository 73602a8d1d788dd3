//! The baseline: the least a daemon of this kind could do. One child
//! process (`shard agent --stdio`, the same agent runtime), its stdout read
//! line by line, each line sent unchanged as one WebSocket text frame to
//! every client through a bounded queue per client (a client whose queue
//! is full is dropped), and every frame a client sends written to the
//! child's stdin. No enrollment, no routing, no projection, no log.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// Frames queued per client before it counts as stalled: about the 4 MiB
/// the daemon allows a connection, at this agent's ~110 bytes a delta.
const QUEUE: usize = 1 << 15;

type Clients = Arc<Mutex<Vec<mpsc::Sender<Utf8Bytes>>>>;

pub struct Relay {
    pub addr: SocketAddr,
    clients: Clients,
    child: Child,
    home: std::path::PathBuf,
}

impl Relay {
    pub async fn start(bin: &Path) -> Result<Relay> {
        let home = crate::shard::scratch("relay")?;
        let mut child = Command::new(bin)
            .args(["agent", "--stdio", "--cwd"])
            .arg(&home)
            .env("SHARD_HOME", &home)
            .env("SHARD_LOG", "error")
            .current_dir(&home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the relay's agent")?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let clients: Clients = Arc::default();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;

        // The child's lines, each to every client.
        let fan = clients.clone();
        let counted = clients.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let frame = Utf8Bytes::from(line);
                let mut clients = fan.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                clients.retain(|client| client.try_send(frame.clone()).is_ok());
            }
        });

        // What clients send, to the child's stdin.
        let (input, mut inputs) = mpsc::channel::<String>(64);
        tokio::spawn(async move {
            while let Some(line) = inputs.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err()
                    || stdin.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });

        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let (clients, input) = (clients.clone(), input.clone());
                tokio::spawn(async move {
                    let Ok(socket) = tokio_tungstenite::accept_async(stream).await else { return };
                    let (mut writer, mut reader) = socket.split();
                    let (queue, mut frames) = mpsc::channel(QUEUE);
                    clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(queue);
                    // Batched like any sensible server: queue what is
                    // waiting, flush once.
                    tokio::spawn(async move {
                        while let Some(frame) = frames.recv().await {
                            if writer.feed(Message::Text(frame)).await.is_err() {
                                return;
                            }
                            while let Ok(frame) = frames.try_recv() {
                                if writer.feed(Message::Text(frame)).await.is_err() {
                                    return;
                                }
                            }
                            if writer.flush().await.is_err() {
                                return;
                            }
                        }
                    });
                    while let Some(Ok(message)) = reader.next().await {
                        if let Message::Text(text) = message {
                            if input.send(text.as_str().to_owned()).await.is_err() {
                                break;
                            }
                        }
                    }
                });
            }
        });
        Ok(Relay { addr, clients: counted, child, home })
    }

    /// Clients connected and receiving.
    pub fn connected(&self) -> usize {
        self.clients.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
