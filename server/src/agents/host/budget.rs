//! The agent's budget, as its host holds to it (docs/PROTOCOL-NOTES.md,
//! "Budgets"): whether the agent process was told to hold its model calls
//! (`hold`), and the daemon's question to raise the budget that holds it,
//! asked once the agent paused with work waiting and withdrawn once
//! something else released it (a raise from another agent's question or
//! `budget.set`, a new period).

use serde_json::json;
use shard_protocol::ClientMessage;
use shard_protocol::agent::{
    ChoiceIntent, Decision, DetailFormat, PermissionChoice, PermissionDetail, PermissionRequest,
};
use shard_protocol::budget::{
    BUDGET_TOOL, BudgetKey, BudgetPeriod, BudgetScope, BudgetStatus, Hold,
};

use super::out::{Out, Then};
use crate::agents::budgets::Budgets;
use crate::agents::budgets::rules::raised;
use crate::agents::runtime::Asked;

const CHOICE_RAISE: &str = "raise";
const CHOICE_KEEP: &str = "keep-paused";
/// The prefix of every budget question's id.
const QUESTION_PREFIX: &str = "budget-";

#[derive(Default)]
pub(super) struct Budget {
    /// What the running process was last told: held, and why.
    told: Option<String>,
    /// The budget question open, and the budget it raises.
    question: Option<(String, BudgetKey)>,
}

impl Budget {
    /// What holding the agent as its budgets say now takes: a `hold` for
    /// a `ready` process told otherwise, and once nothing holds it, the
    /// question left open withdrawn.
    pub fn review(&mut self, budgets: &Budgets, agent_id: &str, ready: bool) -> Vec<Out> {
        let holding = budgets.hold(agent_id, crate::clock::now_ms());
        let mut out = Vec::new();
        if ready && let Some(hold) = self.hold(holding.as_ref()) {
            out.push(Out::Send(hold, Then::Nothing));
        }
        if holding.is_none()
            && let Some(request_id) = self.released()
        {
            out.push(Out::Withdraw(request_id));
        }
        out
    }

    /// The question to raise the budget holding the paused agent, and
    /// where its answer goes (a raise, when it says so); nothing when no
    /// budget holds it or the last question asked is still `open`.
    pub fn ask(
        &mut self,
        budgets: &std::sync::Arc<Budgets>,
        agent_id: &str,
        open: impl Fn(&str) -> bool,
    ) -> Option<Asked> {
        let holding = budgets.hold(agent_id, crate::clock::now_ms())?;
        let request = self.question_for(&holding, open)?;
        let (budgets, key) = (budgets.clone(), holding.key());
        let answer: crate::agents::runtime::Answer = Box::new(move |answer| {
            let raised = raises(answer).then(|| budgets.raise(&key, crate::clock::now_ms()));
            if let Some(Err(error)) = raised {
                tracing::error!(%error, "cannot raise the budget");
            }
        });
        Some(Asked { request, answer })
    }

    /// A new process knows of no hold until told.
    pub fn process_started(&mut self) {
        self.told = None;
    }

    /// The `hold` to send the running process so that it holds as
    /// `holding` says, if it was told otherwise.
    fn hold(&mut self, holding: Option<&BudgetStatus>) -> Option<ClientMessage> {
        let reason = holding.map(reason);
        if reason == self.told {
            return None;
        }
        self.told.clone_from(&reason);
        Some(ClientMessage::Hold(Hold { held: reason.is_some(), reason }))
    }

    /// The question to ask now that the agent paused at `holding`, unless
    /// the last one asked is still `open`.
    fn question_for(
        &mut self,
        holding: &BudgetStatus,
        open: impl Fn(&str) -> bool,
    ) -> Option<PermissionRequest> {
        if self.question.as_ref().is_some_and(|(request_id, _)| open(request_id)) {
            return None;
        }
        let request_id = format!("{QUESTION_PREFIX}{}", crate::id::random_hex());
        self.question = Some((request_id.clone(), holding.key()));
        Some(question(&request_id, holding))
    }

    /// Nothing holds the agent any more: the question to withdraw, if one
    /// is open.
    fn released(&mut self) -> Option<String> {
        self.question.take().map(|(request_id, _)| request_id)
    }
}

/// Why a budget holds the agent, as its `status` detail says.
fn reason(status: &BudgetStatus) -> String {
    format!("{} reached ({})", name(status), spent(status))
}

/// The budget, as a person reads it.
fn name(status: &BudgetStatus) -> String {
    let period = match status.period {
        BudgetPeriod::Month => "monthly",
        _ => "daily",
    };
    match (status.scope, &status.agent_id, &status.workspace_id) {
        (BudgetScope::Agent, Some(agent), _) => format!("agent {agent}'s {period} budget"),
        (BudgetScope::Workspace, _, Some(workspace)) => {
            format!("workspace {workspace}'s {period} budget")
        }
        _ => format!("the daemon's {period} budget"),
    }
}

