//! The host description: a small TOML file.
//!
//! ```toml
//! hostname = "gpu-h100-01"
//! cpu_cores = 96
//! memory_gib = 1024
//!
//! [[gpus]]
//! model = "H100-80GB"
//! count = 8
//! mig_enabled = true
//! nvlink_groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
//! ```
//!
//! Models come from `tessera_core::catalogue`; an unknown model is a generic GPU
//! with `memory_gib` of memory.
//!
//! Hardware faults are injected at run time through `health_file` (a path,
//! relative to the host file), read at every report; a missing file means a
//! healthy host:
//!
//! ```toml
//! [[gpu]]
//! index = 3
//! lost = true                      # fallen off the bus: every call fails
//! xids = [{ xid = 79, count = 1 }]
//! ecc_uncorrected = 2
//! retired_pages_pending = true
//! remapped_rows_pending = true
//! remap_failure = false
//! throttle = ["hw_thermal_slowdown"]
//! ```

use serde::Deserialize;
use tessera_core::catalogue;
use tessera_core::health::HealthSignals;
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{ComputeInstance, DesiredInstance, GpuDesired};

/// One simulated host file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimHost {
    /// Host name.
    pub hostname: String,
    /// CPU cores.
    pub cpu_cores: u64,
    /// Host memory in GiB.
    pub memory_gib: u64,
    /// Driver version to report.
    #[serde(default = "default_driver")]
    pub driver_version: String,
    /// GPU groups.
    pub gpus: Vec<SimGpus>,
    /// Driver misbehaviour to simulate, for testing failure paths.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// A file of GPU hardware faults, read at every report (see the module
    /// documentation); relative to the host file.
    #[serde(default)]
    pub health_file: Option<std::path::PathBuf>,
    /// The load slices on this host run (`idle`, `notebook`, `training`,
    /// `inference`; default `notebook`): what telemetry reports for each MIG
    /// device and each GPU a slice holds, reproducibly per device.
    #[serde(default)]
    pub workload: tessera_core::telemetry::WorkloadProfile,
}

/// The `health_file`: what is wrong with which GPU.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthFile {
    /// One entry per faulty GPU.
    #[serde(default)]
    pub gpu: Vec<GpuFault>,
}

/// One GPU's hardware faults.
#[derive(Debug, Clone, Deserialize)]
pub struct GpuFault {
    /// GPU index.
    pub index: u32,
    /// What is wrong with it.
    #[serde(flatten)]
    pub signals: HealthSignals,
}

/// The error NVML gives for every call on a GPU that fell off the bus.
pub const GPU_IS_LOST: &str = "GPU is lost (NVML_ERROR_GPU_IS_LOST)";

/// A simulated driver fault: an operation that fails or hangs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Operation name, e.g. `create_gpu_instance` (see `op_name`).
    pub op: String,
    /// Only on this GPU (all GPUs when absent).
    #[serde(default)]
    pub gpu: Option<u32>,
    /// `fail` or `hang`.
    pub action: FaultAction,
    /// For `hang`: how long, in milliseconds, before the operation goes on.
    #[serde(default)]
    pub hang_ms: u64,
    /// How many times the fault fires (forever when absent).
    #[serde(default)]
    pub times: Option<u32>,
}

/// What a fault does.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// The driver refuses the operation.
    Fail,
    /// The driver takes `hang_ms` before doing it.
    Hang,
}

/// The driver version a simulated host reports unless its file names one.
pub fn default_driver() -> String {
    "550.90.07 (simulated)".to_owned()
}

/// A group of identical GPUs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimGpus {
    /// Catalogue model name.
    pub model: String,
    /// How many.
    pub count: u32,
    /// Memory for models the catalogue does not know.
    #[serde(default)]
    pub memory_gib: Option<u64>,
    /// Start with MIG mode on (MIG-capable models only).
    #[serde(default)]
    pub mig_enabled: bool,
    /// NVLink islands, as GPU indices within this group.
    #[serde(default)]
    pub nvlink_groups: Vec<Vec<u32>>,
    /// MIG instances each GPU of the group starts with, as `profile@start`
    /// (e.g. `"3g.40gb@0"`); needs `mig_enabled`.
    #[serde(default)]
    pub instances: Vec<String>,
}

/// The desired state for a starting layout of `profile@start` entries.
pub fn starting_layout(
    model: &catalogue::GpuModel,
    entries: &[String],
) -> Result<GpuDesired, String> {
    let spec = model
        .mig
        .ok_or_else(|| format!("{} does not support MIG", model.name))?;
    let mut instances = Vec::new();
    for e in entries {
        let (profile, start) = e
            .split_once('@')
            .and_then(|(p, s)| s.parse::<u8>().ok().map(|s| (p, s)))
            .ok_or_else(|| format!("'{e}' is not profile@start, e.g. 3g.40gb@0"))?;
        let p = spec
            .profile(profile)
            .ok_or_else(|| format!("{} has no MIG profile '{profile}'", model.name))?;
        instances.push(DesiredInstance {
            placement: MigPlacement::new(p.name, start),
            compute_instances: vec![ComputeInstance::whole(p.compute_slices)],
        });
    }
    Ok(GpuDesired {
        mig_enabled: true,
        instances,
        ..GpuDesired::default()
    })
}
