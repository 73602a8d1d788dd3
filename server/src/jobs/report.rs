//! The completion report: when a run ends, its parent's conversation is
//! told so in a structured message (which run, how it ended, its usage and
//! its final text quoted line by line), steered into the parent's running
//! turn or, when it is idle, prompting the next one.

use std::sync::Arc;

use shard_protocol::ClientMessage;
use shard_protocol::agent::{Prompt, StreamingBehavior};

use super::record::{JobRecord, RunRecord};
use super::{Jobs, state_name};
use crate::agents::host::HostCommand;
use crate::agents::{Subscriber, SubscriberId, Wire};

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

impl Jobs {
    /// The completion report: a structured message into the parent's
    /// conversation, steered into its turn if one is running, else a
    /// prompt that restores and wakes it.
    pub(super) fn report(&self, job: &JobRecord, run: &RunRecord) {
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
}

/// The report a parent's conversation receives when a run ends. Every line
/// after the first is quoted, so nothing in a child's answer reads as a
/// directive.
fn report_text(job: &JobRecord, run: &RunRecord) -> String {
    let mut text = format!(
        "[subagent report] subagent `{}` ({}, run {} of job {}) {}",
        run.alias(),
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
