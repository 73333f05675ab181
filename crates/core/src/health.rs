//! GPU health: what the driver tells about a GPU ([`HealthSignals`], read by
//! the agent through NVML) and what Tessera makes of it ([`assess`]).
//!
//! The rules follow what NVIDIA's own tools do, so an admin who knows them
//! is not surprised:
//!
//! - **XID errors** (driver error events, `nvmlEventSetWait` with
//!   `nvmlEventTypeXidCriticalError`): every XID makes the GPU unhealthy
//!   except those the NVIDIA Kubernetes device plugin also ignores because
//!   they are the application's fault, not the GPU's (13 graphics engine
//!   exception, 31 GPU memory page fault, 43 GPU stopped processing, 45
//!   preemptive cleanup, 68 video processor exception, 109 context switch
//!   timeout): [`APPLICATION_XIDS`].
//! - **Uncorrectable ECC errors** since the last reset
//!   (`nvmlDeviceGetTotalEccErrors`, uncorrected, volatile counter): the data
//!   in GPU memory can no longer be trusted, so the GPU is unhealthy.
//! - **Pages waiting to be retired** (`nvmlDeviceGetRetiredPagesPendingStatus`,
//!   before Ampere) or **rows waiting to be remapped**
//!   (`nvmlDeviceGetRemappedRows`, Ampere and later): the GPU needs a reset
//!   before the bad memory is fenced off: unhealthy until then. A **failed
//!   remapping** means the GPU should be replaced.
//! - **A lost GPU** (`NVML_ERROR_GPU_IS_LOST`, XID 79 "fallen off the bus"):
//!   unhealthy.
//! - **Hardware or thermal slowdown** (`nvmlDeviceGetCurrentClocksThrottleReasons`:
//!   HW slowdown, HW thermal, HW power brake, SW thermal): the GPU works, but
//!   slower than it should: degraded. It still takes placements; the fleet
//!   page says why it is slow. Power capping, idle clocks and application
//!   clock settings are normal operation and ignored.
//!
//! An unhealthy GPU gets no new placements and the slices on it are marked as
//! having lost their capacity; a degraded one is only flagged.

use serde::{Deserialize, Serialize};

use crate::names::stable_names;

/// XIDs caused by the application, not the GPU (as in the NVIDIA device
/// plugin's default skip list): recorded, but the GPU stays healthy.
pub const APPLICATION_XIDS: [u32; 6] = [13, 31, 43, 45, 68, 109];

/// The XID NVML reports when a GPU has fallen off the bus.
pub const XID_FALLEN_OFF_BUS: u32 = 79;

/// At most this many distinct XIDs are reported per GPU (the most recent).
pub const MAX_XIDS: usize = 16;

stable_names! {
    /// Why the clocks are lower than they could be (NVML's clock throttle
    /// reasons that matter for health).
    pub enum ThrottleReason ("throttle_reason") {
        /// Hardware slowdown (`HW_SLOWDOWN`): temperature, power brake or
        /// a power supply problem made the hardware cut the clocks by half or more.
        HwSlowdown = "hw_slowdown",
        /// The GPU or its memory is too hot (`HW_THERMAL_SLOWDOWN`).
        HwThermalSlowdown = "hw_thermal_slowdown",
        /// An external power brake (`HW_POWER_BRAKE_SLOWDOWN`), e.g. from the power supply.
        HwPowerBrakeSlowdown = "hw_power_brake_slowdown",
        /// The driver slows the GPU to keep it under its temperature target
        /// (`SW_THERMAL_SLOWDOWN`).
        SwThermalSlowdown = "sw_thermal_slowdown",
    }
}

impl ThrottleReason {
    /// What it means, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::HwSlowdown => "hardware slowdown (clocks cut by half or more)",
            Self::HwThermalSlowdown => "hardware thermal slowdown (GPU or memory too hot)",
            Self::HwPowerBrakeSlowdown => "power brake slowdown (external power brake)",
            Self::SwThermalSlowdown => "software thermal slowdown (above the temperature target)",
        }
    }
}

/// One XID the driver reported for a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct XidEvent {
    /// The XID number.
    pub xid: u32,
    /// How many times it was seen since the agent started.
    pub count: u32,
}

