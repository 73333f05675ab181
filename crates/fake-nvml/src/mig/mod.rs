//! MIG as the driver manages it (nvml.h, "Multi Instance GPU Management"):
//! the mode, GPU and compute instance profiles, instances and MIG device
//! handles. Changes go through the simulated host's `SimGpu`, which
//! refuses what the driver refuses; refusals come back as the return codes
//! nvml.h documents for each call.

mod compute;

use crate::api::ret::*;
use crate::api::{put, with};
use crate::device::{gi_id, gi_start, resolve, Dev};
use crate::handles::Handle;
use crate::state::Fake;
use nvml_wrapper_sys::bindings::{
    self as sys, nvmlComputeInstanceInfo_t, nvmlComputeInstancePlacement_t,
    nvmlComputeInstanceProfileInfo_t, nvmlComputeInstance_t, nvmlDevice_t, nvmlGpuInstanceInfo_t,
    nvmlGpuInstancePlacement_t, nvmlGpuInstanceProfileInfo_t, nvmlGpuInstance_t, nvmlReturn_t,
};
use std::os::raw::c_uint;
use tessera_core::catalogue::{MigProfile, MigSpec};
use tessera_core::mig::LayoutError;
use tessera_core::plan::{ComputeInstance, ObservedInstance, Op, SimError};
use tessera_sim_host::HostError;

/// The driver's answer to a refused change.
fn code(e: HostError) -> Ret {
    match e {
        HostError::NoSuchGpu(_) => INVALID_ARGUMENT,
        HostError::Refused(e) => match e {
            SimError::NotMigCapable { .. } | SimError::MigDisabled => NOT_SUPPORTED,
            // "NVML_ERROR_IN_USE If the GPU instance is in use. This error
            // would be returned if processes (e.g. CUDA application) or
            // compute instances are active on the GPU instance."
            SimError::InstancesPresent
            | SimError::ProcessesRunning { .. }
            | SimError::MpsWithMig
            | SimError::ComputeInstancesPresent { .. } => IN_USE,
            SimError::NoSuchInstance { .. } | SimError::NoSuchComputeInstance { .. } => NOT_FOUND,
            // A placement that does not exist for the profile.
            SimError::Layout(LayoutError::StartNotAllowed { .. })
            | SimError::Layout(LayoutError::UnknownProfile { .. }) => INVALID_ARGUMENT,
            // Taken slices, or no instance of the profile left.
            SimError::Layout(_) | SimError::ComputeInstance(_) => INSUFFICIENT_RESOURCES,
            SimError::InvalidMps | SimError::ReplicasOutOfRange | SimError::NoMpsDaemon => {
                INVALID_ARGUMENT
            }
        },
    }
}

