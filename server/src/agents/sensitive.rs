//! Places whose files say what runs next: a write there runs commands
//! later (git's hooks and config, a shell's start-up files, an agent's own
//! settings, which name hooks and MCP servers) or changes who may do what
//! (`~/.ssh`, Shard's home), so it is never done without a person saying
//! yes, whatever an agent's own rules say. The same places as
//! `effect::changes_what_runs` names for the step-up rule.
//!
//! Names only, never the file system, so a sans-IO part can ask: the
//! caller resolves the path with no link followed (the ACP file service
//! opens beneath the agent's directory with `RESOLVE_NO_SYMLINKS`), so the
//! name judged is the file written.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Folders, wherever they are, whose files say what runs: git's, and those
/// of the agents Shard runs.
const RUN_FROM_DIRS: &[&str] =
    &[".git", ".claude", ".gemini", ".codex", ".opencode", ".cursor", ".husky"];

/// Files, wherever they are, that a shell runs when it starts or ends.
const SHELL_START_UP: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
];

/// Other files, wherever they are, that say what runs: direnv's, a
/// project's MCP servers, opencode's config, git's submodules.
const RUN_FROM_FILES: &[&str] =
    &[".envrc", ".mcp.json", "opencode.json", "opencode.jsonc", ".gitmodules"];

/// Under the user's home: git's and ssh's config, every program's config.
const RUN_FROM_HOME: &[&str] = &[".gitconfig", ".ssh", ".config", ".local/bin", ".npmrc"];

/// Why a write needs a person's yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// In a folder whose files say what runs (`.git`, `.claude`, …).
    RunFrom,
    /// A shell start-up file.
    ShellStartUp,
    /// Another file that says what runs (`.envrc`, `.mcp.json`, …).
    RunFile,
    /// The user's own configuration (`~/.ssh`, `~/.config`, …).
    UserConfig,
    /// Shard's home (but for the worktrees it makes for agents).
    ShardHome,
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RunFrom => "in a folder whose files say what runs (git's or an agent's)",
            Self::ShellStartUp => "a shell start-up file, which the next shell runs",
            Self::RunFile => "a file that says what runs",
            Self::UserConfig => "the user's own configuration",
            Self::ShardHome => "in Shard's own home",
        })
    }
}

/// Where the places are on this machine: `$SHARD_HOME` and the user's
/// home, each as given and with its links resolved (found once, when made).
#[derive(Debug, Clone, Default)]
pub struct Places {
    home: Vec<PathBuf>,
    user: Vec<PathBuf>,
}

/// `path` as given, and with its links resolved when that differs.
fn both(path: &Path) -> Vec<PathBuf> {
    let mut names = vec![path.to_owned()];
    names.extend(path.canonicalize().ok().filter(|real| real != path));
    names
}

impl Places {
    /// `home` is `$SHARD_HOME`, `user` the user's home directory.
    pub fn new(home: &Path, user: Option<&Path>) -> Self {
        Self { home: both(home), user: user.map(both).unwrap_or_default() }
    }

    /// Why writing `path` (absolute, without `..`) needs a person's yes, if
    /// it does.
    pub fn write_needs_asking(&self, path: &Path) -> Option<Why> {
        let names: Vec<&str> = path
            .components()
            .filter_map(|part| match part {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect();
        // Case folded: a case-insensitive file system takes `.GIT` for `.git`.
        let is = |name: &str, listed: &[&str]| listed.iter().any(|l| name.eq_ignore_ascii_case(l));
        if names.iter().any(|name| is(name, RUN_FROM_DIRS)) {
            return Some(Why::RunFrom);
        }
        match names.last() {
            Some(last) if is(last, SHELL_START_UP) => return Some(Why::ShellStartUp),
            Some(last) if is(last, RUN_FROM_FILES) => return Some(Why::RunFile),
            _ => {}
        }
        let under_user = self.user.iter().filter_map(|user| path.strip_prefix(user).ok());
        if under_user.into_iter().any(|below| RUN_FROM_HOME.iter().any(|p| below.starts_with(p))) {
            return Some(Why::UserConfig);
        }
        let in_home = self
            .home
            .iter()
            .any(|home| path.starts_with(home) && !path.starts_with(home.join("worktrees")));
        in_home.then_some(Why::ShardHome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_says_what_runs_asks_and_nothing_else_does() {
        let places = Places::new(Path::new("/home/u/.shard"), Some(Path::new("/home/u")));
        let asks = |path: &str| places.write_needs_asking(Path::new(path));
        assert_eq!(asks("/p/.git/config"), Some(Why::RunFrom));
        assert_eq!(asks("/p/.git/hooks/pre-commit"), Some(Why::RunFrom));
        assert_eq!(asks("/p/wt/.git"), Some(Why::RunFrom), "a worktree's .git file");
        assert_eq!(asks("/p/sub/.GIT/config"), Some(Why::RunFrom));
        assert_eq!(asks("/p/.claude/settings.json"), Some(Why::RunFrom));
        assert_eq!(asks("/home/u/.bashrc"), Some(Why::ShellStartUp));
        assert_eq!(asks("/p/sub/.zshrc"), Some(Why::ShellStartUp));
        assert_eq!(asks("/p/.envrc"), Some(Why::RunFile));
        assert_eq!(asks("/home/u/.ssh/authorized_keys"), Some(Why::UserConfig));
        assert_eq!(asks("/home/u/.config/fish/config.fish"), Some(Why::UserConfig));
        assert_eq!(asks("/home/u/.shard/config.toml"), Some(Why::ShardHome));
        assert_eq!(asks("/home/u/.shard"), Some(Why::ShardHome));
        for plain in [
            "/p/src/main.rs",
            "/p/.gitignore",
            "/p/.github/workflows/ci.yml",
            "/p/bashrc",
            "/home/u/.shardish/x",
            "/home/u/project/.config.toml",
            "/p/git/config",
            // A workspace agent's worktree is the daemon's, in its home.
            "/home/u/.shard/worktrees/w1/src/lib.rs",
        ] {
            assert_eq!(asks(plain), None, "{plain}");
        }
    }
}
