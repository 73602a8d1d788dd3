//! The daemon's life: take `$SHARD_HOME`, load the security store and the
//! registry, open the unix socket and the HTTP port, announce, serve, and on
//! shutdown stop every agent process before exiting.
//!
//! A SIGTERM or SIGINT (a service manager, Ctrl-C) stops now: every client
//! is closed at once (a WebSocket hears 1001, going away), every agent gets
//! its own SIGTERM, aborts its turn, flushes its session log and exits, and
//! the daemon exits as soon as they have (a tree still there after the kill
//! grace, [`KILL_GRACE`], is killed). `daemon.shutdown` drains first:
//! active turns get [`DRAIN_GRACE`] to finish while their clients watch,
//! then it stops the same way. A second signal, or `force`, kills every
//! agent's process tree at once.
//!
//! [`KILL_GRACE`]: crate::agents::host::process::KILL_GRACE

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agents::host::Context as HostContext;
use crate::agents::host::{JournalLimits, ShutdownMode};
use crate::agents::registry::Registry;
use crate::agents::runtime::Spawners;
use crate::agents::runtime::acp::AcpSpawner;
use crate::agents::runtime::stdio::ProcessSpawner;
use crate::agents::usage::UsageBook;
use crate::clients::Limits;
use crate::clients::hub::Hub;
use crate::commands::{CommandError, Daemon};
use crate::home::Home;
use crate::jobs::{JobLimits, Jobs};
use crate::search::{Search, SearchLimits};
use crate::web::audit::Audit;
use crate::web::auth::Auth;
use crate::web::config::{WebArgs, WebConfig};
use crate::web::limiter::Limiter;
use crate::workspaces::Workspaces;
use serde_json::json;
use shard_protocol::WireError;
use shard_protocol::orchestrator::{BrowserSession, RevokeSession, StatsResult};
use shard_protocol::types::RuntimeState;

/// Presentations of a dead credential at `/bootstrap` or `/ws` a minute
/// from one client before it is answered 429 (CONTRACT.md): valid ones are
/// never counted, so a tab reconnecting often is never limited.
const CREDENTIAL_FAILURES_PER_MINUTE: usize = 10;
/// On `daemon.shutdown`, how long active turns get to finish before their
/// agents are stopped.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// Once every client is told the daemon is going, how long their
/// connections get to send the last words and end: each write, the close
/// frame included, has its own deadline well within this.
const CLIENTS_GRACE: Duration = Duration::from_secs(3);
/// How long the HTTP server gets to finish the requests it is answering.
const HTTP_GRACE: Duration = Duration::from_secs(5);

