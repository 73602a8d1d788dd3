//! The durable job records: one file per job under `$SHARD_HOME/jobs/`
//! (0600), rewritten whole (atomically) after every transition, and the
//! snapshots the wire sees (§11.2), which never carry the private task.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_protocol::subagent::{
    JobSnapshot, JobState, JobStrategy, RunSnapshot, RunState, RunUsage, SubagentRunChanged,
};

pub const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    pub version: u32,
    pub job_id: String,
    pub parent_agent_id: String,
    pub strategy: JobStrategy,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<u64>,
    pub runs: Vec<RunRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub run_id: String,
    pub index: u32,
    pub name: String,
    pub agent_id: String,
    pub alias: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Private: what the child is told. Never leaves this file.
    pub task: String,
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
    /// The turn the task started (private: for steer answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Steers sent into this run, by whom and how they resolved; the
    /// messages themselves are the child's transcript's, not kept here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steers: Vec<SteerRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SteerRecord {
    pub correlation_id: String,
    /// `parent` or the client transport a person steered from.
    pub source: String,
    pub status: shard_protocol::subagent::SteerStatus,
    pub at: u64,
}

pub fn jobs_dir(home: &Path) -> PathBuf {
    home.join("jobs")
}

impl JobRecord {
    pub fn save(&self, home: &Path) -> anyhow::Result<()> {
        let dir = jobs_dir(home);
        crate::home::prepare_dir(&dir)?;
        let bytes = serde_json::to_vec_pretty(self)?;
        crate::home::write_private(&dir.join(format!("{}.json", self.job_id)), &bytes)?;
        Ok(())
    }

    /// Every readable record; unreadable ones are logged and left alone.
    pub fn load_all(home: &Path) -> Vec<JobRecord> {
        let Ok(entries) = std::fs::read_dir(jobs_dir(home)) else { return Vec::new() };
        let mut jobs: Vec<JobRecord> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
            .filter_map(|path| {
                let text = std::fs::read_to_string(&path).ok()?;
                match serde_json::from_str::<JobRecord>(&text) {
                    Ok(job) => Some(job),
                    Err(error) => {
                        tracing::error!(path = %path.display(), %error, "unreadable job record skipped");
                        None
                    }
                }
            })
            .collect();
        jobs.sort_by(|a, b| (a.created_at, &a.job_id).cmp(&(b.created_at, &b.job_id)));
        jobs
    }

    /// The job's state, from its runs: queued until one starts, running
    /// while any is not terminal, then completed (every run did), failed
    /// (one failed, timed out or was interrupted) or cancelled (stopped).
    pub fn state(&self) -> JobState {
        let states = self.runs.iter().map(|run| run.state);
        if states.clone().all(|state| state == RunState::Queued) {
            return JobState::Queued;
        }
        if states.clone().any(|state| !state.is_terminal()) {
            return JobState::Running;
        }
        if states.clone().all(|state| state == RunState::Completed) {
            JobState::Completed
        } else if self.stopped_at.is_some()
            || states
                .clone()
                .all(|state| matches!(state, RunState::Completed | RunState::Cancelled))
        {
            JobState::Cancelled
        } else {
            JobState::Failed
        }
    }

    /// The chain step running or next to run.
    fn chain_step(&self) -> Option<u32> {
        (self.strategy == JobStrategy::Chain).then(|| {
            self.runs.iter().find(|run| !run.state.is_terminal()).map_or_else(
                || self.runs.iter().filter(|run| run.started_at.is_some()).count() as u32,
                |run| run.index,
            )
        })
    }

    /// The job as its owning parent sees it (final texts included).
    pub fn snapshot(&self) -> JobSnapshot {
        JobSnapshot {
            job_id: self.job_id.clone(),
            parent_agent_id: self.parent_agent_id.clone(),
            strategy: self.strategy,
            state: self.state(),
            runs: self.runs.iter().map(|run| run.snapshot(&self.job_id)).collect(),
            chain_step: self.chain_step(),
            stopped_at: self.stopped_at,
            created_at: self.created_at,
            ended_at: self.ended_at,
        }
    }
}

impl RunRecord {
    /// A new run, queued, with a fresh id (index 0, no display names).
    pub fn queued(name: String, agent_id: String, alias: String, task: String) -> Self {
        Self {
            run_id: format!("run-{}", crate::id::random_hex()),
            index: 0,
            name,
            agent_id,
            alias,
            definition_name: None,
            display_name: None,
            task,
            state: RunState::Queued,
            deadline: None,
            final_text: None,
            usage: None,
            error: None,
            started_at: None,
            ended_at: None,
            turn_id: None,
            steers: Vec::new(),
        }
    }

    pub fn snapshot(&self, job_id: &str) -> RunSnapshot {
        RunSnapshot {
            job_id: job_id.to_owned(),
            run_id: self.run_id.clone(),
            index: self.index,
            name: self.name.clone(),
            agent_id: Some(self.agent_id.clone()),
            alias: Some(self.alias.clone()),
            definition_name: self.definition_name.clone(),
            display_name: self.display_name.clone(),
            state: self.state,
            deadline: self.deadline,
            final_text: self.final_text.clone(),
            usage: self.usage.clone(),
            error: self.error.clone(),
            started_at: self.started_at,
            ended_at: self.ended_at,
        }
    }

    /// The `subagent_run_changed` event of a move from `previous`.
    pub fn changed(&self, job: &JobRecord, previous: Option<RunState>) -> SubagentRunChanged {
        SubagentRunChanged {
            parent_agent_id: job.parent_agent_id.clone(),
            job_id: job.job_id.clone(),
            run_id: self.run_id.clone(),
            agent_id: Some(self.agent_id.clone()),
            alias: Some(self.alias.clone()),
            definition_name: self.definition_name.clone(),
            display_name: self.display_name.clone(),
            state: self.state,
            previous_state: previous,
            error: self.error.clone(),
            ended_at: self.ended_at,
        }
    }
}
