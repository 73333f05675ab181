//! Telemetry from NVML. Per GPU:
//! - utilisation: `nvmlDeviceGetUtilizationRates().gpu`, the percent of the
//!   last sample period (1/6 s to 1 s by product) in which a kernel ran
//!   (DCGM's `DCGM_FI_DEV_GPU_UTIL`);
//! - memory used: `nvmlDeviceGetMemoryInfo().used` (`DCGM_FI_DEV_FB_USED`);
//! - power: `nvmlDeviceGetPowerUsage`, milliwatts (`DCGM_FI_DEV_POWER_USAGE`
//!   in watts);
//! - temperature: `nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)`, °C
//!   (`DCGM_FI_DEV_GPU_TEMP`);
//! - SM clock: `nvmlDeviceGetClockInfo(NVML_CLOCK_SM)`, MHz
//!   (`DCGM_FI_DEV_SM_CLOCK`).
//!
//! Per shared slice (MIG off; MPS clients and time-sliced replicas): the
//! processes naming it (`TESSERA_ALLOCATION` in their environment), their
//! SM utilisation from `nvmlDeviceGetProcessUtilization` (summed, percent
//! of the whole GPU) and their memory from the process lists.
//!
//! Per MIG device: memory used from the MIG device handle, and activity
//! from GPM where the GPU has it (Hopper and later; see [`super::gpm`]):
//! the percent of the interval since the previous round in which its GPU
//! instance's graphics/compute engine was active
//! (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`). NVML answers `NOT_SUPPORTED` for
//! utilisation on a MIG device, so on GPUs without GPM (A100, A30) and in a
//! device's first round the activity is unknown, and such slices have no
//! used GPU-hours for that time. Optional figures a GPU does not support
//! are left out rather than failing the sample.

use super::gpm::{GpmTracker, MigTarget};
use super::mps::is_mps_server;
use super::raw::{GpmSample, NvmlGpm, NvmlGpu};
use super::stop::allocation_of;
use super::{call, call_err};
use crate::backend::BackendError;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tessera_core::ids::AllocationId;
use tessera_protocol::agent::{ClientSample, GpuSample, InstanceSample};

const MIB: u64 = 1024 * 1024;

/// One sample of GPU `index`; `gpm` keeps its MIG devices' GPM samples
/// from one round to the next. Each figure is read on its own: one the
/// driver does not give in this mode (utilisation with MIG on) is unknown,
/// and a MIG device that cannot be read is left out of the round, while
/// the rest of the GPU still counts. Only a GPU that cannot be named or
/// whose memory cannot be read misses the round.
pub fn sample_gpu(
    nvml: &Nvml,
    gpm: &GpmTracker<GpmSample>,
    seen: &ProcessSeen,
    index: u32,
) -> Result<GpuSample, BackendError> {
    let dev = nvml
        .device_by_index(index)
        .map_err(|e| call_err("nvmlDeviceGetHandleByIndex", e))?;
    let uuid = call("nvmlDeviceGetUUID", dev.uuid())?;
    let memory = call("nvmlDeviceGetMemoryInfo", dev.memory_info())?;
    let util_pct = match dev.utilization_rates() {
        Ok(util) => Some(u8::try_from(util.gpu.min(100)).unwrap_or(100)),
        // "On MIG-enabled GPUs, querying device utilization rates is not
        // currently supported" (nvml.h): unknown, not idle.
        Err(NvmlError::NotSupported) => None,
        Err(e) => {
            tracing::debug!(gpu = index, "no utilisation: {e}");
            None
        }
    };
    let mut instances = Vec::new();
    let mut targets = Vec::new();
    if matches!(dev.mig_mode(), Ok(mode) if mode.current == 1) {
        let parent = NvmlGpu::new(
            nvml.device_by_index(index)
                .map_err(|e| call_err("nvmlDeviceGetHandleByIndex", e))?,
        );
        let max = dev.mig_device_count().unwrap_or(0);
        for i in 0..max {
            let mig = match dev.mig_device_by_index(i) {
                Ok(d) => d,
                Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
                Err(e) => {
                    tracing::debug!(gpu = index, slot = i, "no MIG device handle: {e}");
                    continue;
                }
            };
            let (uuid, memory) = match (mig.uuid(), mig.memory_info()) {
                (Ok(uuid), Ok(memory)) => (uuid, memory),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::debug!(gpu = index, slot = i, "MIG device left out: {e}");
                    continue;
                }
            };
            match parent.mig_gi_id(&mig) {
                Ok(gi_id) => targets.push(MigTarget {
                    gi_id,
                    uuid: uuid.clone(),
                }),
                Err(e) => tracing::debug!(gpu = index, %uuid, "no GPU instance ID: {e}"),
            }
            instances.push(InstanceSample {
                uuid,
                util_pct: None,
                mem_used_mib: memory.used / MIB,
            });
        }
    }
    let clients = if instances.is_empty() && !matches!(dev.mig_mode(), Ok(m) if m.current == 1) {
        clients(&dev, seen, index)
    } else {
        Vec::new()
    };
    let activity = gpm.round(&NvmlGpm::new(nvml), index, &targets);
    for i in &mut instances {
        i.util_pct = activity.get(&i.uuid).copied();
    }
    Ok(GpuSample {
        uuid,
        util_pct,
        mem_used_mib: memory.used / MIB,
        power_mw: dev.power_usage().ok(),
        temp_c: dev.temperature(TemperatureSensor::Gpu).ok(),
        sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
        instances,
        clients,
    })
}