/// What was spent against which cap.
fn spent(status: &BudgetStatus) -> String {
    let mut parts = Vec::new();
    if let Some(cap) = status.cap_usd {
        parts.push(format!("${:.2} of ${cap:.2}", status.spent_usd));
    }
    if let Some(cap) = status.cap_tokens {
        parts.push(format!("{} of {cap} tokens", status.spent_tokens));
    }
    parts.join(", ")
}

/// The question a person sees: raise the cap for this period and go on,
/// or keep the agent paused.
fn question(request_id: &str, status: &BudgetStatus) -> PermissionRequest {
    let to = raised(status);
    let mut raised_to = Vec::new();
    if let Some(usd) = to.usd {
        raised_to.push(format!("${usd:.2}"));
    }
    if let Some(tokens) = to.tokens {
        raised_to.push(format!("{tokens} tokens"));
    }
    let until = match status.period {
        BudgetPeriod::Month => "this month",
        _ => "today",
    };
    let detail = |label: &str, value| PermissionDetail::labelled(label, value, DetailFormat::Text);
    let choice = PermissionChoice::keyed;
    let raise = format!("Raise it to {} {until}, and go on", raised_to.join(" and "));
    PermissionRequest {
        request_id: request_id.to_owned(),
        tool_name: BUDGET_TOOL.to_owned(),
        input: json!({
            "scope": status.scope,
            "agent_id": status.agent_id,
            "workspace_id": status.workspace_id,
            "period": status.period,
            "cap_usd": to.usd,
            "cap_tokens": to.tokens,
        }),
        prompt: format!(
            "The {} is reached: this agent paused before its next model call.",
            name(status).trim_start_matches("the ")
        ),
        options: vec![Decision::Allow, Decision::Deny],
        details: Some(vec![
            detail("budget", name(status)),
            detail("spent", spent(status)),
            detail("raised to", raised_to.join(", ")),
        ]),
        choices: Some(vec![
            choice(CHOICE_RAISE, raise, "y", ChoiceIntent::Allow),
            choice(CHOICE_KEEP, "Keep it paused".to_owned(), "n", ChoiceIntent::Deny),
        ]),
    }
}

/// Whether an answer to the budget question raises the budget.
fn raises(answer: &shard_protocol::agent::PermissionAnswer) -> bool {
    use shard_protocol::agent::PermissionAnswer;
    match answer {
        PermissionAnswer::Decision(decision) => *decision != Decision::Deny,
        PermissionAnswer::Choice(choice) => choice == CHOICE_RAISE,
    }
}

#[cfg(test)]
mod tests {
    use shard_protocol::budget::{BudgetState, CapSource};

    use super::*;

    fn reached() -> BudgetStatus {
        BudgetStatus {
            scope: BudgetScope::Daemon,
            agent_id: None,
            workspace_id: None,
            period: BudgetPeriod::Day,
            cap_usd: Some(1.0),
            cap_tokens: Some(1000),
            spent_usd: 1.25,
            spent_tokens: 10,
            unpriced_calls: 0,
            state: BudgetState::Reached,
            source: CapSource::Config,
            period_start: 0,
            resets_at: 1,
        }
    }

    #[test]
    fn a_hold_is_told_once_and_again_to_a_new_process_and_one_question_is_asked() {
        let mut budget = Budget::default();
        assert!(budget.hold(None).is_none(), "nothing to tell a process never held");
        let held = budget.hold(Some(&reached())).expect("told");
        let ClientMessage::Hold(hold) = held else { panic!() };
        assert!(hold.held);
        assert_eq!(
            hold.reason.as_deref(),
            Some("the daemon's daily budget reached ($1.25 of $1.00, 10 of 1000 tokens)")
        );
        assert!(budget.hold(Some(&reached())).is_none(), "told once");
        budget.process_started();
        assert!(budget.hold(Some(&reached())).is_some(), "a new process is told again");

        let question = budget.question_for(&reached(), |_| false).expect("asked");
        assert!(budget.question_for(&reached(), |_| true).is_none(), "one question at a time");
        assert_eq!(question.tool_name, "budget");
        assert_eq!(question.input["cap_usd"], json!(2.25), "another cap's worth from the spend");
        assert_eq!(question.input["cap_tokens"], json!(1000), "a cap not reached stays");
        let choices = question.choices.as_ref().unwrap();
        assert_eq!(choices[0].label, "Raise it to $2.25 and 1000 tokens today, and go on");
        assert!(raises(&shard_protocol::agent::PermissionAnswer::Choice("raise".into())));
        assert!(!raises(&shard_protocol::agent::PermissionAnswer::Choice(CHOICE_KEEP.into())));

        let ClientMessage::Hold(released) = budget.hold(None).expect("released") else { panic!() };
        assert!(!released.held);
        let asked_again = budget.question_for(&reached(), |_| false).expect("the last one closed");
        assert_eq!(budget.released(), Some(asked_again.request_id));
        assert_eq!(budget.released(), None);
    }
}
