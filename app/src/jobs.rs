//! Every subagent job the page knows (PROTOCOL.md §10.3, docs/JOBS.md):
//! fetched for each parent the agent list names, kept current by
//! `subagent_run_changed` (which every connection receives), and asked
//! for again when a run ends (for its final text, usage and the job's
//! own state).

use std::collections::BTreeMap;

use leptos::prelude::*;
use shard_protocol::ClientMessage;
use shard_protocol::message::Response;
use shard_protocol::subagent::{
    JobSnapshot, RunSnapshot, SubagentRunChanged, SubagentStatus, SubagentStatusResult,
    SubagentStop,
};

use crate::link::{Link, Request};

#[derive(Clone, Copy)]
pub struct Jobs {
    /// Every job the page knows, by id.
    pub all: RwSignal<BTreeMap<String, JobSnapshot>>,
    link: Link,
}

impl Jobs {
    pub fn new(link: Link) -> Self {
        Self { all: RwSignal::new(BTreeMap::new()), link }
    }

    /// Asks for `parent`'s latest jobs (their runs' states, usage, texts).
    pub fn fetch(&self, parent: &str) {
        let status = SubagentStatus { parent_agent_id: parent.to_owned(), targets: None };
        self.link.send(ClientMessage::SubagentStatus(status), None, Request::Jobs);
    }

    /// Stops one of `parent`'s jobs or runs (`handle`).
    pub fn stop(&self, parent: &str, handle: &str) {
        let stop = SubagentStop { parent_agent_id: parent.to_owned(), handle: handle.to_owned() };
        self.link.send(ClientMessage::SubagentStop(stop), None, Request::Command);
    }

    /// `agent_id`'s queued or active run, else its latest one (tracked).
    pub fn run_of(&self, agent_id: &str) -> Option<RunSnapshot> {
        self.all.with(|jobs| latest_run(jobs, agent_id))
    }

    /// The answer to `subagent.status`: its jobs replace the page's.
    pub fn answered(&self, response: &Response) {
        if let Ok(result) = response.data::<SubagentStatusResult>() {
            self.all.update(|known| {
                for job in result.jobs.unwrap_or_default() {
                    known.insert(job.job_id.clone(), job);
                }
            });
        }
    }

    /// A run moved: shown at once; the parent's jobs are fetched again when
    /// the job is new to the page or the run has ended.
    pub fn run_changed(&self, changed: SubagentRunChanged) {
        let mut known = false;
        self.all.update(|jobs| {
            let run = jobs
                .get_mut(&changed.job_id)
                .and_then(|job| job.runs.iter_mut().find(|run| run.run_id == changed.run_id));
            if let Some(run) = run {
                known = true;
                run.state = changed.state;
                run.error.clone_from(&changed.error);
                run.ended_at = changed.ended_at.or(run.ended_at);
            }
        });
        if !known || changed.state.is_terminal() {
            self.fetch(&changed.parent_agent_id);
        }
    }
}

/// The agent's queued or active run, else the one of its newest job.
fn latest_run(jobs: &BTreeMap<String, JobSnapshot>, agent_id: &str) -> Option<RunSnapshot> {
    let mut latest: Option<(u64, &RunSnapshot)> = None;
    for job in jobs.values() {
        for run in job.runs.iter().filter(|run| run.agent_id.as_deref() == Some(agent_id)) {
            if !run.state.is_terminal() {
                return Some(run.clone());
            }
            if latest.is_none_or(|(created, _)| job.created_at >= created) {
                latest = Some((job.created_at, run));
            }
        }
    }
    latest.map(|(_, run)| run.clone())
}
