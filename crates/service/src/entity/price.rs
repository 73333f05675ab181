//! `prices`: a pool's price from a moment on.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "prices")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub pool: tessera_core::checked::PoolName,
    /// ISO 4217.
    pub currency: String,
    /// Millionths of the currency per GPU-hour.
    pub gpu_hour_micros: i64,
    /// Millionths of the currency per GiB-hour of GPU memory.
    pub gib_hour_micros: i64,
    pub effective_from: DateTimeUtc,
    /// Who pays for the pool's overhead from then on.
    pub recovery: tessera_core::ledger::recovery::RecoveryPolicy,
    pub created_by: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
