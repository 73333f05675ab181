//! GPU health from NVML: what [`tessera_core::health::HealthSignals`] holds
//! and where each figure comes from.
//!
//! - XIDs: `nvmlEventSetWait` on `nvmlEventTypeXidCriticalError`, watched by
//!   one background thread for all GPUs ([`XidLog`]); kept for the agent's
//!   lifetime, as the NVIDIA device plugin does (a reset GPU needs an agent
//!   restart to be trusted again, which a reset usually comes with).
//! - ECC: `nvmlDeviceGetTotalEccErrors`, volatile counters (since the last
//!   reset), uncorrected and corrected.
//! - Retired pages pending: `nvmlDeviceGetRetiredPagesPendingStatus` (before
//!   Ampere); remapped rows pending or failed: `nvmlDeviceGetRemappedRows`
//!   (Ampere and later), through the raw call in `raw`.
//! - Throttling: `nvmlDeviceGetCurrentClocksThrottleReasons`.
//!
//! A figure the GPU does not support (`NVML_ERROR_NOT_SUPPORTED`, e.g. ECC on
//! consumer boards) is left at "nothing wrong".

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tessera_core::health::{HealthSignals, ThrottleReason, XidEvent, MAX_XIDS};

/// XIDs seen per GPU UUID since the agent started.
#[derive(Debug, Default)]
pub struct XidLog {
    seen: Mutex<BTreeMap<String, BTreeMap<u32, u32>>>,
}

impl XidLog {
    /// Starts the watcher thread (its own NVML handle); without event
    /// support the log stays empty and says so once.
    pub fn start(library: Option<std::path::PathBuf>) -> Arc<Self> {
        let log = Arc::new(Self::default());
        let writer = Arc::clone(&log);
        let spawned = std::thread::Builder::new()
            .name("xid-watch".to_owned())
            .spawn(move || {
                if let Err(e) = watch(&writer, library.as_deref()) {
                    tracing::warn!("XID events are not available: {e}; GPU health comes from ECC, memory and throttle figures only");
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the XID watcher: {e}");
        }
        log
    }

    /// Records one XID on a GPU.
    pub fn record(&self, uuid: &str, xid: u32) {
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let gpu = seen.entry(uuid.to_owned()).or_default();
        *gpu.entry(xid).or_insert(0) += 1;
        tracing::warn!(gpu = uuid, xid, "XID error");
    }

    /// The XIDs seen on a GPU (at most [`MAX_XIDS`], most frequent first).
    pub fn of(&self, uuid: &str) -> Vec<XidEvent> {
        let seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut list: Vec<XidEvent> = seen
            .get(uuid)
            .map(|m| {
                m.iter()
                    .map(|(xid, count)| XidEvent {
                        xid: *xid,
                        count: *count,
                    })
                    .collect()
            })
            .unwrap_or_default();
        list.sort_by_key(|x| (std::cmp::Reverse(x.count), x.xid));
        list.truncate(MAX_XIDS);
        list
    }
}

fn watch(log: &XidLog, library: Option<&std::path::Path>) -> Result<(), NvmlError> {
    let nvml = super::load_nvml(library)?;
    let mut set = nvml.create_event_set()?;
    for i in 0..nvml.device_count()? {
        let dev = nvml.device_by_index(i)?;
        set = dev
            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
            .map_err(|e| e.error)?;
    }
    loop {
        match set.wait(5_000) {
            Ok(event) => {
                let xid = match event.event_data {
                    Some(XidError::Value(v)) => u32::try_from(v).unwrap_or(u32::MAX),
                    _ => continue,
                };
                if let Ok(uuid) = event.device.uuid() {
                    log.record(&uuid, xid);
                }
            }
            Err(NvmlError::Timeout) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The throttle reasons that matter for health.
pub fn throttle_of(reasons: ThrottleReasons) -> Vec<ThrottleReason> {
    [
        (ThrottleReasons::HW_SLOWDOWN, ThrottleReason::HwSlowdown),
        (
            ThrottleReasons::HW_THERMAL_SLOWDOWN,
            ThrottleReason::HwThermalSlowdown,
        ),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            ThrottleReason::HwPowerBrakeSlowdown,
        ),
        (
            ThrottleReasons::SW_THERMAL_SLOWDOWN,
            ThrottleReason::SwThermalSlowdown,
        ),
    ]
    .into_iter()
    .filter(|(flag, _)| reasons.contains(*flag))
    .map(|(_, reason)| reason)
    .collect()
}

/// A figure, or "nothing wrong" where the GPU does not have it; any other
/// failure is logged (and also counts as nothing wrong: a health figure
/// that cannot be read must not take a working GPU out of service).
fn figure<T: Default>(call: &'static str, r: Result<T, NvmlError>) -> T {
    match r {
        Ok(v) => v,
        Err(NvmlError::NotSupported | NvmlError::NoPermission) => T::default(),
        Err(e) => {
            tracing::warn!(call, "cannot read a GPU health figure: {e}");
            T::default()
        }
    }
}

/// What NVML says about one GPU's health; `remapped` is (pending, failed)
/// from `nvmlDeviceGetRemappedRows` when the GPU has it.
pub fn signals(
    dev: &Device<'_>,
    xids: Vec<XidEvent>,
    remapped: Option<(bool, bool)>,
) -> HealthSignals {
    let (remapped_rows_pending, remap_failure) = remapped.unwrap_or((false, false));
    HealthSignals {
        lost: false,
        xids,
        ecc_uncorrected: figure(
            "nvmlDeviceGetTotalEccErrors",
            dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
        ),
        ecc_corrected: figure(
            "nvmlDeviceGetTotalEccErrors",
            dev.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile),
        ),
        retired_pages_pending: figure(
            "nvmlDeviceGetRetiredPagesPendingStatus",
            dev.are_pages_pending_retired(),
        ),
        remapped_rows_pending,
        remap_failure,
        throttle: figure(
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            dev.current_throttle_reasons().map(throttle_of),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slowdowns_count_as_throttling() {
        let r = ThrottleReasons::HW_THERMAL_SLOWDOWN
            | ThrottleReasons::SW_POWER_CAP
            | ThrottleReasons::GPU_IDLE;
        assert_eq!(throttle_of(r), vec![ThrottleReason::HwThermalSlowdown]);
        assert!(throttle_of(ThrottleReasons::APPLICATIONS_CLOCKS_SETTING).is_empty());
        assert_eq!(throttle_of(ThrottleReasons::all()).len(), 4);
    }

    #[test]
    fn xids_are_counted_per_gpu_and_bounded() {
        let log = XidLog::default();
        log.record("GPU-a", 48);
        log.record("GPU-a", 48);
        log.record("GPU-a", 13);
        log.record("GPU-b", 79);
        assert_eq!(
            log.of("GPU-a"),
            vec![
                XidEvent { xid: 48, count: 2 },
                XidEvent { xid: 13, count: 1 }
            ]
        );
        assert_eq!(log.of("GPU-c"), Vec::new());
        for x in 0..40 {
            log.record("GPU-d", x);
        }
        assert_eq!(log.of("GPU-d").len(), MAX_XIDS);
    }
}
