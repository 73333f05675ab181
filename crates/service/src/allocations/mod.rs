//! Allocations: a tenant's request for a GPU slice, admitted against its
//! quota and placed on the fleet in one serialized transaction, provisioned
//! by the host's agent through the desired state, and released, expired or
//! failed through the same path.
//!
//! Usage is always derived from the allocations themselves: quota counts
//! `queued`, `placed`, `provisioning` and `active` ones; capacity counts
//! `placed`, `provisioning`, `active` and `releasing` ones (a slice being torn
//! down still occupies its GPU).

mod access;
mod admission;
mod desired;
mod progress;
mod scheduler;
mod snapshot;
mod stored;
mod view;

pub use access::TenantActor;
pub use scheduler::TickReport;
pub(crate) use snapshot::occupancy;

/// States whose demand counts against the tenant's quota.
pub const QUOTA_STATES: [&str; 5] = ["requested", "queued", "placed", "provisioning", "active"];
/// States that occupy GPU capacity.
pub const CAPACITY_STATES: [&str; 4] = ["placed", "provisioning", "active", "releasing"];
/// States that may still change.
pub const OPEN_STATES: [&str; 6] = [
    "requested",
    "queued",
    "placed",
    "provisioning",
    "active",
    "releasing",
];
