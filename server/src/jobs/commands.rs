//! The commands on jobs already made: `subagent.status` (a parent's
//! children and jobs, or the handles it names), `subagent.wait` (until any
//! or all of the named runs end, or a timeout), `subagent.steer` (a message
//! into an active run, from the parent or from a person through the lease
//! guard) and `subagent.stop` (a job, or a run and the chain steps after
//! it). Every handle resolves within the asking parent.

use std::time::Duration;

use shard_protocol::subagent::{
    AggregateState, JobStrategy, MixedTag, RunSnapshot, RunState, SteerStatus, SubagentAgent,
    SubagentStatus, SubagentStatusResult, SubagentSteer, SubagentSteerResult, SubagentStop,
    SubagentStopResult, SubagentWait, SubagentWaitResult, WaitMode,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::catalog::{Catalog, Target};
use super::record::{JobRecord, RunRecord, SteerRecord};
use super::{JobError, Jobs, TextField, check_task, new_id, not_found};
use crate::agents::host::HostCommand;

/// Jobs `subagent.status` lists without targets.
const STATUS_JOBS: usize = 50;
/// The longest a `subagent.wait` timeout is taken at (a year).
const MAX_WAIT: f64 = 365.0 * 24.0 * 3600.0;

impl Jobs {
    /// `subagent.status`.
    pub async fn status(&self, request: SubagentStatus) -> Result<SubagentStatusResult, JobError> {
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let catalog = self.catalog.lock().await;
        let entry = |agent_id: &str, run: Option<(&JobRecord, &RunRecord)>| {
            let child = self.registry.manifest(agent_id);
            SubagentAgent {
                agent_id: agent_id.to_owned(),
                alias: child.as_ref().and_then(|child| child.identity.alias.clone()),
                definition_name: child
                    .as_ref()
                    .and_then(|child| child.identity.definition_name.clone()),
                display_name: child.as_ref().and_then(|child| child.identity.display_name.clone()),
                parent_agent_id: child
                    .as_ref()
                    .and_then(|child| child.identity.parent_agent_id.clone()),
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

    /// `subagent.wait`.
    pub async fn wait(&self, request: SubagentWait) -> Result<SubagentWaitResult, JobError> {
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
            let (settled, mut result) = {
                let catalog = self.catalog.lock().await;
                waited(&catalog, &targets, any)
            };
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
                        return Err(JobError::Stopping);
                    }
                }
                () = crate::clock::sleep_until(deadline) => {}
            }
        }
    }

    /// `subagent.steer` (from the parent, or a person through the lease
    /// guard: `source` says which).
    pub async fn steer(
        &self,
        request: SubagentSteer,
        source: &str,
    ) -> Result<SubagentSteerResult, JobError> {
        check_task(&request.message, TextField::Steer)?;
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let (job_id, run_id, agent_id) = {
            let catalog = self.catalog.lock().await;
            let (job_id, run_id) = match self.resolve(&catalog, parent, &request.target)? {
                Target::Job(_) => {
                    return Err(JobError::SteerOfJob);
                }
                Target::Run { job_id, run_id } => (job_id, run_id),
                Target::Agent(agent_id) => match catalog.run_of_agent(&agent_id) {
                    Some((job, run)) => (job.job_id.clone(), run.run_id.clone()),
                    None => return Err(JobError::NoRun { handle: request.target }),
                },
            };
            let Some((_, run)) = catalog.run(&run_id) else {
                return Err(not_found(&request.target, parent));
            };
            if run.state != RunState::Active {
                return Err(JobError::NotActive { run_id, state: run.state });
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
    ) -> Result<SubagentSteerResult, JobError> {
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
    fn parent_of(&self, agent_id: &str) -> Result<String, JobError> {
        self.registry
            .manifest(agent_id)
            .and_then(|child| child.identity.parent_agent_id)
            .ok_or_else(|| JobError::NoAgent { agent_id: agent_id.to_owned() })
    }

    /// A person's steer to a leased child, through the lease guard
    /// (commands/routed.rs).
    pub async fn steer_leased(
        &self,
        agent_id: &str,
        message: String,
        source: &str,
    ) -> Result<SubagentSteerResult, JobError> {
        let parent = self.parent_of(agent_id)?;
        let request =
            SubagentSteer { parent_agent_id: parent, target: agent_id.to_owned(), message };
        self.steer(request, source).await
    }

    /// A person's abort of a leased child: its run is stopped.
    pub async fn stop_leased(&self, agent_id: &str) -> Result<SubagentStopResult, JobError> {
        let parent = self.parent_of(agent_id)?;
        let request = SubagentStop { parent_agent_id: parent, handle: agent_id.to_owned() };
        self.stop(request).await
    }

    /// `subagent.stop`: a job's queued and running runs, or one run (and,
    /// in a chain, the steps after it). Records are kept.
    pub async fn stop(&self, request: SubagentStop) -> Result<SubagentStopResult, JobError> {
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
        if whole_job
            && let Some(job) = catalog.jobs.get_mut(&job_id)
            && job.runs.iter().any(|run| !run.state.is_terminal())
        {
            job.stopped_at = Some(crate::clock::now_ms());
        }
        let cancelled = self.cancel(&mut catalog, &job_id, &targets, "stopped").await;
        Ok(SubagentStopResult { cancelled, job_id: Some(job_id) })
    }
}

/// Where a wait stands: whether the runs it waits for have ended (any or
/// all of them), and the answer as of now.
fn waited(
    catalog: &Catalog,
    targets: &[(String, String)],
    any: bool,
) -> (bool, SubagentWaitResult) {
    let runs: Vec<_> = targets
        .iter()
        .filter_map(|(job_id, run_id)| {
            let job = catalog.jobs.get(job_id)?;
            job.runs.iter().find(|run| &run.run_id == run_id).map(|run| run.snapshot(job_id))
        })
        .collect();
    let terminal = |run: &RunSnapshot| run.state.is_terminal();
    let settled = if any { runs.iter().any(terminal) } else { runs.iter().all(terminal) };
    let mut states =
        targets.iter().filter_map(|(job_id, _)| catalog.jobs.get(job_id)).map(JobRecord::state);
    let first = states.next();
    let aggregate_state = match first {
        Some(state) if states.all(|other| other == state) => AggregateState::Job(state),
        _ => AggregateState::Mixed(MixedTag::Mixed),
    };
    (settled, SubagentWaitResult { timed_out: false, aggregate_state, runs })
}
