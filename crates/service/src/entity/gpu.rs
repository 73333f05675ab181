//! `gpus`: GPUs as their host's agent last reported them.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpus")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub host_id: i64,
    pub idx: i32,
    #[sea_orm(unique)]
    pub uuid: String,
    pub name: String,
    pub model: String,
    pub memory_mib: i64,
    pub mig_capable: bool,
    pub mig_enabled: bool,
    pub nvlink_peers: Json,
    /// The verdict on the driver's health signals.
    pub health: tessera_core::health::HealthVerdict,
    pub updated_at: DateTimeUtc,
    pub sharing: Option<Json>,
    pub mig_devices: Option<Json>,
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

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
