//! Tenants' allocation lists, kept between the writes that change them.
//!
//! `GET /api/v1/allocations` is what scripts and CI pipelines poll. Building
//! the list reads the tenant's slices, the queues and the pools; between two
//! writes that touch the tenant it cannot change, so it is built once and
//! served from memory:
//! - every committed [`crate::write::Write`] touches the tenants its events
//!   name (an event that names none, such as a pool change, touches them
//!   all), on this process at once and on the other replicas through a
//!   notice ([`crate::replicas`]);
//! - a list is only kept when it was built after the last touch: the epochs
//!   are read *before* the database, so a write that commits while the list
//!   is read leaves an entry that is already stale;
//! - a list with a queued slice is never kept (its queue position moves
//!   with other tenants' requests; the service decides), and none is
//!   believed longer than [`KEPT_FOR`], which bounds what a missed notice or
//!   a write without events could leave stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tessera_core::ids::TenantId;

use chrono::{DateTime, Duration, Utc};

/// How long a kept list is believed at most.
pub const KEPT_FOR: Duration = Duration::seconds(1);

/// At most this many tenants' lists are kept; beyond it, all are dropped.
const MAX_KEPT: usize = 10_000;

/// Which tenants' lists a write may have changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) enum Touched {
    /// None (a write without events).
    #[default]
    Nothing,
    /// These tenants'.
    Tenants(std::collections::BTreeSet<TenantId>),
    /// Every tenant's.
    All,
}

impl Touched {
    /// Adds what one event touches: its tenant, or every tenant.
    pub(crate) fn add(&mut self, tenant: Option<TenantId>) {
        match (tenant, &mut *self) {
            (_, Self::All) => {}
            (None, _) => *self = Self::All,
            (Some(t), Self::Tenants(ts)) => {
                ts.insert(t);
            }
            (Some(t), Self::Nothing) => *self = Self::Tenants([t].into()),
        }
    }
}

/// When a list was read: the epochs it saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    all: u64,
    tenant: u64,
}

#[derive(Debug)]
struct Kept<V> {
    stamp: Stamp,
    built_at: DateTime<Utc>,
    views: Arc<[V]>,
}

#[derive(Debug)]
struct State<V> {
    /// Touches of every tenant.
    all: u64,
    /// Touches per tenant.
    tenants: HashMap<TenantId, u64>,
    lists: HashMap<TenantId, Kept<V>>,
}

impl<V> Default for State<V> {
    fn default() -> Self {
        Self {
            all: 0,
            tenants: HashMap::new(),
            lists: HashMap::new(),
        }
    }
}

impl<V> State<V> {
    fn stamp(&self, tenant: TenantId) -> Stamp {
        Stamp {
            all: self.all,
            tenant: self.tenants.get(&tenant).copied().unwrap_or(0),
        }
    }
}

/// The kept lists of one process (of allocation views in the service).
#[derive(Debug)]
pub(crate) struct ListCache<V> {
    state: Mutex<State<V>>,
    /// Lists being read, shared by the callers that missed together.
    pub(crate) flights: crate::runtime::memo::Flights<TenantId, Stamp, Arc<[V]>>,
}

impl<V> Default for ListCache<V> {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            flights: crate::runtime::memo::Flights::default(),
        }
    }
}

impl<V: Clone> ListCache<V> {
    /// A poisoned lock only means a thread panicked mid-update of a cache;
    /// the maps are still valid maps.
    fn lock(&self) -> MutexGuard<'_, State<V>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epochs to build `tenant`'s list under; take them before reading.
    pub(crate) fn stamp(&self, tenant: TenantId) -> Stamp {
        self.lock().stamp(tenant)
    }

