//! A pool's queue as the planner in `tessera_core::schedule` sees it, and
//! storing what it places. The timer, admission and the views all plan
//! through [`Service::plan_pool`], so they agree on who starts, who waits
//! and why.

use super::snapshot::{PoolSnapshot, View};
use super::stored::{set_state, AllocationRow};
use crate::entity::allocation;
use crate::pools::PoolSpec;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;
use std::collections::BTreeMap;
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationPhase};
use tessera_core::placement::{Decision, Policy};
use tessera_core::schedule::{
    plan_queue, queue_order, QueueEntry, QueuePlan, QueuePolicy, Waiting,
};

/// A pool planned: the fleet (with the plan's placements applied) and the plan.
pub(crate) struct PlannedPool {
    pub snapshot: PoolSnapshot,
    pub plan: QueuePlan,
}

/// The pool's queueing rules in core's terms.
fn queue_policy(spec: &PoolSpec, estimate: bool) -> QueuePolicy {
    QueuePolicy {
        placement: Policy::Pack,
        discipline: spec.queue,
        reserve_after_ms: i64::from(spec.reserve_after_minutes) * 60_000,
        estimate,
    }
}

/// Fair-share inputs per (tenant, pool): compute held and quota, in thousandths.
type Shares = BTreeMap<(i64, String), (u64, u64)>;

impl Service {
    /// The queue entry of `row`, reading the tenant's share once per pool.
    async fn queue_entry<C: ConnectionTrait>(
        &self,
        conn: &C,
        row: &allocation::Model,
        shares: &mut Shares,
    ) -> Result<QueueEntry, ServiceError> {
        let key = (row.tenant_id, row.pool.clone());
        let (used, quota) = match shares.get(&key) {
            Some(s) => *s,
            None => {
                let used = Self::usage_of_active(conn, row.tenant_id, &row.pool).await?;
                let quota = Self::quota_of(conn, row.tenant_id, &row.pool, self.now())
                    .await?
                    .map_or(0, |q| u64::from(q.compute.0));
                shares.insert(key, (used, quota));
                (used, quota)
            }
        };
        Ok(QueueEntry {
            id: row.id,
            priority: row.priority,
            tenant_id: row.tenant_id,
            tenant_used_milli: used,
            tenant_quota_milli: quota,
            requested_at: row.created_at.timestamp_millis(),
        })
    }

    /// The queue of each pool in placement order.
    pub(crate) async fn queues<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<BTreeMap<String, Vec<QueueEntry>>, ServiceError> {
        let queued = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(conn)
            .await?;
        let mut by_pool: BTreeMap<String, Vec<QueueEntry>> = BTreeMap::new();
        let mut shares = Shares::new();
        for a in &queued {
            let entry = self.queue_entry(conn, a, &mut shares).await?;
            by_pool.entry(a.pool.clone()).or_default().push(entry);
        }
        for q in by_pool.values_mut() {
            queue_order(q);
        }
        Ok(by_pool)
    }

    /// GPU compute a tenant holds in a pool (placed or beyond, not queued).
    async fn usage_of_active<C: ConnectionTrait>(
        conn: &C,
        tenant_id: i64,
        pool: &str,
    ) -> Result<u64, ServiceError> {
        let rows = Self::tenant_rows_in(conn, tenant_id, pool, &AllocationPhase::HOLDING).await?;
        Ok(rows.iter().map(|a| u64::from(a.demand().compute.0)).sum())
    }

    /// Plans one pass over the queue of `spec`'s pool, with `extra` (a
    /// request being made) queued too: who starts now, who waits and why,
    /// and (with `estimate`) when each is expected to start. Reads only;
    /// [`Service::store_placement`] writes what the caller decides to keep.
    pub(crate) async fn plan_pool<C: ConnectionTrait>(
        &self,
        conn: &C,
        spec: &PoolSpec,
        now: DateTime<Utc>,
        extra: Option<&allocation::Model>,
        estimate: bool,
    ) -> Result<PlannedPool, ServiceError> {
        let workload = self.pool_workload(conn, spec).await?;
        let mut snapshot = self
            .pool_snapshot(conn, spec, now, View::Live, &workload)
            .await?;
        let queued = allocation::Entity::find()
            .filter(allocation::Column::Pool.eq(&spec.name))
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(conn)
            .await?;
        let mut shares = Shares::new();
        let mut queue = Vec::with_capacity(queued.len() + 1);
        for row in queued.iter().chain(extra) {
            // A shape the pool no longer offers cannot be placed; it stays
            // queued (its page says so) and does not stop the others.
            let Ok(request) = Self::placement_request_of(spec, row) else {
                continue;
            };
            queue.push(Waiting {
                entry: self.queue_entry(conn, row, &mut shares).await?,
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
        Ok(PlannedPool { snapshot, plan })
    }

    /// Stores the placement of `row` (requested or queued) that `decision`
    /// in `snapshot` chose. `None` when the decision names a host or GPU
    /// the snapshot does not know (nothing is written then).
    pub(crate) async fn store_placement<C: ConnectionTrait>(
        &self,
        conn: &C,
        row: allocation::Model,
        snapshot: &PoolSnapshot,
        decision: &Decision,
        now: DateTime<Utc>,
    ) -> Result<Option<allocation::Model>, ServiceError> {
        let Some((host_id, placement)) = snapshot.placement(decision) else {
            return Ok(None);
        };
        let state = transition(&row.lifecycle()?, &AllocationEvent::Place)
            .map_err(|e| ServiceError::Conflict(e.to_string()))?;
        let generation = Self::bump_generation(conn, host_id).await?;
        let mut a: allocation::ActiveModel = row.into();
        set_state(&mut a, &state, now);
        a.host_id = Set(Some(host_id));
        a.placement = Set(Some(json!(placement)));
        a.generation = Set(Some(generation));
        a.placed_at = Set(Some(now));
        a.updated_at = Set(now);
        Ok(Some(a.update(conn).await?))
    }
}
