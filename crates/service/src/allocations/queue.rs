//! A pool's queue as the planner in `tessera_core::schedule` sees it, and
//! storing what it places. The timer, admission and the views all plan
//! through [`Service::plan_pool`], so they agree on who starts, who waits
//! and why.

use super::snapshot::{PoolSnapshot, View};
use super::stored::{set_state, AllocationRow};
use crate::entity::{allocation, host, tenant};
use crate::policy::PoolsInForce;
use crate::pools::PoolSpec;
use crate::runtime::fleet_index::{Carried, IndexBasis, Indexed};
use crate::write::Write;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, Set,
};
use std::collections::BTreeMap;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationPhase};
use tessera_core::placement::{Decision, WorkloadTally};
use tessera_core::schedule::{
    decayed_usage, plan_queue, queue_order, Holding, QueueEntry, QueuePlan, QueuePolicy, UseSpan,
    Waiting,
};

/// A pool planned: the fleet (with the plan's placements applied) and the plan.
pub(crate) struct PlannedPool {
    pub snapshot: PoolSnapshot,
    pub plan: QueuePlan,
    /// Set when planned for a write on the pool's index (see
    /// [`Service::plan_pool_indexed`]), which it may carry forward.
    pub index: Option<IndexBasis>,
}

impl PlannedPool {
    /// Carries the pool's index forward when this plan was made on one
    /// (`index` set) and every decision it applied was stored or could be
    /// taken back: `stored` lists the placements written, each as the id
    /// its request had in the plan (a request not yet stored when planned
    /// had [`super::admission::PENDING_ID`]), its row's id, and the holding
    /// it keeps.
    pub fn carry(self, stored: Vec<(AllocationId, AllocationId, Holding)>) -> Option<Carried> {
        let PlannedPool {
            mut snapshot,
            plan,
            index,
        } = self;
        let index = index?;
        for (id, decision) in &plan.placed {
            if !stored.iter().any(|(planned, _, _)| planned == id)
                && snapshot.fleet.release(decision).is_err()
            {
                return None;
            }
        }
        for (_, id, holding) in stored {
            snapshot.holders.push(id);
            snapshot.holdings.push(holding);
        }
        Some(Carried {
            from_epoch: index.epoch,
            next: Indexed {
                epoch: index.epoch,
                spec: index.spec,
                workload: index.workload,
                snapshot,
            },
        })
    }
}

/// The pool's queueing rules in core's terms.
fn queue_policy(spec: &PoolSpec, estimate: bool) -> QueuePolicy {
    QueuePolicy {
        placement: spec.placement.policy(),
        discipline: spec.queue,
        reserve_after_ms: i64::from(spec.reserve_after_minutes) * 60_000,
        estimate,
    }
}

/// Whether `rows` belong to more than one tenant.
fn several_tenants<'a>(mut rows: impl Iterator<Item = &'a allocation::Model>) -> bool {
    let first = rows.next().map(|r| r.tenant_id);
    rows.any(|r| Some(r.tenant_id) != first)
}

/// Fair-share inputs per (tenant, pool): recent use and weight.
type Shares = BTreeMap<(TenantId, tessera_core::checked::PoolName), (u64, u64)>;

impl Service {
    /// The queue entry of `row`, reading the tenant's share once per pool;
    /// only when `rank` (the queue holds several tenants: otherwise fair
    /// share orders nothing, and reading days of use would only cost time).
    async fn queue_entry<C: ConnectionTrait>(
        &self,
        conn: &C,
        row: &allocation::Model,
        shares: &mut Shares,
        rank: bool,
    ) -> Result<QueueEntry, ServiceError> {
        let key = (row.tenant_id, row.pool.clone());
        let (usage, weight) = match shares.get(&key) {
            Some(s) => *s,
            None if !rank => (0, 1),
            None => {
                let s = self.fair_share_of(conn, row.tenant_id, &row.pool).await?;
                shares.insert(key, s);
                s
            }
        };
        Ok(QueueEntry {
            id: row.id,
            qos: row.qos,
            priority: row.priority,
            tenant_id: row.tenant_id,
            tenant_usage: usage,
            tenant_weight: weight,
            requested_at: row.created_at.timestamp_millis(),
        })
    }

