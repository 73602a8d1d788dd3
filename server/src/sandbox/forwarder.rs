//! The sandbox's side of the egress proxy. An agent's sandbox has a network
//! namespace of its own with nothing but loopback; the daemon's proxy for
//! that agent is a unix socket bound into it. This forwarder listens on the
//! sandbox's loopback, so that every HTTP, HTTPS or SOCKS5 client finds the
//! proxy where the [`proxy_env`] variables say, and hands each connection
//! it accepts to that socket whole (`SCM_RIGHTS`): the daemon reads the
//! request from the agent's own connection and relays its bytes, and no
//! byte passes through this process. What goes through is decided by the
//! daemon's proxy ([`super::egress`]), not here.
//!
//! The hand-off is one message on a fresh connection to the proxy's
//! socket: [`HANDOFF`], then a line naming the process that connected
//! (empty when it cannot be told, at most [`MAX_PREFACE`] bytes), with the
//! connection's descriptor riding on its first byte. The descriptor goes
//! the safe way: a socket of the sandbox's network namespace, which the
//! daemon can read and write but which reaches nothing outside it. The
//! other way, a socket the daemon connected handed into the sandbox, could
//! be disconnected there and connected anywhere.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketType, ipproto, recvmsg, sendmsg, sockopt,
};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The port the forwarder listens on inside the sandbox: 3128, the port
/// proxies (Squid) have long used, so a tool that guesses finds it. The
/// sandbox's loopback is its own, so nothing else holds it.
pub const LISTEN_PORT: u16 = 3128;

/// Hand-offs under way at once, as many as the daemon's proxy serves for one
/// agent (`MAX_CONNECTIONS` there); past it a new connection is closed.
pub const MAX_CONNECTIONS: usize = 64;

/// The environment that points an agent's tools at the forwarder on `port`:
/// HTTP(S) clients at it as an HTTP proxy, `ALL_PROXY` readers at it as
/// SOCKS5 with names resolved by the proxy (`socks5h`; the sandbox has no
/// DNS), loopback itself not proxied. Node reads the variables only when
/// `NODE_USE_ENV_PROXY` is set.
pub fn proxy_env(port: u16) -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let local = "localhost,127.0.0.1,::1".to_owned();
    vec![
        ("HTTP_PROXY", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", local.clone()),
        ("no_proxy", local),
        ("NODE_USE_ENV_PROXY", "1".to_owned()),
    ]
}

/// Hands each connection accepted on `listener` to the proxy at `socket`
/// until `stop`.
pub async fn forward(listener: TcpListener, socket: PathBuf, stop: CancellationToken) {
    // Each hand-off takes a connection to the proxy and a look through
    // `/proc`, then ends.
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let socket = Arc::new(socket);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return,
        };
        let Ok((client, peer)) = accepted else { continue };
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let (socket, stop) = (socket.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                handed = hand_over(client, peer.port(), &socket) => {
                    if let Err(error) = handed {
                        // The client's connection closes, as a refused one would.
                        tracing::warn!(%error, socket = %socket.display(), "cannot hand a connection to the egress proxy");
                    }
                }
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// Hands `client` (connected from `127.0.0.1:peer_port`) to the proxy.
async fn hand_over(client: TcpStream, peer_port: u16, socket: &std::path::Path) -> io::Result<()> {
    let mut proxy = UnixStream::connect(socket).await?;
    // Which process asked, as this sandbox sees it: what the person asked
    // about the connection is shown (never trusted: anything in the
    // sandbox could reach the socket and say otherwise).
    let asker = tokio::task::spawn_blocking(move || who_connected(peer_port))
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut message = vec![HANDOFF];
    message.extend(asker.bytes().take(MAX_PREFACE));
    message.push(b'\n');
    send_with(&mut proxy, &message, &client).await
}

/// Sends `bytes` on `stream` with `fd` riding on the first of them.
pub async fn send_with(stream: &mut UnixStream, bytes: &[u8], fd: impl AsFd) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let fds = [fd.as_fd()];
    let sent = loop {
        stream.writable().await?;
        let attempt = stream.try_io(Interest::WRITABLE, || {
            let mut control = SendAncillaryBuffer::new(&mut space);
            control.push(SendAncillaryMessage::ScmRights(&fds));
            let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
            Ok(sendmsg(&*stream, &[IoSlice::new(bytes)], &mut control, flags)?)
        });
        match attempt {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            other => break other?,
        }
    };
    stream.write_all(&bytes[sent..]).await
}

