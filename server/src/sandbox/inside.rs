//! `shard contain [--egress SOCKET] -- COMMAND [ARGS…]`, internal: the
//! first process inside an agent's sandbox (docs/SANDBOX.md). bubblewrap
//! starts it as the sandbox's process 1; it
//!
//! 1. installs the system-call filter on itself, before any thread or
//!    child exists, so that everything below inherits it;
//! 2. with `--egress`, listens on the sandbox's own loopback and forwards
//!    each connection to the daemon's egress proxy through `SOCKET` (the
//!    only way out of the sandbox's network namespace), and points the
//!    agent at it with the usual proxy variables;
//! 3. runs the agent as its child, passes it SIGTERM, SIGINT and SIGHUP,
//!    reaps whatever is orphaned below it, and exits as the agent does:
//!    the kernel then ends everything left in the sandbox.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

#[derive(Debug, Clone, clap::Args)]
pub struct ContainArgs {
    /// The daemon's egress proxy for this agent, as a unix socket.
    #[arg(long)]
    pub egress: Option<PathBuf>,
    /// The agent's command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Runs the agent until it exits; returns its exit code (128 + the signal
/// that ended it).
pub fn run(args: ContainArgs) -> anyhow::Result<i32> {
    // The keys the daemon hands down are in this process's environment:
    // non-dumpable, its `/proc/1/environ` is closed to the agent, which
    // has no capability left to open it anyway.
    nix::sys::prctl::set_dumpable(false).context("cannot make the process non-dumpable")?;
    super::seccomp::install().context("cannot install the system-call filter")?;
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("no command to run");
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    // The agent's parent is this process: an agent that checks it is
    // still its parent's child (Shard's own) checks this one.
    command.env(shard_platform::PARENT_PID_ENV, std::process::id().to_string());
    if let Some(socket) = &args.egress {
        let port = crate::sandbox::forwarder::LISTEN_PORT;
        crate::sandbox::forwarder::spawn_forwarder_thread(port, socket.clone())
            .context("cannot listen for the agent's connections")?;
        command.envs(crate::sandbox::forwarder::proxy_env(port));
    }
    // Handled, not blocked: a blocked signal would stay blocked in the
    // agent, and the process 1 of a namespace only gets the signals it
    // handles. The handlers are in place before the agent starts.
    let child = Arc::new(AtomicI32::new(0));
    pass_signals_on(child.clone())?;
    let started =
        command.spawn().with_context(|| format!("cannot start `{}`", program.to_string_lossy()))?;
    let pid = Pid::from_raw(i32::try_from(started.id()).context("pid out of range")?);
    child.store(pid.as_raw(), Ordering::SeqCst);
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(exited, code)) if exited == pid => return Ok(code),
            Ok(WaitStatus::Signaled(exited, signal, _)) if exited == pid => {
                return Ok(128 + signal as i32);
            }
            Ok(_) => {} // an orphan reaped
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(error).context("cannot wait for the agent"),
        }
    }
}

/// Passes SIGTERM, SIGINT and SIGHUP on to the agent (`child`, once it is
/// set), from a thread of its own; returns once the handlers are in place.
fn pass_signals_on(child: Arc<AtomicI32>) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal thread's runtime")?;
    let (ready, installed) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("shard-signals".to_owned())
        .spawn(move || {
            runtime.block_on(async move {
                let kinds = [
                    (SignalKind::terminate(), Signal::SIGTERM),
                    (SignalKind::interrupt(), Signal::SIGINT),
                    (SignalKind::hangup(), Signal::SIGHUP),
                ];
                let mut streams = Vec::new();
                for (kind, signal_of) in kinds {
                    match signal(kind) {
                        Ok(stream) => streams.push((stream, signal_of)),
                        Err(error) => {
                            let _ = ready.send(Err(error));
                            return;
                        }
                    }
                }
                let _ = ready.send(Ok(()));
                let [(terminate, _), (interrupt, _), (hangup, _)] = &mut streams[..] else {
                    return;
                };
                loop {
                    let passed = tokio::select! {
                        _ = terminate.recv() => Signal::SIGTERM,
                        _ = interrupt.recv() => Signal::SIGINT,
                        _ = hangup.recv() => Signal::SIGHUP,
                    };
                    let pid = child.load(Ordering::SeqCst);
                    if pid > 0 {
                        let _ = nix::sys::signal::kill(Pid::from_raw(pid), passed);
                    }
                }
            });
        })
        .context("cannot start the signal thread")?;
    installed.recv().context("the signal thread ended")?.context("cannot handle signals")
}
