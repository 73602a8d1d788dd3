//! The commands that make a job: `subagent.create` (new children, one run
//! each) and `subagent.relaunch` (a new single-run job for a child that
//! has run before). Both check the whole request first, make room under
//! the limits, then write the job, lease its children, announce its runs
//! `queued`, answer, and only then hand the job to its driver.

use std::collections::HashSet;
use std::sync::Arc;

use shard_protocol::identity::AgentIdentity;
use shard_protocol::orchestrator::AgentCreate;
use shard_protocol::subagent::{
    JobStrategy, RunHandle, RunState, SubagentCreate, SubagentCreateResult, SubagentRelaunch,
    SubagentRelaunchResult, TaskSpec,
};
use tokio::sync::MutexGuard;

use super::catalog::{Catalog, Target};
use super::record::{JobRecord, RECORD_VERSION, RunRecord};
use super::{JobError, Jobs, TextField, check_task, fold, new_id, not_found};
use crate::agents::checks::alias_problem;
use crate::agents::manifest::Manifest;

/// A `subagent.create` that passed its checks: the parent, and the mode
/// and model its children start in.
struct Plan {
    parent: Manifest,
    mode: Option<String>,
    model: Option<String>,
}

/// A job's children before they exist: each run's record, and each
/// child's manifest request by agent id.
struct Children {
    runs: Vec<RunRecord>,
    manifests: Vec<(String, AgentCreate)>,
}

impl Jobs {
    /// `subagent.create`.
    pub async fn create(
        self: &Arc<Self>,
        request: SubagentCreate,
    ) -> Result<SubagentCreateResult, JobError> {
        let plan = self.check_create(&request)?;
        let mut catalog = self.catalog.lock().await;
        self.make_room(&mut catalog, &plan.parent.agent_id, request.tasks.len()).await?;
        let children = self.children(&plan, &request.tasks);
        self.registry.materialize(children.manifests).await?;
        let job = new_job(&plan.parent.agent_id, request.strategy, children.runs);
        let result = SubagentCreateResult {
            job_id: job.job_id.clone(),
            strategy: job.strategy,
            runs: job.runs.iter().map(run_handle).collect(),
        };
        self.start(catalog, job).await?;
        Ok(result)
    }

    /// Everything `subagent.create` checks before it takes the catalog:
    /// the parent may delegate, the tasks fit its launch policy and the
    /// strategy, each name and task is valid, and the mode and model are
    /// known (else the parent's).
    fn check_create(&self, request: &SubagentCreate) -> Result<Plan, JobError> {
        let parent = self.parent(&request.parent_agent_id)?;
        parent.here()?;
        let info = self.registry.info(&parent.agent_id);
        let policy = parent.policy();
        if !parent.may_delegate() {
            return Err(JobError::MayNotDelegate {
                agent_id: parent.agent_id,
                depth: parent.depth,
                max_depth: policy.max_depth,
            });
        }
        if request.tasks.len() > policy.max_tasks as usize {
            return Err(JobError::TooManyTasks { max: policy.max_tasks });
        }
        if request.strategy == JobStrategy::Single && request.tasks.len() != 1 {
            return Err(JobError::SingleTakesOne);
        }
        for (index, spec) in request.tasks.iter().enumerate() {
            if let Some(problem) = alias_problem(&spec.name) {
                return Err(JobError::BadName { index, problem });
            }
            check_task(&spec.task, TextField::Task { index })?;
        }
        let mode = self.registry.child_mode(&parent, request.mode.clone())?;
        let model = match request.model.clone() {
            Some(model) => Some(self.known_model(model)?),
            None => info.as_ref().and_then(|info| info.model.clone()).or(parent.model.clone()),
        };
        Ok(Plan { parent, mode, model })
    }

    /// One child per task: an alias from the parent's pool of names while
    /// it lasts (the task's name becomes the definition name), else the
    /// task's name made unique among its siblings.
    fn children(&self, plan: &Plan, tasks: &[TaskSpec]) -> Children {
        let parent = &plan.parent;
        let mut taken: HashSet<String> = self
            .registry
            .children(&parent.agent_id)
            .iter()
            .filter_map(|child| child.identity.alias.as_deref().map(fold))
            .collect();
        let mut children = Children { runs: Vec::new(), manifests: Vec::new() };
        let mut pool = parent.names.clone().unwrap_or_default().into_iter();
        for (index, spec) in tasks.iter().enumerate() {
            let from_pool = pool.by_ref().find(|alias| !taken.contains(&fold(alias)));
            let (alias, definition_name) = match from_pool {
                Some(alias) => (alias, Some(spec.name.clone())),
                None => (unique_alias(&spec.name, &taken), None),
            };
            taken.insert(fold(&alias));
            let display_name = definition_name.as_ref().map(|name| format!("{name} · {alias}"));
            let agent_id = new_id("agent");
            let child = AgentIdentity {
                name: Some(spec.name.clone()),
                parent_agent_id: Some(parent.agent_id.clone()),
                alias: Some(alias.clone()),
                definition_name,
                display_name,
            };
            children.manifests.push((
                agent_id.clone(),
                AgentCreate {
                    cwd: parent.cwd.clone(),
                    model: plan.model.clone(),
                    mode: plan.mode.clone(),
                    identity: child.clone(),
                    system_prompt: Some(brief(&alias, &parent.agent_id)),
                    headless_policy: parent.headless_policy,
                    ..AgentCreate::default()
                },
            ));
            children.runs.push(RunRecord {
                index: index as u32,
                ..RunRecord::queued(agent_id, child, spec.task.clone())
            });
        }
        children
    }

