//! The subagent jobs of the agent on screen (docs/JOBS.md): each job with
//! its strategy and state, each run with its child (a link to its own
//! transcript), state, duration and usage, and a stop button per run and
//! per job while there is something to stop.

use std::collections::BTreeMap;

use leptos::prelude::*;
use shard_protocol::subagent::{JobSnapshot, JobState, RunSnapshot};

use super::{run_label, state};

fn job_label(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "queued",
        JobState::Running => "running",
        JobState::Completed => "completed",
        JobState::Failed => "failed",
        JobState::Cancelled => "cancelled",
    }
}

fn strategy_label(job: &JobSnapshot) -> &'static str {
    match job.strategy {
        shard_protocol::subagent::JobStrategy::Single => "single",
        shard_protocol::subagent::JobStrategy::Parallel => "parallel",
        shard_protocol::subagent::JobStrategy::Chain => "chain",
    }
}

/// `1.2 s`, `3 min 5 s`: how long a finished run took.
fn duration(run: &RunSnapshot) -> Option<String> {
    let millis = run.ended_at?.checked_sub(run.started_at?)?;
    let seconds = millis / 1000;
    Some(if millis < 100 {
        "under 0.1 s".to_owned()
    } else if seconds < 60 {
        format!("{}.{} s", seconds, millis % 1000 / 100)
    } else {
        format!("{} min {} s", seconds / 60, seconds % 60)
    })
}

/// A job's key in the list: it changes with anything a job shows, so that
/// the job is drawn again then (and only then).
fn job_key(job: &JobSnapshot) -> String {
    let mut key = format!("{}/{}", job.job_id, job_label(job.state));
    for run in &job.runs {
        let (input, output) =
            run.usage.as_ref().map_or((0, 0), |usage| (usage.input, usage.output));
        key.push_str(&format!(
            "/{}:{}:{}:{input}:{output}:{}",
            run.run_id,
            run_label(run.state),
            run.ended_at.unwrap_or(0),
            run.error.as_deref().unwrap_or("")
        ));
    }
    key
}

/// `parent`'s jobs, newest first.
fn jobs_of(jobs: &BTreeMap<String, JobSnapshot>, parent: &str) -> Vec<JobSnapshot> {
    let mut list: Vec<JobSnapshot> =
        jobs.values().filter(|job| job.parent_agent_id == parent).cloned().collect();
    crate::order::sort_by_rank(&mut list, |job| (u64::MAX - job.created_at, job.job_id.clone()));
    list
}

/// The jobs of the agent on screen, newest first; nothing when it has none.
#[component]
pub fn JobsPanel() -> impl IntoView {
    let state = state();
    let (selected, all) = (state.screen.selected, state.jobs.all);
    let any = Memo::new(move |_| {
        let Some(selected) = selected.get() else { return false };
        all.with(|jobs| jobs.values().any(|job| job.parent_agent_id == selected))
    });
    super::deferred(move || any.get(), jobs_body)
}

#[cfg_attr(
    feature = "hydrate",
    leptos::wasm_split::wasm_split(jobs_body, wasm_split_path = ::leptos::wasm_split, fallible)
)]
fn jobs_body() -> Result<AnyView, super::Unloaded> {
    let state = state();
    let (selected, all) = (state.screen.selected, state.jobs.all);
    let jobs = Memo::new(move |_| match selected.get() {
        Some(selected) => all.with(|jobs| jobs_of(jobs, &selected)),
        None => Vec::new(),
    });
    Ok(view! {
        <Show when=move || jobs.with(|jobs| !jobs.is_empty())>
            <details class="jobs-panel" open>
                <summary>{move || format!("Subagent jobs ({})", jobs.with(Vec::len))}</summary>
                <ul class="jobs" aria-label="Subagent jobs">
                    <For each=move || jobs.get() key=job_key let:job>
                        <Job job=job/>
                    </For>
                </ul>
            </details>
        </Show>
    }
    .into_any())
}

#[component]
fn Job(job: JobSnapshot) -> impl IntoView {
    let jobs = state().jobs;
    let live = job.runs.iter().any(|run| !run.state.is_terminal());
    let stop = {
        let (parent, job_id) = (job.parent_agent_id.clone(), job.job_id.clone());
        move |_| jobs.stop(&parent, &job_id)
    };
    let spent: u64 = job
        .runs
        .iter()
        .filter_map(|run| run.usage.as_ref())
        .map(|usage| usage.input + usage.output)
        .sum();
    let runs = job
        .runs
        .iter()
        .cloned()
        .map(|run| view! { <Run parent=job.parent_agent_id.clone() run=run/> })
        .collect_view();
    view! {
        <li class="job" data-job-id=job.job_id.clone() data-state=job_label(job.state)>
            <div class="job-head">
                <span class="strategy">{strategy_label(&job)}</span>
                <span class="job-state">{job_label(job.state)}</span>
                <code class="job-id" title="job id">{job.job_id.clone()}</code>
                <Show when=move || { spent > 0 }>
                    <span class="job-usage" title="tokens its runs used">
                        {format!("{} tok", super::ledger::tokens(spent))}
                    </span>
                </Show>
                <Show when=move || live>
                    <button class="danger stop-job" on:click=stop.clone()>"Stop job"</button>
                </Show>
            </div>
            <ol class="runs">{runs}</ol>
        </li>
    }
}

#[component]
fn Run(parent: String, run: RunSnapshot) -> impl IntoView {
    let state = state();
    let alias = shard_protocol::display::escaped(run.alias.as_deref().unwrap_or(&run.name));
    let open = {
        let state = state.clone();
        let child = run.agent_id.clone();
        move |_| {
            if let Some(child) = &child {
                state.select(Some(child.clone()));
            }
        }
    };
    let stop = {
        let jobs = state.jobs;
        let run_id = run.run_id.clone();
        move |_| jobs.stop(&parent, &run_id)
    };
    let live = !run.state.is_terminal();
    // A child may delegate in turn: its jobs go on after its own run ended,
    // and are shown (and stopped) here, under it.
    let below = {
        let (all, child) = (state.jobs.all, run.agent_id.clone());
        Memo::new(move |_| match &child {
            Some(child) => all.with(|jobs| jobs_of(jobs, child)),
            None => Vec::new(),
        })
    };
    let nested_label = format!("Jobs of {alias}");
    let usage =
        run.usage.as_ref().map(|usage| format!("{} in · {} out", usage.input, usage.output));
    view! {
        <li class="run" data-run-id=run.run_id.clone() data-state=run_label(run.state)>
            <button class="link open-child" on:click=open aria-label=format!("Open subagent {alias}")>{alias.clone()}</button>
            <span class="run-state">{run_label(run.state)}</span>
            <span class="duration">{duration(&run)}</span>
            <span class="usage">{usage}</span>
            {run.error.clone().map(|error| view! { <span class="run-error">{error}</span> })}
            <Show when=move || live>
                <button class="danger stop-run" on:click=stop.clone() aria-label=format!("Stop {alias}")>"Stop"</button>
            </Show>
            <Show when=move || below.with(|jobs| !jobs.is_empty())>
                <ul class="jobs nested" aria-label=nested_label.clone()>
                    <For each=move || below.get() key=job_key let:job>
                        {view! { <Job job=job/> }.into_any()}
                    </For>
                </ul>
            </Show>
        </li>
    }
}
