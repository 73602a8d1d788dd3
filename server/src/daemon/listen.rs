//! Where the daemon binds: the port a home listened on before, and enough
//! file descriptors for the connections asked for.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::home::Home;

/// Descriptors the daemon needs beside one per browser connection: local
/// clients, three pipes per running agent and its event journal while its
/// host is awake, files, listeners.
const SPARE_DESCRIPTORS: u64 = 1024;

/// Raises the soft limit on open files to the hard one, as far as the
/// connections asked for need: the usual soft default (1024) would refuse
/// connections long before `--max-connections`. Warns if even the hard
/// limit is too low.
pub(super) fn raise_open_files(max_connections: u32) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let wanted = u64::from(max_connections) + SPARE_DESCRIPTORS;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    let target = wanted.min(hard);
    if target > soft
        && let Err(problem) = setrlimit(Resource::RLIMIT_NOFILE, target, hard)
    {
        tracing::warn!(%problem, soft, "cannot raise the open-files limit");
    }
    if hard < wanted {
        tracing::warn!(
            limit = hard,
            wanted,
            "the open-files limit is below what --max-connections needs: connections will be refused earlier"
        );
    }
}

/// Prints one line on stdout, where scripts read them (logs go to stderr).
/// Where a home keeps the port its daemon last listened on.
const PORT_FILE: &str = "port";

/// The port recorded in the home, if any.
fn remembered_port(home: &Home) -> Option<u16> {
    let text = std::fs::read_to_string(home.join(PORT_FILE)).ok()?;
    text.trim().parse().ok().filter(|&port| port != 0)
}

/// Binds `addr`. With port 0, first the port this home last listened on:
/// a browser keeps its secret in the storage of one origin, port included
/// (docs/SECURITY.md), so a daemon that came back on another port would
/// leave every enrolled browser behind. Only when that port is taken is a
/// fresh free one picked. Whatever port is bound is recorded for next time.
pub(super) fn listen_as_before(home: &Home, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let remembered = remembered_port(home);
    let listener = match remembered.filter(|_| addr.port() == 0) {
        Some(port) => listen(SocketAddr::new(addr.ip(), port)).or_else(|error| {
            tracing::warn!(
                port,
                %error,
                "the port this home last listened on is taken: browsers enrolled there must enroll again on the new one"
            );
            listen(addr)
        })?,
        None => listen(addr)?,
    };
    let port = listener.local_addr()?.port();
    if remembered != Some(port) {
        let recorded =
            crate::home::write_private(&home.join(PORT_FILE), format!("{port}\n").as_bytes());
        if let Err(error) = recorded {
            tracing::warn!(%error, "cannot record the port in the home");
        }
    }
    Ok(listener)
}

/// A listening socket with `SO_REUSEADDR`, so that a restarted daemon gets
/// its port back while connections of the previous one linger in TIME_WAIT.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}
