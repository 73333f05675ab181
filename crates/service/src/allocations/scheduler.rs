//! The server's timer: ends expired leases and drains past their deadline,
//! marks the slices of hosts silent too long, fails provisioning that never
//! finished, and places queued requests as capacity frees.

use super::snapshot::holding_of;
use super::stored::{set_state, update_if_state, AllocationRow};
use crate::audit::Actor;
use crate::entity::allocation;
use crate::events::{AllocationRef, DomainEvent};
use crate::runtime::fleet_index::CarriedIndexes;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QuerySelect, Set};
use tessera_core::ids::AllocationId;

use std::collections::BTreeSet;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationState};
use tessera_core::notify::LEASE_ENDING_SOON_MINUTES;

/// The event an ending records, from the allocation, the phase it left
/// and its new state.
pub(crate) type Ender =
    Box<dyn FnOnce(AllocationRef, AllocationPhase, AllocationState) -> DomainEvent + Send>;

/// What one pass over the queues did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueuePass {
    /// Queued requests placed.
    pub placed: u32,
    /// Slices told to give way.
    pub preempt_notices: u32,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Leases that ended.
    pub expired: u32,
    /// Slices that never became active in time.
    pub timed_out: u32,
    /// Queued requests placed.
    pub placed: u32,
    /// "Lease ending soon" notices sent.
    pub warned: u32,
    /// Slices ended by a drain's deadline.
    pub drained: u32,
    /// Slices whose host stayed silent past the grace period.
    pub lost: u32,
    /// Planned pool changes that took effect (their GPUs emptied).
    pub pool_changes: u32,
    /// Slices found idle and warned.
    pub idle_warned: u32,
    /// Idle slices released at their deadline.
    pub reclaimed: u32,
    /// Slices told to give way to a waiting request.
    pub preempt_notices: u32,
    /// Slices preempted at the end of their notice.
    pub preempted: u32,
    /// GPU condition spans opened or closed (the ledger's history).
    pub conditions: u32,
    /// Budget thresholds told.
    pub budget_notices: u32,
    /// Slices released because the slice that replaces them is active.
    pub replaced: u32,
}

impl Service {
    /// One pass of the timer.
    pub async fn tick(&self) -> Result<TickReport, ServiceError> {
        // What this process saw of hosts first: the lost-host check reads it.
        self.flush_heartbeats().await?;
        let now = self.now();
        let expired = self.end_leases(now).await?;
        let drained = self.end_drains(now).await?;
        let lost = self.mark_lost_hosts(now).await?;
        let timed_out = self.fail_stuck(now).await?;
        let pool_changes = self.complete_pool_changes(now).await?;
        let idle = self.reclaim_idle(now).await?;
        let queue = self.place_queued(now).await?;
        let preempted = self.end_preempted(now).await?;
        let conditions = self.record_gpu_conditions(now).await?;
        let budget_notices = self.evaluate_budgets(now, None).await?;
        let replaced = self.release_replaced(now).await?;
        let report = TickReport {
            expired,
            timed_out,
            placed: queue.placed,
            warned: self.warn_leases(now).await?,
            drained,
            lost,
            pool_changes,
            idle_warned: idle.warned,
            reclaimed: idle.reclaimed,
            preempt_notices: queue.preempt_notices,
            preempted,
            conditions,
            budget_notices,
            replaced,
        };
        Ok(report)
    }

