//! Quota arithmetic: integer GPU-equivalents, memory and a slice count.
//! Usage is always derived from live allocations (sum their [`Demand`]s),
//! never stored as a counter that can drift.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::units::{ComputeMilli, MemMiB};

/// A tenant's limit in one pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quota {
    /// GPU-equivalents × 1000.
    pub compute: ComputeMilli,
    /// GPU memory.
    pub memory: MemMiB,
    /// Concurrent slices.
    pub max_slices: u32,
}

/// What one slice costs (see [`crate::sharing::cost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Demand {
    /// GPU-equivalents × 1000.
    pub compute: ComputeMilli,
    /// GPU memory.
    pub memory: MemMiB,
    /// Slices (one per allocation; one per GPU for whole GPUs).
    pub slices: u32,
}

/// What a tenant currently holds: the sum of its live allocations' demands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// GPU-equivalents × 1000.
    pub compute: ComputeMilli,
    /// GPU memory.
    pub memory: MemMiB,
    /// Slices.
    pub slices: u32,
}

impl Usage {
    /// The sum of `demands`.
    pub fn from_demands<'a>(demands: impl IntoIterator<Item = &'a Demand>) -> Self {
        demands
            .into_iter()
            .fold(Self::default(), |usage, d| usage.plus(d))
    }

    /// This usage with `demand` added (saturating).
    pub fn plus(self, demand: &Demand) -> Self {
        Self {
            compute: self.compute + demand.compute,
            memory: self.memory + demand.memory,
            slices: self.slices.saturating_add(demand.slices),
        }
    }

    /// This usage with `demand` removed (saturating at zero).
    pub fn minus(self, demand: &Demand) -> Self {
        Self {
            compute: self.compute - demand.compute,
            memory: self.memory - demand.memory,
            slices: self.slices.saturating_sub(demand.slices),
        }
    }
}

/// The dimension a quota check failed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaDimension {
    /// GPU-equivalents.
    Compute,
    /// GPU memory.
    Memory,
    /// Concurrent slices.
    Slices,
}

impl QuotaDimension {
    fn amount(self, value: u64) -> String {
        match self {
            Self::Compute => ComputeMilli(u32::try_from(value).unwrap_or(u32::MAX)).to_string(),
            Self::Memory => MemMiB(value).to_string(),
            Self::Slices => format!("{value} slice(s)"),
        }
    }
}

impl fmt::Display for QuotaDimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Compute => "GPU compute",
            Self::Memory => "GPU memory",
            Self::Slices => "concurrent slices",
        })
    }
}

/// A request does not fit in what is left of the quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaExceeded {
    /// The first dimension (compute, memory, slices) that does not fit.
    pub dimension: QuotaDimension,
    /// What the request needs in that dimension (raw units: milli-GPU, MiB, slices).
    pub requested: u64,
    /// What is left in that dimension.
    pub available: u64,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "this request needs {} of {} but only {} is left in the quota; release a slice, ask for a smaller one, or request a quota increase",
            self.dimension.amount(self.requested),
            self.dimension,
            self.dimension.amount(self.available),
        )
    }
}

impl std::error::Error for QuotaExceeded {}

/// What is left of `quota` after `usage` (saturating at zero).
pub fn headroom(quota: &Quota, usage: &Usage) -> Demand {
    Demand {
        compute: quota.compute - usage.compute,
        memory: quota.memory - usage.memory,
        slices: quota.max_slices.saturating_sub(usage.slices),
    }
}

/// Checks that `demand` fits in `quota` on top of `usage`. Dimensions are
/// checked in the order compute, memory, slices; the first that does not fit
/// is reported.
pub fn check(quota: &Quota, usage: &Usage, demand: &Demand) -> Result<(), QuotaExceeded> {
    let left = headroom(quota, usage);
    let checks = [
        (
            QuotaDimension::Compute,
            u64::from(demand.compute.0),
            u64::from(left.compute.0),
        ),
        (QuotaDimension::Memory, demand.memory.0, left.memory.0),
        (
            QuotaDimension::Slices,
            u64::from(demand.slices),
            u64::from(left.slices),
        ),
    ];
    for (dimension, requested, available) in checks {
        if requested > available {
            return Err(QuotaExceeded {
                dimension,
                requested,
                available,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn quota() -> Quota {
        Quota {
            compute: ComputeMilli(2000),
            memory: MemMiB::from_gib(80),
            max_slices: 4,
        }
    }

    fn demand(compute: u32, gib: u64, slices: u32) -> Demand {
        Demand {
            compute: ComputeMilli(compute),
            memory: MemMiB::from_gib(gib),
            slices,
        }
    }

    #[test]
    fn fits_exactly_at_the_limit() {
        let usage = Usage::from_demands(&[demand(1000, 40, 2)]);
        assert_eq!(check(&quota(), &usage, &demand(1000, 40, 2)), Ok(()));
        let full = usage.plus(&demand(1000, 40, 2));
        assert_eq!(headroom(&quota(), &full), Demand::default());
    }

    #[test]
    fn reports_the_first_dimension_that_does_not_fit() {
        let usage = Usage::from_demands(&[demand(1500, 10, 1)]);
        let err = check(&quota(), &usage, &demand(600, 100, 9)).unwrap_err();
        assert_eq!(
            err,
            QuotaExceeded {
                dimension: QuotaDimension::Compute,
                requested: 600,
                available: 500
            }
        );
        assert_eq!(
            err.to_string(),
            "this request needs 0.600 GPU of GPU compute but only 0.500 GPU is left in the quota; release a slice, ask for a smaller one, or request a quota increase"
        );
        let err = check(&quota(), &usage, &demand(100, 71, 1)).unwrap_err();
        assert_eq!(err.dimension, QuotaDimension::Memory);
        assert_eq!(err.available, 70 * 1024);
        let err = check(&quota(), &usage, &demand(100, 1, 4)).unwrap_err();
        assert_eq!(
            (err.dimension, err.requested, err.available),
            (QuotaDimension::Slices, 4, 3)
        );
    }

    #[test]
    fn over_quota_usage_leaves_zero_headroom() {
        // A quota lowered below current usage must not underflow.
        let usage = Usage::from_demands(&[demand(3000, 100, 6)]);
        assert_eq!(headroom(&quota(), &usage), Demand::default());
        assert!(check(&quota(), &usage, &demand(0, 0, 0)).is_ok());
        assert!(check(&quota(), &usage, &demand(1, 0, 0)).is_err());
    }

    #[test]
    fn usage_plus_minus_round_trips() {
        let d = demand(142, 10, 1);
        let u = Usage::default().plus(&d).plus(&d).minus(&d);
        assert_eq!(u, Usage::from_demands(&[d]));
        assert_eq!(Usage::default().minus(&d), Usage::default());
    }

    #[test]
    fn quota_exceeded_serializes() {
        let e = QuotaExceeded {
            dimension: QuotaDimension::Slices,
            requested: 2,
            available: 1,
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"dimension":"slices","requested":2,"available":1}"#
        );
    }
}
