//! The agent's configuration: the model catalog and compaction settings, read
//! from `$SHARD_HOME/config.toml`. The built-in `demo` models are always in the
//! catalog, and `demo` is the default when nothing else is configured.
//!
//! API keys never live here: a model names the environment variable that holds
//! its key (`api_key_env`), and the key is read when the provider is built.
//!
//! ```toml
//! default_model = "sonnet"
//!
//! [[models]]
//! id = "sonnet"
//! provider = "anthropic"            # or "openai" for any chat-completions server
//! model = "claude-sonnet-4-5"
//! api_key_env = "ANTHROPIC_API_KEY"
//! context_window = 200000
//! reasoning_levels = [
//!   { id = "low", label = "Low", budget_tokens = 2048 },
//!   { id = "high", label = "High", budget_tokens = 16000 },
//! ]
//!
//! # What a model costs, per million tokens (any model, built-in ones too):
//! # usage events then carry `cost`, and the daemon's rollups add it up.
//! [prices.sonnet]
//! input = 3.0
//! output = 15.0
//! cache_read = 0.3                  # both default to the input price
//! cache_write = 3.75
//!
//! [compaction]
//! threshold = 0.8
//! keep_recent_tokens = 20000
//!
//! [tools]
//! # More variables tool processes must not see (a trailing * is a prefix),
//! # besides every model's api_key_env, ALWAYS_HIDDEN and HIDDEN_BY_DEFAULT.
//! hide_env = ["CORP_*", "VAULT_TOKEN"]
//! # Names of HIDDEN_BY_DEFAULT that tools may see after all.
//! show_env = ["GH_TOKEN"]
//!
//! # Agents that are not Shard's own (crate::runtimes).
//! [[runtimes]]
//! id = "claude"
//! protocol = "acp"
//! command = "claude-agent-acp"
//!
//! # Other machines' daemons, each reached through a command's stdio
//! # (crate::nodes, docs/NODES.md).
//! [[nodes]]
//! id = "box"
//! command = ["ssh", "-T", "box", "shard", "bridge"]
//!
//! # Where a workspace's "Push" sends its branch (docs/WORKSPACES.md): a
//! # remote of the repository, by name. Without it, pushing is refused.
//! [workspaces]
//! push_remote = "origin"
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use shard_protocol::types::{ModelDescriptor, ReasoningLevel};

use crate::runtimes::RuntimeConfig;

/// The built-in model's context window: small on purpose, so that compaction
/// is easy to reach in tests and demos.
pub const DEMO_CONTEXT_WINDOW: u64 = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// The deterministic built-in models (CONTRACT.md).
    Builtin,
    /// An OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
    /// llama.cpp, vLLM, …).
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
}