/// The GPU instance profile an NVML profile constant names on a model
/// (the driver's own table: `NVML_GPU_INSTANCE_PROFILE_*` by compute
/// slices, memory slices and media extensions).
fn gi_profile(spec: &'static MigSpec, constant: u32) -> Option<&'static MigProfile> {
    let shape = |c: u8, m: Option<u8>, me: bool| {
        spec.profiles.iter().find(|p| {
            p.compute_slices == c
                && m.is_none_or(|m| p.memory_slices == m)
                && p.media_extensions == me
        })
    };
    match constant {
        sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE => shape(1, Some(1), false),
        sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 => shape(1, Some(1), true),
        sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 => shape(1, Some(2), false),
        sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE => shape(2, None, false),
        sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 => shape(2, None, true),
        sys::NVML_GPU_INSTANCE_PROFILE_3_SLICE => shape(3, None, false),
        sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE => shape(4, None, false),
        sys::NVML_GPU_INSTANCE_PROFILE_6_SLICE => shape(6, None, false),
        sys::NVML_GPU_INSTANCE_PROFILE_7_SLICE => shape(7, None, false),
        sys::NVML_GPU_INSTANCE_PROFILE_8_SLICE => shape(8, None, false),
        _ => None,
    }
}

/// Compute instance profiles: the constant's slice count.
fn ci_size(constant: u32) -> Option<u8> {
    Some(match constant {
        sys::NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE => 1,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE => 2,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE => 3,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE => 4,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE => 6,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE => 7,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE => 8,
        _ => return None,
    })
}

/// A physical GPU's index and MIG geometry: `NVML_ERROR_NOT_SUPPORTED`
/// for a MIG device handle or a GPU without MIG.
fn mig_gpu(f: &Fake, device: nvmlDevice_t) -> Result<(u32, &'static MigSpec), Ret> {
    match resolve(f, device)? {
        Dev::Gpu(g) => {
            let spec = f.state.model(g).and_then(|m| m.mig).ok_or(NOT_SUPPORTED)?;
            Ok((g, spec))
        }
        Dev::Mig { .. } => Err(NOT_SUPPORTED),
    }
}

fn mig_enabled(f: &Fake, gpu: u32) -> bool {
    f.state.gpu(gpu).is_some_and(|g| g.observed().mig_enabled)
}

/// GPU instance `gi` of GPU `gpu`, which must exist (`NVML_ERROR_NOT_FOUND`).
fn instance(f: &Fake, gpu: u32, gi: u32) -> Result<ObservedInstance, Ret> {
    let start = gi_start(gi).ok_or(NOT_FOUND)?;
    f.state
        .gpu(gpu)
        .and_then(|g| {
            g.observed()
                .instances
                .iter()
                .find(|i| i.placement.start == start)
                .cloned()
        })
        .ok_or(NOT_FOUND)
}

/// Marks the GPU's instances busy where live processes run in them (and
/// the GPU where one runs outside any), so the model refuses what the
/// driver refuses with them running.
fn sync_busy(f: &mut Fake, gpu: u32) -> Result<(), Ret> {
    let processes = f.processes(gpu);
    let Some(mut observed) = f.state.gpu(gpu).map(|g| g.observed().clone()) else {
        return Err(INVALID_ARGUMENT);
    };
    for i in &mut observed.instances {
        i.in_use = processes
            .iter()
            .any(|p| p.gi_start == Some(i.placement.start));
    }
    observed.processes_running =
        !observed.mig_enabled && processes.iter().any(|p| p.gi_start.is_none());
    f.state.set_observed(gpu, observed).map_err(code)
}

/// Applies a change to GPU `gpu` with its processes accounted for, and
/// keeps the new state.
fn change(f: &mut Fake, gpu: u32, op: &Op) -> Result<(), Ret> {
    sync_busy(f, gpu)?;
    f.state.apply(gpu, op).map_err(code)?;
    f.save();
    Ok(())
}

/// `nvmlDeviceGetMigMode`: the current and the pending mode;
/// `NVML_ERROR_NOT_SUPPORTED` on a GPU without MIG.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let (g, _) = mig_gpu(f, device)?;
        let now = mig_enabled(f, g);
        let next = f.pending_mig[g as usize].unwrap_or(now);
        unsafe {
            put(current, c_uint::from(now))?;
            put(pending, c_uint::from(next))
        }
    })
}

/// `nvmlDeviceSetMigMode`: "activation_status would return the appropriate
/// error code upon unsuccessful activation. For example, if device unbind
/// fails because the device isn't idle, NVML_ERROR_IN_USE would be
/// returned" (nvml.h): the mode then stays pending.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceSetMigMode(
    device: nvmlDevice_t,
    mode: c_uint,
    activation: *mut nvmlReturn_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, _) = mig_gpu(f, device)?;
        let on = match mode {
            sys::NVML_DEVICE_MIG_ENABLE => true,
            sys::NVML_DEVICE_MIG_DISABLE => false,
            _ => return Err(INVALID_ARGUMENT),
        };
        let op = if on { Op::EnableMig } else { Op::DisableMig };
        let status = match change(f, g, &op) {
            Ok(()) => {
                f.pending_mig[g as usize] = None;
                SUCCESS
            }
            Err(e) => {
                f.pending_mig[g as usize] = Some(on);
                e
            }
        };
        unsafe { put(activation, status) }
    })
}

