use shard_protocol::budget::CapSource;
use shard_protocol::types::Usage;

use super::*;

const DAY: u64 = 86_400_000;

struct Book {
    _home: tempfile::TempDir,
    usage: Arc<UsageBook>,
    budgets: Budgets,
}

fn book(rules: &[(BudgetScope, Option<f64>, Option<u64>)]) -> Book {
    let home = tempfile::tempdir().expect("home");
    for agent in ["parent", "child", "other", "w1", "w2"] {
        std::fs::create_dir_all(crate::agents::manifest::agent_dir(home.path(), agent))
            .expect("dir");
    }
    let rules = rules
        .iter()
        .map(|&(scope, usd, tokens)| BudgetRule { scope, period: BudgetPeriod::Day, usd, tokens })
        .collect();
    let usage = Arc::new(UsageBook::new(home.path()));
    let budgets = Budgets::new(home.path(), rules, usage.clone());
    Book { _home: home, usage, budgets }
}

impl Book {
    fn spend(&self, agent_id: &str, usd: f64, tokens: u64, now: u64) -> Vec<BudgetStatus> {
        let call = Usage { input: tokens, output: 0, cost: Some(usd), ..Usage::default() };
        self.usage.call(agent_id, "s", &call, now);
        self.budgets.after_call(agent_id, now)
    }
}

fn states(changed: &[BudgetStatus]) -> Vec<(BudgetScope, Option<&str>, BudgetState)> {
    changed.iter().map(|status| (status.scope, status.agent_id.as_deref(), status.state)).collect()
}

#[test]
fn a_subagents_spend_counts_for_its_parent_which_is_told_at_80_percent_and_held_at_the_cap() {
    let book = book(&[(BudgetScope::Agent, Some(1.0), None)]);
    book.budgets.set_parent("child", Some("parent"));
    let now = crate::clock::now_ms();
    let moved = book.budgets.subscribe();
    assert!(book.spend("parent", 0.5, 10, now).is_empty(), "under 80 %: nothing to tell");
    let told = book.spend("child", 0.3, 10, now);
    assert_eq!(states(&told), [(BudgetScope::Agent, Some("parent"), BudgetState::Warning)]);
    assert!(book.budgets.hold("parent", now).is_none());
    assert!(!moved.has_changed().unwrap(), "a warning holds nobody");

    let told = book.spend("child", 0.25, 10, now);
    assert_eq!(states(&told), [(BudgetScope::Agent, Some("parent"), BudgetState::Reached)]);
    assert!(moved.has_changed().unwrap(), "the hosts look again");
    // The parent's cap holds the parent and its child; not another agent.
    let held = book.budgets.hold("child", now).expect("held");
    assert_eq!((held.agent_id.as_deref(), held.spent_usd), (Some("parent"), 1.05));
    assert!(book.budgets.hold("parent", now).is_some());
    assert!(book.budgets.hold("other", now).is_none());
    // The child's own budget counts only its own spend.
    let child = book.budgets.list(Some("child"), now);
    let own = child.iter().find(|status| status.agent_id.as_deref() == Some("child")).unwrap();
    assert_eq!((own.spent_usd, own.state), (0.55, BudgetState::Ok));
    assert!(book.spend("child", 0.01, 1, now).is_empty(), "told once");
}

