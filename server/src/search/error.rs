//! What the search index refuses, and the one mapping of each refusal to
//! the wire's `{code, message}`.

use shard_protocol::{ErrorCode, WireError};

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the query is empty")]
    Empty,
    #[error("the query is longer than {max} bytes")]
    TooLong { max: usize },
    #[error("the query has no words to search for (letters or digits)")]
    NoWords,
    #[error("`limit` must be at least 1")]
    ZeroLimit,
    #[error("the search index is busy; try again in a moment")]
    Busy,
    #[error("the search index is unavailable: {0}")]
    Unavailable(String),
    /// SQLite refused the query (a bug in how the words were quoted, since
    /// every word is quoted): the user's query is what it refused.
    #[error("the query could not be searched: {0}")]
    Refused(String),
    #[error("the search index failed: {0}")]
    Database(#[from] rusqlite::Error),
}

impl SearchError {
    fn code(&self) -> ErrorCode {
        match self {
            Self::Empty | Self::TooLong { .. } | Self::NoWords | Self::ZeroLimit => {
                ErrorCode::InvalidRequest
            }
            Self::Refused(_) => ErrorCode::InvalidRequest,
            Self::Busy => ErrorCode::Conflict,
            Self::Unavailable(_) | Self::Database(_) => ErrorCode::InternalError,
        }
    }
}

impl From<SearchError> for WireError {
    fn from(error: SearchError) -> Self {
        WireError::new(error.code(), error.to_string())
    }
}