    /// Releases the slices that an active slice replaces (a right-sized
    /// request, or any that named `replaces`): the tenant held both only
    /// while the new one started.
    async fn release_replaced(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let replacing = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Active))
            .filter(allocation::Column::ReplacesId.is_not_null())
            .all(&self.db)
            .await?;
        let mut n = 0;
        for new in replacing {
            let Some(old) = new.replaces_id else { continue };
            let tenant = new.tenant_id;
            let ended = self
                .end_one_with(
                    old,
                    AllocationEvent::Release,
                    now,
                    move |a| {
                        a.tenant_id == tenant
                            && AllocationPhase::OPEN.contains(&a.state)
                            && a.state != AllocationPhase::Releasing
                    },
                    |_| {},
                    Box::new(|alloc, before, state| DomainEvent::AllocationReleased {
                        alloc,
                        before,
                        after: state.phase(),
                    }),
                )
                .await?;
            if ended {
                n += 1;
            }
        }
        Ok(n)
    }

    async fn end_leases(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let due = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Active))
            .filter(allocation::Column::LeaseEndsAt.lte(now))
            .all(&self.db)
            .await?;
        let mut n = 0;
        for a in due {
            if self
                .end_one(a.id, AllocationEvent::Expire, now, |a| {
                    a.state == AllocationPhase::Active && a.lease_ends_at.is_some_and(|t| t <= now)
                })
                .await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    async fn fail_stuck(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let limit = self.settings.provision_timeout;
        let stuck = allocation::Entity::find()
            .filter(
                allocation::Column::State
                    .is_in([AllocationPhase::Placed, AllocationPhase::Provisioning]),
            )
            .filter(allocation::Column::PlacedAt.lte(now - limit))
            .all(&self.db)
            .await?;
        let mut n = 0;
        for a in stuck {
            let reason = format!(
                "the host did not confirm the slice within {} seconds (agent offline or stuck); the quota is returned",
                limit.num_seconds()
            );
            if self
                .end_one(a.id, AllocationEvent::Fail { reason }, now, |a| {
                    matches!(
                        a.state,
                        AllocationPhase::Placed | AllocationPhase::Provisioning
                    )
                })
                .await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Applies an ending event to one allocation if `still` holds when
    /// re-read inside the transaction. Returns whether it changed.
    pub(crate) async fn end_one(
        &self,
        id: AllocationId,
        event: AllocationEvent,
        now: DateTime<Utc>,
        still: impl Fn(&allocation::Model) -> bool,
    ) -> Result<bool, ServiceError> {
        let emitted = match &event {
            AllocationEvent::Fail { reason } => {
                let reason = reason.clone();
                Box::new(move |alloc, before, state| DomainEvent::AllocationFailed {
                    alloc,
                    before,
                    state,
                    reason,
                }) as Ender
            }
            _ => Box::new(|alloc, before, state| DomainEvent::AllocationExpired {
                alloc,
                before,
                state,
            }),
        };
        self.end_one_with(id, event, now, still, |_| {}, emitted)
            .await
    }

    /// [`Self::end_one`] with what else to set on the row and which event
    /// to record.
    pub(crate) async fn end_one_with(
        &self,
        id: AllocationId,
        event: AllocationEvent,
        now: DateTime<Utc>,
        still: impl Fn(&allocation::Model) -> bool,
        mark: impl FnOnce(&mut allocation::ActiveModel),
        emitted: Ender,
    ) -> Result<bool, ServiceError> {
        let mut w = self.begin_write().await?;
        let Some(row) = allocation::Entity::find_by_id(id).one(w.db()).await? else {
            return Ok(false);
        };
        if !still(&row) {
            return Ok(false);
        }
        let state = row.lifecycle().clone();
        let before = state.phase();
        let next = transition(&state, &event).map_err(|e| ServiceError::Conflict(e.to_string()))?;
        let host_id = row.host_id;
        let alloc = AllocationRef::of(&row);
        let mut a: allocation::ActiveModel = row.into();
        set_state(&mut a, &next, now);
        mark(&mut a);
        if matches!(next, AllocationState::Releasing { .. }) || state == AllocationState::Placed {
            if let Some(h) = host_id {
                a.generation = Set(Some(w.bump_generation(h).await?));
            }
        }
        if !update_if_state(w.db(), id, before, a).await? {
            // Moved meanwhile; the next tick looks again.
            return Ok(false);
        }
        w.emit(emitted(alloc, before, next));
        w.commit(self, &Actor::System).await?;
        Ok(true)
    }

    /// Tells the requesters of active slices whose lease ends within the
    /// hour, once per lease (extending resets it).
    async fn warn_leases(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let soon = now + chrono::Duration::minutes(LEASE_ENDING_SOON_MINUTES);
        let due = allocation::Entity::find()
            .filter(allocation::Column::State.eq(AllocationPhase::Active))
            .filter(allocation::Column::LeaseEndsAt.lte(soon))
            .filter(allocation::Column::LeaseEndsAt.gt(now))
            .filter(allocation::Column::LeaseWarnedAt.is_null())
            .all(&self.db)
            .await?;
        let mut n = 0;
        for row in due {
            let mut w = self.begin_write().await?;
            let claimed = allocation::Entity::update_many()
                .col_expr(allocation::Column::LeaseWarnedAt, Expr::value(now))
                .filter(allocation::Column::Id.eq(row.id))
                .filter(allocation::Column::LeaseWarnedAt.is_null())
                .filter(allocation::Column::State.eq(AllocationPhase::Active))
                .exec(w.db())
                .await?
                .rows_affected;
            if claimed == 0 {
                continue;
            }
            w.emit(DomainEvent::AllocationLeaseEnding {
                alloc: AllocationRef::of(&row),
                minutes_left: row
                    .lease_ends_at
                    .map_or(0, |end| (end - now).num_minutes().max(0)),
            });
            w.commit(self, &Actor::System).await?;
            n += 1;
        }
        Ok(n)
    }

    /// After quota grew: places what waits in the queues now rather than at
    /// the next tick.
    pub(crate) async fn retry_waiting(&self) -> Result<(), ServiceError> {
        self.place_queued(self.now()).await?;
        Ok(())
    }

    /// Places what the queue of each pool lets start now (see
    /// [`tessera_core::schedule::plan_queue`]: backfill, with a host kept
    /// for a request that has waited too long), and tells the slices that
    /// must give way to requests with no room (see `preempt`).
    pub(crate) async fn place_queued(&self, now: DateTime<Utc>) -> Result<QueuePass, ServiceError> {
        let queued_pools: BTreeSet<String> = allocation::Entity::find()
            .select_only()
            .column(allocation::Column::Pool)
            .filter(allocation::Column::State.eq(AllocationPhase::Queued))
            .into_tuple::<String>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        let mut pass = QueuePass::default();
        if queued_pools.is_empty() {
            return Ok(pass);
        }
        let mut w = self.begin_admission().await?;
        let pools = self.pools_in_force(w.db()).await?;
        for pool in queued_pools {
            let Ok(spec) = pools.named("pool", &pool).cloned() else {
                continue;
            };
            let mut planned = self
                .plan_pool_indexed(w.db(), &pools, &spec, now, None, false, None)
                .await?;
            if planned.index.as_ref().is_some_and(|i| i.reused) {
                for (_, decision) in &planned.plan.placed {
                    if !self
                        .recheck_host(w.db(), &planned.snapshot, decision, now)
                        .await?
                    {
                        self.count_stale();
                        planned = self
                            .plan_pool_indexed(w.db(), &pools, &spec, now, None, true, None)
                            .await?;
                        break;
                    }
                }
            }
            let mut stored = Vec::new();
            for (id, decision) in &planned.plan.placed {
                // Locked, and still queued: a release may have ended it
                // since the queue was read.
                let Some(row) = allocation::Entity::find_by_id(*id)
                    .filter(allocation::Column::State.eq(AllocationPhase::Queued))
                    .lock_exclusive()
                    .one(w.db())
                    .await?
                else {
                    continue;
                };
                if let Some(row) = self
                    .store_placement(&w, row, &mut planned.snapshot, decision, now)
                    .await?
                {
                    pass.placed += 1;
                    stored.push((row.id, row.id, holding_of(&row, decision.clone(), now)));
                    w.emit(DomainEvent::AllocationPlaced {
                        alloc: AllocationRef::of(&row),
                    });
                }
            }
            pass.preempt_notices += self.preempt_for_queue(&mut w, &spec, &planned, now).await?;
            if let Some(carried) = planned.carry(stored) {
                w.hook::<CarriedIndexes>().carry(carried);
            }
        }
        w.commit_without_retry(self, &Actor::System).await?;
        Ok(pass)
    }
}
