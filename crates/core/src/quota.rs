//! Quota arithmetic: integer GPU-equivalents, memory and a slice count.
//! Usage is always derived from live allocations (sum their [`Demand`]s),
//! never stored as a counter that can drift.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::units::{ComputeMilli, MemMiB};

/// A tenant's limit in one pool.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Quota {
    /// GPU-equivalents × 1000.
    pub compute: ComputeMilli,
    /// GPU memory.
    pub memory: MemMiB,
    /// Concurrent slices.
    pub max_slices: u32,
}

impl Quota {
    /// This quota with `extra` added in every dimension (saturating).
    pub fn plus(&self, extra: &Quota) -> Quota {
        Quota {
            compute: self.compute + extra.compute,
            memory: self.memory + extra.memory,
            max_slices: self.max_slices.saturating_add(extra.max_slices),
        }
    }

    /// The amount as people ask for it: GPUs stay exact (to the thousandth),
    /// memory rounds up to the next quarter GiB.
    pub fn rounded_up(&self) -> Quota {
        const QUARTER_GIB_MIB: u64 = 256;
        Quota {
            memory: MemMiB(self.memory.0.div_ceil(QUARTER_GIB_MIB) * QUARTER_GIB_MIB),
            ..*self
        }
    }

    /// Splits a change of the permanent quota from `self` to `new` into
    /// what lowers (`new` where it is smaller, `self` elsewhere) and what
    /// raises (how far `new` goes above `self`, dimension by dimension):
    /// `lowered.plus(&raise) == new`. Four-eyes applies the first at once
    /// and asks a second platform admin for the second.
    pub fn split_change(&self, new: &Quota) -> (Quota, Quota) {
        let lowered = Quota {
            compute: self.compute.min(new.compute),
            memory: self.memory.min(new.memory),
            max_slices: self.max_slices.min(new.max_slices),
        };
        let raise = Quota {
            compute: new.compute.saturating_sub(self.compute),
            memory: new.memory.saturating_sub(self.memory),
            max_slices: new.max_slices.saturating_sub(self.max_slices),
        };
        (lowered, raise)
    }

    /// Nothing in every dimension.
    pub fn is_zero(&self) -> bool {
        *self == Quota::default()
    }

    /// The quota in force: the permanent `base` plus every temporary grant
    /// that has not ended at `now` (grants are `(amount, ends_at)`; times are
    /// any ordered type, so the caller's clock stays outside core).
    pub fn effective<T: PartialOrd>(base: &Quota, grants: &[(Quota, T)], now: &T) -> Quota {
        grants
            .iter()
            .filter(|(_, ends)| ends > now)
            .fold(*base, |q, (extra, _)| q.plus(extra))
    }
}

/// The smallest quota increase that lets `demand` fit on top of `usage`:
/// per dimension, what the demand needs beyond the headroom (zero where it
/// already fits). The refusal of a slice offers exactly this.
pub fn shortfall(quota: &Quota, usage: &Usage, demand: &Demand) -> Quota {
    let left = headroom(quota, usage);
    Quota {
        compute: demand.compute - left.compute,
        memory: demand.memory - left.memory,
        max_slices: demand.slices.saturating_sub(left.slices),
    }
}

/// Largest quota amount accepted, in GPU-equivalents.
pub const MAX_QUOTA_GPUS: f64 = 100_000.0;
/// Largest quota amount accepted, in GiB of GPU memory.
pub const MAX_QUOTA_MEMORY_GIB: f64 = 100_000_000.0;

/// A quota amount as people write it: GPU-equivalents, GiB and a slice
/// count (`{"gpus": 1.5, "memory_gib": 40, "max_slices": 2}`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaAmount {
    /// GPU-equivalents (e.g. `1.5`).
    pub gpus: f64,
    /// GPU memory in GiB (e.g. `40` or `9.75`).
    pub memory_gib: f64,
    /// Concurrent slices.
    pub max_slices: u32,
}

/// A quota amount that cannot be used; names the field to fix.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[error("{field}: {message}")]
pub struct QuotaAmountError {
    /// `gpus`, `memory_gib` or `max_slices`.
    pub field: String,
    /// What is wrong and what would be right.
    pub message: String,
}

impl QuotaAmount {
    /// In core's integer units (GPUs to the thousandth, memory to the MiB).
    pub fn to_quota(&self) -> Result<Quota, QuotaAmountError> {
        let bad = |field: &str, message: String| QuotaAmountError {
            field: field.to_owned(),
            message,
        };
        if !self.gpus.is_finite() || self.gpus < 0.0 || self.gpus > MAX_QUOTA_GPUS {
            return Err(bad(
                "gpus",
                format!("must be a number of GPUs between 0 and {MAX_QUOTA_GPUS}"),
            ));
        }
        if !self.memory_gib.is_finite()
            || self.memory_gib < 0.0
            || self.memory_gib > MAX_QUOTA_MEMORY_GIB
        {
            return Err(bad(
                "memory_gib",
                format!("must be a number of GiB between 0 and {MAX_QUOTA_MEMORY_GIB}"),
            ));
        }
        Ok(Quota {
            compute: ComputeMilli((self.gpus * 1000.0).round() as u32),
            memory: MemMiB((self.memory_gib * 1024.0).round() as u64),
            max_slices: self.max_slices,
        })
    }

