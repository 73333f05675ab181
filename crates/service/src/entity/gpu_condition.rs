//! `gpu_conditions`: each GPU's condition history for the fleet ledger.
use sea_orm::entity::prelude::*;
use tessera_core::ids::HostId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpu_conditions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gpu_uuid: String,
    /// Start (ms).
    #[sea_orm(primary_key, auto_increment = false)]
    pub from_ms: i64,
    /// End (ms); `None`: the open span.
    pub until_ms: Option<i64>,
    pub condition: tessera_core::ledger::GpuCondition,
    pub host_id: HostId,
    pub hostname: String,
    pub model: String,
    pub pool: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
