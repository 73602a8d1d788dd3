//! The daemon's life: take `$SHARD_HOME`, load the security store and the
//! registry, open the unix socket and the HTTP port, announce, serve, and on
//! shutdown stop every agent process before exiting.
//!
//! A SIGTERM or SIGINT (a service manager, Ctrl-C) stops now: every client
//! is closed at once (a WebSocket hears 1001, going away), every agent gets
//! its own SIGTERM, aborts its turn, flushes its session log and exits, and
//! the daemon exits as soon as they have (a tree still there after the kill
//! grace, [`KILL_GRACE`], is killed). `daemon.shutdown` drains first:
//! active turns get [`DRAIN_GRACE`] to finish while their clients watch,
//! then it stops the same way. A second signal, or `force`, kills every
//! agent's process tree at once.
//!
//! [`KILL_GRACE`]: crate::agents::host::process::KILL_GRACE

mod args;
mod build;
mod listen;
mod shard;

pub use self::args::DaemonArgs;

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::build::Built;
use self::shard::announce;
use crate::agents::host::ShutdownMode;
use crate::home::Home;
use crate::web::config::WebConfig;

/// On `daemon.shutdown`, how long active turns get to finish before their
/// agents are stopped.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// Once every client is told the daemon is going, how long their
/// connections get to send the last words and end: each write, the close
/// frame included, has its own deadline well within this.
const CLIENTS_GRACE: Duration = Duration::from_secs(3);
/// How long the HTTP server gets to finish the requests it is answering.
const HTTP_GRACE: Duration = Duration::from_secs(5);

/// Runs the daemon until a signal or `daemon.shutdown`. The configuration is
/// validated before anything is bound.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let config = WebConfig::from_args(&args.web)?;
    let home_path = shard_platform::config::shard_home()?;
    let home = Home::open(&home_path)?;
    // What an agent's tools are running when the agent is killed from
    // outside comes to the daemon, which kills it (agents::host::process).
    shard_platform::process_tree::become_subreaper().context("cannot become a subreaper")?;
    let listener = listen::listen_as_before(&home, config.bind)
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let socket = crate::clients::unix::bind(&home.join("daemon.sock"))?;
    let stop = Stop::new();
    tokio::spawn(on_signals(stop.clone()));
    run(home, listener, socket, args, config, stop).await
}

/// How the daemon is asked to stop, gentlest first. Each token is a child
/// of the next: asking for a stronger stop asks for the gentler ones too,
/// so `drain` is cancelled by any shutdown.
#[derive(Clone)]
pub struct Stop {
    /// `daemon.shutdown`: active turns may finish, within [`DRAIN_GRACE`].
    pub drain: CancellationToken,
    /// SIGTERM/SIGINT: every agent stops now, the agent's own way.
    pub terminate: CancellationToken,
    /// A second signal, or `force`: every agent's tree is killed at once.
    pub force: CancellationToken,
}

impl Stop {
    pub fn new() -> Self {
        let force = CancellationToken::new();
        let terminate = force.child_token();
        let drain = terminate.child_token();
        Self { drain, terminate, force }
    }
}

impl Default for Stop {
    fn default() -> Self {
        Self::new()
    }
}

/// The composition root: the daemon's parts built, its two doors opened
/// (the unix socket and HTTP), served until a shutdown is asked for, then
/// stopped in order.
pub async fn run(
    home: Home,
    listener: TcpListener,
    socket: tokio::net::UnixListener,
    args: DaemonArgs,
    config: WebConfig,
    stop: Stop,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("listener has no local address")?;
    let built = build::daemon(&home, &args, config, local, &stop)?;
    let unix_stop = CancellationToken::new();
    tokio::spawn(crate::web::enforce_expiry(built.web.clone(), unix_stop.clone()));
    let app = crate::web::router(local, built.web.clone());
    let (daemon, hub, limits) = (built.daemon.clone(), built.hub.clone(), built.web.limits);
    tokio::spawn(crate::clients::unix::serve(socket, daemon, hub, limits, unix_stop.clone()));

    announce(&format!("listening on http://{local}"));
    built.daemon.enroll();
    tracing::info!(%local, home = %home.path.display(), "daemon ready");

    let http_stop = CancellationToken::new();
    let server = tokio::spawn(serve_http(listener, app, http_stop.clone()));
    stop.drain.cancelled().await;
    unix_stop.cancel();
    shut_down(&built, &stop, http_stop).await;
    let _ = tokio::time::timeout(HTTP_GRACE, server).await;
    let _ = std::fs::remove_file(home.join("daemon.sock"));
    tracing::info!("daemon stopped");
    drop(home);
    Ok(())
}

/// The stop, in order: runs marked, active turns drained (`daemon.shutdown`
/// only), every client told and closed, every agent stopped.
async fn shut_down(built: &Built, stop: &Stop, http_stop: CancellationToken) {
    tracing::info!(
        terminate = stop.terminate.is_cancelled(),
        force = stop.force.is_cancelled(),
        "shutting down"
    );
    // Runs this shutdown ends are not over: the next start marks them
    // interrupted, never failed or replayed.
    built.shard.jobs.shutting_down();
    drain(&built.shard, stop).await;
    // Nothing is left for a client to watch: each hears now that the
    // daemon is going (the page stops saying "connected"), and none can
    // come in, while the agents stop.
    http_stop.cancel();
    built.hub.close_all(GOING_AWAY);
    stop_agents(&built.shard, stop).await;
    if tokio::time::timeout(CLIENTS_GRACE, built.hub.all_closed()).await.is_err() {
        tracing::warn!("client connections still open after the grace; dropping them");
    }
}

/// The last words every client hears.
const GOING_AWAY: &str = "the daemon is shutting down";

/// Serves HTTP until `stop`.
async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    stop: CancellationToken,
) -> std::io::Result<()> {
    // Events are small and streamed: no Nagle delay on any of them.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

/// `daemon.shutdown`: lets active turns finish while their clients watch,
/// for [`DRAIN_GRACE`] at most, and only until a signal asks for more.
async fn drain(shard: &shard::Shard, stop: &Stop) {
    if stop.terminate.is_cancelled() {
        return;
    }
    tokio::select! {
        () = shard.registry.shutdown(ShutdownMode::Drain) => {}
        () = stop.terminate.cancelled() => {}
        () = tokio::time::sleep(DRAIN_GRACE) => {
            tracing::info!("active turns did not finish in time; stopping their agents");
        }
    }
}

/// Stops every agent still running: by its own SIGTERM (it aborts its
/// turn, flushes its session log and exits; a tree still there after the
/// kill grace is killed), or at once on a second signal or `force`.
async fn stop_agents(shard: &shard::Shard, stop: &Stop) {
    if !stop.force.is_cancelled() {
        tokio::select! {
            () = shard.registry.shutdown(ShutdownMode::Terminate) => return,
            () = stop.force.cancelled() => {}
        }
    }
    tracing::warn!("killing every agent");
    shard.registry.shutdown(ShutdownMode::Kill).await;
}

/// The first SIGINT (Ctrl-C) or SIGTERM stops now, cleanly; the second
/// kills.
async fn on_signals(stop: Stop) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    for token in [stop.terminate, stop.force] {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        token.cancel();
    }
}
