use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use shard_platform::resources::Snapshot;
use shard_protocol::fleet::{AgentResources, FleetUpdated, Resources};
use tokio::time::Instant;

use super::{Fleet, moved};
use crate::agents::Processes;

/// A process standing in for an agent's: a shell with a child of its own.
fn agent_process() -> Child {
    Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().expect("sh runs")
}

#[test]
fn an_agents_whole_tree_is_counted_until_it_ends() {
    let processes = Arc::new(Processes::default());
    let fleet = Fleet::new(processes.clone(), Default::default());
    let mut child = agent_process();
    processes.started(child.id(), "agent-a");
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();

    let first = fleet.sample(&Snapshot::take(), start, Vec::new()).expect("the first look is told");
    let [agent] = &first.agents[..] else { panic!("one agent: {first:?}") };
    assert_eq!(agent.agent_id, "agent-a");
    let resources = agent.resources;
    assert!(resources.rss_bytes > 100 * 1024, "sh and sleep are resident: {resources:?}");
    assert!(resources.pss_bytes > 0 && resources.pss_bytes <= resources.rss_bytes);
    assert_eq!(resources.cpu_percent, 0.0, "no interval yet");
    assert_eq!(first.agents_total, resources);
    assert!(first.daemon.rss_bytes > 1024 * 1024, "this process: {:?}", first.daemon);
    assert_eq!(fleet.resources("agent-a"), Some(resources));
    assert_eq!(fleet.resources("agent-b"), None);

    // Whether a second look is told depends on how this test process (the
    // daemon here) moved meanwhile; what the agent uses is kept either way.
    let later = start + Duration::from_secs(2);
    fleet.sample(&Snapshot::take(), later, Vec::new());
    assert!(fleet.resources("agent-a").is_some());

    child.kill().expect("kill");
    child.wait().expect("reaped");
    processes.ended(child.id());
    let gone =
        fleet.sample(&Snapshot::take(), later + Duration::from_secs(2), Vec::new()).expect("told");
    assert!(gone.agents.is_empty(), "{gone:?}");
    assert_eq!(fleet.resources("agent-a"), None);
}

fn update(agents: &[(&str, u64, f64)], daemon_rss: u64) -> FleetUpdated {
    let agents: Vec<AgentResources> = agents
        .iter()
        .map(|(agent_id, rss, cpu)| AgentResources {
            agent_id: (*agent_id).to_owned(),
            resources: Resources { rss_bytes: *rss, pss_bytes: *rss, cpu_percent: *cpu },
        })
        .collect();
    let daemon = Resources { rss_bytes: daemon_rss, pss_bytes: daemon_rss, cpu_percent: 0.0 };
    FleetUpdated { agents, agents_total: Resources::default(), daemon, ..Default::default() }
}

#[test]
fn only_a_step_or_a_change_of_agents_is_told() {
    const MB: u64 = 1024 * 1024;
    let told = update(&[("a", 10 * MB, 5.0)], 20 * MB);
    assert!(!moved(&told, &update(&[("a", 10 * MB + MB / 2, 6.5)], 20 * MB + 1000)));
    assert!(moved(&told, &update(&[("a", 11 * MB, 5.0)], 20 * MB)), "a megabyte more");
    assert!(moved(&told, &update(&[("a", 10 * MB, 7.0)], 20 * MB)), "two points of CPU");
    assert!(moved(&told, &update(&[("a", 10 * MB, 5.0)], 22 * MB)), "the daemon grew");
    assert!(moved(&told, &update(&[], 20 * MB)), "the agent stopped");
    assert!(moved(&told, &update(&[("b", 10 * MB, 5.0)], 20 * MB)), "another agent");
}