    /// The same amount in people's units.
    pub fn from_quota(q: &Quota) -> Self {
        Self {
            gpus: f64::from(q.compute.0) / 1000.0,
            memory_gib: q.memory.0 as f64 / 1024.0,
            max_slices: q.max_slices,
        }
    }
}

/// Memory as people read it in a quota: whole or fractional GiB (to two
/// decimals) from 1 GiB up, MiB below.
fn people_memory(m: MemMiB) -> String {
    if m.0 < 1024 || m.0.is_multiple_of(1024) {
        return m.to_string();
    }
    let gib = format!("{:.2}", m.0 as f64 / 1024.0);
    format!("{} GiB", gib.trim_end_matches('0').trim_end_matches('.'))
}

impl fmt::Display for Quota {
    /// `1.500 GPU · 40 GiB · 2 slices`, `0.228 GPU · 19.5 GiB · 0 slices`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} · {} · {} slice{}",
            self.compute,
            people_memory(self.memory),
            self.max_slices,
            if self.max_slices == 1 { "" } else { "s" }
        )
    }
}

/// What one slice costs (see [`crate::sharing::cost`]).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// `value` in this dimension's units, as people read it.
    pub fn amount(self, value: u64) -> String {
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

    #[test]
    fn a_change_splits_into_what_lowers_and_what_raises() {
        let q = |c, m, s| Quota {
            compute: ComputeMilli(c),
            memory: MemMiB(m),
            max_slices: s,
        };
        let old = q(2000, 80 * 1024, 4);
        // Lower compute, raise memory, keep slices.
        let new = q(1000, 160 * 1024, 4);
        let (lowered, raise) = old.split_change(&new);
        assert_eq!(lowered, q(1000, 80 * 1024, 4));
        assert_eq!(raise, q(0, 80 * 1024, 0));
        assert_eq!(lowered.plus(&raise), new);
        // Only lower: nothing to approve.
        let (lowered, raise) = old.split_change(&q(0, 0, 0));
        assert_eq!((lowered, raise.is_zero()), (q(0, 0, 0), true));
        // Only raise (from nothing): nothing lowers.
        let (lowered, raise) = Quota::default().split_change(&old);
        assert_eq!((lowered.is_zero(), raise), (true, old));
    }

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
    fn temporary_grants_count_until_they_end() {
        let base = quota();
        let extra = Quota {
            compute: ComputeMilli(1000),
            memory: MemMiB::from_gib(40),
            max_slices: 1,
        };
        let grants = [(extra, 10), (extra, 20)];
        assert_eq!(
            Quota::effective(&base, &grants, &5),
            base.plus(&extra).plus(&extra)
        );
        assert_eq!(Quota::effective(&base, &grants, &10), base.plus(&extra));
        assert_eq!(Quota::effective(&base, &grants, &20), base);
        assert_eq!(Quota::effective::<i32>(&base, &[], &0), base);
    }

    #[test]
    fn shortfall_is_what_is_missing_per_dimension() {
        // 2 GPU / 80 GiB / 4 slices, 1.5 GPU / 70 GiB / 1 slice used.
        let usage = Usage::from_demands(&[demand(1500, 70, 1)]);
        let missing = shortfall(&quota(), &usage, &demand(1000, 20, 1));
        assert_eq!(
            missing,
            Quota {
                compute: ComputeMilli(500),
                memory: MemMiB::from_gib(10),
                max_slices: 0,
            }
        );
        // With the shortfall added the demand fits exactly.
        let raised = quota().plus(&missing);
        assert_eq!(check(&raised, &usage, &demand(1000, 20, 1)), Ok(()));
        assert!(shortfall(&quota(), &Usage::default(), &demand(1, 1, 1)).is_zero());
        // People ask for quarter GiBs: 9960 MiB becomes 9.75 GiB, 20 GiB stays.
        let odd = Quota {
            compute: ComputeMilli(1500),
            memory: MemMiB(9960),
            max_slices: 1,
        };
        assert_eq!(odd.rounded_up().memory, MemMiB(9984));
        assert_eq!(odd.rounded_up().compute, ComputeMilli(1500));
        assert_eq!(missing.rounded_up(), missing);
    }

    #[test]
    fn amounts_convert_and_name_the_bad_field() {
        let a = QuotaAmount {
            gpus: 1.5,
            memory_gib: 9.75,
            max_slices: 2,
        };
        let q = a.to_quota().unwrap();
        assert_eq!(q.compute, ComputeMilli(1500));
        assert_eq!(q.memory, MemMiB(9984));
        assert_eq!(QuotaAmount::from_quota(&q), a);
        assert_eq!(q.to_string(), "1.500 GPU · 9.75 GiB · 2 slices");
        let small = Quota {
            memory: MemMiB(512),
            ..q
        };
        assert_eq!(small.to_string(), "1.500 GPU · 512 MiB · 2 slices");
        let err = QuotaAmount { gpus: -1.0, ..a }.to_quota().unwrap_err();
        assert_eq!(err.field, "gpus");
        let err = QuotaAmount {
            memory_gib: f64::NAN,
            ..a
        }
        .to_quota()
        .unwrap_err();
        assert_eq!(err.field, "memory_gib");
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
