//! `allocations`: tenants' leases on GPU slices.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{AllocationId, HostId, TenantId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "allocations")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: AllocationId,
    pub tenant_id: TenantId,
    pub pool: tessera_core::checked::PoolName,
    pub requested_by: String,
    /// The state's phase (for queries); `state_data` has the whole state.
    pub state: tessera_core::lifecycle::AllocationPhase,
    pub state_data: StoredState,
    pub shape: StoredShape,
    pub shape_label: String,
    pub demand_compute_milli: i64,
    pub demand_memory_mib: i64,
    pub demand_slices: i32,
    /// Queue priority: the value of `priority_class` when requested.
    pub priority: i32,
    /// The priority class requested with.
    pub priority_class: String,
    pub purpose: String,
    pub lease_hours: i32,
    pub lease_ends_at: Option<DateTimeUtc>,
    pub host_id: Option<HostId>,
    pub placement: Option<crate::allocations::StoredPlacement>,
    pub generation: Option<i64>,
    pub mig_device_uuid: Option<String>,
    pub created_at: DateTimeUtc,
    pub placed_at: Option<DateTimeUtc>,
    pub active_at: Option<DateTimeUtc>,
    pub ended_at: Option<DateTimeUtc>,
    pub updated_at: DateTimeUtc,
    /// The user who asked, when a person did (API tokens have none).
    pub requested_by_user_id: Option<UserId>,
    /// When the "lease ending soon" notice went out.
    pub lease_warned_at: Option<DateTimeUtc>,
    /// When its GPU turned unhealthy, went missing, or its host went
    /// offline for too long (cleared when it comes back).
    pub capacity_lost_at: Option<DateTimeUtc>,
    /// What was lost, for the owner.
    pub capacity_lost_reason: Option<String>,
    /// When its owner was told it is idle (cleared when kept or busy again).
    pub idle_warned_at: Option<DateTimeUtc>,
    /// When it is reclaimed unless kept.
    pub idle_deadline: Option<DateTimeUtc>,
    /// How often its owner kept it.
    pub idle_keeps: i32,
    /// When its owner last kept it (idle time counts from then).
    pub idle_watch_from: Option<DateTimeUtc>,
    /// When it was released for being idle.
    pub reclaimed_at: Option<DateTimeUtc>,
    /// How safe it is from preemption.
    pub qos: tessera_core::schedule::QosClass,
    /// Set while it is told to give way: when it is preempted.
    pub preempt_deadline: Option<DateTimeUtc>,
    /// The waiting request it gives way to.
    pub preempt_for: Option<AllocationId>,
    /// Why, for its owner.
    pub preempt_reason: Option<String>,
    /// When it was preempted.
    pub preempted_at: Option<DateTimeUtc>,
    /// At release: its processes that exited on SIGTERM (null until the
    /// host reports the slice gone).
    pub processes_terminated: Option<i32>,
    /// At release: its processes that needed SIGKILL.
    pub processes_killed: Option<i32>,
    /// The tenant's slice this one replaces: released once this one is active.
    pub replaces_id: Option<AllocationId>,
}

/// An allocation's whole lifecycle state, as stored: a row whose state
/// does not read back is an error when it is read.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct StoredState(pub tessera_core::lifecycle::AllocationState);

/// The shape an allocation asked for, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct StoredShape(pub tessera_core::sharing::SliceShape);

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
