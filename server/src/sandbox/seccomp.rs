//! The system-call filter every sandboxed agent runs under, installed by
//! `shard contain` on itself before it starts anything, so that the agent
//! and all it starts inherit it (docs/SANDBOX.md, "Processes").
//!
//! A deny list in the spirit of Codex's and of container runtimes': calls
//! that reach into another process (`ptrace`, `process_vm_*`), change what
//! the file system looks like (`mount` and the new mount API, `pivot_root`,
//! `chroot`), reach the kernel's keyrings, load code into the kernel
//! (`bpf`, modules, `kexec`), or widen the kernel surface an agent needs
//! nothing of (`io_uring`, `userfaultfd`, `perf_event_open`), and the two
//! `ioctl`s that push input into a terminal. Everything else is allowed:
//! the agent's tools are compilers, shells and test runners.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The calls refused outright (`EPERM`).
const REFUSED: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("setns", libc::SYS_setns),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
];

/// `ioctl` requests refused: pushing input into a terminal (`TIOCSTI`) and
/// the console's own (`TIOCLINUX`).
#[allow(clippy::unnecessary_cast)] // `libc::Ioctl` is not `u64` on every platform
const REFUSED_IOCTLS: &[u64] = &[libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// Names of the refused calls, for docs and logs.
pub fn refused_names() -> impl Iterator<Item = &'static str> {
    REFUSED.iter().map(|(name, _)| *name).chain(["ioctl(TIOCSTI)", "ioctl(TIOCLINUX)"])
}

/// The filter, compiled for this machine's architecture.
pub fn program() -> anyhow::Result<BpfProgram> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|(_, number)| (*number, Vec::new())).collect();
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|request| {
            let condition =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *request)?;
            SeccompRule::new(vec![condition])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| anyhow::anyhow!("no system-call filter for {}", std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Installs the filter on this process (every thread started after it,
/// and every process it starts, inherits it); sets `no_new_privs` first.
pub fn install() -> anyhow::Result<()> {
    let program = program()?;
    seccompiler::apply_filter(&program)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles_for_this_machine() {
        let program = super::program().unwrap();
        assert!(program.len() > super::REFUSED.len(), "one test per call at least");
    }
}
