//! The daemon's parts, built from its flags and its home: the audit
//! log's first record, what every agent's host shares, and the web side.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use tokio::sync::Semaphore;

use super::shard::Shard;
use super::{DaemonArgs, Stop};
use crate::agents::host::Context as HostContext;
use crate::agents::host::JournalLimits;
use crate::agents::registry::Registry;
use crate::agents::runtime::Spawners;
use crate::agents::runtime::acp::AcpSpawner;
use crate::agents::runtime::stdio::ProcessSpawner;
use crate::agents::usage::UsageBook;
use crate::clients::Limits;
use crate::clients::hub::Hub;
use crate::commands::Daemon;
use crate::home::Home;
use crate::jobs::{JobLimits, Jobs};
use crate::search::{Search, SearchLimits};
use crate::web::audit::Audit;
use crate::web::auth::Auth;
use crate::web::config::WebConfig;
use crate::web::limiter::Limiter;
use crate::workspaces::Workspaces;

/// Presentations of a dead credential at `/bootstrap` or `/ws` a minute
/// from one client before it is answered 429 (CONTRACT.md): valid ones are
/// never counted, so a tab reconnecting often is never limited.
const CREDENTIAL_FAILURES_PER_MINUTE: usize = 10;

/// The daemon's parts, as `run` serves and stops them.
pub(super) struct Built {
    pub shard: Arc<Shard>,
    pub daemon: Arc<dyn Daemon>,
    pub hub: Arc<Hub>,
    pub web: Arc<crate::web::Web>,
}

/// Builds the daemon in `home` from its flags, for the address it is
/// bound to.
pub(super) fn daemon(
    home: &Home,
    args: &DaemonArgs,
    config: WebConfig,
    local: SocketAddr,
    stop: &Stop,
) -> anyhow::Result<Built> {
    let origin = config.public_origin(local);
    let hub = Arc::new(Hub::default());
    let auth = Arc::new(
        Auth::load(&home.path, config.session_idle, config.session_max_age)?
            .with_code_ttl(config.enroll_code_ttl),
    );
    let audit = Arc::new(Audit::open(&home.path).context("cannot open the audit log")?);
    record_startup(&audit, &config, args, local);
    let pushes = Pushes::start(home, args, &origin, &auth, &hub)?;
    let (news, heard) = tokio::sync::mpsc::channel(crate::agents::nodes::NEWS);
    // Read once: the nodes start from this text, and an edit after it is
    // an edit to follow.
    let config_text = shard_platform::config::Config::read_text(&home.path);
    let nodes = Arc::new(crate::agents::nodes::Nodes::start(
        node_configs(home, &config_text),
        hub.clone(),
        news,
        stop.terminate.clone(),
    ));
    let following = crate::agents::nodes::follow_config(
        nodes.clone(),
        home.path.clone(),
        config_text.ok().flatten(),
        stop.terminate.clone(),
    );
    tokio::spawn(following);
    let notifier = pushes.notifier.clone();
    let context = host_context(home, &hub, notifier, &config, args, nodes)?;
    let registry = Arc::new(Registry::load(context));
    tokio::spawn(crate::agents::registry::follow_nodes(registry.clone(), heard));
    // In the background: search answers once its thread has opened the
    // index, and finds more as it catches up with the session logs.
    registry.context.search.catch_up(registry.owners());
    let fleet = registry.context.fleet.clone();
    let governed = registry.governed();
    let budgets = registry.context.budgets.clone();
    let spend = {
        let budgets = budgets.clone();
        move || budgets.daemon(crate::clock::now_ms())
    };
    tokio::spawn(crate::agents::fleet::watch(
        fleet,
        spend,
        hub.clone(),
        governed.clone(),
        stop.terminate.clone(),
    ));
    tokio::spawn(crate::agents::budgets::watch(
        budgets,
        hub.clone(),
        governed,
        stop.terminate.clone(),
    ));
    let limits = JobLimits {
        run_timeout: Duration::from_secs(args.subagent_run_timeout),
        active_per_parent: args.subagent_max_active_per_parent,
        active: args.subagent_max_active,
        kept_per_parent: args.subagent_max_jobs_per_parent,
        kept: args.subagent_max_jobs,
    };
    let jobs = Jobs::load(registry.clone(), limits);
    let workspaces = Workspaces::load(registry.clone());
    let shard = Arc::new(Shard {
        registry,
        jobs,
        workspaces,
        auth: auth.clone(),
        hub: hub.clone(),
        audit: audit.clone(),
        origin,
        stop: stop.clone(),
    });
    let daemon: Arc<dyn Daemon> = shard.clone();
    let parts = WebParts { auth, pushes, hub: &hub, daemon: &daemon, audit, config, local };
    let web = web_state(parts, args);
    Ok(Built { shard, daemon, hub, web })
}

/// Web Push: the subscriptions and keys, the notification actions, and
/// the notifier that sends them.
struct Pushes {
    push: crate::web::push::Push,
    notifier: Arc<crate::web::push::notify::Notifier>,
    actions: Arc<crate::web::push::actions::Actions>,
}

