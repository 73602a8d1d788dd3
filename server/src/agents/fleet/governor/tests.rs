use std::time::Duration;

use shard_platform::limits::Limits;
use tokio::time::Instant;

use super::{Order, Picture, admit, review};

const MB: u64 = 1024 * 1024;

/// An awake agent holding `mb` MB, used `ago` seconds before the others'
/// reference instant.
fn agent(id: &str, idle: bool, mb: u64, ago: u64) -> Picture {
    let base = Instant::now() + Duration::from_secs(1000);
    Picture {
        agent_id: id.to_owned(),
        awake: true,
        idle,
        pss_bytes: mb * MB,
        last_used: base - Duration::from_secs(ago),
    }
}

fn hibernated(orders: &[Order]) -> Vec<&str> {
    orders
        .iter()
        .filter_map(|order| match order {
            Order::Hibernate { agent_id, .. } => Some(agent_id.as_str()),
            Order::Stop { .. } => None,
        })
        .collect()
}

#[test]
fn no_limits_admit_everything_and_order_nothing() {
    let fleet = [agent("a", false, 900, 1), agent("b", true, 900, 2)];
    assert_eq!(admit(&Limits::default(), "c", &fleet), Ok(Vec::new()));
    assert_eq!(review(&Limits::default(), &fleet), Vec::new());
}

#[test]
fn a_start_over_the_awake_limit_hibernates_the_least_recently_used_idle_agent() {
    let limits = Limits { max_awake_agents: 2, ..Limits::default() };
    let fleet =
        [agent("busy", false, 10, 100), agent("old", true, 10, 50), agent("new", true, 10, 5)];
    let orders = admit(&limits, "c", &fleet).expect("room is made");
    assert_eq!(hibernated(&orders), ["old", "new"], "three awake, one more: two go");
    let fleet = [agent("busy", false, 10, 100), agent("old", true, 10, 50)];
    let orders = admit(&limits, "c", &fleet).expect("room is made");
    assert_eq!(hibernated(&orders), ["old"]);
    let Order::Hibernate { reason, .. } = &orders[0] else { panic!() };
    assert!(reason.contains("at most 2 agents") && reason.contains("for c"), "{reason}");
    // The agent starting is not counted against itself.
    assert_eq!(admit(&limits, "old", &fleet), Ok(Vec::new()));
}

#[test]
fn a_start_with_nobody_idle_to_hibernate_is_refused_naming_the_busy_ones() {
    let limits = Limits { max_awake_agents: 2, ..Limits::default() };
    let fleet = [agent("a", false, 10, 1), agent("b", false, 10, 2)];
    let refused = admit(&limits, "c", &fleet).expect_err("no room").to_string();
    assert!(refused.contains("2 agents are awake"), "{refused}");
    assert!(refused.contains("a") && refused.contains("b"), "{refused}");
}

#[test]
fn the_hard_ceiling_hibernates_idle_agents_then_refuses_saying_who_holds_it() {
    let limits = Limits { memory_hard_mb: 100, ..Limits::default() };
    let fleet = [agent("big", false, 70, 1), agent("idle", true, 40, 9)];
    let orders = admit(&limits, "c", &fleet).expect("the idle one makes room");
    assert_eq!(hibernated(&orders), ["idle"]);
    let fleet = [agent("big", false, 70, 1), agent("busy", false, 40, 9)];
    let refused = admit(&limits, "c", &fleet).expect_err("all busy").to_string();
    assert!(refused.contains("hold 110 MB") && refused.contains("(100 MB)"), "{refused}");
    assert!(refused.find("big 70 MB") < refused.find("busy 40 MB"), "most first: {refused}");
    let fleet = [agent("small", false, 30, 1)];
    assert_eq!(admit(&limits, "c", &fleet), Ok(Vec::new()), "under the ceiling");
}

#[test]
fn an_agent_over_its_own_ceiling_is_stopped_whatever_it_is_doing() {
    let limits = Limits { agent_memory_mb: 512, ..Limits::default() };
    let fleet = [agent("hog", false, 600, 1), agent("fine", true, 500, 1)];
    let orders = review(&limits, &fleet);
    let [Order::Stop { agent_id, reason }] = &orders[..] else { panic!("{orders:?}") };
    assert_eq!(agent_id, "hog");
    assert!(reason.contains("600 MB") && reason.contains("512 MB"), "{reason}");
}

#[test]
fn over_the_soft_ceiling_idle_agents_hibernate_until_under_it() {
    let limits = Limits { memory_soft_mb: 100, ..Limits::default() };
    let fleet = [
        agent("busy", false, 60, 100),
        agent("oldest", true, 30, 90),
        agent("older", true, 30, 50),
        agent("recent", true, 30, 1),
    ];
    // 150 MB held: the two least recently used idle ones bring it to 90.
    assert_eq!(hibernated(&review(&limits, &fleet)), ["oldest", "older"]);
    let asleep = [agent("busy", false, 60, 1), Picture { awake: false, ..agent("x", true, 0, 1) }];
    assert_eq!(review(&limits, &asleep), Vec::new());
}
