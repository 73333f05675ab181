//! Sharing modes and slice shapes: what a tenant can ask for in a pool, what
//! it costs in quota terms, and the MPS arithmetic on one GPU.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalogue::GpuModel;
use crate::mig::LayoutError;
use crate::quota::Demand;
use crate::units::{ComputeMilli, MemMiB};

/// Most time-sliced replicas Tessera offers per GPU. The device plugin has no
/// hard limit; beyond 64 each replica's share is too small to be useful.
pub const MAX_TIME_SLICE_REPLICAS: u32 = 64;

/// Environment variable naming the allocation a process runs for: the agent
/// finds a released shared slice's processes by it (MPS and time-sliced
/// slices share a GPU with others, so the GPU's process list alone does not
/// say whose a process is).
pub const ENV_ALLOCATION: &str = "TESSERA_ALLOCATION";

/// Environment variable limiting an MPS client's share of the SMs (percent).
pub const ENV_MPS_ACTIVE_THREAD_PERCENTAGE: &str = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
/// Environment variable limiting an MPS client's pinned device memory,
/// formatted `<device ordinal>=<limit>` with an `M` or `G` suffix.
pub const ENV_MPS_PINNED_DEVICE_MEM_LIMIT: &str = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";

/// How a pool shares its GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum SharingMode {
    /// Whole GPUs, one tenant each.
    Exclusive,
    /// Hardware partitions (strongest isolation).
    Mig,
    /// CUDA MPS: a compute percentage and a pinned-memory limit per client.
    Mps,
    /// Time-slicing: N replicas per GPU, no memory isolation.
    TimeSlicing,
}

impl SharingMode {
    /// The shape kind a pool in this mode hands out.
    pub fn shape_kind(self) -> ShapeKind {
        match self {
            Self::Exclusive => ShapeKind::Whole,
            Self::Mig => ShapeKind::Mig,
            Self::Mps => ShapeKind::Mps,
            Self::TimeSlicing => ShapeKind::TimeSlice,
        }
    }
}

impl fmt::Display for SharingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Exclusive => "exclusive",
            Self::Mig => "mig",
            Self::Mps => "mps",
            Self::TimeSlicing => "time-slicing",
        })
    }
}

/// Who a pool is for: shown to tenants choosing a pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum IsolationClass {
    /// Serving and other work that must not be disturbed.
    #[default]
    Production,
    /// Training and batch jobs.
    Batch,
    /// Notebooks and experiments.
    Development,
}

impl IsolationClass {
    /// Whether slices of two tenants may never share a physical GPU (tenant
    /// anti-affinity): so in production pools, where one tenant's load or
    /// fault must not reach another's service, even through MIG's shared
    /// copy engines and power budget or MPS's shared address-space server.
    pub fn separates_tenants(self) -> bool {
        self == Self::Production
    }

    /// The configured and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Production => "production",
            Self::Batch => "batch",
            Self::Development => "development",
        }
    }
}

impl fmt::Display for IsolationClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pool's sharing policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPolicy {
    /// How GPUs in the pool are shared.
    pub mode: SharingMode,
    /// Replicas per GPU in time-slicing pools (1..=[`MAX_TIME_SLICE_REPLICAS`]).
    #[serde(default = "one")]
    pub time_slice_replicas: u32,
    /// MIG profiles tenants may ask for; empty means every profile of the model.
    #[serde(default)]
    pub allowed_mig_profiles: Vec<String>,
}

impl PoolPolicy {
    /// Whether tenants may ask for MIG profile `name` here (every profile
    /// when the pool lists none).
    pub fn allows_mig_profile(&self, name: &str) -> bool {
        self.allowed_mig_profiles.is_empty()
            || self
                .allowed_mig_profiles
                .iter()
                .any(|p| p.eq_ignore_ascii_case(name))
    }
}

fn one() -> u32 {
    1
}

