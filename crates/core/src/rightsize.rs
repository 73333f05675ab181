//! Right-sizing: from what a slice measurably used, the smallest shape that
//! would have covered it, and what the difference is worth.
//!
//! The rules, in order:
//!
//! 1. **Enough data.** Without at least [`RightSizing::min_measured_minutes`] of
//!    telemetry there is no advice, only how much is still missing.
//! 2. **Multi-GPU slices are kept.** A job on several GPUs may need every
//!    one of them (data parallelism, memory spread over the GPUs); the
//!    measurements cannot tell, so no smaller shape is offered.
//! 3. **What it needs**, per GPU: memory is the peak it held plus
//!    headroom (10 %, at least 512 MiB), because running out of memory
//!    fails a job; compute is the 95th percentile of its per-minute
//!    utilisation of what it holds, plus 10 %, because too little compute
//!    only slows it down.
//! 4. **Candidates**: in every pool offered (the caller passes the pools
//!    the tenant may use that have the slice's GPU model), each MIG profile
//!    (not the `+me` twins), one MPS share sized to the need (5 % steps,
//!    whole GiB), one time-sliced replica, one whole GPU: each as the
//!    catalogue and the pool's policy define it on that model.
//!    Only shapes the pool's hosts can hold at all count (the caller
//!    says which: a host's driver may not offer every catalogue profile).
//! 5. **The smallest** by the share model ([`crate::ledger::share`]) among
//!    those whose compute and memory cover the need; ties go to the slice's
//!    own pool, then to the stronger isolation (MIG, MPS, time-slicing).
//! 6. **Keep** when the smallest is not smaller than what the slice holds.
//!    A slice at 95 % of its memory or compute is told that it is at its
//!    limit.
//!
//! Savings are per month of holding the slice ([`HOURS_PER_MONTH`]), in
//! GPU-hours of the share model and, where both pools have a price, money.

use serde::{Deserialize, Serialize};

use crate::catalogue::GpuModel;
use crate::ledger::share::{share_of, GpuShare, PARTS_PER_GPU};
use crate::metering::HOUR_MS;
use crate::sharing::{cost, validate_shape, SharingMode, SliceShape};
use crate::slice::{label, PoolOffer};
use crate::units::MemMiB;

/// Hours in an average month (365 × 24 / 12).
pub const HOURS_PER_MONTH: u64 = 730;
const DAY_MS: i64 = 24 * HOUR_MS;

/// How much headroom and data the advice asks for (the server's
/// `[rightsizing]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RightSizing {
    /// Telemetry needed before any advice, minutes (default 60).
    pub min_measured_minutes: u32,
    /// Memory headroom over the peak, percent (default 10).
    pub memory_headroom_pct: u8,
    /// Least memory headroom, MiB (default 512).
    pub memory_headroom_min_mib: u64,
    /// Compute headroom over the 95th percentile, percent (default 10).
    pub compute_headroom_pct: u8,
}

impl RightSizing {
    /// Telemetry needed before any advice, ms.
    pub fn min_measured_ms(&self) -> i64 {
        i64::from(self.min_measured_minutes) * 60_000
    }

    /// Checks the settings: `(field, what is wrong)`.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.min_measured_minutes == 0 {
            return Err(("min_measured_minutes", "must be at least 1"));
        }
        if self.memory_headroom_pct > 100 || self.compute_headroom_pct > 100 {
            return Err(("memory_headroom_pct", "headroom must be 0-100 %"));
        }
        Ok(())
    }
}

impl Default for RightSizing {
    fn default() -> Self {
        Self {
            min_measured_minutes: 60,
            memory_headroom_pct: 10,
            memory_headroom_min_mib: 512,
            compute_headroom_pct: 10,
        }
    }
}

/// What a slice used, from its telemetry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MeasuredUse {
    /// Most memory it held on any one of its GPUs, MiB.
    pub peak_mem_mib: u64,
    /// 95th percentile of its per-minute utilisation, percent of what it
    /// holds (a quarter-GPU share busy 20 % of the GPU is 80 %).
    pub util_p95_pct: u8,
    /// Time the telemetry covers, ms.
    pub measured_ms: i64,
}

