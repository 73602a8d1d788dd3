//! The one writer both transports use: it drains a connection's outbox into
//! its socket, flushing whenever the outbox is empty (so a burst goes out as
//! few writes as the transport allows), and pings WebSocket clients.
//!
//! Every write has a deadline and is raced against the connection's close:
//! a client that stops reading (a frozen tab, a suspended laptop, a stuck
//! CLI) blocks a write until the deadline, and is then closed; a connection
//! closed for another reason (too slow, logged out, shutdown) while a write
//! is stuck gets a short grace and is dropped. Either way the writer ends,
//! the socket is released and so are its queued frames and its permit, even
//! if the client never reads again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::outbox::{Closing, Outbox, OutboxReceiver};
use crate::agents::Wire;

/// How long one write (a batch of queued messages) may wait for the client
/// by default. A healthy client on a slow link drains a socket buffer in
/// well under this; one that has not in this long has stopped reading.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most messages, and about the most bytes, written between two looks
/// at the connection's close, its pings and a fresh deadline. Larger
/// batches than this buy nothing: the transport flushes its own buffer
/// (32 KiB for WebSocket) as it fills.
const BATCH_FRAMES: usize = 256;
const BATCH_BYTES: usize = 64 * 1024;
/// Once a connection is closing: how long the write in progress, then the
/// last words (the close frame or final error line), may take.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// A WebSocket client that has answered no ping for this many intervals is
/// dead: one missed pong may be a busy tab, two and a half are not.
const PONG_INTERVALS: f64 = 2.5;

/// What the writer sends.
pub enum Frame {
    Data(Wire),
    Ping,
}

/// Why the writer says goodbye.
pub enum Goodbye {
    /// Closed by the daemon's policy (too slow, logged out, revoked).
    Policy(String),
    /// The daemon is shutting down.
    GoingAway(String),
    /// The client stopped answering pings.
    Silent,
}

/// A transport's sending half.
pub trait FrameSink: Send {
    /// Queues one frame, writing as much as the transport buffers.
    fn feed(&mut self, frame: Frame) -> impl Future<Output = std::io::Result<()>> + Send;
    fn flush(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
    /// The last words, then close.
    fn close(&mut self, goodbye: Goodbye) -> impl Future<Output = std::io::Result<()>> + Send;
}

/// When the client last proved it is alive (a pong), for WebSocket pings.
#[derive(Clone)]
pub struct Liveness {
    interval: Duration,
    last_pong: Arc<Mutex<Instant>>,
}

impl Liveness {
    pub fn new(interval: Duration) -> Self {
        Self { interval, last_pong: Arc::new(Mutex::new(Instant::now())) }
    }

