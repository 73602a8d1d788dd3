//! `shard daemon`'s flags (CONTRACT.md "Command line").

use crate::agents::host::JournalLimits;
use crate::jobs::JobLimits;
use crate::search::SearchLimits;
use crate::web::config::WebArgs;

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
