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
use tessera_protocol::quotas::{
    NewQuotaGrant, QuotaChange, SetQuota, TenantQuotaPage, TenantQuotasView,
};
use tessera_protocol::views::{QuotaView, TenantRole};

/// Longest reason or justification text.
pub(crate) const MAX_REASON_CHARS: usize = 1000;

impl Service {
    /// The tenant called `slug`, or a 404 naming it.
    pub(crate) async fn tenant_by_slug<C: ConnectionTrait>(
        conn: &C,
        slug: &tessera_core::checked::TenantSlug,
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
        pool: &tessera_core::checked::PoolName,
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
                    pool: Set(pool.clone()),
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
        pool: &tessera_core::checked::PoolName,
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
            pool: Set(pool.clone()),
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

    /// Sets a tenant's permanent quota in a pool (platform admins). With
    /// four-eyes on, what lowers applies at once and what raises becomes a
    /// pending quota request that a different platform admin decides; with
    /// it off, all of it applies. Requests waiting in the queue are tried
    /// again at once.
    pub async fn set_quota(
        &self,
        admin: &PlatformAdmin<'_>,
        req: &SetQuota,
    ) -> Result<QuotaChange, ServiceError> {
        let spec = self.pool_spec(&self.db, "pool", &req.pool).await?;
        let q = amount(&req.amount)?;
        let reason = reason_text("reason", &req.reason, false)?;
        let now = self.now();
        let who = admin.principal();
        let mut w = self.begin_admission().await?;
        let t = Self::tenant_by_slug(w.db(), &req.tenant).await?;
        let before_view = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        let (apply, raise) = if self.settings.four_eyes {
            before_view.base.split_change(&q)
        } else {
            (q, Quota::default())
        };
        if raise.is_zero() || apply != before_view.base {
            Self::write_base_quota(w.db(), t.id, &spec.name, &apply, now).await?;
            let after_view = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
            w.emit(DomainEvent::QuotaSet {
                tenant: TenantRef::of(&t),
                pool: spec.name.clone(),
                before: Some((before_view.base, before_view.quota)),
                after: (after_view.base, after_view.quota),
                by: Some(who.name.clone()),
            });
        }
        let proposal = if raise.is_zero() {
            None
        } else {
            let why = if reason.is_empty() {
                format!("Raise of the permanent quota to {q} (set on the Quotas page).")
            } else {
                reason
            };
            Some(Self::propose(&mut w, who, &t, &spec.name, &raise, None, why).await?)
        };
        let after_view = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        w.commit(self, &Actor::User(who)).await?;
        self.quota_change(who, after_view, proposal).await
    }

    /// Grants temporary extra quota until `ends_at` (platform admins). With
    /// four-eyes on it becomes a pending quota request that a different
    /// platform admin decides.
    pub async fn grant_quota(
        &self,
        admin: &PlatformAdmin<'_>,
        req: &NewQuotaGrant,
    ) -> Result<QuotaChange, ServiceError> {
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
        let who = admin.principal();
        let reason = reason_text("reason", &req.reason, self.settings.four_eyes)?;
        let mut w = self.begin_admission().await?;
        let t = Self::tenant_by_slug(w.db(), &req.tenant).await?;
        let before = Self::quota_view(w.db(), t.id, &spec.name, now).await?;
        if self.settings.four_eyes {
            let proposal =
                Self::propose(&mut w, who, &t, &spec.name, &extra, Some(ends_at), reason).await?;
            w.commit(self, &Actor::User(who)).await?;
            return self.quota_change(who, before, Some(proposal)).await;
        }
        let by = who.audit_name();
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
            by: who.name.clone(),
        });
        w.commit(self, &Actor::User(who)).await?;
        self.quota_change(who, after, None).await
    }

    /// Files a platform admin's own increase as a pending quota request (it
    /// skips the tenant's side; four-eyes keeps its author from deciding it).
    async fn propose(
        w: &mut crate::write::Write,
        who: &Principal,
        t: &tenant::Model,
        pool: &tessera_core::checked::PoolName,
        raise: &Quota,
        ends_at: Option<DateTime<Utc>>,
        justification: String,
    ) -> Result<QuotaRequestId, ServiceError> {
        let filing = super::requests::Filing {
            tenant: t,
            pool,
            amount: raise,
            ends_at,
            justification,
            state: tessera_core::lifecycle::QuotaRequestState::Pending,
            slice: None,
        };
        let row = Self::file_request(w, who, filing).await?;
        Ok(row.id)
    }

    /// The answer to a direct change: the quota now and the raise that waits.
    async fn quota_change(
        &self,
        who: &Principal,
        quota: QuotaView,
        proposal: Option<QuotaRequestId>,
    ) -> Result<QuotaChange, ServiceError> {
        let proposal = match proposal {
            Some(id) => Some(self.quota_request_view(who, id).await?),
            None => None,
        };
        Ok(QuotaChange { quota, proposal })
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
                slug: t.slug.to_string(),
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
        slug: &tessera_core::checked::TenantSlug,
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
            slug: t.slug.to_string(),
            name: t.name,
            quotas,
            pools: pools.iter().map(|p| p.name.to_string()).collect(),
            requests,
            can_submit: role == Some(TenantRole::TenantAdmin),
        })
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
