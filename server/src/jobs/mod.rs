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

pub mod record;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shard_protocol::agent::{Prompt, StreamingBehavior};
use shard_protocol::orchestrator::AgentCreate;
use shard_protocol::subagent::{
    AggregateState, CancelledRun, JobStrategy, MixedTag, RunHandle, RunState, RunUsage,
    SteerStatus, SubagentAgent, SubagentCreate, SubagentCreateResult, SubagentRelaunch,
    SubagentRelaunchResult, SubagentStatus, SubagentStatusResult, SubagentSteer,
    SubagentSteerResult, SubagentStop, SubagentStopResult, SubagentWait, SubagentWaitResult,
    WaitMode,
};
use shard_protocol::{ClientMessage, Envelope, ErrorCode, ServerMessage, WireError};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use unicode_normalization::UnicodeNormalization;

use self::record::{JobRecord, RECORD_VERSION, RunRecord, SteerRecord};
use crate::agents::host::HostCommand;
use crate::agents::host::run::{RUN_EVENTS, RunEnd, RunEvent};
use crate::agents::manifest::Manifest;
use crate::agents::registry::{Registry, alias_problem};
use crate::agents::{Subscriber, SubscriberId, Wire};

/// The most bytes of one task (or relaunch task, or steer message).
pub const MAX_TASK: usize = 256 * 1024;
/// Jobs `subagent.status` lists without targets.
const STATUS_JOBS: usize = 50;
/// The longest a `subagent.wait` timeout is taken at (a year).
const MAX_WAIT: f64 = 365.0 * 24.0 * 3600.0;

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
    /// Leased agents: agent id → the run holding it.
    leases: Mutex<HashMap<String, String>>,
    /// Each driven run's stop signal, by run id.
    stops: Mutex<HashMap<String, CancellationToken>>,
    /// The daemon is stopping: ends caused by that are not recorded, and
    /// the restart marks those runs `interrupted`.
    stopping: AtomicBool,
    limits: JobLimits,
}

#[derive(Default)]
struct Catalog {
    jobs: BTreeMap<String, JobRecord>,
    /// run id → job id.
    runs: HashMap<String, String>,
}

/// What a handle resolved to, within one parent.
enum Target {
    Job(String),
    Run { job_id: String, run_id: String },
    Agent(String),
}

fn not_found(handle: &str, parent: &str) -> WireError {
    WireError::new(ErrorCode::NotFound, format!("`{parent}` has no job, run or child `{handle}`"))
}

fn invalid(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::InvalidRequest, message)
}

