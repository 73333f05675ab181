//! `hosts`: GPU machines with an enrolled agent.
use sea_orm::entity::prelude::*;
use tessera_core::checked::Hostname;
use tessera_core::ids::HostId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "hosts")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: HostId,
    #[sea_orm(unique)]
    pub hostname: Hostname,
    #[sea_orm(unique)]
    pub credential_hash: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub agent_version: Option<String>,
    pub backend: Option<String>,
    pub driver_version: Option<String>,
    pub enrolled_at: DateTimeUtc,
    pub last_seen_at: Option<DateTimeUtc>,
    pub desired_generation: i64,
    pub applied_generation: Option<i64>,
    /// A platform admin's decision: does it take new slices?
    pub ops_mode: tessera_core::availability::OpsMode,
    /// Why (shown on the fleet page and to the owners of slices there).
    pub ops_reason: Option<String>,
    /// Who decided.
    pub ops_by: Option<String>,
    /// When.
    pub ops_at: Option<DateTimeUtc>,
    /// While draining: when the slices still there end.
    pub drain_deadline: Option<DateTimeUtc>,
    /// Time of the last telemetry round stored (ms): rounds at or before it
    /// are duplicates.
    pub telemetry_last_at_ms: Option<i64>,
    /// SHA-256 (hex) of the last report processed in full.
    pub report_digest: Option<String>,
    /// When that was.
    pub report_full_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
