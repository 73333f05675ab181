//! Device queries: identity, memory, utilisation, power, health, processes,
//! for a GPU handle and (where NVML allows) a MIG device handle.

use crate::api::ret::*;
use crate::api::{put, put_str, with};
use crate::handles::Handle;
use crate::state::{Fake, Process};
use nvml_wrapper_sys::bindings::{
    self as sys, nvmlClockType_t, nvmlDevice_t, nvmlEccCounterType_t, nvmlEnableState_t,
    nvmlMemoryErrorType_t, nvmlMemory_v2_t, nvmlPciInfo_t, nvmlProcessInfo_t,
    nvmlProcessUtilizationSample_t, nvmlReturn_t, nvmlTemperatureSensors_t, nvmlUtilization_t,
};
use std::os::raw::{c_char, c_uint, c_ulonglong};
use tessera_core::catalogue::MigProfile;
use tessera_core::health::ThrottleReason;
use tessera_protocol::agent::MigDevice;
use tessera_sim_host::telemetry::{self, Load};

const MIB: u64 = 1024 * 1024;

/// GPU instance IDs as this driver gives them: one more than the start
/// memory slice (IDs are the driver's to choose; `nvidia-smi mig -lgi`
/// shows small integers).
pub fn gi_id(start: u8) -> u32 {
    u32::from(start) + 1
}

/// The start slice of GPU instance `gi`.
pub fn gi_start(gi: u32) -> Option<u8> {
    gi.checked_sub(1).and_then(|s| u8::try_from(s).ok())
}

/// What a device handle resolves to.
pub enum Dev {
    /// A physical GPU.
    Gpu(u32),
    /// A MIG device on GPU `gpu`, with its profile.
    Mig {
        gpu: u32,
        device: MigDevice,
        profile: &'static MigProfile,
    },
}

impl Dev {
    fn gpu(&self) -> u32 {
        match self {
            Self::Gpu(g) | Self::Mig { gpu: g, .. } => *g,
        }
    }
}

/// Resolves a device handle: `NVML_ERROR_INVALID_ARGUMENT` for a handle
/// this library did not hand out, `NVML_ERROR_GPU_IS_LOST` once the GPU
/// fell off the bus, `NVML_ERROR_NOT_FOUND` for a MIG device since
/// destroyed.
pub fn resolve(f: &Fake, h: nvmlDevice_t) -> Result<Dev, Ret> {
    let handle = Handle::from_device(h).ok_or(INVALID_ARGUMENT)?;
    let gpu = match handle {
        Handle::Gpu(g) | Handle::MigDevice { gpu: g, .. } => g,
        _ => return Err(INVALID_ARGUMENT),
    };
    if gpu >= f.count() {
        return Err(INVALID_ARGUMENT);
    }
    if f.health(gpu).lost {
        return Err(GPU_IS_LOST);
    }
    match handle {
        Handle::MigDevice { gi, .. } => {
            let start = gi_start(gi).ok_or(INVALID_ARGUMENT)?;
            let device = f
                .state
                .mig_devices(gpu)
                .into_iter()
                .find(|d| d.gi_start == start)
                .ok_or(NOT_FOUND)?;
            let profile = f
                .state
                .model(gpu)
                .and_then(|m| m.mig)
                .and_then(|spec| spec.profile(&device.profile))
                .ok_or(NOT_FOUND)?;
            Ok(Dev::Mig {
                gpu,
                device,
                profile,
            })
        }
        _ => Ok(Dev::Gpu(gpu)),
    }
}

fn mig_on(f: &Fake, gpu: u32) -> bool {
    f.state.gpu(gpu).is_some_and(|g| g.observed().mig_enabled)
}

/// The GPU's load: its instances' with MIG on, else busy while a process
/// runs on it.
fn gpu_load(f: &Fake, gpu: u32) -> Result<Load, Ret> {
    let held = !f.processes(gpu).is_empty();
    telemetry::gpu_load(&f.state, gpu, f.now_ms(), held, f.host.workload).ok_or(INVALID_ARGUMENT)
}

/// `nvmlDeviceGetUUID`: `GPU-...` or, for a MIG device, `MIG-...`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let s = match resolve(f, device)? {
            Dev::Gpu(g) => f.state.reports()[g as usize].uuid.clone(),
            Dev::Mig { device, .. } => device.uuid,
        };
        unsafe { put_str(uuid, length, &s) }
    })
}