    /// `subagent.relaunch`.
    pub async fn relaunch(
        self: &Arc<Self>,
        request: SubagentRelaunch,
    ) -> Result<SubagentRelaunchResult, JobError> {
        check_task(&request.task, TextField::Relaunch)?;
        let parent = request.parent_agent_id.as_str();
        self.parent(parent)?;
        let mut catalog = self.catalog.lock().await;
        let agent_id = match self.resolve(&catalog, parent, &request.target)? {
            Target::Job(_) => {
                return Err(JobError::RelaunchOfJob);
            }
            Target::Run { job_id, run_id } => match catalog.run_mut(&job_id, &run_id) {
                Some(run) => run.agent_id.clone(),
                None => return Err(not_found(&request.target, parent)),
            },
            Target::Agent(agent_id) => agent_id,
        };
        if let Some(holder) = self.lease(&agent_id) {
            return Err(JobError::Leased { agent_id, run_id: holder });
        }
        self.registry.within_parent(parent, &agent_id)?;
        let Some(child) = self.registry.manifest(&agent_id) else {
            return Err(not_found(&request.target, parent));
        };
        self.make_room(&mut catalog, parent, 1).await?;
        // The run keeps the name the child's last run had.
        let name = catalog.run_of_agent(&agent_id).map(|(_, run)| run.name().to_owned());
        let named = AgentIdentity {
            name: name.or_else(|| child.identity.name.clone()),
            ..child.identity.clone()
        };
        let run = RunRecord::queued(agent_id.clone(), named, request.task);
        let job = new_job(parent, JobStrategy::Single, vec![run]);
        let run = &job.runs[0];
        let result = SubagentRelaunchResult {
            job_id: job.job_id.clone(),
            run_id: run.run_id.clone(),
            agent_id,
            alias: run.alias().to_owned(),
            definition_name: run.child.definition_name.clone(),
            display_name: run.child.display_name.clone(),
            state: RunState::Queued,
        };
        self.start(catalog, job).await?;
        Ok(result)
    }

    /// Opens a job made under the catalog's lock: written first, its
    /// children leased, each run announced `queued`, then kept in the
    /// catalog and, once the lock is let go, handed to its driver.
    async fn start(
        self: &Arc<Self>,
        mut catalog: MutexGuard<'_, Catalog>,
        job: JobRecord,
    ) -> Result<(), JobError> {
        self.persist(&job).await?;
        self.leases.hold(&job.runs);
        for run in &job.runs {
            self.announce(&job, run, None);
        }
        let job_id = job.job_id.clone();
        catalog.insert(job);
        drop(catalog);
        tokio::spawn(self.clone().drive(job_id));
        Ok(())
    }

    fn known_model(&self, model: String) -> Result<String, JobError> {
        let config = shard_platform::config::Config::load(&self.home)
            .map_err(|source| JobError::Config { source })?;
        match config.model(&model) {
            Some(_) => Ok(model),
            None => Err(JobError::UnknownModel { model }),
        }
    }
}

/// A new job of `runs`, created now, nothing ended or stopped.
fn new_job(parent: &str, strategy: JobStrategy, runs: Vec<RunRecord>) -> JobRecord {
    JobRecord {
        version: RECORD_VERSION,
        job_id: new_id("job"),
        parent_agent_id: parent.to_owned(),
        strategy,
        created_at: crate::clock::now_ms(),
        ended_at: None,
        stopped_at: None,
        runs,
    }
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

/// The identity of a run as `subagent.create` answers it.
fn run_handle(run: &RunRecord) -> RunHandle {
    RunHandle {
        run_id: run.run_id.clone(),
        index: run.index,
        name: run.name().to_owned(),
        state: run.state,
        agent_id: run.agent_id.clone(),
        alias: run.alias().to_owned(),
        definition_name: run.child.definition_name.clone(),
        display_name: run.child.display_name.clone(),
    }
}
