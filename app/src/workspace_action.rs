//! What the workspace panel can do with a workspace's work, on its own so
//! that the link's requests can name it without the panel's slice.

/// What the panel can do with a workspace's work (the daemon's
/// `workspace-actions`), each previewed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Commit,
    Merge,
    Push,
}

impl Action {
    /// The confirm button's word, and the dialog's name.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Commit => "Commit",
            Self::Merge => "Merge",
            Self::Push => "Push",
        }
    }
}
