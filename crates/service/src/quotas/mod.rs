//! Quotas: a tenant's permanent quota per pool plus temporary grants, what
//! platform admins change, and the quota requests tenants file.
//!
//! Usage is always derived from live allocations; the quota in force is the
//! permanent row plus every grant that has not ended (`core::quota`).

mod admin;
mod decide;
mod held;
mod requests;
mod views;

use crate::entity::{quota, quota_grant};
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use tessera_core::ids::TenantId;
use tessera_core::quota::{Quota, Usage};
use tessera_core::schedule::QosClass;
use tessera_core::units::{ComputeMilli, MemMiB};
use tessera_protocol::quotas::QuotaGrantView;
use tessera_protocol::views::QuotaView;

/// A stored amount in core's units (negative or oversized values clamp).
pub(crate) fn quota_from_columns(compute_milli: i64, memory_mib: i64, max_slices: i32) -> Quota {
    Quota {
        compute: ComputeMilli(u32::try_from(compute_milli.max(0)).unwrap_or(u32::MAX)),
        memory: MemMiB(u64::try_from(memory_mib).unwrap_or(0)),
        max_slices: u32::try_from(max_slices).unwrap_or(0),
    }
}

/// Core's amount as column values.
pub(crate) fn quota_columns(q: &Quota) -> (i64, i64, i32) {
    (
        i64::from(q.compute.0),
        i64::try_from(q.memory.0).unwrap_or(i64::MAX),
        i32::try_from(q.max_slices).unwrap_or(i32::MAX),
    )
}

/// The permanent quota and the grants in force of a tenant in a pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuotaParts {
    /// The permanent row, if any.
    pub base: Option<Quota>,
    /// Unexpired, unrevoked temporary grants.
    pub grants: Vec<quota_grant::Model>,
}

impl QuotaParts {
    /// The quota in force, or `None` when the tenant has none in the pool.
    pub fn effective(&self, now: DateTime<Utc>) -> Option<Quota> {
        if self.base.is_none() && self.grants.is_empty() {
            return None;
        }
        let grants: Vec<(Quota, DateTime<Utc>)> = self
            .grants
            .iter()
            .map(|g| {
                (
                    quota_from_columns(g.compute_milli, g.memory_mib, g.max_slices),
                    g.ends_at,
                )
            })
            .collect();
        Some(Quota::effective(
            &self.base.unwrap_or_default(),
            &grants,
            &now,
        ))
    }
}