/// `shard daemon`'s flags (CONTRACT.md "Command line").
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonArgs {
    #[command(flatten)]
    pub web: WebArgs,
    /// Stop an agent's process after this many seconds idle (or in error);
    /// it is restored on attach or new work.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub idle_runtime_timeout: u64,
    /// How long a question stays open once nobody is attached to answer it,
    /// before it is denied.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub headless_timeout: u64,
    /// Seconds between WebSocket pings; a client silent for 2.5 intervals is
    /// dropped.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub ws_ping_interval: u64,
    /// Browser (WebSocket) connections served at once; local (unix socket)
    /// clients have 64 slots of their own, so `shard enroll` and `shard
    /// sessions` always get through. An idle one costs about 13 KB of
    /// memory and one file descriptor (docs/PERFORMANCE.md, S4).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Browser connections one session may hold at once (a tab holds one),
    /// so that one browser cannot take every slot of --max-connections.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_session_connections: u32,
    /// How long one subagent run may take before it is stopped and marked
    /// `timed_out`.
    #[arg(long, value_name = "SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub subagent_run_timeout: u64,
    /// Events of each agent kept for clients that resume from a cursor
    /// (`agent.attach`'s `after_seq`); an older cursor gets a fresh `sync`.
    #[arg(long, value_name = "N", default_value_t = JournalLimits::default().events, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub journal_events: usize,
    /// Bytes of each agent's events kept for resumes.
    #[arg(long, value_name = "BYTES", default_value_t = JournalLimits::default().bytes, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub journal_bytes: usize,
    /// Subagent runs one parent may have queued or running at once.
    #[arg(long, value_name = "N", default_value_t = JobLimits::default().active_per_parent, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub subagent_max_active_per_parent: usize,
    /// Subagent runs queued or running at once, all parents together.
    #[arg(long, value_name = "N", default_value_t = JobLimits::default().active, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub subagent_max_active: usize,
    /// Job records kept per parent; the oldest ended ones go first.
    #[arg(long, value_name = "N", default_value_t = JobLimits::default().kept_per_parent, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub subagent_max_jobs_per_parent: usize,
    /// Job records kept, all parents together.
    #[arg(long, value_name = "N", default_value_t = JobLimits::default().kept, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub subagent_max_jobs: usize,
    /// Messages the search index keeps; past it, the oldest are evicted.
    #[arg(long, value_name = "N", default_value_t = SearchLimits::default().messages, value_parser = clap::value_parser!(u64).range(1..))]
    pub search_max_messages: u64,
    /// Bytes of message text the search index keeps (the file is about
    /// twice that); past it, the oldest messages are evicted.
    #[arg(long, value_name = "BYTES", default_value_t = SearchLimits::default().bytes, value_parser = clap::value_parser!(u64).range(1024..))]
    pub search_max_bytes: u64,
    /// For tests only: agents' egress proxy finds NAME at IP (`NAME=IP`,
    /// as if DNS said so), so that a test can name a server on this
    /// machine as an agent would name a host.
    #[arg(long, hide = true, value_name = "NAME=IP", value_parser = crate::web::config::name_at_address)]
    pub egress_resolve: Vec<(String, std::net::IpAddr)>,
}

/// Browser connections by default: a thousand idle tabs (S4) fit, in about
/// 13 MB.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// Descriptors the daemon needs beside one per browser connection: local
/// clients, three pipes per running agent and its event journal while its
/// host is awake, files, listeners.
const SPARE_DESCRIPTORS: u64 = 1024;

/// Raises the soft limit on open files to the hard one, as far as the
/// connections asked for need: the usual soft default (1024) would refuse
/// connections long before `--max-connections`. Warns if even the hard
/// limit is too low.
fn raise_open_files(max_connections: u32) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let wanted = u64::from(max_connections) + SPARE_DESCRIPTORS;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    let target = wanted.min(hard);
    if target > soft
        && let Err(problem) = setrlimit(Resource::RLIMIT_NOFILE, target, hard)
    {
        tracing::warn!(%problem, soft, "cannot raise the open-files limit");
    }
    if hard < wanted {
        tracing::warn!(
            limit = hard,
            wanted,
            "the open-files limit is below what --max-connections needs: connections will be refused earlier"
        );
    }
}

