//! The daemon's life: take `$SHARD_HOME`, load the security store and the
//! registry, open the unix socket and the HTTP port, announce, serve, and on
//! shutdown stop every agent process before exiting.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::Auth;
use crate::cli::DaemonArgs;
use crate::connection::Daemon;
use crate::home::Home;
use crate::host::Context as HostContext;
use crate::hub::Hub;
use crate::registry::Registry;

/// Connections (WebSocket and unix together) served at once.
const MAX_CONNECTIONS: usize = 256;
/// On SIGTERM/SIGINT, how long active turns get to finish before agents are
/// killed.
const SIGNAL_GRACE: Duration = Duration::from_secs(10);

/// Prints one line on stdout, where scripts read them (logs go to stderr).
fn announce(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

struct Shard {
    registry: Registry,
    auth: Arc<Auth>,
    origin: String,
    /// Cancelled once a shutdown was asked for; `force` says how.
    stop: CancellationToken,
    force: std::sync::atomic::AtomicBool,
}

impl Daemon for Shard {
    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn enroll(&self) -> String {
        let url = format!("{}/#enroll={}", self.origin, self.auth.new_code());
        announce(&format!("enroll: {url}"));
        url
    }

    fn shutdown(&self, force: bool) {
        if force {
            self.force.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.stop.cancel();
    }
}

/// Runs the daemon until a signal or `daemon.shutdown`.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let home_path = shard_agent::config::shard_home()?;
    let home = Home::open(&home_path)?;
    let addr = args.bind_addr();
    let listener = listen(addr).with_context(|| format!("cannot listen on {addr}"))?;
    let socket = crate::unix::bind(&home.join("daemon.sock"))?;
    let stop = CancellationToken::new();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            stop.cancel();
        });
    }
    run(home, listener, socket, args, stop).await
}

pub async fn run(
    home: Home,
    listener: TcpListener,
    socket: tokio::net::UnixListener,
    args: DaemonArgs,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("listener has no local address")?;
    let origin = format!("http://{local}");
    let hub = Arc::new(Hub::default());
    let auth = Arc::new(Auth::load(&home.path)?);
    let exe = std::env::current_exe().context("cannot find the shard executable")?;
    let context = Arc::new(HostContext {
        home: home.path.clone(),
        exe,
        hub: hub.clone(),
        delegation: Arc::default(),
        idle_timeout: Duration::from_secs(args.idle_runtime_timeout),
        headless_timeout: Duration::from_secs(args.headless_timeout),
    });
    let shard = Arc::new(Shard {
        registry: Registry::load(context),
        auth: auth.clone(),
        origin: origin.clone(),
        stop: stop.clone(),
        force: std::sync::atomic::AtomicBool::new(false),
    });
    let daemon: Arc<dyn Daemon> = shard.clone();
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let web = Arc::new(crate::http::Web {
        auth,
        hub: hub.clone(),
        daemon: daemon.clone(),
        expected_host: local.to_string(),
        allowed_origins: vec![origin.clone()],
        connections: connections.clone(),
    });
    let app = crate::http::router(local, web);
    let unix_stop = CancellationToken::new();
    tokio::spawn(crate::unix::serve(
        socket,
        daemon.clone(),
        hub.clone(),
        connections,
        unix_stop.clone(),
    ));

    announce(&format!("listening on {origin}"));
    daemon.enroll();
    tracing::info!(%local, home = %home.path.display(), "daemon ready");

    let http_stop = CancellationToken::new();
    let server = {
        let http_stop = http_stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                .with_graceful_shutdown(async move { http_stop.cancelled().await })
                .await
        })
    };
    stop.cancelled().await;
    let force = shard.force.load(std::sync::atomic::Ordering::SeqCst);
    tracing::info!(force, "shutting down");
    unix_stop.cancel();
    // Agents first: graceful lets active turns finish, bounded for signals.
    let graceful = shard.registry.shutdown(force);
    if tokio::time::timeout(SIGNAL_GRACE, graceful).await.is_err() {
        tracing::warn!("agents did not stop in time; killing them");
        shard.registry.shutdown(true).await;
    }
    hub.close_all("the daemon is shutting down");
    http_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    let _ = std::fs::remove_file(home.join("daemon.sock"));
    tracing::info!("daemon stopped");
    drop(home);
    Ok(())
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

/// Completes on the first SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
}
