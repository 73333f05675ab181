//! `gpu_rollup_pending`: a rollup that is due — one device's minute (new
//! samples came for it) or hour (one of its minutes was rolled up again).
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpu_rollup_pending")]
pub struct Model {
    /// 60,000 (a minute) or 3,600,000 (an hour).
    #[sea_orm(primary_key, auto_increment = false)]
    pub period_ms: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub device_uuid: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub start_ms: i64,
    /// How often it was marked due since it was last rolled up. Marking it
    /// again updates the row, which also makes a concurrent rollup's delete
    /// of it wait for the mark's samples (see `telemetry::rollup`).
    pub marks: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
