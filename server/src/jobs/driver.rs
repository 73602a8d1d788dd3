//! The driver: one task per job that plays its runs out, side by side or
//! as a chain, each from `queued` through `starting` and `active` to its
//! end. A run's task goes to its child's host as one supervised turn; the
//! driver follows it, stops it when asked or past its deadline, and records
//! every move (written, then announced, then reported when terminal).
//! Cancelling runs, from a stop or a broken chain, is here too: it signals
//! the drivers of the runs it ends.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use shard_protocol::subagent::{CancelledRun, JobStrategy, RunState, RunUsage};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Jobs;
use super::catalog::Catalog;
use crate::agents::host::HostCommand;
use crate::agents::host::run::{RUN_EVENTS, RunEnd, RunEvent};

/// Each driven run's stop signal, by run id.
#[derive(Default)]
pub(super) struct Stops {
    signals: Mutex<HashMap<String, CancellationToken>>,
}

impl Stops {
    fn signals(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.signals.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn insert(&self, run_id: &str, stop: CancellationToken) {
        self.signals().insert(run_id.to_owned(), stop);
    }

    fn remove(&self, run_id: &str) {
        self.signals().remove(run_id);
    }

    /// Tells a run's driver to stop it (a run not driven has no signal).
    fn signal(&self, run_id: &str) {
        if let Some(stop) = self.signals().get(run_id) {
            stop.cancel();
        }
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

impl Jobs {
    /// Plays a job out: its runs side by side (single, parallel) or one
    /// after another, each fed the previous one's final text (chain).
    pub(super) async fn drive(self: Arc<Self>, job_id: String) {
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
            self.stops.insert(run_id, stop.clone());
            self.commit_move(&catalog, job_id, run_id, RunState::Queued, false).await;
            claimed
        };
        let (agent_id, task) = claimed;
        let end = self.supervise(job_id, run_id, &agent_id, task, &stop).await;
        self.stops.remove(run_id);
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
            self.leases.release(run);
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
    pub(super) async fn cancel(
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
            self.stops.signal(run_id);
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
