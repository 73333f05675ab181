//! Desired-state planning for one GPU: the ordered operations that take it
//! from what the agent observes to what the database wants.
//!
//! The agent runs `plan(model, observed, desired)` on every pass and applies
//! the result through its `GpuBackend`; [`SimGpu`] is a faithful, pure model
//! of a GPU that rejects whatever the driver would reject, used to check plans
//! and as the core of the agent's simulated backend.

mod compute;
mod planner;
pub mod sim;
mod state;

pub use compute::{
    compute_instance_sizes, compute_instance_starts, validate_compute_instances,
    ComputeInstanceError,
};
pub use planner::{plan, PlanError};
pub use sim::{SimError, SimGpu};
pub use state::{
    ComputeInstance, DesiredInstance, GpuDesired, GpuObserved, MpsClient, MpsGrant, MpsServer,
    MpsSettings, MpsStray, ObservedInstance, Op, Released,
};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod proptests;
