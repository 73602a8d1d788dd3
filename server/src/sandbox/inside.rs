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
use nix::sys::signal::{SigSet, Signal};
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

/// The signals passed on to the agent.
const PASSED_ON: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

/// Runs the agent until it exits; returns its exit code (128 + the signal
/// that ended it).
pub fn run(args: ContainArgs) -> anyhow::Result<i32> {
    super::seccomp::install().context("cannot install the system-call filter")?;
    // Blocked here, in the only thread, so that every thread started below
    // has them blocked too and the one that waits for them gets them all.
    let mut passed = SigSet::empty();
    for signal in PASSED_ON {
        passed.add(signal);
    }
    passed.thread_block().context("cannot block signals")?;
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("no command to run");
    };
    let mut command = std::process::Command::new(program);
    command.args(rest);
    // The agent's parent is this process: an agent that checks it is
    // still its parent's child (Shard's own) checks this one.
    command.env(shard_agent::PARENT_PID_ENV, std::process::id().to_string());
    if let Some(socket) = &args.egress {
        let port = shard_agent::egress::LISTEN_PORT;
        shard_agent::egress::spawn_forwarder_thread(port, socket.clone())
            .context("cannot listen for the agent's connections")?;
        command.envs(shard_agent::egress::proxy_env(port));
    }
    // The standard library starts the child with an empty signal mask.
    let child =
        command.spawn().with_context(|| format!("cannot start `{}`", program.to_string_lossy()))?;
    let child = Pid::from_raw(i32::try_from(child.id()).context("pid out of range")?);
    std::thread::spawn(move || {
        while let Ok(signal) = passed.wait() {
            let _ = nix::sys::signal::kill(child, signal);
        }
    });
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                return Ok(128 + signal as i32);
            }
            Ok(_) => {} // an orphan reaped
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(error).context("cannot wait for the agent"),
        }
    }
}
