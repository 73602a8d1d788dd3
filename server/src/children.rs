//! The daemon's children that are not agents: a node's link command and
//! git for a workspace. The daemon is a subreaper, and when an agent
//! process ends it kills every child it does not manage, taking them for
//! orphans the agent left behind
//! ([`shard_platform::process_tree::kill_orphans`]). These are spawned
//! under the lock that killer lists under and kept off its list until
//! they have been waited for.

use shard_platform::process_tree::Managed;

/// Keeps a child off the orphan killer's list while it is held: hold it
/// until the child has been waited for. A path that gives the child up
/// unwaited drops both: the command must be `kill_on_drop`, so the child
/// is killed, and whichever reaper comes first (the runtime's or the
/// daemon's) collects it.
#[derive(Debug)]
pub struct Kept(i32);

impl Drop for Kept {
    fn drop(&mut self) {
        Managed::lock().remove(&self.0);
    }
}

/// Spawns `command` as a child the daemon manages.
pub fn spawn(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, Option<Kept>)> {
    let mut managed = Managed::lock();
    let child = command.spawn()?;
    let kept = child.id().and_then(|pid| i32::try_from(pid).ok()).map(|pid| {
        managed.insert(pid);
        Kept(pid)
    });
    Ok((child, kept))
}
