//! One agent's sandbox as a bubblewrap command line. Order matters to
//! bubblewrap (each mount goes over the ones before it), so the plan is
//! built in layers:
//!
//! 1. the whole file system read-only, a new `/dev` and `/proc`, an empty
//!    private `/tmp` and `/run` (no host sockets: no D-Bus, no Docker);
//! 2. the hidden places: an empty read-only directory over each folder,
//!    `/dev/null` over each file;
//! 3. what the agent may see although `/tmp` or a hidden place covers it
//!    (a workspace's repository, read-only), then what it may write: its
//!    directory and what the policy adds;
//! 4. what stays read-only inside those (a repository's `.git`, a
//!    worktree's git links), and what the agent needs to read inside the
//!    hidden places (its session, the daemon's `config.toml`, this binary);
//! 5. the egress proxy's socket at [`EGRESS_INSIDE`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The namespaces every sandbox gets (the network one only when the
/// agent's network goes through the proxy), and what bubblewrap does about
/// the sandbox's lifetime.
pub const NAMESPACES: &[&str] = &[
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
];

/// Where the egress proxy's socket is inside the sandbox.
pub const EGRESS_INSIDE: &str = "/run/shard/egress.sock";

/// One agent's sandbox, every path absolute.
#[derive(Debug, Default)]
pub struct Plan {
    /// Whether the agent's directory (and `writable`) may be written.
    pub writes: bool,
    /// Its own network namespace, with only the egress proxy out.
    pub isolated_network: bool,
    pub cwd: PathBuf,
    /// Hidden from the agent.
    pub hidden: Vec<PathBuf>,
    /// Shown read-only even where a private `/tmp` or a hidden place would
    /// cover it (a workspace's repository), before what is writable in it.
    pub visible: Vec<PathBuf>,
    /// Writable besides `cwd` (when `writes`).
    pub writable: Vec<PathBuf>,
    /// Read-only again inside what is writable.
    pub read_only: Vec<PathBuf>,
    /// Readable although inside a hidden place.
    pub readable: Vec<PathBuf>,
    /// Files shown, read-only, in place of others (`(shown, where)`).
    pub replaced: Vec<(PathBuf, PathBuf)>,
    /// Writable although inside a hidden place (Shard's own agent's
    /// session).
    pub private_writable: Vec<PathBuf>,
    /// The proxy's socket on the host.
    pub egress: Option<PathBuf>,
}

impl Plan {
    /// bubblewrap's arguments, up to and including the `--` before the
    /// command; `contain` is this `shard`, whose `contain` runs first.
    pub fn arguments(&self, contain: &Path) -> Vec<OsString> {
        let mut out = Arguments::default();
        out.flags(NAMESPACES);
        if self.isolated_network {
            out.flags(&["--unshare-net"]);
        }
        out.flags(&["--as-pid-1"]);
        out.mount("--ro-bind", Path::new("/"), Path::new("/"));
        out.at("--dev", Path::new("/dev"));
        out.at("--proc", Path::new("/proc"));
        out.at("--tmpfs", Path::new("/tmp"));
        out.at("--tmpfs", Path::new("/run"));
        let hidden: Vec<&PathBuf> = self.hidden.iter().filter(|path| exists(path)).collect();
        for path in &hidden {
            if path.is_dir() {
                out.at("--tmpfs", path);
            } else {
                out.mount("--ro-bind", Path::new("/dev/null"), path);
            }
        }
        for path in self.visible.iter().filter(|path| exists(path)) {
            out.same("--ro-bind", path);
        }
        if self.writes {
            out.same("--bind", &self.cwd);
            for path in self.writable.iter().filter(|path| exists(path)) {
                out.same("--bind", path);
            }
        } else {
            // Read-only, but there even under `/tmp` or a hidden place.
            out.same("--ro-bind", &self.cwd);
        }
        for path in self.private_writable.iter().filter(|path| exists(path)) {
            out.same("--bind", path);
        }
        // What stays read-only is inside what the agent writes: a link
        // there is the agent's, and is never followed (it could point into
        // a hidden place).
        for path in self.read_only.iter().filter(|path| plain(path)) {
            out.same("--ro-bind", path);
        }
        for path in self.readable.iter().filter(|path| exists(path)) {
            out.same("--ro-bind", path);
        }
        for (shown, target) in self.replaced.iter().filter(|(shown, _)| exists(shown)) {
            out.mount("--ro-bind", shown, target);
        }
        out.same("--ro-bind", contain);
        for path in hidden.iter().filter(|path| path.is_dir()) {
            out.at("--remount-ro", path);
        }
        if let Some(socket) = &self.egress {
            out.mount("--bind", socket, Path::new(EGRESS_INSIDE));
        }
        out.flags(&["--setenv", "TMPDIR", "/tmp"]);
        out.at("--chdir", &self.cwd);
        out.flags(&["--"]);
        out.0.push(contain.into());
        out.flags(&["contain"]);
        if self.egress.is_some() {
            out.flags(&["--egress", EGRESS_INSIDE]);
        }
        out.flags(&["--"]);
        out.0
    }
}