    /// `tenant`'s kept list, if nothing touched it since it was read and it
    /// is younger than [`KEPT_FOR`] at `now`.
    pub(crate) fn get(&self, tenant: TenantId, now: DateTime<Utc>) -> Option<Arc<[V]>> {
        let state = self.lock();
        let kept = state.lists.get(&tenant)?;
        (kept.stamp == state.stamp(tenant)
            && now >= kept.built_at
            && now - kept.built_at < KEPT_FOR)
            .then(|| Arc::clone(&kept.views))
    }

    /// Keeps `views`, read under `stamp` at `now`, unless a write touched
    /// the tenant meanwhile; returns them shared.
    pub(crate) fn put(
        &self,
        tenant: TenantId,
        stamp: Stamp,
        now: DateTime<Utc>,
        views: Vec<V>,
    ) -> Arc<[V]> {
        let views: Arc<[V]> = views.into();
        let mut state = self.lock();
        if state.stamp(tenant) != stamp {
            return views;
        }
        if state.lists.len() >= MAX_KEPT {
            state.lists.clear();
        }
        state.lists.insert(
            tenant,
            Kept {
                stamp,
                built_at: now,
                views: Arc::clone(&views),
            },
        );
        views
    }

    /// Forgets what a committed write may have changed.
    pub(crate) fn touch(&self, touched: &Touched) {
        let mut state = self.lock();
        match touched {
            Touched::Nothing => {}
            Touched::Tenants(ts) => {
                for t in ts {
                    *state.tenants.entry(*t).or_default() += 1;
                    state.lists.remove(t);
                }
            }
            Touched::All => {
                state.all += 1;
                state.lists.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_list_is_kept_until_a_write_touches_its_tenant_or_a_second_passes() {
        let cache = ListCache::<i64>::default();
        let t0 = chrono::DateTime::UNIX_EPOCH;
        let stamp = cache.stamp(TenantId::new(1));
        cache.put(TenantId::new(1), stamp, t0, vec![7]);
        assert_eq!(cache.get(TenantId::new(1), t0).as_deref(), Some(&[7][..]));
        assert!(
            cache.get(TenantId::new(2), t0).is_none(),
            "another tenant's is not there"
        );
        // Old enough: read again.
        assert!(cache.get(TenantId::new(1), t0 + KEPT_FOR).is_none());
        // Another tenant's write leaves it; its own, or one of every tenant, does not.
        cache.touch(&Touched::Tenants([TenantId::new(2)].into()));
        assert!(cache.get(TenantId::new(1), t0).is_some());
        cache.touch(&Touched::Tenants([TenantId::new(1)].into()));
        assert!(cache.get(TenantId::new(1), t0).is_none());
        cache.put(TenantId::new(1), cache.stamp(TenantId::new(1)), t0, vec![7]);
        cache.touch(&Touched::All);
        assert!(cache.get(TenantId::new(1), t0).is_none());
    }

    #[test]
    fn a_write_while_the_list_is_read_leaves_nothing_stale() {
        let cache = ListCache::<i64>::default();
        let t0 = chrono::DateTime::UNIX_EPOCH;
        let stamp = cache.stamp(TenantId::new(1));
        // ... the database is read; meanwhile a write commits ...
        cache.touch(&Touched::Tenants([TenantId::new(1)].into()));
        cache.put(TenantId::new(1), stamp, t0, vec![7]);
        assert!(cache.get(TenantId::new(1), t0).is_none());
        let stamp = cache.stamp(TenantId::new(1));
        cache.touch(&Touched::All);
        cache.put(TenantId::new(1), stamp, t0, vec![7]);
        assert!(cache.get(TenantId::new(1), t0).is_none());
    }

    #[test]
    fn touches_add_up() {
        let mut t = Touched::default();
        t.add(Some(TenantId::new(3)));
        t.add(Some(TenantId::new(4)));
        assert_eq!(
            t,
            Touched::Tenants([TenantId::new(3), TenantId::new(4)].into())
        );
        t.add(None);
        t.add(Some(TenantId::new(5)));
        assert_eq!(t, Touched::All);
    }
}
