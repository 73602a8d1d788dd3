//! What a call an agent asks to make would do, as the step-up rule judges
//! it (docs/SECURITY.md, "Passkey step-up"): by its effect, not its name.
//! Shard's own tools are known by name and input. An ACP agent's call is
//! known by its ACP `kind` and the files it names, which the daemon's ACP
//! bridge puts in the request's `details` ([`details`]) for people to read
//! and for this rule to judge; an agent's own titles are never read. Which
//! writes change what runs is [`super::sensitive`]'s to say.

use std::path::{Component, Path, PathBuf};

use shard_protocol::agent::{DetailFormat, PermissionDetail, PermissionRequest};

/// The label of the detail that says what kind of call it is.
pub const KIND: &str = "Kind";
/// The label of each detail naming a file the call works on.
pub const PATH: &str = "Path";

/// What a call does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Runs a command (Shard's `bash`, an ACP `execute`).
    Runs,
    /// Writes, deletes or moves these files; none named: nobody knows
    /// where.
    Writes(Vec<PathBuf>),
    /// Reads, lists, searches, fetches or thinks: changes nothing here.
    Looks,
    /// Asks other agents (Shard's `subagent_*`), each under its own gate.
    Delegates,
    /// Anything else: what it does is not known.
    Unknown,
}

impl Effect {
    /// The effect of `request`, from an agent of `runtime`.
    pub fn of(request: &PermissionRequest, runtime: &str) -> Effect {
        if runtime == shard_platform::runtimes::BUILTIN {
            of_tool(&request.tool_name, &request.input)
        } else {
            of_details(request.details.as_deref().unwrap_or_default())
        }
    }
}

/// The effect of one of Shard's own tools.
fn of_tool(tool: &str, input: &serde_json::Value) -> Effect {
    match tool {
        "bash" => Effect::Runs,
        "write" | "edit" => {
            let path = ["path", "file_path"]
                .iter()
                .find_map(|key| input.get(*key).and_then(serde_json::Value::as_str));
            Effect::Writes(path.map(PathBuf::from).into_iter().collect())
        }
        "read" | "ls" | "grep" | "find" => Effect::Looks,
        _ if tool.starts_with("subagent_") => Effect::Delegates,
        _ => Effect::Unknown,
    }
}

/// The effect an ACP call's `kind` gives it, with the files it names.
pub fn of_acp(kind: Option<&str>, paths: Vec<PathBuf>) -> Effect {
    match kind {
        Some("execute") => Effect::Runs,
        Some("edit" | "delete" | "move") => Effect::Writes(paths),
        Some("read" | "search" | "think" | "fetch" | "switch_mode") => Effect::Looks,
        _ => Effect::Unknown,
    }
}

/// The details the ACP bridge shows with a permission request: the call's
/// kind (`other` when the agent gave none) and each file it names.
pub fn details(kind: Option<&str>, paths: &[PathBuf]) -> Vec<PermissionDetail> {
    let kind = PermissionDetail {
        label: Some(KIND.to_owned()),
        value: kind.unwrap_or("other").to_owned(),
        format: Some(DetailFormat::Text),
    };
    let paths = paths.iter().map(|path| PermissionDetail {
        label: Some(PATH.to_owned()),
        value: path.display().to_string(),
        format: Some(DetailFormat::Path),
    });
    std::iter::once(kind).chain(paths).collect()
}

/// The effect [`details`] describe.
fn of_details(details: &[PermissionDetail]) -> Effect {
    let labelled = |label: &'static str| {
        details.iter().filter(move |detail| detail.label.as_deref() == Some(label))
    };
    let kind = labelled(KIND).next().map(|detail| detail.value.as_str());
    of_acp(kind, labelled(PATH).map(|detail| PathBuf::from(&detail.value)).collect())
}

/// `path` with every folder that exists resolved (links followed), and
/// the rest as written: where a write would land, as far as can be told.
pub fn resolved(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether `path` (relative to `cwd`, or absolute) stays inside `cwd`:
/// read as written (a `..` anywhere is outside), and again with the
/// folders that exist resolved (a link out of `cwd` is outside).
pub fn inside(cwd: &Path, path: &Path) -> bool {
    if path.components().any(|part| matches!(part, Component::ParentDir)) {
        return false;
    }
    let full = cwd.join(path);
    full.starts_with(cwd) && resolved(&full).starts_with(resolved(cwd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_judged_by_what_it_does() {
        use serde_json::json;
        assert_eq!(of_tool("bash", &json!({"command": "ls"})), Effect::Runs);
        assert_eq!(
            of_tool("write", &json!({"path": "a.txt"})),
            Effect::Writes(vec![PathBuf::from("a.txt")])
        );
        assert_eq!(of_tool("edit", &json!({})), Effect::Writes(vec![]));
        assert_eq!(of_tool("read", &json!({"path": "/etc/passwd"})), Effect::Looks);
        assert_eq!(of_tool("subagent_create", &json!({})), Effect::Delegates);
        assert_eq!(of_tool("mystery", &json!({})), Effect::Unknown);
        let paths = vec![PathBuf::from("/p/a"), PathBuf::from("/p/b")];
        for (kind, effect) in [
            (Some("execute"), Effect::Runs),
            (Some("edit"), Effect::Writes(paths.clone())),
            (Some("move"), Effect::Writes(paths.clone())),
            (Some("delete"), Effect::Writes(paths.clone())),
            (Some("read"), Effect::Looks),
            (Some("fetch"), Effect::Looks),
            (Some("other"), Effect::Unknown),
            (Some("something new"), Effect::Unknown),
            (None, Effect::Unknown),
        ] {
            assert_eq!(of_details(&details(kind, &paths)), effect, "{kind:?}");
        }
        // Details that are not the bridge's say nothing known.
        let stray = PermissionDetail { label: None, value: "execute".into(), format: None };
        assert_eq!(of_details(&[stray]), Effect::Unknown);
    }

    #[test]
    fn inside_reads_the_path_as_written_and_where_it_lands() {
        let cwd = tempfile::TempDir::new().unwrap();
        let outside = tempfile::TempDir::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), cwd.path().join("out")).unwrap();
        assert!(inside(cwd.path(), Path::new("src/new.rs")));
        assert!(inside(cwd.path(), &cwd.path().join("a/b")));
        assert!(!inside(cwd.path(), Path::new("../x")));
        assert!(!inside(cwd.path(), Path::new("/etc/passwd")));
        assert!(!inside(cwd.path(), Path::new("out/file")), "a link out of the cwd");
    }
}
