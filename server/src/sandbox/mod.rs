//! The sandbox around every agent (CONTRACT.md, "Sandbox"; docs/SANDBOX.md).
//!
//! Each agent process, Shard's own and every ACP runtime's with all it
//! starts, runs under bubblewrap in namespaces of its own: the file system
//! read-only but for its directory and a private `/tmp`, the secrets of
//! the documented list hidden, a process tree that sees only itself, no
//! network but Shard's own egress proxy, and a system-call filter.
//!
//! - [`policy`]: what the owner's `[sandbox]` and an `agent.create` add up
//!   to for one agent, and the check that a client only narrows it.
//! - [`plan`]: that policy as one bubblewrap command line.
//! - [`inside`]: `shard contain`, the sandbox's first process.
//! - [`seccomp`]: the system-call filter.
//! - [`egress`]: the daemon's egress proxy, one per agent.
//! - [`gate`]: what the proxy lets through, and the `network` questions it
//!   asks a person about the rest; [`grants`]: the hosts a person allowed
//!   always for an agent.

pub mod egress;
pub mod forwarder;
pub mod gate;
pub mod grants;
pub mod inside;
pub mod plan;
pub mod policy;
pub mod relay;
pub mod seccomp;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use self::policy::Applied;

/// Where Shard's own agent's view of `config.toml` is written, in its
/// folder.
const SEEN_CONFIG: &str = "config.seen.toml";

/// The program the sandbox is made with.
const BWRAP: &str = "bwrap";

/// What this machine can contain agents with, found once at start-up.
#[derive(Debug, Clone)]
pub enum Containment {
    Available { program: PathBuf, version: String },
    Unavailable { why: String },
}

impl Containment {
    /// Looks for bubblewrap and starts one empty sandbox with every
    /// namespace an agent's gets: what fails here would fail every agent.
    pub fn probe() -> Self {
        let Some(program) = find_on_path(BWRAP) else {
            return Self::Unavailable {
                why:
                    "bubblewrap (`bwrap`) is not installed: on Debian or Ubuntu, `apt-get install \
                      bubblewrap`"
                        .to_owned(),
            };
        };
        let version = std::process::Command::new(&program)
            .arg("--version")
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default();
        let tried = std::process::Command::new(&program)
            .args(plan::NAMESPACES)
            .args(["--unshare-net", "--as-pid-1", "--ro-bind", "/", "/", "--proc", "/proc"])
            .args(["--", "true"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .output();
        match tried {
            Ok(out) if out.status.success() => Self::Available { program, version },
            Ok(out) => Self::Unavailable {
                why: format!(
                    "bubblewrap cannot make a sandbox here ({}): user namespaces may be turned \
                     off (`sysctl kernel.unprivileged_userns_clone`, AppArmor's \
                     `kernel.apparmor_restrict_unprivileged_userns`)",
                    shard_protocol::diagnostic::diagnostic(
                        String::from_utf8_lossy(&out.stderr).trim()
                    )
                ),
            },
            Err(error) => Self::Unavailable { why: format!("cannot run bubblewrap: {error}") },
        }
    }

    /// One line for the daemon's start-up log.
    pub fn describe(&self) -> String {
        match self {
            Self::Available { version, .. } => format!(
                "agents run contained: {version}, own user, mount, pid, ipc and network \
                 namespaces, a system-call filter, network through the egress proxy"
            ),
            Self::Unavailable { why } => format!(
                "agents cannot be contained on this machine: {why}; agents will not start \
                 unless `[sandbox] mode = \"off\"` in config.toml"
            ),
        }
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|path| path.is_file())
}

/// The daemon's part: what it contains agents with, and where.
pub struct Sandbox {
    pub home: PathBuf,
    /// This `shard`, whose `contain` is the sandbox's first process.
    pub exe: PathBuf,
    pub containment: Containment,
    /// The user's home directory, for `~/` in the policy and the default
    /// hidden list.
    pub user_home: Option<PathBuf>,
    /// Names the egress proxy finds without DNS (`--egress-resolve`).
    pub resolver: Arc<egress::Resolver>,
    /// Whether the daemon serves browsers from afar (a remote mode): they
    /// never start an agent without a sandbox.
    pub remote: bool,
    /// The git directory of the workspace whose worktree is a directory, as
    /// the daemon recorded it when it made the worktree (what a workspace
    /// agent may commit to); `None` for any other directory.
    pub git_dir_of: GitDirOf,
}

/// See [`Sandbox::git_dir_of`]; given by the daemon, which keeps the
/// workspaces' records.
pub type GitDirOf = Box<dyn Fn(&Path) -> Option<PathBuf> + Send + Sync>;

/// Why an agent cannot be contained as configured (`SANDBOX_UNAVAILABLE`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

impl Unavailable {
    /// The same, carried through an `io::Error` (the spawner's error).
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }

    /// The reason, if `error` is one.
    pub fn in_io(error: &std::io::Error) -> Option<String> {
        error.get_ref().and_then(|inner| inner.downcast_ref::<Self>()).map(|it| it.0.clone())
    }
}

impl Sandbox {
    /// `AgentInfo.sandbox` for an agent of `runtime` narrowed by `asked`:
    /// the policy config.toml gives it now, and the hosts a person allowed
    /// always for it. `None` if config.toml cannot be read.
    pub fn describe(
        &self,
        agent_id: &str,
        runtime: &str,
        asked: Option<shard_protocol::sandbox::SandboxRequest>,
    ) -> Option<shard_protocol::sandbox::SandboxInfo> {
        let config = shard_platform::config::Config::load(&self.home).ok()?;
        let applied = policy::for_agent(&config, runtime, asked, self.user_home.as_deref()).ok()?;
        Some(applied.info(&grants::load(&self.home, agent_id)))
    }