/// Whether bubblewrap can mount on `path` (it does not follow a missing
/// one).
fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// Whether `path` exists and is not a symbolic link.
fn plain(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|meta| !meta.file_type().is_symlink())
}

#[derive(Default)]
struct Arguments(Vec<OsString>);

impl Arguments {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn at(&mut self, flag: &str, path: &Path) {
        self.0.push(flag.into());
        self.0.push(path.into());
    }

    fn mount(&mut self, flag: &str, source: &Path, target: &Path) {
        self.0.push(flag.into());
        self.0.push(source.into());
        self.0.push(target.into());
    }

    fn same(&mut self, flag: &str, path: &Path) {
        self.mount(flag, path, path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` under the plan's bubblewrap with `sh` as the command
    /// (after `contain`'s place, which the test skips).
    fn run(plan: &Plan, script: &str) -> (bool, String) {
        let mut arguments = plan.arguments(Path::new("/bin/sh"));
        // Drop `/bin/sh contain [--egress X] --`: run sh itself.
        let dashes = arguments.iter().position(|part| part == "--").unwrap();
        arguments.truncate(dashes + 1);
        let out = std::process::Command::new("bwrap")
            .args(arguments)
            .args(["/bin/sh", "-c", script])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn bwrap_here() -> bool {
        matches!(super::super::Containment::probe(), super::super::Containment::Available { .. })
    }

    #[test]
    fn the_agent_writes_its_directory_and_reads_nothing_hidden() {
        if !bwrap_here() {
            eprintln!("skipped: bubblewrap cannot run here");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let cwd = root.join("project");
        let secret = root.join("secrets");
        let secret_file = root.join("token");
        let outside = root.join("outside");
        for dir in [&cwd, &secret, &outside, &cwd.join(".git")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(secret.join("key"), "SECRET-K").unwrap();
        std::fs::write(&secret_file, "SECRET-T").unwrap();
        std::fs::write(cwd.join(".git/config"), "[core]\n").unwrap();
        let plan = Plan {
            writes: true,
            isolated_network: true,
            cwd: cwd.clone(),
            hidden: vec![secret.clone(), secret_file.clone()],
            read_only: vec![cwd.join(".git")],
            ..Plan::default()
        };
        let script = format!(
            "echo ok > {cwd}/made && echo wrote-cwd; \
             echo x > {outside}/x || echo refused-outside; \
             echo x >> {cwd}/.git/config || echo refused-git; \
             ls {secret}; cat {secret_file}; echo listed; \
             echo x > /tmp/t && echo wrote-tmp",
            cwd = cwd.display(),
            outside = outside.display(),
            secret = secret.display(),
            secret_file = secret_file.display(),
        );
        let (ok, text) = run(&plan, &script);
        assert!(ok, "{text}");
        for expected in ["wrote-cwd", "refused-outside", "refused-git", "listed", "wrote-tmp"] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
        assert!(!text.contains("key") && !text.contains("SECRET"), "hidden: {text}");
        assert_eq!(std::fs::read_to_string(cwd.join("made")).unwrap(), "ok\n");
        assert!(!outside.join("x").exists());
        assert_eq!(std::fs::read_to_string(cwd.join(".git/config")).unwrap(), "[core]\n");
    }

    #[test]
    fn an_isolated_network_has_only_loopback() {
        if !bwrap_here() {
            eprintln!("skipped: bubblewrap cannot run here");
            return;
        }
        let cwd = tempfile::tempdir().unwrap();
        let plan = Plan {
            isolated_network: true,
            cwd: cwd.path().canonicalize().unwrap(),
            ..Plan::default()
        };
        let (ok, text) = run(&plan, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '");
        assert!(ok, "{text}");
        assert_eq!(text.trim(), "lo");
    }
}
