//! ACP's file methods as Shard serves them to an agent: text files inside
//! the agent's directory (its workspace, for a workspace agent), nowhere
//! else. The directory is opened once, when the agent's process starts
//! ([`Directory`]); a path is taken only when absolute, without `..` and
//! under that directory's name, and its rest is opened beneath the handle
//! in one step by the kernel (`openat2` with `RESOLVE_BENEATH` and
//! `RESOLVE_NO_SYMLINKS`): no link is followed anywhere on the way, so an
//! agent that swaps a folder for a link between two requests (or during
//! one) reaches nothing outside. A write makes the folders it needs the
//! same way, one beneath the other. Each refusal says why; a file that is
//! not there is ACP's "resource not found" (`-32002`).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

/// The most a read gives back, and a write takes.
pub const MAX_FILE: u64 = 8 << 20;

/// How every path is resolved beneath the directory: never above it, and
/// through no link at all (a link inside could lead to `.git`, which a
/// write must name to be asked about; see `crate::agents::sensitive`).
fn resolve() -> ResolveFlag {
    ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS
}

/// A refusal, as the agent is told it.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("`{0}` is not an absolute path")]
    NotAbsolute(String),
    #[error("`{0}` goes up with `..`")]
    GoesUp(String),
    #[error("`{0}` is outside the agent's directory `{1}`; Shard serves no file there")]
    Outside(String, String),
    #[error("`{0}` does not exist")]
    NotFound(String),
    #[error("`{0}` goes through a link; Shard follows none")]
    ThroughLink(String),
    #[error("`{0}` is not a file")]
    NotAFile(String),
    #[error("`{0}` is {1} bytes, over the {MAX_FILE} Shard reads")]
    TooBig(String, u64),
    #[error("{0} bytes is over the {MAX_FILE} Shard writes")]
    TooMuch(usize),
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    #[error("`{0}`: {1}")]
    Io(String, std::io::Error),
    #[error("the agent's directory cannot be opened: {0}")]
    NoDirectory(String),
    #[error("the user did not allow writing `{0}`")]
    NotAllowed(String),
}

impl Refusal {
    /// What the kernel said about `path`, as a refusal.
    fn of(path: &Path, errno: Errno) -> Self {
        let shown = path.display().to_string();
        match errno {
            Errno::ENOENT => Self::NotFound(shown),
            // RESOLVE_NO_SYMLINKS met a link.
            Errno::ELOOP => Self::ThroughLink(shown),
            Errno::EISDIR => Self::NotAFile(shown),
            other => Self::Io(shown, other.into()),
        }
    }
}

impl From<Refusal> for acp::Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotFound(path) => acp::Error::resource_not_found(Some(path)),
            other => acp::Error::invalid_params().data(other.to_string()),
        }
    }
}

/// A file the agent asks Shard's file service for.
#[derive(Debug, PartialEq)]
pub enum FsRequest {
    Read(ReadTextFileRequest),
    Write(WriteTextFileRequest),
}

/// The answer to a write a person did not allow.
pub fn not_allowed(path: &Path) -> acp::Error {
    Refusal::NotAllowed(path.display().to_string()).into()
}

/// The agent's directory, opened once when its process starts: every path
/// it asks for is resolved beneath this handle. Moving or replacing the
/// directory afterwards moves nothing Shard serves.
#[derive(Debug)]
pub struct Directory {
    handle: OwnedFd,
    /// The names an agent may use for it: as configured, and with every
    /// link in it resolved (agents often send the latter).
    names: Vec<PathBuf>,
}

impl Directory {
    pub fn open(cwd: &Path) -> std::io::Result<Self> {
        let handle = std::fs::File::open(cwd)?;
        if !handle.metadata()?.is_dir() {
            return Err(std::io::Error::other(format!("`{}` is not a directory", cwd.display())));
        }
        let mut names = vec![cwd.to_owned()];
        names.extend(cwd.canonicalize().ok().filter(|canonical| canonical != cwd));
        Ok(Self { handle: handle.into(), names })
    }

