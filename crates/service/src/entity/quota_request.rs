//! `quota_requests`: a tenant asks for more quota; a platform admin decides.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{AllocationId, QuotaRequestId, TenantId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quota_requests")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: QuotaRequestId,
    pub tenant_id: TenantId,
    pub pool: tessera_core::checked::PoolName,
    /// The increase asked for.
    pub compute_milli: i64,
    pub memory_mib: i64,
    pub max_slices: i32,
    /// Temporary until then; permanent when `None`.
    pub ends_at: Option<DateTimeUtc>,
    pub justification: String,
    /// `proposed`, `pending`, `approved`, `rejected` or `withdrawn`.
    pub state: tessera_core::lifecycle::QuotaRequestPhase,
    pub reject_reason: Option<String>,
    pub requested_by_user_id: Option<UserId>,
    pub requested_by: String,
    pub submitted_by_user_id: Option<UserId>,
    pub submitted_by: Option<String>,
    pub decided_by_user_id: Option<UserId>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTimeUtc>,
    /// What was granted (may differ from what was asked).
    pub granted_compute_milli: Option<i64>,
    pub granted_memory_mib: Option<i64>,
    pub granted_max_slices: Option<i32>,
    pub granted_ends_at: Option<DateTimeUtc>,
    /// The slice request that was refused for lack of quota; requested again on approval.
    pub slice: Option<Json>,
    pub slice_user_id: Option<UserId>,
    pub slice_requested_by: Option<String>,
    pub allocation_id: Option<AllocationId>,
    pub slice_error: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