    /// A tenant's recent use of a pool (decayed over the pool's
    /// `usage_half_life_hours`) and its fair-share weight there: the pool's
    /// `fair_share_weights`, else its compute quota.
    async fn fair_share_of<C: ConnectionTrait>(
        &self,
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
    ) -> Result<(u64, u64), ServiceError> {
        let now = self.now();
        let pools = self.pools(conn).await?;
        let spec = pools.iter().find(|p| p.name == pool);
        let half_life = spec
            .as_ref()
            .map_or(0, |s| i64::from(s.usage_half_life_hours) * 3_600_000);
        // Use older than ten half-lives weighs under 0.1 %.
        let since = now - chrono::Duration::milliseconds(half_life.saturating_mul(10));
        let rows = allocation::Entity::find()
            .filter(allocation::Column::TenantId.eq(tenant_id))
            .filter(allocation::Column::Pool.eq(pool))
            .filter(
                Condition::any()
                    .add(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
                    .add(allocation::Column::EndedAt.gte(since)),
            )
            .all(conn)
            .await?;
        let spans: Vec<UseSpan> = rows
            .iter()
            .filter_map(|a| {
                let start = a.active_at.or(a.placed_at)?;
                Some(UseSpan {
                    start: start.timestamp_millis(),
                    end: a.ended_at.map(|t| t.timestamp_millis()),
                    milli: u64::try_from(a.demand_compute_milli).unwrap_or(0),
                })
            })
            .collect();
        let usage = decayed_usage(&spans, now.timestamp_millis(), half_life);
        let weights = spec
            .as_ref()
            .map(|s| &s.fair_share_weights)
            .filter(|w| !w.is_empty());
        let weight = match weights {
            Some(w) => {
                let slug = tenant::Entity::find_by_id(tenant_id)
                    .one(conn)
                    .await?
                    .map(|t| t.slug)
                    .ok_or_else(|| ServiceError::not_found(format!("tenant {tenant_id}")))?;
                u64::from(w.get(&slug).copied().unwrap_or(1))
            }
            None => Self::quota_of(conn, tenant_id, pool, now)
                .await?
                .map_or(0, |q| u64::from(q.compute.0)),
        };
        Ok((usage, weight))
    }

    /// The queue of each pool in placement order.
    pub(crate) async fn queues<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<BTreeMap<tessera_core::checked::PoolName, Vec<QueueEntry>>, ServiceError> {
        let queued = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(conn)
            .await?;
        let mut rows: BTreeMap<&tessera_core::checked::PoolName, Vec<&allocation::Model>> =
            BTreeMap::new();
        for a in &queued {
            rows.entry(&a.pool).or_default().push(a);
        }
        let mut by_pool: BTreeMap<tessera_core::checked::PoolName, Vec<QueueEntry>> =
            BTreeMap::new();
        let mut shares = Shares::new();
        for (pool, rows) in rows {
            let rank = several_tenants(rows.iter().copied());
            for a in rows {
                let entry = self.queue_entry(conn, a, &mut shares, rank).await?;
                by_pool.entry(pool.clone()).or_default().push(entry);
            }
        }
        for q in by_pool.values_mut() {
            queue_order(q);
        }
        Ok(by_pool)
    }

    /// Plans one pass over the queue of `spec`'s pool: who starts now, who
    /// waits and why, and (with `estimate`) when each is expected to start. Reads only;
    /// [`Service::store_placement`] writes what the caller decides to keep.
    pub(crate) async fn plan_pool<C: ConnectionTrait>(
        &self,
        conn: &C,
        spec: &PoolSpec,
        now: DateTime<Utc>,
        estimate: bool,
    ) -> Result<PlannedPool, ServiceError> {
        let workload = self.pool_workload(conn, spec).await?;
        let snapshot = self
            .pool_snapshot(conn, spec, now, View::Live, &workload)
            .await?;
        let queued = Self::queued_in(conn, &spec.name).await?;
        self.plan_on(conn, spec, snapshot, &queued, None, now, estimate, None)
            .await
    }

    /// [`Service::plan_pool`] for a write in the admission turn, on the
    /// pool's kept index when its capacity epoch still matches (else on a
    /// fresh one, kept once the write commits). With `fresh`, the index is
    /// rebuilt regardless (a placement from it was refused). `extra` is the
    /// request being made, not stored yet: it is stored once the plan says
    /// where it goes (see [`Self::placed_row`]), so an admission writes its
    /// row once. `in_hand`: the index this write's last plan of the pool
    /// carried, used before the kept one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn plan_pool_indexed<C: ConnectionTrait>(
        &self,
        conn: &C,
        pools: &PoolsInForce,
        spec: &PoolSpec,
        now: DateTime<Utc>,
        extra: Option<&allocation::Model>,
        fresh: bool,
        in_hand: Option<Indexed>,
    ) -> Result<PlannedPool, ServiceError> {
        // The epoch first (read with the pools, before anything below): a
        // change committed while the pool is read leaves the index older
        // than its epoch says, never newer.
        let epoch = pools.epoch(&spec.name);
        let queued = Self::queued_in(conn, &spec.name).await?;
        let mut kept = if fresh {
            None
        } else {
            match in_hand {
                Some(ix) => (ix.epoch == epoch && ix.spec == *spec).then_some(ix),
                None => self.fleet_index.take(spec, epoch),
            }
        };
        if let Some(ix) = kept.as_mut() {
            // Lease ends matter only to requests that wait.
            if !queued.is_empty()
                && !Self::refresh_holdings(conn, &spec.name, &mut ix.snapshot, now).await?
            {
                kept = None;
            }
        }
        let (snapshot, workload, reused) = match kept {
            Some(mut ix) => {
                if let Some(row) = extra {
                    // The request being made is not stored yet.
                    if let Ok(request) = Self::pool_offer(spec).placement_request(row.slice_shape())
                    {
                        ix.add_request(&request);
                    }
                }
                (ix.snapshot, ix.workload, true)
            }
            None => {
                let mut workload = self.pool_workload(conn, spec).await?;
                workload.extend(extra.and_then(|row| {
                    Self::pool_offer(spec)
                        .placement_request(row.slice_shape())
                        .ok()
                }));
                let snapshot = self
                    .pool_snapshot(conn, spec, now, View::Live, &workload)
                    .await?;
                (snapshot, WorkloadTally::from_requests(&workload), false)
            }
        };
        self.count_plan(reused);
        let basis = IndexBasis {
            epoch,
            spec: spec.clone(),
            workload,
            reused,
        };
        self.plan_on(
            conn,
            spec,
            snapshot,
            &queued,
            extra,
            now,
            false,
            Some(basis),
        )
        .await
    }

