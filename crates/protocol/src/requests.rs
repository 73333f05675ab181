//! Request bodies for slices: what a tenant asks for and lease extensions
//! (UI forms and the REST API).

use serde::{Deserialize, Serialize};

/// What a tenant asks for (UI form and `POST /api/v1/allocations`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAllocation {
    /// Tenant slug (the API token's tenant when omitted with a token).
    #[serde(default)]
    pub tenant: Option<tessera_core::checked::TenantSlug>,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The slice.
    pub shape: tessera_core::sharing::SliceShape,
    /// Lease length in hours (at most the pool's maximum).
    pub lease_hours: u32,
    /// What it is for (shown to admins; up to 500 characters).
    #[serde(default)]
    pub purpose: String,
    /// Priority class (one the tenant may use in the pool; the request
    /// form lists them). Omitted: the default class.
    #[serde(default)]
    pub priority_class: Option<String>,
    /// QoS class: `guaranteed` (the default: within the tenant's quota,
    /// never preempted), `burstable` (beyond it, on quota the pool's other
    /// tenants leave unused; may be preempted with notice) or `best-effort`
    /// (outside any quota, on idle capacity; preempted first).
    #[serde(default)]
    pub qos: tessera_core::schedule::QosClass,
    /// One of the tenant's open slices this one replaces (e.g. a right-sized
    /// one): released once this one is active, so both are held only
    /// while the new one starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub replaces: Option<tessera_core::ids::AllocationId>,
}

/// Extending a lease (`POST /api/v1/allocations/{id}/extend`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendLease {
    /// Hours to add to the current end.
    pub hours: u32,
}

/// Asking for another shape instead of a slice
/// (`POST /api/v1/allocations/{id}/instead`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestInstead {
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The shape.
    pub shape: tessera_core::sharing::SliceShape,
}
