//! A request or workload class resolved against one fleet: model and pool
//! names become bit masks, and the MIG profile and shared-GPU memory that the
//! shape needs are worked out once per model.

use crate::catalogue::{self, MigSpec};
use crate::mig;
use crate::units::{ComputeMilli, MemMiB};

use super::error::PlacementError;
use super::index::{ModelEntry, Slot, SlotKind};
use super::request::Demand;

/// `Shape::profile` entry for "no usable profile on this model".
pub(crate) const NO_PROFILE: u8 = u8::MAX;

/// What kind of GPU demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShapeKind {
    None,
    Whole(u32),
    Frac(u32),
    Mig,
}

/// A resolved shape.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    pub kind: ShapeKind,
    pub cpu: u32,
    pub mem: u64,
    pub models: u128,
    pub pools: u128,
    /// Per model id: MIG profile index (covering profile for fractions).
    pub profile: Vec<u8>,
    /// Per model id: memory a share needs on a shared GPU.
    pub gpu_mem: Vec<u64>,
    pub nvlink: bool,
    pub weight: i64,
}

impl Shape {
    /// Whether `other` is the same shape, whatever its weight: the
    /// fragmentation caches of one hold for the other.
    pub(crate) fn same_but_weight(&self, other: &Shape) -> bool {
        let Shape {
            kind,
            cpu,
            mem,
            models,
            pools,
            profile,
            gpu_mem,
            nvlink,
            weight: _,
        } = self;
        *kind == other.kind
            && *cpu == other.cpu
            && *mem == other.mem
            && *models == other.models
            && *pools == other.pools
            && *profile == other.profile
            && *gpu_mem == other.gpu_mem
            && *nvlink == other.nvlink
    }
}

/// The demand and constraints to resolve.
pub(crate) struct ShapeSpec<'a> {
    pub demand: &'a Demand,
    pub cpu: u32,
    pub mem: u64,
    pub allowed_models: &'a [String],
    pub pool: Option<&'a str>,
    pub nvlink: bool,
    pub weight: i64,
}

fn invalid(reason: &str) -> PlacementError {
    PlacementError::InvalidRequest {
        reason: reason.to_string(),
    }
}

fn model_allowed(entry: &ModelEntry, allowed: &[String]) -> bool {
    allowed.is_empty()
        || allowed.iter().any(|name| {
            if name.eq_ignore_ascii_case(&entry.name) {
                return true;
            }
            let known = catalogue::lookup(name, 0);
            !known.generic && !entry.model.generic && known.name == entry.model.name
        })
}

/// Memory "proportional to compute" on a MIG model, counted in memory
/// slices: a quarter of the GPU needs a quarter of the slices. (Counting in
/// MiB would push every share into the next profile, because a profile's
/// usable memory is a little under its nominal share of the card.)
fn proportional_mig_memory(spec: &MigSpec, compute: u32) -> u64 {
    let slices = (u64::from(compute) * u64::from(spec.memory_slices)).div_ceil(1000);
    let per_slice = spec
        .profiles
        .iter()
        .filter(|p| p.memory_slices > 0)
        .map(|p| p.memory_mib / u64::from(p.memory_slices))
        .min()
        .unwrap_or(0);
    slices * per_slice
}

