//! `shard guard -- COMMAND [ARGS…]`, internal: how the daemon runs an agent
//! that is not Shard's own. Such an agent need not exit when its input
//! closes (Claude Code's and Codex's adapters do not), so a daemon that
//! dies without a chance to kill it (SIGKILL, a crash, the OOM killer)
//! would leave it running, with whatever it started. The guard runs the
//! agent as its child, on the daemon's pipes, as the subreaper of all the
//! agent starts; it exits as the agent does, and when its parent changes
//! (the daemon is gone) it kills the whole tree below it and exits.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use anyhow::Context;

/// How often the guard looks whether the daemon is still its parent.
const LOOK: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, clap::Args)]
pub struct GuardArgs {
    /// The agent's command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Runs the agent until it exits (the guard exits with its status) or the
/// daemon goes (the agent's tree is killed).
pub fn run(args: GuardArgs) -> anyhow::Result<i32> {
    // The daemon's pid as the daemon gave it, not this process's parent
    // now: a daemon that died before this line would not be noticed.
    let given = std::env::var(shard_platform::PARENT_PID_ENV).ok();
    let parent = given
        .and_then(|pid| pid.parse().ok())
        .map_or_else(nix::unistd::getppid, nix::unistd::Pid::from_raw);
    shard_platform::process_tree::become_subreaper().context("cannot become a subreaper")?;
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("no command to run");
    };
    let mut child = {
        // Registered before it can exit, so the orphan reaper leaves its
        // exit status to `try_wait`.
        let mut managed = shard_platform::process_tree::Managed::lock();
        let child = std::process::Command::new(program)
            .args(rest)
            .env_remove(shard_platform::PARENT_PID_ENV)
            .spawn()
            .with_context(|| format!("cannot start `{}`", program.to_string_lossy()))?;
        if let Ok(pid) = i32::try_from(child.id()) {
            managed.insert(pid);
        }
        child
    };
    let me = std::process::id();
    loop {
        if let Some(status) = child.try_wait().context("cannot wait for the agent")? {
            // What it left behind goes with it.
            shard_platform::process_tree::kill_tree(me, false);
            shard_platform::process_tree::reap_orphans();
            return Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
        }
        if nix::unistd::getppid() != parent {
            shard_platform::process_tree::kill_tree(me, false);
            return Ok(1);
        }
        shard_platform::process_tree::reap_orphans();
        std::thread::sleep(LOOK);
    }
}