    pub fn pong(&self) {
        *self.last_pong.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn silent(&self) -> bool {
        let last = *self.last_pong.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        last.elapsed() > self.interval.mul_f64(PONG_INTERVALS)
    }
}

/// How one raced write ended.
enum Written {
    Done,
    /// The connection is over; `goodbye` says whether last words still fit.
    Stop {
        goodbye: bool,
    },
}

/// Drains `queue` into `sink` until the connection closes.
pub async fn run(
    mut sink: impl FrameSink,
    mut queue: OutboxReceiver,
    outbox: Arc<Outbox>,
    write_timeout: Duration,
    liveness: Option<Liveness>,
) {
    let mut ping = liveness.as_ref().map(|liveness| {
        let mut ticks = tokio::time::interval(liveness.interval);
        ticks.reset();
        ticks
    });
    let mut silent = false;
    // Made once, not per message: each registers a waiter, and a writer
    // woken for every message of a trickle would pay that every time.
    let closed = outbox.closed();
    let sealed = outbox.sealed();
    tokio::pin!(closed, sealed);
    let say_goodbye = loop {
        let frame = tokio::select! {
            biased;
            () = &mut closed => break true,
            bytes = queue.recv() => match bytes {
                Some(bytes) => Frame::Data(bytes),
                None => break true,
            },
            // The client left and everything queued went out.
            () = &mut sealed, if queue.is_empty() => break false,
            () = tick(&mut ping) => {
                if liveness.as_ref().is_some_and(Liveness::silent) {
                    tracing::info!("dropping a websocket client that stopped answering pings");
                    outbox.close("no pong");
                    silent = true;
                    break true;
                }
                Frame::Ping
            }
        };
        match raced(&outbox, write_timeout, write_batch(&mut sink, frame, &mut queue)).await {
            Written::Done => {}
            Written::Stop { goodbye } => break goodbye,
        }
    };
    if say_goodbye {
        let goodbye = match outbox.closing_as() {
            _ if silent => Goodbye::Silent,
            (Closing::Policy, reason) => Goodbye::Policy(reason),
            (Closing::GoingAway, reason) => Goodbye::GoingAway(reason),
        };
        let _ = tokio::time::timeout(CLOSE_GRACE, sink.close(goodbye)).await;
    }
    // Dropping the sink (and the reader its half) releases the socket.
}

/// Writes `first` and what else is already queued, up to a batch, then
/// flushes if that emptied the queue. One deadline, one look at the close
/// and one wake-up serve the whole batch, so a busy connection pays them
/// per batch rather than per message.
async fn write_batch(
    sink: &mut impl FrameSink,
    first: Frame,
    queue: &mut OutboxReceiver,
) -> std::io::Result<()> {
    sink.feed(first).await?;
    let (mut frames, mut bytes) = (1, 0);
    while frames < BATCH_FRAMES && bytes < BATCH_BYTES {
        let Some(next) = queue.try_recv() else { break };
        frames += 1;
        bytes += next.len();
        sink.feed(Frame::Data(next)).await?;
    }
    if queue.is_empty() {
        sink.flush().await?;
    }
    Ok(())
}

/// One write, raced against its deadline and the connection's close.
async fn raced(
    outbox: &Outbox,
    deadline: Duration,
    write: impl Future<Output = std::io::Result<()>>,
) -> Written {
    tokio::pin!(write);
    // Most writes complete at once, into the socket's buffer: those need
    // neither a timer nor a look at the close (the writer's loop looks).
    let outcome = match futures_util::poll!(&mut write) {
        std::task::Poll::Ready(written) => Ok(written),
        std::task::Poll::Pending => tokio::select! {
            biased;
            written = tokio::time::timeout(deadline, &mut write) => written,
            () = outbox.closed() => {
                // Closing for another reason: the write in progress gets a
                // short grace, so the last words can follow a frame cut in
                // half only if the client is still reading.
                return match tokio::time::timeout(CLOSE_GRACE, &mut write).await {
                    Ok(Ok(())) => Written::Stop { goodbye: true },
                    _ => Written::Stop { goodbye: false },
                };
            }
        },
    };
    match outcome {
        Ok(Ok(())) => Written::Done,
        Ok(Err(_)) => {
            outbox.close("connection lost");
            Written::Stop { goodbye: false }
        }
        Err(_) => {
            tracing::info!(?deadline, "closing a client that stopped reading");
            outbox.close(format!(
                "client stopped reading: a write waited more than {} s",
                deadline.as_secs()
            ));
            Written::Stop { goodbye: false }
        }
    }
}

async fn tick(ping: &mut Option<tokio::time::Interval>) {
    match ping {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::outbox::outbox;

    /// A sink whose every write either succeeds or hangs forever, as a
    /// client that stopped reading makes it.
    struct Stuck {
        written: Arc<Mutex<Vec<Wire>>>,
        hang_after: usize,
        goodbye: Arc<Mutex<Option<String>>>,
    }

    impl FrameSink for Stuck {
        async fn feed(&mut self, frame: Frame) -> std::io::Result<()> {
            let count = self.written.lock().map(|written| written.len()).unwrap_or(0);
            if count >= self.hang_after {
                std::future::pending::<()>().await;
            }
            if let Frame::Data(bytes) = frame {
                self.written.lock().map(|mut written| written.push(bytes)).ok();
            }
            Ok(())
        }

        async fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }

        async fn close(&mut self, goodbye: Goodbye) -> std::io::Result<()> {
            let text = match goodbye {
                Goodbye::Policy(reason) => reason,
                Goodbye::GoingAway(reason) => format!("going away: {reason}"),
                Goodbye::Silent => "silent".to_owned(),
            };
            *self.goodbye.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(text);
            Ok(())
        }
    }

    /// Deadlines short enough for a test, on a real clock.
    const SHORT: Duration = Duration::from_millis(50);

    /// The writer must end by itself; a hang fails the test.
    async fn ends(writer: tokio::task::JoinHandle<()>) {
        tokio::time::timeout(Duration::from_secs(10), writer)
            .await
            .expect("the writer ended by itself")
            .expect("the writer did not panic");
    }

    type Sent = Arc<Mutex<Vec<Wire>>>;
    type LastWords = Arc<Mutex<Option<String>>>;

    fn stuck(hang_after: usize) -> (Stuck, Sent, LastWords) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let goodbye = Arc::new(Mutex::new(None));
        (Stuck { written: written.clone(), hang_after, goodbye: goodbye.clone() }, written, goodbye)
    }

