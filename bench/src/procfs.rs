//! What the benchmarks read of a process from `/proc`: resident memory,
//! CPU time, open descriptors, threads, children and their descendants.

use anyhow::{Context, Result};

/// The resident set of process `pid`, in bytes.
pub fn rss(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).context("no VmRSS")?;
    let kb: u64 = line.split_whitespace().nth(1).context("VmRSS value")?.parse()?;
    Ok(kb * 1024)
}

/// Where a process's resident memory is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// Resident, all of it (`VmRSS`).
    pub rss: u64,
    /// Resident and anonymous: the process's own heap and stacks.
    pub anon: u64,
    /// Proportional: shared pages divided among the processes sharing them
    /// (the executable's pages, one copy for the daemon and every agent).
    pub pss: u64,
}

/// The memory of process `pid`, from `smaps_rollup`.
pub fn memory(pid: u32) -> Result<Memory> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
    let field = |name: &str| -> Result<u64> {
        let line = rollup
            .lines()
            .find(|line| line.starts_with(name))
            .with_context(|| format!("no {name} in smaps_rollup"))?;
        let kb: u64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
        Ok(kb * 1024)
    };
    Ok(Memory { rss: field("Rss:")?, anon: field("Pss_Anon:")?, pss: field("Pss:")? })
}

/// CPU time process `pid` has used so far, all its threads, in
/// nanoseconds (the scheduler's own accounting, not 10 ms ticks).
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .filter_map(|task| {
            let path = task.ok()?.path().join("schedstat");
            std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Open file descriptors of process `pid`.
pub fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Threads of process `pid`.
pub fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count)
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).ok().is_some_and(|stat| {
                // After the command's closing parenthesis: state, then ppid.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// Every process below `pid`: its children, theirs, and so on (an agent
/// that is not Shard's own runs under `shard guard`, a child of the
/// daemon's child).
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let parents: Vec<(u32, u32)> = entries
        .filter_map(|entry| {
            let process = entry.ok()?.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            Some((process, rest.split_whitespace().nth(1)?.parse::<u32>().ok()?))
        })
        .collect();
    let mut found = Vec::new();
    let mut below = vec![pid];
    while let Some(parent) = below.pop() {
        for &(process, _) in parents.iter().filter(|&&(_, of)| of == parent) {
            found.push(process);
            below.push(process);
        }
    }
    found
}

/// The command line of process `pid`, one argument each.
pub fn cmdline(pid: u32) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(bytes) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return Vec::new() };
    bytes
        .split(|byte| *byte == 0)
        .filter(|part| !part.is_empty())
        .map(|part| std::ffi::OsStr::from_bytes(part).to_owned())
        .collect()
}
