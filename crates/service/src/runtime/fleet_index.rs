//! Each pool's fleet, indexed for the placer, kept in memory between
//! admissions, so an admission reads only what it needs rather than every
//! host, GPU and open allocation of the pool.
//!
//! Trust comes from the database, not from this process: every pool row
//! has a capacity epoch, and every commit that changes what the placer sees
//! in a pool writes a fresh random one (`Write::commit` derives which pools
//! from its events: slices placed or ended, hosts and GPUs joining, leaving
//! or changing health, pool edits; a report that changes a host's GPUs says
//! so itself). An index is used only while the epoch it was built at is
//! still the stored one, read inside the admission's serialized turn.
//!
//! An admission or queue pass that planned on an index carries it forward
//! with what it placed, and its commit swaps the epoch from the one it read
//! to a new one (compare-and-set: if anything else changed the pool in the
//! meantime, the swap fails and the index is dropped). A host that went
//! silent or changed without a commit (time alone makes a host offline) is
//! caught by re-reading the chosen host before a placement from an index is
//! stored: a stale index costs a rebuild, never a double placement.

use crate::allocations::snapshot::PoolSnapshot;
use crate::entity::pool;
use crate::events::{CapacityEffect, DomainEvent};
use crate::pools::PoolSpec;
use crate::ServiceError;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::placement::{PlacementRequest, WorkloadTally, DEFAULT_MAX_CLASSES};

/// One pool's fleet as indexed at a capacity epoch.
pub(crate) struct Indexed {
    /// The pool's capacity epoch this index reflects.
    pub epoch: i64,
    /// The pool's definition it was built for.
    pub spec: PoolSpec,
    /// The requests of the pool's open allocations, tallied (the workload
    /// mix the placer judges fragmentation against).
    pub workload: WorkloadTally,
    /// The fleet, what holds it, and the facts to store a placement.
    pub snapshot: PoolSnapshot,
}

impl Indexed {
    /// Adds a request to the workload mix and re-derives the fleet's
    /// fragmentation caches from it (a request of a shape the mix has only
    /// reweighs it, which costs neither a pass over the pool's requests
    /// nor over its hosts).
    pub fn add_request(&mut self, request: &PlacementRequest) {
        self.workload.add(request);
        self.snapshot
            .fleet
            .set_workload(self.workload.workload(DEFAULT_MAX_CLASSES));
    }
}

/// What a plan made on a pool's index starts from.
pub(crate) struct IndexBasis {
    /// The capacity epoch read before planning.
    pub epoch: i64,
    /// The pool's definition.
    pub spec: PoolSpec,
    /// The workload mix (with the request being made, if any).
    pub workload: WorkloadTally,
    /// Whether the fleet came from a kept index (its placements are checked
    /// against the chosen hosts' fresh state before they are stored).
    pub reused: bool,
}

/// What a planning pass carries forward once its writes commit.
pub(crate) struct Carried {
    /// The epoch the pass read (and planned on).
    pub from_epoch: i64,
    /// The index with the pass's placements in it.
    pub next: Indexed,
}

/// The pools a write planned on, carried to its commit: there the events
/// say which pools changed, their epochs move, and the indexes still true
/// are kept for the next write (every write carries one; see
/// [`crate::commit_hook::CommitHook`]).
#[derive(Default)]
pub(crate) struct CarriedIndexes {
    /// Pool indexes the write planned on, with its placements in them.
    carried: Vec<Carried>,
    /// Something every pool's placer sees changed (a host's GPUs, said by
    /// the report that changed them; events say the rest).
    capacity_changed: bool,
}

impl CarriedIndexes {
    /// Carries a pool's index forward: kept once the write commits, if
    /// nothing else changed the pool meantime.
    pub fn carry(&mut self, carried: Carried) {
        self.carried.push(carried);
    }

    /// Takes back the index of `pool` the write carries (for its next plan
    /// of the pool, which carries it on).
    pub fn take(&mut self, pool: &str) -> Option<Indexed> {
        let at = self.carried.iter().position(|c| c.next.spec.name == pool)?;
        Some(self.carried.swap_remove(at).next)
    }

    /// Records that what the placer sees changed in a way no event names
    /// (a host's GPUs or resources): every pool's index is rebuilt.
    pub fn capacity_changed(&mut self) {
        self.capacity_changed = true;
    }
}

impl crate::commit_hook::CommitHook for CarriedIndexes {
    fn settle<'a>(
        self: Box<Self>,
        service: &'a crate::Service,
        txn: &'a sea_orm::DatabaseTransaction,
        events: &'a [DomainEvent],
    ) -> futures_util::future::BoxFuture<'a, Result<(), ServiceError>> {
        Box::pin(async move {
            let CarriedIndexes {
                carried,
                capacity_changed,
            } = *self;
            for next in settle_epochs(txn, events, carried, capacity_changed).await? {
                // Safe before the commit: should it fail, the stored epoch
                // is not the one this index names.
                service.keep_index(next);
            }
            Ok(())
        })
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The outcomes `tessera_fleet_index_plans_total` counts.
const REUSED: &str = "reused";
const REBUILT: &str = "rebuilt";
const STALE: &str = "stale";

