//! The daemon's life: bind, announce, serve until a shutdown signal.

use std::future::Future;
use std::io::Write;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::cli::DaemonArgs;

/// Binds the configured address and serves until SIGINT or SIGTERM.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let addr = args.bind_addr();
    let listener =
        TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    run(listener, shutdown_signal()).await
}

/// Serves on an already bound listener until `shutdown` completes.
///
/// Prints `listening on http://HOST:PORT` on stdout once connections are
/// accepted (CONTRACT.md): test harnesses and scripts wait for that line.
pub async fn run(
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("listener has no local address")?;
    let app = crate::http::router(local);
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{local}").context("cannot write to stdout")?;
        stdout.flush().context("cannot write to stdout")?;
    }
    tracing::info!(%local, "daemon ready");
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await.context("server failed")?;
    tracing::info!("daemon stopped");
    Ok(())
}

/// Completes on the first SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
