//! `admission_refusals`: requests refused for want of quota, per day, pool
//! and tenant.
use sea_orm::entity::prelude::*;
use tessera_core::ids::TenantId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "admission_refusals")]
pub struct Model {
    /// Start of the day (UTC, ms).
    #[sea_orm(primary_key, auto_increment = false)]
    pub day_ms: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub pool: tessera_core::checked::PoolName,
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: TenantId,
    pub count: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
