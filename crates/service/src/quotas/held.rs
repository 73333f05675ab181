//! What a tenant's open slices hold against its quota, summed by the
//! database: the quota accounting admissions, quota views and requests
//! share.

use crate::entity::allocation;
use crate::{Service, ServiceError};
use sea_orm::sea_query::{Alias, Expr, Func, SimpleExpr};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect, Select};
use tessera_core::ids::TenantId;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::quota::Usage;
use tessera_core::schedule::QosClass;
use tessera_core::units::{ComputeMilli, MemMiB};

/// `SUM(column)` as a BIGINT, 0 over no rows (PostgreSQL sums BIGINT as
/// NUMERIC: cast back).
pub(crate) fn summed(column: impl sea_orm::sea_query::IntoColumnRef) -> SimpleExpr {
    SimpleExpr::from(Func::coalesce([
        SimpleExpr::from(Func::sum(Expr::col(column))),
        Expr::value(0),
    ]))
    .cast_as(Alias::new("BIGINT"))
}

/// What the tenant's open allocations of class `qos` hold in a pool, summed
/// by the database (a tenant may hold thousands of slices): compute,
/// memory and slices. Those that lost their GPU or host no longer count:
/// their owner may ask for them again at once (see `capacity`).
pub(crate) fn held_query(
    tenant_id: TenantId,
    pool: &str,
    qos: QosClass,
) -> Select<allocation::Entity> {
    allocation::Entity::find()
        .select_only()
        .column_as(summed(allocation::Column::DemandComputeMilli), "compute")
        .column_as(summed(allocation::Column::DemandMemoryMib), "memory")
        .column_as(summed(allocation::Column::DemandSlices), "slices")
        .filter(allocation::Column::TenantId.eq(tenant_id))
        .filter(allocation::Column::Pool.eq(pool))
        .filter(allocation::Column::State.is_in(AllocationPhase::QUOTA))
        .filter(allocation::Column::Qos.eq(qos))
        .filter(allocation::Column::CapacityLostAt.is_null())
}

/// Summed demands in core's units (out-of-range sums clamp).
pub(crate) fn usage_from_sums(compute: i64, memory: i64, slices: i64) -> Usage {
    Usage {
        compute: ComputeMilli(u32::try_from(compute).unwrap_or(u32::MAX)),
        memory: MemMiB(u64::try_from(memory).unwrap_or(0)),
        slices: u32::try_from(slices).unwrap_or(u32::MAX),
    }
}

impl Service {
    /// What the tenant's open guaranteed allocations hold against its quota
    /// in a pool (those that lost their capacity do not count; burstable
    /// and best-effort slices draw on no quota of its own).
    pub(crate) async fn usage_of<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
    ) -> Result<Usage, ServiceError> {
        Self::qos_usage_of(conn, tenant_id, pool, QosClass::Guaranteed).await
    }

    /// What the tenant's open allocations of class `qos` hold in a pool.
    pub(crate) async fn qos_usage_of<C: ConnectionTrait>(
        conn: &C,
        tenant_id: TenantId,
        pool: &str,
        qos: QosClass,
    ) -> Result<Usage, ServiceError> {
        let (compute, memory, slices) = held_query(tenant_id, pool, qos)
            .into_tuple::<(i64, i64, i64)>()
            .one(conn)
            .await?
            .unwrap_or_default();
        Ok(usage_from_sums(compute, memory, slices))
    }
}