/// One period of a slice's telemetry on one of its GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Period {
    /// Its utilisation figure, percent of what the slice holds: a
    /// minute's mean, or an hour's 95th percentile of its minutes' means
    /// (older telemetry is kept per hour only).
    pub util_pct: u8,
    /// Time the samples cover, ms.
    pub covered_ms: u64,
    /// Most memory used, MiB.
    pub mem_max_mib: u64,
}

impl MeasuredUse {
    /// From the periods of a slice on its `devices` GPUs: the highest
    /// memory, the 95th percentile of utilisation weighted by the time
    /// each period covers, and the time covered per GPU.
    pub fn of(periods: &[Period], devices: usize) -> Self {
        let mut by_util: Vec<(u8, u64)> =
            periods.iter().map(|p| (p.util_pct, p.covered_ms)).collect();
        by_util.sort_unstable();
        let total: u64 = by_util.iter().map(|(_, c)| c).sum();
        let mut seen = 0u64;
        let mut p95 = 0;
        for (util, covered) in by_util {
            seen += covered;
            p95 = util;
            if seen * 100 >= total * 95 {
                break;
            }
        }
        Self {
            peak_mem_mib: periods.iter().map(|p| p.mem_max_mib).max().unwrap_or(0),
            util_p95_pct: p95.min(100),
            measured_ms: i64::try_from(total / devices.max(1) as u64).unwrap_or(i64::MAX),
        }
    }
}

/// How far the advice can be trusted, from how long the slice was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Less than a day: one day's work may not show the week's peak.
    Low,
    /// A day to a week.
    Medium,
    /// A week or more.
    High,
}

impl Confidence {
    /// From the time measured.
    pub fn of(measured_ms: i64) -> Self {
        if measured_ms >= 7 * DAY_MS {
            Self::High
        } else if measured_ms >= DAY_MS {
            Self::Medium
        } else {
            Self::Low
        }
    }

    /// In words.
    pub fn label(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

/// Why a slice keeps its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum KeepReason {
    /// It holds several GPUs; the work may need each of them.
    MultiGpu,
    /// It used 95 % or more of its memory or compute.
    AtItsLimit,
    /// No shape on offer is smaller and still covers what it used.
    NothingSmaller,
}

impl KeepReason {
    /// In words.
    pub fn sentence(self) -> &'static str {
        match self {
            Self::MultiGpu => "it holds several GPUs, and the work may need each of them",
            Self::AtItsLimit => {
                "it used nearly all of its memory or compute; a larger shape may run it faster"
            }
            Self::NothingSmaller => "no smaller shape on offer covers what it used",
        }
    }
}

/// A smaller shape that covers what the slice used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Resize {
    /// Pool to ask in.
    pub pool: String,
    /// Shape to ask for.
    pub shape: SliceShape,
    /// The shape in words (`MIG 1g.10gb`).
    pub label: String,
    /// Its share of a GPU, as chargeback counts it (parts of 14,414,400).
    pub share: u64,
    /// GPU-hours a month of holding it saves.
    pub saves_gpu_hours_month: f64,
    /// Money a month saves, millionths of the currency; `None` when either
    /// pool has no price.
    pub saves_micros_month: Option<i64>,
}

/// The advice for one slice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Advice {
    /// Not enough telemetry yet.
    TooLittleData {
        /// Measured so far, ms.
        measured_ms: i64,
        /// Needed, ms.
        needed_ms: i64,
    },
    /// Keep the shape.
    Keep {
        /// Why.
        reason: KeepReason,
        /// How far to trust it.
        confidence: Confidence,
    },
    /// Ask for a smaller shape.
    Smaller {
        /// The shape.
        resize: Resize,
        /// How far to trust it.
        confidence: Confidence,
    },
}

/// What a slice holds now.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    /// Its shape.
    pub shape: &'a SliceShape,
    /// Its pool.
    pub pool: &'a PoolOffer,
    /// The model of its GPUs.
    pub model: &'a GpuModel,
    /// GPUs it spans.
    pub gpus: u32,
    /// Its share of each GPU (fixed at placement).
    pub share: GpuShare,
    /// The pool's price per GPU-hour now, millionths.
    pub gpu_hour_micros: Option<u64>,
}

/// A pool the slice could move to, with its price per GPU-hour now.
#[derive(Clone, Copy, Debug)]
pub struct Offer<'a> {
    /// The pool.
    pub pool: &'a PoolOffer,
    /// Its price per GPU-hour now, millionths.
    pub gpu_hour_micros: Option<u64>,
}