/// Where OpenAI's API is served when a model's `base_url` says nothing.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Where Anthropic's API is served when a model's `base_url` says nothing.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// Where a model of this kind is served when its `base_url` says
    /// nothing; none for the built-in models, which run in the agent.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::Builtin => None,
            Self::Openai => Some(OPENAI_BASE_URL),
            Self::Anthropic => Some(ANTHROPIC_BASE_URL),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct LevelConfig {
    pub id: String,
    pub label: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Anthropic: the extended-thinking budget for this level.
    #[serde(default)]
    pub budget_tokens: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModelConfig {
    /// The catalog id clients select (`set_model`).
    pub id: String,
    pub provider: ProviderKind,
    /// The provider's own model name.
    pub model: String,
    /// Defaults to the provider's public endpoint.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key; none for local servers.
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub context_window: Option<u64>,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_levels: Vec<LevelConfig>,
    /// The level used until one is chosen; the first level by default.
    #[serde(default)]
    pub default_reasoning_level: Option<String>,
}

impl ModelConfig {
    pub fn descriptor(&self) -> ModelDescriptor {
        ModelDescriptor {
            id: self.id.clone(),
            provider: self.provider.as_str().to_owned(),
            model: self.model.clone(),
            context_window: self.context_window,
        }
    }

    pub fn levels(&self) -> Vec<ReasoningLevel> {
        self.reasoning_levels
            .iter()
            .map(|level| ReasoningLevel {
                id: level.id.clone(),
                label: level.label.clone(),
                description: level.description.clone(),
            })
            .collect()
    }

    pub fn default_level(&self) -> Option<String> {
        self.default_reasoning_level
            .clone()
            .or_else(|| self.reasoning_levels.first().map(|level| level.id.clone()))
    }

    pub fn level(&self, id: &str) -> Option<&LevelConfig> {
        self.reasoning_levels.iter().find(|level| level.id == id)
    }

    pub fn context_window(&self) -> u64 {
        self.context_window.unwrap_or(128_000)
    }
}

/// A model's price per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// What one call's tokens cost.
    pub fn cost(&self, usage: &shard_protocol::types::Usage) -> f64 {
        let per_token = |price: f64, tokens: u64| price * tokens as f64 / 1_000_000.0;
        per_token(self.input, usage.input)
            + per_token(self.output, usage.output)
            + per_token(self.cache_read.unwrap_or(self.input), usage.cache_read.unwrap_or(0))
            + per_token(self.cache_write.unwrap_or(self.input), usage.cache_write.unwrap_or(0))
    }

    fn valid(&self) -> bool {
        [Some(self.input), Some(self.output), self.cache_read, self.cache_write]
            .into_iter()
            .flatten()
            .all(|price| price.is_finite() && price >= 0.0)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct CompactionConfig {
    /// Automatic compaction on/off; manual `session_op compact` always works.
    pub enabled: bool,
    /// Fraction of the context window above which the agent compacts once idle.
    pub threshold: f64,
    /// Tokens of recent conversation kept verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self { enabled: true, threshold: 0.8, keep_recent_tokens: 2000 }
    }
}

/// Variables no tool process sees, whatever the configuration: Shard's own
/// and the usual names of provider keys (docs/SECURITY.md).
pub const ALWAYS_HIDDEN: &[&str] = &[
    "SHARD_*",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
];

/// Variables no tool process sees unless `[tools] show_env` names them: the
/// usual names of tokens for code hosts, clouds and package registries,
/// which a model has no business reading (docs/SECURITY.md).
pub const HIDDEN_BY_DEFAULT: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "BITBUCKET_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "AZURE_OPENAI_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "COHERE_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "PERPLEXITY_API_KEY",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "PYPI_TOKEN",
    "TWINE_PASSWORD",
    "DOCKER_PASSWORD",
    "SLACK_BOT_TOKEN",
    "STRIPE_SECRET_KEY",
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ToolsConfig {
    /// Names of variables tool processes must not see; `PREFIX*` for all
    /// that start so.
    hide_env: Vec<String>,
    /// Names from [`HIDDEN_BY_DEFAULT`] tool processes may see after all.
    show_env: Vec<String>,
}

/// `[workspaces]`: what the daemon may do with a workspace's work.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspacesConfig {
    /// The remote (by name) that `workspace.push` pushes branches to;
    /// `None`: pushing is refused.
    pub push_remote: Option<String>,
}

/// `[step_up]`: which approvals need a fresh passkey assertion before an
/// `allow` from a browser or a notification counts (docs/SECURITY.md,
/// "Passkey step-up"). Read when the daemon starts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepUpConfig {
    /// `remote` (in the remote modes only), `always`, or `never`.
    pub when: StepUpWhen,
    /// Tools whose every `allow` needs it.
    pub tools: Vec<String>,
    /// `write` and `edit` to a path outside the agent's working directory.
    pub writes_outside_cwd: bool,
}

impl Default for StepUpConfig {
    fn default() -> Self {
        Self { when: StepUpWhen::Remote, tools: vec!["bash".to_owned()], writes_outside_cwd: true }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepUpWhen {
    Remote,
    Always,
    Never,
}

/// Whether `name` can only be read as a remote's name: letters, digits,
/// `.`, `_`, `-` and `/`, not starting with `-` or `.`, without `..`, so
/// that git never takes it for an option, a path or a URL.
fn plain_remote_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '.', '/'])
        && !name.ends_with(['/', '.'])
        && !name.contains("..")
        && !name.contains("//")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    default_model: Option<String>,
    #[serde(default)]
    models: Vec<ModelConfig>,
    #[serde(default)]
    compaction: CompactionConfig,
    #[serde(default)]
    tools: ToolsConfig,
    /// Prices by model id.
    #[serde(default)]
    prices: std::collections::HashMap<String, Price>,
    /// Agents that are not Shard's own (crate::runtimes).
    #[serde(default)]
    runtimes: Vec<RuntimeConfig>,
    #[serde(default)]
    workspaces: WorkspacesConfig,
    #[serde(default)]
    step_up: StepUpConfig,
    #[serde(default)]
    sandbox: crate::sandbox::SandboxConfig,
    #[serde(default)]
    limits: crate::limits::Limits,
    #[serde(default)]
    budgets: Vec<crate::limits::BudgetRule>,
    #[serde(default)]
    nodes: Vec<crate::nodes::NodeConfig>,
}

