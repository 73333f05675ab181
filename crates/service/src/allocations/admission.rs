//! Requesting a slice: validate, check the quota, place or queue, all in one
//! transaction that admissions take in turn.

use super::snapshot::{holding_of, View};
use super::stored::{set_state, update_if_state, AllocationRow};
use crate::entity::allocation;
use crate::events::{AllocationRef, DomainEvent};
use crate::metrics::AdmissionOutcome;
use crate::policy::PoolsInForce;
use crate::pools::PoolSpec;
use crate::runtime::fleet_index::CarriedIndexes;
use crate::write::Write;
use crate::TenantActor;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationState};
use tessera_core::placement::{PlacementRequest, Policy};
use tessera_core::quota::Usage;
use tessera_core::schedule::QosClass;
use tessera_core::slice::{label, PoolShapeError};
use tessera_protocol::views::{AllocationView, NewAllocation};

/// Longest purpose text.
pub const MAX_PURPOSE_CHARS: usize = 500;

/// A request as checked before its turn (see [`Service::admit_in`]).
#[derive(Debug)]
pub(super) struct Checked {
    spec: PoolSpec,
    demand: tessera_core::quota::Demand,
    request: PlacementRequest,
    class: tessera_core::schedule::PriorityClass,
    purpose: String,
    /// When it was asked.
    now: DateTime<Utc>,
}

/// What one admission turn has read: the pools, and tenants' quota in
/// force and what their guaranteed slices hold, by (tenant, pool), kept
/// current by the
/// turn's own admissions: several requests of a tenant in one turn read it
/// once (the sum visits every slice the tenant holds in the pool). Only
/// admissions add to what a tenant holds while the turn holds the lock;
/// anything else that changes it meanwhile could as well have committed
/// just after the read.
#[derive(Debug)]
pub(super) struct TurnReads {
    /// The pools in force and their capacity epochs, read first.
    pub pools: PoolsInForce,
    held: std::collections::BTreeMap<
        (TenantId, tessera_core::checked::PoolName),
        (Option<tessera_core::quota::Quota>, Usage),
    >,
}

impl TurnReads {
    /// A turn that read `pools`.
    pub fn new(pools: PoolsInForce) -> Self {
        Self {
            pools,
            held: std::collections::BTreeMap::new(),
        }
    }
}

/// The id a request being admitted has in its plan, before its row is
/// stored (larger than any stored id: it is the newest request).
pub(crate) const PENDING_ID: AllocationId = AllocationId::new(i64::MAX);

/// Inserts `a`, a row planned under [`PENDING_ID`], with every column as
/// planned and the id the database gives it.
async fn insert_new<C: ConnectionTrait>(
    conn: &C,
    a: allocation::ActiveModel,
) -> Result<allocation::Model, ServiceError> {
    let mut a = a.reset_all();
    a.id = sea_orm::ActiveValue::NotSet;
    Ok(a.insert(conn).await?)
}

impl Service {
    /// Requests a slice: checks the input and the quota, then places it at
    /// once or queues it. Nothing is stored when the request is refused.
    pub async fn request_allocation(
        &self,
        actor: &TenantActor,
        req: &NewAllocation,
    ) -> Result<AllocationView, ServiceError> {
        self.admit(actor, req, None).await
    }

    /// Asks again for the slice of allocation `id`, with the same pool,
    /// shape, lease, purpose and priority class: after its GPU or host was
    /// lost (the old one is released in the same step), or after it ended
    /// (e.g. by a drain). The new request is admitted like any other.
    pub async fn requeue_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<AllocationView, ServiceError> {
        let old = self.own_row(actor, id).await?;
        let req = NewAllocation {
            tenant: None,
            pool: old.pool.clone(),
            shape: old.slice_shape().clone(),
            lease_hours: u32::try_from(old.lease_hours).unwrap_or(1),
            purpose: old.purpose.clone(),
            priority_class: Some(old.priority_class.clone()),
            qos: old.qos,
            replaces: None,
        };
        self.admit(actor, &req, Some(id)).await
    }

    /// Admits the request and counts the outcome: per process for
    /// `/metrics`, and refusals for want of quota per day in the database
    /// (for the fleet's insights; a refused request stores nothing else).
    async fn admit(
        &self,
        actor: &TenantActor,
        req: &NewAllocation,
        requeue_of: Option<AllocationId>,
    ) -> Result<AllocationView, ServiceError> {
        let result = self.try_admit(actor, req, requeue_of).await;
        let outcome = match &result {
            Ok(v) if v.state == AllocationPhase::Queued => AdmissionOutcome::Queued,
            Ok(_) => AdmissionOutcome::Placed,
            Err(ServiceError::QuotaExceeded(_)) => AdmissionOutcome::RefusedQuota,
            Err(_) => AdmissionOutcome::Refused,
        };
        // Only a pool that exists names a label (no unbounded series).
        let pool = if outcome == AdmissionOutcome::Refused {
            ""
        } else {
            req.pool.as_str()
        };
        self.metrics.admitted(pool, outcome);
        if outcome == AdmissionOutcome::RefusedQuota {
            if let Err(e) = self.count_refusal(actor.tenant_id, &req.pool).await {
                tracing::warn!("counting a refused request: {e:?}");
            }
        }
        result
    }