/// What the driver says about a GPU's health, as the agent read it.
/// Everything defaults to "nothing wrong", so an agent that cannot read a
/// signal leaves it out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct HealthSignals {
    /// The GPU no longer answers (`NVML_ERROR_GPU_IS_LOST`).
    pub lost: bool,
    /// XID errors seen since the agent started (at most [`MAX_XIDS`]).
    pub xids: Vec<XidEvent>,
    /// Uncorrectable ECC errors since the last reset (volatile counter).
    pub ecc_uncorrected: u64,
    /// Corrected ECC errors since the last reset (informational).
    pub ecc_corrected: u64,
    /// Memory pages waiting to be retired at the next reset.
    pub retired_pages_pending: bool,
    /// Memory rows waiting to be remapped at the next reset.
    pub remapped_rows_pending: bool,
    /// A row remapping failed: the GPU should be replaced.
    pub remap_failure: bool,
    /// Current clock throttle reasons that matter for health.
    pub throttle: Vec<ThrottleReason>,
}

stable_names! {
    /// Tessera's verdict on a GPU's health.
    pub enum HealthVerdict ("health_verdict") {
        /// Nothing wrong.
        Healthy = "healthy",
        /// Works, but slower than it should; still takes placements.
        Degraded = "degraded",
        /// Gets no new placements; its slices lost their capacity.
        Unhealthy = "unhealthy",
    }
}

impl HealthVerdict {
    /// Whether new slices may be placed on a GPU with this verdict.
    pub fn takes_placements(self) -> bool {
        self != Self::Unhealthy
    }
}

/// One reason behind a verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HealthFinding {
    /// How bad it is (never `healthy`).
    pub severity: HealthVerdict,
    /// What is wrong, and what to do, for people.
    pub message: String,
}

/// A GPU's health: the verdict and the reasons for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuHealth {
    /// The worst finding's severity (`healthy` when there is none).
    pub verdict: HealthVerdict,
    /// What is wrong, worst first.
    pub findings: Vec<HealthFinding>,
}

impl GpuHealth {
    /// A GPU with nothing wrong.
    pub fn healthy() -> Self {
        Self {
            verdict: HealthVerdict::Healthy,
            findings: Vec::new(),
        }
    }