/// Prints one line on stdout, where scripts read them (logs go to stderr).
fn announce(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

struct Shard {
    registry: Arc<Registry>,
    jobs: Arc<Jobs>,
    workspaces: Arc<Workspaces>,
    auth: Arc<Auth>,
    hub: Arc<Hub>,
    audit: Arc<Audit>,
    origin: String,
    /// Cancelled once a shutdown was asked for, and how.
    stop: Stop,
}

impl Daemon for Shard {
    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn jobs(&self) -> &Arc<Jobs> {
        &self.jobs
    }

    fn workspaces(&self) -> &Arc<Workspaces> {
        &self.workspaces
    }

    fn enroll(&self) -> String {
        let url = format!("{}/#enroll={}", self.origin, self.auth.new_code());
        announce(&format!("enroll: {url}"));
        url
    }

    fn shutdown(&self, force: bool) {
        if force {
            self.stop.force.cancel();
        } else {
            self.stop.drain.cancel();
        }
    }

    fn sessions(&self) -> Vec<BrowserSession> {
        self.auth
            .list()
            .into_iter()
            .map(|view| BrowserSession {
                connections: self.hub.session_connections(&view.session_id),
                session_id: view.session_id,
                principal_id: view.principal_id,
                created_at: view.created_at,
                last_seen_at: view.last_seen_at,
                expires_at: view.expires_at,
                push: view.push,
            })
            .collect()
    }

    fn stats(&self) -> StatsResult {
        let agents = self.registry.list();
        let running =
            agents.iter().filter(|agent| agent.runtime_state == RuntimeState::Running).count();
        StatsResult {
            tasks: tokio::runtime::Handle::current().metrics().num_alive_tasks() as u64,
            connections: u32::try_from(self.hub.count()).unwrap_or(u32::MAX),
            agents: u32::try_from(agents.len()).unwrap_or(u32::MAX),
            running_agents: u32::try_from(running).unwrap_or(u32::MAX),
            awake_agents: u32::try_from(self.registry.awake()).unwrap_or(u32::MAX),
        }
    }

    fn disconnect(&self, target: RevokeSession) -> u32 {
        let session = match &target {
            RevokeSession::One(id) => Some(id.as_str()),
            RevokeSession::All => None,
        };
        self.hub.close_browsers(session, "disconnected by the daemon; reconnect")
    }

    fn revoke(&self, target: RevokeSession) -> Result<Vec<String>, WireError> {
        let revoked = match target {
            RevokeSession::All => self.auth.revoke_all().map_err(CommandError::from)?,
            RevokeSession::One(id) => {
                if !self.auth.revoke(&id).map_err(CommandError::from)? {
                    return Err(CommandError::NoBrowserSession(id).into());
                }
                vec![id]
            }
        };
        for id in &revoked {
            self.hub.close_session(id, "session revoked");
            self.audit.record(
                "session_revoked",
                json!({"session_id": id, "by": "shard sessions revoke"}),
            );
        }
        Ok(revoked)
    }

    fn presence(&self, connection: crate::agents::SubscriberId, visible: bool) {
        self.hub.set_visible(connection, visible);
    }
}

/// Runs the daemon until a signal or `daemon.shutdown`. The configuration is
/// validated before anything is bound.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let config = WebConfig::from_args(&args.web)?;
    let home_path = shard_platform::config::shard_home()?;
    let home = Home::open(&home_path)?;
    // What an agent's tools are running when the agent is killed from
    // outside comes to the daemon, which kills it (agents::host::process).
    shard_platform::process_tree::become_subreaper().context("cannot become a subreaper")?;
    let listener = listen_as_before(&home, config.bind)
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let socket = crate::clients::unix::bind(&home.join("daemon.sock"))?;
    let stop = Stop::new();
    tokio::spawn(on_signals(stop.clone()));
    run(home, listener, socket, args, config, stop).await
}

/// How the daemon is asked to stop, gentlest first. Each token is a child
/// of the next: asking for a stronger stop asks for the gentler ones too,
/// so `drain` is cancelled by any shutdown.
#[derive(Clone)]
pub struct Stop {
    /// `daemon.shutdown`: active turns may finish, within [`DRAIN_GRACE`].
    pub drain: CancellationToken,
    /// SIGTERM/SIGINT: every agent stops now, the agent's own way.
    pub terminate: CancellationToken,
    /// A second signal, or `force`: every agent's tree is killed at once.
    pub force: CancellationToken,
}

impl Stop {
    pub fn new() -> Self {
        let force = CancellationToken::new();
        let terminate = force.child_token();
        let drain = terminate.child_token();
        Self { drain, terminate, force }
    }
}

impl Default for Stop {
    fn default() -> Self {
        Self::new()
    }
}

