//! Every process an agent starts dies with it (CONTRACT.md "Process
//! lifetime"). The agent is a child subreaper: whatever its `bash` commands
//! leave behind (`cmd &`, `setsid cmd &`, a daemonizing server) is
//! re-parented to the agent instead of to init, so it stays in the agent's
//! process tree, where [`kill_tree`] finds it.
//!
//! The tree is read from `/proc` (each process's parent), which is what a
//! subreaper makes complete: an orphan's new parent is the agent itself.
//! Killing stops every process first (a stopped process cannot fork), then
//! looks again until no live process is left unstopped, then sends SIGKILL
//! to all of them: a command that forks in a loop cannot outrun it.
//!
//! Orphans that exit on their own become zombies of the agent; [`reap_orphans`]
//! collects them, leaving alone the children tokio waits for itself (the
//! `bash` processes, registered in [`Managed`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// The environment variable through which the daemon gives its pid to the
/// processes it starts, so that each can tell when it is gone.
pub const PARENT_PID_ENV: &str = "SHARD_PARENT_PID";

/// Rounds of stop-and-look before giving up on a tree that keeps growing.
/// Each round stops everything it saw, so only processes forked during the
/// previous scan are new; real trees settle in two or three.
const MAX_ROUNDS: usize = 64;

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) pid: i32,
    pub(crate) parent: i32,
    /// Running, sleeping or stopped: not a zombie (`Z`) or dead (`X`).
    pub(crate) live: bool,
    stopped: bool,
    /// Its process group.
    group: i32,
    /// CPU time in clock ticks: its own, and its reaped children's.
    pub(crate) ticks: u64,
    /// Resident pages.
    pub(crate) rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name is in parentheses and may
/// itself hold spaces and parentheses, so the fields are read after the last
/// `)`.
fn parse_stat(text: &str) -> Option<Entry> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_whitespace().next()?.parse().ok()?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // After the group: session, tty, tpgid, flags and four fault counts;
    // then utime, stime, cutime, cstime; six more fields; then rss.
    let mut rest = fields.skip(8).map(|field| field.parse::<u64>().unwrap_or(0));
    let ticks = rest.by_ref().take(4).sum();
    let rss_pages = rest.nth(6).unwrap_or(0);
    Some(Entry {
        pid,
        parent,
        group,
        ticks,
        rss_pages,
        live: !matches!(state, 'Z' | 'X' | 'x'),
        stopped: matches!(state, 'T' | 't'),
    })
}

pub(crate) fn processes() -> Vec<Entry> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|text| parse_stat(&text))
        .collect()
}

/// Every process below `root` (not `root` itself), nearest first.
fn descendants_in(table: &[Entry], root: i32) -> Vec<Entry> {
    let mut children: HashMap<i32, Vec<Entry>> = HashMap::new();
    for entry in table {
        children.entry(entry.parent).or_default().push(*entry);
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    let mut seen = HashSet::from([root]);
    while let Some(pid) = queue.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child.pid) {
                found.push(*child);
                queue.push(child.pid);
            }
        }
    }
    found
}

/// The live processes below `root`.
pub fn descendants(root: u32) -> Vec<u32> {
    let Ok(root) = i32::try_from(root) else { return Vec::new() };
    descendants_in(&processes(), root)
        .into_iter()
        .filter(|entry| entry.live)
        .filter_map(|entry| u32::try_from(entry.pid).ok())
        .collect()
}

/// The live processes whose parent is `root`.
pub fn children(root: u32) -> Vec<u32> {
    let Ok(root) = i32::try_from(root) else { return Vec::new() };
    processes()
        .into_iter()
        .filter(|entry| entry.parent == root && entry.live)
        .filter_map(|entry| u32::try_from(entry.pid).ok())
        .collect()
}

/// The live processes below `root` in a process group other than its own:
/// the commands an agent started apart from itself (in a session of their
/// own, as Claude Code and Codex start theirs).
pub fn detached(root: u32) -> HashSet<u32> {
    let Ok(root) = i32::try_from(root) else { return HashSet::new() };
    let table = processes();
    let Some(own) = table.iter().find(|entry| entry.pid == root).map(|entry| entry.group) else {
        return HashSet::new();
    };
    descendants_in(&table, root)
        .into_iter()
        .filter(|entry| entry.live && entry.group != own)
        .filter_map(|entry| u32::try_from(entry.pid).ok())
        .collect()
}

/// Kills what `root` started apart from itself since `before` was taken
/// (each with its own tree): what an agent left running when its turn was
/// cancelled. What was there before is left alone. Returns how many
/// processes were killed.
pub fn kill_detached_since(root: u32, before: &HashSet<u32>) -> usize {
    let new: Vec<u32> = detached(root).into_iter().filter(|pid| !before.contains(pid)).collect();
    new.into_iter().map(|pid| kill_tree(pid, true)).sum()
}

/// The ancestors of `pid`, parent first, up to (not including) init. Bounded:
/// a chain longer than a few hundred is cut there.
pub fn ancestors(pid: u32) -> Vec<u32> {
    const MAX_DEPTH: usize = 256;
    let mut found = Vec::new();
    let mut current = pid;
    while found.len() < MAX_DEPTH {
        let Some(entry) = std::fs::read_to_string(format!("/proc/{current}/stat"))
            .ok()
            .and_then(|text| parse_stat(&text))
        else {
            break;
        };
        let Ok(parent) = u32::try_from(entry.parent) else { break };
        if parent <= 1 || found.contains(&parent) {
            break;
        }
        found.push(parent);
        current = parent;
    }
    found
}