impl Pushes {
    fn start(
        home: &Home,
        args: &DaemonArgs,
        origin: &str,
        auth: &Arc<Auth>,
        hub: &Arc<Hub>,
    ) -> anyhow::Result<Self> {
        let push = crate::web::push::Push::load(&home.path, args.web.insecure_push_endpoints)?;
        let actions = Arc::new(crate::web::push::actions::Actions::default());
        let sender = crate::web::push::send::Sender::new(
            push.signer(origin),
            auth.clone(),
            push.insecure_endpoints,
            &args.web.push_resolve,
        )?;
        let notifier = Arc::new(crate::web::push::notify::Notifier::start(
            auth.clone(),
            hub.clone(),
            actions.clone(),
            sender,
            Duration::from_secs(args.web.push_action_ttl),
        ));
        Ok(Self { push, notifier, actions })
    }
}

/// The audit log's `startup` record, and a warning on stderr for each
/// guard turned off: plain-http remote access, and the push guards.
fn record_startup(audit: &Audit, config: &WebConfig, args: &DaemonArgs, local: SocketAddr) {
    let mut warnings = Vec::new();
    if config.allow_insecure {
        let warning = "remote access over plain http: the session cookie can be read by anyone on the network path; use only on a trusted network, VPN or SSH tunnel";
        tracing::warn!("{warning}");
        warnings.push(warning);
    }
    let insecure_push = args.web.insecure_push_endpoints;
    if insecure_push {
        let warning = "--insecure-push-endpoints: the push guards are off; an enrolled browser can make the daemon post over plain http to this machine or its local network; for tests only";
        tracing::warn!("{warning}");
        warnings.push(warning);
    }
    audit.record(
        "startup",
        json!({"mode": config.mode.as_str(), "bind": local.to_string(), "public_host": config.public_host,
               "allowed_origins": config.allowed_origins, "trust_proxy": args.web.trust_proxy,
               "insecure_push_endpoints": insecure_push, "warnings": warnings}),
    );
}

/// What every agent's host shares: how processes start, where registry
/// events go, the timeouts and budgets the command line set.
fn host_context(
    home: &Home,
    hub: &Arc<Hub>,
    notices: Arc<dyn crate::agents::Notices>,
    config: &WebConfig,
    args: &DaemonArgs,
    nodes: Arc<crate::agents::nodes::Nodes>,
) -> anyhow::Result<Arc<HostContext>> {
    let exe = std::env::current_exe().context("cannot find the shard executable")?;
    let processes = Arc::new(crate::agents::Processes::default());
    let containment = crate::sandbox::Containment::probe();
    match &containment {
        crate::sandbox::Containment::Available { .. } => {
            tracing::info!("sandbox: {}", containment.describe());
        }
        crate::sandbox::Containment::Unavailable { .. } => {
            tracing::warn!("sandbox: {}", containment.describe());
        }
    }
    let sandbox = Arc::new(crate::sandbox::Sandbox {
        home: home.path.canonicalize().unwrap_or_else(|_| home.path.clone()),
        exe: exe.clone(),
        containment,
        user_home: std::env::var_os("HOME").map(std::path::PathBuf::from),
        resolver: Arc::new(crate::sandbox::egress::Resolver::with_known(
            args.egress_resolve.clone(),
        )),
        remote: config.public_host.is_some(),
        git_dir_of: {
            let home = home.path.clone();
            Box::new(move |cwd| crate::workspaces::records::git_dir_of_worktree(&home, cwd))
        },
    });
    let usage = Arc::new(UsageBook::new(&home.path));
    Ok(Arc::new(HostContext {
        home: home.path.clone(),
        spawner: Arc::new(Spawners {
            builtin: ProcessSpawner {
                exe: exe.clone(),
                home: home.path.clone(),
                processes: processes.clone(),
            },
            acp: AcpSpawner { exe, home: home.path.clone(), processes: processes.clone() },
            remote: crate::agents::runtime::remote::RemoteSpawner {
                home: home.path.clone(),
                nodes: nodes.clone(),
                cursors: Arc::default(),
            },
            home: home.path.clone(),
            sandbox: sandbox.clone(),
        }),
        sandbox,
        nodes,
        broadcast: hub.clone(),
        notices,
        step_up: step_up(home, config),
        delegation: Arc::default(),
        idle_timeout: Duration::from_secs(args.idle_runtime_timeout),
        headless_timeout: Duration::from_secs(args.headless_timeout),
        journal: JournalLimits { events: args.journal_events, bytes: args.journal_bytes },
        budgets: Arc::new(crate::agents::budgets::Budgets::new(
            &home.path,
            budget_rules(home),
            usage.clone(),
        )),
        usage,
        fleet: Arc::new(crate::agents::fleet::Fleet::new(processes.clone(), limits(home))),
        processes,
        search: Search::start(
            &home.path,
            SearchLimits { messages: args.search_max_messages, bytes: args.search_max_bytes },
        ),
    }))
}