/// Per GPU, the CPU timestamp (µs) of the newest process-utilisation
/// sample read, so each round reads only what is new.
pub type ProcessSeen = Mutex<BTreeMap<u32, u64>>;

/// The shared slices on a GPU with MIG off: its processes that name one
/// (the MPS server excluded), their SM utilisation since the last round
/// (no sample since then: no kernel ran) and their memory. Unknown
/// utilisation where the driver does not give it.
fn clients(dev: &Device<'_>, seen: &ProcessSeen, index: u32) -> Vec<ClientSample> {
    let listed: Vec<(u32, u64)> = dev
        .running_compute_processes()
        .into_iter()
        .chain(dev.mps_running_compute_processes())
        .flatten()
        .filter(|p| !is_mps_server(p.pid))
        .map(|p| {
            let mib = match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => bytes / MIB,
                UsedGpuMemory::Unavailable => 0,
            };
            (p.pid, mib)
        })
        .collect();
    let tagged: Vec<(u32, AllocationId, u64)> = listed
        .into_iter()
        .filter_map(|(pid, mib)| allocation_of(pid).map(|a| (pid, a, mib)))
        .collect();
    if tagged.is_empty() {
        return Vec::new();
    }
    let mut seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let last = seen.get(&index).copied().unwrap_or(0);
    // Mean SM utilisation per process over the samples since `last`.
    let per_pid: Option<BTreeMap<u32, u64>> = match dev.process_utilization_stats(last) {
        Ok(samples) => {
            if let Some(newest) = samples.iter().map(|s| s.timestamp).max() {
                seen.insert(index, newest);
            }
            let mut sums: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            for s in samples {
                let e = sums.entry(s.pid).or_default();
                e.0 += u64::from(s.sm_util.min(100));
                e.1 += 1;
            }
            Some(
                sums.into_iter()
                    .map(|(pid, (sum, n))| (pid, sum / n.max(1)))
                    .collect(),
            )
        }
        // "NVML_ERROR_NOT_FOUND if sample entries are not found": nothing ran.
        Err(NvmlError::NotFound) => Some(BTreeMap::new()),
        Err(e) => {
            tracing::debug!(gpu = index, "no per-process utilisation: {e}");
            None
        }
    };
    let mut by_slice: BTreeMap<AllocationId, (u64, u64)> = BTreeMap::new();
    for (pid, allocation, mib) in tagged {
        let e = by_slice.entry(allocation).or_default();
        e.0 += per_pid
            .as_ref()
            .and_then(|m| m.get(&pid))
            .copied()
            .unwrap_or(0);
        e.1 += mib;
    }
    by_slice
        .into_iter()
        .map(|(allocation, (util, mib))| ClientSample {
            allocation,
            util_pct: per_pid
                .as_ref()
                .map(|_| u8::try_from(util.min(100)).unwrap_or(100)),
            mem_used_mib: mib,
        })
        .collect()
}
