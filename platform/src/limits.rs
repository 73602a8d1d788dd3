//! `[limits]` of `config.toml` (CONTRACT.md, "Fleet limits and budgets"):
//! how many agents may run at once and how much memory they may hold. A
//! zero is no limit. Memory is counted as the agents' proportional set
//! size (each shared page once), what stopping them would give back.
//!
//! `[[budgets]]`: caps on what agents spend per day or month, each for
//! every agent, every workspace or the daemon (a [`BudgetRule`]).

use serde::Deserialize;
use shard_protocol::budget::{BudgetPeriod, BudgetScope};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Agents whose process runs at once.
    pub max_awake_agents: u32,
    /// Over it, idle agents hibernate, least recently used first.
    pub memory_soft_mb: u64,
    /// A start that would pass it is refused, saying what holds the memory.
    pub memory_hard_mb: u64,
    /// An agent whose process tree passes it is stopped.
    pub agent_memory_mb: u64,
}

const MB: u64 = 1024 * 1024;

impl Limits {
    pub fn soft_bytes(&self) -> Option<u64> {
        (self.memory_soft_mb > 0).then(|| self.memory_soft_mb * MB)
    }

    pub fn hard_bytes(&self) -> Option<u64> {
        (self.memory_hard_mb > 0).then(|| self.memory_hard_mb * MB)
    }

    pub fn agent_bytes(&self) -> Option<u64> {
        (self.agent_memory_mb > 0).then(|| self.agent_memory_mb * MB)
    }

    pub fn max_awake(&self) -> Option<usize> {
        (self.max_awake_agents > 0).then_some(self.max_awake_agents as usize)
    }

    /// A soft ceiling above the hard one could never act.
    pub(crate) fn check(&self) -> anyhow::Result<()> {
        if let (Some(soft), Some(hard)) = (self.soft_bytes(), self.hard_bytes())
            && soft > hard
        {
            anyhow::bail!(
                "limits.memory_soft_mb ({}) is above limits.memory_hard_mb ({})",
                self.memory_soft_mb,
                self.memory_hard_mb
            );
        }
        Ok(())
    }
}

/// One `[[budgets]]` table: the cap of every budget of its scope and
/// period, until `budget.set` gives one of them another.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetRule {
    pub scope: BudgetScope,
    pub period: BudgetPeriod,
    #[serde(default)]
    pub usd: Option<f64>,
    #[serde(default)]
    pub tokens: Option<u64>,
}

/// Every budget rule must say what it caps, once per scope and period.
pub(crate) fn check_budgets(rules: &[BudgetRule]) -> anyhow::Result<()> {
    for (at, rule) in rules.iter().enumerate() {
        let which = format!("budgets[{at}]");
        if matches!(rule.scope, BudgetScope::Unknown) {
            anyhow::bail!("{which}: scope must be \"agent\", \"workspace\" or \"daemon\"");
        }
        if matches!(rule.period, BudgetPeriod::Unknown) {
            anyhow::bail!("{which}: period must be \"day\" or \"month\"");
        }
        if rule.usd.is_none() && rule.tokens.is_none() {
            anyhow::bail!("{which}: give `usd`, `tokens` or both");
        }
        if rule.usd.is_some_and(|usd| !usd.is_finite() || usd <= 0.0) || rule.tokens == Some(0) {
            anyhow::bail!("{which}: a cap must be more than 0");
        }
        if rules[..at].iter().any(|other| (other.scope, other.period) == (rule.scope, rule.period))
        {
            anyhow::bail!("{which}: a second budget for the same scope and period");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> anyhow::Result<Vec<BudgetRule>> {
        #[derive(Deserialize)]
        struct File {
            budgets: Vec<BudgetRule>,
        }
        let file: File = toml::from_str(toml_text)?;
        check_budgets(&file.budgets)?;
        Ok(file.budgets)
    }

    #[test]
    fn budgets_read_as_written_and_what_cannot_act_is_refused() {
        let read = rules(
            "[[budgets]]\nscope = \"agent\"\nperiod = \"day\"\nusd = 5.0\ntokens = 2000000\n\
             [[budgets]]\nscope = \"daemon\"\nperiod = \"month\"\ntokens = 9\n",
        )
        .expect("valid");
        assert_eq!(read[0].usd, Some(5.0));
        assert_eq!(
            (read[1].scope, read[1].period, read[1].usd),
            (BudgetScope::Daemon, BudgetPeriod::Month, None)
        );
        for (bad, said) in [
            ("scope = \"agent\"\nperiod = \"day\"", "give `usd`"),
            ("scope = \"agent\"\nperiod = \"week\"\nusd = 1.0", "period must be"),
            ("scope = \"team\"\nperiod = \"day\"\nusd = 1.0", "scope must be"),
            ("scope = \"agent\"\nperiod = \"day\"\nusd = -1.0", "more than 0"),
            ("scope = \"agent\"\nperiod = \"day\"\nusd = 1.0\ncost = 2", "unknown field"),
        ] {
            let error = rules(&format!("[[budgets]]\n{bad}\n")).expect_err(bad).to_string();
            assert!(error.contains(said), "{bad}: {error}");
        }
        let twice = "[[budgets]]\nscope = \"agent\"\nperiod = \"day\"\nusd = 1.0\n";
        let error = rules(&format!("{twice}{twice}")).expect_err("twice").to_string();
        assert!(error.contains("same scope and period"), "{error}");
    }
}
