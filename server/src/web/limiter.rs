//! Failure limits (CONTRACT.md, "Rate limits"): so many failures a window
//! per key. Only failures are counted, and checking and counting one is a
//! single step under one lock, so concurrent failures cannot all pass the
//! check before the limit holds. A caller that cannot know yet whether an
//! attempt fails (an enrollment code is checked slowly, off the lock)
//! reserves a failure first and gives it back if the attempt succeeds.
//!
//! Keys are clients ([`ClientKey`]: an IPv4 address, or an IPv6 /64, which
//! one host can fill) or `()` for a limit over everyone. The table is pruned
//! as it is used and never holds more than [`MAX_KEYS`] keys: past that,
//! new clients share one key, so a crowd of addresses costs bounded memory
//! and is limited together.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The most keys one limiter tracks at once.
pub const MAX_KEYS: usize = 10_000;

/// Who a failure is counted against: the address a client connects from, or
/// its IPv6 /64; [`ClientKey::Crowd`] once the table is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientKey {
    V4([u8; 4]),
    V6([u8; 8]),
    Crowd,
}

impl From<IpAddr> for ClientKey {
    fn from(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => Self::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::V4(v4.octets()),
                None => {
                    let mut prefix = [0; 8];
                    prefix.copy_from_slice(&v6.octets()[..8]);
                    Self::V6(prefix)
                }
            },
        }
    }
}

/// A key that can stand for every key past the table's size.
pub trait Key: Copy + Eq + Hash {
    fn crowd() -> Self;
}

impl Key for ClientKey {
    fn crowd() -> Self {
        Self::Crowd
    }
}

impl Key for () {
    fn crowd() -> Self {}
}

pub struct Limiter<K> {
    limit: usize,
    window: Duration,
    table: Mutex<Table<K>>,
}

struct Table<K> {
    keys: HashMap<K, VecDeque<Instant>>,
    /// When every key was last pruned: once a window, or once a second
    /// while the table is full, so a flood of failures costs one key's work
    /// each.
    swept: Instant,
}

impl<K: Key> Limiter<K> {
    pub fn new(limit: usize, window: Duration) -> Self {
        let table = Table { keys: HashMap::new(), swept: Instant::now() };
        Self { limit, window, table: Mutex::new(table) }
    }

    fn prune(&self, recent: &mut VecDeque<Instant>, now: Instant) {
        while recent.front().is_some_and(|at| now.duration_since(*at) >= self.window) {
            recent.pop_front();
        }
    }

    /// Counts one failure of `key`, or, when it already has its limit of
    /// them in the window, counts nothing and says how long to wait.
    pub fn fail(&self, key: K) -> Result<(), Duration> {
        self.count(key, Instant::now())
    }

    /// Counts a failure that the caller may give back: it holds against the
    /// limit until then, so attempts in flight are limited too.
    pub fn reserve(self: &Arc<Self>, key: K) -> Result<Reservation<K>, Duration> {
        let at = Instant::now();
        self.count(key, at)?;
        Ok(Reservation { limiter: self.clone(), key, at })
    }

    fn count(&self, key: K, now: Instant) -> Result<(), Duration> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let table = &mut *table;
        let since = now.duration_since(table.swept);
        let full = table.keys.len() >= MAX_KEYS;
        if since >= self.window || (full && since >= Duration::from_secs(1)) {
            table.keys.retain(|_, recent| {
                self.prune(recent, now);
                !recent.is_empty()
            });
            table.swept = now;
        }
        let known = table.keys.contains_key(&key);
        let key = if known || table.keys.len() < MAX_KEYS { key } else { K::crowd() };
        let recent = table.keys.entry(key).or_default();
        self.prune(recent, now);
        if recent.len() >= self.limit {
            let oldest = recent.front().copied().unwrap_or(now);
            let wait = self.window.saturating_sub(now.duration_since(oldest));
            return Err(wait.max(Duration::from_secs(1)));
        }
        recent.push_back(now);
        Ok(())
    }

    fn give_back(&self, key: K, at: Instant) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let crowd = K::crowd();
        for key in [key, crowd] {
            if let Some(recent) = table.keys.get_mut(&key)
                && let Some(index) = recent.iter().rposition(|&counted| counted == at)
            {
                recent.remove(index);
                return;
            }
        }
    }
}

/// A failure counted in advance; [`Reservation::give_back`] uncounts it
/// (the attempt succeeded, or was refused for another reason), dropping it
/// keeps it counted.
pub struct Reservation<K: Key> {
    limiter: Arc<Limiter<K>>,
    key: K,
    at: Instant,
}

impl<K: Key> Reservation<K> {
    pub fn give_back(self) {
        self.limiter.give_back(self.key, self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const TWO: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn failures_count_up_to_the_limit_per_key() {
        let limiter = Limiter::new(3, Duration::from_secs(60));
        for _ in 0..3 {
            assert_eq!(limiter.fail(ClientKey::from(ONE)), Ok(()));
        }
        let wait = limiter.fail(ClientKey::from(ONE)).expect_err("limited");
        assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60), "{wait:?}");
        assert_eq!(limiter.fail(ClientKey::from(TWO)), Ok(()));
    }

    #[test]
    fn a_reservation_given_back_does_not_count() {
        let limiter = Arc::new(Limiter::new(2, Duration::from_secs(60)));
        let key = ClientKey::from(ONE);
        for _ in 0..10 {
            limiter.reserve(key).expect("under the limit").give_back();
        }
        let first = limiter.reserve(key).expect("one");
        let second = limiter.reserve(key).expect("two");
        // Two attempts in flight hold the limit for a third.
        assert!(limiter.reserve(key).is_err());
        drop(first);
        second.give_back();
        assert!(limiter.reserve(key).is_ok());
        assert!(limiter.reserve(key).is_err());
    }

    #[test]
    fn one_ipv6_host_is_one_client_and_a_full_table_limits_newcomers_together() {
        let a: IpAddr = "2001:db8:1:2::1".parse().expect("v6");
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("v6");
        assert_eq!(ClientKey::from(a), ClientKey::from(b));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("mapped");
        assert_eq!(ClientKey::from(mapped), ClientKey::from(ONE));

        let limiter = Limiter::new(1, Duration::from_secs(60));
        for n in 0..MAX_KEYS as u32 {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            assert_eq!(limiter.fail(ClientKey::from(address)), Ok(()));
        }
        assert_eq!(limiter.fail(ClientKey::from(ONE)), Ok(()), "the crowd's first");
        assert!(limiter.fail(ClientKey::from(TWO)).is_err(), "the crowd is limited together");
    }

    #[test]
    fn concurrent_failures_never_pass_the_limit() {
        let limiter = Arc::new(Limiter::new(10, Duration::from_secs(60)));
        let passed = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..20 {
                        if let Ok(reservation) = limiter.reserve(()) {
                            passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            drop(reservation);
                        }
                    }
                });
            }
        });
        assert_eq!(passed.into_inner(), 10);
    }
}
