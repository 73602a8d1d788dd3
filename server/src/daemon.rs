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

use crate::audit::Audit;
use crate::auth::Auth;
use crate::cli::DaemonArgs;
use crate::config::WebConfig;
use crate::connection::Daemon;
use crate::home::Home;
use crate::host::Context as HostContext;
use crate::hub::Hub;
use crate::limiter::Limiter;
use crate::registry::Registry;
use serde_json::json;
use shard_protocol::orchestrator::{BrowserSession, RevokeSession};
use shard_protocol::{ErrorCode, WireError};

/// `/bootstrap` calls and WebSocket upgrades allowed per peer per minute: a
/// tab needs one of each per (re)connection.
const RATE_PER_MINUTE: usize = 60;
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
    hub: Arc<Hub>,
    audit: Arc<Audit>,
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

    fn sessions(&self) -> Vec<BrowserSession> {
        self.auth
            .list()
            .into_iter()
            .map(|view| BrowserSession {
                connections: self.hub.session_connections(&view.session_id),
                session_id: view.session_id,
                principal_id: view.principal_id,
                created_at: view.created_at,
                last_seen_at: view.last_seen_at,
                expires_at: view.expires_at,
            })
            .collect()
    }

    fn disconnect(&self, target: RevokeSession) -> u32 {
        let session = match &target {
            RevokeSession::One(id) => Some(id.as_str()),
            RevokeSession::All => None,
        };
        self.hub.close_browsers(session, "disconnected by the daemon; reconnect")
    }

    fn revoke(&self, target: RevokeSession) -> Result<Vec<String>, WireError> {
        let store_error = |error: std::io::Error| {
            WireError::new(ErrorCode::InternalError, format!("security store: {error}"))
        };
        let revoked = match target {
            RevokeSession::All => self.auth.revoke_all().map_err(store_error)?,
            RevokeSession::One(id) => {
                if !self.auth.revoke(&id).map_err(store_error)? {
                    return Err(WireError::new(
                        ErrorCode::NotFound,
                        format!("no live session `{id}`"),
                    ));
                }
                vec![id]
            }
        };
        for id in &revoked {
            self.hub.close_session(id, "session revoked");
            self.audit.record(
                "session_revoked",
                json!({"session_id": id, "by": "shard sessions revoke"}),
            );
        }
        Ok(revoked)
    }
}

/// Runs the daemon until a signal or `daemon.shutdown`. The configuration is
/// validated before anything is bound.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let config = WebConfig::from_args(&args)?;
    let home_path = shard_agent::config::shard_home()?;
    let home = Home::open(&home_path)?;
    let listener =
        listen(config.bind).with_context(|| format!("cannot listen on {}", config.bind))?;
    let socket = crate::unix::bind(&home.join("daemon.sock"))?;
    let stop = CancellationToken::new();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            stop.cancel();
        });
    }
    run(home, listener, socket, args, config, stop).await
}

pub async fn run(
    home: Home,
    listener: TcpListener,
    socket: tokio::net::UnixListener,
    args: DaemonArgs,
    config: WebConfig,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("listener has no local address")?;
    let origin = config.public_origin(local);
    let hub = Arc::new(Hub::default());
    let auth = Arc::new(Auth::load(&home.path, config.session_idle, config.session_max_age)?);
    let audit = Arc::new(Audit::open(&home.path).context("cannot open the audit log")?);
    let mut warnings = Vec::new();
    if config.allow_insecure {
        let warning = "remote access over plain http: the session cookie can be read by anyone on the network path; use only on a trusted network, VPN or SSH tunnel";
        tracing::warn!("{warning}");
        warnings.push(warning);
    }
    audit.record(
        "startup",
        json!({"mode": config.mode.as_str(), "bind": local.to_string(), "public_host": config.public_host,
               "allowed_origins": config.allowed_origins, "trust_proxy": args.trust_proxy, "warnings": warnings}),
    );
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
        hub: hub.clone(),
        audit: audit.clone(),
        origin: origin.clone(),
        stop: stop.clone(),
        force: std::sync::atomic::AtomicBool::new(false),
    });
    let daemon: Arc<dyn Daemon> = shard.clone();
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (expected_host, allowed_origins) = match &config.public_host {
        Some(host) => (host.clone(), config.allowed_origins.clone()),
        // §4.1.1: the implicit loopback origin is the only entry.
        None => (local.to_string(), vec![format!("http://{local}")]),
    };
    let web = Arc::new(crate::http::Web {
        auth,
        hub: hub.clone(),
        daemon: daemon.clone(),
        audit,
        config: config.clone(),
        expected_host,
        allowed_origins,
        connections: connections.clone(),
        ping_interval: Duration::from_secs(args.ws_ping_interval),
        bootstrap_limit: Limiter::new(RATE_PER_MINUTE, Duration::from_secs(60)),
        upgrade_limit: Limiter::new(RATE_PER_MINUTE, Duration::from_secs(60)),
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

    announce(&format!("listening on http://{local}"));
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
