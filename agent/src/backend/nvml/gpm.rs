//! Per-MIG-instance activity from GPM (GPU Performance Monitoring, Hopper
//! and later). NVML answers `NOT_SUPPORTED` for utilisation on a MIG
//! device; GPM instead keeps counters per GPU instance, and a metric is the
//! difference between two samples of them. So each telemetry round takes a
//! new sample of every MIG device's GPU instance and reports the activity
//! since the previous round's sample (the whole interval, as DCGM does):
//! `NVML_GPM_METRIC_GRAPHICS_UTIL`, the percent of time the graphics or
//! compute engine was active, which is DCGM's
//! `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (DCGM gives it as a 0-1 ratio).
//!
//! Samples are kept per MIG device UUID: a GPU instance destroyed and made
//! again gets a new UUID and starts over, so counters of two different
//! instances are never subtracted. A device's first round has no previous
//! sample and reports no activity (unknown, not 0 %).
//!
//! The driver calls are behind [`GpmDriver`] (raw NVML in `raw`), so this
//! bookkeeping is tested without a GPU.

use crate::backend::BackendError;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// GPM as the NVIDIA driver offers it.
pub trait GpmDriver {
    /// A sample of counters; NVML's buffer is freed when it is dropped.
    type Sample;
    /// Whether GPU `gpu` supports GPM (`nvmlGpmQueryDeviceSupport`).
    fn supported(&self, gpu: u32) -> bool;
    /// A new sample of GPU instance `gi_id` on GPU `gpu`
    /// (`nvmlGpmSampleAlloc`, `nvmlGpmMigSampleGet`).
    fn take(&self, gpu: u32, gi_id: u32) -> Result<Self::Sample, BackendError>;
    /// Graphics/compute engine activity in percent between two samples of
    /// one instance (`nvmlGpmMetricsGet`, `NVML_GPM_METRIC_GRAPHICS_UTIL`).
    fn graphics_util(
        &self,
        earlier: &Self::Sample,
        later: &Self::Sample,
    ) -> Result<f64, BackendError>;
}

/// A MIG device of one GPU to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigTarget {
    /// Its GPU instance's ID.
    pub gi_id: u32,
    /// `MIG-...`.
    pub uuid: String,
}

/// The previous round's sample of every MIG device.
#[derive(Debug)]
pub struct GpmTracker<S> {
    last: Mutex<BTreeMap<(u32, String), S>>,
}

