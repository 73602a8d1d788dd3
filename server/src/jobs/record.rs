//! The durable job records: one file per job under `$SHARD_HOME/jobs/`
//! (0600), rewritten whole (atomically) after every transition, and the
//! snapshots the wire sees (§11.2), which never carry the private task.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use shard_protocol::identity::AgentIdentity;
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
    /// The child as this run names it: the run's name (its task's), the
    /// alias the child answers to among its siblings, and the names a
    /// parent's pool gave it. Read through [`RunRecord::name`] and
    /// [`RunRecord::alias`], which a run always has.
    #[serde(flatten)]
    pub child: AgentIdentity,
    pub agent_id: String,
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
    /// A new run of `agent_id` named as `child`, queued, with a fresh id
    /// (index 0).
    pub fn queued(agent_id: String, child: AgentIdentity, task: String) -> Self {
        Self {
            run_id: format!("run-{}", crate::id::random_hex()),
            index: 0,
            child,
            agent_id,
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

    /// The run's name: its task's, else what its child answers to.
    pub fn name(&self) -> &str {
        self.child.name.as_deref().unwrap_or_else(|| self.alias())
    }

    /// The alias its child answers to among its siblings, else its id.
    pub fn alias(&self) -> &str {
        self.child.alias.as_deref().unwrap_or(&self.agent_id)
    }

    pub fn snapshot(&self, job_id: &str) -> RunSnapshot {
        RunSnapshot {
            job_id: job_id.to_owned(),
            run_id: self.run_id.clone(),
            index: self.index,
            name: self.name().to_owned(),
            agent_id: Some(self.agent_id.clone()),
            alias: Some(self.alias().to_owned()),
            definition_name: self.child.definition_name.clone(),
            display_name: self.child.display_name.clone(),
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
            alias: Some(self.alias().to_owned()),
            definition_name: self.child.definition_name.clone(),
            display_name: self.child.display_name.clone(),
            state: self.state,
            previous_state: previous,
            error: self.error.clone(),
            ended_at: self.ended_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::RunRecord;

    fn run(names: serde_json::Value) -> serde_json::Value {
        let mut run = json!({
            "run_id": "run-1", "index": 0, "agent_id": "agent-2", "task": "t",
            "state": "queued",
        });
        run.as_object_mut().unwrap().extend(names.as_object().unwrap().clone());
        run
    }

    #[test]
    fn a_run_reads_and_writes_its_childs_names_beside_its_other_fields() {
        let written = run(json!({
            "name": "review", "alias": "Ada", "definition_name": "review",
            "display_name": "review · Ada",
        }));
        let record: RunRecord = serde_json::from_value(written.clone()).unwrap();
        assert_eq!((record.name(), record.alias()), ("review", "Ada"));
        let snapshot = record.snapshot("job-1");
        assert_eq!(snapshot.display_name.as_deref(), Some("review · Ada"));
        assert_eq!(serde_json::to_value(&record).unwrap(), written);
    }

    #[test]
    fn a_run_without_names_is_named_by_its_childs_id() {
        let record: RunRecord = serde_json::from_value(run(json!({}))).unwrap();
        assert_eq!((record.name(), record.alias()), ("agent-2", "agent-2"));
        let record: RunRecord = serde_json::from_value(run(json!({ "alias": "Ada" }))).unwrap();
        assert_eq!((record.name(), record.alias()), ("Ada", "Ada"));
    }
}