    #[tokio::test]
    async fn a_write_that_stalls_past_the_deadline_closes_the_connection() {
        let (outbox, queue) = outbox(1, 1024);
        let (sink, written, goodbye) = stuck(2);
        let writer = tokio::spawn(run(sink, queue, outbox.clone(), SHORT, None));
        for _ in 0..3 {
            outbox.push(Wire::from_static("event"));
        }
        // The third write hangs until the deadline.
        ends(writer).await;
        assert_eq!(written.lock().expect("lock").len(), 2);
        assert!(outbox.is_closing());
        assert!(outbox.close_reason().contains("stopped reading"), "{}", outbox.close_reason());
        assert!(goodbye.lock().expect("lock").is_none(), "no last words into a stuck socket");
    }

    #[tokio::test]
    async fn a_close_while_a_write_is_stuck_ends_the_writer_after_the_grace() {
        let (outbox, queue) = outbox(1, 1024);
        let (sink, _, goodbye) = stuck(0);
        // The deadline is far: only the close can end the stuck write.
        let writer =
            tokio::spawn(run(sink, queue, outbox.clone(), Duration::from_secs(3600), None));
        outbox.push(Wire::from_static("event"));
        tokio::task::yield_now().await;
        outbox.close("session revoked");
        ends(writer).await;
        assert!(goodbye.lock().expect("lock").is_none(), "no last words into a stuck socket");
    }

    #[tokio::test]
    async fn a_healthy_close_sends_the_reason_last() {
        let (outbox, queue) = outbox(1, 1024);
        let (sink, written, goodbye) = stuck(usize::MAX);
        let writer = tokio::spawn(run(sink, queue, outbox.clone(), SHORT, None));
        outbox.push(Wire::from_static("event"));
        tokio::task::yield_now().await;
        outbox.close("logged out");
        ends(writer).await;
        assert_eq!(written.lock().expect("lock").len(), 1);
        assert_eq!(goodbye.lock().expect("lock").as_deref(), Some("logged out"));
    }

    #[tokio::test]
    async fn a_shutdown_says_the_daemon_is_going_away() {
        let (outbox, queue) = outbox(1, 1024);
        let (sink, _, goodbye) = stuck(usize::MAX);
        let writer = tokio::spawn(run(sink, queue, outbox.clone(), SHORT, None));
        outbox.go_away("shutting down");
        // A later reason does not change whose end it is.
        outbox.close("logged out");
        ends(writer).await;
        assert_eq!(goodbye.lock().expect("lock").as_deref(), Some("going away: shutting down"));
    }

    #[tokio::test]
    async fn a_client_that_never_pongs_is_dropped_as_silent() {
        let (outbox, queue) = outbox(1, 1024);
        let (sink, _, goodbye) = stuck(usize::MAX);
        let liveness = Liveness::new(SHORT);
        let writer = tokio::spawn(run(sink, queue, outbox.clone(), SHORT, Some(liveness)));
        ends(writer).await;
        assert_eq!(goodbye.lock().expect("lock").as_deref(), Some("silent"));
        assert_eq!(outbox.close_reason(), "no pong");
    }
}