#[test]
fn a_raise_lasts_the_period_a_set_cap_lasts_and_a_new_period_starts_over() {
    let book = book(&[(BudgetScope::Daemon, None, Some(100))]);
    let now = crate::clock::now_ms();
    book.spend("w1", 0.0, 120, now);
    let daemon = key(BudgetScope::Daemon, None, BudgetPeriod::Day);
    assert!(book.budgets.hold("w2", now).is_some(), "the daemon's cap holds every agent");

    let raised = book.budgets.raise(&daemon, now).expect("raised");
    assert_eq!(
        (raised.cap_tokens, raised.source, raised.state),
        (Some(220), CapSource::Raised, BudgetState::Ok)
    );
    assert!(book.budgets.hold("w1", now).is_none());
    // Tomorrow the raise is gone, and so is today's spend.
    let tomorrow = now + DAY + 1;
    let status = &book.budgets.list(None, tomorrow)[0];
    assert_eq!(
        (status.cap_tokens, status.source, status.spent_tokens),
        (Some(100), CapSource::Config, 0)
    );

    // A cap set for good outlives the period, and the daemon's restart.
    let set = BudgetSet {
        scope: BudgetScope::Daemon,
        agent_id: None,
        workspace_id: None,
        period: BudgetPeriod::Day,
        usd: None,
        tokens: Some(500),
        this_period: false,
        clear: false,
    };
    book.budgets.set(&set, |_| Ok(()), false, now).expect("set");
    let again = Budgets::new(book._home.path(), Vec::new(), book.usage.clone());
    let status = &again.list(None, tomorrow)[0];
    assert_eq!((status.cap_tokens, status.source), (Some(500), CapSource::Set));
    // From away, where a passkey would be needed, a raise is refused and a
    // cut is not.
    let raise = BudgetSet { tokens: Some(900), ..set.clone() };
    assert!(matches!(again.set(&raise, |_| Ok(()), true, now), Err(BudgetError::StepUp)));
    let cut = BudgetSet { tokens: Some(50), ..set.clone() };
    assert_eq!(again.set(&cut, |_| Ok(()), true, now).expect("cut").cap_tokens, Some(50));
    let clear = BudgetSet { clear: true, tokens: None, ..set };
    assert!(again.set(&clear, |_| Ok(()), true, now).is_ok());
    assert!(again.list(None, now).is_empty(), "no rule, no cap set: nothing to list");
}

#[test]
fn a_held_budget_is_released_when_its_period_ends() {
    let book = book(&[(BudgetScope::Workspace, Some(1.0), None)]);
    book.budgets.set_workspace("w1", "ws");
    book.budgets.set_parent("child", Some("w1"));
    let now = crate::clock::now_ms();
    let told = book.spend("child", 2.0, 1, now);
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].workspace_id.as_deref(), Some("ws"));
    assert!(book.budgets.hold("w1", now).is_some());
    assert!(book.budgets.hold("other", now).is_none(), "another workspace's agent");
    let reset = book.budgets.next_reset(now).expect("a reset due");
    assert!(reset > now && reset <= now + DAY + 3_600_000);
    let moved = book.budgets.subscribe();
    let told = book.budgets.review(reset);
    assert_eq!(states(&told), [(BudgetScope::Workspace, None, BudgetState::Ok)]);
    assert!(moved.has_changed().unwrap());
    assert!(book.budgets.hold("w1", reset).is_none());
    assert!(book.budgets.review(reset).is_empty());
}

#[test]
fn a_set_names_what_its_scope_needs() {
    let book = book(&[]);
    let now = crate::clock::now_ms();
    let set = |scope, agent: Option<&str>, workspace: Option<&str>, usd| BudgetSet {
        scope,
        agent_id: agent.map(str::to_owned),
        workspace_id: workspace.map(str::to_owned),
        period: BudgetPeriod::Month,
        usd,
        tokens: None,
        this_period: false,
        clear: false,
    };
    for (request, said) in [
        (set(BudgetScope::Agent, None, None, Some(1.0)), "agent_id"),
        (set(BudgetScope::Workspace, Some("a"), None, Some(1.0)), "workspace_id"),
        (set(BudgetScope::Daemon, None, Some("w"), Some(1.0)), "names no agent"),
        (set(BudgetScope::Daemon, None, None, None), "give `usd`"),
        (set(BudgetScope::Daemon, None, None, Some(-2.0)), "give `usd`"),
    ] {
        let error = book.budgets.set(&request, |_| Ok(()), false, now).expect_err(said);
        assert!(error.to_string().contains(said), "{error}");
    }
    let missing = |_: &BudgetKey| Err(BudgetError::NoAgent("x".into()));
    let error =
        book.budgets.set(&set(BudgetScope::Agent, Some("x"), None, Some(1.0)), missing, false, now);
    assert!(matches!(error, Err(BudgetError::NoAgent(_))));
    assert!(!book.budgets.any());
}
