//! Placement policies.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How to choose among the places where a request fits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Policy {
    /// Fragmentation-aware packing (the default): the candidate that grows
    /// the workload-weighted fragmentation of its host least, counting GPU
    /// capacity left without the CPU or memory to use it (stranded) as
    /// fragmented too; ties go to the tightest fit. CPU-only requests go to
    /// the host with the least free GPU.
    #[default]
    Pack,
    /// Across hosts, then GPUs: the host holding fewest of the request's
    /// tenant's slices, then the least-loaded host and GPU (for inference
    /// replicas and availability).
    Spread,
    /// Reference: fragmentation gradient descent exactly as published
    /// (Weng et al., USENIX ATC '23, and the authors' simulator): GPU-only
    /// fragmentation against the fleet's workload, the score quantised to
    /// `⌊100·sigmoid(−Δ/1000)⌋`, ties to the first host and GPU. Build the
    /// fleet with [`Workload::typical`](super::Workload::typical) to match
    /// the paper's target workload.
    Fgd,
    /// Baseline: the GPU left with the least free compute, then the host
    /// left with the least free GPU.
    BestFit,
    /// Baseline: the first host and GPU in fleet order.
    FirstFit,
    /// Baseline: uniformly among all candidates, reproducibly from `seed`.
    Random {
        /// Seed of the generator.
        seed: u64,
    },
}

impl Policy {
    /// The kebab-case name (`pack`, `spread`, `fgd`, `best-fit`, `first-fit`, `random`).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Pack => "pack",
            Policy::Spread => "spread",
            Policy::Fgd => "fgd",
            Policy::BestFit => "best-fit",
            Policy::FirstFit => "first-fit",
            Policy::Random { .. } => "random",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of the six.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {0:?}; expected pack, spread, fgd, best-fit, first-fit or random")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;

    /// Parses a policy name; `random` gets seed 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pack" => Ok(Policy::Pack),
            "spread" => Ok(Policy::Spread),
            "fgd" => Ok(Policy::Fgd),
            "best-fit" => Ok(Policy::BestFit),
            "first-fit" => Ok(Policy::FirstFit),
            "random" => Ok(Policy::Random { seed: 0 }),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

/// The placement policy a platform admin chooses for a pool (the policies
/// of [`Policy`] that make sense for a production pool; `fgd` and `random`
/// are references for `placement-bench`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
pub enum PoolPlacement {
    /// Fragmentation-aware packing: the most requests fit (training and
    /// batch pools). The default.
    #[default]
    Pack,
    /// Across hosts, then GPUs: a tenant's slices go to the hosts holding
    /// fewest of its slices, then to the least-loaded host and GPU, so one
    /// host failing takes as few of its replicas as possible (inference
    /// pools). Fits fewer requests than `pack` as the pool fills.
    Spread,
    /// The GPU left with the least free compute.
    BestFit,
    /// The first host and GPU in fleet order.
    FirstFit,
}

impl PoolPlacement {
    /// Every choice, in the order a form lists them.
    pub const ALL: [PoolPlacement; 4] = [Self::Pack, Self::Spread, Self::BestFit, Self::FirstFit];

    /// The configured and displayed name (`pack`, `spread`, `best-fit`, `first-fit`).
    pub fn as_str(self) -> &'static str {
        self.policy().name()
    }

    /// The policy the placer runs.
    pub fn policy(self) -> Policy {
        match self {
            Self::Pack => Policy::Pack,
            Self::Spread => Policy::Spread,
            Self::BestFit => Policy::BestFit,
            Self::FirstFit => Policy::FirstFit,
        }
    }

    /// A few words on what it is for, for the pool editor.
    pub fn summary(self) -> &'static str {
        match self {
            Self::Pack => "fits the most (training, batch)",
            Self::Spread => "a tenant's slices on different hosts (inference)",
            Self::BestFit => "the tightest GPU",
            Self::FirstFit => "the first host and GPU in order",
        }
    }
}

impl fmt::Display for PoolPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