    /// Adds one to today's refusals of `tenant_id` in `pool`.
    async fn count_refusal(
        &self,
        tenant_id: TenantId,
        pool: &tessera_core::checked::PoolName,
    ) -> Result<(), ServiceError> {
        use crate::entity::admission_refusal::{ActiveModel, Column, Entity};
        use sea_orm::sea_query::OnConflict;
        let w = self.begin_write().await?;
        let day = tessera_core::capacity::DAY_MS;
        let day_ms = w.now().timestamp_millis().div_euclid(day) * day;
        Entity::insert(ActiveModel {
            day_ms: Set(day_ms),
            pool: Set(pool.clone()),
            tenant_id: Set(tenant_id),
            count: Set(1),
        })
        .on_conflict(
            OnConflict::columns([Column::DayMs, Column::Pool, Column::TenantId])
                .value(Column::Count, Expr::col((Entity, Column::Count)).add(1))
                .to_owned(),
        )
        .exec_without_returning(w.db())
        .await?;
        w.commit(self, &crate::audit::Actor::System).await
    }

    async fn try_admit(
        &self,
        actor: &TenantActor,
        req: &NewAllocation,
        requeue_of: Option<AllocationId>,
    ) -> Result<AllocationView, ServiceError> {
        let checked = self.check_request(actor, req).await?;
        let (row, pools) = match requeue_of {
            // Admissions waiting together share a turn (see `line`).
            None => self.admit_in_line(actor, req, checked).await?,
            Some(id) => {
                let mut w = self.begin_admission().await?;
                let mut read = TurnReads::new(self.pools_in_force(w.db()).await?);
                if let Some(event) = Self::take_over(&w, actor, id, checked.now).await? {
                    w.emit(event);
                }
                let row = self
                    .admit_in(&mut w, &mut read, actor, req, &checked, Some(id))
                    .await?;
                w.commit(self, &actor.audit()).await?;
                (row, std::sync::Arc::new(read.pools.specs))
            }
        };
        if row.state == AllocationPhase::Placed {
            // Placed in this write, on a host that takes placements: there
            // is no drain to tell of, and nothing more to read.
            return self.view_with(row, &actor.tenant_slug, &Default::default(), &pools);
        }
        self.allocation_view_in(row, &actor.tenant_slug, &pools)
            .await
    }

    /// What can be checked of a request before its turn: who asks, the
    /// purpose, the pool, shape, lease and priority class.
    async fn check_request(
        &self,
        actor: &TenantActor,
        req: &NewAllocation,
    ) -> Result<Checked, ServiceError> {
        actor.require_request("request slices for it")?;
        if let Some(t) = &req.tenant {
            if t != &actor.tenant_slug {
                return Err(ServiceError::not_found(format!("tenant '{t}'")));
            }
        }
        let purpose = req.purpose.trim().to_owned();
        if purpose.chars().count() > MAX_PURPOSE_CHARS {
            return Err(ServiceError::invalid(
                "purpose",
                format!("must be at most {MAX_PURPOSE_CHARS} characters"),
            ));
        }
        if let Some(id) = req.replaces {
            let old = self.own_row(actor, id).await.map_err(|_| {
                ServiceError::invalid(
                    "replaces",
                    format!("allocation {id} is not one of this tenant's slices"),
                )
            })?;
            if !AllocationPhase::OPEN.contains(&old.state)
                || old.state == AllocationPhase::Releasing
            {
                return Err(ServiceError::invalid(
                    "replaces",
                    format!(
                        "allocation {id} is {}; only an open slice can be replaced",
                        old.state
                    ),
                ));
            }
        }
        let spec = self.pool_spec(&self.db, "pool", &req.pool).await?;
        let offer = Self::pool_offer(&spec);
        let demand = offer
            .admit(&req.shape, req.lease_hours)
            .map_err(|e| match e {
                PoolShapeError::LeaseOutOfRange { .. } => {
                    ServiceError::invalid("lease_hours", e.to_string())
                }
                other => ServiceError::invalid("shape", other.to_string()),
            })?;
        let request = offer
            .placement_request(&req.shape)
            .map_err(|e| ServiceError::invalid("shape", e.to_string()))?;
        let class = self
            .settings
            .priority_classes
            .choose(
                &actor.tenant_slug,
                &spec.name,
                req.priority_class.as_deref(),
            )
            .map_err(|e| ServiceError::invalid("priority_class", e.to_string()))?
            .clone();
        self.check_budget(actor.tenant_id, req.qos).await?;
        Ok(Checked {
            spec,
            demand,
            request,
            class,
            purpose,
            now: self.now(),
        })
    }