impl Service {
    /// The permanent quota and the grants in force.
    pub(crate) async fn quota_parts<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        now: DateTime<Utc>,
    ) -> Result<QuotaParts, ServiceError> {
        let base = quota::Entity::find()
            .filter(quota::Column::TenantId.eq(tenant_id))
            .filter(quota::Column::Pool.eq(pool))
            .one(conn)
            .await?
            .map(|q| quota_from_columns(q.compute_milli, q.memory_mib, q.max_slices));
        let grants = quota_grant::Entity::find()
            .filter(quota_grant::Column::TenantId.eq(tenant_id))
            .filter(quota_grant::Column::Pool.eq(pool))
            .filter(quota_grant::Column::RevokedAt.is_null())
            .filter(quota_grant::Column::EndsAt.gt(now))
            .order_by_asc(quota_grant::Column::EndsAt)
            .all(conn)
            .await?;
        Ok(QuotaParts { base, grants })
    }

    /// The tenant's quota in force in a pool (`None` when it has none).
    pub(crate) async fn quota_of<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Quota>, ServiceError> {
        Ok(Self::quota_parts(conn, tenant_id, pool, now)
            .await?
            .effective(now))
    }

    /// The tenant's quota in force in a pool (`None` when it has none) and
    /// what its guaranteed slices hold there, in one statement: the
    /// permanent row, the grants in force and the slices held, each summed
    /// by the database (an admission reads them in its turn, where every
    /// round trip counts). Agrees with [`Self::quota_of`] and
    /// [`Self::usage_of`] (tested).
    pub(crate) async fn quota_and_usage<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        now: DateTime<Utc>,
    ) -> Result<(Option<Quota>, Usage), ServiceError> {
        use held::{held_query, summed, usage_from_sums};
        use sea_orm::sea_query::UnionType;
        use sea_orm::{FromQueryResult, QuerySelect, QueryTrait};
        #[derive(FromQueryResult)]
        struct Part {
            compute: i64,
            memory: i64,
            slices: i64,
            part: i32,
            n: i64,
        }
        const BASE: i32 = 0;
        const GRANTS: i32 = 1;
        const HELD: i32 = 2;
        let tagged = |part: i32| {
            (
                sea_orm::sea_query::Expr::cust(part.to_string()),
                sea_orm::sea_query::Expr::cust("COUNT(*)"),
            )
        };
        let (tag, n) = tagged(BASE);
        let mut query = quota::Entity::find()
            .select_only()
            .column_as(summed(quota::Column::ComputeMilli), "compute")
            .column_as(summed(quota::Column::MemoryMib), "memory")
            .column_as(summed(quota::Column::MaxSlices), "slices")
            .column_as(tag, "part")
            .column_as(n, "n")
            .filter(quota::Column::TenantId.eq(tenant_id))
            .filter(quota::Column::Pool.eq(pool))
            .into_query();
        let (tag, n) = tagged(GRANTS);
        let grants = quota_grant::Entity::find()
            .select_only()
            .column_as(summed(quota_grant::Column::ComputeMilli), "compute")
            .column_as(summed(quota_grant::Column::MemoryMib), "memory")
            .column_as(summed(quota_grant::Column::MaxSlices), "slices")
            .column_as(tag, "part")
            .column_as(n, "n")
            .filter(quota_grant::Column::TenantId.eq(tenant_id))
            .filter(quota_grant::Column::Pool.eq(pool))
            .filter(quota_grant::Column::RevokedAt.is_null())
            .filter(quota_grant::Column::EndsAt.gt(now))
            .into_query();
        let (tag, n) = tagged(HELD);
        let held = held_query(tenant_id, pool, QosClass::Guaranteed)
            .column_as(tag, "part")
            .column_as(n, "n")
            .into_query();
        query
            .union(UnionType::All, grants)
            .union(UnionType::All, held);
        let backend = conn.get_database_backend();
        let parts = Part::find_by_statement(backend.build(&query))
            .all(conn)
            .await?;
        let of = |part: i32| parts.iter().find(|p| p.part == part && p.n > 0);
        let as_quota = |p: &Part| {
            quota_from_columns(
                p.compute,
                p.memory,
                i32::try_from(p.slices).unwrap_or(i32::MAX),
            )
        };
        let quota = match (of(BASE), of(GRANTS)) {
            (None, None) => None,
            (base, grants) => Some(
                base.map(as_quota)
                    .unwrap_or_default()
                    .plus(&grants.map(as_quota).unwrap_or_default()),
            ),
        };
        let usage = of(HELD).map_or_else(Usage::default, |p| {
            usage_from_sums(p.compute, p.memory, p.slices)
        });
        Ok((quota, usage))
    }

    /// Quota (permanent, temporary, in force) and use of a tenant in a pool.
    pub(crate) async fn quota_view<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        now: DateTime<Utc>,
    ) -> Result<QuotaView, ServiceError> {
        let parts = Self::quota_parts(conn, tenant_id, pool, now).await?;
        let usage = Self::usage_of(conn, tenant_id, pool).await?;
        Ok(QuotaView {
            pool: pool.to_owned(),
            quota: parts.effective(now).unwrap_or_default(),
            usage,
            base: parts.base.unwrap_or_default(),
            grants: parts
                .grants
                .iter()
                .map(|g| QuotaGrantView {
                    id: g.id,
                    amount: quota_from_columns(g.compute_milli, g.memory_mib, g.max_slices),
                    ends_at: g.ends_at,
                    reason: g.reason.clone(),
                    quota_request_id: g.quota_request_id,
                })
                .collect(),
        })
    }
}
