//! The agent's only `unsafe` code: the MIG and GPM calls that `nvml-wrapper`
//! has no safe wrapper for, made through its raw function table (`Nvml::lib()`,
//! the bindings of `nvml-wrapper-sys`). Every handle stays inside this module;
//! callers name GPU and compute instances by the driver's IDs.
//!
//! Each call looks its symbol up in the loaded library first, so an old
//! driver without a function yields an error, never a panic.
#![allow(unsafe_code)]

use super::gpm::GpmDriver;
use super::mig::{Busy, CiInfo, GiInfo, MigDeviceInfo, MigDriver};
use super::mps::is_mps_server;
use super::profiles::{all_ci_profile_constants, all_gi_profile_constants};
use crate::backend::BackendError;
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::{
    self as sys, nvmlComputeInstanceInfo_t, nvmlComputeInstanceProfileInfo_t,
    nvmlComputeInstance_t, nvmlDevice_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t,
    nvmlGpuInstanceInfo_t, nvmlGpuInstanceProfileInfo_t, nvmlGpuInstance_t, nvmlReturn_t, NvmlLib,
};
use std::collections::BTreeSet;
use std::os::raw::c_uint;
use std::ptr;

/// One GPU's MIG calls through NVML.
pub struct NvmlGpu<'nvml> {
    device: Device<'nvml>,
}

fn nvml_err(call: &'static str) -> impl FnOnce(NvmlError) -> BackendError {
    move |e| BackendError::Nvml {
        call,
        detail: e.to_string(),
    }
}

/// "This GPU or driver does not have it", as opposed to a failure.
fn absent(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::InvalidArg | NvmlError::NotFound
    )
}

impl<'nvml> NvmlGpu<'nvml> {
    /// Wraps a (physical) device.
    pub fn new(device: Device<'nvml>) -> Self {
        Self { device }
    }

