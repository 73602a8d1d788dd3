//! ACP's file methods as Shard serves them to an agent: text files inside
//! the agent's directory (its workspace, for a workspace agent), nowhere
//! else. A path is taken only when absolute, without `..`, and resolved
//! (links followed) to a place inside the directory; a file to write must
//! be one a read could reach. Each refusal says why.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use agent_client_protocol_schema::v1::{
    self as acp, ClientResponse, ReadTextFileResponse, WriteTextFileResponse,
};

use super::translate::FsRequest;

/// The most a read gives back, and a write takes.
pub const MAX_FILE: u64 = 8 << 20;

/// Carries out one request off the runtime's threads.
pub async fn serve(cwd: PathBuf, request: FsRequest) -> Result<ClientResponse, acp::Error> {
    let served = tokio::task::spawn_blocking(move || match request {
        FsRequest::Read(read) => read_text(&cwd, &read.path, read.line, read.limit)
            .map(|text| ClientResponse::ReadTextFileResponse(ReadTextFileResponse::new(text))),
        FsRequest::Write(write) => write_text(&cwd, &write.path, &write.content)
            .map(|()| ClientResponse::WriteTextFileResponse(WriteTextFileResponse::new())),
    });
    match served.await {
        Ok(result) => result.map_err(|why| acp::Error::invalid_params().data(why)),
        Err(_) => Err(acp::Error::internal_error()),
    }
}

/// `path` made sure of: absolute, without `..`, and inside `cwd` once
/// every link is followed. `exists` says whether the file must already be
/// there; when it need not, its folder must be.
fn confined(cwd: &Path, path: &Path, exists: bool) -> Result<PathBuf, String> {
    let shown = path.display();
    if !path.is_absolute() {
        return Err(format!("`{shown}` is not an absolute path"));
    }
    if path.components().any(|part| matches!(part, Component::ParentDir)) {
        return Err(format!("`{shown}` goes up with `..`"));
    }
    let root = cwd.canonicalize().map_err(|error| format!("the agent's directory: {error}"))?;
    let resolved = match path.canonicalize() {
        Ok(resolved) => resolved,
        Err(_) if !exists => {
            let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(format!("`{shown}` names no file"));
            };
            let folder = folder
                .canonicalize()
                .map_err(|error| format!("`{}`: {error}", folder.display()))?;
            folder.join(name)
        }
        Err(error) => return Err(format!("`{shown}`: {error}")),
    };
    if !resolved.starts_with(&root) {
        return Err(format!(
            "`{shown}` is outside the agent's directory `{}`; Shard serves no file there",
            root.display()
        ));
    }
    Ok(resolved)
}

fn read_text(
    cwd: &Path,
    path: &Path,
    line: Option<u32>,
    limit: Option<u32>,
) -> Result<String, String> {
    let resolved = confined(cwd, path, true)?;
    let file =
        std::fs::File::open(&resolved).map_err(|error| format!("`{}`: {error}", path.display()))?;
    let size = file.metadata().map_err(|error| error.to_string())?.len();
    if !file.metadata().map_err(|error| error.to_string())?.is_file() {
        return Err(format!("`{}` is not a file", path.display()));
    }
    if size > MAX_FILE {
        return Err(format!(
            "`{}` is {size} bytes, over the {MAX_FILE} Shard reads",
            path.display()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes).map_err(|error| error.to_string())?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8 text", path.display()))?;
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

fn write_text(cwd: &Path, path: &Path, content: &str) -> Result<(), String> {
    if content.len() as u64 > MAX_FILE {
        return Err(format!("{} bytes is over the {MAX_FILE} Shard writes", content.len()));
    }
    let resolved = confined(cwd, path, false)?;
    if resolved.is_dir() {
        return Err(format!("`{}` is a directory", path.display()));
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o644)
        .open(&resolved)
        .map_err(|error| format!("`{}`: {error}", path.display()))?;
    file.write_all(content.as_bytes()).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_stay_inside_the_agents_directory() {
        let outside = tempfile::tempdir().expect("outside");
        let cwd = tempfile::tempdir().expect("cwd");
        let root = cwd.path();
        std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").expect("write");
        std::fs::write(outside.path().join("secret"), "key").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).expect("link");
        std::os::unix::fs::symlink(outside.path(), root.join("away")).expect("link");

        assert_eq!(read_text(root, &root.join("a.txt"), None, None).unwrap(), "one\ntwo\nthree\n");
        assert_eq!(read_text(root, &root.join("a.txt"), Some(2), Some(1)).unwrap(), "two\n");
        write_text(root, &root.join("new.txt"), "fresh").expect("a new file inside");
        assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "fresh");

        let refused = [
            read_text(root, &outside.path().join("secret"), None, None).unwrap_err(),
            read_text(root, &root.join("link"), None, None).unwrap_err(),
            read_text(root, Path::new("a.txt"), None, None).unwrap_err(),
            read_text(root, &root.join("x/../a.txt"), None, None).unwrap_err(),
            write_text(root, &root.join("link"), "overwritten").unwrap_err(),
            write_text(root, &root.join("away/new"), "planted").unwrap_err(),
            write_text(root, &outside.path().join("new"), "planted").unwrap_err(),
        ];
        for why in &refused[..2] {
            assert!(why.contains("outside the agent's directory"), "{why}");
        }
        assert!(refused[2].contains("not an absolute path"), "{}", refused[2]);
        assert!(refused[3].contains(".."), "{}", refused[3]);
        assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "key");
        assert!(!outside.path().join("new").exists());
    }
}
