//! The sandbox's side of the egress proxy. An agent's sandbox has a network
//! namespace of its own with nothing but loopback; the daemon's proxy for
//! that agent is a unix socket bound into it. This forwarder listens on the
//! sandbox's loopback and joins each TCP connection to that socket, byte
//! for byte, so that every HTTP, HTTPS or SOCKS5 client finds the proxy
//! where the [`proxy_env`] variables say. What goes through is decided by
//! the daemon (`server/src/sandbox/egress.rs`), not here.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The port the forwarder listens on inside the sandbox: 3128, the port
/// proxies (Squid) have long used, so a tool that guesses finds it. The
/// sandbox's loopback is its own, so nothing else holds it.
pub const LISTEN_PORT: u16 = 3128;

/// Connections forwarded at once, as many as the daemon's proxy serves for
/// one agent (`MAX_CONNECTIONS` there); past it a new one is closed.
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

/// Forwards each connection accepted on `listener` to the unix socket at
/// `socket` until `stop`, which also ends the connections open then.
pub async fn forward(listener: TcpListener, socket: PathBuf, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let socket = Arc::new(socket);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => return,
        };
        let Ok((client, peer)) = accepted else { continue };
        // Closed at once past the limit: the proxy would refuse it too.
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let (socket, stop) = (socket.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = join(client, peer.port(), &socket) => {}
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// One connection: to the proxy, then both ways until both sides end. If
/// the proxy cannot be reached the client's connection just closes, as a
/// refused connection would.
async fn join(mut client: TcpStream, peer_port: u16, socket: &std::path::Path) {
    let mut proxy = match UnixStream::connect(socket).await {
        Ok(proxy) => proxy,
        Err(error) => {
            tracing::warn!(%error, socket = %socket.display(), "cannot reach the egress proxy");
            return;
        }
    };
    // Which process asked, as this sandbox sees it: what the person asked
    // about the connection is shown (never trusted: anything in the
    // sandbox could reach the socket and say otherwise).
    let asker = tokio::task::spawn_blocking(move || who_connected(peer_port)).await.ok().flatten();
    if let Some(asker) = asker {
        let mut preface = vec![PREFACE];
        preface.extend(asker.into_bytes());
        preface.push(b'\n');
        if proxy.write_all(&preface).await.is_err() {
            return;
        }
    }
    let _ = client.set_nodelay(true);
    if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut proxy).await {
        tracing::debug!(%error, "an egress connection ended");
    }
}

/// The byte that opens a preface naming which process asked (no HTTP
/// request and no SOCKS5 greeting starts with it); the line it opens ends
/// with `\n` and holds at most [`MAX_PREFACE`] bytes.
pub const PREFACE: u8 = 0;
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
    /// it takes each connection's preface (which process asked) and sends
    /// it on `prefaces`, then echoes the rest.
    fn echo(socket: &std::path::Path) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        let listener = UnixListener::bind(socket).unwrap();
        let (told, prefaces) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                let told = told.clone();
                tokio::spawn(async move {
                    let mut line = Vec::new();
                    assert_eq!(stream.read_u8().await.unwrap(), PREFACE);
                    loop {
                        match stream.read_u8().await.unwrap() {
                            b'\n' => break,
                            byte => line.push(byte),
                        }
                    }
                    let _ = told.send(String::from_utf8(line).unwrap());
                    let (mut reader, mut writer) = stream.split();
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
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
    async fn stop_ends_open_connections() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("egress.sock");
        echo(&socket);
        let (port, stop) = forwarder(socket).await;
        let mut client = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        tokio::time::timeout(WITHIN, client.read_exact(&mut echoed)).await.unwrap().unwrap();
        stop.cancel();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(WITHIN, client.read_to_end(&mut rest)).await.unwrap();
        assert!(read.is_ok_and(|read| read == 0));
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
