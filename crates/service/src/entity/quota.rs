//! `quotas`: a tenant's limit in one pool.
use sea_orm::entity::prelude::*;
use tessera_core::ids::TenantId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quotas")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub tenant_id: TenantId,
    pub pool: tessera_core::checked::PoolName,
    pub compute_milli: i64,
    pub memory_mib: i64,
    pub max_slices: i32,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