/// What a slice needs per GPU: (compute thousandths of a GPU, memory).
pub fn need(rules: &RightSizing, held: &Held<'_>, used: &MeasuredUse) -> (u32, MemMiB) {
    let held_compute = cost(held.shape, held.model, &held.pool.policy)
        .map(|d| d.compute.0 / held.gpus.max(1))
        .unwrap_or(1000)
        .min(1000);
    let compute = u64::from(held_compute)
        * u64::from(used.util_p95_pct.min(100))
        * (100 + u64::from(rules.compute_headroom_pct))
        / 10_000;
    let peak = used.peak_mem_mib;
    let headroom =
        (peak * u64::from(rules.memory_headroom_pct) / 100).max(rules.memory_headroom_min_mib);
    (
        u32::try_from(compute.max(1)).unwrap_or(1000),
        MemMiB(peak + headroom),
    )
}

/// Shapes worth trying in `offer` on `model` for a need of `compute`
/// thousandths and `memory`.
fn candidates(
    offer: &PoolOffer,
    model: &GpuModel,
    compute: u32,
    memory: MemMiB,
) -> Vec<SliceShape> {
    let mut out = Vec::new();
    match offer.policy.mode {
        SharingMode::Mig => {
            if let Some(spec) = model.mig {
                out.extend(
                    spec.profiles
                        .iter()
                        .filter(|p| !p.media_extensions)
                        .map(|p| SliceShape::Mig {
                            profile: p.name.to_owned(),
                        }),
                );
            }
        }
        SharingMode::Mps => {
            let pct = compute.div_ceil(10).div_ceil(5) * 5;
            out.push(SliceShape::Mps {
                compute_percent: u8::try_from(pct.clamp(5, 100)).unwrap_or(100),
                memory_mib: MemMiB(memory.0.div_ceil(1024) * 1024),
            });
        }
        SharingMode::TimeSlicing => out.push(SliceShape::TimeSlice {}),
        SharingMode::Exclusive => out.push(SliceShape::Whole {
            count: 1,
            nvlink_local: false,
        }),
    }
    out.retain(|s| validate_shape(s, model, &offer.policy).is_ok());
    out
}

/// The smallest shape that covers a need, and where.
#[derive(Clone, Debug)]
pub struct Cover<'a> {
    /// The pool.
    pub offer: &'a Offer<'a>,
    /// The shape.
    pub shape: SliceShape,
    /// Its share of a GPU.
    pub share: GpuShare,
    /// The shape in words.
    pub label: String,
}

/// The smallest shape by the share model, on GPUs of `model` in `offers`,
/// that gives `compute` thousandths of a GPU and `memory`, among those
/// `placeable` allows; ties go to the pool named `home`, then to the
/// stronger isolation (MIG, MPS, time-slicing, whole GPUs).
pub fn smallest_cover<'a>(
    offers: &'a [Offer<'a>],
    model: &GpuModel,
    compute: u32,
    memory: MemMiB,
    home: Option<&str>,
    placeable: &dyn Fn(&PoolOffer, &SliceShape) -> bool,
) -> Option<Cover<'a>> {
    let mut best: Option<((GpuShare, bool, u8, String), Cover<'a>)> = None;
    for offer in offers {
        if !offer.pool.models.iter().any(|m| m == model.name) {
            continue;
        }
        for shape in candidates(offer.pool, model, compute, memory) {
            if !placeable(offer.pool, &shape) {
                continue;
            }
            let Ok(d) = cost(&shape, model, &offer.pool.policy) else {
                continue;
            };
            if d.compute.0 < compute || d.memory < memory {
                continue;
            }
            let Ok(share) = share_of(&shape, model, &offer.pool.policy) else {
                continue;
            };
            let key = (
                share,
                home.is_some_and(|h| h != offer.pool.pool),
                isolation_rank(offer.pool.policy.mode),
                label(&shape),
            );
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                let cover = Cover {
                    offer,
                    shape,
                    share,
                    label: key.3.clone(),
                };
                best = Some((key, cover));
            }
        }
    }
    best.map(|(_, cover)| cover)
}

fn isolation_rank(mode: SharingMode) -> u8 {
    match mode {
        SharingMode::Mig => 0,
        SharingMode::Mps => 1,
        SharingMode::TimeSlicing => 2,
        SharingMode::Exclusive => 3,
    }
}