/// `nvmlDeviceGetName`: the product name; a MIG device's adds `MIG` and
/// its profile, as the driver prints it.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let dev = resolve(f, device)?;
        let product = &f.state.reports()[dev.gpu() as usize].name;
        let s = match dev {
            Dev::Gpu(_) => product.clone(),
            Dev::Mig { profile, .. } => format!("{product} MIG {}", profile.name),
        };
        unsafe { put_str(name, length, &s) }
    })
}

/// `nvmlDeviceGetMemoryInfo_v2`: bytes; a MIG device has its profile's
/// memory.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    with(|f| {
        let (total_mib, used_mib) = match resolve(f, device)? {
            Dev::Gpu(g) => (
                f.state.reports()[g as usize].memory_mib,
                gpu_load(f, g)?.mem_used_mib,
            ),
            Dev::Mig {
                device, profile, ..
            } => {
                let load = telemetry::load(
                    f.host.workload,
                    &device.uuid,
                    profile.memory_mib,
                    f.now_ms(),
                );
                (profile.memory_mib, load.mem_used_mib)
            }
        };
        if memory.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let used = used_mib.min(total_mib) * MIB;
        let total = total_mib * MIB;
        // SAFETY: not null; nvml.h's contract makes it valid for the call.
        unsafe {
            (*memory).total = total;
            (*memory).reserved = 0;
            (*memory).used = used;
            (*memory).free = total - used;
        }
        Ok(())
    })
}

/// `nvmlDeviceGetUtilizationRates`: "On MIG-enabled GPUs, querying device
/// utilization rates is not currently supported" (nvml.h), so a GPU with
/// MIG on, and a MIG device, answer `NVML_ERROR_NOT_SUPPORTED`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: nvmlDevice_t,
    utilization: *mut nvmlUtilization_t,
) -> nvmlReturn_t {
    with(|f| match resolve(f, device)? {
        Dev::Gpu(g) if !mig_on(f, g) => {
            let load = gpu_load(f, g)?;
            let total = f.state.reports()[g as usize].memory_mib.max(1);
            let rates = nvmlUtilization_t {
                gpu: c_uint::from(load.util_pct),
                memory: u32::try_from(load.mem_used_mib * 100 / total).unwrap_or(100),
            };
            unsafe { put(utilization, rates) }
        }
        _ => Err(NOT_SUPPORTED),
    })
}

/// A figure of the physical GPU only: a MIG device answers
/// `NVML_ERROR_NOT_SUPPORTED` (power, temperature and clocks are the
/// board's).
fn board<T>(device: nvmlDevice_t, out: *mut T, f: impl Fn(&Fake, u32, Load) -> T) -> nvmlReturn_t {
    with(|fake| match resolve(fake, device)? {
        Dev::Gpu(g) => {
            let load = gpu_load(fake, g)?;
            unsafe { put(out, f(fake, g, load)) }
        }
        Dev::Mig { .. } => Err(NOT_SUPPORTED),
    })
}

/// `nvmlDeviceGetPowerUsage`: milliwatts.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: nvmlDevice_t,
    power: *mut c_uint,
) -> nvmlReturn_t {
    board(device, power, |f, g, load| {
        telemetry::power_mw(f.state.reports()[g as usize].memory_mib, load.util_pct)
    })
}

/// `nvmlDeviceGetTemperature` (`NVML_TEMPERATURE_GPU` only).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: nvmlTemperatureSensors_t,
    temp: *mut c_uint,
) -> nvmlReturn_t {
    if sensor != sys::nvmlTemperatureSensors_enum_NVML_TEMPERATURE_GPU {
        return INVALID_ARGUMENT;
    }
    board(device, temp, |_, _, load| telemetry::temp_c(load.util_pct))
}

/// `nvmlDeviceGetClockInfo` (`NVML_CLOCK_SM` only).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    clock_type: nvmlClockType_t,
    clock: *mut c_uint,
) -> nvmlReturn_t {
    if clock_type != sys::nvmlClockType_enum_NVML_CLOCK_SM {
        return NOT_SUPPORTED;
    }
    board(device, clock, |_, _, load| {
        telemetry::sm_clock_mhz(load.util_pct)
    })
}

fn pci_of(gpu: u32) -> nvmlPciInfo_t {
    let bus = 0x10 + gpu;
    let mut info = nvmlPciInfo_t {
        busIdLegacy: [0; 16],
        domain: 0,
        bus,
        device: 0,
        pciDeviceId: 0x2330_10de,
        pciSubSystemId: 0,
        busId: [0; 32],
    };
    let id = format!("00000000:{bus:02X}:00.0");
    for (dst, src) in info.busId.iter_mut().zip(id.bytes()) {
        *dst = src as c_char;
    }
    for (dst, src) in info.busIdLegacy.iter_mut().zip(id.bytes().skip(4)) {
        *dst = src as c_char;
    }
    info
}

