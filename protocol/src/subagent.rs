//! Subagent background jobs (§10.3) and their shared types (§11.2).
//!
//! Orchestrator-level: the owning parent is the `parent_agent_id` payload
//! field, never a routing `agent_id`. Task text is private: it appears in
//! `subagent.create` / `subagent.relaunch` payloads and nowhere in results,
//! events or snapshots, which is why none of those types has a task field.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Queued,
    Starting,
    Active,
    Completed,
    Failed,
    TimedOut,
    Cancelled,
    /// Set on daemon restart for runs that were not terminal; relaunchable.
    Interrupted,
}

impl RunState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::TimedOut | Self::Cancelled | Self::Interrupted
        )
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStrategy {
    #[default]
    Single,
    Parallel,
    Chain,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub name: String,
    pub task: String,
}

/// `subagent.create`: the single form `{name, task}` or the batch form
/// `{tasks, strategy}`, never both; validated before any side effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawSubagentCreate", into = "RawSubagentCreate")]
pub struct SubagentCreate {
    pub parent_agent_id: String,
    pub strategy: JobStrategy,
    /// One entry for the single form.
    pub tasks: Vec<TaskSpec>,
    /// Whether the request used the batch form (kept for a faithful echo).
    pub batch: bool,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub mode: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct RawSubagentCreate {
    parent_agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tasks: Option<Vec<TaskSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    strategy: Option<JobStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
}

impl TryFrom<RawSubagentCreate> for SubagentCreate {
    type Error = &'static str;

    fn try_from(raw: RawSubagentCreate) -> Result<Self, Self::Error> {
        let (tasks, strategy, batch) = match (raw.name, raw.task, raw.tasks) {
            (Some(name), Some(task), None) => {
                if raw.strategy.is_some_and(|strategy| strategy != JobStrategy::Single) {
                    return Err("the single form (`name`, `task`) takes no `strategy` but single");
                }
                (vec![TaskSpec { name, task }], JobStrategy::Single, false)
            }
            (None, None, Some(tasks)) => {
                if tasks.is_empty() {
                    return Err("`tasks` needs at least one entry");
                }
                let Some(strategy) = raw.strategy else {
                    return Err("the batch form (`tasks`) needs a `strategy`");
                };
                (tasks, strategy, true)
            }
            (None, None, None) => return Err("needs `name` and `task`, or `tasks`"),
            (_, _, Some(_)) => return Err("`tasks` cannot be combined with `name` or `task`"),
            (Some(_), None, None) => return Err("missing field `task`"),
            (None, Some(_), None) => return Err("missing field `name`"),
        };
        Ok(Self {
            parent_agent_id: raw.parent_agent_id,
            strategy,
            tasks,
            batch,
            model: raw.model,
            provider: raw.provider,
            mode: raw.mode,
        })
    }
}

impl From<SubagentCreate> for RawSubagentCreate {
    fn from(create: SubagentCreate) -> Self {
        let mut raw = Self {
            parent_agent_id: create.parent_agent_id,
            name: None,
            task: None,
            tasks: None,
            strategy: None,
            model: create.model,
            provider: create.provider,
            mode: create.mode,
        };
        if create.batch {
            raw.tasks = Some(create.tasks);
            raw.strategy = Some(create.strategy);
        } else if let Some(spec) = create.tasks.into_iter().next() {
            raw.name = Some(spec.name);
            raw.task = Some(spec.task);
        }
        raw
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitMode {
    Any,
    #[default]
    All,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawSubagentWait")]
pub struct SubagentWait {
    pub parent_agent_id: String,
    /// At least one job, run or agent id, or alias.
    pub handles: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<WaitMode>,
    /// Seconds; omitted waits forever, 0 polls.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "seconds")]
    pub timeout: Option<f64>,
}

/// Whole seconds go out as integers (`0`, not `0.0`), as clients write them.
fn seconds<S: serde::Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(seconds) if seconds.fract() == 0.0 && (0.0..9.0e15).contains(seconds) => {
            // Exact: a whole number below 2^53 converts without loss.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            serializer.serialize_u64(*seconds as u64)
        }
        Some(seconds) => serializer.serialize_f64(*seconds),
        None => serializer.serialize_none(),
    }
}

#[derive(Deserialize)]
struct RawSubagentWait {
    parent_agent_id: String,
    handles: Vec<String>,
    #[serde(default)]
    mode: Option<WaitMode>,
    #[serde(default)]
    timeout: Option<f64>,
}

impl TryFrom<RawSubagentWait> for SubagentWait {
    type Error = &'static str;

    fn try_from(raw: RawSubagentWait) -> Result<Self, Self::Error> {
        if raw.handles.is_empty() {
            return Err("`handles` needs at least one handle");
        }
        if raw.timeout.is_some_and(|seconds| !(seconds >= 0.0 && seconds.is_finite())) {
            return Err("`timeout` must be a non-negative number of seconds");
        }
        Ok(Self {
            parent_agent_id: raw.parent_agent_id,
            handles: raw.handles,
            mode: raw.mode,
            timeout: raw.timeout,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentSteer {
    pub parent_agent_id: String,
    pub target: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentRelaunch {
    pub parent_agent_id: String,
    pub target: String,
    pub task: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStatus {
    pub parent_agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStop {
    pub parent_agent_id: String,
    pub handle: String,
}

/// The identity of a run: shared by create/relaunch results and snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunHandle {
    pub run_id: String,
    pub index: u32,
    pub name: String,
    pub state: RunState,
    pub agent_id: String,
    pub alias: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentCreateResult {
    pub job_id: String,
    pub strategy: JobStrategy,
    pub runs: Vec<RunHandle>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    pub input: u64,
    pub output: u64,
}

/// `RunSnapshot` (§11.2). `final_text` goes to the owning parent only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSnapshot {
    pub job_id: String,
    pub run_id: String,
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub state: RunState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

/// `JobSnapshot` (§11.2); private task specs are never part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSnapshot {
    pub job_id: String,
    pub parent_agent_id: String,
    pub strategy: JobStrategy,
    pub state: JobState,
    pub runs: Vec<RunSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_step: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<u64>,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}

/// `aggregate_state` of `subagent.wait`: a job state, or `"mixed"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AggregateState {
    Job(JobState),
    Mixed(MixedTag),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MixedTag {
    Mixed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentWaitResult {
    pub timed_out: bool,
    pub aggregate_state: AggregateState,
    pub runs: Vec<RunSnapshot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SteerStatus {
    Injected,
    Conflict,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentSteerResult {
    pub status: SteerStatus,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    pub correlation_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentRelaunchResult {
    pub job_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub alias: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub state: RunState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentAgent {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSnapshot>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStatusResult {
    pub agents: Vec<SubagentAgent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<JobSnapshot>>,
}

impl SubagentStatusResult {
    /// Leaves out what the runs said (final texts, errors): the answer a
    /// connection not attached to the parent gets.
    pub fn redact(&mut self) {
        let runs = self.agents.iter_mut().filter_map(|agent| agent.run.as_mut());
        let job_runs = self.jobs.iter_mut().flatten().flat_map(|job| job.runs.iter_mut());
        for run in runs.chain(job_runs) {
            run.final_text = None;
            run.error = None;
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelledRun {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    pub state: RunState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentStopResult {
    pub cancelled: Vec<CancelledRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

/// `subagent_run_changed`: sent to the owning parent's connections after a
/// run transition is persisted. Never carries task text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentRunChanged {
    pub parent_agent_id: String,
    pub job_id: String,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub state: RunState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_state: Option<RunState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
}