    /// The bubblewrap program, or why agents cannot be contained.
    pub fn program(&self) -> Result<&Path, Unavailable> {
        match &self.containment {
            Containment::Available { program, .. } => Ok(program),
            Containment::Unavailable { why } => Err(Unavailable(format!(
                "this agent cannot be contained: {why}. The machine's owner can run agents \
                 without a sandbox with `[sandbox] mode = \"off\"` in config.toml \
                 (docs/SANDBOX.md)"
            ))),
        }
    }
}

/// What one agent generation is started in: bubblewrap's command line
/// (program first), and the egress proxy that lives as long as it does.
pub struct Jail {
    pub argv: Vec<std::ffi::OsString>,
    pub applied: Applied,
    /// Stops the egress proxy (and removes its socket) when dropped.
    pub proxy: Option<tokio_util::sync::DropGuard>,
}

/// One agent's start, as the sandbox needs to know it.
pub struct Start<'a> {
    pub agent_id: &'a str,
    pub runtime: &'a str,
    pub cwd: &'a Path,
    pub session_id: &'a str,
    pub asked: Option<shard_protocol::sandbox::SandboxRequest>,
    /// Shard's own agent's brief (`--system-prompt-file`).
    pub instructions: Option<PathBuf>,
    /// Whether it speaks to the daemon's socket (the subagent tools).
    pub delegates: bool,
    pub epoch: u64,
}

impl Sandbox {
    /// The sandbox for `start`, or `None` when the owner turned it off.
    pub fn prepare(
        &self,
        config: &shard_platform::config::Config,
        start: &Start<'_>,
        asker: Arc<dyn gate::Asker>,
    ) -> std::io::Result<Option<Jail>> {
        let applied =
            policy::for_agent(config, start.runtime, start.asked, self.user_home.as_deref())
                .map_err(|error| std::io::Error::other(error.to_string()))?;
        if !applied.contained() {
            return Ok(None);
        }
        let program = self.program().map_err(Unavailable::into_io)?.to_path_buf();
        let cwd = start.cwd.canonicalize()?;
        let mut plan = plan::Plan {
            writes: applied.mode == shard_protocol::sandbox::SandboxMode::WorkspaceWrite,
            isolated_network: applied.network != shard_protocol::sandbox::NetworkPolicy::Allow,
            cwd: cwd.clone(),
            ..plan::Plan::default()
        };
        plan.hidden.push(self.home.clone());
        if let Some(user_home) = &self.user_home {
            plan.hidden.extend(policy::HIDDEN_IN_HOME.iter().map(|path| user_home.join(path)));
        }
        plan.hidden.extend(applied.deny_read.iter().cloned());
        plan.hidden = plan.hidden.iter().map(|path| real(path)).collect();
        plan.writable.extend(applied.allow_write.iter().map(|path| real(path)));
        self.repository(&cwd, &mut plan);
        if start.runtime == shard_platform::runtimes::BUILTIN {
            self.own_agent(start, &mut plan)?;
        }
        let proxy = if plan.isolated_network {
            let socket = self.egress_socket(start)?;
            let listener = bind_private(&socket)?;
            let gate = gate::NetworkGate {
                network: applied.network,
                allowed: applied.allow_hosts.clone(),
                questions: gate::Questions::new(
                    self.home.clone(),
                    start.agent_id.to_owned(),
                    asker,
                ),
            };
            let stop = tokio_util::sync::CancellationToken::new();
            let stopped = stop.clone();
            let serving =
                egress::serve(listener, Arc::new(gate), self.resolver.clone(), stop.clone());
            let socket_path = socket.clone();
            tokio::spawn(async move {
                let _ = serving.await;
                let _ = std::fs::remove_file(&socket_path);
            });
            plan.egress = Some(socket);
            Some(stopped.drop_guard())
        } else {
            None
        };
        let mut argv = vec![program.into_os_string()];
        argv.extend(plan.arguments(&self.exe));
        Ok(Some(Jail { argv, applied, proxy }))
    }

