//! Observed and desired state of one GPU, and the operations between them.

use serde::{Deserialize, Serialize};

use crate::ids::AllocationId;
use crate::mig::MigPlacement;
use crate::pool::MpsStrayPolicy;
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
    /// (share of the SMs in percent, pinned memory): the *smallest* share
    /// and memory any of them was granted, so a client that leaves its
    /// variables out gets least, not most. A default reaches only servers
    /// started afterwards (NVIDIA MPS docs, `set_default_active_thread_percentage`);
    /// the agent raises each running server to the largest grant
    /// ([`MpsGrant`]) because a client's own variables can only lower the
    /// server's limit, never raise it. 100 % and unlimited while there are
    /// no clients.
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
                .min()
                .unwrap_or(100),
            default_pinned_mem_limit: shares.iter().map(|(_, mem)| *mem).min(),
        }
    }
}

/// What one MPS client (a live shared slice) was granted: the agent sets
/// running servers' limits to the largest grant and checks each client
/// process against its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MpsGrant {
    /// The slice.
    pub allocation: AllocationId,
    /// Share of the SMs, 1..=100 (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`).
    pub active_thread_percentage: u8,
    /// Pinned device memory (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`).
    pub pinned_mem_limit: MemMiB,
}

impl MpsGrant {
    /// The per-server limits that let every grant in `grants` have its
    /// share (its own variables lower it from there): the largest of each.
    pub fn ceiling(grants: &[MpsGrant]) -> Option<(u8, MemMiB)> {
        let pct = grants.iter().map(|g| g.active_thread_percentage).max()?;
        let mem = grants.iter().map(|g| g.pinned_mem_limit).max()?;
        Some((pct.clamp(1, 100), mem))
    }
}

/// A running MPS server (one per Linux user with clients on the GPU) and
/// the limits its clients get at most: its own, set through the control
/// daemon, or the daemon's defaults as they were when it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MpsServer {
    /// The server's process id.
    pub pid: u32,
    /// Its active-thread percentage (`get_active_thread_percentage`).
    pub active_thread_percentage: u8,
    /// The pinned-memory limit Tessera set on it (`None`: never set, the
    /// defaults it started with apply).
    pub pinned_mem_limit: Option<MemMiB>,
}

/// An MPS client process that does not keep to its slice, as the agent
/// finds it (`get_client_list`, and the process's environment).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MpsStray {
    /// The client's process id.
    pub pid: u32,
    /// The slice it names (`TESSERA_ALLOCATION`), if any.
    pub allocation: Option<AllocationId>,
    /// What is wrong, for the admin.
    pub problem: String,
    /// The agent stopped it (the pool's `mps_strays` policy is `stop`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// An MPS client process as the host shows it: the slice and the limits
/// its environment names (`TESSERA_ALLOCATION`,
/// `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`, `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`
/// for device 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MpsClient {
    /// Its process id.
    pub pid: u32,
    /// The process id of the MPS server it is a client of.
    pub server: u32,
    /// The slice it names.
    pub allocation: Option<AllocationId>,
    /// The share of the SMs it asks for.
    pub active_thread_percentage: Option<u8>,
    /// The pinned memory it limits itself to.
    pub pinned_mem_limit: Option<MemMiB>,
}

impl MpsClient {
    /// Why this client does not keep to its slice's grant among `grants`
    /// (the GPU's live MPS slices), or `None` when it does. A client gets
    /// the lower of its own variables and its server's limits, and servers
    /// run at the largest grant: a client that leaves a variable out, or
    /// asks for more, gets more than its share.
    pub fn stray(&self, grants: &[MpsGrant]) -> Option<MpsStray> {
        let stray = |problem: String| {
            Some(MpsStray {
                pid: self.pid,
                allocation: self.allocation,
                problem,
                stopped: false,
            })
        };
        let Some(id) = self.allocation else {
            return stray(
                "runs without TESSERA_ALLOCATION: no Tessera slice is its own".to_owned(),
            );
        };
        let Some(grant) = grants.iter().find(|g| g.allocation == id) else {
            return stray(format!(
                "names slice {id}, which holds no MPS share on this GPU"
            ));
        };
        match self.active_thread_percentage {
            None => {
                return stray(format!(
                    "sets no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: it may use more than its {}% of the SMs",
                    grant.active_thread_percentage
                ))
            }
            Some(p) if p > grant.active_thread_percentage => {
                return stray(format!(
                    "asks for {p}% of the SMs; slice {id} has {}%",
                    grant.active_thread_percentage
                ))
            }
            Some(_) => {}
        }
        match self.pinned_mem_limit {
            None => stray(format!(
                "sets no CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: it may pin more than its {}",
                grant.pinned_mem_limit
            )),
            Some(m) if m > grant.pinned_mem_limit => stray(format!(
                "limits itself to {m} of memory; slice {id} has {}",
                grant.pinned_mem_limit
            )),
            Some(_) => None,
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
    /// Shared slices with processes on the GPU, by the `TESSERA_ALLOCATION`
    /// in those processes' environment (MIG off; what a host can tell).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations_running: Vec<AllocationId>,
    /// The MPS daemon runs for this GPU with these defaults.
    pub mps: Option<MpsSettings>,
    /// Its running servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mps_servers: Vec<MpsServer>,
    /// Its clients that do not keep to their slice's grant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mps_strays: Vec<MpsStray>,
    /// Time-slicing replicas advertised for the GPU (1 = not shared).
    pub time_slice_replicas: u32,
}

impl Default for GpuObserved {
    fn default() -> Self {
        Self {
            mig_enabled: false,
            instances: Vec::new(),
            processes_running: false,
            allocations_running: Vec::new(),
            mps: None,
            mps_servers: Vec::new(),
            mps_strays: Vec::new(),
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
    /// Every process on the GPU may be stopped (whole-GPU allocations
    /// released, or the GPU drained).
    #[serde(default)]
    pub whole_gpu: bool,
    /// Released MPS and time-sliced slices of a GPU that others still
    /// share: the processes whose environment names one of them
    /// (`TESSERA_ALLOCATION=<id>`, set by the slice's launch snippets) may
    /// be stopped, and only those.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<AllocationId>,
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
    /// What each live MPS client was granted (empty unless `mps`): for the
    /// running servers' limits and the check of every client process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mps_clients: Vec<MpsGrant>,
    /// What the agent does with a client that does not keep to its grant.
    #[serde(default, skip_serializing_if = "MpsStrayPolicy::is_report")]
    pub mps_strays: MpsStrayPolicy,
}

impl Default for GpuDesired {
    fn default() -> Self {
        Self {
            mig_enabled: false,
            instances: Vec::new(),
            mps: None,
            time_slice_replicas: 1,
            released: Released::default(),
            mps_clients: Vec::new(),
            mps_strays: MpsStrayPolicy::Report,
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
            mps_clients: Vec::new(),
            mps_strays: MpsStrayPolicy::Report,
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
    /// Stop the processes of a released MPS or time-sliced slice: those
    /// whose environment carries `TESSERA_ALLOCATION=<allocation>`.
    StopAllocation {
        /// The released slice.
        allocation: AllocationId,
    },
    /// Set every running MPS server's limits (`set_active_thread_percentage
    /// <pid>`, `set_device_pinned_mem_limit <pid> 0`): the largest grant,
    /// which each client's own variables lower to its share.
    SetMpsServerLimits {
        /// Share of the SMs, 1..=100.
        active_thread_percentage: u8,
        /// Pinned device memory per client.
        pinned_mem_limit: MemMiB,
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
