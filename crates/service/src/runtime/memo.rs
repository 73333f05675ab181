//! Small per-process memories the hot read paths share, so that the
//! database is asked neither to verify the same secret nor to write the same
//! "last seen" time many times a second, nor to read the same rows for
//! callers that ask at the same moment ([`Flights`]):
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

impl Asked {
    /// How many forgets the memory had seen: checks asked at the same
    /// count may share one read ([`Flights`]).
    pub(crate) fn generation(&self) -> u64 {
        self.0
    }
}

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

/// Reads in flight kept before those nobody waits for are dropped.
const FLIGHTS_BEFORE_PURGE: usize = 256;

/// A read in flight whose answer the callers that join it share.
type Flight<V> = futures_util::future::Shared<futures_util::future::BoxFuture<'static, Option<V>>>;

/// Reads in flight, by key: concurrent misses of one key share one read.
/// The first miss starts it; the misses that arrive while it runs, and saw
/// the same `generation` of what would make its answer stale (a list's
/// epochs, a token memory's forgets), wait for its answer instead of asking
/// the database again. Without this, every caller whose believed answer
/// expired in the same millisecond (32 in the read benchmark) read the same
/// rows. A read that fails answers `None`: each caller then reads on its
/// own, so that it gets its own, typed error. A read whose callers all went
/// away (their requests were dropped) is forgotten once
/// [`FLIGHTS_BEFORE_PURGE`] are kept, so that strangers' cut-off requests
/// cannot grow the map.
pub(crate) struct Flights<K, G, V> {
    map: Mutex<HashMap<K, (G, Flight<V>)>>,
}

impl<K, G, V> Default for Flights<K, G, V> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K, G, V> std::fmt::Debug for Flights<K, G, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flights")
            .field("in_flight", &lock(&self.map).len())
            .finish()
    }
}

impl<K, G, V> Flights<K, G, V>
where
    K: std::hash::Hash + Eq + Clone,
    G: PartialEq,
    V: Clone + Send + Sync + 'static,
{
    /// The answer of the read of `key` in flight at `generation`, or of
    /// `read()`, started now when there is none.
    pub(crate) async fn share<F>(
        &self,
        key: K,
        generation: G,
        read: impl FnOnce() -> F,
    ) -> Option<V>
    where
        F: std::future::Future<Output = Option<V>> + Send + 'static,
    {
        use futures_util::FutureExt;
        let flight = {
            let mut map = lock(&self.map);
            match map.get(&key) {
                Some((g, flight)) if *g == generation => flight.clone(),
                _ => {
                    if map.len() >= FLIGHTS_BEFORE_PURGE {
                        // Held by the map alone: every caller went away.
                        map.retain(|_, (_, f)| f.strong_count().is_some_and(|n| n > 1));
                    }
                    let flight = read().boxed().shared();
                    map.insert(key.clone(), (generation, flight.clone()));
                    flight
                }
            }
        };
        let answer = flight.clone().await;
        // Landed: the next miss starts a read of its own.
        let mut map = lock(&self.map);
        if map.get(&key).is_some_and(|(_, f)| f.ptr_eq(&flight)) {
            map.remove(&key);
        }
        answer
    }
}

/// The latest time per id, not yet written.
#[derive(Debug)]
pub(crate) struct Unwritten<K> {
    map: Mutex<HashMap<K, DateTime<Utc>>>,
}

impl<K> Default for Unwritten<K> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Copy + Eq + std::hash::Hash> Unwritten<K> {
    /// Notes `id` at `at` (a later note wins).
    pub(crate) fn note(&self, id: K, at: DateTime<Utc>) {
        let mut map = lock(&self.map);
        let latest = map.entry(id).or_insert(at);
        *latest = (*latest).max(at);
    }

    /// The noted, unwritten time of `id`.
    pub(crate) fn get(&self, id: K) -> Option<DateTime<Utc>> {
        lock(&self.map).get(&id).copied()
    }

    /// Takes the noted times to write them.
    pub(crate) fn take(&self) -> HashMap<K, DateTime<Utc>> {
        std::mem::take(&mut *lock(&self.map))
    }

    /// Puts back times that could not be written (newer notes win).
    pub(crate) fn restore(&self, times: HashMap<K, DateTime<Utc>>) {
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
    use std::collections::BTreeSet;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()
    }

    /// Callers that miss together at one generation share one read; one
    /// at another generation, or after the read landed, reads again; a
    /// failed read answers every caller that shared it with `None`.
    #[tokio::test]
    async fn callers_that_miss_together_share_one_read() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let flights: Arc<Flights<&str, u64, i64>> = Arc::default();
        let reads = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let ask = |generation: u64, answer: Option<i64>, gate: &Arc<tokio::sync::Semaphore>| {
            let (flights, reads, gate) = (flights.clone(), reads.clone(), gate.clone());
            tokio::spawn(async move {
                flights
                    .share("tenant", generation, move || async move {
                        reads.fetch_add(1, Ordering::SeqCst);
                        let _open = gate.acquire().await;
                        answer
                    })
                    .await
            })
        };
        let first = ask(0, Some(1), &gate);
        tokio::task::yield_now().await;
        let second = ask(0, Some(2), &gate);
        tokio::task::yield_now().await;
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "the second joined the first's read"
        );
        let stale = ask(1, Some(3), &gate);
        tokio::task::yield_now().await;
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "another generation reads anew"
        );
        gate.add_permits(10);
        assert_eq!(first.await.unwrap(), Some(1));
        assert_eq!(second.await.unwrap(), Some(1));
        assert_eq!(stale.await.unwrap(), Some(3));
        assert_eq!(
            ask(1, Some(4), &gate).await.unwrap(),
            Some(4),
            "a landed read is not kept"
        );
        let closed = Arc::new(tokio::sync::Semaphore::new(0));
        let failed = ask(2, None, &closed);
        tokio::task::yield_now().await;
        let joined = ask(2, Some(5), &closed);
        tokio::task::yield_now().await;
        closed.add_permits(1);
        assert_eq!((failed.await.unwrap(), joined.await.unwrap()), (None, None));
        assert_eq!(reads.load(Ordering::SeqCst), 4);
        assert_eq!(lock(&flights.map).len(), 0);
    }

    /// Reads whose callers all went away do not pile up: past
    /// [`FLIGHTS_BEFORE_PURGE`], the next new read drops them, and keeps
    /// the ones still awaited.
    #[tokio::test]
    async fn reads_nobody_waits_for_are_dropped() {
        use std::sync::Arc;
        let flights: Arc<Flights<u64, u64, i64>> = Arc::default();
        let ask = |key: u64| {
            let flights = flights.clone();
            tokio::spawn(async move {
                flights
                    .share(key, 0, std::future::pending::<Option<i64>>)
                    .await
            })
        };
        let awaited = ask(0);
        tokio::task::yield_now().await;
        for key in 1..FLIGHTS_BEFORE_PURGE as u64 {
            let cut_off = ask(key);
            tokio::task::yield_now().await;
            cut_off.abort();
            let _ = cut_off.await;
        }
        assert_eq!(lock(&flights.map).len(), FLIGHTS_BEFORE_PURGE);
        let last = ask(u64::MAX);
        tokio::task::yield_now().await;
        let kept: BTreeSet<u64> = lock(&flights.map).keys().copied().collect();
        assert_eq!(kept, BTreeSet::from([0, u64::MAX]));
        awaited.abort();
        last.abort();
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