/// Which environment variables tool processes (`bash` and what it runs)
/// never see: every configured model's key variable, [`ALWAYS_HIDDEN`], and
/// the config's `tools.hide_env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenEnv {
    names: Vec<String>,
    prefixes: Vec<String>,
}

impl HiddenEnv {
    fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Self {
        let (mut names, mut prefixes) = (Vec::new(), Vec::new());
        for pattern in patterns {
            match pattern.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_owned()),
                None => names.push(pattern.to_owned()),
            }
        }
        Self { names, prefixes }
    }

    pub fn hides(&self, name: &std::ffi::OsStr) -> bool {
        // A name that is not UTF-8 is no configured name, but may still
        // start with a hidden prefix.
        let name = name.to_string_lossy();
        self.names.iter().any(|hidden| *hidden == name)
            || self.prefixes.iter().any(|prefix| name.starts_with(prefix.as_str()))
    }
}

/// The loaded configuration: the catalog (built-ins first) and settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub models: Vec<ModelConfig>,
    pub default_model: String,
    pub compaction: CompactionConfig,
    pub hidden_env: std::sync::Arc<HiddenEnv>,
    pub prices: std::collections::HashMap<String, Price>,
    /// Agents that are not Shard's own, in the order configured.
    pub runtimes: Vec<RuntimeConfig>,
    pub workspaces: WorkspacesConfig,
    pub step_up: StepUpConfig,
    /// `[sandbox]`, as written (crate::sandbox).
    pub sandbox: crate::sandbox::SandboxConfig,
    /// `[limits]` (crate::limits).
    pub limits: crate::limits::Limits,
    /// `[[budgets]]` (crate::limits).
    pub budgets: Vec<crate::limits::BudgetRule>,
    /// Other machines' daemons this one reaches (crate::nodes).
    pub nodes: Vec<crate::nodes::NodeConfig>,
}

impl Config {
    /// Reads `home/config.toml`; a missing file means the built-ins only.
    pub fn load(home: &Path) -> anyhow::Result<Self> {
        Self::parse(home, Self::read_text(home)?.as_deref())
    }

    /// The text of `home/config.toml`; `None` when there is none.
    pub fn read_text(home: &Path) -> anyhow::Result<Option<String>> {
        let path = home.join("config.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error).context(format!("cannot read {}", path.display())),
        }
    }

    /// The config `text` of `home/config.toml` gives (`None`: there is no
    /// file, the built-ins only).
    pub fn parse(home: &Path, text: Option<&str>) -> anyhow::Result<Self> {
        let file = match text {
            Some(text) => toml::from_str::<ConfigFile>(text)
                .with_context(|| format!("invalid {}", home.join("config.toml").display()))?,
            None => ConfigFile::default(),
        };
        Self::from_file(file)
    }

