//! Platform admins' decisions about hosts and GPUs: cordon, drain,
//! maintenance, resume, decommission (the rules are
//! [`tessera_core::availability::apply`]).

use crate::allocations::{live_on_host, AllocationRow};
use crate::audit::Actor;
use crate::entity::{gpu, host};
use crate::events::{AllocationRef, DomainEvent};
use crate::write::Write;
use crate::{PlatformAdmin, Service, ServiceError};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use tessera_core::availability::{apply, OpsAction, OpsError, OpsMode, OpsOutcome, OpsTarget};
use tessera_core::health::HealthVerdict;
use tessera_core::ids::HostId;
use tessera_core::lifecycle::AllocationPhase;
use tessera_protocol::views::{OpsRequest, OpsView};

/// Whether new slices may be placed on GPU `g` of host `h` (online-ness is
/// the caller's): not unhealthy, and neither it nor its host cordoned,
/// draining or in maintenance.
pub(crate) fn takes_placements(h: &host::Model, g: &gpu::Model) -> bool {
    gpu_takes_placements(h.ops_mode, g.health, g.ops_mode)
}

/// [`takes_placements`] from the admin decisions on the host and the GPU,
/// and the GPU's verdict.
pub(crate) fn gpu_takes_placements(host: OpsMode, health: HealthVerdict, ops: OpsMode) -> bool {
    health.takes_placements() && OpsMode::effective(host, ops).takes_placements()
}

/// The admin decision stored on a host row.
pub(crate) fn host_ops(h: &host::Model) -> OpsView {
    OpsView {
        mode: h.ops_mode,
        reason: h.ops_reason.clone(),
        by: h.ops_by.clone(),
        at: h.ops_at,
        drain_deadline: h.drain_deadline,
    }
}

/// The admin decision stored on a GPU row.
pub(crate) fn gpu_ops(g: &gpu::Model) -> OpsView {
    OpsView {
        mode: g.ops_mode,
        reason: g.ops_reason.clone(),
        by: g.ops_by.clone(),
        at: g.ops_at,
        drain_deadline: g.drain_deadline,
    }
}

/// Writes an admin decision into a host's or a GPU's active model (the two
/// tables have the same `ops_*` columns).
macro_rules! set_ops {
    ($a:ident, $view:ident) => {
        $a.ops_mode = Set($view.mode);
        $a.ops_reason = Set($view.reason.clone());
        $a.ops_by = Set($view.by.clone());
        $a.ops_at = Set($view.at);
        $a.drain_deadline = Set($view.drain_deadline);
    };
}

fn refused(what: &str, e: OpsError) -> ServiceError {
    match e {
        OpsError::Reason => ServiceError::invalid("reason", e.to_string()),
        OpsError::DeadlineTooFar => ServiceError::invalid("deadline_minutes", e.to_string()),
        OpsError::GpuDecommission => ServiceError::invalid("action", e.to_string()),
        _ => ServiceError::Conflict(format!("{what}: {e}")),
    }
}

impl Service {
    /// Cordons, drains, puts into maintenance, resumes or decommissions a
    /// host. Returns its decision after the change (`None`: decommissioned).
    pub async fn operate_host(
        &self,
        admin: &PlatformAdmin<'_>,
        host_id: HostId,
        req: &OpsRequest,
    ) -> Result<Option<OpsView>, ServiceError> {
        self.operate(admin, host_id, None, req).await
    }

    /// The same for one GPU of a host (by its index there).
    pub async fn operate_gpu(
        &self,
        admin: &PlatformAdmin<'_>,
        host_id: HostId,
        index: u32,
        req: &OpsRequest,
    ) -> Result<Option<OpsView>, ServiceError> {
        self.operate(admin, host_id, Some(index), req).await
    }

    async fn operate(
        &self,
        admin: &PlatformAdmin<'_>,
        host_id: HostId,
        index: Option<u32>,
        req: &OpsRequest,
    ) -> Result<Option<OpsView>, ServiceError> {
        let mut w = self.begin_write().await?;
        let by = admin.principal().name().to_owned();
        let view = self.operate_in(&mut w, &by, host_id, index, req).await?;
        w.commit(self, &Actor::User(admin.principal())).await?;
        // The ledger's history changes with the decision, not at the next
        // tick; the decision stands if recording fails (the tick retries).
        if let Err(e) = self.record_gpu_conditions(self.now()).await {
            tracing::warn!(error = %e, "recording GPU conditions after a fleet decision failed; the next tick records them");
        }
        Ok(view)
    }