    /// Admits `req`, checked as `checked`, in `w`, which holds the
    /// admission turn and read `pools` in it: the quota, then the plan,
    /// then the row, written once, placed or queued. Writes nothing when
    /// it refuses (only a database error can leave `w` changed), so a
    /// write that admits several requests goes on past a refused one.
    pub(super) async fn admit_in(
        &self,
        w: &mut Write,
        read: &mut TurnReads,
        actor: &TenantActor,
        req: &NewAllocation,
        checked: &Checked,
        requeue_of: Option<AllocationId>,
    ) -> Result<allocation::Model, ServiceError> {
        let pools = &read.pools;
        let Checked {
            spec,
            demand,
            request,
            class,
            purpose,
            now,
        } = checked;
        let (spec, now) = (spec.clone(), *now);
        let txn = w.db();
        // A platform admin may have changed the pool since it was read.
        if pools.named("pool", &req.pool)? != &spec {
            return Err(ServiceError::Conflict(format!(
                "pool '{}' changed while your request was checked; send it again",
                spec.name
            )));
        }
        let key = (actor.tenant_id, spec.name.clone());
        let held = match read.held.get(&key) {
            Some(held) => *held,
            None => {
                let held = Self::quota_and_usage(txn, actor.tenant_id, &spec.name, now).await?;
                read.held.insert(key.clone(), held);
                held
            }
        };
        let (quota, usage) = held;
        let quota = quota.ok_or_else(|| {
            ServiceError::QuotaExceeded(format!(
                "your tenant has no quota in pool '{}'; ask a platform admin for one",
                spec.name
            ))
        })?;
        // Only a burstable request borrows: the others need not read the
        // whole pool's quota and use inside the admission turn.
        let borrowable = if req.qos == QosClass::Burstable {
            let (pool_quota, pool_usage) = Self::pool_quota_use(txn, &spec.name, now).await?;
            tessera_core::quota::headroom(&pool_quota, &pool_usage)
        } else {
            tessera_core::quota::Demand::default()
        };
        req.qos
            .check_quota((&quota, &usage), &borrowable, demand)
            .map_err(|e| ServiceError::QuotaExceeded(e.to_string()))?;

        // The request as it will be stored: planned first, then written
        // once, placed or queued (no insert followed by an update in the
        // turn every admission waits for).
        let pending = allocation::Model {
            id: PENDING_ID,
            tenant_id: actor.tenant_id,
            pool: spec.name.clone(),
            requested_by: actor.name.clone(),
            state: AllocationState::Requested.phase(),
            state_data: allocation::StoredState(AllocationState::Requested),
            shape: allocation::StoredShape(req.shape.clone()),
            shape_label: label(&req.shape),
            demand_compute_milli: i64::from(demand.compute.0),
            demand_memory_mib: i64::try_from(demand.memory.0).unwrap_or(i64::MAX),
            demand_slices: i32::try_from(demand.slices).unwrap_or(i32::MAX),
            priority: class.value,
            priority_class: class.name.clone(),
            purpose: purpose.clone(),
            lease_hours: i32::try_from(req.lease_hours).unwrap_or(i32::MAX),
            lease_ends_at: None,
            host_id: None,
            placement: None,
            generation: None,
            mig_device_uuid: None,
            created_at: now,
            placed_at: None,
            active_at: None,
            ended_at: None,
            updated_at: now,
            requested_by_user_id: actor.user_id,
            lease_warned_at: None,
            capacity_lost_at: None,
            capacity_lost_reason: None,
            idle_warned_at: None,
            idle_deadline: None,
            idle_keeps: 0,
            idle_watch_from: None,
            reclaimed_at: None,
            qos: req.qos,
            preempt_deadline: None,
            preempt_for: None,
            preempt_reason: None,
            preempted_at: None,
            processes_terminated: None,
            processes_killed: None,
            replaces_id: req.replaces,
        };
        // The new request takes its turn in the pool's queue: it starts now
        // if the queue lets it (requests ahead of it placed first; a host
        // kept for a request that waited too long respected), else it waits.
        // On the index this write's last admission left, if any.
        let in_hand = w.hook::<CarriedIndexes>().take(&spec.name);
        let txn = w.db();
        let mut planned = self
            .plan_pool_indexed(txn, pools, &spec, now, Some(&pending), false, in_hand)
            .await?;
        if let Some(decision) = planned.plan.placed(PENDING_ID) {
            if planned.index.as_ref().is_some_and(|i| i.reused)
                && !self
                    .recheck_host(txn, &planned.snapshot, decision, now)
                    .await?
            {
                // The kept index no longer matches the chosen host (it went
                // silent, or changed without a commit naming it): plan again
                // on the pool as stored.
                self.count_stale();
                planned = self
                    .plan_pool_indexed(txn, pools, &spec, now, Some(&pending), true, None)
                    .await?;
            }
        }
        let placed = match planned.plan.placed(PENDING_ID).cloned() {
            Some(decision) => {
                match Self::placed_row(w, pending.clone(), &mut planned.snapshot, &decision, now)
                    .await?
                {
                    Some(a) => Some((insert_new(txn, a).await?, decision)),
                    None => None,
                }
            }
            None => None,
        };
        let stored = placed.as_ref().map(|(placed, decision)| {
            (
                PENDING_ID,
                placed.id,
                holding_of(placed, decision.clone(), now),
            )
        });
        // Kept for the write's next admission and, once it commits, for the
        // next write. Not after a refusal below: its workload counts the
        // refused request (the write's next plan of the pool reads it).
        let carried = planned.carry(stored.into_iter().collect());
        let txn = w.db();
        let row = match placed.map(|(placed, _)| placed) {
            Some(placed) => placed,
            None => {
                // Refuse what could never fit, rather than queueing it forever.
                let empty = self
                    .pool_snapshot(txn, &spec, now, View::Empty, &[])
                    .await?;
                if empty.gpu_count() == 0 {
                    return Err(ServiceError::Conflict(format!(
                        "pool '{}' has no GPUs yet; try again once its hosts have reported",
                        spec.name
                    )));
                }
                if let Err(e) = empty.fleet.place(request, Policy::Pack) {
                    return Err(ServiceError::invalid(
                                "shape",
                                format!(
                                    "{} can never fit in pool '{}', even when it is empty ({e}); ask for less",
                                    label(&req.shape),
                                    spec.name
                                ),
                    ));
                }

                let state = transition(pending.lifecycle(), &AllocationEvent::NoCapacity)
                    .map_err(|e| ServiceError::Conflict(e.to_string()))?;
                let mut a: allocation::ActiveModel = pending.into();
                set_state(&mut a, &state, now);
                insert_new(txn, a).await?
            }
        };
        if let Some(carried) = carried {
            w.hook::<CarriedIndexes>().carry(carried);
        }
        w.emit_as(
            DomainEvent::AllocationRequested {
                alloc: AllocationRef::of(&row),
                shape: req.shape.clone(),
                lease_hours: req.lease_hours,
                priority_class: row.priority_class.clone(),
                state: row.lifecycle().clone(),
                requeue_of,
            },
            actor.audit(),
        );
        if req.qos == QosClass::Guaranteed {
            // What the next admission of the tenant in this turn holds.
            read.held.insert(key, (held.0, held.1.plus(demand)));
        }
        Ok(row)
    }

