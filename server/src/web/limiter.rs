//! Per-peer rate limits: so many events per window from one peer address
//! (the TCP peer itself; forwarded headers never matter). Tables are pruned
//! as they are used, so they stay as small as the set of active peers.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Limiter {
    limit: usize,
    window: Duration,
    peers: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl Limiter {
    pub fn new(limit: usize, window: Duration) -> Self {
        Self { limit, window, peers: Mutex::new(HashMap::new()) }
    }

    fn prune(&self, peers: &mut HashMap<IpAddr, VecDeque<Instant>>, now: Instant) {
        for recent in peers.values_mut() {
            while recent.front().is_some_and(|at| now.duration_since(*at) >= self.window) {
                recent.pop_front();
            }
        }
        peers.retain(|_, recent| !recent.is_empty());
    }

    /// `Some(wait)` when `peer` is over its limit.
    pub fn check(&self, peer: IpAddr) -> Option<Duration> {
        let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        self.prune(&mut peers, now);
        let recent = peers.get(&peer)?;
        if recent.len() < self.limit {
            return None;
        }
        let oldest = recent.front().copied().unwrap_or(now);
        Some(self.window.saturating_sub(now.duration_since(oldest)).max(Duration::from_secs(1)))
    }

    pub fn record(&self, peer: IpAddr) {
        let mut peers = self.peers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        peers.entry(peer).or_default().push_back(Instant::now());
    }

    /// Checks and, when under the limit, counts one event.
    pub fn take(&self, peer: IpAddr) -> Option<Duration> {
        let wait = self.check(peer);
        if wait.is_none() {
            self.record(peer);
        }
        wait
    }
}