/// Kills every live process below `root`, and `root` too when
/// `include_root`. Returns how many processes were killed.
pub fn kill_tree(root: u32, include_root: bool) -> usize {
    let Ok(root) = i32::try_from(root) else { return 0 };
    let mut doomed: HashSet<i32> = HashSet::new();
    if include_root {
        // Stopped first, so it cannot start anything while its tree is read.
        let _ = kill(Pid::from_raw(root), Signal::SIGSTOP);
        doomed.insert(root);
    }
    for _ in 0..MAX_ROUNDS {
        let table = processes();
        let running: Vec<i32> = descendants_in(&table, root)
            .into_iter()
            .filter(|entry| entry.live && !(entry.stopped && doomed.contains(&entry.pid)))
            .map(|entry| entry.pid)
            .collect();
        if running.is_empty() {
            break;
        }
        for pid in running {
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            doomed.insert(pid);
        }
    }
    for pid in &doomed {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    doomed.len()
}

/// Children whose exit tokio collects itself (the `bash` processes): the
/// orphan reaper must never take their exit status.
pub struct Managed(Mutex<BTreeSet<i32>>);

static MANAGED: Managed = Managed(Mutex::new(BTreeSet::new()));

impl Managed {
    /// Held while a managed child is spawned and registered, and while the
    /// reaper looks for orphans, so that a child that exits at once is never
    /// taken for an orphan.
    pub fn lock() -> MutexGuard<'static, BTreeSet<i32>> {
        MANAGED.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Reaps zombie children of this process that nobody else waits for: the
/// orphans a subreaper inherits. Returns how many were reaped.
pub fn reap_orphans() -> usize {
    let managed = Managed::lock();
    let me = std::process::id();
    let Ok(me) = i32::try_from(me) else { return 0 };
    let mut reaped = 0;
    for entry in processes() {
        if entry.parent != me || entry.live || managed.contains(&entry.pid) {
            continue;
        }
        if waitpid(Pid::from_raw(entry.pid), Some(WaitPidFlag::WNOHANG)).is_ok() {
            reaped += 1;
        }
    }
    reaped
}

/// Set once this process is a subreaper: only then are its unmanaged
/// children orphans it inherited (in a test process they are other tests').
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process the subreaper of everything it starts.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)?;
    SUBREAPER.store(true, std::sync::atomic::Ordering::Release);
    Ok(())
}

/// Kills and reaps every child of this subreaper that it does not manage:
/// what it inherits when a child of its dies and leaves processes behind
/// (the daemon, when an agent is killed by anything but the daemon, takes
/// what the agent's tools were running). Killing a tree re-parents its
/// pieces here too, so it looks again, a bounded number of rounds. Returns
/// how many processes were killed; nothing happens in a process that is no
/// subreaper.
pub fn kill_orphans() -> usize {
    if !SUBREAPER.load(std::sync::atomic::Ordering::Acquire) {
        return 0;
    }
    let Ok(me) = i32::try_from(std::process::id()) else { return 0 };
    let mut killed = 0;
    for _ in 0..MAX_ROUNDS {
        let orphans: Vec<Entry> = {
            // Held while listing: a managed child is registered under it as
            // it is spawned, so it is never taken for an orphan.
            let managed = Managed::lock();
            processes()
                .into_iter()
                .filter(|entry| entry.parent == me && !managed.contains(&entry.pid))
                .collect()
        };
        if orphans.is_empty() {
            break;
        }
        for orphan in orphans.iter().filter(|orphan| orphan.live) {
            killed += u32::try_from(orphan.pid).map_or(0, |pid| kill_tree(pid, true));
        }
        for orphan in &orphans {
            // Our child until reaped, so its pid cannot have been reused.
            let _ = waitpid(Pid::from_raw(orphan.pid), None);
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let entry = parse_stat("4242 (a (b) c) S 17 4242 4242 0 -1").expect("parses");
        assert_eq!((entry.pid, entry.parent, entry.live, entry.stopped), (4242, 17, true, false));
        let zombie = parse_stat("7 (sleep) Z 1 7 7").expect("parses");
        assert!(!zombie.live);
        let stopped = parse_stat("8 (sleep) T 1 8 8").expect("parses");
        assert!(stopped.live && stopped.stopped);
        assert!(parse_stat("garbage").is_none());
        assert_eq!((entry.ticks, entry.rss_pages), (0, 0), "a short line has no figures");
        let line = "9 (shard) S 1 9 9 0 -1 4194560 500 0 0 0 120 30 7 3 20 0 4 0 99 123456 2048";
        let full = parse_stat(line).expect("parses");
        assert_eq!((full.ticks, full.rss_pages), (160, 2048));
    }

    #[test]
    fn descendants_follow_parents_down_only() {
        let entry = |pid, parent| Entry {
            pid,
            parent,
            live: true,
            stopped: false,
            group: pid,
            ticks: 0,
            rss_pages: 0,
        };
        let table = [entry(1, 0), entry(10, 1), entry(11, 10), entry(12, 11), entry(20, 1)];
        let mut below: Vec<i32> = descendants_in(&table, 10).iter().map(|e| e.pid).collect();
        below.sort_unstable();
        assert_eq!(below, [11, 12]);
    }
}
