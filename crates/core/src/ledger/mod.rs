//! The fleet ledger: every GPU-second of every GPU lands in exactly one
//! bucket: a tenant's slice (by its [share](share)), free and usable
//! (*unallocated*), free but too fragmented for any shape the pool offers
//! (*stranded*), or free while the GPU is draining or cordoned, in
//! maintenance, unhealthy, or on a silent host.
//!
//! Exact: amounts are GPU-part-milliseconds ([`PARTS_PER_GPU`] parts per
//! GPU) in integers, so a period's buckets add up to the GPU's recorded
//! time × one GPU, to the millisecond. A slice is billed for its share
//! whatever the GPU's condition (it holds it until it ends); only the free
//! part of a GPU goes to the condition's bucket.

pub mod recovery;
pub mod share;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::availability::OpsMode;
use crate::catalogue::GpuModel;
use crate::health::HealthVerdict;
use crate::ids::{AllocationId, TenantId};
use crate::mig::{free_starts, MigPlacement};
use crate::names::stable_names;
use crate::sharing::{PoolPolicy, SharingMode};
use crate::units::MemMiB;

pub use share::{mig_share, mig_share_at, share_of, share_of_placed, GpuShare, PARTS_PER_GPU};

stable_names! {
    /// What a GPU's free capacity is doing, for the ledger.
    pub enum GpuCondition ("gpu_condition") {
        /// Takes slices: free capacity is unallocated or stranded.
        Schedulable = "schedulable",
        /// Cordoned or draining: takes no new slices.
        Draining = "draining",
        /// In maintenance.
        Maintenance = "maintenance",
        /// Health verdict *unhealthy*.
        Unhealthy = "unhealthy",
        /// Its host has not been heard from within the offline limit.
        Silent = "silent",
    }
}

impl GpuCondition {
    /// The condition of a GPU with `health`, effective ops mode `ops`, on a
    /// host heard from recently (`heard`). Maintenance is planned and comes
    /// first (a host in maintenance may well be off); then silence (nothing
    /// is known about a silent host's GPUs), health, and cordon or drain.
    pub fn of(health: HealthVerdict, ops: OpsMode, heard: bool) -> Self {
        match ops {
            OpsMode::Maintenance => Self::Maintenance,
            _ if !heard => Self::Silent,
            _ if !health.takes_placements() => Self::Unhealthy,
            OpsMode::Cordoned | OpsMode::Draining => Self::Draining,
            OpsMode::Available => Self::Schedulable,
        }
    }
}

/// A GPU's condition from `from` until `until` (ms; `None`: still).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConditionSpan {
    /// Start, ms.
    pub from: i64,
    /// End, ms (`None`: to now).
    pub until: Option<i64>,
    /// The condition.
    pub condition: GpuCondition,
}

/// What a slice holds of one GPU, and while when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The slice.
    pub allocation: AllocationId,
    /// Its tenant.
    pub tenant: TenantId,
    /// Its share of this GPU.
    pub share: GpuShare,
    /// Active from, ms.
    pub start: i64,
    /// Ended, ms (`None`: running).
    pub end: Option<i64>,
    /// What it occupies, for telling stranded from unallocated.
    pub fit: HeldFit,
}

/// What a holding occupies on its GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldFit {
    /// A MIG instance.
    Mig(MigPlacement),
    /// An MPS client.
    Mps {
        /// Thread percentage.
        compute_percent: u8,
        /// Pinned memory.
        memory: MemMiB,
    },
    /// One time-sliced replica.
    TimeSlice,
    /// The whole GPU.
    Whole,
}

/// One GPU's (or a group's) time, by bucket, in GPU-part-ms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buckets {
    /// Held by each tenant's slices.
    pub tenants: BTreeMap<TenantId, u128>,
    /// Free, schedulable, and some shape the pool offers fits.
    pub unallocated: u128,
    /// Free and schedulable, but no shape the pool offers fits.
    pub stranded: u128,
    /// Free while cordoned or draining.
    pub draining: u128,
    /// Free while in maintenance.
    pub maintenance: u128,
    /// Free while unhealthy.
    pub unhealthy: u128,
    /// Free while the host was silent.
    pub silent: u128,
    /// Shares beyond one GPU (slices overlapping on a GPU; zero unless the
    /// records disagree). Not part of the GPU's time.
    pub overbooked: u128,
    /// Slice time on this GPU outside its recorded history (before the
    /// ledger began). Not part of the GPU's time.
    pub unrecorded: u128,
}

impl Buckets {
    /// All tenants' time.
    pub fn allocated(&self) -> u128 {
        self.tenants.values().sum()
    }

    /// Every bucket of the GPU's time: equals its recorded time × one GPU.
    pub fn total(&self) -> u128 {
        self.allocated()
            + self.unallocated
            + self.stranded
            + self.draining
            + self.maintenance
            + self.unhealthy
            + self.silent
    }

