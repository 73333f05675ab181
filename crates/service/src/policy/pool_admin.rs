//! Platform admins create and change pools. A change that moves GPUs to
//! another pool or another sharing mode is a planned transition: GPUs with
//! slices on them are drained (their owners told, with a deadline), empty
//! ones cordoned, and the change takes effect once they are all empty
//! ([`Service::complete_pool_changes`], at every tick). What a change
//! would do is shown before it is made ([`Service::preview_pool_change`]).

use super::pool_rows;
use crate::allocations::{occupancy, Occupancy};
use crate::audit::Actor;
use crate::entity::{gpu, host, pool, tenant};
use crate::events::DomainEvent;
use crate::pools::PoolSpec;
use crate::write::Write;
use crate::{PlatformAdmin, Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, Set};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::availability::{OpsAction, OpsMode, MAX_DRAIN_MINUTES};
use tessera_core::catalogue;
use tessera_core::ids::{GpuId, HostId, TenantId};
use tessera_core::pool::{moves, FleetGpu, GpuMove};
use tessera_protocol::views::{
    AffectedSlice, OpsRequest, PlannedChangeView, PoolAdminView, PoolChangePreview, PoolEdit,
    PoolsAdminView,
};

/// Most pools: each is scanned for every placement decision.
const MAX_POOLS: usize = 100;

/// The fleet's GPUs with their hosts and the slices on them.
struct Fleet {
    hosts: BTreeMap<HostId, host::Model>,
    gpus: Vec<gpu::Model>,
    taken: Occupancy,
}

impl Fleet {
    async fn load<C: ConnectionTrait>(conn: &C) -> Result<Self, ServiceError> {
        Ok(Self {
            hosts: host::Entity::find()
                .all(conn)
                .await?
                .into_iter()
                .map(|h| (h.id, h))
                .collect(),
            gpus: gpu::Entity::find().all(conn).await?,
            taken: occupancy(conn, None, None).await?,
        })
    }

    fn hostname(&self, g: &gpu::Model) -> &str {
        self.hosts
            .get(&g.host_id)
            .map_or("", |h| h.hostname.as_str())
    }

    fn as_core(&self) -> Result<Vec<FleetGpu>, ServiceError> {
        self.gpus
            .iter()
            .map(|g| {
                Ok(FleetGpu {
                    host: self.hostname(g).to_owned(),
                    index: g.index()?,
                    model: g.model.clone(),
                    live_slices: self.live(g),
                })
            })
            .collect()
    }

    fn live(&self, g: &gpu::Model) -> u32 {
        self.taken
            .get(&g.uuid)
            .map_or(0, |v| u32::try_from(v.len()).unwrap_or(u32::MAX))
    }

    fn gpu_of(&self, m: &GpuMove) -> Option<&gpu::Model> {
        self.gpus
            .iter()
            .find(|g| self.hostname(g) == m.host && g.index().is_ok_and(|i| i == m.index))
    }
}

/// The words a planned change leaves on the GPUs it drains or cordons, so
/// that it resumes only those (an admin's own cordon stays).
fn marker(pool: &str, reason: &str) -> String {
    format!("pool {pool} changes: {reason}")
}

