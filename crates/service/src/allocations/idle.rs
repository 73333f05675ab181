//! Idle reclaim: once a minute the timer judges the active slices of pools
//! with an idle policy on their per-minute telemetry and, where the driver
//! tells, whether processes hold them ([`tessera_core::idle::judge_held`]). An idle slice's owner is told the
//! deadline (notification and webhook); a slice that gets busy again is
//! cleared; one still idle at the deadline is released (and so its quota
//! and capacity return and the queue moves). Owners keep a warned slice
//! with a reason, as often as the pool allows. Every step is a conditional
//! update, so replicas running the same tick never act twice.

use super::scheduler::Ender;
use super::AllocationRow;
use crate::audit::Actor;
use crate::entity::{allocation, gpu, gpu_rollup};
use crate::events::{AllocationRef, DomainEvent};
use crate::TenantActor;
use crate::{Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use tessera_core::idle::{
    held_by_processes, judge_held, keep_refusal, IdlePolicy, IdleVerdict, MinuteUse, MINUTE_MS,
    ROLLUP_LAG_MINUTES,
};
use tessera_core::ids::AllocationId;
use tessera_core::lifecycle::{AllocationEvent, AllocationPhase};
use tessera_core::plan::GpuObserved;
use tessera_protocol::views::AllocationView;

/// Longest reason a keep may give.
const MAX_KEEP_REASON: usize = 500;

/// What one idle pass did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdlePass {
    pub warned: u32,
    pub reclaimed: u32,
}

/// Per allocation, its minutes: the busiest of its devices in each minute
/// (a whole-GPU slice of two GPUs is idle only if both are).
fn minutes_of(rollups: Vec<gpu_rollup::Model>) -> BTreeMap<AllocationId, Vec<MinuteUse>> {
    let mut busiest: BTreeMap<(AllocationId, i64), u8> = BTreeMap::new();
    for r in rollups {
        let Some(id) = r.allocation_id else { continue };
        let util = u8::try_from(r.util_avg.clamp(0, 100)).unwrap_or(100);
        let e = busiest.entry((id, r.start_ms)).or_insert(util);
        *e = (*e).max(util);
    }
    let mut out: BTreeMap<AllocationId, Vec<MinuteUse>> = BTreeMap::new();
    for ((id, start_ms), util_avg_pct) in busiest {
        out.entry(id).or_default().push(MinuteUse {
            start_ms,
            util_avg_pct,
        });
    }
    out
}

