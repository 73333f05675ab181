//! Two small per-process memories the hot read paths share, so that the
//! database is asked neither to verify the same secret nor to write the same
//! "last seen" time many times a second:
//! - [`Believed`]: checks that passed, believed for a while without asking
//!   again (by a secret's SHA-256, never the secret). A revocation on this
//!   process forgets the entry at once, and a check that raced it is not
//!   remembered ([`Asked`]). API tokens are believed for [`BELIEVED_FOR`],
//!   so a revocation takes effect on every replica within a second even
//!   without the replicas' notice; host credentials longer, while the
//!   notices are heard (see [`crate::fleet`]'s heartbeat).
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

/// At most this many checks are remembered by default; beyond it, stale
/// entries are dropped first, then all.
pub const MAX_BELIEVED: usize = 10_000;

/// A poisoned lock only means another thread panicked mid-update of a
/// cache; the map itself is still a valid map.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fresh(checked_at: DateTime<Utc>, now: DateTime<Utc>, within: Duration) -> bool {
    now >= checked_at && now - checked_at < within
}

/// A check that found nothing believed and goes to the database: what it
/// finds is remembered only if nothing was forgotten meanwhile, so a
/// revocation that commits while the check reads the old row is never
/// believed afterwards.
#[derive(Debug)]
#[must_use]
pub(crate) struct Asked(u64);

#[derive(Debug)]
struct Beliefs<V> {
    map: HashMap<String, (V, DateTime<Utc>)>,
    /// Counts forgets, so [`Asked`] can tell one happened.
    forgets: u64,
}

/// Checks that passed, by the hash of what was checked.
#[derive(Debug)]
pub(crate) struct Believed<V> {
    beliefs: Mutex<Beliefs<V>>,
    max: usize,
}

impl<V> Default for Believed<V> {
    fn default() -> Self {
        Self::with_max(MAX_BELIEVED)
    }
}

impl<V> Believed<V> {
    /// A memory of at most `max` checks.
    pub(crate) fn with_max(max: usize) -> Self {
        Self {
            beliefs: Mutex::new(Beliefs {
                map: HashMap::new(),
                forgets: 0,
            }),
            max,
        }
    }
}

impl<V: Clone> Believed<V> {
    /// What `hash` verified as, if it did less than `within` ago; if not,
    /// the [`Asked`] to remember the database's answer with.
    pub(crate) fn lookup(
        &self,
        hash: &str,
        now: DateTime<Utc>,
        within: Duration,
    ) -> Result<V, Asked> {
        let beliefs = lock(&self.beliefs);
        beliefs
            .map
            .get(hash)
            .filter(|(_, at)| fresh(*at, now, within))
            .map(|(v, _)| v.clone())
            .ok_or(Asked(beliefs.forgets))
    }

    /// Remembers that `hash` verified as `v` at `now`, unless something
    /// was forgotten since it was `asked`. Entries older than `stale` are
    /// the first to go when the memory is full.
    pub(crate) fn remember(
        &self,
        asked: Asked,
        hash: String,
        v: V,
        now: DateTime<Utc>,
        stale: Duration,
    ) {
        let mut beliefs = lock(&self.beliefs);
        if beliefs.forgets != asked.0 {
            return;
        }
        if beliefs.map.len() >= self.max {
            beliefs.map.retain(|_, (_, at)| fresh(*at, now, stale));
            if beliefs.map.len() >= self.max {
                beliefs.map.clear();
            }
        }
        beliefs.map.insert(hash, (v, now));
    }

    /// Forgets every entry `gone` picks (revoked).
    pub(crate) fn forget(&self, gone: impl Fn(&V) -> bool) {
        let mut beliefs = lock(&self.beliefs);
        beliefs.forgets += 1;
        beliefs.map.retain(|_, (v, _)| !gone(v));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.beliefs).map.len()
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

    fn believe(c: &Believed<i64>, hash: &str, v: i64, at: DateTime<Utc>) {
        let asked = c.lookup(hash, at, BELIEVED_FOR).unwrap_err();
        c.remember(asked, hash.into(), v, at, BELIEVED_FOR);
    }

    #[test]
    fn a_check_is_believed_within_its_window_and_forgotten_on_revocation() {
        let c = Believed::<i64>::default();
        believe(&c, "h1", 1, t0());
        believe(&c, "h2", 2, t0());
        assert_eq!(c.lookup("h1", t0(), BELIEVED_FOR).ok(), Some(1));
        let almost = t0() + Duration::milliseconds(999);
        assert!(c.lookup("h1", almost, BELIEVED_FOR).is_ok());
        assert!(c.lookup("h1", t0() + BELIEVED_FOR, BELIEVED_FOR).is_err());
        // A longer window believes the same check longer.
        let minute = Duration::minutes(1);
        assert!(c.lookup("h1", t0() + Duration::seconds(59), minute).is_ok());
        assert!(c.lookup("h1", t0() + minute, minute).is_err());
        // A clock that went back does not extend belief.
        assert!(c.lookup("h1", t0() - Duration::seconds(5), minute).is_err());
        assert!(c.lookup("unknown", t0(), minute).is_err());
        c.forget(|v| *v == 1);
        assert!(c.lookup("h1", t0(), minute).is_err());
        assert!(c.lookup("h2", t0(), minute).is_ok());
    }

    #[test]
    fn a_check_that_raced_a_revocation_is_not_believed() {
        let c = Believed::<i64>::default();
        // The check read the row before the revocation committed, and
        // comes back after it was forgotten here.
        let asked = c.lookup("h1", t0(), BELIEVED_FOR).unwrap_err();
        c.forget(|v| *v == 1);
        c.remember(asked, "h1".into(), 1, t0(), BELIEVED_FOR);
        assert!(c.lookup("h1", t0(), BELIEVED_FOR).is_err());
        // The next check is remembered.
        believe(&c, "h1", 1, t0());
        assert!(c.lookup("h1", t0(), BELIEVED_FOR).is_ok());
    }

    #[test]
    fn the_map_stays_bounded() {
        let c = Believed::<i64>::with_max(100);
        for i in 0..105 {
            believe(&c, &format!("h{i}"), i, t0());
        }
        assert!(c.len() <= 100);
        // The newest is always kept.
        assert!(c.lookup("h104", t0(), BELIEVED_FOR).is_ok());
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