/// The advice for a slice that holds `held` and used `used`, among `offers`
/// (pools with the slice's GPU model; its own pool among them or not) and
/// the shapes `placeable` says the pool's hosts can hold at all (what the
/// catalogue lists, a host's driver may not offer).
pub fn advise(
    rules: &RightSizing,
    held: &Held<'_>,
    used: &MeasuredUse,
    offers: &[Offer<'_>],
    placeable: &dyn Fn(&PoolOffer, &SliceShape) -> bool,
) -> Advice {
    if used.measured_ms < rules.min_measured_ms() {
        return Advice::TooLittleData {
            measured_ms: used.measured_ms.max(0),
            needed_ms: rules.min_measured_ms(),
        };
    }
    let confidence = Confidence::of(used.measured_ms);
    let keep = |reason| Advice::Keep { reason, confidence };
    if held.gpus > 1 {
        return keep(KeepReason::MultiGpu);
    }
    if let Ok(d) = cost(held.shape, held.model, &held.pool.policy) {
        if used.util_p95_pct >= 95 || used.peak_mem_mib * 100 >= d.memory.0 * 95 {
            return keep(KeepReason::AtItsLimit);
        }
    }
    let (compute, memory) = need(rules, held, used);
    let Some(Cover {
        offer,
        shape,
        share,
        label: shape_label,
    }) = smallest_cover(
        offers,
        held.model,
        compute,
        memory,
        Some(&held.pool.pool),
        placeable,
    )
    else {
        return keep(KeepReason::NothingSmaller);
    };
    if share >= held.share {
        return keep(KeepReason::NothingSmaller);
    }
    let saved_parts = held.share.0 - share.0;
    let saves_gpu_hours_month = saved_parts as f64 * HOURS_PER_MONTH as f64 / PARTS_PER_GPU as f64;
    let saves_micros_month = match (held.gpu_hour_micros, offer.gpu_hour_micros) {
        (Some(now), Some(then)) => {
            let per_hour =
                i128::from(held.share.0) * i128::from(now) - i128::from(share.0) * i128::from(then);
            i64::try_from(per_hour * i128::from(HOURS_PER_MONTH) / i128::from(PARTS_PER_GPU)).ok()
        }
        _ => None,
    };
    Advice::Smaller {
        resize: Resize {
            pool: offer.pool.pool.clone(),
            shape,
            label: shape_label,
            share: share.0,
            saves_gpu_hours_month,
            saves_micros_month,
        },
        confidence,
    }
}

/// A span of time in words: `23 min`, `5 h`, `6 days`.
pub fn span_words(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    if minutes < 120 {
        format!("{minutes} min")
    } else if minutes < 48 * 60 {
        format!("{} h", minutes / 60)
    } else {
        format!("{} days", minutes / (24 * 60))
    }
}

/// Memory in GiB to the nearest tenth (`9.1 GiB`).
pub(crate) fn gib(mib: u64) -> String {
    let tenths = (mib * 10 + 512) / 1024;
    format!("{}.{} GiB", tenths / 10, tenths % 10)
}

impl Advice {
    /// The advice in one sentence, with the measurements behind it.
    pub fn sentence(&self, used: &MeasuredUse) -> String {
        let what = format!(
            "Used at most {} and {} % of its compute over {}",
            gib(used.peak_mem_mib),
            used.util_p95_pct,
            span_words(used.measured_ms)
        );
        match self {
            Self::TooLittleData {
                measured_ms,
                needed_ms,
            } => format!(
                "Not enough telemetry to advise yet: {} measured, {} needed.",
                span_words(*measured_ms),
                span_words(*needed_ms)
            ),
            Self::Keep { reason, .. } => format!("{what}: keep this size — {}.", reason.sentence()),
            Self::Smaller { resize, .. } => {
                let pool = format!(" in {}", resize.pool);
                format!(
                    "{what}: a {}{pool} would do — saves {:.0} GPU-hours a month.",
                    resize.label, resize.saves_gpu_hours_month
                )
            }
        }
    }

    /// The GPU-hours a month it saves (0 unless smaller).
    pub fn saves_gpu_hours_month(&self) -> f64 {
        match self {
            Self::Smaller { resize, .. } => resize.saves_gpu_hours_month,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
#[path = "rightsize_tests.rs"]
mod tests;