pub async fn run(
    home: Home,
    listener: TcpListener,
    socket: tokio::net::UnixListener,
    args: DaemonArgs,
    config: WebConfig,
    stop: Stop,
) -> anyhow::Result<()> {
    let local = listener.local_addr().context("listener has no local address")?;
    let origin = config.public_origin(local);
    let hub = Arc::new(Hub::default());
    let auth = Arc::new(
        Auth::load(&home.path, config.session_idle, config.session_max_age)?
            .with_code_ttl(config.enroll_code_ttl),
    );
    let audit = Arc::new(Audit::open(&home.path).context("cannot open the audit log")?);
    record_startup(&audit, &config, &args, local);
    let push = crate::web::push::Push::load(&home.path, args.web.insecure_push_endpoints)?;
    let actions = Arc::new(crate::web::push::actions::Actions::default());
    let sender = crate::web::push::send::Sender::new(
        push.signer(&origin),
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
    let registry =
        Arc::new(Registry::load(host_context(&home, &hub, notifier.clone(), &config, &args)?));
    // In the background: search answers once its thread has opened the
    // index, and finds more as it catches up with the session logs.
    registry.context.search.catch_up(registry.owners());
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
        origin: origin.clone(),
        stop: stop.clone(),
    });
    let daemon: Arc<dyn Daemon> = shard.clone();
    let parts = WebParts {
        auth,
        push,
        notifier,
        actions,
        hub: &hub,
        daemon: &daemon,
        audit,
        config,
        local,
    };
    let web = web_state(parts, &args);
    let limits = web.limits;
    let unix_stop = CancellationToken::new();
    tokio::spawn(crate::web::enforce_expiry(web.clone(), unix_stop.clone()));
    let app = crate::web::router(local, web);
    tokio::spawn(crate::clients::unix::serve(
        socket,
        daemon.clone(),
        hub.clone(),
        limits,
        unix_stop.clone(),
    ));

    announce(&format!("listening on http://{local}"));
    daemon.enroll();
    tracing::info!(%local, home = %home.path.display(), "daemon ready");

    let http_stop = CancellationToken::new();
    let server = tokio::spawn(serve_http(listener, app, http_stop.clone()));
    stop.drain.cancelled().await;
    tracing::info!(
        terminate = stop.terminate.is_cancelled(),
        force = stop.force.is_cancelled(),
        "shutting down"
    );
    unix_stop.cancel();
    // Runs this shutdown ends are not over: the next start marks them
    // interrupted, never failed or replayed.
    shard.jobs.shutting_down();
    drain(&shard, &stop).await;
    // Nothing is left for a client to watch: each hears now that the
    // daemon is going (the page stops saying "connected"), and none can
    // come in, while the agents stop.
    http_stop.cancel();
    hub.close_all(GOING_AWAY);
    stop_agents(&shard, &stop).await;
    if tokio::time::timeout(CLIENTS_GRACE, hub.all_closed()).await.is_err() {
        tracing::warn!("client connections still open after the grace; dropping them");
    }
    let _ = tokio::time::timeout(HTTP_GRACE, server).await;
    let _ = std::fs::remove_file(home.join("daemon.sock"));
    tracing::info!("daemon stopped");
    drop(home);
    Ok(())
}

/// The last words every client hears.
const GOING_AWAY: &str = "the daemon is shutting down";

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
    Ok(Arc::new(HostContext {
        home: home.path.clone(),
        spawner: Arc::new(Spawners {
            builtin: ProcessSpawner {
                exe: exe.clone(),
                home: home.path.clone(),
                processes: processes.clone(),
            },
            acp: AcpSpawner { exe, home: home.path.clone(), processes: processes.clone() },
            home: home.path.clone(),
            sandbox: sandbox.clone(),
        }),
        sandbox,
        broadcast: hub.clone(),
        notices,
        step_up: step_up(home, config),
        delegation: Arc::default(),
        idle_timeout: Duration::from_secs(args.idle_runtime_timeout),
        headless_timeout: Duration::from_secs(args.headless_timeout),
        journal: JournalLimits { events: args.journal_events, bytes: args.journal_bytes },
        usage: Arc::new(UsageBook::new(&home.path)),
        processes,
        search: Search::start(
            &home.path,
            SearchLimits { messages: args.search_max_messages, bytes: args.search_max_bytes },
        ),
    }))
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
    push: crate::web::push::Push,
    notifier: Arc<crate::web::push::notify::Notifier>,
    actions: Arc<crate::web::push::actions::Actions>,
    hub: &'a Arc<Hub>,
    daemon: &'a Arc<dyn Daemon>,
    audit: Arc<Audit>,
    config: WebConfig,
    local: SocketAddr,
}

