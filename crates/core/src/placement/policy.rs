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
    /// Least-loaded host and GPU first, for latency-sensitive work.
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