    /// Adds another GPU's or period's buckets.
    pub fn add(&mut self, other: &Self) {
        for (t, v) in &other.tenants {
            *self.tenants.entry(*t).or_default() += v;
        }
        self.unallocated += other.unallocated;
        self.stranded += other.stranded;
        self.draining += other.draining;
        self.maintenance += other.maintenance;
        self.unhealthy += other.unhealthy;
        self.silent += other.silent;
        self.overbooked += other.overbooked;
        self.unrecorded += other.unrecorded;
    }

    fn free(&mut self, condition: GpuCondition, stranded: bool, amount: u128) {
        let bucket = match condition {
            GpuCondition::Schedulable if stranded => &mut self.stranded,
            GpuCondition::Schedulable => &mut self.unallocated,
            GpuCondition::Draining => &mut self.draining,
            GpuCondition::Maintenance => &mut self.maintenance,
            GpuCondition::Unhealthy => &mut self.unhealthy,
            GpuCondition::Silent => &mut self.silent,
        };
        *bucket += amount;
    }
}

/// GPU-part-ms as GPU-hours.
pub fn gpu_hours(part_ms: u128) -> f64 {
    part_ms as f64 / (PARTS_PER_GPU as f64 * crate::metering::HOUR_MS as f64)
}

/// One GPU's buckets over `[from, to)`, cut at `now`: `spans` is its
/// condition history (not overlapping), `holdings` the slices on it, and
/// `stranded` says whether the free part is unusable beside the holdings
/// active at a moment.
pub fn account(
    spans: &[ConditionSpan],
    holdings: &[Holding],
    from: i64,
    to: i64,
    now: i64,
    stranded: impl Fn(&[&Holding]) -> bool,
) -> Buckets {
    let end = to.min(now);
    let mut out = Buckets::default();
    if end <= from {
        return out;
    }
    let mut cuts: Vec<i64> = vec![from, end];
    for s in spans {
        cuts.push(s.from);
        cuts.push(s.until.unwrap_or(now));
    }
    for h in holdings {
        cuts.push(h.start);
        cuts.push(h.end.unwrap_or(now));
    }
    cuts.retain(|t| *t >= from && *t <= end);
    cuts.sort_unstable();
    cuts.dedup();
    let mut active: Vec<&Holding> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let ms = u128::try_from(b - a).unwrap_or(0);
        active.clear();
        active.extend(
            holdings
                .iter()
                .filter(|h| h.start <= a && a < h.end.unwrap_or(now)),
        );
        active.sort_by_key(|h| h.allocation);
        let span = spans
            .iter()
            .find(|s| s.from <= a && a < s.until.unwrap_or(now));
        let Some(span) = span else {
            out.unrecorded += active.iter().map(|h| u128::from(h.share.0)).sum::<u128>() * ms;
            continue;
        };
        let mut left = u128::from(PARTS_PER_GPU);
        for h in &active {
            let share = u128::from(h.share.0);
            let billed = share.min(left);
            left -= billed;
            *out.tenants.entry(h.tenant).or_default() += billed * ms;
            out.overbooked += (share - billed) * ms;
        }
        if left > 0 {
            out.free(span.condition, stranded(&active), left * ms);
        }
    }
    out
}

/// Whether the free part of a GPU of `model` in a pool with `policy`, next
/// to the slices `held`, is unusable for every shape the pool offers:
/// - MIG: no profile the pool allows has a free start beside the instances;
/// - MPS: the daemon's client limit is reached, or no thread share or no
///   memory is left;
/// - time-slicing: every replica is held (what is left is rounding);
/// - whole GPUs: never (a GPU is either free or held).
///
/// An empty GPU is never stranded.
pub fn free_is_stranded(model: &GpuModel, policy: &PoolPolicy, held: &[&Holding]) -> bool {
    if held.is_empty() {
        return false;
    }
    match policy.mode {
        SharingMode::Mig => {
            let layout: Vec<MigPlacement> = held
                .iter()
                .filter_map(|h| match &h.fit {
                    HeldFit::Mig(p) => Some(p.clone()),
                    _ => None,
                })
                .collect();
            let Some(spec) = model.mig else { return false };
            !spec
                .profiles
                .iter()
                .filter(|p| policy.allows_mig_profile(p.name))
                .any(|p| !free_starts(model, &layout, p.name).is_empty())
        }
        SharingMode::Mps => {
            let (pct, mem) = held.iter().fold((0u32, 0u64), |(p, m), h| match &h.fit {
                HeldFit::Mps {
                    compute_percent,
                    memory,
                } => (p + u32::from(*compute_percent), m + memory.0),
                _ => (p, m),
            });
            held.len() >= model.mps_max_clients as usize
                || pct >= 100
                || (model.memory_mib > 0 && mem >= model.memory_mib)
        }
        SharingMode::TimeSlicing => held.len() >= policy.time_slice_replicas.max(1) as usize,
        SharingMode::Exclusive => false,
    }
}

#[cfg(test)]
mod tests;
