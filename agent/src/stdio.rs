//! The stdio transport: JSONL in on stdin, JSONL out on stdout (§2.1). stdout
//! carries protocol lines only; logs go to stderr.

use shard_protocol::jsonl::{LineDecoder, frame};
use shard_protocol::{Envelope, ServerMessage};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One thing read from stdin.
pub enum Inbound {
    Line(Result<String, shard_protocol::jsonl::LineError>),
}

/// Bytes asked of stdin per read.
const READ_CHUNK: usize = 64 * 1024;
/// Decoded lines waiting for the agent. Small: the agent answers quickly, and
/// a full queue pushes back on the writer at the other end of the pipe.
pub const INBOUND_QUEUE: usize = 64;

/// Reads lines until end of input; dropping the sender tells the agent.
pub async fn read_lines(mut input: impl AsyncRead + Unpin, lines: mpsc::Sender<Inbound>) {
    let mut decoder = LineDecoder::default();
    let mut buffer = vec![0; READ_CHUNK];
    loop {
        let read = match input.read(&mut buffer).await {
            Ok(0) => break,
            Ok(read) => read,
            Err(problem) => {
                tracing::warn!(%problem, "reading stdin failed");
                break;
            }
        };
        decoder.feed(&buffer[..read]);
        while let Some(line) = decoder.next_line() {
            if lines.send(Inbound::Line(line)).await.is_err() {
                return;
            }
        }
    }
    if let Some(line) = decoder.finish() {
        let _ = lines.send(Inbound::Line(line)).await;
    }
}

/// Writes every message as one line, flushing whenever the queue is empty.
/// If stdout is gone, nobody is listening: `stop` ends the agent.
pub async fn write_messages(
    mut output: impl AsyncWrite + Unpin,
    mut messages: mpsc::Receiver<Envelope<ServerMessage>>,
    stop: CancellationToken,
) {
    while let Some(message) = messages.recv().await {
        let mut batch = frame(&message.to_json());
        while let Ok(more) = messages.try_recv() {
            batch.extend_from_slice(&frame(&more.to_json()));
            if batch.len() > READ_CHUNK {
                break;
            }
        }
        if output.write_all(&batch).await.is_err() || output.flush().await.is_err() {
            stop.cancel();
            // Keep draining so senders never block on a dead pipe.
            while messages.recv().await.is_some() {}
            return;
        }
    }
}