    /// The decision inside the caller's write, made by `by`. Returns the
    /// decision after it (`None`: decommissioned).
    pub(crate) async fn operate_in(
        &self,
        w: &mut Write,
        by: &str,
        host_id: HostId,
        index: Option<u32>,
        req: &OpsRequest,
    ) -> Result<Option<OpsView>, ServiceError> {
        let now = self.now();
        let h = host::Entity::find_by_id(host_id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("host {host_id}")))?;
        let g = match index {
            Some(i) => Some(
                gpu::Entity::find()
                    .filter(gpu::Column::HostId.eq(host_id))
                    .filter(gpu::Column::Idx.eq(i32::try_from(i).unwrap_or(i32::MAX)))
                    .one(w.db())
                    .await?
                    .ok_or_else(|| {
                        ServiceError::not_found(format!("GPU {i} on host {}", h.hostname))
                    })?,
            ),
            None => None,
        };
        let mut live = Vec::new();
        for a in live_on_host(w.db(), host_id).await? {
            let on_target = match &g {
                None => true,
                Some(g) => a
                    .stored_placement()
                    .is_some_and(|p| p.gpus.iter().any(|x| x.uuid == g.uuid)),
            };
            if on_target {
                live.push(a);
            }
        }
        let (target, current, what) = match &g {
            Some(g) => (
                OpsTarget::Gpu,
                g.ops_mode,
                format!("GPU {} on {}", g.idx, h.hostname),
            ),
            None => (OpsTarget::Host, h.ops_mode, format!("host {}", h.hostname)),
        };
        let outcome = apply(target, current, req.action, live.len(), &req.reason)
            .map_err(|e| refused(&what, e))?;
        let reason = req.reason.trim().to_owned();
        let by = by.to_owned();
        let gpu_ref = match &g {
            Some(g) => Some((g.index()?, g.uuid.clone())),
            None => None,
        };
        let hostname = h.hostname.clone();
        let after = match outcome {
            OpsOutcome::Removed => {
                // Gone for good: its GPUs go with it (cascade), finished
                // slices keep their history without the host.
                host::Entity::delete_by_id(host_id).exec(w.db()).await?;
                w.emit(DomainEvent::FleetOperated {
                    host_id,
                    hostname,
                    gpu: None,
                    action: req.action,
                    before: current,
                    after: None,
                    reason,
                    drain_deadline: None,
                });
                return Ok(None);
            }
            OpsOutcome::Mode(m) => m,
        };
        let deadline = match req.action {
            OpsAction::Drain { deadline_minutes } => {
                Some(now + chrono::Duration::minutes(i64::from(deadline_minutes)))
            }
            _ => None,
        };
        let view = OpsView {
            mode: after,
            reason: Some(reason.clone()),
            by: Some(by.clone()),
            at: Some(now),
            drain_deadline: deadline,
        };
        match g {
            Some(g) => {
                let mut a: gpu::ActiveModel = g.into();
                set_ops!(a, view);
                a.update(w.db()).await?;
            }
            None => {
                let mut a: host::ActiveModel = h.into();
                set_ops!(a, view);
                a.update(w.db()).await?;
            }
        }
        w.emit(DomainEvent::FleetOperated {
            host_id,
            hostname: hostname.clone(),
            gpu: gpu_ref,
            action: req.action,
            before: current,
            after: Some(after),
            reason: reason.clone(),
            drain_deadline: deadline,
        });
        if let Some(deadline) = deadline {
            for a in live {
                match a.state {
                    // Nothing on the GPU yet: placed elsewhere at once.
                    AllocationPhase::Placed => {
                        let why = format!("{what} is being drained: {reason}");
                        self.lose_capacity(w, a, why, now).await?;
                    }
                    AllocationPhase::Provisioning | AllocationPhase::Active => {
                        w.emit(DomainEvent::AllocationDraining {
                            alloc: AllocationRef::of(&a),
                            hostname: hostname.clone(),
                            deadline,
                            reason: reason.clone(),
                        });
                    }
                    _ => {}
                }
            }
        }
        Ok(Some(view))
    }
}