    fn lib(&self) -> &'nvml NvmlLib {
        self.device.nvml().lib()
    }

    fn handle(&self) -> nvmlDevice_t {
        // SAFETY: `handle` is only marked unsafe to discourage misuse; the
        // handle stays valid while `self.device` (and the `Nvml` it borrows)
        // lives, and it is only passed to NVML calls made while `self` lives.
        unsafe { self.device.handle() }
    }

    /// `nvmlDeviceGetRemappedRows`: (rows waiting to be remapped, a
    /// remapping failed), or `None` where the GPU has no row remapping
    /// (before Ampere).
    pub fn remapped_rows(&self) -> Result<Option<(bool, bool)>, BackendError> {
        const CALL: &str = "nvmlDeviceGetRemappedRows";
        let sym =
            nvml_sym(self.lib().nvmlDeviceGetRemappedRows.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: NVML writes one unsigned int through each pointer, all
        // valid for the duration of the call; the device handle is valid.
        let result = unsafe {
            let (mut corr, mut unc, mut pending, mut failed): (c_uint, c_uint, c_uint, c_uint) =
                (0, 0, 0, 0);
            nvml_try(sym(
                self.handle(),
                &mut corr,
                &mut unc,
                &mut pending,
                &mut failed,
            ))
            .map(|()| (pending != 0, failed != 0))
        };
        match result {
            Ok(r) => Ok(Some(r)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(nvml_err(CALL)(e)),
        }
    }

    fn gi_profile_info(
        &self,
        constant: u32,
    ) -> Result<Option<nvmlGpuInstanceProfileInfo_t>, BackendError> {
        const CALL: &str = "nvmlDeviceGetGpuInstanceProfileInfo";
        let sym = nvml_sym(self.lib().nvmlDeviceGetGpuInstanceProfileInfo.as_ref())
            .map_err(nvml_err(CALL))?;
        // SAFETY: the info struct is plain integers, for which all-zero bytes
        // are valid; NVML writes one struct through the pointer, which is
        // valid for the duration of the call; the device handle is valid.
        let result = unsafe {
            let mut info: nvmlGpuInstanceProfileInfo_t = std::mem::zeroed();
            nvml_try(sym(self.handle(), constant, &mut info)).map(|()| info)
        };
        match result {
            Ok(info) => Ok(Some(info)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(nvml_err(CALL)(e)),
        }
    }

    fn gi_by_id(&self, gi_id: u32) -> Result<nvmlGpuInstance_t, BackendError> {
        const CALL: &str = "nvmlDeviceGetGpuInstanceById";
        let sym =
            nvml_sym(self.lib().nvmlDeviceGetGpuInstanceById.as_ref()).map_err(nvml_err(CALL))?;
        let mut gi: nvmlGpuInstance_t = ptr::null_mut();
        // SAFETY: NVML writes one handle through the pointer to `gi`, valid
        // for the call; the device handle is valid.
        unsafe { nvml_try(sym(self.handle(), gi_id, &mut gi)) }.map_err(nvml_err(CALL))?;
        Ok(gi)
    }

    fn gi_info(&self, gi: nvmlGpuInstance_t) -> Result<nvmlGpuInstanceInfo_t, BackendError> {
        const CALL: &str = "nvmlGpuInstanceGetInfo";
        let sym = nvml_sym(self.lib().nvmlGpuInstanceGetInfo.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: all-zero is valid for the struct (integers and a raw
        // pointer); NVML fills it through a pointer valid for the call; `gi`
        // is a handle NVML gave us during this same operation.
        unsafe {
            let mut info: nvmlGpuInstanceInfo_t = std::mem::zeroed();
            nvml_try(sym(gi, &mut info)).map(|()| info)
        }
        .map_err(nvml_err(CALL))
    }

    fn ci_profile_info(
        &self,
        gi: nvmlGpuInstance_t,
        constant: u32,
    ) -> Result<Option<nvmlComputeInstanceProfileInfo_t>, BackendError> {
        const CALL: &str = "nvmlGpuInstanceGetComputeInstanceProfileInfo";
        let sym = nvml_sym(
            self.lib()
                .nvmlGpuInstanceGetComputeInstanceProfileInfo
                .as_ref(),
        )
        .map_err(nvml_err(CALL))?;
        // SAFETY: the struct is plain integers (all-zero valid); NVML fills it
        // through a pointer valid for the call; `gi` is a live handle.
        let result = unsafe {
            let mut info: nvmlComputeInstanceProfileInfo_t = std::mem::zeroed();
            nvml_try(sym(
                gi,
                constant,
                sys::NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                &mut info,
            ))
            .map(|()| info)
        };
        match result {
            Ok(info) => Ok(Some(info)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(nvml_err(CALL)(e)),
        }
    }

    fn ci_info(
        &self,
        ci: nvmlComputeInstance_t,
    ) -> Result<nvmlComputeInstanceInfo_t, BackendError> {
        // The version that fills `placement` (R460 and later).
        const CALL: &str = "nvmlComputeInstanceGetInfo_v2";
        let sym =
            nvml_sym(self.lib().nvmlComputeInstanceGetInfo_v2.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: all-zero is valid for the struct (integers and raw
        // pointers); NVML fills it through a pointer valid for the call; `ci`
        // is a live handle.
        unsafe {
            let mut info: nvmlComputeInstanceInfo_t = std::mem::zeroed();
            nvml_try(sym(ci, &mut info)).map(|()| info)
        }
        .map_err(nvml_err(CALL))
    }

    /// The compute instances of `gi` with their handles.
    fn cis(
        &self,
        gi: nvmlGpuInstance_t,
    ) -> Result<Vec<(nvmlComputeInstance_t, CiInfo)>, BackendError> {
        const CALL: &str = "nvmlGpuInstanceGetComputeInstances";
        let sym = nvml_sym(self.lib().nvmlGpuInstanceGetComputeInstances.as_ref())
            .map_err(nvml_err(CALL))?;
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for constant in all_ci_profile_constants() {
            let Some(profile) = self.ci_profile_info(gi, constant)? else {
                continue;
            };
            if !seen.insert(profile.id) || profile.instanceCount == 0 {
                continue;
            }
            let mut handles: Vec<nvmlComputeInstance_t> =
                vec![ptr::null_mut(); profile.instanceCount as usize];
            let mut count: c_uint = 0;
            // SAFETY: the buffer holds `instanceCount` handles, the most NVML
            // returns for one profile (its documented required size); NVML
            // writes the number it returned into `count`.
            let result = unsafe { nvml_try(sym(gi, profile.id, handles.as_mut_ptr(), &mut count)) };
            match result {
                Ok(()) => {}
                Err(e) if absent(&e) => continue,
                Err(e) => return Err(nvml_err(CALL)(e)),
            }
            handles.truncate(count as usize);
            for ci in handles {
                let info = self.ci_info(ci)?;
                out.push((
                    ci,
                    CiInfo {
                        id: info.id,
                        start: info.placement.start,
                        size: profile.sliceCount,
                    },
                ));
            }
        }
        Ok(out)
    }

    /// The GPU instance ID of a MIG device.
    pub(super) fn mig_gi_id(&self, mig: &Device<'nvml>) -> Result<u32, BackendError> {
        const CALL: &str = "nvmlDeviceGetGpuInstanceId";
        let sym =
            nvml_sym(self.lib().nvmlDeviceGetGpuInstanceId.as_ref()).map_err(nvml_err(CALL))?;
        let mut id: c_uint = 0;
        // SAFETY: `Device::handle` is unsafe only to discourage misuse; `mig`
        // is a live MIG device handle from `nvmlDeviceGetMigDeviceHandleByIndex`
        // (it borrows the `Nvml` that owns the library); NVML writes one
        // integer through a pointer valid for the call.
        unsafe { nvml_try(sym(mig.handle(), &mut id)) }.map_err(nvml_err(CALL))?;
        Ok(id)
    }
}

impl MigDriver for NvmlGpu<'_> {
    fn mig_enabled(&self) -> Result<bool, BackendError> {
        match self.device.mig_mode() {
            Ok(mode) => Ok(mode.current == sys::NVML_DEVICE_MIG_ENABLE),
            Err(NvmlError::NotSupported) => Ok(false),
            Err(e) => Err(nvml_err("nvmlDeviceGetMigMode")(e)),
        }
    }

    fn set_mig_enabled(&self, on: bool) -> Result<(), BackendError> {
        const CALL: &str = "nvmlDeviceSetMigMode";
        let activation = self.device.set_mig_mode(on).map_err(nvml_err(CALL))?;
        // The second status says whether the change is active now; the
        // caller reads the mode back and explains a pending change.
        if let Err(e) = nvml_try(activation) {
            tracing::warn!("{CALL}: the new MIG mode is not active yet: {e}");
        }
        Ok(())
    }

    fn gi_profile_id(&self, constant: u32) -> Result<Option<u32>, BackendError> {
        Ok(self.gi_profile_info(constant)?.map(|info| info.id))
    }

    fn gpu_instances(&self) -> Result<Vec<GiInfo>, BackendError> {
        const CALL: &str = "nvmlDeviceGetGpuInstances";
        let sym =
            nvml_sym(self.lib().nvmlDeviceGetGpuInstances.as_ref()).map_err(nvml_err(CALL))?;
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for constant in all_gi_profile_constants() {
            let Some(profile) = self.gi_profile_info(constant)? else {
                continue;
            };
            if !seen.insert(profile.id) || profile.instanceCount == 0 {
                continue;
            }
            let mut handles: Vec<nvmlGpuInstance_t> =
                vec![ptr::null_mut(); profile.instanceCount as usize];
            let mut count: c_uint = 0;
            // SAFETY: the buffer holds `instanceCount` handles, the most
            // instances of this profile a GPU can have (the size NVML
            // requires); NVML writes the number returned into `count`.
            let result = unsafe {
                nvml_try(sym(
                    self.handle(),
                    profile.id,
                    handles.as_mut_ptr(),
                    &mut count,
                ))
            };
            match result {
                Ok(()) => {}
                Err(e) if absent(&e) => continue,
                Err(e) => return Err(nvml_err(CALL)(e)),
            }
            handles.truncate(count as usize);
            for gi in handles {
                let info = self.gi_info(gi)?;
                out.push(GiInfo {
                    id: info.id,
                    profile_id: info.profileId,
                    start: info.placement.start,
                    size: info.placement.size,
                });
            }
        }
        Ok(out)
    }

    fn create_gpu_instance(
        &self,
        profile_id: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError> {
        const CALL: &str = "nvmlDeviceCreateGpuInstanceWithPlacement";
        let sym = nvml_sym(self.lib().nvmlDeviceCreateGpuInstanceWithPlacement.as_ref())
            .map_err(nvml_err(CALL))?;
        let placement = sys::nvmlGpuInstancePlacement_t { start, size };
        let mut gi: nvmlGpuInstance_t = ptr::null_mut();
        // SAFETY: `placement` is read and `gi` written through pointers valid
        // for the call; the device handle is valid.
        unsafe { nvml_try(sym(self.handle(), profile_id, &placement, &mut gi)) }
            .map_err(nvml_err(CALL))
    }

    fn destroy_gpu_instance(&self, gi_id: u32) -> Result<(), BackendError> {
        const CALL: &str = "nvmlGpuInstanceDestroy";
        let gi = self.gi_by_id(gi_id)?;
        let sym = nvml_sym(self.lib().nvmlGpuInstanceDestroy.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: `gi` is a live handle just looked up by ID; it is not used
        // after this call.
        unsafe { nvml_try(sym(gi)) }.map_err(nvml_err(CALL))
    }

    fn compute_instances(&self, gi_id: u32) -> Result<Vec<CiInfo>, BackendError> {
        let gi = self.gi_by_id(gi_id)?;
        Ok(self.cis(gi)?.into_iter().map(|(_, info)| info).collect())
    }

    fn create_compute_instance(
        &self,
        gi_id: u32,
        constant: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError> {
        const CALL: &str = "nvmlGpuInstanceCreateComputeInstanceWithPlacement";
        let gi = self.gi_by_id(gi_id)?;
        let profile = self
            .ci_profile_info(gi, constant)?
            .ok_or_else(|| BackendError::Nvml {
                call: "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                detail: format!("the GPU instance offers no {size}-slice compute instance"),
            })?;
        let mut ci: nvmlComputeInstance_t = ptr::null_mut();
        match nvml_sym(
            self.lib()
                .nvmlGpuInstanceCreateComputeInstanceWithPlacement
                .as_ref(),
        ) {
            Ok(sym) => {
                let placement = sys::nvmlComputeInstancePlacement_t { start, size };
                // SAFETY: `placement` is read and `ci` written through
                // pointers valid for the call; `gi` is a live handle.
                unsafe { nvml_try(sym(gi, profile.id, &placement, &mut ci)) }
                    .map_err(nvml_err(CALL))
            }
            // Drivers before R510 lack placements; without one the driver
            // picks the first free place, which is right for an instance
            // spanning the whole GPU instance (the usual case).
            Err(_) if start == 0 => {
                const OLD: &str = "nvmlGpuInstanceCreateComputeInstance";
                let sym = nvml_sym(self.lib().nvmlGpuInstanceCreateComputeInstance.as_ref())
                    .map_err(nvml_err(OLD))?;
                // SAFETY: `ci` is written through a pointer valid for the
                // call; `gi` is a live handle.
                unsafe { nvml_try(sym(gi, profile.id, &mut ci)) }.map_err(nvml_err(OLD))
            }
            Err(e) => Err(nvml_err(CALL)(e)),
        }
    }

    fn destroy_compute_instance(&self, gi_id: u32, ci_id: u32) -> Result<(), BackendError> {
        const CALL: &str = "nvmlComputeInstanceDestroy";
        let gi = self.gi_by_id(gi_id)?;
        let Some((ci, _)) = self.cis(gi)?.into_iter().find(|(_, info)| info.id == ci_id) else {
            return Err(BackendError::Nvml {
                call: "nvmlGpuInstanceGetComputeInstances",
                detail: format!("no compute instance {ci_id} in GPU instance {gi_id}"),
            });
        };
        let sym =
            nvml_sym(self.lib().nvmlComputeInstanceDestroy.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: `ci` is a live handle just listed; not used after this call.
        unsafe { nvml_try(sym(ci)) }.map_err(nvml_err(CALL))
    }

    fn busy(&self) -> Result<Busy, BackendError> {
        let mig_on = self.mig_enabled()?;
        let mut busy = Busy::default();
        let mut note = |gpu_instance_id: Option<u32>| match gpu_instance_id {
            Some(gi) if mig_on => {
                busy.gpu_instances.insert(gi);
            }
            _ => busy.whole_gpu = true,
        };
        match self.device.running_compute_processes() {
            Ok(processes) => {
                for p in processes {
                    // An idle MPS server is not a tenant's work; its clients
                    // are listed below.
                    if !is_mps_server(p.pid) {
                        note(p.gpu_instance_id);
                    }
                }
            }
            // With MIG on, the whole-GPU list needs privileges; the MIG
            // devices below say which instances are busy.
            Err(NvmlError::NoPermission | NvmlError::NotSupported) if mig_on => {}
            Err(e) => return Err(nvml_err("nvmlDeviceGetComputeRunningProcesses")(e)),
        }
        // MPS clients (Volta and newer list them apart from the server).
        if let Ok(processes) = self.device.mps_running_compute_processes() {
            for p in processes {
                note(p.gpu_instance_id);
            }
        }
        if mig_on {
            // Every process runs in some instance; the MIG devices place the
            // ones the whole-GPU list did not.
            busy.whole_gpu = false;
            for d in self.mig_devices()? {
                if d.busy {
                    busy.gpu_instances.insert(d.gi_id);
                }
            }
        }
        Ok(busy)
    }

    fn processes(&self, gi_id: Option<u32>) -> Result<Vec<u32>, BackendError> {
        let mut pids = std::collections::BTreeSet::new();
        let mig_on = self.mig_enabled()?;
        if gi_id.is_none() {
            let listed = self
                .device
                .running_compute_processes()
                .into_iter()
                .chain(self.device.mps_running_compute_processes())
                .flatten();
            pids.extend(listed.map(|p| p.pid).filter(|pid| !is_mps_server(*pid)));
        }
        if mig_on {
            let max = self
                .device
                .mig_device_count()
                .map_err(nvml_err("nvmlDeviceGetMaxMigDeviceCount"))?;
            for i in 0..max {
                let mig = match self.device.mig_device_by_index(i) {
                    Ok(d) => d,
                    Err(e) if absent(&e) => continue,
                    Err(e) => return Err(nvml_err("nvmlDeviceGetMigDeviceHandleByIndex")(e)),
                };
                if let Some(gi) = gi_id {
                    if self.mig_gi_id(&mig)? != gi {
                        continue;
                    }
                }
                let running = mig
                    .running_compute_processes()
                    .map_err(nvml_err("nvmlDeviceGetComputeRunningProcesses"))?;
                pids.extend(running.into_iter().map(|p| p.pid));
            }
        }
        Ok(pids.into_iter().collect())
    }

    fn mig_devices(&self) -> Result<Vec<MigDeviceInfo>, BackendError> {
        const CALL: &str = "nvmlDeviceGetMaxMigDeviceCount";
        if !self.mig_enabled()? {
            return Ok(Vec::new());
        }
        let max = self.device.mig_device_count().map_err(nvml_err(CALL))?;
        let mut out = Vec::new();
        for i in 0..max {
            let mig = match self.device.mig_device_by_index(i) {
                Ok(d) => d,
                // Slots without a compute instance.
                Err(e) if absent(&e) => continue,
                Err(e) => return Err(nvml_err("nvmlDeviceGetMigDeviceHandleByIndex")(e)),
            };
            let uuid = mig.uuid().map_err(nvml_err("nvmlDeviceGetUUID"))?;
            let gi_id = self.mig_gi_id(&mig)?;
            let busy = mig
                .running_compute_processes()
                .map(|p| !p.is_empty())
                .unwrap_or(false);
            out.push(MigDeviceInfo { gi_id, uuid, busy });
        }
        Ok(out)
    }
}

/// A GPM sample buffer NVML allocated (`nvmlGpmSampleAlloc`), freed when
/// dropped. The backend drops its samples before it shuts NVML down (field
/// order), so the library is still loaded then.
pub struct GpmSample {
    ptr: nvmlGpmSample_t,
    free: unsafe extern "C" fn(nvmlGpmSample_t) -> nvmlReturn_t,
}

// SAFETY: the buffer is memory NVML allocated for us and touches only
// during the calls we make with it; NVML calls are thread-safe, and the
// tracker hands each sample to one call at a time (behind its mutex).
unsafe impl Send for GpmSample {}

impl Drop for GpmSample {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `nvmlGpmSampleAlloc` and is freed once,
        // here; `free` is that library's `nvmlGpmSampleFree`, still loaded.
        unsafe {
            (self.free)(self.ptr);
        }
    }
}

/// GPM through NVML, for the GPUs of one `Nvml`.
pub struct NvmlGpm<'nvml> {
    nvml: &'nvml Nvml,
}

impl<'nvml> NvmlGpm<'nvml> {
    /// GPM of the GPUs `nvml` sees.
    pub fn new(nvml: &'nvml Nvml) -> Self {
        Self { nvml }
    }

    fn device(&self, gpu: u32) -> Result<Device<'nvml>, BackendError> {
        self.nvml
            .device_by_index(gpu)
            .map_err(nvml_err("nvmlDeviceGetHandleByIndex"))
    }
}

impl GpmDriver for NvmlGpm<'_> {
    type Sample = GpmSample;

    fn supported(&self, gpu: u32) -> bool {
        let (Ok(dev), Ok(sym)) = (
            self.device(gpu),
            nvml_sym(self.nvml.lib().nvmlGpmQueryDeviceSupport.as_ref()),
        ) else {
            return false;
        };
        let mut support = nvmlGpmSupport_t {
            version: sys::NVML_GPM_SUPPORT_VERSION,
            isSupportedDevice: 0,
        };
        // SAFETY: `Device::handle` is unsafe only to discourage misuse; the
        // handle is live while `dev` is; NVML writes one struct through a
        // pointer valid for the call.
        let ok = unsafe { nvml_try(sym(dev.handle(), &mut support)) };
        ok.is_ok() && support.isSupportedDevice != 0
    }

    fn take(&self, gpu: u32, gi_id: u32) -> Result<GpmSample, BackendError> {
        let lib = self.nvml.lib();
        let alloc =
            nvml_sym(lib.nvmlGpmSampleAlloc.as_ref()).map_err(nvml_err("nvmlGpmSampleAlloc"))?;
        let free =
            *nvml_sym(lib.nvmlGpmSampleFree.as_ref()).map_err(nvml_err("nvmlGpmSampleFree"))?;
        let get =
            nvml_sym(lib.nvmlGpmMigSampleGet.as_ref()).map_err(nvml_err("nvmlGpmMigSampleGet"))?;
        let dev = self.device(gpu)?;
        let mut ptr: nvmlGpmSample_t = ptr::null_mut();
        // SAFETY: NVML writes one handle through a pointer valid for the call.
        unsafe { nvml_try(alloc(&mut ptr)) }.map_err(nvml_err("nvmlGpmSampleAlloc"))?;
        // Owned from here on, so an error below still frees it.
        let sample = GpmSample { ptr, free };
        // SAFETY: the parent GPU's handle is live while `dev` is; the buffer
        // came from `nvmlGpmSampleAlloc` above.
        unsafe { nvml_try(get(dev.handle(), gi_id, sample.ptr)) }
            .map_err(nvml_err("nvmlGpmMigSampleGet"))?;
        Ok(sample)
    }

    fn graphics_util(&self, earlier: &GpmSample, later: &GpmSample) -> Result<f64, BackendError> {
        const CALL: &str = "nvmlGpmMetricsGet";
        let sym = nvml_sym(self.nvml.lib().nvmlGpmMetricsGet.as_ref()).map_err(nvml_err(CALL))?;
        // SAFETY: the struct is integers, a float and raw pointers, for
        // which all-zero bytes are valid.
        let mut get: nvmlGpmMetricsGet_t = unsafe { std::mem::zeroed() };
        get.version = sys::NVML_GPM_METRICS_GET_VERSION;
        get.numMetrics = 1;
        get.sample1 = earlier.ptr;
        get.sample2 = later.ptr;
        get.metrics[0].metricId = sys::nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL;
        // SAFETY: both samples are live buffers filled by
        // `nvmlGpmMigSampleGet`; NVML fills `get` through a pointer valid for
        // the call (the name strings it sets point into the library).
        unsafe { nvml_try(sym(&mut get)) }.map_err(nvml_err(CALL))?;
        nvml_try(get.metrics[0].nvmlReturn).map_err(nvml_err(CALL))?;
        Ok(get.metrics[0].value)
    }
}