impl Service {
    /// Judges the active slices of pools with idle reclaim, once a minute.
    pub(crate) async fn reclaim_idle(&self, now: DateTime<Utc>) -> Result<IdlePass, ServiceError> {
        let mut pass = IdlePass::default();
        let minute = now.timestamp_millis().div_euclid(MINUTE_MS);
        if self.idle_minute.swap(minute, Ordering::Relaxed) == minute {
            return Ok(pass);
        }
        let policies: BTreeMap<tessera_core::checked::PoolName, IdlePolicy> = self
            .pools(&self.db)
            .await?
            .into_iter()
            .filter_map(|p| Some((p.name, p.idle_reclaim?)))
            .collect();
        let Some(longest) = policies.values().map(|p| p.idle_minutes).max() else {
            return Ok(pass);
        };
        let active = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Active))
            .filter(allocation::Column::Pool.is_in(policies.keys().cloned()))
            .all(&self.db)
            .await?;
        if active.is_empty() {
            return Ok(pass);
        }
        let since =
            now.timestamp_millis() - (i64::from(longest) + ROLLUP_LAG_MINUTES + 1) * MINUTE_MS;
        let rollups = gpu_rollup::Entity::find()
            .filter(gpu_rollup::Column::PeriodMs.eq(MINUTE_MS))
            .filter(gpu_rollup::Column::StartMs.gte(since))
            .filter(gpu_rollup::Column::AllocationId.is_in(active.iter().map(|a| a.id)))
            .all(&self.db)
            .await?;
        let minutes = minutes_of(rollups);
        // Who runs on each GPU, from the agents' latest reports.
        let observed: BTreeMap<String, Option<GpuObserved>> = gpu::Entity::find()
            .filter(gpu::Column::HostId.is_in(active.iter().filter_map(|a| a.host_id)))
            .all(&self.db)
            .await?
            .iter()
            .map(|g| (g.uuid.clone(), g.observed().cloned()))
            .collect();
        for a in active {
            let (Some(policy), Some(started)) = (policies.get(&a.pool), a.active_at) else {
                continue;
            };
            let watch_from = a.idle_watch_from.unwrap_or(started).max(started);
            let held = a.stored_placement().and_then(|p| {
                let gpus: Vec<Option<&GpuObserved>> = p
                    .gpus
                    .iter()
                    .map(|g| observed.get(&g.uuid).and_then(Option::as_ref))
                    .collect();
                held_by_processes(a.id, &p.slice, &gpus)
            });
            let verdict = judge_held(
                policy,
                minutes.get(&a.id).map(Vec::as_slice).unwrap_or_default(),
                held,
                watch_from.timestamp_millis(),
                now.timestamp_millis(),
            );
            match (a.idle_deadline, verdict) {
                (None, IdleVerdict::Idle) => {
                    pass.warned += u32::from(self.warn_idle(&a, policy, now).await?);
                }
                (Some(deadline), IdleVerdict::Idle) if deadline <= now => {
                    pass.reclaimed += u32::from(self.reclaim(&a, policy, now).await?);
                }
                (Some(_), IdleVerdict::InUse) => self.clear_idle(&a, now).await?,
                _ => {}
            }
        }
        Ok(pass)
    }

    async fn warn_idle(
        &self,
        a: &allocation::Model,
        policy: &IdlePolicy,
        now: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        let deadline = now + Duration::minutes(i64::from(policy.notice_minutes));
        let mut w = self.begin_write().await?;
        let claimed = allocation::Entity::update_many()
            .col_expr(allocation::Column::IdleWarnedAt, Expr::value(now))
            .col_expr(allocation::Column::IdleDeadline, Expr::value(deadline))
            .filter(allocation::Column::Id.eq(a.id))
            .filter(allocation::Column::IdleDeadline.is_null())
            .filter(allocation::Column::State.eq(AllocationPhase::Active))
            .exec(w.db())
            .await?
            .rows_affected;
        if claimed == 0 {
            return Ok(false);
        }
        w.emit(DomainEvent::AllocationIdle {
            alloc: AllocationRef::of(a),
            idle_minutes: policy.idle_minutes,
            below_pct: policy.below_pct,
            deadline,
        });
        w.commit(self, &Actor::System).await?;
        Ok(true)
    }

    async fn clear_idle(
        &self,
        a: &allocation::Model,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        let mut w = self.begin_write().await?;
        let cleared = allocation::Entity::update_many()
            .col_expr(
                allocation::Column::IdleWarnedAt,
                Expr::value(None::<DateTime<Utc>>),
            )
            .col_expr(
                allocation::Column::IdleDeadline,
                Expr::value(None::<DateTime<Utc>>),
            )
            .col_expr(allocation::Column::UpdatedAt, Expr::value(now))
            .filter(allocation::Column::Id.eq(a.id))
            .filter(allocation::Column::IdleDeadline.is_not_null())
            .exec(w.db())
            .await?
            .rows_affected;
        if cleared > 0 {
            w.emit(DomainEvent::AllocationIdleCleared {
                alloc: AllocationRef::of(a),
            });
            w.commit(self, &Actor::System).await?;
        }
        Ok(())
    }

    async fn reclaim(
        &self,
        a: &allocation::Model,
        policy: &IdlePolicy,
        now: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        let idle_minutes = policy.idle_minutes
            + a.idle_warned_at.map_or(0, |w| {
                u32::try_from((now - w).num_minutes().max(0)).unwrap_or(u32::MAX)
            });
        let deadline = a.idle_deadline;
        let emitted: Ender =
            Box::new(
                move |alloc, before, state| DomainEvent::AllocationReclaimed {
                    alloc,
                    before,
                    state,
                    idle_minutes,
                },
            );
        self.end_one_with(
            a.id,
            AllocationEvent::Release,
            now,
            // Still warned with the same deadline: not kept meanwhile.
            |row| row.state == AllocationPhase::Active && row.idle_deadline == deadline,
            |row| row.reclaimed_at = Set(Some(now)),
            emitted,
        )
        .await
    }

    /// Keeps a slice that was warned as idle: the warning ends and its idle
    /// time counts afresh from now. Members only, as often as the pool
    /// allows, with a reason (audited).
    pub async fn keep_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
        reason: &str,
    ) -> Result<AllocationView, ServiceError> {
        actor.require_request("keep its slices")?;
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(ServiceError::invalid(
                "reason",
                "say why the slice should stay (it is shown in the audit log)",
            ));
        }
        if reason.chars().count() > MAX_KEEP_REASON {
            return Err(ServiceError::invalid(
                "reason",
                format!("must be at most {MAX_KEEP_REASON} characters"),
            ));
        }
        self.own_row(actor, id).await?;
        let now = self.now();
        let mut w = self.begin_write().await?;
        let row = allocation::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
        if row.state != AllocationPhase::Active || row.idle_deadline.is_none() {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} is not waiting to be reclaimed; only a slice warned as idle can be kept"
            )));
        }
        let kept = u32::try_from(row.idle_keeps.max(0)).unwrap_or(u32::MAX);
        // A pool that stopped reclaiming meanwhile lets it be kept.
        let policy = self
            .pool_spec(w.db(), "pool", &row.pool)
            .await?
            .idle_reclaim;
        if let Some(why) = policy.and_then(|p| keep_refusal(&p, kept)) {
            return Err(ServiceError::Conflict(why));
        }
        let keeps = kept + 1;
        let mut a: allocation::ActiveModel = row.into();
        a.idle_warned_at = Set(None);
        a.idle_deadline = Set(None);
        a.idle_watch_from = Set(Some(now));
        a.idle_keeps = Set(i32::try_from(keeps).unwrap_or(i32::MAX));
        a.updated_at = Set(now);
        let row = a.update(w.db()).await?;
        w.emit(DomainEvent::AllocationKept {
            alloc: AllocationRef::of(&row),
            reason: reason.to_owned(),
            keeps,
        });
        w.commit(self, &actor.audit()).await?;
        self.allocation_view_of(row, &actor.tenant_slug).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::HostId;

    fn rollup(id: Option<AllocationId>, start_ms: i64, util_avg: i16) -> gpu_rollup::Model {
        gpu_rollup::Model {
            id: 0,
            period_ms: 60_000,
            start_ms,
            host_id: HostId::new(1),
            device_uuid: "GPU-a".into(),
            allocation_id: id,
            samples: 6,
            util_min: 0,
            util_avg,
            util_max: util_avg,
            util_p95: util_avg,
            busy_ms: 0,
            covered_ms: 60_000,
            used_milli_ms: 0,
            mem_max_mib: 0,
        }
    }

    #[test]
    fn a_minute_is_as_busy_as_the_busiest_device_of_the_slice() {
        let m = minutes_of(vec![
            rollup(Some(AllocationId::new(7)), 0, 3),
            rollup(Some(AllocationId::new(7)), 0, 40),
            rollup(Some(AllocationId::new(7)), 60_000, 2),
            rollup(None, 0, 99),
            rollup(Some(AllocationId::new(8)), 0, 150),
        ]);
        assert_eq!(
            m[&AllocationId::new(7)],
            [
                MinuteUse {
                    start_ms: 0,
                    util_avg_pct: 40
                },
                MinuteUse {
                    start_ms: 60_000,
                    util_avg_pct: 2
                }
            ]
        );
        assert_eq!(m[&AllocationId::new(8)][0].util_avg_pct, 100);
        assert_eq!(m.len(), 2);
    }
}