    /// A repository's git state stays read-only: the whole `.git` of a
    /// checkout (its config, hooks, and the `commondir` that would point
    /// git elsewhere). A workspace's worktree writes what a commit needs in
    /// the repository (objects, refs, logs, its own `worktrees/<name>`),
    /// found in the daemon's record of it, never in what the worktree's
    /// `.git` says now.
    fn repository(&self, cwd: &Path, plan: &mut plan::Plan) {
        let dot_git = cwd.join(".git");
        plan.read_only.push(dot_git);
        let Some(git_dir) = (self.git_dir_of)(cwd) else {
            return;
        };
        let Some(common) = git_dir.parent().and_then(Path::parent) else { return };
        // The repository as git needs it (its config, its other refs),
        // read-only, wherever it is.
        plan.visible.push(common.to_path_buf());
        plan.writable.extend(["objects", "refs", "logs"].iter().map(|part| common.join(part)));
        plan.writable.push(git_dir.clone());
        plan.read_only.extend(["commondir", "gitdir"].iter().map(|part| git_dir.join(part)));
    }

    /// What Shard's own agent reads and writes in `$SHARD_HOME`: the
    /// configuration, its brief, its session's lineage, and the daemon's
    /// socket when it delegates.
    fn own_agent(&self, start: &Start<'_>, plan: &mut plan::Plan) -> std::io::Result<()> {
        if let Some(seen) = self.config_as_seen(start.agent_id)? {
            plan.replaced.push((seen, self.home.join("config.toml")));
        }
        plan.readable.extend(start.instructions.iter().cloned());
        if start.delegates {
            plan.readable.push(self.home.join("daemon.sock"));
        }
        let sessions = shard_platform::session_log::sessions_root(&self.home);
        if let Ok(found) = shard_platform::session_log::find_session(&self.home, start.session_id)
            && let Ok(inside) = found.strip_prefix(&sessions)
            && let Some(root) = inside.components().next()
        {
            plan.private_writable.push(sessions.join(root));
        }
        Ok(())
    }

    /// `config.toml` as Shard's own agent reads it: without the runtimes'
    /// `env` tables, whose values may be keys (every other setting it
    /// needs, and none is a secret). Written for each start, in the
    /// agent's own folder, which the agent cannot see.
    fn config_as_seen(&self, agent_id: &str) -> std::io::Result<Option<PathBuf>> {
        let text = match std::fs::read_to_string(self.home.join("config.toml")) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        let mut table: toml::Table = text.parse().map_err(std::io::Error::other)?;
        if let Some(toml::Value::Array(runtimes)) = table.get_mut("runtimes") {
            for runtime in runtimes.iter_mut().filter_map(toml::Value::as_table_mut) {
                runtime.remove("env");
            }
        }
        let seen = crate::home::agent_dir(&self.home, agent_id).join(SEEN_CONFIG);
        let text = toml::to_string(&table).map_err(std::io::Error::other)?;
        crate::home::write_private(&seen, text.as_bytes())?;
        Ok(Some(seen))
    }

    fn egress_socket(&self, start: &Start<'_>) -> std::io::Result<PathBuf> {
        let dir = self.home.join("egress");
        crate::home::prepare_dir(&dir).map_err(std::io::Error::other)?;
        Ok(dir.join(format!("{}.{}", start.agent_id, start.epoch)))
    }
}

/// `path` with its links resolved (where bubblewrap mounts), or as given
/// when it does not exist.
fn real(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// A unix socket only this user can reach, replacing a stale one.
fn bind_private(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let listener = tokio::net::UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}
