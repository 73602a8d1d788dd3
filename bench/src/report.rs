//! How the scenarios print their figures: Shard's against the relay's as a
//! ratio, durations in milliseconds, rates in thousands or millions a
//! second. Every scenario's table uses these, so the columns read alike.

use std::time::Duration;

/// Shard's figure over the relay's (`-` when the relay's is zero).
/// The middle of `values` (the upper middle of an even count), sorting them.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn ratio(shard: f64, baseline: f64) -> String {
    if baseline > 0.0 { format!("{:.2}x", shard / baseline) } else { "-".to_owned() }
}

pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

pub fn per_second(value: f64) -> String {
    if value >= 1e6 { format!("{:.2} M/s", value / 1e6) } else { format!("{:.0} k/s", value / 1e3) }
}
