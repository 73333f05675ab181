//! The share model: what a slice takes away from others, as an exact
//! fraction of one GPU, so that the slices of a full GPU add up to exactly
//! one GPU and never to more.
//!
//! Shares are integers of [`PARTS_PER_GPU`], a number divisible by every
//! count of MIG compute and memory slices (4, 7, 8), by 100 (MPS
//! percentages) and by 1–16, 20, 24, 25, 32, 48 and 64 (time-slicing
//! replicas), so the usual cases are exact:
//!
//! - **MIG**: the larger of the instance's compute slices and memory slices
//!   as fractions of the GPU, but never more than a full layout around it
//!   leaves (see [`mig_share_at`]). On A100/H100-80GB: 1g.10gb 1/7 (seven
//!   of them are exactly one GPU), 1g.20gb 1/4 where it blocks a slot a
//!   1g.10gb could use (1/7 at slices 6–7, where it does not), 2g.20gb 2/7,
//!   3g.40gb 1/2 at slices 0–3 and 3/7 at 4–7 (beside four 1g.10gb it
//!   fills the GPU), 4g.40gb 4/7, 7g.80gb 1.
//! - **MPS**: the mean of the client's thread share and memory share, so a
//!   memory-heavy client pays for the memory it pins and a GPU's clients
//!   never add up past one GPU (the larger of the two would: a client with
//!   10 % of the threads and 90 % of the memory beside one with the
//!   opposite would bill 1.8 GPUs).
//! - **Time-slicing**: 1/N of the GPU for N replicas (rounded down for the
//!   rare N that does not divide [`PARTS_PER_GPU`]; the few parts left over
//!   stay with the platform as stranded).
//! - **Whole GPUs**: one GPU each.

use serde::{Deserialize, Serialize};

use crate::catalogue::{GpuModel, MigSpec};
use crate::mig::{maximal_layouts_with, MigPlacement};
use crate::sharing::{cost, PoolPolicy, ShapeError, SliceShape};

/// Parts one GPU is divided into: 2⁶ · 3² · 5² · 7 · 11 · 13.
pub const PARTS_PER_GPU: u64 = 14_414_400;

/// A share of one GPU in [`PARTS_PER_GPU`]ths.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct GpuShare(pub u64);

impl GpuShare {
    /// One whole GPU.
    pub const WHOLE: Self = Self(PARTS_PER_GPU);

    /// `num / den` of a GPU, rounded down.
    pub fn fraction(num: u64, den: u64) -> Self {
        Self(num.saturating_mul(PARTS_PER_GPU) / den.max(1))
    }

    /// As a fraction of one GPU.
    pub fn as_gpus(self) -> f64 {
        self.0 as f64 / PARTS_PER_GPU as f64
    }

    /// From an old row's quota demand (thousandths of a GPU).
    pub fn from_milli(milli: u64) -> Self {
        Self::fraction(milli, 1000)
    }
}

/// The share of a MIG instance of `profile` started at memory slice
/// `start` on a GPU of `model`: the larger of `compute slices / C` and
/// `memory slices / M`, capped at what every maximal layout holding that
/// instance leaves once the other instances pay at least their own share
/// (their compute fraction, for instances not yet settled). Instances are
/// settled from the smallest up, so the smallest profile keeps its compute
/// fraction and no layout sums past one GPU. The position matters: on an
/// A100/H100-80GB a 1g.20gb at slices 0–1 blocks a slot a 1g.10gb could
/// have used and pays 1/4; at slices 6–7 it blocks nothing a 1g.10gb at 6
/// would not and pays 1/7, as six 1g.10gb beside it fill the GPU.
/// `None`: no such profile or start.
pub fn mig_share_at(model: &GpuModel, profile: &str, start: u8) -> Option<GpuShare> {
    let spec = model.mig?;
    let wanted = twin(spec.profile(profile)?.name);
    shares_of(model)
        .iter()
        .find(|(name, at, _)| *name == wanted && *at == start)
        .map(|(_, _, share)| *share)
}

/// The most an instance of `profile` can cost on `model` (its share at
/// the start where it blocks most): what a request is quoted before it is
/// placed. `None`: no such profile.
pub fn mig_share(model: &GpuModel, profile: &str) -> Option<GpuShare> {
    let spec = model.mig?;
    let wanted = twin(spec.profile(profile)?.name);
    shares_of(model)
        .iter()
        .filter(|(name, _, _)| *name == wanted)
        .map(|(_, _, share)| *share)
        .max()
}

/// A `+me` profile shares its plain twin's geometry and share.
fn twin(name: &str) -> &str {
    name.strip_suffix("+me").unwrap_or(name)
}

/// Shares of one model's instances: (profile, start, share).
type ModelShares = Vec<(&'static str, u8, GpuShare)>;

/// [`mig_shares`] of `model`, worked out once per catalogue model (the
/// layout enumeration behind it takes a while); models outside the
/// catalogue are worked out each time.
fn shares_of(model: &GpuModel) -> std::borrow::Cow<'static, ModelShares> {
    static TABLE: std::sync::OnceLock<Vec<(&'static str, ModelShares)>> =
        std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        crate::catalogue::all_models()
            .iter()
            .filter_map(|m| Some((m.name, mig_shares(m, m.mig?))))
            .collect()
    });
    match table.iter().find(|(name, _)| *name == model.name) {
        Some((_, shares)) if !model.generic => std::borrow::Cow::Borrowed(shares),
        _ => std::borrow::Cow::Owned(
            model
                .mig
                .map(|spec| mig_shares(model, spec))
                .unwrap_or_default(),
        ),
    }
}

