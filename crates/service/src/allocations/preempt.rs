//! Preemption: when a queued request has no room, the timer asks
//! [`tessera_core::schedule::plan_preemption`] which burstable or
//! best-effort slices give way to it, tells their owners (notification and
//! webhook) with the pool's notice, and preempts them at the deadline;
//! once their capacity is back the queue places the request as usual. A
//! notice is lifted when its request stops waiting (placed elsewhere,
//! released). Every step is a conditional update, so a release racing a
//! preemption ends the slice once, and replicas never act twice.

use super::queue::PlannedPool;
use super::scheduler::Ender;
use super::AllocationRow;
use crate::audit::Actor;
use crate::entity::{allocation, quota, quota_grant};
use crate::events::{AllocationRef, DomainEvent};
use crate::pools::PoolSpec;
use crate::quotas::quota_from_columns;
use crate::write::Write;
use crate::{Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use std::collections::BTreeMap;
use tessera_core::ids::AllocationId;
use tessera_core::lifecycle::{AllocationEvent, AllocationPhase};
use tessera_core::quota::{Quota, Usage};
use tessera_core::schedule::{plan_preemption, Claimant, QosClass, Running, Wait};

/// Why a slice gives way, for its owner (no other tenant's name).
fn reason(for_row: &allocation::Model, victim: &allocation::Model) -> String {
    let why = match (for_row.qos, victim.qos) {
        (QosClass::Guaranteed, QosClass::Burstable) => {
            "the pool's quota it borrows is wanted back by"
        }
        (_, QosClass::BestEffort) => "the idle capacity it uses is needed by",
        _ => "its room is needed by",
    };
    format!(
        "It is {} at priority '{}': {why} request #{} ({}, priority '{}')",
        victim.qos.label().to_lowercase(),
        victim.priority_class,
        for_row.id,
        for_row.qos.label().to_lowercase(),
        for_row.priority_class
    )
}

impl Service {
    /// A pool's quota (every tenant's in force there) and what guaranteed
    /// and burstable slices hold of it: what burstable requests borrow from.
    pub(crate) async fn pool_quota_use<C: ConnectionTrait>(
        conn: &C,
        pool: &str,
        now: DateTime<Utc>,
    ) -> Result<(Quota, Usage), ServiceError> {
        let base = quota::Entity::find()
            .filter(quota::Column::Pool.eq(pool))
            .all(conn)
            .await?
            .iter()
            .map(|q| quota_from_columns(q.compute_milli, q.memory_mib, q.max_slices))
            .fold(Quota::default(), |a, q| a.plus(&q));
        let total = quota_grant::Entity::find()
            .filter(quota_grant::Column::Pool.eq(pool))
            .filter(quota_grant::Column::RevokedAt.is_null())
            .filter(quota_grant::Column::EndsAt.gt(now))
            .all(conn)
            .await?
            .iter()
            .map(|g| quota_from_columns(g.compute_milli, g.memory_mib, g.max_slices))
            .fold(base, |a, q| a.plus(&q));
        let rows = allocation::Entity::find()
            .filter(allocation::Column::Pool.eq(pool))
            .filter(allocation::Column::State.is_in(AllocationPhase::QUOTA))
            .filter(allocation::Column::Qos.is_in([QosClass::Guaranteed, QosClass::Burstable]))
            .filter(allocation::Column::CapacityLostAt.is_null())
            .all(conn)
            .await?;
        let demands: Vec<_> = rows.iter().map(AllocationRow::demand).collect();
        Ok((total, Usage::from_demands(&demands)))
    }

    /// Tells the slices that must give way to the pool's waiting requests
    /// (those with no room, in queue order), in the caller's transaction.
    /// Returns how many were told.
    pub(crate) async fn preempt_for_queue(
        &self,
        w: &mut Write,
        spec: &PoolSpec,
        planned: &PlannedPool,
        now: DateTime<Utc>,
    ) -> Result<u32, ServiceError> {
        let no_room: Vec<AllocationId> = planned
            .plan
            .waiting
            .iter()
            .filter(|x| matches!(&x.why, Wait::NoRoom { error } if error.clears_with_capacity()))
            .map(|x| x.id)
            .collect();
        if no_room.is_empty() {
            return Ok(0);
        }
        let queued: BTreeMap<AllocationId, allocation::Model> = allocation::Entity::find()
            .filter(allocation::Column::Id.is_in(no_room.clone()))
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(w.db())
            .await?
            .into_iter()
            .map(|a| (a.id, a))
            .collect();
        let mut claimants = Vec::new();
        for id in &no_room {
            let Some(row) = queued.get(id) else { continue };
            let Some(request) = Self::placement_request_of(spec, row)? else {
                continue;
            };
            claimants.push(Claimant {
                id: row.id,
                priority: row.priority,
                qos: row.qos,
                request,
            });
        }
        let holding: BTreeMap<AllocationId, allocation::Model> = allocation::Entity::find()
            .filter(allocation::Column::Id.is_in(planned.snapshot.holders.clone()))
            .filter(
                sea_orm::Condition::any()
                    .add(allocation::Column::Qos.ne(QosClass::Guaranteed))
                    .add(allocation::Column::PreemptDeadline.is_not_null()),
            )
            .all(w.db())
            .await?
            .into_iter()
            .map(|a| (a.id, a))
            .collect();
        let running: Vec<Running> = planned
            .snapshot
            .holders
            .iter()
            .zip(&planned.snapshot.holdings)
            .filter_map(|(id, h)| {
                let row = holding.get(id)?;
                let notified = row.preempt_deadline.is_some();
                // Only slices still holding can be told; one being torn
                // down already gives its room back.
                if !notified && !AllocationPhase::HOLDING.contains(&row.state) {
                    return None;
                }
                Some(Running {
                    id: row.id,
                    priority: row.priority,
                    qos: row.qos,
                    since: row.placed_at.unwrap_or(row.created_at).timestamp_millis(),
                    decision: h.decision.clone(),
                    notified,
                })
            })
            .collect();
        if claimants.is_empty() || running.iter().all(|r| r.notified) {
            return Ok(0);
        }
        let deadline = now + Duration::minutes(i64::from(spec.preemption_grace_minutes));
        let mut told = 0;
        for p in plan_preemption(
            &planned.snapshot.fleet,
            &claimants,
            &running,
            spec.placement.policy(),
        ) {
            let Some(for_row) = queued.get(&p.for_id) else {
                continue;
            };
            for id in p.victims {
                let Some(victim) = holding.get(&id) else {
                    continue;
                };
                let why = reason(for_row, victim);
                let claimed = allocation::Entity::update_many()
                    .col_expr(allocation::Column::PreemptDeadline, Expr::value(deadline))
                    .col_expr(allocation::Column::PreemptFor, Expr::value(for_row.id))
                    .col_expr(allocation::Column::PreemptReason, Expr::value(why.clone()))
                    .col_expr(allocation::Column::UpdatedAt, Expr::value(now))
                    .filter(allocation::Column::Id.eq(id))
                    .filter(allocation::Column::PreemptDeadline.is_null())
                    .filter(allocation::Column::State.is_in(AllocationPhase::HOLDING))
                    .exec(w.db())
                    .await?
                    .rows_affected;
                if claimed == 0 {
                    continue;
                }
                told += 1;
                w.emit(DomainEvent::AllocationPreempting {
                    alloc: AllocationRef::of(victim),
                    for_id: for_row.id,
                    deadline,
                    reason: why,
                });
            }
        }
        Ok(told)
    }

    /// Preempts the slices whose notice ran out, and lifts the notices of
    /// slices whose request no longer waits. Returns how many were preempted.
    pub(crate) async fn end_preempted(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let told = allocation::Entity::find()
            .filter(allocation::Column::PreemptDeadline.is_not_null())
            .filter(allocation::Column::State.is_in(AllocationPhase::HOLDING))
            .all(&self.db)
            .await?;
        if told.is_empty() {
            return Ok(0);
        }
        let waiting: Vec<AllocationId> = allocation::Entity::find()
            .filter(allocation::Column::Id.is_in(told.iter().filter_map(|a| a.preempt_for)))
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .all(&self.db)
            .await?
            .iter()
            .map(|a| a.id)
            .collect();
        let mut preempted = 0;
        for a in told {
            let (Some(deadline), Some(for_id)) = (a.preempt_deadline, a.preempt_for) else {
                continue;
            };
            if !waiting.contains(&for_id) {
                self.lift_preemption(&a, for_id, now).await?;
                continue;
            }
            if deadline > now {
                continue;
            }
            let reason = a.preempt_reason.clone().unwrap_or_default();
            let emitted: Ender =
                Box::new(
                    move |alloc, before, state| DomainEvent::AllocationPreempted {
                        alloc,
                        before,
                        state,
                        for_id,
                        reason,
                    },
                );
            if self
                .end_one_with(
                    a.id,
                    AllocationEvent::Release,
                    now,
                    // Still holding, with the same notice: not released or
                    // lifted meanwhile.
                    |row| {
                        AllocationPhase::HOLDING.contains(&row.state)
                            && row.preempt_deadline == Some(deadline)
                    },
                    |row| row.preempted_at = Set(Some(now)),
                    emitted,
                )
                .await?
            {
                preempted += 1;
            }
        }
        Ok(preempted)
    }

    async fn lift_preemption(
        &self,
        a: &allocation::Model,
        for_id: AllocationId,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        let mut w = self.begin_write().await?;
        let lifted = allocation::Entity::update_many()
            .col_expr(
                allocation::Column::PreemptDeadline,
                Expr::value(None::<DateTime<Utc>>),
            )
            .col_expr(
                allocation::Column::PreemptFor,
                Expr::value(None::<AllocationId>),
            )
            .col_expr(
                allocation::Column::PreemptReason,
                Expr::value(None::<String>),
            )
            .col_expr(allocation::Column::UpdatedAt, Expr::value(now))
            .filter(allocation::Column::Id.eq(a.id))
            .filter(allocation::Column::PreemptFor.eq(for_id))
            .filter(allocation::Column::State.is_in(AllocationPhase::HOLDING))
            .exec(w.db())
            .await?
            .rows_affected;
        if lifted > 0 {
            w.emit(DomainEvent::AllocationPreemptLifted {
                alloc: AllocationRef::of(a),
                for_id,
            });
            w.commit(self, &Actor::System).await?;
        }
        Ok(())
    }
}
