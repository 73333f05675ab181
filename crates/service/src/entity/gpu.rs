//! `gpus`: GPUs as their host's agent last reported them.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{GpuId, HostId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpus")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: GpuId,
    pub host_id: HostId,
    pub idx: i32,
    #[sea_orm(unique)]
    pub uuid: String,
    pub name: String,
    pub model: String,
    pub memory_mib: i64,
    pub mig_capable: bool,
    pub mig_enabled: bool,
    /// Indices of the GPUs of the same host this one has NVLink to.
    pub nvlink_peers: NvlinkPeers,
    /// The verdict on the driver's health signals.
    pub health: tessera_core::health::HealthVerdict,
    pub updated_at: DateTimeUtc,
    /// The sharing state the agent last observed (`None` before the first
    /// report that carried one).
    pub sharing: Option<ObservedSharing>,
    /// The MIG devices that exist on the GPU (`None` when there are none).
    pub mig_devices: Option<MigDevices>,
    pub apply_error: Option<String>,
    /// A platform admin's decision about this GPU (its host's applies too).
    pub ops_mode: tessera_core::availability::OpsMode,
    /// Why.
    pub ops_reason: Option<String>,
    /// Who decided.
    pub ops_by: Option<String>,
    /// When.
    pub ops_at: Option<DateTimeUtc>,
    /// While draining: when the slices still there end.
    pub drain_deadline: Option<DateTimeUtc>,
    /// The reasons behind `health`, worst first.
    pub health_findings: Option<HealthFindings>,
}

/// The reasons behind a GPU's health verdict, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct HealthFindings(pub Vec<tessera_core::health::HealthFinding>);

/// NVLink peers, as stored.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    sea_orm::FromJsonQueryResult,
)]
pub struct NvlinkPeers(pub Vec<u32>);

/// A GPU's observed sharing state, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct ObservedSharing(pub tessera_core::plan::GpuObserved);

/// A GPU's MIG devices, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct MigDevices(pub Vec<tessera_protocol::agent::MigDevice>);

impl Model {
    /// The GPU's index on its host; a stored index that is negative does
    /// not read back.
    pub fn index(&self) -> Result<u32, crate::ServiceError> {
        u32::try_from(self.idx).map_err(|_| {
            crate::ServiceError::Database(DbErr::Custom(format!(
                "GPU {}: stored index {} is negative",
                self.uuid, self.idx
            )))
        })
    }

    /// The observed sharing state the GPU last reported (`None` before its
    /// first report).
    pub fn observed(&self) -> Option<&tessera_core::plan::GpuObserved> {
        self.sharing.as_ref().map(|s| &s.0)
    }

    /// The MIG devices that exist on the GPU.
    pub fn mig_devices(&self) -> &[tessera_protocol::agent::MigDevice] {
        self.mig_devices.as_ref().map_or(&[], |d| d.0.as_slice())
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