/// How often admissions found their pool indexed, and rebuilt it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Plans made on a kept index.
    pub reused: u64,
    /// Plans that (re)built the pool's index from the database.
    pub rebuilt: u64,
    /// Placements from a kept index that the chosen host's fresh state
    /// refused (the index was rebuilt and the plan made again).
    pub stale: u64,
}

/// The indexed pools of this process.
#[derive(Default)]
pub(crate) struct FleetIndex {
    pools: Mutex<HashMap<tessera_core::checked::PoolName, Indexed>>,
}

impl std::fmt::Debug for FleetIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetIndex")
            .field("pools", &self.pools().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl FleetIndex {
    fn pools(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<tessera_core::checked::PoolName, Indexed>> {
        self.pools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the pool's index if it was built at `epoch` for `spec` (an
    /// index of another epoch is dropped: it can never be trusted again).
    pub fn take(&self, spec: &PoolSpec, epoch: i64) -> Option<Indexed> {
        let kept = self.pools().remove(&spec.name)?;
        (kept.epoch == epoch && kept.spec == *spec).then_some(kept)
    }

    /// Keeps `indexed` for the next plan of its pool.
    pub fn put(&self, indexed: Indexed) {
        self.pools().insert(indexed.spec.name.clone(), indexed);
    }
}

/// A holding as compared: allocation, host, GPUs, slice.
type HeldKey = (
    AllocationId,
    HostId,
    Vec<u32>,
    tessera_core::placement::Slice,
);

/// A snapshot in a canonical order: hosts, their GPUs (MIG instances and
/// tenants sorted), each holding's allocation, host, GPUs and slice, and
/// the hosts' desired generations.
fn normalised(
    s: &PoolSnapshot,
) -> (
    Vec<tessera_core::placement::HostState>,
    Vec<HeldKey>,
    Vec<(HostId, i64)>,
) {
    use tessera_core::placement::GpuMode;
    let mut hosts = s.fleet.hosts().to_vec();
    for g in hosts.iter_mut().flat_map(|h| h.gpus.iter_mut()) {
        if let GpuMode::Mig { layout } = &mut g.mode {
            layout.sort_by(|a, b| (a.start, &a.profile).cmp(&(b.start, &b.profile)));
        }
        g.tenants.sort();
    }
    let mut held: Vec<_> = s
        .holders
        .iter()
        .zip(&s.holdings)
        .map(|(id, h)| {
            let mut gpus = h.decision.gpus.clone();
            gpus.sort_unstable();
            (*id, h.decision.host, gpus, h.decision.slice.clone())
        })
        .collect();
    held.sort_by_key(|h| h.0);
    (hosts, held, s.generations())
}

/// A new capacity epoch: random, so an epoch that was written by a
/// transaction that rolled back (or by another replica) is never mistaken
/// for one this process built an index at.
pub(crate) fn fresh_epoch() -> i64 {
    rand::random::<i64>()
}

/// The capacity epoch of a pool that is not stored: every reader of
/// epochs ([`capacity_epoch`], [`crate::policy::PoolsInForce::epoch`])
/// gives this one, so an index built for a missing pool is reused alike.
pub(crate) const NO_POOL_EPOCH: i64 = 0;

/// The stored capacity epoch of `pool` ([`NO_POOL_EPOCH`] for a pool not stored).
pub(crate) async fn capacity_epoch<C: ConnectionTrait>(
    conn: &C,
    pool: &str,
) -> Result<i64, ServiceError> {
    Ok(pool::Entity::find()
        .select_only()
        .column(pool::Column::CapacityEpoch)
        .filter(pool::Column::Name.eq(pool))
        .into_tuple::<i64>()
        .one(conn)
        .await?
        .unwrap_or(NO_POOL_EPOCH))
}

/// Writes a fresh capacity epoch for `pools` (every pool when `None`).
pub(crate) async fn bump_epochs<C: ConnectionTrait>(
    conn: &C,
    pools: Option<&[tessera_core::checked::PoolName]>,
) -> Result<(), ServiceError> {
    let mut update = pool::Entity::update_many().col_expr(
        pool::Column::CapacityEpoch,
        sea_orm::sea_query::Expr::value(fresh_epoch()),
    );
    if let Some(names) = pools {
        if names.is_empty() {
            return Ok(());
        }
        update = update.filter(pool::Column::Name.is_in(names.iter().cloned()));
    }
    update.exec(conn).await?;
    Ok(())
}

/// Swaps the capacity epoch of `pool` from `from` to a fresh one; the new
/// epoch when nothing else changed it meanwhile (else a fresh epoch is
/// written anyway and `None` returned).
pub(crate) async fn swap_epoch<C: ConnectionTrait>(
    conn: &C,
    pool: &tessera_core::checked::PoolName,
    from: i64,
) -> Result<Option<i64>, ServiceError> {
    let next = fresh_epoch();
    let swapped = pool::Entity::update_many()
        .col_expr(
            pool::Column::CapacityEpoch,
            sea_orm::sea_query::Expr::value(next),
        )
        .filter(pool::Column::Name.eq(pool))
        .filter(pool::Column::CapacityEpoch.eq(from))
        .exec(conn)
        .await?
        .rows_affected
        == 1;
    if swapped {
        return Ok(Some(next));
    }
    bump_epochs(conn, Some(std::slice::from_ref(pool))).await?;
    Ok(None)
}

/// Writes, in a write's transaction before it commits, the capacity epochs
/// of the pools whose placer view its `events` changed (`all`: every
/// pool's), and returns the indexes it carried forward that stay true.
async fn settle_epochs(
    txn: &sea_orm::DatabaseTransaction,
    events: &[DomainEvent],
    carried: Vec<Carried>,
    all: bool,
) -> Result<Vec<Indexed>, ServiceError> {
    let mut all = all;
    let (mut placed, mut changed) = (BTreeSet::new(), BTreeSet::new());
    for event in events {
        match event.capacity() {
            CapacityEffect::Unchanged => {}
            CapacityEffect::Placed(pool) => {
                placed.insert(pool);
            }
            CapacityEffect::Pool(pool) => {
                changed.insert(pool);
            }
            CapacityEffect::All => all = true,
        }
    }
    if all {
        bump_epochs(txn, None).await?;
        return Ok(Vec::new());
    }
    let mut kept = Vec::new();
    for Carried {
        from_epoch,
        mut next,
    } in carried
    {
        let pool = next.spec.name.clone();
        if changed.contains(&pool) {
            continue;
        }
        if placed.remove(&pool) {
            match swap_epoch(txn, &pool, from_epoch).await? {
                Some(epoch) => next.epoch = epoch,
                None => continue,
            }
        }
        kept.push(next);
    }
    let bumped: Vec<tessera_core::checked::PoolName> = changed.into_iter().chain(placed).collect();
    bump_epochs(txn, Some(&bumped)).await?;
    Ok(kept)
}

impl crate::Service {
    /// The pool's index for a read: the kept one when current, else one
    /// built now (the caller hands it back with `keep_index`).
    pub(crate) async fn indexed_pool(
        &self,
        spec: &PoolSpec,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Indexed, ServiceError> {
        let epoch = capacity_epoch(&self.db, &spec.name).await?;
        if let Some(kept) = self.fleet_index.take(spec, epoch) {
            return Ok(kept);
        }
        let workload = self.pool_workload(&self.db, spec).await?;
        let snapshot = self
            .pool_snapshot(
                &self.db,
                spec,
                now,
                crate::allocations::View::Live,
                &workload,
            )
            .await?;
        Ok(Indexed {
            epoch,
            spec: spec.clone(),
            workload: WorkloadTally::from_requests(&workload),
            snapshot,
        })
    }

    /// Whether the index this process keeps for `pool` holds what a fresh
    /// read of the pool gives (`None`: no index is kept, or it is no longer
    /// current). For tests and diagnosis: the hosts, GPUs and what holds
    /// them, and the workload mix.
    pub async fn fleet_index_agrees(&self, pool: &str) -> Result<Option<bool>, ServiceError> {
        let spec = self.pool_spec(&self.db, "pool", pool).await?;
        let epoch = capacity_epoch(&self.db, pool).await?;
        let Some(kept) = self.fleet_index.take(&spec, epoch) else {
            return Ok(None);
        };
        let now = self.now();
        let workload = self.pool_workload(&self.db, &spec).await?;
        let fresh = self
            .pool_snapshot(
                &self.db,
                &spec,
                now,
                crate::allocations::View::Live,
                &workload,
            )
            .await?;
        let agrees = normalised(&kept.snapshot) == normalised(&fresh)
            && kept.snapshot.fleet.workload() == fresh.fleet.workload();
        self.fleet_index.put(kept);
        Ok(Some(agrees))
    }

    /// How often this process's admissions and queue passes planned on a
    /// kept index, rebuilt it, or found it stale at the chosen host.
    pub fn fleet_index_stats(&self) -> IndexStats {
        IndexStats {
            reused: self.metrics.fleet_index_count(REUSED),
            rebuilt: self.metrics.fleet_index_count(REBUILT),
            stale: self.metrics.fleet_index_count(STALE),
        }
    }

    /// Counts a plan on a kept index (`true`) or a rebuilt one.
    pub(crate) fn count_plan(&self, reused: bool) {
        self.metrics
            .fleet_index(if reused { REUSED } else { REBUILT });
    }

    /// Counts a placement from a kept index that the chosen host refused.
    pub(crate) fn count_stale(&self) {
        self.metrics.fleet_index(STALE);
    }
}