impl Service {
    /// Every pool with what it holds, and what a pool can name.
    pub async fn pools_admin(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<PoolsAdminView, ServiceError> {
        let rows = pool_rows(&self.db).await?;
        let fleet = Fleet::load(&self.db).await?;
        let specs: Vec<PoolSpec> = rows.iter().map(|r| r.spec.0.clone()).collect();
        let core = fleet.as_core()?;
        let pools = rows
            .into_iter()
            .map(|r| {
                let mine: Vec<&FleetGpu> = core
                    .iter()
                    .filter(|g| {
                        tessera_core::pool::pool_of(&specs, &g.host, &g.model)
                            .is_some_and(|p| p.name == r.name)
                    })
                    .collect();
                let planned = r.pending_spec.as_ref().map(|next| {
                    let moved: BTreeSet<GpuId> = r
                        .pending_gpus
                        .as_ref()
                        .map(|g| g.0.iter().copied().collect())
                        .unwrap_or_default();
                    let mut after = specs.clone();
                    if let Some(p) = after.iter_mut().find(|p| p.name == r.name) {
                        *p = next.0.clone();
                    }
                    let waiting = fleet
                        .gpus
                        .iter()
                        .filter(|g| moved.contains(&g.id))
                        .map(|g| fleet.live(g))
                        .sum();
                    PlannedChangeView {
                        spec: next.0.clone(),
                        changes: next.0.differences(&r.spec.0),
                        moves: moves(&specs, &after, &core),
                        waiting_slices: waiting,
                        reason: r.pending_reason.clone().unwrap_or_default(),
                        by: r.pending_by.clone().unwrap_or_default(),
                        at: r.pending_at.unwrap_or(r.updated_at),
                        drain_deadline: r.drain_deadline.unwrap_or(r.updated_at),
                    }
                });
                PoolAdminView {
                    gpus: u32::try_from(mine.len()).unwrap_or(u32::MAX),
                    live_slices: mine.iter().map(|g| g.live_slices).sum(),
                    spec: r.spec.0,
                    revision: r.revision,
                    updated_at: r.updated_at,
                    updated_by: r.updated_by,
                    planned,
                }
            })
            .collect();
        let mut hosts: Vec<String> = fleet
            .hosts
            .into_values()
            .map(|h| h.hostname.into())
            .collect();
        hosts.sort();
        Ok(PoolsAdminView {
            pools,
            models: catalogue::all_models()
                .iter()
                .filter(|m| !m.generic)
                .map(|m| m.name.to_owned())
                .collect(),
            hosts,
        })
    }

    /// What saving `edit` as pool `name` would do, without doing it (for a
    /// name no pool has: what creating it would do).
    pub async fn preview_pool_change(
        &self,
        _admin: &PlatformAdmin<'_>,
        name: &str,
        edit: &PoolEdit,
    ) -> Result<PoolChangePreview, ServiceError> {
        let rows = pool_rows(&self.db).await?;
        if edit.spec.name != name {
            return Err(ServiceError::invalid(
                "spec.name",
                format!(
                    "is '{}' but the address names pool '{name}'",
                    edit.spec.name
                ),
            ));
        }
        let name = rows.iter().any(|r| r.name == name).then_some(name);
        let fleet = Fleet::load(&self.db).await?;
        let (before, after, old) = self.proposal(&self.db, &rows, name, edit).await?;
        let core = fleet.as_core()?;
        let moved = moves(&before, &after, &core);
        let tenants: BTreeMap<TenantId, tessera_core::checked::TenantSlug> = tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug))
            .collect();
        let mut affected = Vec::new();
        let mut seen = BTreeSet::new();
        for m in moved.iter().filter(|m| m.needs_drain()) {
            let Some(g) = fleet.gpu_of(m) else { continue };
            for (a, _) in fleet.taken.get(&g.uuid).map(Vec::as_slice).unwrap_or(&[]) {
                if seen.insert(a.id) {
                    affected.push(AffectedSlice {
                        id: a.id,
                        tenant: tenants
                            .get(&a.tenant_id)
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                        shape: a.shape_label.clone(),
                        host: m.host.clone(),
                    });
                }
            }
        }
        Ok(PoolChangePreview {
            changes: old.map_or_else(Vec::new, |o| edit.spec.differences(&o)),
            immediate: !moved.iter().any(GpuMove::needs_drain),
            moves: moved,
            affected,
        })
    }

    /// Checks an edit and returns the pools before and after it, and the
    /// pool's definition before (`None`: new).
    async fn proposal<C: ConnectionTrait>(
        &self,
        conn: &C,
        rows: &[pool::Model],
        name: Option<&str>,
        edit: &PoolEdit,
    ) -> Result<(Vec<PoolSpec>, Vec<PoolSpec>, Option<PoolSpec>), ServiceError> {
        edit.spec.validate().map_err(|e| e.within("spec"))?;
        let directory = self.directory(conn).await?;
        crate::pools::validate_pool_tenants(std::slice::from_ref(&edit.spec), &directory).map_err(
            |e| match e {
                ServiceError::Invalid { message, .. } => {
                    ServiceError::invalid("spec.fair_share_weights", message)
                }
                other => other,
            },
        )?;
        let before: Vec<PoolSpec> = rows.iter().map(|r| r.spec.0.clone()).collect();
        let mut after = before.clone();
        let old = match name {
            None => {
                if rows.iter().any(|r| r.name == edit.spec.name) {
                    return Err(ServiceError::Conflict(format!(
                        "there is already a pool '{}'",
                        edit.spec.name
                    )));
                }
                if rows.len() >= MAX_POOLS {
                    return Err(ServiceError::Conflict(format!(
                        "there are already {MAX_POOLS} pools, the most Tessera keeps"
                    )));
                }
                after.push(edit.spec.clone());
                None
            }
            Some(name) => {
                let row = rows
                    .iter()
                    .find(|r| r.name == name)
                    .ok_or_else(|| ServiceError::not_found(format!("pool '{name}'")))?;
                if edit.spec.name != name {
                    return Err(ServiceError::invalid(
                        "spec.name",
                        format!("a pool's name cannot change (it is '{name}')"),
                    ));
                }
                if let Some(p) = after.iter_mut().find(|p| p.name == name) {
                    *p = edit.spec.clone();
                }
                Some(row.spec.0.clone())
            }
        };
        Ok((before, after, old))
    }

    /// Creates a pool. It joins the end of the order, so it takes only GPUs
    /// that no other pool takes: nothing running moves.
    pub async fn create_pool(
        &self,
        admin: &PlatformAdmin<'_>,
        edit: &PoolEdit,
    ) -> Result<PoolAdminView, ServiceError> {
        let name = edit.spec.name.clone();
        let mut w = self.begin_admission().await?;
        let rows = pool_rows(w.db()).await?;
        let (before, after, _) = self.proposal(w.db(), &rows, None, edit).await?;
        let fleet = Fleet::load(w.db()).await?;
        if moves(&before, &after, &fleet.as_core()?)
            .iter()
            .any(GpuMove::needs_drain)
        {
            return Err(ServiceError::Conflict(
                "the new pool would take GPUs that have slices on them".into(),
            ));
        }
        let now = self.now();
        pool::ActiveModel {
            name: Set(name.clone()),
            position: Set(rows.iter().map(|r| r.position).max().unwrap_or(0) + 1),
            spec: Set(pool::StoredPool(edit.spec.clone())),
            revision: Set(1),
            created_at: Set(now),
            updated_at: Set(now),
            updated_by: Set(Some(admin.principal().name().to_owned())),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::PoolCreated {
            spec: edit.spec.clone(),
        });
        // Every host's desired state follows the pools' policies.
        w.bump_all_generations().await?;
        w.commit(self, &Actor::User(admin.principal())).await?;
        self.pool_admin_view(admin, &name).await
    }

    /// Changes a pool: at once when no GPU with slices on it changes pool
    /// or sharing mode; otherwise as a planned transition (see the module).
    pub async fn update_pool(
        &self,
        admin: &PlatformAdmin<'_>,
        name: &str,
        edit: &PoolEdit,
    ) -> Result<PoolAdminView, ServiceError> {
        let revision = edit.revision.ok_or_else(|| {
            ServiceError::invalid(
                "revision",
                "name the revision you edited (from GET /api/v1/pools)",
            )
        })?;
        let mut w = self.begin_admission().await?;
        let rows = pool_rows(w.db()).await?;
        let (before, after, _) = self.proposal(w.db(), &rows, Some(name), edit).await?;
        let row = rows
            .iter()
            .find(|r| r.name == name)
            .cloned()
            .ok_or_else(|| ServiceError::not_found(format!("pool '{name}'")))?;
        if row.pending_spec.is_some() {
            return Err(ServiceError::Conflict(format!(
                "pool '{name}' has a planned change waiting for its GPUs to empty; cancel it first"
            )));
        }
        if row.revision != revision {
            return Err(ServiceError::Conflict(format!(
                "pool '{name}' was changed by {} since you loaded it; reload and make your change again",
                row.updated_by.as_deref().unwrap_or("the configuration")
            )));
        }
        let fleet = Fleet::load(w.db()).await?;
        let moved = moves(&before, &after, &fleet.as_core()?);
        if !moved.is_empty() {
            if let Some(other) = rows.iter().find(|r| r.pending_spec.is_some()) {
                return Err(ServiceError::Conflict(format!(
                    "pool '{}' has a planned change that moves GPUs; wait for it or cancel it first",
                    other.name
                )));
            }
        }
        let by = admin.principal().name().to_owned();
        let now = self.now();
        let mut a: pool::ActiveModel = row.clone().into();
        a.revision = Set(row.revision + 1);
        a.updated_at = Set(now);
        a.updated_by = Set(Some(by.clone()));
        if moved.iter().any(GpuMove::needs_drain) {
            let reason = edit.reason.trim();
            if reason.is_empty() || reason.chars().count() > 500 {
                return Err(ServiceError::invalid(
                    "reason",
                    "say why in 1-500 characters: GPUs with slices on them must be drained, and their owners are told",
                ));
            }
            if edit.drain_minutes > MAX_DRAIN_MINUTES {
                return Err(ServiceError::invalid(
                    "drain_minutes",
                    format!("must be at most {MAX_DRAIN_MINUTES} (a week)"),
                ));
            }
            let mark = marker(name, reason);
            let mut ids = Vec::new();
            for m in &moved {
                let Some(g) = fleet.gpu_of(m) else { continue };
                let action = if m.needs_drain() {
                    OpsAction::Drain {
                        deadline_minutes: edit.drain_minutes,
                    }
                } else if g.ops_mode == OpsMode::Available {
                    OpsAction::Cordon
                } else {
                    // Already out of service by an admin's decision.
                    continue;
                };
                let req = OpsRequest {
                    action,
                    reason: mark.clone(),
                };
                self.operate_in(&mut w, &by, g.host_id, Some(m.index), &req)
                    .await
                    .map_err(|e| match e {
                        ServiceError::Conflict(why) => ServiceError::Conflict(format!(
                            "cannot drain GPU {} on {} for this change: {why}",
                            m.index, m.host
                        )),
                        other => other,
                    })?;
                ids.push(g.id);
            }
            let deadline = now + chrono::Duration::minutes(i64::from(edit.drain_minutes));
            a.pending_spec = Set(Some(pool::StoredPool(edit.spec.clone())));
            a.pending_gpus = Set(Some(pool::GpuIds(ids)));
            a.pending_reason = Set(Some(reason.to_owned()));
            a.pending_by = Set(Some(by.clone()));
            a.pending_at = Set(Some(now));
            a.drain_deadline = Set(Some(deadline));
            a.update(w.db()).await?;
            w.emit(DomainEvent::PoolChangePlanned {
                before: row.spec.0.clone(),
                after: edit.spec.clone(),
                moves: moved.into_iter().filter(GpuMove::needs_drain).collect(),
                reason: reason.to_owned(),
                drain_deadline: deadline,
            });
        } else {
            a.spec = Set(pool::StoredPool(edit.spec.clone()));
            a.update(w.db()).await?;
            w.emit(DomainEvent::PoolChanged {
                before: row.spec.0.clone(),
                after: edit.spec.clone(),
                planned_by: None,
            });
        }
        w.bump_all_generations().await?;
        w.commit(self, &Actor::User(admin.principal())).await?;
        self.pool_admin_view(admin, name).await
    }

    /// Calls off a planned change: the pool stays as it is, and the GPUs
    /// drained or cordoned for the change take slices again (slices that
    /// already ended stay ended).
    pub async fn cancel_pool_change(
        &self,
        admin: &PlatformAdmin<'_>,
        name: &str,
    ) -> Result<PoolAdminView, ServiceError> {
        let mut w = self.begin_admission().await?;
        let row = pool_rows(w.db())
            .await?
            .into_iter()
            .find(|r| r.name == name)
            .ok_or_else(|| ServiceError::not_found(format!("pool '{name}'")))?;
        let Some(planned) = row.pending_spec.clone() else {
            return Err(ServiceError::Conflict(format!(
                "pool '{name}' has no planned change"
            )));
        };
        let by = admin.principal().name().to_owned();
        self.finish_change(&mut w, &by, &row, "the planned pool change was cancelled")
            .await?;
        let spec = row.spec.0.clone();
        let mut a: pool::ActiveModel = row.into();
        clear_pending(&mut a, self.now(), &by);
        a.update(w.db()).await?;
        w.emit(DomainEvent::PoolChangeCancelled {
            spec,
            planned: planned.0,
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        self.pool_admin_view(admin, name).await
    }

    /// Puts into force every planned change whose GPUs are now empty (at
    /// every tick). Returns how many took effect.
    pub(crate) async fn complete_pool_changes(
        &self,
        now: DateTime<Utc>,
    ) -> Result<u32, ServiceError> {
        let waiting: Vec<pool::Model> = pool_rows(&self.db)
            .await?
            .into_iter()
            .filter(|r| r.pending_spec.is_some())
            .collect();
        let mut done = 0;
        for candidate in waiting {
            if !self.change_ready(&self.db, &candidate).await? {
                continue;
            }
            let mut w = self.begin_admission().await?;
            // Again inside the write: still planned, still empty.
            let Some(row) = pool::Entity::find_by_id(candidate.id).one(w.db()).await? else {
                continue;
            };
            let Some(next) = row.pending_spec.clone() else {
                continue;
            };
            if !self.change_ready(w.db(), &row).await? {
                continue;
            }
            let planned_by = row.pending_by.clone().unwrap_or_default();
            self.finish_change(&mut w, &planned_by, &row, "the pool change took effect")
                .await?;
            let before = row.spec.0.clone();
            let revision = row.revision;
            let mut a: pool::ActiveModel = row.into();
            clear_pending(&mut a, now, &planned_by);
            a.spec = Set(next.clone());
            a.revision = Set(revision + 1);
            a.update(w.db()).await?;
            w.emit(DomainEvent::PoolChanged {
                before,
                after: next.0,
                planned_by: Some(planned_by),
            });
            w.bump_all_generations().await?;
            w.commit(self, &Actor::System).await?;
            done += 1;
        }
        Ok(done)
    }

    /// Whether no slice holds any GPU a planned change moves.
    async fn change_ready<C: ConnectionTrait>(
        &self,
        conn: &C,
        row: &pool::Model,
    ) -> Result<bool, ServiceError> {
        let ids: BTreeSet<GpuId> = row
            .pending_gpus
            .as_ref()
            .map(|g| g.0.iter().copied().collect())
            .unwrap_or_default();
        let taken = occupancy(conn, None, None).await?;
        let gpus = gpu::Entity::find().all(conn).await?;
        Ok(!gpus
            .iter()
            .any(|g| ids.contains(&g.id) && taken.get(&g.uuid).is_some_and(|v| !v.is_empty())))
    }

    /// Resumes the GPUs a planned change drained or cordoned (and only
    /// those whose decision is still the change's).
    async fn finish_change(
        &self,
        w: &mut Write,
        by: &str,
        row: &pool::Model,
        why: &str,
    ) -> Result<(), ServiceError> {
        let mark = marker(&row.name, row.pending_reason.as_deref().unwrap_or_default());
        let ids: BTreeSet<GpuId> = row
            .pending_gpus
            .as_ref()
            .map(|g| g.0.iter().copied().collect())
            .unwrap_or_default();
        for g in gpu::Entity::find().all(w.db()).await? {
            let ours = ids.contains(&g.id)
                && matches!(g.ops_mode, OpsMode::Draining | OpsMode::Cordoned)
                && g.ops_reason.as_deref() == Some(mark.as_str());
            if !ours {
                continue;
            }
            let req = OpsRequest {
                action: OpsAction::Resume,
                reason: why.to_owned(),
            };
            self.operate_in(w, by, g.host_id, Some(g.index()?), &req)
                .await?;
        }
        Ok(())
    }

    /// One pool as the pools page shows it.
    async fn pool_admin_view(
        &self,
        admin: &PlatformAdmin<'_>,
        name: &str,
    ) -> Result<PoolAdminView, ServiceError> {
        self.pools_admin(admin)
            .await?
            .pools
            .into_iter()
            .find(|p| p.spec.name == name)
            .ok_or_else(|| ServiceError::not_found(format!("pool '{name}'")))
    }
}

fn clear_pending(a: &mut pool::ActiveModel, now: DateTime<Utc>, by: &str) {
    a.pending_spec = Set(None);
    a.pending_gpus = Set(None);
    a.pending_reason = Set(None);
    a.pending_by = Set(None);
    a.pending_at = Set(None);
    a.drain_deadline = Set(None);
    a.updated_at = Set(now);
    a.updated_by = Set(Some(by.to_owned()));
}
