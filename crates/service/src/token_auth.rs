//! The read path of tenant API tokens: checks kept for a second, and last
//! uses recorded in memory.
//!
//! Without this, every API call read the token and its tenant and wrote the
//! token's "last used" time. Now:
//! - a verified token is remembered for [`VERIFIED_FOR`] (by its SHA-256, never
//!   the secret). A revocation on this process forgets it at once
//!   ([`TokenChecks::forget`]); another replica stops accepting it when its
//!   entry is older than [`VERIFIED_FOR`], so revocation takes effect
//!   everywhere within a second;
//! - each use is noted in memory and written in one batch by
//!   [`crate::Service::flush_token_uses`] (the server calls it every
//!   scheduler round, and at shutdown); token lists show the noted time before
//!   it is written.
//!
//! A plain map behind a mutex serves: entries are only made for tokens that
//! verified (a stranger's guesses add nothing), the critical sections are a
//! lookup or an insert, and [`MAX_VERIFIED`] bounds it anyway.

use crate::allocations::TenantActor;
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How long a verified token is believed without asking the database.
pub const VERIFIED_FOR: Duration = Duration::seconds(1);

/// At most this many verified tokens are remembered; beyond it, stale
/// entries are dropped first, then all.
pub const MAX_VERIFIED: usize = 10_000;

/// A token that verified: who it acts as, and until when it is valid.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub(crate) token_id: i64,
    pub(crate) actor: TenantActor,
    pub(crate) expires_at: DateTime<Utc>,
}

#[derive(Debug)]
struct Entry {
    verified: Verified,
    checked_at: DateTime<Utc>,
}

/// Verified tokens and unwritten last uses, per process.
#[derive(Debug, Default)]
pub(crate) struct TokenChecks {
    /// By the token's hash.
    verified: Mutex<HashMap<String, Entry>>,
    /// Token id → latest use not yet written.
    uses: Mutex<HashMap<i64, DateTime<Utc>>>,
}

/// A poisoned lock only means another thread panicked mid-update of a
/// cache; the map itself is still a valid map.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fresh(checked_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= checked_at && now - checked_at < VERIFIED_FOR
}

impl TokenChecks {
    /// The token with this hash, if it verified less than [`VERIFIED_FOR`] ago.
    pub(crate) fn cached(&self, hash: &str, now: DateTime<Utc>) -> Option<Verified> {
        lock(&self.verified)
            .get(hash)
            .filter(|e| fresh(e.checked_at, now))
            .map(|e| e.verified.clone())
    }

    /// Remembers a token that verified at `now`.
    pub(crate) fn remember(&self, hash: String, verified: Verified, now: DateTime<Utc>) {
        let mut map = lock(&self.verified);
        if map.len() >= MAX_VERIFIED {
            map.retain(|_, e| fresh(e.checked_at, now));
            if map.len() >= MAX_VERIFIED {
                map.clear();
            }
        }
        map.insert(
            hash,
            Entry {
                verified,
                checked_at: now,
            },
        );
    }

    /// Forgets a token (it was revoked here).
    pub(crate) fn forget(&self, token_id: i64) {
        lock(&self.verified).retain(|_, e| e.verified.token_id != token_id);
    }

    /// Notes a use of a token at `now`.
    pub(crate) fn used(&self, token_id: i64, now: DateTime<Utc>) {
        let mut uses = lock(&self.uses);
        let at = uses.entry(token_id).or_insert(now);
        *at = (*at).max(now);
    }

    /// The noted, unwritten last use of a token.
    pub(crate) fn unwritten_use(&self, token_id: i64) -> Option<DateTime<Utc>> {
        lock(&self.uses).get(&token_id).copied()
    }

    /// Takes the noted uses to write them.
    pub(crate) fn take_uses(&self) -> HashMap<i64, DateTime<Utc>> {
        std::mem::take(&mut *lock(&self.uses))
    }

    /// Puts back uses that could not be written (newer notes win).
    pub(crate) fn restore_uses(&self, uses: HashMap<i64, DateTime<Utc>>) {
        for (id, at) in uses {
            self.used(id, at);
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

    fn verified(token_id: i64) -> Verified {
        Verified {
            token_id,
            actor: TenantActor {
                tenant_id: 1,
                tenant_slug: "vision".into(),
                name: "token:ci".into(),
                user_id: None,
                can_request: true,
            },
            expires_at: t0() + Duration::days(90),
        }
    }

    #[test]
    fn a_check_is_believed_for_a_second_and_forgotten_on_revocation() {
        let c = TokenChecks::default();
        c.remember("h1".into(), verified(1), t0());
        c.remember("h2".into(), verified(2), t0());
        assert_eq!(c.cached("h1", t0()).unwrap().token_id, 1);
        let almost = t0() + Duration::milliseconds(999);
        assert!(c.cached("h1", almost).is_some());
        assert!(c.cached("h1", t0() + VERIFIED_FOR).is_none());
        // A clock that went back does not extend belief.
        assert!(c.cached("h1", t0() - Duration::seconds(5)).is_none());
        assert!(c.cached("unknown", t0()).is_none());
        c.forget(1);
        assert!(c.cached("h1", t0()).is_none());
        assert!(c.cached("h2", t0()).is_some());
    }

    #[test]
    fn the_map_stays_bounded() {
        let c = TokenChecks::default();
        for i in 0..MAX_VERIFIED + 5 {
            c.remember(format!("h{i}"), verified(i as i64), t0());
        }
        assert!(lock(&c.verified).len() <= MAX_VERIFIED);
        // The newest is always kept.
        let last = format!("h{}", MAX_VERIFIED + 4);
        assert!(c.cached(&last, t0()).is_some());
    }

    #[test]
    fn uses_keep_the_latest_and_survive_a_failed_write() {
        let c = TokenChecks::default();
        c.used(7, t0() + Duration::seconds(3));
        c.used(7, t0());
        assert_eq!(c.unwritten_use(7), Some(t0() + Duration::seconds(3)));
        let taken = c.take_uses();
        assert_eq!(taken.len(), 1);
        assert_eq!(c.unwritten_use(7), None);
        c.used(7, t0() + Duration::seconds(9));
        c.restore_uses(taken);
        assert_eq!(c.unwritten_use(7), Some(t0() + Duration::seconds(9)));
    }
}
