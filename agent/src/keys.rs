//! Provider keys out of every tool's reach (docs/SECURITY.md, "Keys").
//!
//! A process's `/proc/<pid>/environ` shows its environment as it was at
//! exec, whatever the process removes afterwards: a tool could read its
//! agent's keys there, or the daemon's. So `shard agent` and `shard daemon`,
//! first thing, take every variable hidden from tools out of their own
//! environment by executing themselves again without them, handing the
//! values to the new image through a pipe only it reads. Then they make
//! themselves non-dumpable, so that another process of the same user can
//! read neither their environment nor their memory.
//!
//! The values live in this module's memory from then on: the provider reads
//! a key with [`get`]; the daemon gives its agents theirs with [`hand_down`] (each
//! agent seals itself the same way before any tool can run).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::sync::OnceLock;

use anyhow::Context;

use crate::config::HiddenEnv;

/// The variable naming the pipe that carries the values to the new image.
/// Like every `SHARD_` variable it is hidden from tools; it holds only a
/// descriptor number.
const HANDOFF_ENV: &str = "SHARD_KEYS_FD";

/// The most the hidden variables may hold together: the pipe is filled
/// before the exec, with nobody reading yet, so it must hold all of it.
const MAX_HANDOFF: usize = 1 << 20;

static KEYS: OnceLock<BTreeMap<String, String>> = OnceLock::new();

/// Takes the hidden variables out of this process's environment (by
/// executing it again) and makes it non-dumpable. Returns only in the
/// sealed image, or with an error; call it before starting any thread.
pub fn seal(hidden: &HiddenEnv) -> anyhow::Result<()> {
    if let Some(descriptor) = std::env::var_os(HANDOFF_ENV) {
        let keys = receive(&descriptor)?;
        let _ = KEYS.set(keys);
    } else {
        let moved: BTreeMap<String, String> =
            std::env::vars().filter(|(name, _)| moves(hidden, name)).collect();
        if !moved.is_empty() {
            return Err(reexec(&moved));
        }
        let _ = KEYS.set(BTreeMap::new());
    }
    nix::sys::prctl::set_dumpable(false).context("cannot make the process non-dumpable")?;
    Ok(())
}

/// The value of the hidden variable `name` this process started with (read
/// from the environment in a process that never sealed, such as a test).
pub fn get(name: &str) -> Option<String> {
    match KEYS.get() {
        Some(keys) => keys.get(name).cloned(),
        None => std::env::var(name).ok(),
    }
}

/// Gives a process this one starts every hidden variable this one started
/// with (an agent, which seals itself in turn), and not the handoff's
/// descriptor, which is this process's own.
pub fn hand_down(command: &mut tokio::process::Command) {
    command.env_remove(HANDOFF_ENV);
    for (name, value) in KEYS.get().into_iter().flatten() {
        command.env(name, value);
    }
}

/// Shard's own settings: hidden from tools like every `SHARD_` variable, but
/// no secret, and read from the environment after the exec.
const SETTINGS: &[&str] =
    &["SHARD_HOME", "SHARD_LOG", crate::process_tree::PARENT_PID_ENV, HANDOFF_ENV];

/// Whether a variable leaves the environment: every variable hidden from
/// tools except Shard's own settings.
fn moves(hidden: &HiddenEnv, name: &str) -> bool {
    !SETTINGS.contains(&name) && hidden.hides(name.as_ref())
}

/// Executes this binary again, with the same arguments and the environment
/// minus `moved`, whose values go through a pipe. Returns only on failure.
fn reexec(moved: &BTreeMap<String, String>) -> anyhow::Error {
    let attempt = || -> anyhow::Result<std::io::Error> {
        let payload = serde_json::to_vec(moved)?;
        anyhow::ensure!(
            payload.len() <= MAX_HANDOFF,
            "the variables hidden from tools hold over {MAX_HANDOFF} bytes"
        );
        let read = filled_pipe(&payload)?;
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_else(|| OsString::from("shard"));
        let kept = std::env::vars_os()
            .filter(|(name, _)| name.to_str().is_none_or(|name| !moved.contains_key(name)));
        // `/proc/self/exe` is this very binary even if its file was replaced.
        let error = std::process::Command::new("/proc/self/exe")
            .arg0(arg0)
            .args(args)
            .env_clear()
            .envs(kept)
            .env(HANDOFF_ENV, read.as_raw_fd().to_string())
            .exec();
        drop(read);
        Ok(error)
    };
    match attempt() {
        Ok(error) => anyhow::Error::new(error).context("cannot restart without the keys"),
        Err(error) => error.context("cannot restart without the keys"),
    }
}