    /// One line for notifications and logs: the findings, worst first.
    pub fn summary(&self) -> String {
        if self.findings.is_empty() {
            return "healthy".to_owned();
        }
        self.findings
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// What an XID means, where NVIDIA documents it in a few words.
pub fn xid_meaning(xid: u32) -> Option<&'static str> {
    Some(match xid {
        13 => "graphics engine exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing",
        45 => "preemptive cleanup",
        48 => "double-bit ECC error",
        61 => "internal micro-controller breakpoint",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remapping recorded",
        64 => "ECC page retirement or row remapping failed",
        68 => "video processor exception",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        109 => "context switch timeout",
        119 | 120 => "GSP firmware error",
        _ => return None,
    })
}

fn finding(severity: HealthVerdict, message: String) -> HealthFinding {
    HealthFinding { severity, message }
}

/// Tessera's verdict on what the driver says (see the module documentation
/// for the rules).
pub fn assess(s: &HealthSignals) -> GpuHealth {
    use HealthVerdict::{Degraded, Unhealthy};
    let mut findings = Vec::new();
    if s.lost {
        findings.push(finding(
            Unhealthy,
            "the GPU no longer answers (fallen off the bus): reset or reseat it".to_owned(),
        ));
    }
    for x in &s.xids {
        if APPLICATION_XIDS.contains(&x.xid) || (s.lost && x.xid == XID_FALLEN_OFF_BUS) {
            continue;
        }
        let meaning = xid_meaning(x.xid).unwrap_or("driver error");
        let times = if x.count > 1 {
            format!(" ({} times)", x.count)
        } else {
            String::new()
        };
        findings.push(finding(
            Unhealthy,
            format!(
                "XID {} {meaning}{times}: check the GPU, then reset it",
                x.xid
            ),
        ));
    }
    if s.ecc_uncorrected > 0 {
        findings.push(finding(
            Unhealthy,
            format!(
                "{} uncorrectable ECC error{} since the last reset",
                s.ecc_uncorrected,
                if s.ecc_uncorrected == 1 { "" } else { "s" }
            ),
        ));
    }
    if s.remap_failure {
        findings.push(finding(
            Unhealthy,
            "row remapping failed: the GPU should be replaced".to_owned(),
        ));
    }
    if s.remapped_rows_pending {
        findings.push(finding(
            Unhealthy,
            "memory rows wait to be remapped: reset the GPU".to_owned(),
        ));
    }
    if s.retired_pages_pending {
        findings.push(finding(
            Unhealthy,
            "memory pages wait to be retired: reset the GPU".to_owned(),
        ));
    }
    let mut throttle = s.throttle.clone();
    throttle.sort();
    throttle.dedup();
    for t in throttle {
        findings.push(finding(
            Degraded,
            format!("clocks throttled: {}", t.describe()),
        ));
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    GpuHealth {
        verdict: findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(HealthVerdict::Healthy),
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(xid: u32) -> XidEvent {
        XidEvent { xid, count: 1 }
    }

    #[test]
    fn nothing_reported_is_healthy() {
        let h = assess(&HealthSignals::default());
        assert_eq!(h, GpuHealth::healthy());
        assert_eq!(h.summary(), "healthy");
    }

    #[test]
    fn application_xids_do_not_make_a_gpu_unhealthy() {
        let s = HealthSignals {
            xids: APPLICATION_XIDS.iter().map(|x| xid(*x)).collect(),
            ..HealthSignals::default()
        };
        assert_eq!(assess(&s).verdict, HealthVerdict::Healthy);
    }

    #[test]
    fn a_hardware_xid_makes_it_unhealthy_and_says_which() {
        let s = HealthSignals {
            xids: vec![xid(13), XidEvent { xid: 48, count: 3 }],
            ..HealthSignals::default()
        };
        let h = assess(&s);
        assert_eq!(h.verdict, HealthVerdict::Unhealthy);
        assert_eq!(h.findings.len(), 1);
        assert!(h.findings[0]
            .message
            .contains("XID 48 double-bit ECC error (3 times)"));
        // An XID nobody documented is still a driver error.
        let unknown = assess(&HealthSignals {
            xids: vec![xid(9999)],
            ..HealthSignals::default()
        });
        assert_eq!(unknown.verdict, HealthVerdict::Unhealthy);
        assert!(unknown.summary().contains("XID 9999 driver error"));
    }

    #[test]
    fn memory_faults_are_unhealthy_each_with_its_own_reason() {
        let s = HealthSignals {
            ecc_uncorrected: 2,
            ecc_corrected: 1000,
            retired_pages_pending: true,
            remapped_rows_pending: true,
            remap_failure: true,
            ..HealthSignals::default()
        };
        let h = assess(&s);
        assert_eq!(h.verdict, HealthVerdict::Unhealthy);
        let text = h.summary();
        assert!(text.contains("2 uncorrectable ECC errors"), "{text}");
        assert!(text.contains("rows wait to be remapped"), "{text}");
        assert!(text.contains("pages wait to be retired"), "{text}");
        assert!(text.contains("should be replaced"), "{text}");
        assert_eq!(h.findings.len(), 4, "corrected errors are not a finding");
        let one = assess(&HealthSignals {
            ecc_uncorrected: 1,
            ..HealthSignals::default()
        });
        assert!(one.summary().starts_with("1 uncorrectable ECC error since"));
    }

    #[test]
    fn throttling_degrades_but_keeps_placements() {
        let s = HealthSignals {
            throttle: vec![
                ThrottleReason::SwThermalSlowdown,
                ThrottleReason::HwThermalSlowdown,
                ThrottleReason::HwThermalSlowdown,
            ],
            ..HealthSignals::default()
        };
        let h = assess(&s);
        assert_eq!(h.verdict, HealthVerdict::Degraded);
        assert!(h.verdict.takes_placements());
        assert_eq!(h.findings.len(), 2, "the same reason twice is one finding");
    }

    #[test]
    fn a_lost_gpu_is_unhealthy_and_its_xid_79_is_not_said_twice() {
        let s = HealthSignals {
            lost: true,
            xids: vec![xid(XID_FALLEN_OFF_BUS)],
            throttle: vec![ThrottleReason::HwSlowdown],
            ..HealthSignals::default()
        };
        let h = assess(&s);
        assert_eq!(h.verdict, HealthVerdict::Unhealthy);
        assert!(!h.verdict.takes_placements());
        assert_eq!(h.findings.len(), 2);
        assert!(h.findings[0].message.contains("fallen off the bus"));
        assert_eq!(
            h.findings[1].severity,
            HealthVerdict::Degraded,
            "worst first"
        );
    }
}