    fn from_file(file: ConfigFile) -> anyhow::Result<Self> {
        let mut models = builtin_models();
        for model in file.models {
            if model.provider == ProviderKind::Builtin {
                anyhow::bail!("model `{}`: provider `builtin` is reserved", model.id);
            }
            if models.iter().any(|known| known.id == model.id) {
                anyhow::bail!("model id `{}` is defined twice", model.id);
            }
            models.push(model);
        }
        let default_model = file.default_model.unwrap_or_else(|| "demo".to_owned());
        if !models.iter().any(|model| model.id == default_model) {
            anyhow::bail!("default_model `{default_model}` is not in the catalog");
        }
        let compaction = file.compaction;
        if !(compaction.threshold > 0.0 && compaction.threshold <= 1.0) {
            anyhow::bail!("compaction.threshold must be in (0, 1]");
        }
        if let Some(empty) =
            file.tools.hide_env.iter().find(|name| name.trim_end_matches('*').is_empty())
        {
            anyhow::bail!("tools.hide_env: {empty:?} would hide every variable");
        }
        for (id, price) in &file.prices {
            if !models.iter().any(|model| model.id == *id) {
                anyhow::bail!("prices.{id}: there is no model `{id}` in the catalog");
            }
            if !price.valid() {
                anyhow::bail!("prices.{id}: every price must be a finite number, 0 or more");
            }
        }
        if let Some(unknown) =
            file.tools.show_env.iter().find(|name| !HIDDEN_BY_DEFAULT.contains(&name.as_str()))
        {
            anyhow::bail!(
                "tools.show_env: {unknown:?} is not hidden by default (only names of \
                 HIDDEN_BY_DEFAULT can be shown; provider keys and SHARD_ variables never are)"
            );
        }
        crate::runtimes::check(&file.runtimes)?;
        let tables =
            file.runtimes.iter().map(|runtime| (runtime.id.as_str(), runtime.sandbox.as_ref()));
        crate::sandbox::check(&file.sandbox, tables)?;
        file.limits.check()?;
        crate::limits::check_budgets(&file.budgets)?;
        crate::nodes::check(&file.nodes)?;
        if let Some(remote) =
            file.workspaces.push_remote.as_deref().filter(|name| !plain_remote_name(name))
        {
            anyhow::bail!(
                "workspaces.push_remote: {remote:?} is not a plain remote name (letters, \
                 digits, `.`, `_`, `-`, `/`; the name of a remote, not its URL)"
            );
        }
        let hidden_env = hidden_env(&models, &file.tools);
        Ok(Self {
            models,
            default_model,
            compaction,
            hidden_env,
            prices: file.prices,
            runtimes: file.runtimes,
            workspaces: file.workspaces,
            step_up: file.step_up,
            sandbox: file.sandbox,
            limits: file.limits,
            budgets: file.budgets,
            nodes: file.nodes,
        })
    }

    pub fn builtin() -> Self {
        let models = builtin_models();
        let hidden_env = hidden_env(&models, &ToolsConfig::default());
        Self {
            models,
            default_model: "demo".to_owned(),
            compaction: CompactionConfig::default(),
            hidden_env,
            prices: Default::default(),
            runtimes: Vec::new(),
            workspaces: WorkspacesConfig::default(),
            step_up: StepUpConfig::default(),
            sandbox: crate::sandbox::SandboxConfig::default(),
            limits: crate::limits::Limits::default(),
            budgets: Vec::new(),
            nodes: Vec::new(),
        }
    }

    /// The configured runtime `id` (not the built-in agent).
    pub fn runtime(&self, id: &str) -> Option<&RuntimeConfig> {
        self.runtimes.iter().find(|runtime| runtime.id == id)
    }

    /// The price of model `id`, if `config.toml` gives one.
    pub fn price(&self, id: &str) -> Option<Price> {
        self.prices.get(id).copied()
    }

    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models.iter().find(|model| model.id == id)
    }
}

fn hidden_env(models: &[ModelConfig], tools: &ToolsConfig) -> std::sync::Arc<HiddenEnv> {
    let keys = models.iter().filter_map(|model| model.api_key_env.as_deref());
    let defaults = HIDDEN_BY_DEFAULT
        .iter()
        .copied()
        .filter(|name| !tools.show_env.iter().any(|shown| shown == name));
    let patterns = ALWAYS_HIDDEN
        .iter()
        .copied()
        .chain(defaults)
        .chain(keys)
        .chain(tools.hide_env.iter().map(String::as_str));
    std::sync::Arc::new(HiddenEnv::new(patterns))
}

/// Whether `id` names one of the built-in (demo) models, exactly: a
/// configured model may have an id that merely starts like theirs.
pub fn is_builtin_model(id: &str) -> bool {
    builtin_models().iter().any(|model| model.id == id)
}

