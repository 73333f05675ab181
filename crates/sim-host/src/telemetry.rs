//! What the driver measures on a simulated GPU, and the figures it gives.
//!
//! The load follows the host's `workload` (see
//! `tessera_core::telemetry::WorkloadProfile`): each MIG device, and each
//! GPU a slice holds whole or shared, runs that profile seeded by its UUID;
//! a free GPU idles. What is *reported* is what NVML reports:
//!
//! - a GPU with MIG on has no utilisation: "On MIG-enabled GPUs, querying
//!   device utilization rates is not currently supported" (nvml.h,
//!   `nvmlDeviceGetUtilizationRates`), so it is unknown, not 0;
//! - a MIG device's activity comes from GPM per GPU instance, which only
//!   Hopper and newer GPUs have (nvml.h, `nvmlGpmQueryDeviceSupport`); on
//!   A100 and A30 it is unknown;
//! - memory, power, temperature and clocks are read in every mode (memory
//!   per MIG device through its handle).

use crate::host::HostState;
use tessera_core::catalogue::GpuModel;
use tessera_core::telemetry::{seed_of, WorkloadProfile};
use tessera_protocol::agent::{GpuSample, InstanceSample};

/// The load on one device at one time: what the hardware does, whether or
/// not the driver can say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Percent of the time a kernel ran.
    pub util_pct: u8,
    /// Memory in use, MiB.
    pub mem_used_mib: u64,
}

/// The load of the device `uuid` with `total_mib` of memory at `at_ms`.
pub fn load(workload: WorkloadProfile, uuid: &str, total_mib: u64, at_ms: i64) -> Load {
    let seed = seed_of(uuid);
    Load {
        util_pct: workload.utilisation_pct(seed, at_ms),
        mem_used_mib: workload.memory_used_mib(seed, at_ms, total_mib),
    }
}

/// Whether NVML gives a GPU's utilisation in this MIG mode.
pub fn gpu_utilisation_known(mig_enabled: bool) -> bool {
    !mig_enabled
}

/// Whether NVML gives a MIG device's activity on this model (GPM).
pub fn instance_activity_known(model: &GpuModel) -> bool {
    model.architecture.has_gpm()
}

/// The whole GPU's load: its own when MIG is off (busy when `held`), its
/// instances' weighted by their compute slices when MIG is on.
pub fn gpu_load(
    host: &HostState,
    index: u32,
    at_ms: i64,
    held: bool,
    workload: WorkloadProfile,
) -> Option<Load> {
    let gpu = host.gpu(index)?;
    let report = host.reports().get(index as usize)?;
    let model = gpu.model();
    if gpu.observed().mig_enabled {
        let spec = model.mig?;
        let mut weighted = 0u64;
        let mut mem = 0u64;
        for d in host.mig_devices(index) {
            let Some(p) = spec.profile(&d.profile) else {
                continue;
            };
            let l = load(workload, &d.uuid, p.memory_mib, at_ms);
            weighted += u64::from(l.util_pct) * u64::from(p.compute_slices);
            mem += l.mem_used_mib;
        }
        let slices = u64::from(spec.compute_slices.max(1));
        Some(Load {
            util_pct: u8::try_from(weighted / slices).unwrap_or(100),
            mem_used_mib: mem,
        })
    } else if held {
        Some(load(workload, &report.uuid, report.memory_mib, at_ms))
    } else {
        Some(Load {
            util_pct: 0,
            mem_used_mib: 0,
        })
    }
}

/// Power draw in milliwatts at a load: an H100 SXM idles near 70 W and
/// peaks near 700 W; other models scale with their memory, roughly.
pub fn power_mw(memory_mib: u64, util_pct: u8) -> u32 {
    let (idle_w, max_w) = if memory_mib >= 80_000 {
        (70, 700)
    } else {
        (30, 300)
    };
    (idle_w + (max_w - idle_w) * u32::from(util_pct) / 100) * 1000
}

/// Core temperature in °C at a load.
pub fn temp_c(util_pct: u8) -> u32 {
    30 + u32::from(util_pct) / 2
}

/// SM clock in MHz at a load.
pub fn sm_clock_mhz(util_pct: u8) -> u32 {
    if util_pct > 0 {
        1980
    } else {
        345
    }
}

/// One sample of GPU `index` at `at_ms` as NVML reports it (see the module
/// documentation for what is unknown where). `activity_seen`: whether a
/// MIG device had a GPM sample in the previous round (GPM measures between
/// two samples, so a device's first round has no activity).
pub fn sample(
    host: &HostState,
    index: u32,
    at_ms: i64,
    held: bool,
    workload: WorkloadProfile,
    activity_seen: &dyn Fn(&str) -> bool,
) -> Option<GpuSample> {
    let gpu = host.gpu(index)?;
    let report = host.reports().get(index as usize)?;
    let model = gpu.model();
    let whole = gpu_load(host, index, at_ms, held, workload)?;
    let mig_enabled = gpu.observed().mig_enabled;
    let mut instances = Vec::new();
    if let (true, Some(spec)) = (mig_enabled, model.mig) {
        for d in host.mig_devices(index) {
            let Some(p) = spec.profile(&d.profile) else {
                continue;
            };
            let l = load(workload, &d.uuid, p.memory_mib, at_ms);
            let known = instance_activity_known(model) && activity_seen(&d.uuid);
            instances.push(InstanceSample {
                uuid: d.uuid,
                util_pct: known.then_some(l.util_pct),
                mem_used_mib: l.mem_used_mib,
            });
        }
    }
    Some(GpuSample {
        uuid: report.uuid.clone(),
        util_pct: gpu_utilisation_known(mig_enabled).then_some(whole.util_pct),
        mem_used_mib: whole.mem_used_mib,
        power_mw: Some(power_mw(report.memory_mib, whole.util_pct)),
        temp_c: Some(temp_c(whole.util_pct)),
        sm_clock_mhz: Some(sm_clock_mhz(whole.util_pct)),
        instances,
        // The simulation runs no processes of its own to tell apart.
        clients: Vec::new(),
    })
}
