//! `$SHARD_HOME`: made or tightened to 0700, refused when it is a symlink or
//! owned by someone else, and locked so that one daemon owns it
//! (CONTRACT.md "Names and layout"). Every file the daemon writes there is
//! 0600 and replaced atomically.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::fcntl::{Flock, FlockArg};

/// The daemon's home, held open and locked for as long as the daemon runs.
pub struct Home {
    pub path: PathBuf,
    /// Released (and the lock with it) when the daemon exits, however it exits.
    _lock: Flock<File>,
}

impl Home {
    /// Opens and locks `path`. Another daemon holding the lock is an error.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        prepare_dir(path)?;
        let lock_path = path.join("daemon.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        shard_platform::private::tighten(&lock_path, 0o600)
            .with_context(|| format!("cannot tighten {}", lock_path.display()))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            anyhow::anyhow!(
                "another shard daemon is already running with SHARD_HOME={} ({errno})",
                path.display()
            )
        })?;
        Ok(Self { path: path.to_owned(), _lock: lock })
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// Where every agent's record and files are kept.
pub fn agents_dir(home: &Path) -> PathBuf {
    home.join("agents")
}

/// One agent's directory (`agents/<id>`).
pub fn agent_dir(home: &Path, agent_id: &str) -> PathBuf {
    agents_dir(home).join(agent_id)
}

/// Makes `dir` a private directory of the current user (0700), creating it if
/// needed. A symlink or a directory owned by another user is refused.
pub fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => {
            if meta.file_type().is_symlink() {
                bail!("{} is a symlink; refusing to use it as SHARD_HOME", dir.display());
            }
            if !meta.is_dir() {
                bail!("{} is not a directory", dir.display());
            }
            if meta.uid() != nix::unistd::getuid().as_raw() {
                bail!("{} is owned by another user; refusing to use it", dir.display());
            }
            shard_platform::private::tighten(dir, 0o700)
                .with_context(|| format!("cannot tighten {} to 0700", dir.display()))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            // `recursive` applies the mode to every new folder, but not
            // through the umask for the last one on every platform: set it.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("cannot set {} to 0700", dir.display()))
        }
        Err(error) => Err(error).with_context(|| format!("cannot inspect {}", dir.display())),
    }
}

/// Writes `bytes` to `path` atomically (a 0600 temporary file in the same
/// folder, synced, then renamed over it).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, true)
}

/// Replaces `path` with `bytes` atomically, as [`write_private`] does, but
/// without waiting for the disk: a reader, or a daemon killed at any
/// instant, sees the old content or the new, never a mix; only a power cut
/// may lose the newest write. For records rewritten often (usage ledgers).
pub fn replace_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replacing(path, bytes, false)
}

fn write_replacing(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut file =
        OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(&temporary)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    std::fs::rename(&temporary, path)?;
    // The rename is durable once the folder is synced.
    if sync && let Ok(folder) = File::open(dir) {
        let _ = folder.sync_all();
    }
    Ok(())
}