fn conflict(message: impl Into<String>) -> WireError {
    WireError::new(ErrorCode::Conflict, message)
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

impl Catalog {
    fn run(&self, run_id: &str) -> Option<(&JobRecord, &RunRecord)> {
        let job = self.jobs.get(self.runs.get(run_id)?)?;
        Some((job, job.runs.iter().find(|run| run.run_id == run_id)?))
    }

    fn run_mut(&mut self, job_id: &str, run_id: &str) -> Option<&mut RunRecord> {
        self.jobs.get_mut(job_id)?.runs.iter_mut().find(|run| run.run_id == run_id)
    }

    /// The agent's queued or active run, else its latest one.
    fn run_of_agent(&self, agent_id: &str) -> Option<(&JobRecord, &RunRecord)> {
        let mut latest: Option<(&JobRecord, &RunRecord)> = None;
        for job in self.jobs.values() {
            for run in job.runs.iter().filter(|run| run.agent_id == agent_id) {
                if !run.state.is_terminal() {
                    return Some((job, run));
                }
                let newer = latest.is_none_or(|(other, _)| {
                    (job.created_at, &job.job_id) > (other.created_at, &other.job_id)
                });
                if newer {
                    latest = Some((job, run));
                }
            }
        }
        latest
    }

    fn insert(&mut self, job: JobRecord) {
        for run in &job.runs {
            self.runs.insert(run.run_id.clone(), job.job_id.clone());
        }
        self.jobs.insert(job.job_id.clone(), job);
    }
}

impl Jobs {
    /// Loads every job record; runs the last daemon left unfinished become
    /// `interrupted` (never replayed), and chain steps after them
    /// `cancelled`.
    pub fn load(registry: Arc<Registry>, limits: JobLimits) -> Arc<Self> {
        let home = registry.context.home.clone();
        let mut catalog = Catalog::default();
        let now = crate::clock::now_ms();
        for mut job in JobRecord::load_all(&home) {
            if reconcile(&mut job, now) {
                if let Err(error) = job.save(&home) {
                    tracing::error!(job = %job.job_id, %error, "cannot record the interrupted runs");
                }
            }
            // No run is queued after a restart: no task is needed again.
            for run in &mut job.runs {
                run.task = String::new();
            }
            catalog.insert(job);
        }
        Arc::new(Self {
            registry,
            home,
            catalog: tokio::sync::Mutex::new(catalog),
            changed: watch::channel(0).0,
            leases: Mutex::new(HashMap::new()),
            stops: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            limits,
        })
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.leases.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stops(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.stops.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The run holding `agent_id`'s lease, if one does.
    pub fn lease(&self, agent_id: &str) -> Option<String> {
        self.leases().get(agent_id).cloned()
    }

    /// The daemon is shutting down: what its stop does to runs is not
    /// recorded as their end.
    pub fn shutting_down(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Writes a job record (off the async workers), logging a failure: the
    /// transition stands in memory either way.
    async fn persist(&self, job: &JobRecord) -> Result<(), WireError> {
        let job = job.clone();
        let home = self.home.clone();
        let saved = tokio::task::spawn_blocking(move || job.save(&home)).await;
        match saved {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => {
                tracing::error!(%error, "cannot write a job record");
                Err(WireError::new(
                    ErrorCode::InternalError,
                    format!("cannot write the job record: {error:#}"),
                ))
            }
            Err(error) => Err(WireError::new(ErrorCode::InternalError, error.to_string())),
        }
    }

    /// After a persisted transition: tell every connection, wake waiters.
    fn announce(&self, job: &JobRecord, run: &RunRecord, previous: Option<RunState>) {
        let event = ServerMessage::SubagentRunChanged(run.changed(job, previous));
        self.registry.context.broadcast.broadcast(&Wire::from(Envelope::new(event).to_json()));
        self.changed.send_modify(|version| *version += 1);
    }

    /// Resolves a handle within `parent`'s jobs and children: typed ids
    /// exactly first, then aliases.
    fn resolve(&self, catalog: &Catalog, parent: &str, handle: &str) -> Result<Target, WireError> {
        if handle.starts_with("job-") {
            return match catalog.jobs.get(handle) {
                Some(job) if job.parent_agent_id == parent => Ok(Target::Job(handle.to_owned())),
                _ => Err(not_found(handle, parent)),
            };
        }
        if handle.starts_with("run-") {
            return match catalog.run(handle) {
                Some((job, run)) if job.parent_agent_id == parent => {
                    Ok(Target::Run { job_id: job.job_id.clone(), run_id: run.run_id.clone() })
                }
                _ => Err(not_found(handle, parent)),
            };
        }
        if handle.starts_with("agent-") {
            return match self.registry.manifest(handle) {
                Some(child) if child.parent_agent_id.as_deref() == Some(parent) => {
                    Ok(Target::Agent(handle.to_owned()))
                }
                _ => Err(not_found(handle, parent)),
            };
        }
        let folded = fold(handle);
        self.registry
            .children(parent)
            .into_iter()
            .find(|child| child.alias.as_deref().is_some_and(|alias| fold(alias) == folded))
            .map(|child| Target::Agent(child.agent_id))
            .ok_or_else(|| not_found(handle, parent))
    }

    /// The runs a handle stands for, as of now: a job's runs, one run, or
    /// an agent's current (else latest) run.
    fn runs_of(
        &self,
        catalog: &Catalog,
        parent: &str,
        handle: &str,
    ) -> Result<Vec<(String, String)>, WireError> {
        Ok(match self.resolve(catalog, parent, handle)? {
            Target::Job(job_id) => {
                let job = &catalog.jobs[&job_id];
                job.runs.iter().map(|run| (job_id.clone(), run.run_id.clone())).collect()
            }
            Target::Run { job_id, run_id } => vec![(job_id, run_id)],
            Target::Agent(agent_id) => match catalog.run_of_agent(&agent_id) {
                Some((job, run)) => vec![(job.job_id.clone(), run.run_id.clone())],
                None => {
                    return Err(conflict(format!("`{handle}` has never had a run")));
                }
            },
        })
    }

    fn parent(&self, parent: &str) -> Result<Manifest, WireError> {
        self.registry
            .manifest(parent)
            .ok_or_else(|| WireError::new(ErrorCode::NotFound, format!("no agent `{parent}`")))
    }

    /// `subagent.create`.
    pub async fn create(
        self: &Arc<Self>,
        request: SubagentCreate,
    ) -> Result<SubagentCreateResult, WireError> {
        let parent = self.parent(&request.parent_agent_id)?;
        let info = self.registry.info(&parent.agent_id);
        let policy = parent.policy();
        if !parent.may_delegate() {
            return Err(conflict(format!(
                "`{}` is at depth {} and may launch no subagents (launch policy maxDepth {})",
                parent.agent_id, parent.depth, policy.max_depth
            )));
        }
        if request.tasks.len() > policy.max_tasks as usize {
            return Err(invalid(format!(
                "a job holds at most {} tasks (launch policy maxTasks)",
                policy.max_tasks
            )));
        }
        if request.strategy == JobStrategy::Single && request.tasks.len() != 1 {
            return Err(invalid("strategy `single` takes exactly one task"));
        }
        for (index, spec) in request.tasks.iter().enumerate() {
            if let Some(why) = alias_problem(&spec.name) {
                return Err(invalid(format!("task {index}: `name` {why}")));
            }
            check_task(&spec.task, &format!("task {index}: `task`"))?;
        }
        let mode = self.registry.child_mode(&parent, request.mode.clone())?;
        let model = match request.model.clone() {
            Some(model) => Some(self.known_model(model)?),
            None => info.as_ref().and_then(|info| info.model.clone()).or(parent.model.clone()),
        };

        let mut catalog = self.catalog.lock().await;
        self.make_room(&mut catalog, &parent.agent_id, request.tasks.len()).await?;
        let job_id = new_id("job");
        let mut taken: HashSet<String> = self
            .registry
            .children(&parent.agent_id)
            .iter()
            .filter_map(|child| child.alias.as_deref().map(fold))
            .collect();
        let mut runs = Vec::new();
        let mut children = Vec::new();
        let mut pool = parent.names.clone().unwrap_or_default().into_iter();
        for (index, spec) in request.tasks.iter().enumerate() {
            let from_pool = pool.by_ref().find(|alias| !taken.contains(&fold(alias)));
            let (alias, definition_name) = match from_pool {
                Some(alias) => (alias, Some(spec.name.clone())),
                None => (unique_alias(&spec.name, &taken), None),
            };
            taken.insert(fold(&alias));
            let display_name = definition_name.as_ref().map(|name| format!("{name} · {alias}"));
            let agent_id = new_id("agent");
            children.push((
                agent_id.clone(),
                AgentCreate {
                    cwd: parent.cwd.clone(),
                    model: model.clone(),
                    mode: mode.clone(),
                    name: Some(spec.name.clone()),
                    parent_agent_id: Some(parent.agent_id.clone()),
                    system_prompt: Some(brief(&alias, &parent.agent_id)),
                    headless_policy: parent.headless_policy,
                    alias: Some(alias.clone()),
                    definition_name: definition_name.clone(),
                    display_name: display_name.clone(),
                    ..AgentCreate::default()
                },
            ));
            runs.push(RunRecord {
                index: index as u32,
                definition_name,
                display_name,
                ..RunRecord::queued(spec.name.clone(), agent_id, alias, spec.task.clone())
            });
        }
        self.registry.materialize(children).await?;
        let job = JobRecord {
            version: RECORD_VERSION,
            job_id: job_id.clone(),
            parent_agent_id: parent.agent_id.clone(),
            strategy: request.strategy,
            created_at: crate::clock::now_ms(),
            ended_at: None,
            stopped_at: None,
            runs,
        };
        self.persist(&job).await?;
        {
            let mut leases = self.leases();
            for run in &job.runs {
                leases.insert(run.agent_id.clone(), run.run_id.clone());
            }
        }
        for run in &job.runs {
            self.announce(&job, run, None);
        }
        let result = SubagentCreateResult {
            job_id: job_id.clone(),
            strategy: job.strategy,
            runs: job.runs.iter().map(run_handle).collect(),
        };
        catalog.insert(job);
        drop(catalog);
        tokio::spawn(self.clone().drive(job_id));
        Ok(result)
    }

    /// Room for a new job of `runs` runs under `parent`: CONFLICT when the
    /// runs queued or running would pass a cap; the oldest ended job
    /// records go to keep the rest under theirs (CONFLICT when none has
    /// ended).
    async fn make_room(
        &self,
        catalog: &mut Catalog,
        parent: &str,
        runs: usize,
    ) -> Result<(), WireError> {
        let limits = self.limits;
        let active =
            |job: &JobRecord| job.runs.iter().filter(|run| !run.state.is_terminal()).count();
        let mine: usize =
            catalog.jobs.values().filter(|job| job.parent_agent_id == parent).map(active).sum();
        if mine + runs > limits.active_per_parent {
            return Err(conflict(format!(
                "`{parent}` has {mine} subagent runs queued or running and may have at most {} at once; wait for some to end",
                limits.active_per_parent
            )));
        }
        let all: usize = catalog.jobs.values().map(active).sum();
        if all + runs > limits.active {
            return Err(conflict(format!(
                "the daemon has {all} subagent runs queued or running and takes at most {} at once; wait for some to end",
                limits.active
            )));
        }
        let ended = |job: &JobRecord| job.runs.iter().all(|run| run.state.is_terminal());
        let mut oldest: Vec<(u64, String, String)> = catalog
            .jobs
            .values()
            .filter(|job| ended(job))
            .map(|job| (job.created_at, job.job_id.clone(), job.parent_agent_id.clone()))
            .collect();
        oldest.sort();
        let mut kept_mine =
            catalog.jobs.values().filter(|job| job.parent_agent_id == parent).count();
        let mut kept = catalog.jobs.len();
        let mut forget = Vec::new();
        for (_, job_id, owner) in &oldest {
            let over_mine = owner == parent && kept_mine >= limits.kept_per_parent;
            if !over_mine && kept < limits.kept {
                continue;
            }
            forget.push(job_id.clone());
            kept -= 1;
            if owner == parent {
                kept_mine -= 1;
            }
            if kept_mine < limits.kept_per_parent && kept < limits.kept {
                break;
            }
        }
        if kept_mine >= limits.kept_per_parent || kept >= limits.kept {
            return Err(conflict(format!(
                "{} job records are kept ({} per parent) and none more has ended; stop or wait for a job first",
                limits.kept, limits.kept_per_parent
            )));
        }
        for job_id in forget {
            if let Some(job) = catalog.jobs.remove(&job_id) {
                for run in &job.runs {
                    catalog.runs.remove(&run.run_id);
                }
                let path = record::jobs_dir(&self.home).join(format!("{job_id}.json"));
                if let Err(error) = tokio::fs::remove_file(&path).await {
                    tracing::warn!(job = %job_id, %error, "cannot remove an old job record");
                }
            }
        }
        Ok(())
    }

    fn known_model(&self, model: String) -> Result<String, WireError> {
        let config = shard_agent::config::Config::load(&self.home)
            .map_err(|error| WireError::new(ErrorCode::InternalError, format!("{error:#}")))?;
        match config.model(&model) {
            Some(_) => Ok(model),
            None => Err(WireError::new(ErrorCode::NotFound, format!("unknown model `{model}`"))),
        }
    }

    /// Plays a job out: its runs side by side (single, parallel) or one
    /// after another, each fed the previous one's final text (chain).
    async fn drive(self: Arc<Self>, job_id: String) {
        let (strategy, run_ids) = {
            let catalog = self.catalog.lock().await;
            let Some(job) = catalog.jobs.get(&job_id) else { return };
            (job.strategy, job.runs.iter().map(|run| run.run_id.clone()).collect::<Vec<_>>())
        };
        if strategy != JobStrategy::Chain {
            let all = run_ids.iter().map(|run_id| self.run_one(&job_id, run_id, None));
            futures_util::future::join_all(all).await;
            return;
        }
        let mut previous = None;
        for run_id in &run_ids {
            match self.run_one(&job_id, run_id, previous.take()).await {
                (RunState::Completed, final_text) => {
                    previous = Some(final_text.unwrap_or_default())
                }
                _ => {
                    self.cancel_rest(&job_id, "an earlier step of the chain did not complete")
                        .await;
                    return;
                }
            }
        }
    }

    /// One run, from `queued` to its end. Returns its final state and text.
    async fn run_one(
        &self,
        job_id: &str,
        run_id: &str,
        previous: Option<String>,
    ) -> (RunState, Option<String>) {
        let stop = CancellationToken::new();
        let claimed = {
            let mut catalog = self.catalog.lock().await;
            let Some(run) = catalog.run_mut(job_id, run_id) else {
                return (RunState::Failed, None);
            };
            if run.state != RunState::Queued {
                return (run.state, run.final_text.clone());
            }
            let now = crate::clock::now_ms();
            run.state = RunState::Starting;
            run.started_at = Some(now);
            let timeout = u64::try_from(self.limits.run_timeout.as_millis()).unwrap_or(u64::MAX);
            run.deadline = Some(now.saturating_add(timeout));
            // The child has the task from here on: it is not kept.
            let task = std::mem::take(&mut run.task);
            let claimed = (run.agent_id.clone(), with_previous(&task, previous.as_deref()));
            self.stops().insert(run_id.to_owned(), stop.clone());
            self.commit_move(&catalog, job_id, run_id, RunState::Queued, false).await;
            claimed
        };
        let (agent_id, task) = claimed;
        let end = self.supervise(job_id, run_id, &agent_id, task, &stop).await;
        self.stops().remove(run_id);
        self.finish(job_id, run_id, end).await
    }

    /// Hands the task to the child's host and follows it to its end,
    /// stopping it when asked or when it runs past the deadline.
    async fn supervise(
        &self,
        job_id: &str,
        run_id: &str,
        agent_id: &str,
        task: String,
        stop: &CancellationToken,
    ) -> Ended {
        let (events, mut reports) = mpsc::channel(RUN_EVENTS);
        let (reply, accepted) = oneshot::channel();
        let command = HostCommand::Run { task, events, reply };
        if self.registry.send_waiting(agent_id, command).await.is_err() {
            return Ended::failed("the child's host is gone");
        }
        match accepted.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Ended::failed(&error.message),
            Err(_) => return Ended::failed("the child's host is gone"),
        }
        let deadline = Instant::now() + self.limits.run_timeout;
        let mut stopping = false;
        let mut timed_out = false;
        loop {
            tokio::select! {
                report = reports.recv() => match report {
                    Some(RunEvent::Started { turn_id }) => self.activate(job_id, run_id, turn_id).await,
                    Some(RunEvent::Ended(end)) => return Ended { end, timed_out },
                    None => return Ended::failed("the child's host is gone"),
                },
                () = stop.cancelled(), if !stopping => {
                    stopping = true;
                    let _ = self.registry.send_waiting(agent_id, HostCommand::StopRun).await;
                }
                () = tokio::time::sleep_until(deadline), if !stopping => {
                    stopping = true;
                    timed_out = true;
                    let _ = self.registry.send_waiting(agent_id, HostCommand::StopRun).await;
                }
            }
        }
    }

    /// `starting → active` once the task's turn has begun.
    async fn activate(&self, job_id: &str, run_id: &str, turn_id: String) {
        let mut catalog = self.catalog.lock().await;
        let Some(run) = catalog.run_mut(job_id, run_id) else { return };
        run.turn_id = Some(turn_id);
        if run.state != RunState::Starting {
            return;
        }
        run.state = RunState::Active;
        self.commit_move(&catalog, job_id, run_id, RunState::Starting, false).await;
    }

    /// Writes the job, then announces its run's move from `previous` (and,
    /// for an end, reports it to the parent).
    async fn commit_move(
        &self,
        catalog: &Catalog,
        job_id: &str,
        run_id: &str,
        previous: RunState,
        report: bool,
    ) {
        let Some(job) = catalog.jobs.get(job_id) else { return };
        let _ = self.persist(job).await;
        if let Some(run) = job.runs.iter().find(|run| run.run_id == run_id) {
            self.announce(job, run, Some(previous));
            if report {
                self.report(job, run);
            }
        }
    }

    /// Records how a run ended, unless a stop already did (or the daemon's
    /// own shutdown ended it: the next start marks it `interrupted`).
    async fn finish(&self, job_id: &str, run_id: &str, ended: Ended) -> (RunState, Option<String>) {
        let Ended { end, timed_out } = ended;
        let state = if timed_out {
            RunState::TimedOut
        } else if end.stopped {
            RunState::Cancelled
        } else if end.error.is_some() {
            RunState::Failed
        } else {
            RunState::Completed
        };
        if state != RunState::Completed && self.stopping.load(Ordering::SeqCst) {
            return (state, None);
        }
        let mut catalog = self.catalog.lock().await;
        let Some(run) = catalog.run_mut(job_id, run_id) else { return (state, None) };
        if run.state.is_terminal() {
            // Stopped already (and reported); the usage still counts.
            let state = run.state;
            if let Some(usage) = &end.usage {
                run.usage = Some(RunUsage { input: usage.input, output: usage.output });
                let job = &catalog.jobs[job_id];
                let _ = self.persist(job).await;
            }
            return (state, None);
        }
        let previous = run.state;
        run.state = state;
        run.ended_at = Some(crate::clock::now_ms());
        run.final_text = end.final_text;
        run.usage = end.usage.map(|usage| RunUsage { input: usage.input, output: usage.output });
        run.error = match state {
            RunState::TimedOut => Some("the run went past its deadline and was stopped".to_owned()),
            RunState::Cancelled => Some("stopped".to_owned()),
            _ => end.error,
        };
        let final_text = run.final_text.clone();
        self.release(job_id, run_id, &mut catalog);
        self.commit_move(&catalog, job_id, run_id, previous, true).await;
        (state, final_text)
    }

    /// A run reached its end: its lease goes, and its job may be over.
    fn release(&self, job_id: &str, run_id: &str, catalog: &mut Catalog) {
        let Some(job) = catalog.jobs.get_mut(job_id) else { return };
        if let Some(run) = job.runs.iter().find(|run| run.run_id == run_id) {
            let mut leases = self.leases();
            if leases.get(&run.agent_id).is_some_and(|holder| holder == run_id) {
                leases.remove(&run.agent_id);
            }
        }
        if job.ended_at.is_none() && job.runs.iter().all(|run| run.state.is_terminal()) {
            job.ended_at = Some(crate::clock::now_ms());
        }
    }

    /// Cancels a job's queued runs (a chain after a step that did not
    /// complete).
    async fn cancel_rest(&self, job_id: &str, why: &str) {
        let mut catalog = self.catalog.lock().await;
        let queued: Vec<String> = catalog.jobs.get(job_id).map_or_else(Vec::new, |job| {
            job.runs
                .iter()
                .filter(|run| run.state == RunState::Queued)
                .map(|run| run.run_id.clone())
                .collect()
        });
        self.cancel(&mut catalog, job_id, &queued, why).await;
    }

    /// Moves runs to `cancelled` (signalling the drivers of running ones),
    /// persists, announces and reports. Returns what was cancelled.
    async fn cancel(
        &self,
        catalog: &mut Catalog,
        job_id: &str,
        run_ids: &[String],
        why: &str,
    ) -> Vec<CancelledRun> {
        let mut moved = Vec::new();
        for run_id in run_ids {
            let Some(run) = catalog.run_mut(job_id, run_id) else { continue };
            if run.state.is_terminal() {
                continue;
            }
            moved.push((run_id.clone(), run.state));
            run.state = RunState::Cancelled;
            run.ended_at = Some(crate::clock::now_ms());
            run.error = Some(why.to_owned());
            if let Some(stop) = self.stops().get(run_id) {
                stop.cancel();
            }
            self.release(job_id, run_id, catalog);
        }
        if moved.is_empty() {
            return Vec::new();
        }
        let job = &catalog.jobs[job_id];
        let _ = self.persist(job).await;
        let mut cancelled = Vec::new();
        for (run_id, previous) in moved {
            let Some(run) = job.runs.iter().find(|run| run.run_id == run_id) else { continue };
            self.announce(job, run, Some(previous));
            self.report(job, run);
            cancelled.push(CancelledRun {
                run_id,
                agent_id: Some(run.agent_id.clone()),
                state: run.state,
            });
        }
        cancelled
    }

    /// The completion report: a structured message into the parent's
    /// conversation, steered into its turn if one is running, else a
    /// prompt that restores and wakes it.
    fn report(&self, job: &JobRecord, run: &RunRecord) {
        let text = report_text(job, run);
        let prompt = Prompt {
            message: text,
            images: None,
            // Steer: into the running turn; when idle, the next turn.
            streaming_behavior: Some(StreamingBehavior::Steer),
            // A person taking back their own steer never takes this.
            pinned: Some(true),
        };
        let command = HostCommand::Forward {
            subscriber: Arc::new(Discard),
            id: None,
            message: ClientMessage::Prompt(prompt),
        };
        let registry = self.registry.clone();
        let parent = job.parent_agent_id.clone();
        tokio::spawn(async move {
            if registry.send_waiting(&parent, command).await.is_err() {
                tracing::warn!(%parent, "cannot deliver a completion report");
            }
        });
    }

    /// `subagent.wait`.
    pub async fn wait(&self, request: SubagentWait) -> Result<SubagentWaitResult, WireError> {
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let mut changes = self.changed.subscribe();
        let targets = {
            let catalog = self.catalog.lock().await;
            let mut targets: Vec<(String, String)> = Vec::new();
            for handle in &request.handles {
                for target in self.runs_of(&catalog, parent, handle)? {
                    if !targets.contains(&target) {
                        targets.push(target);
                    }
                }
            }
            targets
        };
        let any = request.mode == Some(WaitMode::Any);
        let deadline = request
            .timeout
            .map(|seconds| Instant::now() + Duration::from_secs_f64(seconds.min(MAX_WAIT)));
        loop {
            changes.borrow_and_update();
            let result = {
                let catalog = self.catalog.lock().await;
                let runs: Vec<_> = targets
                    .iter()
                    .filter_map(|(job_id, run_id)| {
                        let job = catalog.jobs.get(job_id)?;
                        job.runs
                            .iter()
                            .find(|run| &run.run_id == run_id)
                            .map(|run| run.snapshot(job_id))
                    })
                    .collect();
                let terminal =
                    |run: &shard_protocol::subagent::RunSnapshot| run.state.is_terminal();
                let settled =
                    if any { runs.iter().any(terminal) } else { runs.iter().all(terminal) };
                let mut states = targets
                    .iter()
                    .filter_map(|(job_id, _)| catalog.jobs.get(job_id))
                    .map(JobRecord::state);
                let first = states.next();
                let aggregate_state = match first {
                    Some(state) if states.all(|other| other == state) => AggregateState::Job(state),
                    _ => AggregateState::Mixed(MixedTag::Mixed),
                };
                (settled, SubagentWaitResult { timed_out: false, aggregate_state, runs })
            };
            let (settled, mut result) = result;
            if settled {
                return Ok(result);
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                result.timed_out = true;
                return Ok(result);
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(WireError::new(ErrorCode::InternalError, "the daemon is stopping"));
                    }
                }
                () = sleep_until(deadline) => {}
            }
        }
    }

    /// `subagent.steer` (from the parent, or a person through the lease
    /// guard: `source` says which).
    pub async fn steer(
        &self,
        request: SubagentSteer,
        source: &str,
    ) -> Result<SubagentSteerResult, WireError> {
        check_task(&request.message, "`message`")?;
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let (job_id, run_id, agent_id) = {
            let catalog = self.catalog.lock().await;
            let (job_id, run_id) = match self.resolve(&catalog, parent, &request.target)? {
                Target::Job(_) => {
                    return Err(invalid("steer a run, a child or an alias, not a job"));
                }
                Target::Run { job_id, run_id } => (job_id, run_id),
                Target::Agent(agent_id) => match catalog.run_of_agent(&agent_id) {
                    Some((job, run)) => (job.job_id.clone(), run.run_id.clone()),
                    None => return Err(conflict(format!("`{}` has no run", request.target))),
                },
            };
            let Some((_, run)) = catalog.run(&run_id) else {
                return Err(not_found(&request.target, parent));
            };
            if run.state != RunState::Active {
                return Err(conflict(format!(
                    "run `{run_id}` is {}: only an active run takes a steer",
                    state_name(run.state)
                )));
            }
            (job_id, run_id, run.agent_id.clone())
        };
        self.registry.within_parent(parent, &agent_id)?;
        self.steer_run(&job_id, &run_id, &agent_id, request.message, source).await
    }

    async fn steer_run(
        &self,
        job_id: &str,
        run_id: &str,
        agent_id: &str,
        message: String,
        source: &str,
    ) -> Result<SubagentSteerResult, WireError> {
        let correlation_id = new_id("steer");
        let (reply, answer) = oneshot::channel();
        let delivered = match self
            .registry
            .send_waiting(agent_id, HostCommand::SteerRun { message, reply })
            .await
        {
            Ok(()) => answer.await.ok().and_then(Result::ok),
            Err(_) => None,
        };
        let status =
            if delivered.is_some() { SteerStatus::Injected } else { SteerStatus::Conflict };
        let mut catalog = self.catalog.lock().await;
        let turn_id =
            delivered.or_else(|| catalog.run(run_id).and_then(|(_, run)| run.turn_id.clone()));
        if let Some(run) = catalog.run_mut(job_id, run_id) {
            run.steers.push(SteerRecord {
                correlation_id: correlation_id.clone(),
                source: source.to_owned(),
                status,
                at: crate::clock::now_ms(),
            });
            let job = &catalog.jobs[job_id];
            let _ = self.persist(job).await;
        }
        Ok(SubagentSteerResult { status, run_id: run_id.to_owned(), turn_id, correlation_id })
    }

    /// The parent of a leased child (a child always has one).
    fn parent_of(&self, agent_id: &str) -> Result<String, WireError> {
        self.registry
            .manifest(agent_id)
            .and_then(|child| child.parent_agent_id)
            .ok_or_else(|| WireError::new(ErrorCode::NotFound, format!("no agent `{agent_id}`")))
    }

    /// A person's steer to a leased child, through the lease guard.
    pub async fn steer_leased(
        &self,
        agent_id: &str,
        message: String,
        source: &str,
    ) -> Result<SubagentSteerResult, WireError> {
        let parent = self.parent_of(agent_id)?;
        let request =
            SubagentSteer { parent_agent_id: parent, target: agent_id.to_owned(), message };
        self.steer(request, source).await
    }

    /// A person's abort of a leased child: its run is stopped.
    pub async fn stop_leased(&self, agent_id: &str) -> Result<SubagentStopResult, WireError> {
        let parent = self.parent_of(agent_id)?;
        self.stop(SubagentStop { parent_agent_id: parent, handle: agent_id.to_owned() }).await
    }

    /// `subagent.relaunch`.
    pub async fn relaunch(
        self: &Arc<Self>,
        request: SubagentRelaunch,
    ) -> Result<SubagentRelaunchResult, WireError> {
        check_task(&request.task, "`task`")?;
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let mut catalog = self.catalog.lock().await;
        let agent_id = match self.resolve(&catalog, parent, &request.target)? {
            Target::Job(_) => {
                return Err(invalid("relaunch a child, a run or an alias, not a job"));
            }
            Target::Run { job_id, run_id } => match catalog.run_mut(&job_id, &run_id) {
                Some(run) => run.agent_id.clone(),
                None => return Err(not_found(&request.target, parent)),
            },
            Target::Agent(agent_id) => agent_id,
        };
        if let Some(holder) = self.lease(&agent_id) {
            return Err(conflict(format!("`{agent_id}` is already on run `{holder}`")));
        }
        self.registry.within_parent(parent, &agent_id)?;
        let Some(child) = self.registry.manifest(&agent_id) else {
            return Err(not_found(&request.target, parent));
        };
        self.make_room(&mut catalog, parent, 1).await?;
        let previous = catalog.run_of_agent(&agent_id).map(|(_, run)| run.clone());
        let alias = child.alias.clone().unwrap_or_else(|| agent_id.clone());
        let name = previous.as_ref().map_or_else(
            || child.name.clone().unwrap_or_else(|| alias.clone()),
            |run| run.name.clone(),
        );
        let run = RunRecord {
            definition_name: child.definition_name.clone(),
            display_name: child.display_name.clone(),
            ..RunRecord::queued(name, agent_id.clone(), alias, request.task)
        };
        let job = JobRecord {
            version: RECORD_VERSION,
            job_id: new_id("job"),
            parent_agent_id: parent.to_owned(),
            strategy: JobStrategy::Single,
            created_at: crate::clock::now_ms(),
            ended_at: None,
            stopped_at: None,
            runs: vec![run],
        };
        self.persist(&job).await?;
        let run = &job.runs[0];
        self.leases().insert(agent_id.clone(), run.run_id.clone());
        self.announce(&job, run, None);
        let result = SubagentRelaunchResult {
            job_id: job.job_id.clone(),
            run_id: run.run_id.clone(),
            agent_id,
            alias: run.alias.clone(),
            definition_name: run.definition_name.clone(),
            display_name: run.display_name.clone(),
            state: RunState::Queued,
        };
        let job_id = job.job_id.clone();
        catalog.insert(job);
        drop(catalog);
        tokio::spawn(self.clone().drive(job_id));
        Ok(result)
    }

    /// `subagent.status`.
    pub async fn status(&self, request: SubagentStatus) -> Result<SubagentStatusResult, WireError> {
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let catalog = self.catalog.lock().await;
        let entry = |agent_id: &str, run: Option<(&JobRecord, &RunRecord)>| {
            let child = self.registry.manifest(agent_id);
            SubagentAgent {
                agent_id: agent_id.to_owned(),
                alias: child.as_ref().and_then(|child| child.alias.clone()),
                definition_name: child.as_ref().and_then(|child| child.definition_name.clone()),
                display_name: child.as_ref().and_then(|child| child.display_name.clone()),
                parent_agent_id: child.as_ref().and_then(|child| child.parent_agent_id.clone()),
                run: run.map(|(job, run)| run.snapshot(&job.job_id)),
            }
        };
        let Some(targets) = request.targets else {
            let agents = self
                .registry
                .children(parent)
                .iter()
                .map(|child| entry(&child.agent_id, catalog.run_of_agent(&child.agent_id)))
                .collect();
            let mut jobs: Vec<&JobRecord> =
                catalog.jobs.values().filter(|job| job.parent_agent_id == parent).collect();
            jobs.sort_by(|a, b| (b.created_at, &b.job_id).cmp(&(a.created_at, &a.job_id)));
            let jobs = jobs.into_iter().take(STATUS_JOBS).map(JobRecord::snapshot).collect();
            return Ok(SubagentStatusResult { agents, jobs: Some(jobs) });
        };
        let mut agents = Vec::new();
        for handle in &targets {
            match self.resolve(&catalog, parent, handle)? {
                Target::Job(job_id) => {
                    let job = &catalog.jobs[&job_id];
                    agents
                        .extend(job.runs.iter().map(|run| entry(&run.agent_id, Some((job, run)))));
                }
                Target::Run { run_id, .. } => {
                    if let Some((job, run)) = catalog.run(&run_id) {
                        agents.push(entry(&run.agent_id, Some((job, run))));
                    }
                }
                Target::Agent(agent_id) => {
                    agents.push(entry(&agent_id, catalog.run_of_agent(&agent_id)));
                }
            }
        }
        Ok(SubagentStatusResult { agents, jobs: None })
    }

    /// `subagent.stop`: a job's queued and running runs, or one run (and,
    /// in a chain, the steps after it). Records are kept.
    pub async fn stop(&self, request: SubagentStop) -> Result<SubagentStopResult, WireError> {
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let mut catalog = self.catalog.lock().await;
        let (job_id, whole_job, run_id) = match self.resolve(&catalog, parent, &request.handle)? {
            Target::Job(job_id) => (job_id, true, None),
            Target::Run { job_id, run_id } => (job_id, false, Some(run_id)),
            Target::Agent(agent_id) => match catalog.run_of_agent(&agent_id) {
                Some((job, run)) => (job.job_id.clone(), false, Some(run.run_id.clone())),
                None => return Ok(SubagentStopResult { cancelled: Vec::new(), job_id: None }),
            },
        };
        let job = &catalog.jobs[&job_id];
        let targets: Vec<String> = match &run_id {
            None => job.runs.iter().map(|run| run.run_id.clone()).collect(),
            Some(run_id) => {
                let at = job.runs.iter().position(|run| &run.run_id == run_id).unwrap_or(0);
                let stopped = &job.runs[at];
                let mut targets = vec![run_id.clone()];
                // Stopping a chain's running step stops what would follow it.
                if job.strategy == JobStrategy::Chain && !stopped.state.is_terminal() {
                    targets.extend(job.runs[at + 1..].iter().map(|run| run.run_id.clone()));
                }
                targets
            }
        };
        if whole_job {
            if let Some(job) = catalog.jobs.get_mut(&job_id) {
                if job.runs.iter().any(|run| !run.state.is_terminal()) {
                    job.stopped_at = Some(crate::clock::now_ms());
                }
            }
        }
        let cancelled = self.cancel(&mut catalog, &job_id, &targets, "stopped").await;
        Ok(SubagentStopResult { cancelled, job_id: Some(job_id) })
    }
}

/// How a supervised run came back.
struct Ended {
    end: RunEnd,
    timed_out: bool,
}

impl Ended {
    fn failed(why: &str) -> Self {
        Self { end: RunEnd { error: Some(why.to_owned()), ..RunEnd::default() }, timed_out: false }
    }
}

/// The daemon's own commands' answers go nowhere.
struct Discard;

impl Subscriber for Discard {
    fn id(&self) -> SubscriberId {
        SubscriberId::MAX
    }

    fn push(&self, _: Wire) -> bool {
        true
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn check_task(text: &str, what: &str) -> Result<(), WireError> {
    if text.trim().is_empty() {
        return Err(invalid(format!("{what} is empty")));
    }
    if text.len() > MAX_TASK {
        return Err(invalid(format!("{what} is over {MAX_TASK} bytes")));
    }
    Ok(())
}

/// `name`, or `name-2`, `name-3`… : the first that no sibling holds.
fn unique_alias(name: &str, taken: &HashSet<String>) -> String {
    let name = name.trim();
    if !taken.contains(&fold(name)) {
        return name.to_owned();
    }
    let mut n = 2;
    loop {
        let alias = format!("{name}-{n}");
        if !taken.contains(&fold(&alias)) {
            return alias;
        }
        n += 1;
    }
}

/// A managed child's brief, after the built-in system prompt.
fn brief(alias: &str, parent: &str) -> String {
    format!(
        "You are a subagent, `{alias}`, working for agent {parent}. Your first message is your task: \
         carry it out on your own (nobody else sees this conversation), then end with a short final \
         answer; it is reported to {parent}."
    )
}

/// The chain step's task with the previous step's final text: where the
/// task says `{previous}`, else after it.
fn with_previous(task: &str, previous: Option<&str>) -> String {
    match previous {
        None => task.to_owned(),
        Some(previous) if task.contains("{previous}") => task.replace("{previous}", previous),
        Some(previous) => format!("{task}\n\nThe previous step's result:\n{previous}"),
    }
}

/// The report a parent's conversation receives when a run ends. Every line
/// after the first is quoted, so nothing in a child's answer reads as a
/// directive.
fn report_text(job: &JobRecord, run: &RunRecord) -> String {
    let mut text = format!(
        "[subagent report] subagent `{}` ({}, run {} of job {}) {}",
        run.alias,
        run.agent_id,
        run.run_id,
        job.job_id,
        state_name(run.state),
    );
    if let Some(error) = &run.error {
        text.push_str(&format!(": {error}"));
    }
    if let Some(usage) = &run.usage {
        text.push_str(&format!(" [{} input, {} output tokens]", usage.input, usage.output));
    }
    if let Some(final_text) = &run.final_text {
        text.push_str("\nFinal text:");
        for line in final_text.lines() {
            text.push_str("\n> ");
            text.push_str(line);
        }
    }
    text
}

/// The identity of a run as `subagent.create` answers it.
fn run_handle(run: &RunRecord) -> RunHandle {
    RunHandle {
        run_id: run.run_id.clone(),
        index: run.index,
        name: run.name.clone(),
        state: run.state,
        agent_id: run.agent_id.clone(),
        alias: run.alias.clone(),
        definition_name: run.definition_name.clone(),
        display_name: run.display_name.clone(),
    }
}

/// After a daemon restart: unfinished runs become `interrupted` (the first
/// unfinished step of a chain) or `cancelled` (the chain steps after it).
/// Returns whether anything changed.
fn reconcile(job: &mut JobRecord, now: u64) -> bool {
    let mut changed = false;
    let mut chain_broken = false;
    for run in &mut job.runs {
        if run.state.is_terminal() {
            continue;
        }
        changed = true;
        run.ended_at = Some(now);
        if job.strategy == JobStrategy::Chain && chain_broken {
            run.state = RunState::Cancelled;
            run.error = Some("an earlier step of the chain was interrupted".to_owned());
        } else {
            run.error = Some(format!(
                "the daemon stopped while the run was {}; relaunch it to run again",
                state_name(run.state)
            ));
            run.state = RunState::Interrupted;
            chain_broken = true;
        }
    }
    if changed && job.ended_at.is_none() {
        job.ended_at = Some(now);
    }
    changed
}