    /// Checks that allocation `id` may be asked for again, and releases it
    /// when it still holds its lost capacity (in the caller's transaction).
    /// Returns the release's event.
    async fn take_over(
        w: &Write,
        actor: &TenantActor,
        id: AllocationId,
        now: DateTime<Utc>,
    ) -> Result<Option<DomainEvent>, ServiceError> {
        let old = allocation::Entity::find_by_id(id)
            .filter(allocation::Column::TenantId.eq(actor.tenant_id))
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
        let state = old.lifecycle().clone();
        if state.is_terminal() {
            return Ok(None);
        }
        let lost = old.capacity_lost_at.is_some()
            && matches!(
                old.state,
                AllocationPhase::Provisioning | AllocationPhase::Active
            );
        if !lost {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} is {} and has not lost its GPU; only a slice that lost its capacity or has ended can be requested again",
                old.state
            )));
        }
        let before = old.state;
        let next = transition(&state, &AllocationEvent::Release)
            .map_err(|e| ServiceError::Conflict(e.to_string()))?;
        let host_id = old.host_id;
        let alloc = AllocationRef::of(&old);
        let mut a: allocation::ActiveModel = old.into();
        set_state(&mut a, &next, now);
        if let Some(h) = host_id {
            a.generation = Set(Some(w.bump_generation(h).await?));
        }
        if !update_if_state(w.db(), id, before, a).await? {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} is changing right now; try again"
            )));
        }
        Ok(Some(DomainEvent::AllocationReleased {
            alloc,
            before,
            after: next.phase(),
        }))
    }
}
