//! Why a tool did not do what it was asked. Never a crash: the model reads
//! the words as an `is_error` tool result ([`ToolOutput::from`]) and can try
//! again another way, so they name the argument or the path that failed.

use std::path::PathBuf;

use super::ToolOutput;

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model called a tool this agent does not have.
    #[error("unknown tool `{0}`")]
    Unknown(String),

    // The arguments.
    #[error("missing argument `{0}`")]
    Missing(&'static str),
    #[error("`{0}` must be a string")]
    NotString(&'static str),
    #[error("`{0}` must be a non-negative integer")]
    NotCount(&'static str),
    #[error("`{0}` must be a positive number of seconds")]
    NotSeconds(&'static str),
    #[error("invalid pattern: {0}")]
    Pattern(#[source] regex::Error),
    #[error("invalid glob: {0}")]
    Glob(#[source] globset::Error),
    #[error("`old_string` must not be empty")]
    EmptyOld,
    #[error("`old_string` and `new_string` are the same")]
    NoChange,

    // The files. A path is shown as the model gave it where the tool has it
    // so, else resolved against the working directory.
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot list {}: {source}", path.display())]
    List { path: PathBuf, source: std::io::Error },
    #[error("{} does not exist", path.display())]
    Absent { path: PathBuf },
    #[error("{} is a directory", path.display())]
    Directory { path: PathBuf },
    #[error("{} is a binary file", path.display())]
    Binary { path: PathBuf },
    #[error("{} is not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("{} is too large to edit ({bytes} bytes)", path.display())]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("`old_string` was not found in {}", path.display())]
    NotFoundIn { path: PathBuf },
    #[error(
        "`old_string` occurs {count} times in {}; include more context to make it unique, or set replace_all",
        path.display()
    )]
    Ambiguous { path: PathBuf, count: usize },

    // The run.
    #[error("aborted")]
    Aborted,
    /// A search's worker thread ended without an answer (`tool`: `grep` or
    /// `find`).
    #[error("{tool} failed: {source}")]
    Worker { tool: &'static str, source: tokio::task::JoinError },
}

impl From<ToolError> for ToolOutput {
    fn from(error: ToolError) -> Self {
        ToolOutput::error(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::ToolError;

    /// The words the model has always read: a model prompted with them, or
    /// a test that looks for them, sees no change.
    #[test]
    fn each_refusal_reads_as_before() {
        let io = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let shown = std::io::Error::from(std::io::ErrorKind::PermissionDenied).to_string();
        let path = || "src/a b.rs".into();
        for (error, said) in [
            (ToolError::Unknown("fly".into()), "unknown tool `fly`".to_owned()),
            (ToolError::Missing("path"), "missing argument `path`".into()),
            (ToolError::NotString("content"), "`content` must be a string".into()),
            (ToolError::NotCount("limit"), "`limit` must be a non-negative integer".into()),
            (
                ToolError::NotSeconds("timeout"),
                "`timeout` must be a positive number of seconds".into(),
            ),
            (ToolError::EmptyOld, "`old_string` must not be empty".into()),
            (ToolError::NoChange, "`old_string` and `new_string` are the same".into()),
            (
                ToolError::Open { path: path(), source: io() },
                format!("cannot open src/a b.rs: {shown}"),
            ),
            (
                ToolError::Read { path: path(), source: io() },
                format!("cannot read src/a b.rs: {shown}"),
            ),
            (
                ToolError::Create { path: path(), source: io() },
                format!("cannot create src/a b.rs: {shown}"),
            ),
            (
                ToolError::Write { path: path(), source: io() },
                format!("cannot write src/a b.rs: {shown}"),
            ),
            (
                ToolError::List { path: path(), source: io() },
                format!("cannot list src/a b.rs: {shown}"),
            ),
            (ToolError::Absent { path: path() }, "src/a b.rs does not exist".into()),
            (ToolError::Directory { path: path() }, "src/a b.rs is a directory".into()),
            (ToolError::Binary { path: path() }, "src/a b.rs is a binary file".into()),
            (ToolError::NotText { path: path() }, "src/a b.rs is not UTF-8 text".into()),
            (
                ToolError::TooLarge { path: path(), bytes: 10_485_761 },
                "src/a b.rs is too large to edit (10485761 bytes)".into(),
            ),
            (
                ToolError::NotFoundIn { path: path() },
                "`old_string` was not found in src/a b.rs".into(),
            ),
            (
                ToolError::Ambiguous { path: path(), count: 3 },
                "`old_string` occurs 3 times in src/a b.rs; include more context to make it \
                 unique, or set replace_all"
                    .into(),
            ),
            (ToolError::Aborted, "aborted".into()),
        ] {
            assert_eq!(error.to_string(), said);
        }
        let pattern = regex::RegexBuilder::new("x{99}").size_limit(1).build().expect_err("too big");
        assert_eq!(
            ToolError::Pattern(pattern.clone()).to_string(),
            format!("invalid pattern: {pattern}")
        );
        let glob = globset::Glob::new("a[").expect_err("unclosed");
        assert_eq!(ToolError::Glob(glob.clone()).to_string(), format!("invalid glob: {glob}"));
    }

    #[tokio::test]
    async fn a_search_whose_worker_is_gone_says_which() {
        let worker = tokio::spawn(std::future::pending::<()>());
        worker.abort();
        let gone = worker.await.expect_err("aborted");
        let shown = gone.to_string();
        let error = ToolError::Worker { tool: "grep", source: gone };
        assert_eq!(error.to_string(), format!("grep failed: {shown}"));
    }
}