impl PoolPolicy {
    /// A policy of `mode` with defaults (one replica, every MIG profile).
    pub fn new(mode: SharingMode) -> Self {
        Self {
            mode,
            time_slice_replicas: 1,
            allowed_mig_profiles: Vec::new(),
        }
    }

    /// A time-slicing policy with `replicas` per GPU.
    pub fn time_slicing(replicas: u32) -> Self {
        Self {
            time_slice_replicas: replicas,
            ..Self::new(SharingMode::TimeSlicing)
        }
    }

    /// Checks the policy itself against a model.
    pub fn validate(&self, model: &GpuModel) -> Result<(), ShapeError> {
        if !(1..=MAX_TIME_SLICE_REPLICAS).contains(&self.time_slice_replicas) {
            return Err(ShapeError::ReplicasOutOfRange {
                replicas: self.time_slice_replicas,
                max: MAX_TIME_SLICE_REPLICAS,
            });
        }
        if self.mode == SharingMode::Mig {
            let spec = crate::mig::spec_of(model)?;
            for name in &self.allowed_mig_profiles {
                crate::mig::profile_of(model, spec, name)?;
            }
        }
        Ok(())
    }
}

/// The kind of a [`SliceShape`], for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeKind {
    /// A MIG instance.
    Mig,
    /// An MPS share.
    Mps,
    /// A time-sliced replica.
    TimeSlice,
    /// Whole GPUs.
    Whole,
}

impl fmt::Display for ShapeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mig => "MIG instance",
            Self::Mps => "MPS share",
            Self::TimeSlice => "time-sliced replica",
            Self::Whole => "whole GPU",
        })
    }
}

/// What a tenant asks for.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SliceShape {
    /// One MIG instance of `profile` (e.g. `"1g.10gb"`).
    Mig {
        /// Profile name on the GPU's model.
        profile: String,
    },
    /// An MPS client share.
    Mps {
        /// Share of the SMs, 1..=100 (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`).
        compute_percent: u8,
        /// Pinned device-memory limit (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`).
        memory_mib: MemMiB,
    },
    /// One time-sliced replica; the pool's policy says how many per GPU.
    TimeSlice {},
    /// Whole GPUs on one host.
    Whole {
        /// Number of GPUs (at least one).
        count: u32,
        /// Require the GPUs to be NVLink peers.
        nvlink_local: bool,
    },
}

impl SliceShape {
    /// The shape's kind.
    pub fn kind(&self) -> ShapeKind {
        match self {
            Self::Mig { .. } => ShapeKind::Mig,
            Self::Mps { .. } => ShapeKind::Mps,
            Self::TimeSlice {} => ShapeKind::TimeSlice,
            Self::Whole { .. } => ShapeKind::Whole,
        }
    }
}

/// Why a shape cannot be granted in a pool on a model.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShapeError {
    /// The pool hands out another kind of slice.
    #[error("this pool shares GPUs by {mode}; ask for a {expected} instead of a {requested}")]
    WrongKindForPool {
        /// The pool's mode.
        mode: SharingMode,
        /// What the pool hands out.
        expected: ShapeKind,
        /// What was asked for.
        requested: ShapeKind,
    },
    /// MPS inside a MIG instance is not offered.
    #[error("MPS inside a MIG instance is not offered; ask for a MIG profile here, or for an MPS share in an MPS pool")]
    MpsInsideMig,
    /// A MIG rule (model not MIG-capable, unknown profile).
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The pool does not offer this MIG profile.
    #[error("this pool does not offer {profile}; choose one of {allowed:?}")]
    ProfileNotAllowed {
        /// Requested profile.
        profile: String,
        /// Profiles the pool offers.
        allowed: Vec<String>,
    },
    /// MPS compute percentage outside 1..=100.
    #[error("an MPS compute share must be between 1 and 100 percent, not {percent}")]
    ComputePercentOutOfRange {
        /// Requested percentage.
        percent: u8,
    },
    /// MPS memory limit of zero.
    #[error("an MPS share needs a memory limit above 0 MiB")]
    MpsMemoryZero,
    /// MPS memory limit larger than the GPU.
    #[error("an MPS memory limit of {requested} does not fit on a {model} with {available}; ask for less memory")]
    MpsMemoryExceedsGpu {
        /// Model name.
        model: String,
        /// Requested limit.
        requested: MemMiB,
        /// The GPU's memory.
        available: MemMiB,
    },
    /// Time-slicing replicas outside the allowed range.
    #[error("time-slicing replicas must be between 1 and {max}, not {replicas}")]
    ReplicasOutOfRange {
        /// Configured replicas.
        replicas: u32,
        /// The maximum.
        max: u32,
    },
    /// Zero whole GPUs.
    #[error("ask for at least one whole GPU")]
    WholeCountZero,
}

