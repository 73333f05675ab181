//! A simulated GPU host: one description ([`SimHost`], a TOML file) and one
//! model of its GPUs ([`HostState`], over core's faithful `SimGpu`), with
//! the figures the driver would measure ([`telemetry`]). The agent's
//! simulated backend and the fake NVML library (`tessera-fake-nvml`) are
//! both built on it, so the two answer alike.

pub mod description;
pub mod host;
pub mod telemetry;

pub use description::{Fault, FaultAction, GpuFault, HealthFile, SimGpus, SimHost, GPU_IS_LOST};
pub use host::{sim_uuid, HostError, HostState, SavedState};
