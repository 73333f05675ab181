//! Compute instances inside a GPU instance (nvml.h, "Multi Instance GPU
//! Management"): their profiles, listing, creation and destruction, through
//! the same simulated GPU as the GPU instances.

use super::*;

/// `nvmlGpuInstanceGetComputeInstanceProfileInfo`: the compute instance
/// sizes that fit the GPU instance (shared engines only).
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gi: nvmlGpuInstance_t,
    profile: c_uint,
    eng_profile: c_uint,
    info: *mut nvmlComputeInstanceProfileInfo_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, _, i) = gi_of(f, gi)?;
        if eng_profile != sys::NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
            return Err(NOT_SUPPORTED);
        }
        let spec = f.state.model(g).and_then(|m| m.mig).ok_or(NOT_SUPPORTED)?;
        let slices = spec
            .profile(&i.placement.profile)
            .ok_or(NOT_FOUND)?
            .compute_slices;
        let size = ci_size(profile)
            .filter(|s| *s <= slices)
            .ok_or(NOT_SUPPORTED)?;
        let answer = nvmlComputeInstanceProfileInfo_t {
            id: profile,
            sliceCount: c_uint::from(size),
            instanceCount: c_uint::from(slices / size),
            multiprocessorCount: 16 * c_uint::from(size),
            sharedCopyEngineCount: 0,
            sharedDecoderCount: 0,
            sharedEncoderCount: 0,
            sharedJpegCount: 0,
            sharedOfaCount: 0,
        };
        unsafe { put(info, answer) }
    })
}

/// `nvmlGpuInstanceGetComputeInstances`: those of one profile.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstances(
    gi: nvmlGpuInstance_t,
    profile_id: c_uint,
    handles: *mut nvmlComputeInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    with(|f| {
        let (g, id, i) = gi_of(f, gi)?;
        let size = ci_size(profile_id).ok_or(INVALID_ARGUMENT)?;
        let found: Vec<nvmlComputeInstance_t> = i
            .compute_instances
            .iter()
            .filter(|c| c.size == size)
            .map(|c| {
                Handle::ComputeInstance {
                    gpu: g,
                    gi: id,
                    ci: u32::from(c.start),
                }
                .compute_instance()
            })
            .collect();
        if handles.is_null() && !found.is_empty() {
            return Err(INVALID_ARGUMENT);
        }
        for (n, h) in found.iter().enumerate() {
            unsafe { handles.add(n).write(*h) };
        }
        unsafe { put(count, c_uint::try_from(found.len()).unwrap_or(0)) }
    })
}

/// A compute-instance handle's GPU, GPU instance ID, GPU instance and
/// compute instance.
fn ci_of(
    f: &Fake,
    ci: nvmlComputeInstance_t,
) -> Result<(u32, u32, ObservedInstance, ComputeInstance), Ret> {
    let (g, gi, id) = Handle::from_compute_instance(ci).ok_or(INVALID_ARGUMENT)?;
    let i = instance(f, g, gi)?;
    let c = i
        .compute_instances
        .iter()
        .find(|c| u32::from(c.start) == id)
        .copied()
        .ok_or(NOT_FOUND)?;
    Ok((g, gi, i, c))
}

/// `nvmlComputeInstanceGetInfo_v2`.
#[no_mangle]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo_v2(
    ci: nvmlComputeInstance_t,
    info: *mut nvmlComputeInstanceInfo_t,
) -> nvmlReturn_t {
    with(|f| {
        let (g, gi, _, c) = ci_of(f, ci)?;
        let answer = nvmlComputeInstanceInfo_t {
            device: Handle::Gpu(g).device(),
            gpuInstance: Handle::GpuInstance { gpu: g, gi }.gpu_instance(),
            id: u32::from(c.start),
            profileId: ci_constant(c.size).ok_or(NOT_FOUND)?,
            placement: nvmlComputeInstancePlacement_t {
                start: c_uint::from(c.start),
                size: c_uint::from(c.size),
            },
        };
        unsafe { put(info, answer) }
    })
}

fn ci_constant(size: u8) -> Option<c_uint> {
    (0..sys::NVML_COMPUTE_INSTANCE_PROFILE_COUNT).find(|c| ci_size(*c) == Some(size))
}

fn create_ci(
    f: &mut Fake,
    gi: nvmlGpuInstance_t,
    profile_id: c_uint,
    start: Option<u8>,
) -> Result<nvmlComputeInstance_t, Ret> {
    let (g, id, i) = gi_of(f, gi)?;
    let size = ci_size(profile_id).ok_or(INVALID_ARGUMENT)?;
    let spec = f.state.model(g).and_then(|m| m.mig).ok_or(NOT_SUPPORTED)?;
    let slices = spec
        .profile(&i.placement.profile)
        .ok_or(NOT_FOUND)?
        .compute_slices;
    // Without a placement the driver takes the first free one.
    let start = match start {
        Some(s) => s,
        None => (0..slices)
            .step_by(usize::from(size.max(1)))
            .find(|s| {
                i.compute_instances
                    .iter()
                    .all(|c| s + size <= c.start || c.start + c.size <= *s)
            })
            .ok_or(INSUFFICIENT_RESOURCES)?,
    };
    let ci = ComputeInstance { start, size };
    change(
        f,
        g,
        &Op::CreateComputeInstance {
            gi_start: i.placement.start,
            ci,
        },
    )?;
    Ok(Handle::ComputeInstance {
        gpu: g,
        gi: id,
        ci: u32::from(start),
    }
    .compute_instance())
}

/// `nvmlGpuInstanceCreateComputeInstanceWithPlacement`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    gi: nvmlGpuInstance_t,
    profile_id: c_uint,
    placement: *const nvmlComputeInstancePlacement_t,
    ci: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    with(|f| {
        if placement.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: not null; valid for the call.
        let placement = unsafe { *placement };
        if ci_size(profile_id).map(c_uint::from) != Some(placement.size) {
            return Err(INVALID_ARGUMENT);
        }
        let start = u8::try_from(placement.start).map_err(|_| INVALID_ARGUMENT)?;
        let handle = create_ci(f, gi, profile_id, Some(start))?;
        unsafe { put(ci, handle) }
    })
}

/// `nvmlGpuInstanceCreateComputeInstance`: the first free placement.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstance(
    gi: nvmlGpuInstance_t,
    profile_id: c_uint,
    ci: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    with(|f| {
        let handle = create_ci(f, gi, profile_id, None)?;
        unsafe { put(ci, handle) }
    })
}

/// `nvmlComputeInstanceDestroy`: `NVML_ERROR_IN_USE` while processes run
/// in it.
#[no_mangle]
pub unsafe extern "C" fn nvmlComputeInstanceDestroy(ci: nvmlComputeInstance_t) -> nvmlReturn_t {
    with(|f| {
        let (g, _, i, c) = ci_of(f, ci)?;
        change(
            f,
            g,
            &Op::DestroyComputeInstance {
                gi_start: i.placement.start,
                ci: c,
            },
        )
    })
}