/// Checks that `shape` can be granted in a pool with `policy` on `model`.
pub fn validate_shape(
    shape: &SliceShape,
    model: &GpuModel,
    policy: &PoolPolicy,
) -> Result<(), ShapeError> {
    if shape.kind() == ShapeKind::Mps && (policy.mode == SharingMode::Mig) {
        return Err(ShapeError::MpsInsideMig);
    }
    if shape.kind() != policy.mode.shape_kind() {
        return Err(ShapeError::WrongKindForPool {
            mode: policy.mode,
            expected: policy.mode.shape_kind(),
            requested: shape.kind(),
        });
    }
    match shape {
        SliceShape::Mig { profile } => {
            let spec = crate::mig::spec_of(model)?;
            let found = crate::mig::profile_of(model, spec, profile)?;
            if !policy.allows_mig_profile(found.name) {
                return Err(ShapeError::ProfileNotAllowed {
                    profile: found.name.to_string(),
                    allowed: policy.allowed_mig_profiles.clone(),
                });
            }
        }
        SliceShape::Mps {
            compute_percent,
            memory_mib,
        } => {
            check_mps_share(
                &MpsShare {
                    compute_percent: *compute_percent,
                    memory: *memory_mib,
                },
                model,
            )?;
        }
        SliceShape::TimeSlice {} => policy.validate(model)?,
        SliceShape::Whole { count, .. } => {
            if *count == 0 {
                return Err(ShapeError::WholeCountZero);
            }
        }
    }
    Ok(())
}

/// What granting `shape` costs against a quota on `model` in a pool with
/// `policy`, after checking the shape:
/// - MIG: the profile's compute share (`compute_slices × 1000 / total`,
///   rounded down) and its memory;
/// - MPS: `compute_percent × 10` and the memory limit;
/// - time-slice replica: `1000 / replicas` and `memory / replicas` (rounded
///   down; nothing isolates memory, this is the fair share);
/// - whole: `1000 × count` and `memory × count`.
///
/// Every shape is one slice, except whole GPUs, which count one per GPU.
pub fn cost(
    shape: &SliceShape,
    model: &GpuModel,
    policy: &PoolPolicy,
) -> Result<Demand, ShapeError> {
    validate_shape(shape, model, policy)?;
    Ok(match shape {
        SliceShape::Mig { profile } => {
            let spec = crate::mig::spec_of(model)?;
            let found = crate::mig::profile_of(model, spec, profile)?;
            Demand {
                compute: found.compute_milli(spec),
                memory: found.memory(),
                slices: 1,
            }
        }
        SliceShape::Mps {
            compute_percent,
            memory_mib,
        } => Demand {
            compute: ComputeMilli(u32::from(*compute_percent) * 10),
            memory: *memory_mib,
            slices: 1,
        },
        SliceShape::TimeSlice {} => {
            let n = policy.time_slice_replicas.max(1);
            Demand {
                compute: ComputeMilli(1000 / n),
                memory: MemMiB(model.memory_mib / u64::from(n)),
                slices: 1,
            }
        }
        SliceShape::Whole { count, .. } => Demand {
            compute: ComputeMilli::gpus(*count),
            memory: model.memory().saturating_mul(u64::from(*count)),
            slices: *count,
        },
    })
}