    /// The pool's queued requests.
    async fn queued_in<C: ConnectionTrait>(
        conn: &C,
        pool: &str,
    ) -> Result<Vec<allocation::Model>, ServiceError> {
        Ok(allocation::Entity::find()
            .filter(allocation::Column::Pool.eq(pool))
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(conn)
            .await?)
    }

    /// Plans `queued` and `extra` on `snapshot`.
    #[allow(clippy::too_many_arguments)]
    async fn plan_on<C: ConnectionTrait>(
        &self,
        conn: &C,
        spec: &PoolSpec,
        mut snapshot: PoolSnapshot,
        queued: &[allocation::Model],
        extra: Option<&allocation::Model>,
        now: DateTime<Utc>,
        estimate: bool,
        index: Option<IndexBasis>,
    ) -> Result<PlannedPool, ServiceError> {
        let mut shares = Shares::new();
        let rank = several_tenants(queued.iter().chain(extra));
        let mut queue = Vec::with_capacity(queued.len() + 1);
        for row in queued.iter().chain(extra) {
            // A shape the pool no longer offers cannot be placed; it stays
            // queued (its page says so) and does not stop the others.
            let Some(request) = Self::placement_request_of(spec, row)? else {
                continue;
            };
            queue.push(Waiting {
                entry: self.queue_entry(conn, row, &mut shares, rank).await?,
                request,
                hold_ms: i64::from(row.lease_hours.max(1)) * 3_600_000,
            });
        }
        let plan = plan_queue(
            &mut snapshot.fleet,
            &queue,
            &snapshot.holdings,
            now.timestamp_millis(),
            &queue_policy(spec, estimate),
        );
        Ok(PlannedPool {
            snapshot,
            plan,
            index,
        })
    }

