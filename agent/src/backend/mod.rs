//! Where GPU facts come from: the NVIDIA driver (NVML) or a simulation.

pub mod nvml;
pub mod sim;

use std::collections::BTreeSet;
use tessera_core::plan::{GpuObserved, MpsClient, Op};
use tessera_protocol::agent::{GpuReport, GpuSample, ProcessesStopped};
use thiserror::Error;

/// What a backend sees on its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// Logical CPUs in thousandths.
    pub cpu_milli: u64,
    /// Host memory in MiB.
    pub memory_mib: u64,
    /// Driver version, if known.
    pub driver_version: Option<String>,
    /// GPUs in index order.
    pub gpus: Vec<GpuReport>,
}

/// A backend failure, with a label for logs and metrics.
#[derive(Debug, Error)]
pub enum BackendError {
    /// The NVIDIA library could not be loaded or initialised (no driver, no GPU).
    #[error("NVML is not available: {0}. Is the NVIDIA driver installed? Use --backend sim to run without a GPU")]
    NvmlUnavailable(String),
    /// A driver call failed.
    #[error("NVML call {call} failed: {detail}")]
    Nvml {
        /// The call.
        call: &'static str,
        /// The driver's message.
        detail: String,
    },
    /// The driver (or the simulated driver) refused an operation.
    #[error("GPU {index}: the driver refused {op}: {detail}")]
    Refused {
        /// GPU index.
        index: u32,
        /// Operation name.
        op: &'static str,
        /// The driver's reason.
        detail: String,
    },
    /// No GPU with this index.
    #[error("there is no GPU {0} on this host")]
    NoSuchGpu(u32),
    /// The simulation file is wrong.
    #[error("simulated host file {path}: {message}")]
    SimConfig {
        /// File.
        path: String,
        /// What to fix.
        message: String,
    },
}

/// Reads (and, in later versions, changes) GPU state. Calls may block: run them
/// off the async runtime.
pub trait GpuBackend: Send + Sync + 'static {
    /// `nvml` or `simulated`.
    fn name(&self) -> &'static str;
    /// The host name to report under, unless overridden.
    fn hostname(&self) -> String;
    /// The current inventory.
    fn inventory(&self) -> Result<Inventory, BackendError>;
    /// The sharing state of GPU `index` (MIG mode and instances, MPS, replicas).
    fn observe(&self, index: u32) -> Result<GpuObserved, BackendError>;
    /// Applies one planned operation to GPU `index`; for the operations
    /// that stop processes, what was stopped.
    fn apply(&self, index: u32, op: &Op) -> Result<Option<ProcessesStopped>, BackendError>;
    /// The MPS clients of GPU `index`'s daemon and what their environment
    /// names (none without a daemon, or where clients cannot be seen).
    fn mps_clients(&self, index: u32) -> Result<Vec<MpsClient>, BackendError> {
        let _ = index;
        Ok(Vec::new())
    }
    /// Stops MPS client `client` of GPU `index`, which does not keep to
    /// its grant: its GPU work through the control daemon, then the
    /// process (SIGTERM, the grace period, SIGKILL).
    fn stop_mps_client(&self, index: u32, client: &MpsClient) -> Result<(), BackendError> {
        let _ = client;
        Err(BackendError::Refused {
            index,
            op: "stop_mps_client",
            detail: format!("the {} backend has no MPS clients to stop", self.name()),
        })
    }
    /// One telemetry sample of every GPU that answers, taken at `at_ms`
    /// (see `tessera_core::telemetry` for what each figure means). `held`:
    /// the GPUs the desired state says slices run on whole or shared (the
    /// simulation runs load there; the driver measures it anyway). A GPU
    /// that fails to answer is left out of the round, not the round lost.
    fn sample(&self, at_ms: i64, held: &BTreeSet<u32>) -> Result<Vec<GpuSample>, BackendError>;
}

/// The snake_case name of an operation, as logs and fault rules spell it.
pub fn op_name(op: &Op) -> &'static str {
    match op {
        Op::StopProcesses { .. } => "stop_processes",
        Op::StopAllocation { .. } => "stop_allocation",
        Op::SetMps { .. } => "set_mps",
        Op::SetMpsServerLimits { .. } => "set_mps_server_limits",
        Op::DestroyComputeInstance { .. } => "destroy_compute_instance",
        Op::DestroyGpuInstance { .. } => "destroy_gpu_instance",
        Op::DisableMig => "disable_mig",
        Op::EnableMig => "enable_mig",
        Op::CreateGpuInstance { .. } => "create_gpu_instance",
        Op::CreateComputeInstance { .. } => "create_compute_instance",
        Op::SetReplicas { .. } => "set_replicas",
    }
}