/// One MPS client's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MpsShare {
    /// Share of the SMs, 1..=100.
    pub compute_percent: u8,
    /// Pinned device-memory limit.
    pub memory: MemMiB,
}

impl MpsShare {
    /// The client's environment: `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=<n>` and
    /// `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<ordinal>=<MiB>M` (NVIDIA MPS docs,
    /// "Appendix: Environment Variables").
    pub fn env(&self, device_ordinal: u32) -> Vec<(&'static str, String)> {
        vec![
            (
                ENV_MPS_ACTIVE_THREAD_PERCENTAGE,
                self.compute_percent.to_string(),
            ),
            (
                ENV_MPS_PINNED_DEVICE_MEM_LIMIT,
                format!("{device_ordinal}={}M", self.memory.0),
            ),
        ]
    }
}

fn check_mps_share(share: &MpsShare, model: &GpuModel) -> Result<(), ShapeError> {
    if !(1..=100).contains(&share.compute_percent) {
        return Err(ShapeError::ComputePercentOutOfRange {
            percent: share.compute_percent,
        });
    }
    if share.memory == MemMiB::ZERO {
        return Err(ShapeError::MpsMemoryZero);
    }
    if share.memory > model.memory() {
        return Err(ShapeError::MpsMemoryExceedsGpu {
            model: model.name.to_string(),
            requested: share.memory,
            available: model.memory(),
        });
    }
    Ok(())
}

/// Why another MPS client does not fit on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MpsCapacityError {
    /// The share itself is invalid.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The MPS server's client limit is reached.
    #[error("this GPU already serves {max} MPS clients, the most MPS allows; choose another GPU")]
    TooManyClients {
        /// The per-GPU client limit.
        max: u32,
    },
    /// The memory limits would exceed the GPU's memory.
    #[error("only {available} of MPS memory is left on this GPU, {requested} was asked for")]
    MemoryExhausted {
        /// Requested limit.
        requested: MemMiB,
        /// Memory not yet promised to other clients.
        available: MemMiB,
    },
    /// The compute percentages would exceed 100 %.
    #[error("only {available_percent}% of this GPU's compute is left for MPS, {requested_percent}% was asked for")]
    ComputeExhausted {
        /// Requested percentage.
        requested_percent: u8,
        /// Percentage not yet promised.
        available_percent: u8,
    },
}

/// Checks that `new` can join the MPS clients `existing` on one GPU of
/// `model`: at most `model.mps_max_clients` clients, memory limits summing to
/// at most the GPU's memory, and compute percentages summing to at most 100.
/// (MPS treats the percentage as a cap, not a reservation; Tessera sells it as
/// a guarantee, so it never promises more than the whole GPU.)
pub fn check_mps_admission(
    model: &GpuModel,
    existing: &[MpsShare],
    new: &MpsShare,
) -> Result<(), MpsCapacityError> {
    check_mps_share(new, model)?;
    let clients = u32::try_from(existing.len()).unwrap_or(u32::MAX);
    if clients >= model.mps_max_clients {
        return Err(MpsCapacityError::TooManyClients {
            max: model.mps_max_clients,
        });
    }
    let used_memory: MemMiB = existing.iter().map(|s| s.memory).sum();
    let available = model.memory() - used_memory;
    if new.memory > available {
        return Err(MpsCapacityError::MemoryExhausted {
            requested: new.memory,
            available,
        });
    }
    let used_percent: u32 = existing.iter().map(|s| u32::from(s.compute_percent)).sum();
    let available_percent = u8::try_from(100u32.saturating_sub(used_percent)).unwrap_or(0);
    if new.compute_percent > available_percent {
        return Err(MpsCapacityError::ComputeExhausted {
            requested_percent: new.compute_percent,
            available_percent,
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "sharing_tests.rs"]
mod tests;