/// `nvmlDeviceGetMaxMigDeviceCount`: a MIG device per compute slice at most.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: nvmlDevice_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let (_, spec) = mig_gpu(f, device)?;
        unsafe { put(count, c_uint::from(spec.compute_slices)) }
    })
}

/// `nvmlDeviceIsMigDeviceHandle`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let mig = matches!(resolve(f, device)?, Dev::Mig { .. });
        unsafe { put(is_mig, c_uint::from(mig)) }
    })
}

/// `nvmlDeviceGetMigDeviceHandleByIndex`: "NVML_ERROR_NOT_FOUND If no
/// valid MIG device was found at index" (nvml.h).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, spec) = mig_gpu(f, device)?;
        if index >= c_uint::from(spec.compute_slices) {
            return Err(INVALID_ARGUMENT);
        }
        let d = f
            .state
            .mig_devices(g)
            .into_iter()
            .nth(index as usize)
            .ok_or(NOT_FOUND)?;
        let handle = Handle::MigDevice {
            gpu: g,
            gi: gi_id(d.gi_start),
        };
        unsafe { put(mig, handle.device()) }
    })
}

/// `nvmlDeviceGetGpuInstanceId`: "NVML_ERROR_NOT_SUPPORTED If device is
/// not a MIG device handle".
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| match resolve(f, device)? {
        Dev::Mig { device, .. } => unsafe { put(id, gi_id(device.gi_start)) },
        Dev::Gpu(_) => Err(NOT_SUPPORTED),
    })
}

/// `nvmlDeviceGetGpuInstanceProfileInfo`: `NVML_ERROR_NOT_SUPPORTED` for a
/// profile the GPU does not have.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_t,
) -> nvmlReturn_t {
    with(|f| {
        let (_, spec) = mig_gpu(f, device)?;
        let p = gi_profile(spec, profile).ok_or(NOT_SUPPORTED)?;
        let answer = nvmlGpuInstanceProfileInfo_t {
            id: c_uint::from(p.smi_id),
            isP2pSupported: 0,
            sliceCount: c_uint::from(p.compute_slices),
            instanceCount: c_uint::from(p.max_count),
            multiprocessorCount: 16 * c_uint::from(p.compute_slices),
            copyEngineCount: c_uint::from(p.memory_slices),
            decoderCount: 0,
            encoderCount: 0,
            jpegCount: c_uint::from(p.media_extensions),
            ofaCount: c_uint::from(p.media_extensions),
            memorySizeMB: p.memory_mib,
        };
        unsafe { put(info, answer) }
    })
}

fn profile_by_id(spec: &'static MigSpec, id: c_uint) -> Option<&'static MigProfile> {
    spec.profiles.iter().find(|p| c_uint::from(p.smi_id) == id)
}

/// `nvmlDeviceGetGpuInstances`: the instances of one profile;
/// "NVML_ERROR_NOT_SUPPORTED If device doesn't have MIG mode enabled".
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstances(
    device: nvmlDevice_t,
    profile_id: c_uint,
    handles: *mut nvmlGpuInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let (g, spec) = mig_gpu(f, device)?;
        if !mig_enabled(f, g) {
            return Err(NOT_SUPPORTED);
        }
        let p = profile_by_id(spec, profile_id).ok_or(INVALID_ARGUMENT)?;
        let found: Vec<nvmlGpuInstance_t> = f
            .state
            .gpu(g)
            .map(|gpu| {
                gpu.observed()
                    .instances
                    .iter()
                    .filter(|i| {
                        spec.profile(&i.placement.profile).map(|q| q.smi_id) == Some(p.smi_id)
                    })
                    .map(|i| {
                        Handle::GpuInstance {
                            gpu: g,
                            gi: gi_id(i.placement.start),
                        }
                        .gpu_instance()
                    })
                    .collect()
            })
            .unwrap_or_default();
        if handles.is_null() && !found.is_empty() {
            return Err(INVALID_ARGUMENT);
        }
        // The caller's buffer holds the profile's instance count (nvml.h).
        for (i, h) in found.iter().enumerate() {
            unsafe { handles.add(i).write(*h) };
        }
        unsafe { put(count, c_uint::try_from(found.len()).unwrap_or(0)) }
    })
}

