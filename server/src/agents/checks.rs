//! What an `agent.create` must hold before anything is written: its
//! working directory, model, mode, runtime and name, and the aliases a
//! parent's pool gives its children.

use std::path::Path;

use shard_platform::config::Config;
use shard_protocol::orchestrator::AgentCreate;

use super::error::AgentError;

/// The longest agent name (characters).
const MAX_NAME: usize = 200;
/// The longest alias (characters).
pub const MAX_ALIAS: usize = 64;

/// Why `alias` cannot be a friendly alias, if it cannot: empty, too long,
/// control or invisible formatting characters (a bidi override, a zero-width
/// space: two aliases must differ where a person can see it), or shaped like
/// a typed id (`job-`, `run-`, `agent-`), which handles resolve first.
pub fn alias_problem(alias: &str) -> Option<&'static str> {
    let lower = alias.to_lowercase();
    if alias.trim().is_empty() {
        Some("is empty")
    } else if alias.chars().count() > MAX_ALIAS {
        Some("is longer than 64 characters")
    } else if alias.chars().any(char::is_control) || shard_protocol::display::has_hidden(alias) {
        Some("holds control or invisible formatting characters")
    } else if ["job-", "run-", "agent-"].iter().any(|prefix| lower.starts_with(prefix)) {
        Some("looks like a typed id (job-, run-, agent-)")
    } else {
        None
    }
}

pub(super) fn validate_cwd(cwd: &str, home: &Path) -> Result<String, AgentError> {
    use std::os::unix::fs::MetadataExt;
    let path = Path::new(cwd);
    if !path.is_absolute() {
        return Err(AgentError::CwdRelative);
    }
    let unreadable = |source| AgentError::CwdUnreadable { cwd: cwd.to_owned(), source };
    let canonical = path.canonicalize().map_err(unreadable)?;
    let meta = std::fs::metadata(&canonical).map_err(unreadable)?;
    if !meta.is_dir() {
        return Err(AgentError::CwdNotDirectory(cwd.to_owned()));
    }
    if meta.uid() != nix::unistd::getuid().as_raw() {
        return Err(AgentError::CwdForeign(cwd.to_owned()));
    }
    // The root holds every folder, the home's included.
    let home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    if home.starts_with(&canonical) {
        return Err(AgentError::CwdHoldsHome(cwd.to_owned()));
    }
    Ok(canonical.display().to_string())
}

/// The runtime `request` runs on (`None`: Shard's own agent), once its
/// model, mode, runtime and name are checked against `config`.
pub(super) fn runtime_of(
    request: &AgentCreate,
    config: &Config,
) -> Result<Option<String>, AgentError> {
    if let Some(model) = &request.model
        && config.model(model).is_none()
    {
        return Err(AgentError::UnknownModel(model.clone()));
    }
    if let Some(mode) = &request.mode
        && !shard_platform::modes::is_known(mode)
    {
        return Err(AgentError::UnknownMode(mode.clone()));
    }
    let runtime = match request.runtime.as_deref() {
        None | Some(shard_platform::runtimes::BUILTIN) => None,
        Some(id) if config.runtime(id).is_some() => Some(id.to_owned()),
        Some(id) => return Err(AgentError::UnknownRuntime(id.to_owned())),
    };
    // An ACP agent's models and modes are its own, known once it runs.
    if runtime.is_some() && (request.model.is_some() || request.mode.is_some()) {
        return Err(super::runtime::acp::error::AcpError::SettingAtCreate.into());
    }
    if request.identity.name.as_ref().is_some_and(|name| name.chars().count() > MAX_NAME) {
        return Err(AgentError::NameTooLong { max: MAX_NAME });
    }
    if request.identity.name.as_deref().is_some_and(shard_protocol::display::has_hidden) {
        return Err(AgentError::NameHidden);
    }
    Ok(runtime)
}
