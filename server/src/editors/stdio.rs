//! The editor's pipes, as the SDK's `Lines` transport. The SDK hands over
//! one line at a time and waits for each to be flushed; written and
//! flushed one by one, a reply of thousands of chunks costs a write (and a
//! hop to a blocking thread) per chunk. Here a line is handed to a bounded
//! queue, and one task writes whatever has gathered in one write: as many
//! system calls as the editor's reading allows, never more than one per
//! line.
//!
//! Bounded: at most [`QUEUED`] lines wait; past that the SDK's sender waits
//! for the editor, and each write has [`WRITE_DEADLINE`] (an editor that
//! reads nothing for that long is taken as gone).

use std::time::Duration;

use futures_util::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Lines waiting to be written to the editor.
const QUEUED: usize = 1024;
/// What one write gathers at most.
const BATCH: usize = 64 * 1024;
/// The longest the editor may leave a write unread.
const WRITE_DEADLINE: Duration = Duration::from_secs(60);
/// The longest line taken from the editor.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Lines to the editor (stdout) and from it (stdin).
pub fn pipes() -> (
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
) {
    let (lines, queued) = mpsc::channel::<String>(QUEUED);
    tokio::spawn(write_all(queued));
    let outgoing = futures_util::sink::unfold(lines, async |lines, line: String| {
        lines.send(line).await.map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok::<_, std::io::Error>(lines)
    });
    let reader = BufReader::new(tokio::io::stdin());
    let incoming = futures_util::stream::unfold(reader, async |mut reader| {
        let mut line = Vec::new();
        let read = (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) => None,
            Ok(_) if line.len() > MAX_LINE => Some((
                Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a line over 16 MiB")),
                reader,
            )),
            Ok(_) => {
                let line = String::from_utf8(line)
                    .map(|line| line.trim_end_matches(['\n', '\r']).to_owned())
                    .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error));
                Some((line, reader))
            }
            Err(error) => Some((Err(error), reader)),
        }
    });
    (outgoing, incoming)
}

async fn write_all(mut queued: mpsc::Receiver<String>) {
    let mut stdout = tokio::io::stdout();
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(line) = queued.recv().await {
        batch.extend_from_slice(line.as_bytes());
        batch.push(b'\n');
        while batch.len() < BATCH
            && let Ok(line) = queued.try_recv()
        {
            batch.extend_from_slice(line.as_bytes());
            batch.push(b'\n');
        }
        let written = async {
            stdout.write_all(&batch).await?;
            stdout.flush().await
        };
        match tokio::time::timeout(WRITE_DEADLINE, written).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return,
        }
        batch.clear();
        if batch.capacity() > 4 * BATCH {
            batch.shrink_to(BATCH);
        }
    }
}
