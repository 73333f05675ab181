//! Two small per-process memories the hot read paths share, so that the
//! database is asked neither to verify the same secret nor to write the same
//! "last seen" time many times a second:
//! - [`Believed`]: checks that passed, believed for [`BELIEVED_FOR`] without
//!   asking again (by a secret's SHA-256, never the secret). A revocation on
//!   this process forgets the entry at once; another replica stops believing
//!   it when the entry is older than [`BELIEVED_FOR`], so a revocation takes
//!   effect everywhere within a second.
//! - [`Unwritten`]: the latest time of something per id (an API token's last
//!   use, a host's last report), written in one batch by the server's round.
//!
//! A plain map behind a mutex serves: entries are only made for checks that
//! passed (a stranger's guesses add nothing), the critical sections are a
//! lookup or an insert, and [`MAX_BELIEVED`] bounds it anyway.

use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How long a check that passed is believed without asking the database.
pub const BELIEVED_FOR: Duration = Duration::seconds(1);

/// At most this many checks are remembered; beyond it, stale entries are
/// dropped first, then all.
pub const MAX_BELIEVED: usize = 10_000;

/// A poisoned lock only means another thread panicked mid-update of a
/// cache; the map itself is still a valid map.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fresh(checked_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= checked_at && now - checked_at < BELIEVED_FOR
}

/// Checks that passed, by the hash of what was checked.
#[derive(Debug)]
pub(crate) struct Believed<V> {
    map: Mutex<HashMap<String, (V, DateTime<Utc>)>>,
}

impl<V> Default for Believed<V> {
    fn default() -> Self {
        Self {
            map: Mutex::default(),
        }
    }
}

impl<V: Clone> Believed<V> {
    /// What `hash` verified as, if it did less than [`BELIEVED_FOR`] ago.
    pub(crate) fn cached(&self, hash: &str, now: DateTime<Utc>) -> Option<V> {
        lock(&self.map)
            .get(hash)
            .filter(|(_, at)| fresh(*at, now))
            .map(|(v, _)| v.clone())
    }

    /// Remembers that `hash` verified as `v` at `now`.
    pub(crate) fn remember(&self, hash: String, v: V, now: DateTime<Utc>) {
        let mut map = lock(&self.map);
        if map.len() >= MAX_BELIEVED {
            map.retain(|_, (_, at)| fresh(*at, now));
            if map.len() >= MAX_BELIEVED {
                map.clear();
            }
        }
        map.insert(hash, (v, now));
    }

    /// Forgets every entry `gone` picks (revoked here).
    pub(crate) fn forget(&self, gone: impl Fn(&V) -> bool) {
        lock(&self.map).retain(|_, (v, _)| !gone(v));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.map).len()
    }
}

/// The latest time per id, not yet written.
#[derive(Debug, Default)]
pub(crate) struct Unwritten {
    map: Mutex<HashMap<i64, DateTime<Utc>>>,
}

impl Unwritten {
    /// Notes `id` at `at` (a later note wins).
    pub(crate) fn note(&self, id: i64, at: DateTime<Utc>) {
        let mut map = lock(&self.map);
        let latest = map.entry(id).or_insert(at);
        *latest = (*latest).max(at);
    }

    /// The noted, unwritten time of `id`.
    pub(crate) fn get(&self, id: i64) -> Option<DateTime<Utc>> {
        lock(&self.map).get(&id).copied()
    }

    /// Takes the noted times to write them.
    pub(crate) fn take(&self) -> HashMap<i64, DateTime<Utc>> {
        std::mem::take(&mut *lock(&self.map))
    }

    /// Puts back times that could not be written (newer notes win).
    pub(crate) fn restore(&self, times: HashMap<i64, DateTime<Utc>>) {
        for (id, at) in times {
            self.note(id, at);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()
    }

    #[test]
    fn a_check_is_believed_for_a_second_and_forgotten_on_revocation() {
        let c = Believed::<i64>::default();
        c.remember("h1".into(), 1, t0());
        c.remember("h2".into(), 2, t0());
        assert_eq!(c.cached("h1", t0()), Some(1));
        let almost = t0() + Duration::milliseconds(999);
        assert!(c.cached("h1", almost).is_some());
        assert!(c.cached("h1", t0() + BELIEVED_FOR).is_none());
        // A clock that went back does not extend belief.
        assert!(c.cached("h1", t0() - Duration::seconds(5)).is_none());
        assert!(c.cached("unknown", t0()).is_none());
        c.forget(|v| *v == 1);
        assert!(c.cached("h1", t0()).is_none());
        assert!(c.cached("h2", t0()).is_some());
    }

    #[test]
    fn the_map_stays_bounded() {
        let c = Believed::<usize>::default();
        for i in 0..MAX_BELIEVED + 5 {
            c.remember(format!("h{i}"), i, t0());
        }
        assert!(c.len() <= MAX_BELIEVED);
        // The newest is always kept.
        let last = format!("h{}", MAX_BELIEVED + 4);
        assert!(c.cached(&last, t0()).is_some());
    }

    #[test]
    fn times_keep_the_latest_and_survive_a_failed_write() {
        let c = Unwritten::default();
        c.note(7, t0() + Duration::seconds(3));
        c.note(7, t0());
        assert_eq!(c.get(7), Some(t0() + Duration::seconds(3)));
        let taken = c.take();
        assert_eq!(taken.len(), 1);
        assert_eq!(c.get(7), None);
        c.note(7, t0() + Duration::seconds(9));
        c.restore(taken);
        assert_eq!(c.get(7), Some(t0() + Duration::seconds(9)));
    }
}
