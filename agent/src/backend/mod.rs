//! Where GPU facts come from: the NVIDIA driver (NVML) or a simulation.

pub mod nvml;
pub mod sim;

use tessera_protocol::agent::GpuReport;
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
}