    /// Whether the host `decision` chose on a kept index is as the index
    /// has it: still online, and holding what the index says, which is so
    /// when its desired generation has not moved since (every placement
    /// and release on a host moves it; what else changes what the placer
    /// sees, a report of other GPUs, a drain, a policy, moves the pool's
    /// capacity epoch, and the index is not kept). One row read, in the
    /// turn every admission waits for.
    pub(crate) async fn recheck_host<C: ConnectionTrait>(
        &self,
        conn: &C,
        snapshot: &PoolSnapshot,
        decision: &Decision,
        now: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        use sea_orm::QuerySelect;
        let host_id = decision.host;
        let Some(known) = snapshot.generation(host_id) else {
            return Ok(false);
        };
        let stored: Option<(i64, Option<DateTime<Utc>>)> = host::Entity::find_by_id(host_id)
            .select_only()
            .columns([host::Column::DesiredGeneration, host::Column::LastSeenAt])
            .into_tuple()
            .one(conn)
            .await?;
        Ok(stored.is_some_and(|(generation, seen)| {
            generation == known
                && seen.is_some_and(|seen| now - seen <= self.settings.host_offline_after)
        }))
    }

    /// Keeps the index a committed write carried forward.
    pub(crate) fn keep_index(&self, next: Indexed) {
        self.fleet_index.put(next);
    }

    /// Stores the placement of `row` (requested or queued) that `decision`
    /// in `snapshot` chose. `None` when the decision names a host or GPU
    /// the snapshot does not know (nothing is written then).
    pub(crate) async fn store_placement(
        &self,
        w: &Write,
        row: allocation::Model,
        snapshot: &mut PoolSnapshot,
        decision: &Decision,
        now: DateTime<Utc>,
    ) -> Result<Option<allocation::Model>, ServiceError> {
        match Self::placed_row(w, row, snapshot, decision, now).await? {
            Some(a) => Ok(Some(a.update(w.db()).await?)),
            None => Ok(None),
        }
    }

    /// `row` placed where `decision` in `snapshot` says, with its host's
    /// desired generation bumped (in the store and in `snapshot`); not
    /// written yet (the queue updates a stored row, an admission inserts a
    /// new one). `None` when the decision names a host or GPU the snapshot
    /// does not know (nothing is bumped).
    pub(crate) async fn placed_row(
        w: &Write,
        row: allocation::Model,
        snapshot: &mut PoolSnapshot,
        decision: &Decision,
        now: DateTime<Utc>,
    ) -> Result<Option<allocation::ActiveModel>, ServiceError> {
        let Some((host_id, placement)) = snapshot.placement(decision) else {
            return Ok(None);
        };
        let state = transition(row.lifecycle(), &AllocationEvent::Place)
            .map_err(|e| ServiceError::Conflict(e.to_string()))?;
        let generation = w.bump_generation(host_id).await?;
        snapshot.generation_moved(host_id, generation);
        let mut a: allocation::ActiveModel = row.into();
        set_state(&mut a, &state, now);
        a.host_id = Set(Some(host_id));
        a.placement = Set(Some(placement));
        a.generation = Set(Some(generation));
        a.placed_at = Set(Some(now));
        a.updated_at = Set(now);
        Ok(Some(a))
    }
}
