//! A budget's period: the calendar day or month, in the daemon's local
//! time, that an instant falls in — its key in the usage ledgers
//! (`2026-12-06`, `2026-12`), and when it began and ends.

use chrono::{DateTime, Datelike, Local, LocalResult, NaiveDate, TimeZone};
use shard_protocol::budget::BudgetPeriod;

/// The period of `period` holding `at` (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// How the ledgers name it.
    pub key: String,
    /// Its first instant, and the first instant after it (ms).
    pub start: u64,
    pub end: u64,
}

/// The day and the month `at` falls in, as the ledgers name them.
pub fn keys(at: u64) -> (String, String) {
    let date = local(at).date_naive();
    (date.format("%Y-%m-%d").to_string(), date.format("%Y-%m").to_string())
}

pub fn span(period: BudgetPeriod, at: u64) -> Span {
    let date = local(at).date_naive();
    let (first, next) = match period {
        BudgetPeriod::Month => {
            let first = date.with_day(1).unwrap_or(date);
            let next = match date.month() {
                12 => NaiveDate::from_ymd_opt(date.year() + 1, 1, 1),
                month => NaiveDate::from_ymd_opt(date.year(), month + 1, 1),
            };
            (first, next.unwrap_or(first))
        }
        BudgetPeriod::Day | BudgetPeriod::Unknown => (date, date.succ_opt().unwrap_or(date)),
    };
    let key = match period {
        BudgetPeriod::Month => first.format("%Y-%m").to_string(),
        BudgetPeriod::Day | BudgetPeriod::Unknown => first.format("%Y-%m-%d").to_string(),
    };
    Span { key, start: midnight(first), end: midnight(next) }
}

fn local(at: u64) -> DateTime<Local> {
    let at = i64::try_from(at).unwrap_or(i64::MAX);
    Local.timestamp_millis_opt(at).earliest().unwrap_or_else(Local::now)
}

/// The first instant of `date` here (a day a clock change skips midnight
/// of begins at the first instant it has).
fn midnight(date: NaiveDate) -> u64 {
    let naive = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    let at = match Local.from_local_datetime(&naive) {
        LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => at,
        LocalResult::None => {
            let later = naive + chrono::Duration::hours(1);
            Local.from_local_datetime(&later).earliest().unwrap_or_else(Local::now)
        }
    };
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_falls_in_one_day_and_one_month_which_hold_it() {
        let at = crate::clock::now_ms();
        let (day, month) = keys(at);
        let today = span(BudgetPeriod::Day, at);
        let this_month = span(BudgetPeriod::Month, at);
        assert_eq!((today.key.as_str(), this_month.key.as_str()), (day.as_str(), month.as_str()));
        assert!(today.start <= at && at < today.end, "{today:?}");
        assert!(this_month.start <= today.start && today.end <= this_month.end);
        assert!(day.starts_with(&month) && day.len() == 10 && month.len() == 7);
        // The next period starts where this one ends.
        assert_ne!(span(BudgetPeriod::Day, today.end).key, today.key);
        assert_eq!(span(BudgetPeriod::Day, today.end).start, today.end);
        assert_eq!(span(BudgetPeriod::Month, this_month.end).start, this_month.end);
        assert_eq!(span(BudgetPeriod::Day, today.end - 1).key, today.key);
    }
}
