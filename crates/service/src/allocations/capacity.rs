//! Slices whose capacity went away: their GPU turned unhealthy or is no
//! longer reported, their host stayed silent past the grace period, or an
//! admin drains it.
//!
//! A slice that is only `placed` has nothing on a GPU yet: it goes back to
//! the queue at once and is placed elsewhere. A slice on its GPU
//! (`provisioning`, `active`) is marked: it keeps its state (the work may
//! still run, and the agent still has to tear it down), no longer counts
//! against the tenant's quota, and its owner is told and can ask for it
//! again elsewhere in one step. When the GPU or host comes back, the mark
//! is cleared.

use super::stored::{set_state, update_if_state, AllocationRow, StoredPlacement};
use crate::audit::Actor;
use crate::entity::{allocation, gpu, host};
use crate::events::{AllocationRef, DomainEvent};
use crate::write::Write;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use std::collections::BTreeMap;
use tessera_core::health::HealthVerdict;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationPhase};

/// What a live slice on an online host lost, if anything: the first of its
/// GPUs that is missing or unhealthy.
pub(crate) fn gpu_loss(
    placement: &StoredPlacement,
    gpus: &BTreeMap<String, gpu::Model>,
) -> Option<String> {
    placement.gpus.iter().find_map(|g| match gpus.get(&g.uuid) {
        None => Some(format!(
            "GPU {} ({}) on {} is no longer reported by its host",
            g.index, g.uuid, placement.hostname
        )),
        Some(row) if row.health == HealthVerdict::Unhealthy => Some(format!(
            "GPU {} on {} is unhealthy: {}",
            g.index,
            placement.hostname,
            row.health_findings
                .as_ref()
                .map(|f| {
                    f.0.iter()
                        .map(|f| f.message.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_else(|| "reported unhealthy".to_owned())
        )),
        Some(_) => None,
    })
}

/// The live allocations on a host (those holding capacity there).
pub(crate) async fn live_on_host<C: sea_orm::ConnectionTrait>(
    conn: &C,
    host_id: HostId,
) -> Result<Vec<allocation::Model>, ServiceError> {
    Ok(allocation::Entity::find()
        .filter(allocation::Column::HostId.eq(host_id))
        .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
        .all(conn)
        .await?)
}

impl Service {
    /// Marks or unmarks each of `rows` by what it lost (`None`: nothing),
    /// inside the caller's write. Returns whether a host's desired state
    /// changed (a placed slice went back to the queue).
    pub(crate) async fn settle_capacity(
        &self,
        w: &mut Write,
        rows: Vec<(allocation::Model, Option<String>)>,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        for (row, loss) in rows {
            match (loss, row.capacity_lost_at.is_some()) {
                (Some(reason), false) => {
                    self.lose_capacity(w, row, reason, now).await?;
                }
                (None, true) => {
                    let lost = row.capacity_lost_reason.clone().unwrap_or_default();
                    let alloc = AllocationRef::of(&row);
                    let mut a: allocation::ActiveModel = row.into();
                    a.capacity_lost_at = Set(None);
                    a.capacity_lost_reason = Set(None);
                    a.updated_at = Set(now);
                    a.update(w.db()).await?;
                    w.emit(DomainEvent::AllocationCapacityRestored { alloc, lost });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// One slice lost its capacity: a placed one goes back to the queue, one
    /// on its GPU is marked.
    pub(crate) async fn lose_capacity(
        &self,
        w: &mut Write,
        row: allocation::Model,
        reason: String,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        let before = row.state;
        let alloc = AllocationRef::of(&row);
        match before {
            AllocationPhase::Placed => {
                let state = row.lifecycle().clone();
                let next = transition(&state, &AllocationEvent::CapacityLost)
                    .map_err(|e| ServiceError::Conflict(e.to_string()))?;
                let host_id = row.host_id;
                let id = row.id;
                let mut a: allocation::ActiveModel = row.into();
                set_state(&mut a, &next, now);
                a.host_id = Set(None);
                a.placement = Set(None);
                a.generation = Set(None);
                a.placed_at = Set(None);
                a.mig_device_uuid = Set(None);
                if !update_if_state(w.db(), id, before, a).await? {
                    // The agent took it meanwhile; the next pass looks again.
                    return Ok(());
                }
                if let Some(h) = host_id {
                    w.bump_generation(h).await?;
                }
                w.emit(DomainEvent::AllocationCapacityLost {
                    alloc,
                    before,
                    state: next,
                    reason,
                });
                Ok(())
            }
            AllocationPhase::Provisioning | AllocationPhase::Active => {
                let state = row.lifecycle().clone();
                let id = row.id;
                let mut a: allocation::ActiveModel = row.into();
                a.capacity_lost_at = Set(Some(now));
                a.capacity_lost_reason = Set(Some(reason.clone()));
                a.updated_at = Set(now);
                if !update_if_state(w.db(), id, before, a).await? {
                    return Ok(());
                }
                w.emit(DomainEvent::AllocationCapacityLost {
                    alloc,
                    before,
                    state,
                    reason,
                });
                Ok(())
            }
            // Already going away, or not on a GPU.
            _ => Ok(()),
        }
    }

    /// Marks the slices of hosts silent for longer than the grace period
    /// (`host_lost_after`). Returns how many were marked or re-queued.
    pub(crate) async fn mark_lost_hosts(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        let cutoff = now - self.settings.host_lost_after;
        let silent = host::Entity::find()
            .filter(host::Column::LastSeenAt.lte(cutoff))
            .all(&self.db)
            .await?;
        let mut n = 0;
        for h in silent {
            let unmarked: Vec<allocation::Model> = live_on_host(&self.db, h.id)
                .await?
                .into_iter()
                .filter(|a| a.capacity_lost_at.is_none() && a.state != AllocationPhase::Releasing)
                .collect();
            if unmarked.is_empty() {
                continue;
            }
            let mut w = self.begin_write().await?;
            // Re-read inside the write: the host may have reported meanwhile.
            let Some(h) = host::Entity::find_by_id(h.id).one(w.db()).await? else {
                continue;
            };
            let Some(seen) = h.last_seen_at.filter(|t| *t <= cutoff) else {
                continue;
            };
            let reason = format!(
                "host {} has not reported since {} UTC",
                h.hostname,
                seen.format("%Y-%m-%d %H:%M:%S")
            );
            let rows = live_on_host(w.db(), h.id)
                .await?
                .into_iter()
                .filter(|a| a.capacity_lost_at.is_none())
                .map(|a| (a, Some(reason.clone())))
                .collect::<Vec<_>>();
            n += u32::try_from(rows.len()).unwrap_or(u32::MAX);
            self.settle_capacity(&mut w, rows, now).await?;
            w.commit(self, &Actor::System).await?;
        }
        Ok(n)
    }

    /// Ends the slices of drains whose deadline has passed. Returns how many.
    pub(crate) async fn end_drains(&self, now: DateTime<Utc>) -> Result<u32, ServiceError> {
        use tessera_core::availability::OpsMode;
        let hosts = host::Entity::find()
            .filter(host::Column::OpsMode.eq(OpsMode::Draining))
            .filter(host::Column::DrainDeadline.lte(now))
            .all(&self.db)
            .await?;
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::OpsMode.eq(OpsMode::Draining))
            .filter(gpu::Column::DrainDeadline.lte(now))
            .all(&self.db)
            .await?;
        let mut due: BTreeMap<AllocationId, String> = BTreeMap::new();
        for h in &hosts {
            for a in live_on_host(&self.db, h.id).await? {
                due.entry(a.id).or_insert_with(|| {
                    format!(
                        "ended by the drain of host {}: {}",
                        h.hostname,
                        h.ops_reason.clone().unwrap_or_default()
                    )
                });
            }
        }
        for g in &gpus {
            for a in live_on_host(&self.db, g.host_id).await? {
                let on_gpu = a
                    .stored_placement()
                    .is_some_and(|p| p.gpus.iter().any(|x| x.uuid == g.uuid));
                if on_gpu {
                    due.entry(a.id).or_insert_with(|| {
                        format!(
                            "ended by the drain of GPU {} ({}): {}",
                            g.idx,
                            g.uuid,
                            g.ops_reason.clone().unwrap_or_default()
                        )
                    });
                }
            }
        }
        let mut n = 0;
        for (id, reason) in due {
            let ended = self
                .end_one(id, AllocationEvent::Fail { reason }, now, |a| {
                    matches!(
                        a.state,
                        AllocationPhase::Placed
                            | AllocationPhase::Provisioning
                            | AllocationPhase::Active
                    )
                })
                .await?;
            if ended {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The drain a live slice is caught in, if any: its host's, else its GPU's.
pub(crate) fn drain_of(
    h: &host::Model,
    gpus: &[&gpu::Model],
) -> Option<tessera_protocol::views::DrainNotice> {
    use tessera_core::availability::OpsMode;
    let notice = |deadline: Option<DateTime<Utc>>, reason: &Option<String>| {
        deadline.map(|deadline| tessera_protocol::views::DrainNotice {
            host: h.hostname.to_string(),
            deadline,
            reason: reason.clone().unwrap_or_default(),
        })
    };
    if h.ops_mode == OpsMode::Draining {
        return notice(h.drain_deadline, &h.ops_reason);
    }
    gpus.iter()
        .filter(|g| g.ops_mode == OpsMode::Draining)
        .find_map(|g| notice(g.drain_deadline, &g.ops_reason))
}