/// Every plain profile's share at each of its starts on `model`.
fn mig_shares(model: &GpuModel, spec: &MigSpec) -> Vec<(&'static str, u8, GpuShare)> {
    let c = u64::from(spec.compute_slices.max(1));
    let m = u64::from(spec.memory_slices.max(1));
    let larger = |p: &crate::catalogue::MigProfile| {
        GpuShare::fraction(u64::from(p.compute_slices), c)
            .max(GpuShare::fraction(u64::from(p.memory_slices), m))
    };
    let lower = |name: &str| {
        spec.profile(name).map_or(GpuShare(0), |p| {
            GpuShare::fraction(u64::from(p.compute_slices), c)
        })
    };
    let mut order: Vec<(&'static crate::catalogue::MigProfile, u8)> = spec
        .profiles
        .iter()
        .filter(|p| !p.media_extensions)
        .flat_map(|p| p.placements.iter().map(move |s| (p, *s)))
        .collect();
    order.sort_by_key(|(p, s)| (larger(p), p.compute_slices, p.memory_slices, *s));
    let layouts = maximal_layouts_with(model, |p| !p.media_extensions);
    let mut settled: Vec<(&'static str, u8, GpuShare)> = Vec::new();
    for (p, start) in order {
        let known = |i: &MigPlacement| -> GpuShare {
            settled
                .iter()
                .find(|(n, s, _)| *n == i.profile && *s == i.start)
                .map_or_else(|| lower(&i.profile), |(_, _, share)| *share)
        };
        let mut share = larger(p);
        for layout in layouts.iter().filter(|l| holds(l, p.name, start)) {
            let others: u64 = layout
                .iter()
                .filter(|i| !(i.profile == p.name && i.start == start))
                .map(|i| known(i).0)
                .sum();
            share = share.min(GpuShare(PARTS_PER_GPU.saturating_sub(others)));
        }
        settled.push((p.name, start, share));
    }
    settled
}

fn holds(layout: &[MigPlacement], profile: &str, start: u8) -> bool {
    layout
        .iter()
        .any(|i| i.profile == profile && i.start == start)
}

/// The share `shape` takes of each GPU it is placed on, in a pool with
/// `policy` on `model` (the shape is checked first, as for quota).
pub fn share_of(
    shape: &SliceShape,
    model: &GpuModel,
    policy: &PoolPolicy,
) -> Result<GpuShare, ShapeError> {
    let demand = cost(shape, model, policy)?;
    Ok(match shape {
        SliceShape::Mig { profile } => mig_share(model, profile)
            .unwrap_or_else(|| GpuShare::from_milli(u64::from(demand.compute.0))),
        SliceShape::Mps {
            compute_percent,
            memory_mib,
        } => {
            let threads = GpuShare::fraction(u64::from(*compute_percent), 100);
            let memory = GpuShare::fraction(memory_mib.0, model.memory_mib.max(1));
            GpuShare((threads.0 + memory.0.min(PARTS_PER_GPU)) / 2)
        }
        SliceShape::TimeSlice {} => {
            GpuShare::fraction(1, u64::from(policy.time_slice_replicas.max(1)))
        }
        SliceShape::Whole { .. } => GpuShare::WHOLE,
    })
}

#[cfg(test)]
#[path = "share_tests.rs"]
mod tests;

/// The share of each GPU a placed slice holds, from its shape and what the
/// placer gave it (`slice`) on a GPU of `model` (with the GPU's reported
/// memory for models outside the catalogue): fixed at placement, so a later
/// change of the pool's policy never rewrites the past. A time-sliced
/// replica's N is read from the memory it was given (the GPU's memory / N),
/// or from its compute (1000 / N thousandths) when the GPU's memory is
/// unknown; an MPS client on such a GPU pays its thread share.
pub fn share_of_placed(
    shape: &SliceShape,
    slice: &crate::placement::Slice,
    model: &GpuModel,
) -> GpuShare {
    use crate::placement::Slice;
    match (shape, slice) {
        (_, Slice::Whole) | (SliceShape::Whole { .. }, _) => GpuShare::WHOLE,
        (_, Slice::HostOnly) => GpuShare(0),
        (_, Slice::Mig(p)) => mig_share_at(model, &p.profile, p.start).unwrap_or_default(),
        (SliceShape::TimeSlice {}, Slice::Shared { memory, compute }) => {
            let n = if model.memory_mib > 0 && memory.0 > 0 {
                (model.memory_mib + memory.0 / 2) / memory.0
            } else {
                let c = u64::from(compute.0.max(1));
                (1000 + c / 2) / c
            };
            GpuShare::fraction(1, n.max(1))
        }
        (_, Slice::Shared { compute, memory }) => {
            let threads = GpuShare::fraction(u64::from(compute.0), 1000);
            if model.memory_mib == 0 {
                return threads;
            }
            let mem = GpuShare::fraction(memory.0, model.memory_mib);
            GpuShare((threads.0 + mem.0.min(PARTS_PER_GPU)) / 2)
        }
    }
}