/// The first byte a client of the proxy sent, with the connection handed
/// over on it if one was (a second descriptor, or more, is closed).
pub async fn first_byte(stream: &UnixStream) -> io::Result<(u8, Option<OwnedFd>)> {
    loop {
        stream.readable().await?;
        match stream.try_io(Interest::READABLE, || receive_first(stream)) {
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            other => return other,
        }
    }
}

fn receive_first(stream: &UnixStream) -> io::Result<(u8, Option<OwnedFd>)> {
    let mut byte = [0u8];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC;
    let got = recvmsg(stream, &mut [IoSliceMut::new(&mut byte)], &mut control, flags)?;
    let mut handed = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                handed.get_or_insert(fd);
            }
        }
    }
    if got.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok((byte[0], handed))
}

/// The connection a hand-off carried, if it is what [`forward`] sends: a
/// connected TCP socket. Anything else the sandbox might send instead (a
/// pipe, a file, a unix or listening socket) is an error, and closed.
pub fn handed_connection(fd: OwnedFd) -> io::Result<TcpStream> {
    // Any error asking (`ENOTSOCK` for what is not a socket) is a no.
    let tcp = || -> rustix::io::Result<bool> {
        Ok(matches!(sockopt::socket_domain(&fd)?, AddressFamily::INET | AddressFamily::INET6)
            && sockopt::socket_type(&fd)? == SocketType::STREAM
            && sockopt::socket_protocol(&fd)? == Some(ipproto::TCP)
            && !sockopt::socket_acceptconn(&fd)?)
    };
    if !tcp().unwrap_or(false) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a TCP connection"));
    }
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    TcpStream::from_std(stream)
}

/// The byte that opens a hand-off (no HTTP request and no SOCKS5 greeting
/// starts with it); the line it opens ends with `\n` and holds at most
/// [`MAX_PREFACE`] bytes.
pub const HANDOFF: u8 = 1;
pub const MAX_PREFACE: usize = 256;

/// The process that holds the connection from `127.0.0.1:peer_port`, as
/// `<command> (pid <n>)`: its socket's inode from this network namespace's
/// table, then the process holding it. `None` when it cannot be told (a
/// process whose descriptors this one may not read).
fn who_connected(peer_port: u16) -> Option<String> {
    let local = format!(":{peer_port:04X} ");
    let inode = ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ours = fields.get(1).is_some_and(|address| format!("{address} ").ends_with(&local));
            ours.then(|| fields.get(9).map(|inode| (*inode).to_owned())).flatten()
        })
    })?;
    let wanted = format!("socket:[{inode}]");
    let processes = std::fs::read_dir("/proc").ok()?;
    for entry in processes.flatten().take(4096) {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(descriptors) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        let holds = descriptors.flatten().take(4096).any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == wanted.as_str())
        });
        if holds {
            let command = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            let command: String =
                command.trim().chars().filter(|c| !c.is_control()).take(64).collect();
            return Some(format!("{command} (pid {pid})"));
        }
    }
    None
}