/// A pipe holding `payload`, its write end closed: the read end, which is
/// not close-on-exec, so that it reaches the new image.
///
/// The pipe is made larger only when `payload` needs it. Growing a pipe is
/// refused (EPERM) to a process without CAP_SYS_RESOURCE, as an agent in
/// its sandbox is, once its user's pipes hold `pipe-user-pages-soft`
/// (64 MiB) together; and a full pipe with nobody reading would block the
/// write forever. A few keys fit the smallest pipe the kernel makes (a
/// page) many times over.
fn filled_pipe(payload: &[u8]) -> anyhow::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, fcntl};
    let (read, write) = nix::unistd::pipe().context("cannot open the key pipe")?;
    let room = fcntl(&write, FcntlArg::F_GETPIPE_SZ).context("cannot size the key pipe")?;
    if payload.len() > usize::try_from(room).unwrap_or(0) {
        let wanted = i32::try_from(payload.len()).unwrap_or(i32::MAX);
        fcntl(&write, FcntlArg::F_SETPIPE_SZ(wanted)).with_context(|| {
            format!(
                "the variables hidden from tools hold {} bytes, more than a pipe holds here \
                 ({room}), and it cannot be made larger",
                payload.len()
            )
        })?;
    }
    let mut write = std::fs::File::from(write);
    write.write_all(payload).context("cannot fill the key pipe")?;
    Ok(read)
}

/// Reads the values the previous image left in the pipe `descriptor`. The
/// descriptor itself stays open (closing a descriptor by number is not
/// possible in safe Rust), empty and with no writer left: reading it gives
/// end of file. It is shrunk to the least the kernel allows, so that a
/// fleet of agents holds no buffers for them.
fn receive(descriptor: &std::ffi::OsStr) -> anyhow::Result<BTreeMap<String, String>> {
    let number: u32 = descriptor
        .to_str()
        .and_then(|text| text.parse().ok())
        .with_context(|| format!("{HANDOFF_ENV} is not a descriptor number"))?;
    let pipe = std::fs::File::open(format!("/proc/self/fd/{number}"))
        .with_context(|| format!("cannot open the key pipe ({HANDOFF_ENV}={number})"))?;
    let mut payload = Vec::new();
    (&pipe)
        .take(MAX_HANDOFF as u64 + 1)
        .read_to_end(&mut payload)
        .context("cannot read the key pipe")?;
    anyhow::ensure!(payload.len() <= MAX_HANDOFF, "the key pipe holds too much");
    let _ = nix::fcntl::fcntl(&pipe, nix::fcntl::FcntlArg::F_SETPIPE_SZ(0));
    serde_json::from_slice(&payload).context("the key pipe holds no key list")
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use nix::fcntl::{FcntlArg, fcntl};

    use super::filled_pipe;

    fn capacity(fd: &std::os::fd::OwnedFd) -> usize {
        usize::try_from(fcntl(fd, FcntlArg::F_GETPIPE_SZ).expect("size")).expect("positive")
    }

    fn drained(fd: std::os::fd::OwnedFd) -> Vec<u8> {
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes).expect("read");
        bytes
    }

    #[test]
    fn a_few_keys_leave_the_pipe_as_the_kernel_made_it() {
        let (fresh, _) = nix::unistd::pipe().expect("pipe");
        let made = capacity(&fresh);
        let payload = br#"{"ANTHROPIC_API_KEY":"sk-test","OPENAI_API_KEY":"sk-other"}"#;
        let read = filled_pipe(payload).expect("filled");
        assert_eq!(capacity(&read), made, "not grown: growing can be refused");
        assert_eq!(drained(read), payload);
    }

    #[test]
    fn the_new_image_reads_the_keys_and_shrinks_the_pipe_it_keeps() {
        use std::os::fd::AsRawFd;
        let read = filled_pipe(br#"{"OPENAI_API_KEY":"sk-test"}"#).expect("filled");
        let number = read.as_raw_fd().to_string();
        let keys = super::receive(number.as_ref()).expect("received");
        assert_eq!(keys["OPENAI_API_KEY"], "sk-test");
        assert!(capacity(&read) <= 8192, "one page or two, not {}", capacity(&read));
    }

    #[test]
    fn more_than_a_pipe_holds_grows_it_and_arrives_whole() {
        let payload: Vec<u8> = (0..200_000_u32).map(|n| (n % 251) as u8).collect();
        let read = filled_pipe(&payload).expect("filled");
        assert!(capacity(&read) >= payload.len());
        assert_eq!(drained(read), payload);
    }
}