/// `[limits]` of `config.toml`, read when the daemon starts. A config that
/// cannot be read sets none (the agents say what is wrong with it).
fn limits(home: &Home) -> shard_platform::limits::Limits {
    let loaded = shard_platform::config::Config::load(&home.path);
    loaded.map(|config| config.limits).unwrap_or_else(|error| {
        tracing::warn!(error = %format!("{error:#}"), "config.toml cannot be read; no fleet limits");
        shard_platform::limits::Limits::default()
    })
}

/// `[[nodes]]` of `config.toml` (its `text` as read) as the daemon starts,
/// then followed as the file changes (`nodes::follow_config`). A config
/// that cannot be read names none (the agents say what is wrong with it).
fn node_configs(
    home: &Home,
    text: &anyhow::Result<Option<String>>,
) -> Vec<shard_platform::nodes::NodeConfig> {
    let text = text.as_ref().map_err(|error| anyhow::anyhow!("{error:#}"));
    let loaded =
        text.and_then(|text| shard_platform::config::Config::parse(&home.path, text.as_deref()));
    loaded.map(|config| config.nodes).unwrap_or_else(|error| {
        tracing::warn!(error = %format!("{error:#}"), "config.toml cannot be read; no nodes");
        Vec::new()
    })
}

/// `[[budgets]]` of `config.toml`, read when the daemon starts. A config
/// that cannot be read sets none (the agents say what is wrong with it).
fn budget_rules(home: &Home) -> Vec<shard_platform::limits::BudgetRule> {
    let loaded = shard_platform::config::Config::load(&home.path);
    loaded.map(|config| config.budgets).unwrap_or_else(|error| {
        tracing::warn!(error = %format!("{error:#}"), "config.toml cannot be read; no budgets");
        Vec::new()
    })
}

/// `[step_up]` of `config.toml` in this daemon's mode: `remote` (the
/// default) guards allows in the remote modes only. A config that cannot be
/// read leaves the default in force (the agents say what is wrong with it).
fn step_up(home: &Home, config: &WebConfig) -> Option<crate::agents::approvals::StepUp> {
    use shard_platform::config::{StepUpConfig, StepUpWhen};
    let chosen = shard_platform::config::Config::load(&home.path).map(|loaded| loaded.step_up).unwrap_or_else(|error| {
        tracing::warn!(error = %format!("{error:#}"), "config.toml cannot be read; step-up keeps its defaults");
        StepUpConfig::default()
    });
    let applies = match chosen.when {
        StepUpWhen::Always => true,
        StepUpWhen::Remote => config.public_host.is_some(),
        StepUpWhen::Never => false,
    };
    applies.then_some(crate::agents::approvals::StepUp {
        tools: chosen.tools,
        writes_outside_cwd: chosen.writes_outside_cwd,
        places: crate::agents::sensitive::Places::new(
            &home.path,
            std::env::var_os("HOME").map(std::path::PathBuf::from).as_deref(),
        ),
    })
}

/// What the web side is built from.
struct WebParts<'a> {
    auth: Arc<Auth>,
    pushes: Pushes,
    hub: &'a Arc<Hub>,
    daemon: &'a Arc<dyn Daemon>,
    audit: Arc<Audit>,
    config: WebConfig,
    local: SocketAddr,
}

/// The web side's state: checks, limits and the connection budget.
fn web_state(parts: WebParts<'_>, args: &DaemonArgs) -> Arc<crate::web::Web> {
    let WebParts { auth, pushes, hub, daemon, audit, config, local } = parts;
    let Pushes { push, notifier, actions } = pushes;
    super::listen::raise_open_files(args.max_connections);
    let max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    let (expected_host, allowed_origins) = match &config.public_host {
        Some(host) => (host.clone(), config.allowed_origins.clone()),
        // §4.1.1: the implicit loopback origin is the only entry.
        None => (local.to_string(), vec![format!("http://{local}")]),
    };
    let origin = config.public_origin(local);
    let (config_host, origin_for_passkeys) = (config.public_host.clone(), origin.clone());
    let allowed_for_passkeys = allowed_origins.clone();
    Arc::new(crate::web::Web {
        auth,
        origin,
        hub: hub.clone(),
        daemon: daemon.clone(),
        audit,
        config,
        expected_host,
        allowed_origins,
        connections: Arc::new(Semaphore::new(max_connections)),
        ping_interval: Duration::from_secs(args.ws_ping_interval),
        limits: Limits::default(),
        credential_failures: Limiter::new(CREDENTIAL_FAILURES_PER_MINUTE, Duration::from_secs(60)),
        session_sockets: crate::web::ws::SessionSockets::new(
            usize::try_from(args.max_session_connections).unwrap_or(usize::MAX),
        ),
        push,
        notifier,
        actions,
        passkeys: crate::web::passkey::Passkeys::new(
            crate::web::passkey::rp_id(config_host.as_deref()).as_deref(),
            &origin_for_passkeys,
            &allowed_for_passkeys,
        ),
    })
}
