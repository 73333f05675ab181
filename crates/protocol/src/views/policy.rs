//! Pools and tenants as platform admins edit them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::AllocationId;
use tessera_core::pool::{FieldChange, GpuMove, PoolSpec};

/// The pools page: every pool, in the order that decides which pool a GPU
/// joins, and the GPU models a pool can name.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolsAdminView {
    /// The pools.
    pub pools: Vec<PoolAdminView>,
    /// Catalogue model names.
    pub models: Vec<String>,
    /// Hosts the fleet knows, for host selectors.
    pub hosts: Vec<String>,
}

/// One pool, with what it holds now.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolAdminView {
    /// The definition in force.
    pub spec: PoolSpec,
    /// Its revision: an edit names it, so two admins cannot overwrite each
    /// other's change unseen.
    pub revision: i64,
    /// GPUs in the pool now.
    pub gpus: u32,
    /// Slices holding them (placed to releasing).
    pub live_slices: u32,
    /// Last change.
    pub updated_at: DateTime<Utc>,
    /// By whom (`None`: seeded from the configuration).
    pub updated_by: Option<String>,
    /// A change waiting for GPUs to empty.
    pub planned: Option<PlannedChangeView>,
}

/// A change to a pool that waits until the GPUs it moves are empty.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedChangeView {
    /// The definition it will put in force.
    pub spec: PoolSpec,
    /// Field by field.
    pub changes: Vec<FieldChange>,
    /// The GPUs being drained for it.
    pub moves: Vec<GpuMove>,
    /// Slices still on them.
    pub waiting_slices: u32,
    /// Why.
    pub reason: String,
    /// Who.
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// When the slices still there end.
    pub drain_deadline: DateTime<Utc>,
}

/// What saving a pool would do, before it is done.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolChangePreview {
    /// Field by field (empty for a new pool).
    pub changes: Vec<FieldChange>,
    /// GPUs that change pool or sharing mode.
    pub moves: Vec<GpuMove>,
    /// Slices on GPUs that must be emptied first: owners are told, and
    /// whatever still runs at the deadline is released.
    pub affected: Vec<AffectedSlice>,
    /// True when nothing has to be drained: saving applies at once.
    pub immediate: bool,
}

/// A slice a planned change ends.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffectedSlice {
    /// Allocation id.
    pub id: AllocationId,
    /// Its tenant (slug).
    pub tenant: String,
    /// What it is (`MIG 3g.40gb`).
    pub shape: String,
    /// Its host.
    pub host: String,
}

/// A new or changed pool (`POST /api/v1/pools`, `PUT /api/v1/pools/{name}`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolEdit {
    /// The whole definition.
    pub spec: PoolSpec,
    /// The revision the edit started from (required to change a pool).
    #[serde(default)]
    pub revision: Option<i64>,
    /// Why (required when GPUs must be drained; shown to their slices'
    /// owners).
    #[serde(default)]
    pub reason: String,
    /// How long slices on GPUs that must be emptied may run on, in minutes.
    #[serde(default = "default_drain_minutes")]
    pub drain_minutes: u32,
}

fn default_drain_minutes() -> u32 {
    60
}

/// A tenant as platform admins manage it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantAdminView {
    /// URL slug; never changes.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Cost centre for chargeback.
    pub cost_centre: Option<String>,
    /// Members of these IdP groups are tenant members.
    pub member_groups: Vec<String>,
    /// Members of these IdP groups are tenant admins.
    pub admin_groups: Vec<String>,
    /// Kubernetes namespaces of its workloads (its claims and bundle go
    /// there); the slug when none is set.
    pub namespaces: Vec<String>,
    /// Its revision (see [`PoolAdminView::revision`]).
    pub revision: i64,
    /// People who signed in with a role in it.
    pub members: u32,
    /// Slices it holds now.
    pub live_slices: u32,
}

/// A new or changed tenant (`POST /api/v1/tenants`, `PUT /api/v1/tenants/{slug}`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantEdit {
    /// URL slug (lower-case letters, digits, dashes); ignored on a change.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Cost centre.
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// IdP groups of members.
    #[serde(default)]
    pub member_groups: Vec<String>,
    /// IdP groups of tenant admins.
    #[serde(default)]
    pub admin_groups: Vec<String>,
    /// Kubernetes namespaces (RFC 1123 labels; none: the slug). No two
    /// tenants share one.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// The revision the edit started from (required to change a tenant).
    #[serde(default)]
    pub revision: Option<i64>,
}
