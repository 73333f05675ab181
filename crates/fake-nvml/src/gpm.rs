//! GPU Performance Monitoring: "For Hopper or newer fully supported
//! devices" (nvml.h, `nvmlGpmQueryDeviceSupport`); per MIG instance through
//! `nvmlGpmMigSampleGet`. A metric is computed between two samples; here
//! the graphics-engine activity is the instance's simulated load at the
//! later sample.

use crate::api::ret::*;
use crate::api::{put, with};
use crate::device::{resolve, Dev};
use nvml_wrapper_sys::bindings::{
    self as sys, nvmlDevice_t, nvmlGpmMetricsGet_t, nvmlGpmSample_t, nvmlGpmSupport_t, nvmlReturn_t,
};
use std::os::raw::c_uint;
use tessera_sim_host::telemetry;

/// What a sample holds.
#[derive(Debug, Default)]
struct Sample {
    /// The MIG device sampled and its memory (`None` until filled).
    device: Option<(String, u64)>,
    at_ms: i64,
}

/// `nvmlGpmQueryDeviceSupport`: supported on Hopper and newer.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut nvmlGpmSupport_t,
) -> nvmlReturn_t {
    with(|f| {
        let Dev::Gpu(g) = resolve(f, device)? else {
            return Err(NOT_SUPPORTED);
        };
        if support.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: not null; valid for the call.
        if unsafe { (*support).version } != sys::NVML_GPM_SUPPORT_VERSION {
            return Err(sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        let yes = f.state.model(g).is_some_and(|m| m.architecture.has_gpm());
        // SAFETY: as above.
        unsafe { (*support).isSupportedDevice = c_uint::from(yes) };
        Ok(())
    })
}

/// `nvmlGpmSampleAlloc`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> nvmlReturn_t {
    let raw = Box::into_raw(Box::<Sample>::default()).cast();
    // SAFETY: nvml.h's contract; on a null pointer the box is reclaimed.
    match unsafe { put(sample, raw) } {
        Ok(()) => SUCCESS,
        Err(e) => {
            // SAFETY: `raw` came from `Box::into_raw` just above.
            drop(unsafe { Box::from_raw(raw.cast::<Sample>()) });
            e
        }
    }
}

/// `nvmlGpmSampleFree`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> nvmlReturn_t {
    if sample.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: samples come from `nvmlGpmSampleAlloc` and are freed once
    // (nvml.h's contract).
    drop(unsafe { Box::from_raw(sample.cast::<Sample>()) });
    SUCCESS
}

/// `nvmlGpmMigSampleGet`: a sample of GPU instance `gi_id` of a GPU with
/// GPM and MIG on.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(
    device: nvmlDevice_t,
    gi_id: c_uint,
    sample: nvmlGpmSample_t,
) -> nvmlReturn_t {
    with(|f| {
        let Dev::Gpu(g) = resolve(f, device)? else {
            return Err(INVALID_ARGUMENT);
        };
        let model = f.state.model(g).ok_or(INVALID_ARGUMENT)?;
        if !model.architecture.has_gpm() {
            return Err(NOT_SUPPORTED);
        }
        let start = crate::device::gi_start(gi_id).ok_or(NOT_FOUND)?;
        let d = f
            .state
            .mig_devices(g)
            .into_iter()
            .find(|d| d.gi_start == start)
            .ok_or(NOT_FOUND)?;
        let memory = model
            .mig
            .and_then(|spec| spec.profile(&d.profile))
            .map_or(0, |p| p.memory_mib);
        if sample.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: a sample from `nvmlGpmSampleAlloc`, used by one call at a time.
        let s = unsafe { &mut *sample.cast::<Sample>() };
        s.device = Some((d.uuid, memory));
        s.at_ms = f.now_ms();
        Ok(())
    })
}

/// `nvmlGpmMetricsGet`: `NVML_GPM_METRIC_GRAPHICS_UTIL` between two
/// samples of the same instance; other metrics answer
/// `NVML_ERROR_NOT_SUPPORTED` in their own status.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(get: *mut nvmlGpmMetricsGet_t) -> nvmlReturn_t {
    with(|f| {
        if get.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: not null; valid for the call.
        let get = unsafe { &mut *get };
        if get.version != sys::NVML_GPM_METRICS_GET_VERSION {
            return Err(sys::nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        if get.sample1.is_null() || get.sample2.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: samples from `nvmlGpmSampleAlloc`.
        let (a, b) = unsafe {
            (
                &*get.sample1.cast::<Sample>(),
                &*get.sample2.cast::<Sample>(),
            )
        };
        let n = (get.numMetrics as usize).min(get.metrics.len());
        for m in &mut get.metrics[..n] {
            m.nvmlReturn = match (&a.device, &b.device) {
                _ if m.metricId != sys::nvmlGpmMetricId_t_NVML_GPM_METRIC_GRAPHICS_UTIL => {
                    NOT_SUPPORTED
                }
                (Some(da), Some((uuid, memory))) if da.0 == *uuid && b.at_ms >= a.at_ms => {
                    let load = telemetry::load(f.host.workload, uuid, *memory, b.at_ms);
                    m.value = f64::from(load.util_pct);
                    SUCCESS
                }
                _ => INVALID_ARGUMENT,
            };
        }
        Ok(())
    })
}