/// Runs the forwarder for a process that has no runtime of its own (`shard
/// contain`): binds `127.0.0.1:port` here, so that a port in use is this
/// call's error, then forwards on a thread of its own for the rest of the
/// process.
pub fn spawn_forwarder_thread(port: u16, socket: PathBuf) -> std::io::Result<()> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let listener = {
        // Registering with the reactor needs the runtime entered.
        let _entered = runtime.enter();
        TcpListener::from_std(listener)?
    };
    std::thread::Builder::new().name("shard-egress".to_owned()).spawn(move || {
        runtime.block_on(forward(listener, socket, CancellationToken::new()));
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::UnixListener;

    use super::*;

    /// Every read in these tests waits at most this long.
    const WITHIN: Duration = Duration::from_secs(5);

    /// An echo server on a unix socket standing for the daemon's proxy:
    /// it takes each hand-off, sends the line naming which process asked
    /// on `prefaces`, then echoes on the connection handed over.
    fn echo(socket: &std::path::Path) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let listener = UnixListener::bind(socket).unwrap();
        let (told, prefaces) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let told = told.clone();
                tokio::spawn(async move {
                    let (first, handed) = first_byte(&stream).await.unwrap();
                    assert_eq!(first, HANDOFF);
                    let mut line = Vec::new();
                    loop {
                        match stream.read_u8().await.unwrap() {
                            b'\n' => break,
                            byte => line.push(byte),
                        }
                    }
                    // Nothing else comes on the proxy's own connection.
                    assert_eq!(
                        stream.read_u8().await.unwrap_err().kind(),
                        io::ErrorKind::UnexpectedEof
                    );
                    let _ = told.send(String::from_utf8(line).unwrap());
                    let mut client = handed_connection(handed.unwrap()).unwrap();
                    let (mut reader, mut writer) = client.split();
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
                    let _ = writer.shutdown().await;
                });
            }
        });
        prefaces
    }

    async fn forwarder(socket: PathBuf) -> (u16, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        tokio::spawn(forward(listener, socket, stop.clone()));
        (port, stop)
    }

    #[tokio::test]
    async fn bytes_go_both_ways_and_an_end_passes_through() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        let mut prefaces = echo(&socket);
        let (port, _stop) = forwarder(socket).await;
        let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        tokio::time::timeout(WITHIN, client.read_exact(&mut echoed)).await.unwrap().unwrap();
        assert_eq!(&echoed, b"ping");
        // The process holding the connection is this test's.
        let asker = prefaces.recv().await.unwrap();
        assert!(asker.ends_with(&format!("(pid {})", std::process::id())), "{asker}");
        client.shutdown().await.unwrap();
        let mut rest = Vec::new();
        tokio::time::timeout(WITHIN, client.read_to_end(&mut rest)).await.unwrap().unwrap();
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn without_the_proxy_a_connection_just_closes() {
        let dir = tempfile::tempdir().unwrap();
        let (port, _stop) = forwarder(dir.path().join("absent.sock")).await;
        let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WITHIN, client.read_to_end(&mut rest)).await.unwrap();
        assert!(read.is_ok_and(|read| read == 0));
    }

    #[tokio::test]
    async fn stop_ends_the_forwarding() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        echo(&socket);
        let (port, stop) = forwarder(socket).await;
        stop.cancel();
        // The listener is gone with the forwarder: refused, or closed unread.
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(mut client) = TcpStream::connect(("127.0.0.1", port)).await {
            let _ = client.write_all(b"ping").await;
            let mut rest = Vec::new();
            let read = tokio::time::timeout(WITHIN, client.read_to_end(&mut rest)).await.unwrap();
            assert!(!read.is_ok_and(|read| read > 0), "echoed after stop: {rest:?}");
        }
    }

    #[tokio::test]
    async fn only_a_connected_tcp_socket_is_taken_from_a_hand_off() {
        let (mut sender, receiver) = UnixStream::pair().unwrap();
        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (unix, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        let not_tcp: [&dyn AsFd; 3] = [&listening, &unix, &file];
        for fd in not_tcp {
            send_with(&mut sender, &[HANDOFF], fd.as_fd()).await.unwrap();
            let (first, handed) = first_byte(&receiver).await.unwrap();
            assert_eq!(first, HANDOFF);
            let error = handed_connection(handed.unwrap()).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        }
        // A plain first byte comes without one.
        sender.write_all(b"C").await.unwrap();
        let (first, handed) = first_byte(&receiver).await.unwrap();
        assert_eq!((first, handed.is_none()), (b'C', true));
        drop(sender);
        assert_eq!(first_byte(&receiver).await.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_port_in_use_is_the_callers_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = spawn_forwarder_thread(port, PathBuf::from("/nonexistent")).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    }

    #[test]
    fn the_environment_names_the_forwarder() {
        let env = proxy_env(LISTEN_PORT);
        let value = |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, v)| v.as_str());
        assert_eq!(value("HTTPS_PROXY"), Some("http://127.0.0.1:3128"));
        assert_eq!(value("all_proxy"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(value("NO_PROXY"), Some("localhost,127.0.0.1,::1"));
        assert_eq!(value("NODE_USE_ENV_PROXY"), Some("1"));
    }
}