    /// `path` as a path beneath the directory: absolute, without `..`, under
    /// one of its names, and not the directory itself.
    fn beneath<'a>(&self, path: &'a Path) -> Result<&'a Path, Refusal> {
        let shown = || path.display().to_string();
        if !path.is_absolute() {
            return Err(Refusal::NotAbsolute(shown()));
        }
        if path.components().any(|part| matches!(part, Component::ParentDir)) {
            return Err(Refusal::GoesUp(shown()));
        }
        let relative = self.names.iter().find_map(|name| path.strip_prefix(name).ok());
        match relative {
            Some(relative) if relative.as_os_str().is_empty() => Err(Refusal::NotAFile(shown())),
            Some(relative) => Ok(relative),
            None => {
                let root = self.names.first().map(|name| name.display().to_string());
                Err(Refusal::Outside(shown(), root.unwrap_or_default()))
            }
        }
    }

    /// Opens `relative` beneath `at` (the directory, or a folder in it).
    fn open_at(
        at: &OwnedFd,
        relative: &Path,
        flags: OFlag,
        mode: Mode,
    ) -> Result<std::fs::File, Errno> {
        // Non-blocking: a FIFO must not hold the thread; it is no file and
        // is refused once open.
        let flags = flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK;
        let how = OpenHow::new().flags(flags).mode(mode).resolve(resolve());
        openat2(at, relative, how).map(std::fs::File::from)
    }

    /// The folder `relative`, beneath the directory, made where missing
    /// one level at a time, each level opened as the last was: beneath,
    /// through no link.
    fn folder(&self, relative: &Path) -> Result<OwnedFd, Errno> {
        let mut at = self.handle.try_clone().map_err(|_| Errno::EMFILE)?;
        let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let how = OpenHow::new().flags(flags).resolve(resolve());
        for part in relative.components() {
            let Component::Normal(name) = part else { return Err(Errno::EINVAL) };
            at = match openat2(&at, name, how) {
                Ok(next) => next,
                Err(Errno::ENOENT) => {
                    match nix::sys::stat::mkdirat(&at, name, Mode::from_bits_truncate(0o755)) {
                        // Made meanwhile: opened as any other.
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(error) => return Err(error),
                    }
                    openat2(&at, name, how)?
                }
                Err(error) => return Err(error),
            };
        }
        Ok(at)
    }
}

/// Carries out one request off the runtime's threads.
pub async fn serve(
    directory: Option<Arc<Directory>>,
    request: FsRequest,
) -> Result<ClientResponse, acp::Error> {
    let served = tokio::task::spawn_blocking(move || {
        let Some(directory) = directory else {
            return Err(Refusal::NoDirectory("it was not there when the agent started".into()));
        };
        match request {
            FsRequest::Read(read) => read_text(&directory, &read.path, read.line, read.limit)
                .map(|text| ClientResponse::ReadTextFileResponse(ReadTextFileResponse::new(text))),
            FsRequest::Write(write) => write_text(&directory, &write.path, &write.content)
                .map(|()| ClientResponse::WriteTextFileResponse(WriteTextFileResponse::new())),
        }
    });
    match served.await {
        Ok(result) => result.map_err(acp::Error::from),
        Err(_) => Err(acp::Error::internal_error()),
    }
}

