//! `quota_grants`: temporary quota on top of a tenant's permanent quota, until `ends_at`.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{QuotaGrantId, QuotaRequestId, TenantId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quota_grants")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: QuotaGrantId,
    pub tenant_id: TenantId,
    pub pool: tessera_core::checked::PoolName,
    pub compute_milli: i64,
    pub memory_mib: i64,
    pub max_slices: i32,
    pub ends_at: DateTimeUtc,
    pub reason: String,
    pub quota_request_id: Option<QuotaRequestId>,
    pub created_by: String,
    pub created_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
