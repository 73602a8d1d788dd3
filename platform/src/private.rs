//! Files and folders only their owner may read. One created earlier (by
//! hand, by an older version) keeps its mode when it is opened again, so
//! every place that opens one also narrows it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Sets `path` to `mode` (0600 for a file, 0700 for a folder) if its group
/// or others have any access; leaves it alone otherwise.
pub fn tighten(path: &Path, mode: u32) -> std::io::Result<()> {
    let current = std::fs::metadata(path)?.permissions().mode();
    if current & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}
