//! What platform admins do to quotas directly: set the permanent quota,
//! grant temporary extra quota, end a grant early; and the overviews.

use super::{quota_columns, quota_from_columns};
use crate::audit::Actor;
use crate::entity::{quota, quota_grant, quota_request, tenant};
use crate::events::{DomainEvent, TenantRef};
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, Set,
};
use tessera_core::ids::{HostId, QuotaGrantId, QuotaRequestId, TenantId};

use tessera_core::lifecycle::QuotaRequestPhase;
use tessera_core::quota::{Quota, QuotaAmount};
use tessera_protocol::quotas::{NewQuotaGrant, SetQuota, TenantQuotaPage, TenantQuotasView};
use tessera_protocol::views::{QuotaView, TenantRole};

/// Longest reason or justification text.
pub(crate) const MAX_REASON_CHARS: usize = 1000;

impl Service {
    /// The tenant called `slug`, or a 404 naming it.
    pub(crate) async fn tenant_by_slug<C: ConnectionTrait>(
        conn: &C,
        slug: &str,
    ) -> Result<tenant::Model, ServiceError> {
        tenant::Entity::find()
            .filter(tenant::Column::Slug.eq(slug))
            .one(conn)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))
    }

    /// Hosts that reported recently enough to be online.
    pub(crate) async fn online_host_ids(&self) -> Result<Vec<HostId>, ServiceError> {
        let now = self.now();
        Ok(crate::entity::host::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .filter(|h| {
                h.last_seen_at
                    .is_some_and(|s| now - s <= self.settings.host_offline_after)
            })
            .map(|h| h.id)
            .collect())
    }

    /// Replaces the permanent quota row (creating it); returns the old one.
    pub(crate) async fn write_base_quota<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        q: &Quota,
        now: DateTime<Utc>,
    ) -> Result<Option<Quota>, ServiceError> {
        let (compute, memory, slices) = quota_columns(q);
        let existing = quota::Entity::find()
            .filter(quota::Column::TenantId.eq(tenant_id))
            .filter(quota::Column::Pool.eq(pool))
            .one(conn)
            .await?;
        let before = existing
            .as_ref()
            .map(|e| quota_from_columns(e.compute_milli, e.memory_mib, e.max_slices));
        match existing {
            Some(e) => {
                let mut a: quota::ActiveModel = e.into();
                a.compute_milli = Set(compute);
                a.memory_mib = Set(memory);
                a.max_slices = Set(slices);
                a.updated_at = Set(now);
                a.update(conn).await?;
            }
            None => {
                quota::ActiveModel {
                    tenant_id: Set(tenant_id),
                    pool: Set(pool.to_owned()),
                    compute_milli: Set(compute),
                    memory_mib: Set(memory),
                    max_slices: Set(slices),
                    updated_at: Set(now),
                    ..Default::default()
                }
                .insert(conn)
                .await?;
            }
        }
        Ok(before)
    }

    /// Adds a temporary grant.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write_grant<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        extra: &Quota,
        ends_at: DateTime<Utc>,
        reason: &str,
        quota_request_id: Option<QuotaRequestId>,
        by: &str,
        now: DateTime<Utc>,
    ) -> Result<QuotaGrantId, ServiceError> {
        let (compute, memory, slices) = quota_columns(extra);
        let g = quota_grant::ActiveModel {
            tenant_id: Set(tenant_id),
            pool: Set(pool.to_owned()),
            compute_milli: Set(compute),
            memory_mib: Set(memory),
            max_slices: Set(slices),
            ends_at: Set(ends_at),
            reason: Set(reason.to_owned()),
            quota_request_id: Set(quota_request_id),
            created_by: Set(by.to_owned()),
            created_at: Set(now),
            revoked_at: Set(None),
            ..Default::default()
        }
        .insert(conn)
        .await?;
        Ok(g.id)
    }

    /// Sets a tenant's permanent quota in a pool (platform admins). Requests
    /// waiting in the queue are tried again at once.
    pub async fn set_quota(
        &self,
        admin: &PlatformAdmin<'_>,
        req: &SetQuota,
    ) -> Result<QuotaView, ServiceError> {
        let spec = self.pool_spec(&self.db, "pool", &req.pool).await?;
        let q = amount(&req.amount)?;
        let now = self.now();
        let mut w = self.begin_admission().await?;
        let t = Self::tenant_by_slug(w.db(), &req.tenant).await?;
        let before_view = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        Self::write_base_quota(w.db(), t.id, &spec.name, &q, now).await?;
        let after_view = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        w.emit(DomainEvent::QuotaSet {
            tenant: TenantRef::of(&t),
            pool: spec.name.clone(),
            before: Some((before_view.base, before_view.quota)),
            after: (after_view.base, after_view.quota),
            by: Some(admin.principal().name.clone()),
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(after_view)
    }

    /// Grants temporary extra quota until `ends_at` (platform admins).
    pub async fn grant_quota(
        &self,
        admin: &PlatformAdmin<'_>,
        req: &NewQuotaGrant,
    ) -> Result<QuotaView, ServiceError> {
        let spec = self.pool_spec(&self.db, "pool", &req.pool).await?;
        let extra = amount(&req.amount)?;
        if extra.is_zero() {
            return Err(ServiceError::invalid(
                "amount",
                "grant at least some GPU compute, memory or slices",
            ));
        }
        let now = self.now();
        let ends_at = req.ends_at.get();
        if ends_at <= now {
            return Err(ServiceError::invalid(
                "ends_at",
                "must be in the future; temporary quota ends then",
            ));
        }
        let reason = reason_text("reason", &req.reason, false)?;
        let mut w = self.begin_admission().await?;
        let t = Self::tenant_by_slug(w.db(), &req.tenant).await?;
        let before = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        let by = admin.principal().audit_name();
        let grant_id = Self::write_grant(
            w.db(),
            t.id,
            &spec.name,
            &extra,
            ends_at,
            &reason,
            None,
            &by,
            now,
        )
        .await?;
        let after = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        w.emit(DomainEvent::QuotaGranted {
            grant_id,
            tenant: TenantRef::of(&t),
            pool: spec.name.clone(),
            extra,
            ends_at,
            reason,
            before: before.quota,
            after: after.quota,
            by: admin.principal().name.clone(),
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(after)
    }

    /// Ends a temporary grant now (platform admins).
    pub async fn end_quota_grant(
        &self,
        admin: &PlatformAdmin<'_>,
        id: QuotaGrantId,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut w = self.begin_write().await?;
        let g = quota_grant::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("quota grant {id}")))?;
        if g.revoked_at.is_some() || g.ends_at <= now {
            return Err(ServiceError::Conflict(format!(
                "quota grant {id} has already ended"
            )));
        }
        let (tenant_id, pool) = (g.tenant_id, g.pool.clone());
        let mut a: quota_grant::ActiveModel = g.into();
        a.revoked_at = Set(Some(now));
        a.update(w.db()).await?;
        w.emit(DomainEvent::QuotaGrantEnded {
            grant_id: id,
            tenant_id,
            pool,
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(())
    }

    /// Every tenant with its quota and use in every pool (platform admins).
    pub async fn admin_quotas(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<TenantQuotasView>, ServiceError> {
        let now = self.now();
        let tenants = tenant::Entity::find()
            .order_by_asc(tenant::Column::Name)
            .all(&self.db)
            .await?;
        let pools = self.pools(&self.db).await?;
        let mut out = Vec::new();
        for t in tenants {
            let mut quotas = Vec::new();
            for p in &pools {
                quotas.push(Self::quota_view(&self.db, t.id, &p.name, now).await?);
            }
            let pending = quota_request::Entity::find()
                .filter(quota_request::Column::TenantId.eq(t.id))
                .filter(quota_request::Column::State.eq(QuotaRequestPhase::Pending))
                .count(&self.db)
                .await?;
            out.push(TenantQuotasView {
                slug: t.slug,
                name: t.name,
                quotas,
                pending_requests: u32::try_from(pending).unwrap_or(u32::MAX),
            });
        }
        Ok(out)
    }

    /// A tenant's quota page: quota, use and headroom per pool, and its
    /// quota requests (members, tenant admins, platform admins).
    pub async fn tenant_quota_page(
        &self,
        who: &Principal,
        slug: &str,
    ) -> Result<TenantQuotaPage, ServiceError> {
        let t = Self::tenant_by_slug(&self.db, slug).await?;
        let role = who.role_in(t.id);
        if role.is_none() && !who.platform_admin {
            return Err(ServiceError::not_found(format!("tenant '{slug}'")));
        }
        let now = self.now();
        let pools = self.pools(&self.db).await?;
        let mut quotas = Vec::new();
        for p in &pools {
            let v = Self::quota_view(&self.db, t.id, &p.name, now).await?;
            if !v.quota.is_zero() || v.usage.slices > 0 {
                quotas.push(v);
            }
        }
        let requests = self.tenant_quota_requests(who, t.id).await?;
        Ok(TenantQuotaPage {
            slug: t.slug,
            name: t.name,
            quotas,
            pools: pools.iter().map(|p| p.name.clone()).collect(),
            requests,
            can_submit: role == Some(TenantRole::TenantAdmin),
        })
    }

    /// After quota grew: places what waits in the queues now rather than at
    /// the next tick.
    pub(crate) async fn retry_waiting(&self) -> Result<(), ServiceError> {
        self.place_queued(self.now()).await?;
        Ok(())
    }
}

/// A quota amount in core's units, or a 400 naming the field.
pub(crate) fn amount(a: &QuotaAmount) -> Result<Quota, ServiceError> {
    a.to_quota()
        .map_err(|e| ServiceError::invalid(format!("amount.{}", e.field), e.message))
}

/// Trimmed free text of at most [`MAX_REASON_CHARS`] characters.
pub(crate) fn reason_text(field: &str, text: &str, required: bool) -> Result<String, ServiceError> {
    let t = text.trim();
    if required && t.is_empty() {
        return Err(ServiceError::invalid(field, "must not be empty; say why"));
    }
    if t.chars().count() > MAX_REASON_CHARS {
        return Err(ServiceError::invalid(
            field,
            format!("must be at most {MAX_REASON_CHARS} characters"),
        ));
    }
    Ok(t.to_owned())
}
