//! Subagent background jobs (PROTOCOL.md §10.3, docs/JOBS.md): the catalog
//! of durable job records and the coordinator that plays their runs out.
//!
//! A parent asks (`subagent.create`); the coordinator checks the whole
//! request, reserves ids and aliases, writes the child manifests and the
//! job record, answers, and only then starts the runs, each in its own
//! driver task: the child's host carries the task out as one supervised
//! turn ([`crate::agents::host::run`]) and reports back. Every transition
//! is written before it is announced (`subagent_run_changed`) and before
//! waiters wake; a terminal one is also reported into the parent's
//! conversation. A run holds a lease on its child while it is queued,
//! starting or active: connections consult [`Jobs::lease`] before handing
//! a person's command to a leased child.
//!
//! Ownership never crosses parents: every handle resolves within the
//! asking parent's own jobs and children, and anything else is NOT_FOUND.
//! Task text lives in the private record only.
//!
//! [`Jobs`] is the coordinator; its parts live one noun to a file:
//! `record.rs` (the durable records), `catalog.rs` (the records in memory,
//! handles, limits, restart reconciliation), `lease.rs` (which run holds
//! which child), `create.rs` (`subagent.create` and `subagent.relaunch`),
//! `commands.rs` (status, wait, steer and stop), `driver.rs` (a job's runs
//! from `queued` to their end) and `report.rs` (what the parent is told);
//! `error.rs` holds every reason a command is refused and how it reads on
//! the wire.

mod catalog;
mod commands;
mod create;
mod driver;
mod error;
mod lease;
pub mod record;
mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shard_protocol::subagent::RunState;
use shard_protocol::{Envelope, ServerMessage};
use tokio::sync::watch;
use unicode_normalization::UnicodeNormalization;

use self::catalog::Catalog;
use self::driver::Stops;
pub use self::error::{JobError, TextField};
use self::lease::Leases;
use self::record::{JobRecord, RunRecord};
use crate::agents::Wire;
use crate::agents::manifest::Manifest;
use crate::agents::registry::Registry;

/// The most bytes of one task (or relaunch task, or steer message).
pub const MAX_TASK: usize = 256 * 1024;

/// How much the coordinator takes on: a run's time, the runs queued or
/// running at once (per parent and in all), and the job records kept.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    pub run_timeout: Duration,
    pub active_per_parent: usize,
    pub active: usize,
    pub kept_per_parent: usize,
    pub kept: usize,
}

impl Default for JobLimits {
    fn default() -> Self {
        Self {
            run_timeout: Duration::from_secs(3600),
            active_per_parent: 16,
            active: 64,
            kept_per_parent: 200,
            kept: 2000,
        }
    }
}

pub struct Jobs {
    registry: Arc<Registry>,
    home: PathBuf,
    catalog: tokio::sync::Mutex<Catalog>,
    /// Bumped after every persisted transition: waiters watch it.
    changed: watch::Sender<u64>,
    /// Leased agents: which run holds each.
    leases: Leases,
    /// Each driven run's stop signal.
    stops: Stops,
    /// The daemon is stopping: ends caused by that are not recorded, and
    /// the restart marks those runs `interrupted`.
    stopping: AtomicBool,
    limits: JobLimits,
}

fn not_found(handle: &str, parent: &str) -> JobError {
    JobError::NotFound { handle: handle.to_owned(), parent: parent.to_owned() }
}

/// An alias as handles compare it: NFKC, lower case.
fn fold(alias: &str) -> String {
    alias.nfkc().collect::<String>().to_lowercase()
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", crate::id::random_hex())
}

fn state_name(state: RunState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn check_task(text: &str, field: TextField) -> Result<(), JobError> {
    if text.trim().is_empty() {
        return Err(JobError::EmptyText { field });
    }
    if text.len() > MAX_TASK {
        return Err(JobError::TextTooLong { field, max: MAX_TASK });
    }
    Ok(())
}

impl Jobs {
    /// Loads every job record; runs the last daemon left unfinished become
    /// `interrupted` (never replayed), and chain steps after them
    /// `cancelled`.
    pub fn load(registry: Arc<Registry>, limits: JobLimits) -> Arc<Self> {
        let home = registry.context.home.clone();
        let catalog = Catalog::restore(&home);
        Arc::new(Self {
            registry,
            home,
            catalog: tokio::sync::Mutex::new(catalog),
            changed: watch::channel(0).0,
            leases: Leases::default(),
            stops: Stops::default(),
            stopping: AtomicBool::new(false),
            limits,
        })
    }

    /// The daemon is shutting down: what its stop does to runs is not
    /// recorded as their end.
    pub fn shutting_down(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Writes a job record (off the async workers), logging a failure: the
    /// transition stands in memory either way.
    async fn persist(&self, job: &JobRecord) -> Result<(), JobError> {
        let job = job.clone();
        let home = self.home.clone();
        tokio::task::spawn_blocking(move || job.save(&home)).await?.map_err(|source| {
            tracing::error!(error = %source, "cannot write a job record");
            JobError::NotRecorded { source }
        })
    }

    /// After a persisted transition: tell every connection, wake waiters.
    fn announce(&self, job: &JobRecord, run: &RunRecord, previous: Option<RunState>) {
        let event = ServerMessage::SubagentRunChanged(run.changed(job, previous));
        self.registry.context.broadcast.broadcast(&Wire::from(Envelope::new(event).to_json()));
        self.changed.send_modify(|version| *version += 1);
    }

    fn parent(&self, parent: &str) -> Result<Manifest, JobError> {
        self.registry
            .manifest(parent)
            .ok_or_else(|| JobError::NoAgent { agent_id: parent.to_owned() })
    }
}