fn builtin_models() -> Vec<ModelConfig> {
    let demo = ModelConfig {
        id: "demo".to_owned(),
        provider: ProviderKind::Builtin,
        model: "demo".to_owned(),
        base_url: None,
        api_key_env: None,
        context_window: Some(DEMO_CONTEXT_WINDOW),
        max_output_tokens: None,
        reasoning_levels: Vec::new(),
        default_reasoning_level: None,
    };
    let level = |id: &str, label: &str| LevelConfig {
        id: id.to_owned(),
        label: label.to_owned(),
        description: None,
        budget_tokens: None,
    };
    let thinking = ModelConfig {
        id: "demo-think".to_owned(),
        model: "demo-think".to_owned(),
        reasoning_levels: vec![
            level("low", "Low"),
            level("medium", "Medium"),
            level("high", "High"),
        ],
        default_reasoning_level: Some("medium".to_owned()),
        ..demo.clone()
    };
    vec![demo, thinking]
}

/// `$SHARD_HOME`, or `~/.shard`.
pub fn shard_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("SHARD_HOME").filter(|home| !home.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let home = std::env::var_os("HOME").context("neither SHARD_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".shard"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hidden(text: &str) -> anyhow::Result<std::sync::Arc<HiddenEnv>> {
        let file: ConfigFile = toml::from_str(text)?;
        Ok(Config::from_file(file)?.hidden_env)
    }

    #[test]
    fn common_tokens_are_hidden_unless_shown_and_keys_always_are() {
        let hides = |env: &HiddenEnv, name: &str| env.hides(name.as_ref());
        let default = hidden("").expect("no config");
        for name in ["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "SHARD_X"] {
            assert!(hides(&default, name), "{name}");
        }
        assert!(!hides(&default, "PATH"));
        let shown =
            hidden("[tools]\nshow_env = [\"GH_TOKEN\"]\nhide_env = [\"CORP_*\"]").expect("config");
        assert!(!hides(&shown, "GH_TOKEN"));
        assert!(hides(&shown, "GITHUB_TOKEN") && hides(&shown, "CORP_VAULT"));
        for refused in ["OPENAI_API_KEY", "SHARD_HOME", "PATH"] {
            let text = format!("[tools]\nshow_env = [\"{refused}\"]");
            assert!(hidden(&text).is_err(), "{refused} cannot be shown");
        }
        assert!(hidden("[tools]\nshow_envs = []").is_err(), "a misspelt setting is an error");
    }

    #[test]
    fn parses_a_catalog_with_levels() {
        let file: ConfigFile = toml::from_str(
            r#"
            default_model = "local"
            [[models]]
            id = "local"
            provider = "openai"
            model = "qwen2.5-coder"
            base_url = "http://127.0.0.1:11434/v1"
            context_window = 32768
            reasoning_levels = [{ id = "low", label = "Low" }, { id = "high", label = "High" }]
            [compaction]
            threshold = 0.75
            "#,
        )
        .expect("valid toml");
        let config = Config::from_file(file).expect("valid config");
        assert_eq!(config.default_model, "local");
        let local = config.model("local").expect("in catalog");
        assert_eq!(local.default_level().as_deref(), Some("low"));
        assert_eq!(config.compaction.keep_recent_tokens, 2000);
        assert!(config.model("demo").is_some(), "built-ins stay");
    }

    #[test]
    fn a_push_remote_is_a_plain_remote_name() {
        let load = |text: &str| {
            let file: ConfigFile = toml::from_str(text)?;
            Config::from_file(file)
        };
        let config = load("[workspaces]\npush_remote = \"upstream/team\"").expect("config");
        assert_eq!(config.workspaces.push_remote.as_deref(), Some("upstream/team"));
        assert_eq!(load("").expect("config").workspaces.push_remote, None);
        for bad in ["", "-u", "../x", "https://host/repo", "a b", "origin/", ".hidden"] {
            let text = format!("[workspaces]\npush_remote = {bad:?}");
            assert!(load(&text).is_err(), "{bad:?} is refused");
        }
        assert!(load("[workspaces]\npush = \"origin\"").is_err(), "a misspelt setting");
    }

    #[test]
    fn refuses_an_unknown_default_and_duplicate_ids() {
        let unknown: ConfigFile = toml::from_str("default_model = \"nope\"").expect("toml");
        assert!(Config::from_file(unknown).is_err());
        let duplicate: ConfigFile =
            toml::from_str("[[models]]\nid = \"demo\"\nprovider = \"openai\"\nmodel = \"x\"")
                .expect("toml");
        assert!(Config::from_file(duplicate).is_err());
    }
}