/// `nvmlDeviceGetPciInfo_v3`: a bus ID per GPU index.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with(|f| match resolve(f, device)? {
        Dev::Gpu(g) => unsafe { put(pci, pci_of(g)) },
        Dev::Mig { .. } => Err(NOT_SUPPORTED),
    })
}

/// The NVLink peer behind link `link` of GPU `gpu` (one link per peer);
/// `NVML_ERROR_NOT_SUPPORTED` on a GPU without NVLink.
fn link_peer(f: &Fake, device: nvmlDevice_t, link: c_uint) -> Result<Option<u32>, Ret> {
    let Dev::Gpu(g) = resolve(f, device)? else {
        return Err(NOT_SUPPORTED);
    };
    let peers = &f.state.reports()[g as usize].nvlink_peers;
    if peers.is_empty() {
        return Err(NOT_SUPPORTED);
    }
    if link >= sys::NVML_NVLINK_MAX_LINKS {
        return Err(INVALID_ARGUMENT);
    }
    Ok(peers.get(link as usize).copied())
}

/// `nvmlDeviceGetNvLinkState`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    is_active: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with(|f| {
        let state = match link_peer(f, device, link)? {
            Some(_) => sys::nvmlEnableState_enum_NVML_FEATURE_ENABLED,
            None => sys::nvmlEnableState_enum_NVML_FEATURE_DISABLED,
        };
        unsafe { put(is_active, state) }
    })
}

/// `nvmlDeviceGetNvLinkRemotePciInfo_v2`: the peer's PCI address.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: nvmlDevice_t,
    link: c_uint,
    pci: *mut nvmlPciInfo_t,
) -> nvmlReturn_t {
    with(|f| match link_peer(f, device, link)? {
        Some(peer) => unsafe { put(pci, pci_of(peer)) },
        None => Err(NOT_SUPPORTED),
    })
}

/// `nvmlDeviceGetTotalEccErrors`: the volatile counters of the health file.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: nvmlDevice_t,
    error_type: nvmlMemoryErrorType_t,
    _counter: nvmlEccCounterType_t,
    counts: *mut c_ulonglong,
) -> nvmlReturn_t {
    with(|f| {
        let h = f.health(resolve(f, device)?.gpu());
        let n = if error_type == sys::nvmlMemoryErrorType_enum_NVML_MEMORY_ERROR_TYPE_UNCORRECTED {
            h.ecc_uncorrected
        } else {
            h.ecc_corrected
        };
        unsafe { put(counts, n) }
    })
}

/// `nvmlDeviceGetRetiredPagesPendingStatus`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: nvmlDevice_t,
    pending: *mut nvmlEnableState_t,
) -> nvmlReturn_t {
    with(|f| {
        let state = if f.health(resolve(f, device)?.gpu()).retired_pages_pending {
            sys::nvmlEnableState_enum_NVML_FEATURE_ENABLED
        } else {
            sys::nvmlEnableState_enum_NVML_FEATURE_DISABLED
        };
        unsafe { put(pending, state) }
    })
}

/// `nvmlDeviceGetRemappedRows`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failed: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let h = f.health(resolve(f, device)?.gpu());
        unsafe {
            put(corr, 0)?;
            put(unc, 0)?;
            put(pending, c_uint::from(h.remapped_rows_pending))?;
            put(failed, c_uint::from(h.remap_failure))
        }
    })
}

/// `nvmlDeviceGetCurrentClocksThrottleReasons`: the health file's reasons
/// as nvml.h's bits.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: nvmlDevice_t,
    reasons: *mut c_ulonglong,
) -> nvmlReturn_t {
    with(|f| {
        let bits = f
            .health(resolve(f, device)?.gpu())
            .throttle
            .iter()
            .map(|r| match r {
                ThrottleReason::HwSlowdown => sys::nvmlClocksThrottleReasonHwSlowdown,
                ThrottleReason::HwThermalSlowdown => sys::nvmlClocksThrottleReasonHwThermalSlowdown,
                ThrottleReason::HwPowerBrakeSlowdown => {
                    sys::nvmlClocksThrottleReasonHwPowerBrakeSlowdown
                }
                ThrottleReason::SwThermalSlowdown => sys::nvmlClocksThrottleReasonSwThermalSlowdown,
            })
            .fold(0u64, |acc, b| acc | u64::from(b));
        unsafe { put(reasons, bits) }
    })
}

