//! Quota requests as pages show them, and the platform admins' approval
//! queue with what a decision needs: the tenant's quota and use, its earlier
//! requests, and the pool's capacity.

use super::decide::four_eyes_block;
use super::quota_from_columns;
use super::requests::stored_state;
use crate::entity::{allocation, gpu, quota, quota_request, tenant};
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use tessera_core::ids::{HostId, QuotaRequestId, TenantId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::QuotaRequestPhase;
use tessera_core::quota::Quota;
use tessera_core::slice::label;
use tessera_core::units::{ComputeMilli, MemMiB};
use tessera_protocol::quotas::{
    ApprovalItem, ApprovalQueueView, PoolCapacityView, QuotaRequestView,
};
use tessera_protocol::views::{NewAllocation, TenantRole};

impl Service {
    /// One quota request (its tenant's members and platform admins).
    pub async fn quota_request_view(
        &self,
        who: &Principal,
        id: QuotaRequestId,
    ) -> Result<QuotaRequestView, ServiceError> {
        let (row, t) = self.visible_quota_request(who, id).await?;
        self.request_view(who, &row, &t)
    }

    /// A tenant's requests, newest first.
    pub(crate) async fn tenant_quota_requests(
        &self,
        who: &Principal,
        tenant_id: TenantId,
    ) -> Result<Vec<QuotaRequestView>, ServiceError> {
        let t = tenant::Entity::find_by_id(tenant_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant {tenant_id}")))?;
        quota_request::Entity::find()
            .filter(quota_request::Column::TenantId.eq(tenant_id))
            .order_by_desc(quota_request::Column::Id)
            .limit(50)
            .all(&self.db)
            .await?
            .iter()
            .map(|r| self.request_view(who, r, &t))
            .collect()
    }

    /// Pending requests, oldest first, each with its context; and the
    /// latest decisions.
    pub async fn approval_queue(
        &self,
        admin: &PlatformAdmin<'_>,
    ) -> Result<ApprovalQueueView, ServiceError> {
        let who = admin.principal();
        let now = self.now();
        let pending = quota_request::Entity::find()
            .filter(quota_request::Column::State.eq(QuotaRequestPhase::Pending))
            .order_by_asc(quota_request::Column::CreatedAt)
            .order_by_asc(quota_request::Column::Id)
            .all(&self.db)
            .await?;
        let tenants = tenant::Entity::find().all(&self.db).await?;
        let tenant_of = |id: TenantId| tenants.iter().find(|t| t.id == id);
        let mut items = Vec::new();
        for row in &pending {
            let Some(t) = tenant_of(row.tenant_id) else {
                continue;
            };
            let history = quota_request::Entity::find()
                .filter(quota_request::Column::TenantId.eq(t.id))
                .filter(quota_request::Column::Id.ne(row.id))
                .order_by_desc(quota_request::Column::Id)
                .limit(5)
                .all(&self.db)
                .await?
                .iter()
                .map(|r| self.request_view(who, r, t))
                .collect::<Result<Vec<_>, _>>()?;
            items.push(ApprovalItem {
                request: self.request_view(who, row, t)?,
                current: Self::quota_view(&self.db, t.id, &row.pool, now).await?,
                history,
                pool: self.pool_capacity(&row.pool).await?,
            });
        }
        let recent = quota_request::Entity::find()
            .filter(
                quota_request::Column::State
                    .is_in([QuotaRequestPhase::Approved, QuotaRequestPhase::Rejected]),
            )
            .order_by_desc(quota_request::Column::DecidedAt)
            .limit(10)
            .all(&self.db)
            .await?
            .iter()
            .filter_map(|r| tenant_of(r.tenant_id).map(|t| self.request_view(who, r, t)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ApprovalQueueView {
            items,
            recent,
            four_eyes: self.settings.four_eyes,
        })
    }

    /// A pool's GPUs that take placements (online, not unhealthy, not
    /// cordoned, drained or in maintenance), what live slices hold of
    /// them, and how much quota all tenants have there.
    async fn pool_capacity(&self, pool: &str) -> Result<PoolCapacityView, ServiceError> {
        let online = self.online_host_ids().await?;
        let pools = self.pools(&self.db).await?;
        let hosts: std::collections::BTreeMap<HostId, crate::entity::host::Model> =
            crate::entity::host::Entity::find()
                .filter(crate::entity::host::Column::Id.is_in(online.clone()))
                .all(&self.db)
                .await?
                .into_iter()
                .map(|h| (h.id, h))
                .collect();
        let gpus: Vec<gpu::Model> = gpu::Entity::find()
            .filter(gpu::Column::HostId.is_in(online))
            .all(&self.db)
            .await?
            .into_iter()
            .filter(|g| {
                hosts
                    .get(&g.host_id)
                    .is_some_and(|h| crate::fleet::takes_placements(h, g))
                    && hosts.get(&g.host_id).is_some_and(|h| {
                        crate::pools::pool_of(&pools, &h.hostname, &g.model)
                            .is_some_and(|p| p.name == pool)
                    })
            })
            .collect();
        let total = Quota {
            compute: ComputeMilli::gpus(u32::try_from(gpus.len()).unwrap_or(u32::MAX)),
            memory: MemMiB(
                gpus.iter()
                    .map(|g| u64::try_from(g.memory_mib).unwrap_or(0))
                    .sum(),
            ),
            max_slices: 0,
        };
        let held = allocation::Entity::find()
            .filter(allocation::Column::Pool.eq(pool))
            .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
            .all(&self.db)
            .await?;
        let held_compute: u32 = held
            .iter()
            .map(|a| u32::try_from(a.demand_compute_milli).unwrap_or(0))
            .sum();
        let held_memory: u64 = held
            .iter()
            .map(|a| u64::try_from(a.demand_memory_mib).unwrap_or(0))
            .sum();
        let promised = quota::Entity::find()
            .filter(quota::Column::Pool.eq(pool))
            .all(&self.db)
            .await?
            .iter()
            .fold(Quota::default(), |sum, q| {
                sum.plus(&quota_from_columns(
                    q.compute_milli,
                    q.memory_mib,
                    q.max_slices,
                ))
            });
        Ok(PoolCapacityView {
            pool: pool.to_owned(),
            gpus: u32::try_from(gpus.len()).unwrap_or(u32::MAX),
            free: Quota {
                compute: total.compute - ComputeMilli(held_compute),
                memory: total.memory - MemMiB(held_memory),
                max_slices: 0,
            },
            total,
            promised,
        })
    }

    /// The request as `who` sees it, with what they may do now.
    fn request_view(
        &self,
        who: &Principal,
        row: &quota_request::Model,
        t: &tenant::Model,
    ) -> Result<QuotaRequestView, ServiceError> {
        let state = stored_state(row);
        let role = who.role_in(row.tenant_id);
        let tenant_admin = role == Some(TenantRole::TenantAdmin);
        let blocked = if who.platform_admin && self.settings.four_eyes {
            four_eyes_block(who, row)
        } else {
            None
        };
        let granted = row.granted_compute_milli.map(|c| {
            quota_from_columns(
                c,
                row.granted_memory_mib.unwrap_or(0),
                row.granted_max_slices.unwrap_or(0),
            )
        });
        Ok(QuotaRequestView {
            id: row.id,
            tenant: t.slug.to_string(),
            tenant_name: t.name.clone(),
            pool: row.pool.to_string(),
            amount: quota_from_columns(row.compute_milli, row.memory_mib, row.max_slices),
            ends_at: row.ends_at,
            justification: row.justification.clone(),
            requested_by: row.requested_by.clone(),
            submitted_by: row.submitted_by.clone(),
            decided_by: row.decided_by.clone(),
            decided_at: row.decided_at,
            granted,
            granted_ends_at: row.granted_ends_at,
            slice: row
                .slice
                .as_ref()
                .map(|s| {
                    serde_json::from_value::<NewAllocation>(s.clone())
                        .map(|s| label(&s.shape))
                        .map_err(|e| {
                            ServiceError::internal(format!(
                                "quota request {}: stored slice is unreadable: {e}",
                                row.id
                            ))
                        })
                })
                .transpose()?,
            allocation_id: row.allocation_id,
            slice_error: row.slice_error.clone(),
            created_at: row.created_at,
            can_submit: tenant_admin && row.state == QuotaRequestPhase::Proposed,
            can_withdraw: !state.is_terminal()
                && (tenant_admin || row.requested_by_user_id == Some(who.user_id)),
            can_decide: who.platform_admin
                && row.state == QuotaRequestPhase::Pending
                && blocked.is_none(),
            decide_blocked: blocked.filter(|_| row.state == QuotaRequestPhase::Pending),
            state,
        })
    }
}