/// `nvmlDeviceGetGpuInstanceById`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gi: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, _) = mig_gpu(f, device)?;
        if !mig_enabled(f, g) {
            return Err(NOT_SUPPORTED);
        }
        instance(f, g, id)?;
        unsafe { put(gi, Handle::GpuInstance { gpu: g, gi: id }.gpu_instance()) }
    })
}

/// A GPU-instance handle's GPU, ID and instance.
fn gi_of(f: &Fake, gi: nvmlGpuInstance_t) -> Result<(u32, u32, ObservedInstance), Ret> {
    let (g, id) = Handle::from_gpu_instance(gi).ok_or(INVALID_ARGUMENT)?;
    Ok((g, id, instance(f, g, id)?))
}

/// `nvmlGpuInstanceGetInfo`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gi: nvmlGpuInstance_t,
    info: *mut nvmlGpuInstanceInfo_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, id, i) = gi_of(f, gi)?;
        let spec = f.state.model(g).and_then(|m| m.mig).ok_or(NOT_SUPPORTED)?;
        let p = spec.profile(&i.placement.profile).ok_or(NOT_FOUND)?;
        let answer = nvmlGpuInstanceInfo_t {
            device: Handle::Gpu(g).device(),
            id,
            profileId: c_uint::from(p.smi_id),
            placement: nvmlGpuInstancePlacement_t {
                start: c_uint::from(i.placement.start),
                size: c_uint::from(p.memory_slices),
            },
        };
        unsafe { put(info, answer) }
    })
}

/// `nvmlDeviceCreateGpuInstanceWithPlacement`: `NVML_ERROR_INVALID_ARGUMENT`
/// for a placement the profile does not have, `NVML_ERROR_INSUFFICIENT_RESOURCES`
/// when its slices are taken (nvml.h).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstanceWithPlacement(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: *const nvmlGpuInstancePlacement_t,
    gi: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, spec) = mig_gpu(f, device)?;
        if !mig_enabled(f, g) {
            return Err(NOT_SUPPORTED);
        }
        let p = profile_by_id(spec, profile_id).ok_or(INVALID_ARGUMENT)?;
        if placement.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: not null; valid for the call.
        let placement = unsafe { *placement };
        if placement.size != c_uint::from(p.memory_slices) {
            return Err(INVALID_ARGUMENT);
        }
        let start = u8::try_from(placement.start).map_err(|_| INVALID_ARGUMENT)?;
        change(
            f,
            g,
            &Op::CreateGpuInstance {
                profile: p.name.to_owned(),
                start,
            },
        )?;
        unsafe {
            put(
                gi,
                Handle::GpuInstance {
                    gpu: g,
                    gi: gi_id(start),
                }
                .gpu_instance(),
            )
        }
    })
}

/// `nvmlGpuInstanceDestroy`: `NVML_ERROR_IN_USE` while compute instances
/// or processes are in it (nvml.h).
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceDestroy(gi: nvmlGpuInstance_t) -> nvmlReturn_t {
    with(|f| {
        let (g, _, i) = gi_of(f, gi)?;
        change(
            f,
            g,
            &Op::DestroyGpuInstance {
                start: i.placement.start,
            },
        )
    })
}