/// The processes a device handle lists: a GPU lists all of its own (with
/// their GPU instance where MIG is on), a MIG device those in its GPU
/// instance. `mps`: MPS clients (Volta and newer list them apart).
fn listed(f: &Fake, device: nvmlDevice_t, mps: bool) -> Result<Vec<nvmlProcessInfo_t>, Ret> {
    let dev = resolve(f, device)?;
    let gpu = dev.gpu();
    let mig = mig_on(f, gpu);
    let only_gi = match &dev {
        Dev::Mig { device, .. } => Some(device.gi_start),
        Dev::Gpu(_) => None,
    };
    let not_available = u32::MAX; // NVML_VALUE_NOT_AVAILABLE as an unsigned int
    Ok(f.processes(gpu)
        .into_iter()
        .filter(|p: &Process| p.mps == mps)
        .filter(|p| only_gi.is_none() || p.gi_start == only_gi)
        .map(|p| nvmlProcessInfo_t {
            pid: p.pid,
            usedGpuMemory: p.used_mib * MIB,
            gpuInstanceId: match (mig, p.gi_start) {
                (true, Some(start)) => gi_id(start),
                _ => not_available,
            },
            computeInstanceId: if mig && p.gi_start.is_some() {
                0
            } else {
                not_available
            },
        })
        .collect())
}

/// Writes a process list as nvml.h says: with too small a buffer (or a
/// null one), `NVML_ERROR_INSUFFICIENT_SIZE` and the count needed; with
/// none to list, success and 0.
unsafe fn put_processes(
    list: Vec<nvmlProcessInfo_t>,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> Result<(), Ret> {
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: not null; valid for the call.
    let room = unsafe { *count } as usize;
    let n = c_uint::try_from(list.len()).unwrap_or(c_uint::MAX);
    unsafe { count.write(n) };
    if list.is_empty() {
        return Ok(());
    }
    if infos.is_null() || room < list.len() {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: `infos` holds `room >= list.len()` entries.
    unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), infos, list.len()) };
    Ok(())
}

/// `nvmlDeviceGetComputeRunningProcesses_v3`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with(|f| unsafe { put_processes(listed(f, device, false)?, count, infos) })
}

/// `nvmlDeviceGetMPSComputeRunningProcesses_v3`: MPS clients.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    with(|f| unsafe { put_processes(listed(f, device, true)?, count, infos) })
}

/// `nvmlDeviceGetProcessUtilization`: one sample per process on the GPU,
/// stamped now (µs), those after `lastSeenTimeStamp`. As nvml.h says:
/// called with `utilization` NULL it gives the count needed
/// (`NVML_ERROR_INSUFFICIENT_SIZE`); `NVML_ERROR_NOT_FOUND` when there is no
/// sample; not supported on a GPU with MIG on, or a MIG device.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut nvmlProcessUtilizationSample_t,
    count: *mut c_uint,
    last_seen: c_ulonglong,
) -> nvmlReturn_t {
    with(|f| {
        let Dev::Gpu(gpu) = resolve(f, device)? else {
            return Err(NOT_SUPPORTED);
        };
        if mig_on(f, gpu) {
            return Err(NOT_SUPPORTED);
        }
        if count.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        let now_us = u64::try_from(f.now_ms()).unwrap_or(0) * 1000;
        let processes = f.processes(gpu);
        let load = gpu_load(f, gpu)?;
        let even = u32::from(load.util_pct) / u32::try_from(processes.len().max(1)).unwrap_or(1);
        let samples: Vec<nvmlProcessUtilizationSample_t> = processes
            .iter()
            .filter(|_| now_us > last_seen)
            .map(|p| nvmlProcessUtilizationSample_t {
                pid: p.pid,
                timeStamp: now_us,
                smUtil: p.sm_util.map_or(even, u32::from),
                memUtil: 0,
                encUtil: 0,
                decUtil: 0,
            })
            .collect();
        if samples.is_empty() {
            // SAFETY: not null.
            unsafe { count.write(0) };
            return Err(NOT_FOUND);
        }
        // SAFETY: not null; valid for the call.
        let room = unsafe { *count } as usize;
        unsafe { count.write(c_uint::try_from(samples.len()).unwrap_or(c_uint::MAX)) };
        if utilization.is_null() || room < samples.len() {
            return Err(INSUFFICIENT_SIZE);
        }
        // SAFETY: `utilization` holds `room >= samples.len()` entries.
        unsafe { std::ptr::copy_nonoverlapping(samples.as_ptr(), utilization, samples.len()) };
        Ok(())
    })
}
