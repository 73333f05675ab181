//! `gpu_samples`: raw telemetry, one row per device per sampling round
//! (a GPU, or a MIG device), attributed to the slice holding the device.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{AllocationId, HostId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpu_samples")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub host_id: HostId,
    pub at_ms: i64,
    /// The physical GPU.
    pub gpu_uuid: String,
    /// The device sampled: the GPU, or one of its MIG devices.
    pub device_uuid: String,
    /// The slice holding the device then.
    pub allocation_id: Option<AllocationId>,
    /// Thousandths of a GPU the slice holds on this device.
    pub weight_milli: i32,
    /// `None`: the driver does not measure it (MIG without GPM).
    pub util_pct: Option<i16>,
    pub mem_used_mib: i64,
    pub power_mw: Option<i32>,
    pub temp_c: Option<i32>,
    pub sm_clock_mhz: Option<i32>,
    /// How long the sample stands for, ms.
    pub covered_ms: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
