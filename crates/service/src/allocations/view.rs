//! Reading allocations: one slice's view, a tenant's list, and the actor a
//! slice's owner acts as.

use super::stored::{AllocationRow, StoredPlacement};
use crate::entity::{allocation, gpu, tenant};
use crate::pools::PoolSpec;
use crate::TenantActor;
use crate::{Principal, Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tessera_core::ids::{AllocationId, TenantId};

use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::{AllocationState, ReleaseOutcome};
use tessera_core::placement::Slice;
use tessera_core::sharing::{MpsShare, SliceShape};
use tessera_core::slice::{connection, ConnectionTarget};
use tessera_protocol::views::{AllocationView, IdleNotice, ProcessesStoppedView};

/// The host and device(s) of an active slice, as its connection details
/// and its Kubernetes claim name them; `None` before it is active (or a
/// MIG slice whose device the agent has not reported yet).
pub(crate) fn connection_target(row: &allocation::Model) -> Option<(String, ConnectionTarget)> {
    let p = match (row.stored_placement(), row.state) {
        (Some(p), AllocationPhase::Active) => p,
        _ => return None,
    };
    let first = p.gpus.first().map(|g| g.uuid.clone()).unwrap_or_default();
    let target = match (&p.slice, row.slice_shape()) {
        (Slice::Mig(m), _) => row
            .mig_device_uuid
            .clone()
            .map(|uuid| ConnectionTarget::Mig {
                profile: m.profile.clone(),
                device_uuid: uuid,
            })?,
        (
            _,
            SliceShape::Mps {
                compute_percent,
                memory_mib,
            },
        ) => ConnectionTarget::Mps {
            gpu_uuid: first,
            share: MpsShare {
                compute_percent: *compute_percent,
                memory: *memory_mib,
            },
        },
        (_, SliceShape::TimeSlice {}) => ConnectionTarget::TimeSlice { gpu_uuid: first },
        _ => ConnectionTarget::Whole {
            gpu_uuids: p.gpu_uuids(),
        },
    };
    Some((p.hostname.clone(), target))
}

impl Service {
    /// The view of one row.
    pub(crate) async fn allocation_view_of(
        &self,
        row: allocation::Model,
        tenant_slug: &tessera_core::checked::TenantSlug,
    ) -> Result<AllocationView, ServiceError> {
        let pools = self.pools(&self.db).await?;
        self.allocation_view_in(row, tenant_slug, &pools).await
    }

    /// [`Service::allocation_view_of`] with the pools in force read already.
    pub(crate) async fn allocation_view_in(
        &self,
        row: allocation::Model,
        tenant_slug: &tessera_core::checked::TenantSlug,
        pools: &[PoolSpec],
    ) -> Result<AllocationView, ServiceError> {
        if row.state != AllocationPhase::Queued {
            let mut view = self.view_with(row.clone(), tenant_slug, &Default::default(), pools)?;
            view.drain = self.drain_notice(&row).await?;
            if let Some(c) = view.connection.as_mut() {
                self.add_claim(c, &row).await?;
            }
            return Ok(view);
        }
        let positions = self.queues(&self.db).await?;
        let mut view = self.view_with(row.clone(), tenant_slug, &positions, pools)?;
        let (why, start) = self.waiting_for(&row).await?;
        view.waiting_for = Some(why);
        view.estimated_start = start;
        view.starts_now = self.starts_now(&row).await?;
        Ok(view)
    }

    /// Adds the DRA claim of an active slice to its connection details.
    async fn add_claim(
        &self,
        c: &mut tessera_core::slice::Connection,
        row: &allocation::Model,
    ) -> Result<(), ServiceError> {
        let Some(t) = tenant::Entity::find_by_id(row.tenant_id)
            .one(&self.db)
            .await?
        else {
            return Ok(());
        };
        if let Ok(claim) = self.claim_of(row, &t) {
            c.kubernetes_yaml = claim
                .documents()
                .and_then(|d| d.to_yaml())
                .map_err(|e| ServiceError::Internal(e.to_string()))?;
            c.kubernetes_notes = claim.notes;
        }
        Ok(())
    }

    /// The drain a live slice is caught in, if any.
    async fn drain_notice(
        &self,
        row: &allocation::Model,
    ) -> Result<Option<tessera_protocol::views::DrainNotice>, ServiceError> {
        let (Some(host_id), true) = (row.host_id, AllocationPhase::CAPACITY.contains(&row.state))
        else {
            return Ok(None);
        };
        let Some(h) = crate::entity::host::Entity::find_by_id(host_id)
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let uuids: Vec<String> = row
            .stored_placement()
            .map(StoredPlacement::gpu_uuids)
            .unwrap_or_default();
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::Uuid.is_in(uuids))
            .all(&self.db)
            .await?;
        Ok(super::drain_of(&h, &gpus.iter().collect::<Vec<_>>()))
    }

    /// Shapes that would start at once instead of queued `row`: in every
    /// pool, those the live fleet has room for (the tenant rule included)
    /// and, for a guaranteed request, the tenant's quota allows; ranked by
    /// [`tessera_core::slice::alternatives::rank`].
    async fn starts_now(
        &self,
        row: &allocation::Model,
    ) -> Result<Vec<tessera_core::slice::alternatives::StartsNow>, ServiceError> {
        use tessera_core::placement::Policy;
        use tessera_core::slice::alternatives::{rank, StartsNow};
        let now = self.now();
        let mut fits = Vec::new();
        for spec in self.pools(&self.db).await? {
            let offer = Self::pool_offer(&spec);
            let (quota, usage) =
                Self::quota_and_usage(&self.db, row.tenant_id, &spec.name, now).await?;
            let guaranteed = row.qos == tessera_core::schedule::QosClass::Guaranteed;
            if guaranteed && quota.is_none() {
                continue;
            }
            let lease = u32::try_from(row.lease_hours)
                .unwrap_or(1)
                .clamp(1, offer.max_lease_hours.max(1));
            let mut shapes = offer.probe_shapes();
            if offer.placement_request(row.slice_shape()).is_ok()
                && !shapes.contains(row.slice_shape())
            {
                shapes.push(row.slice_shape().clone());
            }
            let snapshot = self
                .pool_snapshot(&self.db, &spec, now, super::View::Live, &[])
                .await?;
            for shape in shapes {
                let (Ok(demand), Ok(request)) =
                    (offer.admit(&shape, lease), offer.placement_request(&shape))
                else {
                    continue;
                };
                if guaranteed
                    && quota
                        .as_ref()
                        .is_none_or(|q| tessera_core::quota::check(q, &usage, &demand).is_err())
                {
                    continue;
                }
                let request = request.for_tenant(row.tenant_id, spec.isolation.separates_tenants());
                if snapshot.fleet.place(&request, Policy::Pack).is_ok() {
                    fits.push(StartsNow {
                        pool: spec.name.to_string(),
                        label: tessera_core::slice::label(&shape),
                        shape,
                        demand,
                    });
                }
            }
        }
        Ok(rank(
            row.pool.as_str(),
            row.slice_shape(),
            &row.demand(),
            fits,
        ))
    }

    /// Why a queued allocation waits, and when it is expected to start,
    /// from the same plan the timer follows.
    async fn waiting_for(
        &self,
        row: &allocation::Model,
    ) -> Result<(String, Option<DateTime<Utc>>), ServiceError> {
        let pools = self.pools(&self.db).await?;
        let Some(spec) = pools.iter().find(|p| p.name == row.pool) else {
            return Ok((
                format!(
                    "pool '{}' is no longer offered; cancel the request",
                    row.pool
                ),
                None,
            ));
        };
        let now = self.now();
        let plan = self.plan_pool(&self.db, spec, now, true).await?.plan;
        if plan.placed(row.id).is_some() {
            return Ok((
                "it fits now and is placed within seconds".to_string(),
                Some(now),
            ));
        }
        let Some(waits) = plan.waits(row.id) else {
            return Ok((
                format!(
                    "pool '{}' no longer offers {}; cancel the request",
                    row.pool, row.shape_label
                ),
                None,
            ));
        };
        let mut why = waits.why.reason();
        if plan.reservation.as_ref().is_some_and(|r| r.id == row.id) {
            why.push_str("; it has waited longest, so the host where it fits first is kept for it");
        }
        let mut start = waits
            .estimated_start
            .and_then(DateTime::<Utc>::from_timestamp_millis);
        // Slices told to give way to it: it starts once they are gone.
        let giving_way = allocation::Entity::find()
            .filter(allocation::Column::PreemptFor.eq(row.id))
            .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
            .all(&self.db)
            .await?;
        if let Some(last) = giving_way.iter().filter_map(|a| a.preempt_deadline).max() {
            why.push_str(&format!(
                "; {} slice(s) of a lower QoS class or priority are being preempted to make room (by {} UTC), and it starts once they are gone",
                giving_way.len(),
                last.format("%Y-%m-%d %H:%M")
            ));
            let ready = last.max(now);
            start = Some(start.map_or(ready, |s| s.min(ready)));
        }
        Ok((why, start))
    }

    pub(crate) fn view_with(
        &self,
        row: allocation::Model,
        tenant_slug: &tessera_core::checked::TenantSlug,
        queues: &std::collections::BTreeMap<
            tessera_core::checked::PoolName,
            Vec<tessera_core::schedule::QueueEntry>,
        >,
        pools: &[crate::pools::PoolSpec],
    ) -> Result<AllocationView, ServiceError> {
        // A row that does not read back is an error, not a guess.
        let shape = row.slice_shape().clone();
        let placement = row.stored_placement();
        let (reason, ending_as) = match row.lifecycle() {
            AllocationState::Failed { reason } => (Some(reason.clone()), None),
            AllocationState::Releasing {
                outcome,
                teardown_error,
            } => {
                let reason = match outcome {
                    ReleaseOutcome::Failed { reason } => Some(reason.clone()),
                    _ => None,
                };
                let reason = match (reason, teardown_error) {
                    (r, Some(t)) => Some(match r {
                        Some(r) => format!("{r}; tearing down failed: {t}"),
                        None => format!("tearing down failed, retrying: {t}"),
                    }),
                    (r, None) => r,
                };
                (reason, Some(outcome.final_phase()))
            }
            _ => (None, None),
        };
        let queue_position = queues
            .get(&row.pool)
            .and_then(|q| q.iter().position(|e| e.id == row.id))
            .map(|p| u32::try_from(p + 1).unwrap_or(u32::MAX));
        let connection = connection_target(&row).map(|(host, t)| connection(&host, row.id, &t));
        let pool = pools.iter().find(|p| p.name == row.pool);
        let max_lease_hours = pool.map_or(0, |p| p.max_lease_hours);
        let idle = match (row.idle_warned_at, row.idle_deadline, row.state) {
            (Some(since), Some(deadline), AllocationPhase::Active) => Some(IdleNotice {
                since,
                deadline,
                keeps: u32::try_from(row.idle_keeps.max(0)).unwrap_or(0),
                max_keeps: pool.and_then(|p| p.idle_reclaim).map_or(0, |p| p.max_keeps),
            }),
            _ => None,
        };
        Ok(AllocationView {
            id: row.id,
            tenant: tenant_slug.to_string(),
            pool: row.pool.to_string(),
            state: row.state,
            reason,
            ending_as,
            demand: row.demand(),
            shape,
            shape_label: row.shape_label.clone(),
            purpose: row.purpose.clone(),
            requested_by: row.requested_by.clone(),
            lease_hours: u32::try_from(row.lease_hours).unwrap_or(0),
            lease_ends_at: row.lease_ends_at,
            max_lease_hours,
            host: placement.as_ref().map(|p| p.hostname.clone()),
            gpus: placement
                .as_ref()
                .map(|p| p.gpus.clone())
                .unwrap_or_default(),
            waiting_for: None,
            estimated_start: None,
            mig_start: placement.as_ref().and_then(|p| match &p.slice {
                Slice::Mig(m) => Some(m.start),
                _ => None,
            }),
            priority_class: row.priority_class.clone(),
            qos: row.qos,
            queue_position,
            capacity_lost: row
                .capacity_lost_at
                .map(|at| tessera_protocol::views::CapacityLost {
                    at,
                    reason: row.capacity_lost_reason.clone().unwrap_or_default(),
                }),
            drain: None,
            idle,
            preemption: match (row.preempt_deadline, row.preempt_for) {
                (Some(deadline), Some(for_request)) => {
                    Some(tessera_protocol::views::PreemptionNotice {
                        deadline,
                        for_request,
                        reason: row.preempt_reason.clone().unwrap_or_default(),
                        preempted_at: row.preempted_at,
                    })
                }
                _ => None,
            },
            placement_why: None,
            processes_stopped: match (row.processes_terminated, row.processes_killed) {
                (Some(t), Some(k)) => Some(ProcessesStoppedView {
                    terminated: u32::try_from(t).unwrap_or(0),
                    killed: u32::try_from(k).unwrap_or(0),
                }),
                _ => None,
            },
            replaces: row.replaces_id,
            starts_now: Vec::new(),
            connection,
            created_at: row.created_at,
            placed_at: row.placed_at,
            active_at: row.active_at,
            ended_at: row.ended_at,
            as_of: self.now(),
        })
    }

    /// The tenant's allocations: open ones first, then the newest 100 that ended.
    pub async fn list_allocations(
        &self,
        actor: &TenantActor,
    ) -> Result<Vec<AllocationView>, ServiceError> {
        let now = self.now();
        Ok(self
            .kept_allocations(actor)
            .await?
            .iter()
            .map(|v| AllocationView {
                as_of: now,
                ..v.clone()
            })
            .collect())
    }

    /// [`Service::list_allocations`] as kept between the writes that change
    /// it (see `list_cache`): the same shared list until then, each view's
    /// `as_of` the time it was read. The REST list serves these, so it can
    /// encode a list once.
    pub async fn kept_allocations(
        &self,
        actor: &TenantActor,
    ) -> Result<std::sync::Arc<[AllocationView]>, ServiceError> {
        let tenant = actor.tenant_id;
        let now = self.now();
        if let Some(kept) = self.lists.get(tenant, now) {
            return Ok(kept);
        }
        let stamp = self.lists.stamp(tenant);
        // Callers that missed together (the kept list just expired) share
        // one read; one that fails is read again by each, for its error.
        let service = self.clone();
        let slug = actor.tenant_slug.clone();
        let shared = self
            .lists
            .flights
            .share(tenant, stamp, move || async move {
                service.read_list(tenant, &slug, stamp, now).await.ok()
            })
            .await;
        match shared {
            Some(views) => Ok(views),
            None => self.read_list(tenant, &actor.tenant_slug, stamp, now).await,
        }
    }

    /// Reads `tenant`'s list (under `stamp`, taken before) and keeps it
    /// when it may be kept.
    async fn read_list(
        &self,
        tenant: TenantId,
        tenant_slug: &tessera_core::checked::TenantSlug,
        stamp: crate::runtime::list_cache::Stamp,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<std::sync::Arc<[AllocationView]>, ServiceError> {
        // The open slices, and the latest 100 that ended.
        let open = allocation::Entity::find()
            .filter(allocation::Column::TenantId.eq(tenant))
            .filter(allocation::Column::State.is_in(AllocationPhase::OPEN.iter().copied()))
            .order_by_desc(allocation::Column::Id)
            .all(&self.db)
            .await?;
        let ended = allocation::Entity::find()
            .filter(allocation::Column::TenantId.eq(tenant))
            .filter(allocation::Column::State.is_not_in(AllocationPhase::OPEN.iter().copied()))
            .order_by_desc(allocation::Column::Id)
            .limit(100)
            .all(&self.db)
            .await?;
        // Queue positions only where a slice waits.
        let queued = open.iter().any(|r| r.state == AllocationPhase::Queued);
        let queues = if queued {
            self.queues(&self.db).await?
        } else {
            Default::default()
        };
        let pools = self.pools(&self.db).await?;
        let views = open
            .into_iter()
            .chain(ended)
            .map(|r| self.view_with(r, tenant_slug, &queues, &pools))
            .collect::<Result<Vec<_>, _>>()?;
        // A queue position moves with other tenants' requests: not kept.
        Ok(if queued {
            views.into()
        } else {
            self.lists.put(tenant, stamp, now, views)
        })
    }

    pub(crate) async fn own_row(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<allocation::Model, ServiceError> {
        allocation::Entity::find_by_id(id)
            .filter(allocation::Column::TenantId.eq(actor.tenant_id))
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))
    }

    /// One allocation of the actor's tenant; any other id is `NotFound`.
    pub async fn get_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<AllocationView, ServiceError> {
        let row = self.own_row(actor, id).await?;
        let why = actor
            .platform_admin
            .then(|| row.stored_placement().and_then(|p| p.why.clone()))
            .flatten();
        let mut view = self.allocation_view_of(row, &actor.tenant_slug).await?;
        view.placement_why = why;
        Ok(view)
    }

    /// The tenant access of a signed-in user to allocation `id` (for the
    /// REST API, where the URL names no tenant).
    pub async fn actor_for_allocation(
        &self,
        who: &Principal,
        id: AllocationId,
    ) -> Result<TenantActor, ServiceError> {
        let not_found = || ServiceError::not_found(format!("allocation {id}"));
        let row = allocation::Entity::find_by_id(id)
            .one(&self.db)
            .await?
            .ok_or_else(not_found)?;
        let t = tenant::Entity::find_by_id(row.tenant_id)
            .one(&self.db)
            .await?
            .ok_or_else(not_found)?;
        self.tenant_actor(who, &t.slug)
            .await
            .map_err(|_| not_found())
    }
}
