//! The job records in memory: every job by id and every run's job, the
//! lookups the commands and drivers make, how a parent's handle resolves
//! (typed ids exactly, then aliases, never outside its own jobs and
//! children), the limits a new job must fit (runs at once, records kept),
//! and what a restart makes of the runs the last daemon left unfinished.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use shard_protocol::subagent::{JobStrategy, RunState};

use super::record::{self, JobRecord, RunRecord};
use super::{JobError, JobLimits, Jobs, fold, not_found, state_name};

#[derive(Default)]
pub(super) struct Catalog {
    pub(super) jobs: BTreeMap<String, JobRecord>,
    /// run id → job id.
    runs: HashMap<String, String>,
}

/// What a handle resolved to, within one parent.
pub(super) enum Target {
    Job(String),
    Run { job_id: String, run_id: String },
    Agent(String),
}

impl Catalog {
    /// Every job record on disk, reconciled after a restart and without
    /// tasks: no run is queued after a restart, so no task is needed again.
    pub(super) fn restore(home: &Path) -> Self {
        let mut catalog = Self::default();
        let now = crate::clock::now_ms();
        for mut job in JobRecord::load_all(home) {
            if reconcile(&mut job, now)
                && let Err(error) = job.save(home)
            {
                tracing::error!(job = %job.job_id, %error, "cannot record the interrupted runs");
            }
            for run in &mut job.runs {
                run.task = String::new();
            }
            catalog.insert(job);
        }
        catalog
    }

    pub(super) fn run(&self, run_id: &str) -> Option<(&JobRecord, &RunRecord)> {
        let job = self.jobs.get(self.runs.get(run_id)?)?;
        Some((job, job.runs.iter().find(|run| run.run_id == run_id)?))
    }

    pub(super) fn run_mut(&mut self, job_id: &str, run_id: &str) -> Option<&mut RunRecord> {
        self.jobs.get_mut(job_id)?.runs.iter_mut().find(|run| run.run_id == run_id)
    }

    /// The agent's queued or active run, else its latest one.
    pub(super) fn run_of_agent(&self, agent_id: &str) -> Option<(&JobRecord, &RunRecord)> {
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

    pub(super) fn insert(&mut self, job: JobRecord) {
        for run in &job.runs {
            self.runs.insert(run.run_id.clone(), job.job_id.clone());
        }
        self.jobs.insert(job.job_id.clone(), job);
    }

    /// Drops a job and its runs from memory (its file is the caller's).
    fn forget(&mut self, job_id: &str) -> bool {
        let Some(job) = self.jobs.remove(job_id) else { return false };
        for run in &job.runs {
            self.runs.remove(&run.run_id);
        }
        true
    }

    /// CONFLICT when `runs` more queued or running runs would pass the
    /// parent's cap or the daemon's.
    fn check_active(&self, limits: &JobLimits, parent: &str, runs: usize) -> Result<(), JobError> {
        let active =
            |job: &JobRecord| job.runs.iter().filter(|run| !run.state.is_terminal()).count();
        let mine: usize =
            self.jobs.values().filter(|job| job.parent_agent_id == parent).map(active).sum();
        if mine + runs > limits.active_per_parent {
            return Err(JobError::ParentBusy {
                parent: parent.to_owned(),
                active: mine,
                max: limits.active_per_parent,
            });
        }
        let all: usize = self.jobs.values().map(active).sum();
        if all + runs > limits.active {
            return Err(JobError::DaemonBusy { active: all, max: limits.active });
        }
        Ok(())
    }

    /// The oldest ended jobs to forget so that one more record stays under
    /// the parent's cap and the daemon's; CONFLICT when forgetting every
    /// ended one would not do.
    fn to_forget(&self, limits: &JobLimits, parent: &str) -> Result<Vec<String>, JobError> {
        let ended = |job: &JobRecord| job.runs.iter().all(|run| run.state.is_terminal());
        let mut oldest: Vec<(u64, String, String)> = self
            .jobs
            .values()
            .filter(|job| ended(job))
            .map(|job| (job.created_at, job.job_id.clone(), job.parent_agent_id.clone()))
            .collect();
        oldest.sort();
        let mut kept_mine = self.jobs.values().filter(|job| job.parent_agent_id == parent).count();
        let mut kept = self.jobs.len();
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
            return Err(JobError::RecordsFull {
                kept: limits.kept,
                kept_per_parent: limits.kept_per_parent,
            });
        }
        Ok(forget)
    }
}

impl Jobs {
    /// Resolves a handle within `parent`'s jobs and children: typed ids
    /// exactly first, then aliases.
    pub(super) fn resolve(
        &self,
        catalog: &Catalog,
        parent: &str,
        handle: &str,
    ) -> Result<Target, JobError> {
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
                Some(child) if child.identity.parent_agent_id.as_deref() == Some(parent) => {
                    Ok(Target::Agent(handle.to_owned()))
                }
                _ => Err(not_found(handle, parent)),
            };
        }
        let folded = fold(handle);
        self.registry
            .children(parent)
            .into_iter()
            .find(|child| {
                child.identity.alias.as_deref().is_some_and(|alias| fold(alias) == folded)
            })
            .map(|child| Target::Agent(child.agent_id))
            .ok_or_else(|| not_found(handle, parent))
    }

    /// The runs a handle stands for, as of now: a job's runs, one run, or
    /// an agent's current (else latest) run.
    pub(super) fn runs_of(
        &self,
        catalog: &Catalog,
        parent: &str,
        handle: &str,
    ) -> Result<Vec<(String, String)>, JobError> {
        Ok(match self.resolve(catalog, parent, handle)? {
            Target::Job(job_id) => {
                let job = &catalog.jobs[&job_id];
                job.runs.iter().map(|run| (job_id.clone(), run.run_id.clone())).collect()
            }
            Target::Run { job_id, run_id } => vec![(job_id, run_id)],
            Target::Agent(agent_id) => match catalog.run_of_agent(&agent_id) {
                Some((job, run)) => vec![(job.job_id.clone(), run.run_id.clone())],
                None => return Err(JobError::NeverRan { handle: handle.to_owned() }),
            },
        })
    }

    /// Room for a new job of `runs` runs under `parent`: CONFLICT when the
    /// runs queued or running would pass a cap; the oldest ended job
    /// records go to keep the rest under theirs (CONFLICT when none has
    /// ended).
    pub(super) async fn make_room(
        &self,
        catalog: &mut Catalog,
        parent: &str,
        runs: usize,
    ) -> Result<(), JobError> {
        catalog.check_active(&self.limits, parent, runs)?;
        for job_id in catalog.to_forget(&self.limits, parent)? {
            if catalog.forget(&job_id) {
                let path = record::jobs_dir(&self.home).join(format!("{job_id}.json"));
                if let Err(error) = tokio::fs::remove_file(&path).await {
                    tracing::warn!(job = %job_id, %error, "cannot remove an old job record");
                }
            }
        }
        Ok(())
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
