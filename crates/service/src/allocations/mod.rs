//! Allocations: a tenant's request for a GPU slice, admitted against its
//! quota and placed on the fleet in one serialized transaction, provisioned
//! by the host's agent through the desired state, and released, expired or
//! failed through the same path.
//!
//! Usage is always derived from the allocations themselves: quota counts
//! the phases in [`AllocationPhase::QUOTA`], capacity those in
//! [`AllocationPhase::CAPACITY`] (a slice being torn down still occupies its
//! GPU).
//!
//! [`AllocationPhase::QUOTA`]: tessera_core::lifecycle::AllocationPhase::QUOTA
//! [`AllocationPhase::CAPACITY`]: tessera_core::lifecycle::AllocationPhase::CAPACITY

mod admission;
mod capacity;
mod desired;
mod generations;
mod idle;
mod line;
mod pool_offer;
mod preempt;
mod progress;
mod queue;
mod release;
mod request_form;
mod scheduler;
pub(crate) mod snapshot;
mod stored;
pub use stored::StoredPlacement;
mod view;

pub use crate::runtime::fleet_index::IndexStats;
pub(crate) use crate::runtime::list_cache::{ListCache, Touched};
pub(crate) use capacity::{drain_of, gpu_loss, live_on_host};
pub(crate) use desired::DESIRED_RECHECK;
pub(crate) use generations::Generations;
pub(crate) use line::AdmissionLine;
pub use scheduler::TickReport;
pub(crate) use snapshot::{occupancy, unmanaged_instances, Occupancy, View};
pub(crate) use stored::AllocationRow;
pub(crate) use view::connection_target;
