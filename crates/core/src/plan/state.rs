//! Observed and desired state of one GPU, and the operations between them.

use serde::{Deserialize, Serialize};

use crate::mig::MigPlacement;
use crate::units::MemMiB;

/// A compute instance inside a GPU instance: `size` compute slices starting
/// at compute slice `start` of the GPU instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ComputeInstance {
    /// First compute slice inside the GPU instance.
    pub start: u8,
    /// Compute slices.
    pub size: u8,
}

impl ComputeInstance {
    /// The compute instance spanning a whole GPU instance of `gi_compute` slices
    /// (what `nvidia-smi mig -cgi ... -C` creates).
    pub fn whole(gi_compute: u8) -> Self {
        Self {
            start: 0,
            size: gi_compute,
        }
    }
}

/// A GPU instance as the agent sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObservedInstance {
    /// Profile and start.
    pub placement: MigPlacement,
    /// Its compute instances.
    pub compute_instances: Vec<ComputeInstance>,
    /// Processes are running in it.
    pub in_use: bool,
}

/// A GPU instance the database wants.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DesiredInstance {
    /// Profile and start.
    pub placement: MigPlacement,
    /// Its compute instances (usually one spanning the whole instance).
    pub compute_instances: Vec<ComputeInstance>,
}

/// MPS control-daemon defaults for a GPU (`set_default_active_thread_percentage`,
/// `set_default_device_pinned_mem_limit`); per-client limits travel in the
/// client's environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MpsSettings {
    /// Default share of the SMs for clients, 1..=100.
    pub default_active_thread_percentage: u8,
    /// Default pinned-memory limit per client; `None` leaves it unlimited.
    pub default_pinned_mem_limit: Option<MemMiB>,
}

impl MpsSettings {
    /// The daemon's defaults for a GPU whose clients were granted `shares`
    /// (share of the SMs in percent, pinned memory): the largest share and
    /// the largest memory any of them was granted. A client's own
    /// environment sets its lower limit; the defaults make sure no client
    /// that leaves it out runs above the largest grant. 100 % and unlimited
    /// while there are no clients.
    pub fn for_clients(shares: &[(u8, MemMiB)]) -> Self {
        if shares.is_empty() {
            return Self {
                default_active_thread_percentage: 100,
                default_pinned_mem_limit: None,
            };
        }
        Self {
            default_active_thread_percentage: shares
                .iter()
                .map(|(pct, _)| (*pct).clamp(1, 100))
                .max()
                .unwrap_or(100),
            default_pinned_mem_limit: shares.iter().map(|(_, mem)| *mem).max(),
        }
    }
}

/// What the agent observes on one GPU.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuObserved {
    /// MIG mode is on.
    pub mig_enabled: bool,
    /// GPU instances (only with MIG on).
    pub instances: Vec<ObservedInstance>,
    /// Processes are running on the GPU outside any GPU instance (MIG off).
    pub processes_running: bool,
    /// The MPS daemon runs for this GPU with these defaults.
    pub mps: Option<MpsSettings>,
    /// Time-slicing replicas advertised for the GPU (1 = not shared).
    pub time_slice_replicas: u32,
}

impl Default for GpuObserved {
    fn default() -> Self {
        Self {
            mig_enabled: false,
            instances: Vec::new(),
            processes_running: false,
            mps: None,
            time_slice_replicas: 1,
        }
    }
}

/// What the agent may interrupt to reach the desired state: allocations that
/// have been released (or expired, or failed) leave their instance here so
/// their processes can be stopped. Anything in use and not listed is never
/// destroyed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Released {
    /// Starts of GPU instances whose processes may be stopped.
    #[serde(default)]
    pub instances: Vec<u8>,
    /// Every process on the GPU may be stopped (whole-GPU, MPS and
    /// time-sliced allocations released, or the GPU drained).
    #[serde(default)]
    pub whole_gpu: bool,
}

impl Released {
    /// Processes in the GPU instance at `start` may be stopped.
    pub fn covers(&self, start: u8) -> bool {
        self.whole_gpu || self.instances.contains(&start)
    }
}

/// What the database wants on one GPU.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuDesired {
    /// MIG mode on.
    pub mig_enabled: bool,
    /// GPU instances (only with MIG on).
    pub instances: Vec<DesiredInstance>,
    /// Run the MPS daemon with these defaults (never with MIG on).
    pub mps: Option<MpsSettings>,
    /// Time-slicing replicas (1..=64; 1 = not shared).
    pub time_slice_replicas: u32,
    /// What may be interrupted.
    #[serde(default)]
    pub released: Released,
}

impl Default for GpuDesired {
    fn default() -> Self {
        Self {
            mig_enabled: false,
            instances: Vec::new(),
            mps: None,
            time_slice_replicas: 1,
            released: Released::default(),
        }
    }
}

impl GpuDesired {
    /// The desired state that keeps `observed` exactly as it is.
    pub fn keep(observed: &GpuObserved) -> Self {
        Self {
            mig_enabled: observed.mig_enabled,
            instances: observed
                .instances
                .iter()
                .map(|i| DesiredInstance {
                    placement: i.placement.clone(),
                    compute_instances: i.compute_instances.clone(),
                })
                .collect(),
            mps: observed.mps,
            time_slice_replicas: observed.time_slice_replicas,
            released: Released::default(),
        }
    }
}

/// One step towards the desired state, in the order the agent must apply them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Stop the processes of released allocations: in the GPU instance at
    /// `gi_start`, or on the whole GPU when `None`.
    StopProcesses {
        /// GPU instance start, or `None` for the whole GPU.
        gi_start: Option<u8>,
    },
    /// Start, reconfigure (`Some`) or stop (`None`) the MPS daemon.
    SetMps {
        /// New defaults.
        settings: Option<MpsSettings>,
    },
    /// `nvidia-smi mig -dci`.
    DestroyComputeInstance {
        /// Start of the GPU instance.
        gi_start: u8,
        /// The compute instance.
        ci: ComputeInstance,
    },
    /// `nvidia-smi mig -dgi`.
    DestroyGpuInstance {
        /// Start of the GPU instance.
        start: u8,
    },
    /// `nvidia-smi -mig 0`.
    DisableMig,
    /// `nvidia-smi -mig 1`.
    EnableMig,
    /// `nvidia-smi mig -cgi <profile>:<start>`.
    CreateGpuInstance {
        /// Profile name.
        profile: String,
        /// Start memory slice.
        start: u8,
    },
    /// `nvidia-smi mig -cci` in the GPU instance at `gi_start`.
    CreateComputeInstance {
        /// Start of the GPU instance.
        gi_start: u8,
        /// The compute instance.
        ci: ComputeInstance,
    },
    /// Advertise `replicas` time-sliced replicas (device-plugin sharing config).
    SetReplicas {
        /// Replicas, 1..=64.
        replicas: u32,
    },
}