fn read_text(
    directory: &Directory,
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, Refusal> {
    let relative = directory.beneath(path)?;
    let shown = || path.display().to_string();
    let file = Directory::open_at(&directory.handle, relative, OFlag::O_RDONLY, Mode::empty())
        .map_err(|errno| Refusal::of(path, errno))?;
    let meta = file.metadata().map_err(|error| Refusal::Io(shown(), error))?;
    if !meta.is_file() {
        return Err(Refusal::NotAFile(shown()));
    }
    if meta.len() > MAX_FILE {
        return Err(Refusal::TooBig(shown(), meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes).map_err(|error| Refusal::Io(shown(), error))?;
    let text = String::from_utf8(bytes).map_err(|_| Refusal::NotText(shown()))?;
    let skip = line.map_or(0, |line| line.saturating_sub(1) as usize);
    if skip == 0 && limit.is_none() {
        return Ok(text);
    }
    let lines = text.split_inclusive('\n').skip(skip);
    Ok(match limit {
        Some(limit) => lines.take(limit as usize).collect(),
        None => lines.collect(),
    })
}

fn write_text(directory: &Directory, path: &Path, content: &str) -> Result<(), Refusal> {
    if content.len() as u64 > MAX_FILE {
        return Err(Refusal::TooMuch(content.len()));
    }
    let relative = directory.beneath(path)?;
    let shown = || path.display().to_string();
    let (flags, mode) = (OFlag::O_WRONLY | OFlag::O_CREAT, Mode::from_bits_truncate(0o644));
    let file = match Directory::open_at(&directory.handle, relative, flags, mode) {
        // A folder on the way is missing: made, then the file in it.
        Err(Errno::ENOENT) => {
            let (Some(folder), Some(name)) = (relative.parent(), relative.file_name()) else {
                return Err(Refusal::NotFound(shown()));
            };
            let folder = directory.folder(folder).map_err(|errno| Refusal::of(path, errno))?;
            Directory::open_at(&folder, Path::new(name), flags, mode)
        }
        opened => opened,
    };
    let mut file = file.map_err(|errno| Refusal::of(path, errno))?;
    // Emptied only once it is known to be a file: a device or a FIFO is
    // refused untouched.
    let meta = file.metadata().map_err(|error| Refusal::Io(shown(), error))?;
    if !meta.is_file() {
        return Err(Refusal::NotAFile(shown()));
    }
    file.set_len(0).map_err(|error| Refusal::Io(shown(), error))?;
    file.write_all(content.as_bytes()).map_err(|error| Refusal::Io(shown(), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(result: Result<impl std::fmt::Debug, Refusal>) -> String {
        result.expect_err("refused").to_string()
    }

    #[test]
    fn reads_and_writes_stay_inside_the_agents_directory_through_no_link() {
        let outside = tempfile::tempdir().expect("outside");
        let cwd = tempfile::tempdir().expect("cwd");
        let root = cwd.path();
        let directory = Directory::open(root).expect("open");
        std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").expect("write");
        std::fs::write(outside.path().join("secret"), "key").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).expect("link");
        std::os::unix::fs::symlink(outside.path(), root.join("away")).expect("link");
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("inner")).expect("link");

        let read = |path: &Path| read_text(&directory, path, None, None);
        assert_eq!(read(&root.join("a.txt")).unwrap(), "one\ntwo\nthree\n");
        let some = read_text(&directory, &root.join("a.txt"), Some(2), Some(1));
        assert_eq!(some.unwrap(), "two\n");
        write_text(&directory, &root.join("new.txt"), "fresh").expect("a new file inside");
        assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "fresh");
        write_text(&directory, &root.join("x/y/z.txt"), "deep").expect("folders made");
        assert_eq!(std::fs::read_to_string(root.join("x/y/z.txt")).unwrap(), "deep");

        assert!(refused(read(&outside.path().join("secret"))).contains("outside"));
        for link in ["link", "inner", "away/secret"] {
            assert!(refused(read(&root.join(link))).contains("link"), "{link}");
        }
        assert!(refused(read(Path::new("a.txt"))).contains("not an absolute path"));
        assert!(refused(read(&root.join("x/../a.txt"))).contains(".."));
        assert!(refused(read(root)).contains("not a file"));
        assert!(refused(read(&root.join("x"))).contains("not a file"));
        let missing = acp::Error::from(read(&root.join("missing")).expect_err("missing"));
        assert_eq!(i32::from(missing.code), -32002, "{missing:?}");
        for (path, what) in [
            (root.join("link"), "link"),
            (root.join("away/new"), "link"),
            (root.join("away/made/new"), "link"),
            (outside.path().join("new"), "outside"),
            (root.join("x"), "not a file"),
        ] {
            let why = refused(write_text(&directory, &path, "planted"));
            assert!(why.contains(what), "{}: {why}", path.display());
        }
        assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "key");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1, "nothing made outside");
    }

    #[test]
    fn the_directory_is_the_one_opened_at_start_whatever_its_name_becomes() {
        let parent = tempfile::tempdir().expect("parent");
        let outside = tempfile::tempdir().expect("outside");
        let root = parent.path().join("project");
        std::fs::create_dir(&root).expect("mkdir");
        std::fs::write(root.join("a.txt"), "mine").expect("write");
        std::fs::write(outside.path().join("a.txt"), "theirs").expect("write");
        let directory = Directory::open(&root).expect("open");
        // The agent moves its directory away and puts a link in its place.
        std::fs::rename(&root, parent.path().join("moved")).expect("move");
        std::os::unix::fs::symlink(outside.path(), &root).expect("link");
        assert_eq!(read_text(&directory, &root.join("a.txt"), None, None).unwrap(), "mine");
        write_text(&directory, &root.join("a.txt"), "written").expect("write");
        assert_eq!(std::fs::read_to_string(outside.path().join("a.txt")).unwrap(), "theirs");
    }
}
