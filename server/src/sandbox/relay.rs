//! Moving a connection's bytes between two sockets without bringing them
//! into this process: `splice(2)` through a pipe, each way. The sandbox's
//! egress path has a relay at each end (`shard contain`'s forwarder and
//! the daemon's proxy), and with a copy through user space each cost as
//! much CPU as the program that asked for the bytes (docs/PERFORMANCE.md,
//! "The sandbox").
//!
//! Each direction holds at most one pipe's worth of bytes (its pipe is the
//! buffer, [`PIPE_BYTES`] when the kernel grants it), reads only once that
//! pipe is empty again, and passes an end on as a write shutdown, as
//! `tokio::io::copy_bidirectional` does.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{Shutdown, shutdown};
use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_setpipe_size, pipe_with, splice};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// The pipe each direction asks for: 64 pages, a quarter of the 1 MiB a
/// pipe may have, as fast here as the whole of it (docs/PERFORMANCE.md) and
/// a small share of the user's soft limit of pipe pages
/// (`/proc/sys/fs/pipe-user-pages-soft`, 16 Ki pages by default). Past that
/// limit the kernel refuses it and the pipe keeps its default size, which
/// only costs more calls.
pub const PIPE_BYTES: usize = 256 * 1024;

/// A socket tokio drives whose descriptor `splice(2)` can use.
pub trait Socket: AsFd {
    fn ready(&self, interest: Interest) -> impl Future<Output = io::Result<()>>;
    fn attempt<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! socket {
    ($stream:ty) => {
        impl Socket for $stream {
            async fn ready(&self, interest: Interest) -> io::Result<()> {
                <$stream>::ready(self, interest).await.map(drop)
            }
            fn attempt<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                self.try_io(interest, f)
            }
        }
    };
}
socket!(TcpStream);
socket!(UnixStream);

/// Relays `a` and `b` both ways until each has ended its side (or either
/// fails, which ends both): the bytes each way, `a`'s to `b` first.
pub async fn both_ways(a: &impl Socket, b: &impl Socket) -> io::Result<(u64, u64)> {
    tokio::try_join!(one_way(a, b), one_way(b, a))
}

/// Moves `from`'s bytes to `to` until `from` ends, then shuts `to`'s
/// writing side.
async fn one_way(from: &impl Socket, to: &impl Socket) -> io::Result<u64> {
    let (pipe_out, pipe_in) = pipe()?;
    let mut moved = 0u64;
    loop {
        let held = pump(from, Interest::READABLE, || {
            splice(from.as_fd(), None, &pipe_in, None, PIPE_BYTES, flags())
        })
        .await?;
        if held == 0 {
            break;
        }
        let mut left = held;
        while left > 0 {
            let sent = pump(to, Interest::WRITABLE, || {
                splice(&pipe_out, None, to.as_fd(), None, left, flags())
            })
            .await?;
            if sent == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            left -= sent;
        }
        moved += held as u64;
    }
    match shutdown(to, Shutdown::Write) {
        // The peer may be gone already; its end is what mattered.
        Ok(()) | Err(Errno::NOTCONN) => Ok(moved),
        Err(error) => Err(error.into()),
    }
}

/// Runs `call` once `socket` is ready for `interest`, again after each
/// spurious wake-up, until it moves bytes or fails.
async fn pump(
    socket: &impl Socket,
    interest: Interest,
    call: impl Fn() -> Result<usize, Errno>,
) -> io::Result<usize> {
    loop {
        socket.ready(interest).await?;
        match socket.attempt(interest, || call().map_err(io::Error::from)) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

fn flags() -> SpliceFlags {
    SpliceFlags::NONBLOCK | SpliceFlags::MOVE
}

/// A non-blocking pipe as (read end, write end), as large as allowed.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (out, into) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
    // Refused past the user's pipe quota; the default size still works.
    let _ = fcntl_setpipe_size(&into, PIPE_BYTES);
    Ok((out, into))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connected pair of loopback TCP streams.
    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (near, far) = tokio::join!(TcpStream::connect(address), listener.accept());
        (near.unwrap(), far.unwrap().0)
    }

    /// Bytes no two runs of a pipe's size would repeat in step.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 4093) as u8).collect()
    }

    #[tokio::test]
    async fn many_pipes_worth_go_one_way_intact_while_the_other_way_talks() {
        // client ⇄ (a | relay | b) ⇄ server, a unix socket on one side.
        let (mut client, a) = tcp_pair().await;
        let (b, mut server) = UnixStream::pair().unwrap();
        let relay = tokio::spawn(async move { both_ways(&a, &b).await });
        let sent = pattern(9 * PIPE_BYTES + 12_345);
        let upload = sent.clone();
        let writer = tokio::spawn(async move {
            server.write_all(&upload).await.unwrap();
            server.shutdown().await.unwrap();
            let mut said = String::new();
            server.read_to_string(&mut said).await.unwrap();
            said
        });
        client.write_all(b"hello from the client").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "the bytes changed on the way");
        assert_eq!(writer.await.unwrap(), "hello from the client");
        let (up, down) = relay.await.unwrap().unwrap();
        assert_eq!((up, down), (21, sent.len() as u64));
    }

    #[tokio::test]
    async fn one_side_ending_leaves_the_other_way_open() {
        let (mut client, a) = tcp_pair().await;
        let (b, mut server) = tcp_pair().await;
        let relay = tokio::spawn(async move { both_ways(&a, &b).await });
        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        let mut request = Vec::new();
        server.read_to_end(&mut request).await.unwrap();
        assert_eq!(request, b"request");
        // The client stopped writing; the answer still reaches it.
        server.write_all(b"answer").await.unwrap();
        drop(server);
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"answer");
        assert_eq!(relay.await.unwrap().unwrap(), (7, 6));
    }

    #[tokio::test]
    async fn a_reset_ends_both_ways() {
        let (client, a) = tcp_pair().await;
        let (b, mut server) = tcp_pair().await;
        let relay = tokio::spawn(async move { both_ways(&a, &b).await });
        // Linger 0: the close is a reset, not an end.
        rustix::net::sockopt::set_socket_linger(&client, Some(std::time::Duration::ZERO)).unwrap();
        drop(client);
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), relay).await;
        assert!(ended.expect("the relay outlived a reset").unwrap().is_err());
        let mut rest = Vec::new();
        // The relay's end of the server's connection is gone with it.
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(10), server.read_to_end(&mut rest))
                .await;
        assert!(read.is_ok(), "the server's side stayed open");
    }
}