/// The web side's state: checks, limits and the connection budget.
fn web_state(parts: WebParts<'_>, args: &DaemonArgs) -> Arc<crate::web::Web> {
    let WebParts { auth, push, notifier, actions, hub, daemon, audit, config, local } = parts;
    raise_open_files(args.max_connections);
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

/// Serves HTTP until `stop`.
async fn serve_http(
    listener: TcpListener,
    app: axum::Router,
    stop: CancellationToken,
) -> std::io::Result<()> {
    // Events are small and streamed: no Nagle delay on any of them.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

/// `daemon.shutdown`: lets active turns finish while their clients watch,
/// for [`DRAIN_GRACE`] at most, and only until a signal asks for more.
async fn drain(shard: &Shard, stop: &Stop) {
    if stop.terminate.is_cancelled() {
        return;
    }
    tokio::select! {
        () = shard.registry.shutdown(ShutdownMode::Drain) => {}
        () = stop.terminate.cancelled() => {}
        () = tokio::time::sleep(DRAIN_GRACE) => {
            tracing::info!("active turns did not finish in time; stopping their agents");
        }
    }
}

/// Stops every agent still running: by its own SIGTERM (it aborts its
/// turn, flushes its session log and exits; a tree still there after the
/// kill grace is killed), or at once on a second signal or `force`.
async fn stop_agents(shard: &Shard, stop: &Stop) {
    if !stop.force.is_cancelled() {
        tokio::select! {
            () = shard.registry.shutdown(ShutdownMode::Terminate) => return,
            () = stop.force.cancelled() => {}
        }
    }
    tracing::warn!("killing every agent");
    shard.registry.shutdown(ShutdownMode::Kill).await;
}

/// Where a home keeps the port its daemon last listened on.
const PORT_FILE: &str = "port";

/// The port recorded in the home, if any.
fn remembered_port(home: &Home) -> Option<u16> {
    let text = std::fs::read_to_string(home.join(PORT_FILE)).ok()?;
    text.trim().parse().ok().filter(|&port| port != 0)
}

/// Binds `addr`. With port 0, first the port this home last listened on:
/// a browser keeps its secret in the storage of one origin, port included
/// (docs/SECURITY.md), so a daemon that came back on another port would
/// leave every enrolled browser behind. Only when that port is taken is a
/// fresh free one picked. Whatever port is bound is recorded for next time.
fn listen_as_before(home: &Home, addr: SocketAddr) -> std::io::Result<TcpListener> {
    let remembered = remembered_port(home);
    let listener = match remembered.filter(|_| addr.port() == 0) {
        Some(port) => listen(SocketAddr::new(addr.ip(), port)).or_else(|error| {
            tracing::warn!(
                port,
                %error,
                "the port this home last listened on is taken: browsers enrolled there must enroll again on the new one"
            );
            listen(addr)
        })?,
        None => listen(addr)?,
    };
    let port = listener.local_addr()?.port();
    if remembered != Some(port) {
        let recorded =
            crate::home::write_private(&home.join(PORT_FILE), format!("{port}\n").as_bytes());
        if let Err(error) = recorded {
            tracing::warn!(%error, "cannot record the port in the home");
        }
    }
    Ok(listener)
}

/// A listening socket with `SO_REUSEADDR`, so that a restarted daemon gets
/// its port back while connections of the previous one linger in TIME_WAIT.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The first SIGINT (Ctrl-C) or SIGTERM stops now, cleanly; the second
/// kills.
async fn on_signals(stop: Stop) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    for token in [stop.terminate, stop.force] {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        token.cancel();
    }
}