impl Shape {
    /// Resolves `spec` against the fleet's interned models and pools.
    pub fn resolve(
        spec: &ShapeSpec<'_>,
        models: &[ModelEntry],
        pools: &[String],
    ) -> Result<Self, PlacementError> {
        let mut shape = Shape {
            kind: ShapeKind::None,
            cpu: spec.cpu,
            mem: spec.mem,
            models: 0,
            pools: 0,
            profile: vec![NO_PROFILE; models.len()],
            gpu_mem: vec![0; models.len()],
            nvlink: spec.nvlink,
            weight: spec.weight,
        };
        for (i, entry) in models.iter().enumerate() {
            if model_allowed(entry, spec.allowed_models) {
                shape.models |= 1u128 << i;
            }
        }
        for (i, pool) in pools.iter().enumerate() {
            if spec.pool.is_none_or(|p| p == pool) {
                shape.pools |= 1u128 << i;
            }
        }
        match spec.demand {
            Demand::None => {}
            Demand::Whole { count } => {
                if *count == 0 {
                    return Err(invalid("a whole-GPU request needs at least one GPU"));
                }
                shape.kind = ShapeKind::Whole(*count);
            }
            Demand::Fraction { compute, memory } => {
                if compute.0 == 0 || compute.0 > 1000 {
                    return Err(invalid(
                        "a GPU share must be between 1 and 1000 thousandths of a GPU",
                    ));
                }
                shape.kind = ShapeKind::Frac(compute.0);
                for (i, entry) in models.iter().enumerate() {
                    let need = memory.map_or_else(
                        || entry.model.memory_mib * u64::from(compute.0) / 1000,
                        |m| m.0,
                    );
                    shape.gpu_mem[i] = need;
                    if let Some(table) = &entry.mig {
                        let mig_need = memory.map_or_else(
                            || proportional_mig_memory(table.spec(), compute.0),
                            |m| m.0,
                        );
                        shape.profile[i] = mig::smallest_covering_profile(
                            &entry.model,
                            *compute,
                            MemMiB(mig_need),
                        )
                        .and_then(|p| table.profile_index(p.name))
                        .unwrap_or(NO_PROFILE);
                    }
                }
            }
            Demand::Mig { profile } => {
                shape.kind = ShapeKind::Mig;
                for (i, entry) in models.iter().enumerate() {
                    if let Some(table) = &entry.mig {
                        if let Some(p) = table.profile_index(profile) {
                            shape.profile[i] = p;
                            shape.gpu_mem[i] = table
                                .spec()
                                .profiles
                                .get(usize::from(p))
                                .map_or(0, |p| p.memory_mib);
                        }
                    }
                }
            }
        }
        Ok(shape)
    }

    /// GPUs of a host this shape needs before it counts as placeable.
    #[inline]
    pub fn gpus_needed(&self) -> u32 {
        match self.kind {
            ShapeKind::None => 0,
            ShapeKind::Whole(n) => n,
            ShapeKind::Frac(_) | ShapeKind::Mig => 1,
        }
    }

    /// `None` when the shape could never use `slot` (model, pool or sharing
    /// mode rule it out); otherwise whether it fits there now.
    #[inline]
    pub fn can_host(&self, slot: &Slot, models: &[ModelEntry]) -> Option<bool> {
        if self.models & (1u128 << slot.model) == 0 || self.pools & (1u128 << slot.pool) == 0 {
            return None;
        }
        let m = usize::from(slot.model);
        let mig_fit = |profile: u8| -> Option<bool> {
            if profile == NO_PROFILE {
                return None;
            }
            let table = models.get(m)?.mig.as_ref()?;
            Some(!slot.allocated && table.free_mask(slot.layout, profile) != 0)
        };
        match (self.kind, slot.kind) {
            (ShapeKind::None, _) => None,
            // An idle MIG-mode GPU qualifies too: the decision then means
            // "leave MIG mode" (the planner disables MIG on an idle GPU), so
            // dynamic MIG can hand out whole GPUs when demand shifts.
            (ShapeKind::Whole(_), _) => Some(slot.idle()),
            (ShapeKind::Frac(compute), SlotKind::Shared) => Some(
                !slot.allocated
                    && slot.free >= compute
                    && slot.clients < slot.max_clients
                    && slot.mem_free >= self.gpu_mem.get(m).copied().unwrap_or(u64::MAX),
            ),
            (ShapeKind::Frac(_) | ShapeKind::Mig, SlotKind::Mig) => {
                mig_fit(self.profile.get(m).copied().unwrap_or(NO_PROFILE))
            }
            (ShapeKind::Frac(_), SlotKind::Exclusive) | (ShapeKind::Mig, _) => None,
        }
    }

    /// The compute share as a unit value (fractions only).
    pub fn compute(&self) -> ComputeMilli {
        match self.kind {
            ShapeKind::Frac(c) => ComputeMilli(c),
            ShapeKind::Whole(_) => ComputeMilli(1000),
            ShapeKind::None | ShapeKind::Mig => ComputeMilli(0),
        }
    }
}