impl<S> Default for GpmTracker<S> {
    fn default() -> Self {
        Self {
            last: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<S> GpmTracker<S> {
    /// Samples the MIG devices of GPU `gpu` now and returns each one's
    /// activity (0-100) since its previous sample, where there is one.
    /// Samples of devices no longer on the GPU are dropped.
    pub fn round(
        &self,
        driver: &impl GpmDriver<Sample = S>,
        gpu: u32,
        devices: &[MigTarget],
    ) -> BTreeMap<String, u8> {
        let mut last = match self.last.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
        last.retain(|(g, uuid), _| *g != gpu || devices.iter().any(|d| &d.uuid == uuid));
        let mut out = BTreeMap::new();
        if devices.is_empty() || !driver.supported(gpu) {
            last.retain(|(g, _), _| *g != gpu);
            return out;
        }
        for d in devices {
            let key = (gpu, d.uuid.clone());
            let now = match driver.take(gpu, d.gi_id) {
                Ok(s) => s,
                Err(e) => {
                    // The next round starts over from a fresh sample.
                    tracing::debug!(gpu, uuid = %d.uuid, "no GPM sample: {e}");
                    last.remove(&key);
                    continue;
                }
            };
            if let Some(before) = last.get(&key) {
                match driver.graphics_util(before, &now) {
                    Ok(pct) if pct.is_finite() => {
                        out.insert(d.uuid.clone(), pct.round().clamp(0.0, 100.0) as u8);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(gpu, uuid = %d.uuid, "no GPM metric: {e}"),
                }
            }
            last.insert(key, now);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A fake sample: the instance's busy counter (ms) and elapsed time
    /// (ms) when taken; counts itself freed.
    struct Sample {
        busy_ms: u64,
        at_ms: u64,
        freed: Rc<RefCell<u32>>,
    }

    impl Drop for Sample {
        fn drop(&mut self) {
            *self.freed.borrow_mut() += 1;
        }
    }

    #[derive(Default)]
    struct Fake {
        unsupported: bool,
        failing_gi: Option<u32>,
        /// Busy ms so far per GI, and the clock.
        busy: RefCell<BTreeMap<u32, u64>>,
        clock: RefCell<u64>,
        freed: Rc<RefCell<u32>>,
    }

    impl Fake {
        fn run(&self, gi: u32, busy_ms: u64) {
            *self.busy.borrow_mut().entry(gi).or_default() += busy_ms;
        }
    }

    impl GpmDriver for Fake {
        type Sample = Sample;
        fn supported(&self, _gpu: u32) -> bool {
            !self.unsupported
        }
        fn take(&self, _gpu: u32, gi_id: u32) -> Result<Sample, BackendError> {
            if self.failing_gi == Some(gi_id) {
                return Err(BackendError::Nvml {
                    call: "nvmlGpmMigSampleGet",
                    detail: "Not Supported".into(),
                });
            }
            Ok(Sample {
                busy_ms: self.busy.borrow().get(&gi_id).copied().unwrap_or(0),
                at_ms: *self.clock.borrow(),
                freed: self.freed.clone(),
            })
        }
        fn graphics_util(&self, a: &Sample, b: &Sample) -> Result<f64, BackendError> {
            Ok(100.0 * (b.busy_ms - a.busy_ms) as f64 / (b.at_ms - a.at_ms) as f64)
        }
    }

    fn target(gi_id: u32, uuid: &str) -> MigTarget {
        MigTarget {
            gi_id,
            uuid: uuid.into(),
        }
    }

    #[test]
    fn activity_is_measured_between_rounds() {
        let fake = Fake::default();
        let gpm = GpmTracker::default();
        let devices = [target(1, "MIG-a"), target(2, "MIG-b")];
        // The first round only takes samples: nothing known yet.
        assert!(gpm.round(&fake, 0, &devices).is_empty());
        // 10 s later: instance 1 was busy 9 s, instance 2 for 2.5 s.
        *fake.clock.borrow_mut() += 10_000;
        fake.run(1, 9_000);
        fake.run(2, 2_500);
        let got = gpm.round(&fake, 0, &devices);
        assert_eq!(got.get("MIG-a"), Some(&90));
        assert_eq!(got.get("MIG-b"), Some(&25));
        // Each round replaced (and freed) the samples before it.
        assert_eq!(*fake.freed.borrow(), 2);
        // The next interval is measured from the second round, not the first.
        *fake.clock.borrow_mut() += 10_000;
        fake.run(1, 1_000);
        assert_eq!(gpm.round(&fake, 0, &devices).get("MIG-a"), Some(&10));
    }

    #[test]
    fn a_new_instance_starts_over_and_gone_ones_are_freed() {
        let fake = Fake::default();
        let gpm = GpmTracker::default();
        gpm.round(&fake, 0, &[target(1, "MIG-a")]);
        gpm.round(&fake, 1, &[target(1, "MIG-z")]);
        *fake.clock.borrow_mut() += 10_000;
        fake.run(1, 5_000);
        // GI 1 on GPU 0 was destroyed and made again: a new UUID, no
        // figure from the old instance's counters.
        let got = gpm.round(&fake, 0, &[target(1, "MIG-c")]);
        assert!(got.is_empty(), "{got:?}");
        // MIG-a's sample was freed; GPU 1's is kept.
        assert_eq!(*fake.freed.borrow(), 1);
        assert_eq!(gpm.last.lock().unwrap().len(), 2);
        // A GPU with no MIG devices left keeps nothing.
        gpm.round(&fake, 0, &[]);
        assert_eq!(gpm.last.lock().unwrap().len(), 1);
    }

    #[test]
    fn unsupported_gpus_and_failing_samples_report_nothing() {
        let fake = Fake {
            unsupported: true,
            ..Fake::default()
        };
        let gpm = GpmTracker::default();
        let devices = [target(1, "MIG-a")];
        gpm.round(&fake, 0, &devices);
        *fake.clock.borrow_mut() += 10_000;
        assert!(gpm.round(&fake, 0, &devices).is_empty());
        assert!(gpm.last.lock().unwrap().is_empty());

        let fake = Fake {
            failing_gi: Some(2),
            ..Fake::default()
        };
        let devices = [target(1, "MIG-a"), target(2, "MIG-b")];
        gpm.round(&fake, 0, &devices);
        *fake.clock.borrow_mut() += 10_000;
        fake.run(1, 10_000);
        let got = gpm.round(&fake, 0, &devices);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), [("MIG-a".into(), 100)]);
    }
}
