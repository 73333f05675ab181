//! `gpu_rollups`: per-minute and per-hour aggregates of one device's samples
//! for one slice (`tessera_core::telemetry::Rollup`).
use sea_orm::entity::prelude::*;
use tessera_core::ids::{AllocationId, HostId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpu_rollups")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    /// 60,000 (a minute) or 3,600,000 (an hour).
    pub period_ms: i64,
    pub start_ms: i64,
    pub host_id: HostId,
    pub device_uuid: String,
    pub allocation_id: Option<AllocationId>,
    pub samples: i32,
    pub util_min: i16,
    pub util_avg: i16,
    pub util_max: i16,
    pub util_p95: i16,
    pub busy_ms: i64,
    pub covered_ms: i64,
    /// Busy ms × the slice's thousandths of a GPU on the device.
    pub used_milli_ms: i64,
    pub mem_max_mib: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
