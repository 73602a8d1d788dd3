//! What a process tree uses: memory (resident, and proportional: each
//! shared page counted once across the processes that share it) and CPU
//! time, read from `/proc` in one look for every tree asked about.

use std::collections::HashMap;

use crate::process_tree::{self, Entry};

/// What one process tree uses at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeUsage {
    /// Live processes in the tree, its root included.
    pub processes: u32,
    /// Resident memory, every page counted in each process that maps it.
    pub rss_bytes: u64,
    /// Proportional memory: a page shared by n processes counts 1/n in
    /// each. What the tree would give back if it ended. Its RSS where the
    /// kernel does not say.
    pub pss_bytes: u64,
    /// CPU time so far, in clock ticks: the live processes' own and what
    /// they collected from children they reaped.
    pub cpu_ticks: u64,
}

/// Every process on the machine as one look at `/proc` found it, indexed
/// once by pid and by parent for every tree asked about.
pub struct Snapshot {
    table: Vec<Entry>,
    by_pid: HashMap<i32, usize>,
    children: HashMap<i32, Vec<usize>>,
    page_size: u64,
}

impl Snapshot {
    pub fn take() -> Self {
        let table = process_tree::processes();
        let mut by_pid = HashMap::with_capacity(table.len());
        let mut children: HashMap<i32, Vec<usize>> = HashMap::new();
        for (index, entry) in table.iter().enumerate() {
            by_pid.insert(entry.pid, index);
            children.entry(entry.parent).or_default().push(index);
        }
        Self { table, by_pid, children, page_size: page_size() }
    }

    /// What the tree below `root`, `root` included, uses; `None` when
    /// `root` is gone.
    pub fn usage(&self, root: u32) -> Option<TreeUsage> {
        let root = i32::try_from(root).ok()?;
        let top = *self.by_pid.get(&root)?;
        if !self.table[top].live {
            return None;
        }
        // Breadth first; each process once, though a pid reused between
        // two reads of `/proc` could make a loop.
        let mut tree = vec![top];
        let mut seen = std::collections::HashSet::from([top]);
        let mut next = 0;
        while let Some(&index) = tree.get(next) {
            next += 1;
            let below = self.children.get(&self.table[index].pid).into_iter().flatten();
            tree.extend(below.filter(|&&child| seen.insert(child)));
        }
        let mut usage = TreeUsage::default();
        for entry in tree.iter().map(|&index| &self.table[index]).filter(|entry| entry.live) {
            let rss = entry.rss_pages * self.page_size;
            usage.processes += 1;
            usage.rss_bytes += rss;
            usage.pss_bytes += proportional(entry.pid).unwrap_or(rss);
            usage.cpu_ticks += entry.ticks;
        }
        Some(usage)
    }

    /// The process `pid` alone.
    pub fn process(&self, pid: u32) -> Option<TreeUsage> {
        let pid = i32::try_from(pid).ok()?;
        let entry = self.by_pid.get(&pid).map(|&index| &self.table[index]).filter(|e| e.live)?;
        let rss_bytes = entry.rss_pages * self.page_size;
        Some(TreeUsage {
            processes: 1,
            rss_bytes,
            pss_bytes: proportional(pid).unwrap_or(rss_bytes),
            cpu_ticks: entry.ticks,
        })
    }
}

/// Clock ticks in a second, the unit of [`TreeUsage::cpu_ticks`].
pub fn ticks_per_second() -> u64 {
    sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap_or(100)
}

fn page_size() -> u64 {
    sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap_or(4096)
}

fn sysconf(variable: nix::unistd::SysconfVar) -> Option<u64> {
    let value = nix::unistd::sysconf(variable).ok()??;
    u64::try_from(value).ok().filter(|value| *value > 0)
}

/// The process's proportional set size from `smaps_rollup`, in bytes.
fn proportional(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    pss_of(&text)
}

fn pss_of(rollup: &str) -> Option<u64> {
    let line = rollup.lines().find_map(|line| line.strip_prefix("Pss:"))?;
    let kilobytes: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kilobytes * 1024)
}

/// CPU use between two looks at the same tree, as a percentage of one core
/// (a tree busy on two cores reads 200).
pub fn cpu_percent(before: u64, after: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    let ticks = after.saturating_sub(before) as f64;
    ticks / ticks_per_second() as f64 / seconds * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proportional_size_is_read_from_the_rollup() {
        let rollup = "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:  9000 kB\nPss:   2500 kB\nPss_Anon: 1 kB\n";
        assert_eq!(pss_of(rollup), Some(2500 * 1024));
        assert_eq!(pss_of("Rss: 5 kB\n"), None);
    }

    #[test]
    fn this_process_is_found_with_its_memory_and_time() {
        let snapshot = Snapshot::take();
        let me = snapshot.usage(std::process::id()).expect("this process is live");
        assert!(me.processes >= 1);
        assert!(me.rss_bytes > 1024 * 1024, "{me:?}");
        assert!(me.pss_bytes > 0 && me.pss_bytes <= me.rss_bytes, "{me:?}");
        assert_eq!(snapshot.usage(u32::MAX), None);
    }

    #[test]
    fn cpu_is_a_share_of_one_core() {
        let second = ticks_per_second();
        assert_eq!(cpu_percent(0, second, 1.0), 100.0);
        assert_eq!(cpu_percent(0, second, 2.0), 50.0);
        assert_eq!(cpu_percent(second, 0, 1.0), 0.0, "never below nothing");
        assert_eq!(cpu_percent(0, second, 0.0), 0.0);
    }
}
