//! Who pays for the GPU-hours no slice holds: a pool's *recovery policy*
//! turns one priced stretch of the ledger (one pool, one price) into each
//! tenant's direct cost and share of overhead, and what stays with the
//! platform.
//!
//! Exact: the pool's cost is its physical GPU-part-milliseconds × the
//! GPU-hour price, rounded once; every part of it goes to a tenant or to
//! the platform by largest remainders, so the parts add up to the cost to
//! the micro-unit under every policy.

use std::collections::BTreeMap;

use crate::ids::TenantId;
use crate::metering::HOUR_MS;
use crate::names::stable_names;

use super::PARTS_PER_GPU;

stable_names! {
    /// How a pool's overhead (GPU-hours no slice holds, and under
    /// used-based the idle part of slices) is billed. Set per pool with the
    /// price, from a date on.
    #[derive(Default)]
    pub enum RecoveryPolicy ("recovery_policy") {
        /// Tenants pay for what their slices hold; overhead stays with the
        /// platform (the default).
        #[default]
        Showback = "showback",
        /// Tenants pay for what they hold and, in proportion to it, for
        /// every free, stranded, draining, maintenance, unhealthy and
        /// silent GPU-hour of the pool: the pool's cost is recovered in full.
        FullRecovery = "full_recovery",
        /// Tenants pay for what they measurably use; the idle part of the
        /// slices held is spread over them in proportion to their use. Free
        /// GPU-hours stay with the platform.
        UsedBased = "used_based",
    }
}

impl RecoveryPolicy {
    /// For people.
    pub fn label(self) -> &'static str {
        match self {
            Self::Showback => "Showback",
            Self::FullRecovery => "Full recovery",
            Self::UsedBased => "Used-based",
        }
    }
}

/// A tenant's time in one priced stretch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenantTime {
    /// GPU-part-milliseconds its slices held.
    pub held_part_ms: u128,
    /// Measured use, in milli-GPU-milliseconds (telemetry's unit).
    pub used_milli_ms: u128,
}

/// One pool under one price and policy for a stretch of time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PricedStretch {
    /// Millionths of the currency per GPU-hour.
    pub gpu_hour_micros: u64,
    /// The policy in force.
    pub policy: RecoveryPolicy,
    /// The pool's GPU-part-milliseconds (every bucket).
    pub physical_part_ms: u128,
    /// Per tenant.
    pub tenants: BTreeMap<TenantId, TenantTime>,
}

/// What one tenant is billed, in millionths of the currency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charge {
    /// For what its slices held (used-based: what they measurably used).
    pub direct: u128,
    /// Its share of the overhead.
    pub overhead: u128,
}

impl Charge {
    /// Direct plus overhead.
    pub fn total(&self) -> u128 {
        self.direct + self.overhead
    }

    /// Adds another.
    pub fn add(&mut self, o: &Charge) {
        self.direct += o.direct;
        self.overhead += o.overhead;
    }
}

/// A stretch's cost, split.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The pool's cost: physical GPU-hours × price.
    pub cost: u128,
    /// Per tenant (tenants with nothing held are absent).
    pub tenants: BTreeMap<TenantId, Charge>,
    /// What no tenant pays.
    pub platform: u128,
}

/// `part_ms` × `per_hour` in currency micros, rounded half up.
fn priced(part_ms: u128, per_hour: u64) -> u128 {
    let d = u128::from(PARTS_PER_GPU) * HOUR_MS as u128;
    (part_ms * u128::from(per_hour) + d / 2) / d
}

/// Splits `amount` over `weights` in proportion, by largest remainders:
/// the parts add up to `amount` exactly (all zero when the weights are).
pub fn apportion(amount: u128, weights: &[u128]) -> Vec<u128> {
    let total: u128 = weights.iter().sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let mut parts: Vec<u128> = weights.iter().map(|w| amount * w / total).collect();
    let mut left = amount - parts.iter().sum::<u128>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties to the earlier tenant (stable).
    order.sort_by_key(|i| std::cmp::Reverse(amount * weights[*i] % total));
    for i in order {
        if left == 0 {
            break;
        }
        if weights[i] > 0 {
            parts[i] += 1;
            left -= 1;
        }
    }
    parts
}

/// Splits a stretch's cost by its policy.
pub fn recover(s: &PricedStretch) -> Recovered {
    let cost = priced(s.physical_part_ms, s.gpu_hour_micros);
    let ids: Vec<TenantId> = s
        .tenants
        .iter()
        .filter(|(_, t)| t.held_part_ms > 0)
        .map(|(id, _)| *id)
        .collect();
    let held: Vec<u128> = ids.iter().map(|id| s.tenants[id].held_part_ms).collect();
    // What the slices held, priced once and split by what each held.
    let held_cost = priced(held.iter().sum(), s.gpu_hour_micros).min(cost);
    let held_parts = apportion(held_cost, &held);
    let overhead = cost - held_cost;
    let (direct, spread, platform) = match s.policy {
        RecoveryPolicy::Showback => (held_parts, vec![0; ids.len()], overhead),
        RecoveryPolicy::FullRecovery => {
            let spread = apportion(overhead, &held);
            let recovered: u128 = spread.iter().sum();
            (held_parts, spread, overhead - recovered)
        }
        RecoveryPolicy::UsedBased => {
            // Use, priced, but never more than the slice held.
            let used: Vec<u128> = ids
                .iter()
                .zip(&held_parts)
                .map(|(id, held)| {
                    let milli = s.tenants[id].used_milli_ms;
                    let d = 1000 * HOUR_MS as u128;
                    ((milli * u128::from(s.gpu_hour_micros) + d / 2) / d).min(*held)
                })
                .collect();
            let idle = held_cost - used.iter().sum::<u128>();
            // By use; with no use measured at all, by what was held.
            let weights = if used.iter().any(|u| *u > 0) {
                used.clone()
            } else {
                held.clone()
            };
            (used, apportion(idle, &weights), overhead)
        }
    };
    Recovered {
        cost,
        tenants: ids
            .iter()
            .zip(direct.iter().zip(&spread))
            .map(|(id, (d, o))| {
                (
                    *id,
                    Charge {
                        direct: *d,
                        overhead: *o,
                    },
                )
            })
            .collect(),
        platform,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOUR: u128 = PARTS_PER_GPU as u128 * HOUR_MS as u128;

    fn stretch(
        policy: RecoveryPolicy,
        physical_h: u128,
        held: &[(i64, u128, u128)],
    ) -> PricedStretch {
        PricedStretch {
            gpu_hour_micros: 2_000_000,
            policy,
            physical_part_ms: physical_h * HOUR,
            tenants: held
                .iter()
                .map(|(id, h, used_milli_h)| {
                    (
                        TenantId::new(*id),
                        TenantTime {
                            held_part_ms: h * HOUR,
                            used_milli_ms: used_milli_h * HOUR_MS as u128,
                        },
                    )
                })
                .collect(),
        }
    }

    fn sum(r: &Recovered) -> u128 {
        r.tenants.values().map(Charge::total).sum::<u128>() + r.platform
    }

    #[test]
    fn the_three_policies_on_a_worked_month() {
        // 10 GPU-hours at 2.00: tenant 1 held 4 h and used 1 GPU-hour,
        // tenant 2 held 2 h and used 1.5 GPU-hours; 4 h were free.
        let t = [(1, 4, 1000), (2, 2, 1500)];
        let show = recover(&stretch(RecoveryPolicy::Showback, 10, &t));
        assert_eq!(show.cost, 20_000_000);
        assert_eq!(
            show.tenants[&TenantId::new(1)],
            Charge {
                direct: 8_000_000,
                overhead: 0
            }
        );
        assert_eq!(
            show.tenants[&TenantId::new(2)],
            Charge {
                direct: 4_000_000,
                overhead: 0
            }
        );
        assert_eq!(show.platform, 8_000_000);

        let full = recover(&stretch(RecoveryPolicy::FullRecovery, 10, &t));
        // 8.00 of overhead, 2:1.
        assert_eq!(
            full.tenants[&TenantId::new(1)],
            Charge {
                direct: 8_000_000,
                overhead: 5_333_333
            }
        );
        assert_eq!(
            full.tenants[&TenantId::new(2)],
            Charge {
                direct: 4_000_000,
                overhead: 2_666_667
            }
        );
        assert_eq!(full.platform, 0);

        let used = recover(&stretch(RecoveryPolicy::UsedBased, 10, &t));
        // Use 2.00 and 3.00; the 7.00 idle in the slices split 2:3.
        assert_eq!(
            used.tenants[&TenantId::new(1)],
            Charge {
                direct: 2_000_000,
                overhead: 2_800_000
            }
        );
        assert_eq!(
            used.tenants[&TenantId::new(2)],
            Charge {
                direct: 3_000_000,
                overhead: 4_200_000
            }
        );
        assert_eq!(used.platform, 8_000_000);
        for r in [&show, &full, &used] {
            assert_eq!(sum(r), r.cost);
        }
    }

    #[test]
    fn use_is_capped_at_what_was_held_and_no_use_spreads_by_holding() {
        // Telemetry over the slice's share (a memory-light MIG instance
        // busy on all of its compute) never bills more than the slice.
        let r = recover(&stretch(
            RecoveryPolicy::UsedBased,
            3,
            &[(1, 1, 5000), (2, 1, 0)],
        ));
        assert_eq!(
            r.tenants[&TenantId::new(1)],
            Charge {
                direct: 2_000_000,
                overhead: 2_000_000
            }
        );
        assert_eq!(
            r.tenants[&TenantId::new(2)],
            Charge {
                direct: 0,
                overhead: 0
            }
        );
        let r = recover(&stretch(
            RecoveryPolicy::UsedBased,
            3,
            &[(1, 1, 0), (2, 2, 0)],
        ));
        assert_eq!(r.tenants[&TenantId::new(1)].overhead, 2_000_000);
        assert_eq!(r.tenants[&TenantId::new(2)].overhead, 4_000_000);
        assert_eq!(r.platform, 0);
    }

    #[test]
    fn an_empty_pool_is_the_platforms() {
        for p in RecoveryPolicy::ALL {
            let r = recover(&stretch(*p, 5, &[]));
            assert_eq!(r.platform, 10_000_000);
            assert!(r.tenants.is_empty());
        }
    }

    #[test]
    fn apportion_adds_up_and_follows_the_weights() {
        assert_eq!(apportion(10, &[1, 1, 1]), [4, 3, 3]);
        assert_eq!(apportion(10, &[0, 0]), [0, 0]);
        assert_eq!(apportion(7, &[0, 3]), [0, 7]);
        assert_eq!(apportion(100, &[1, 3]), [25, 75]);
    }

    #[test]
    fn names_are_stable() {
        let names: Vec<&str> = RecoveryPolicy::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names, ["showback", "full_recovery", "used_based"]);
        assert_eq!(RecoveryPolicy::default(), RecoveryPolicy::Showback);
    }

    proptest! {
        #[test]
        fn every_policy_splits_the_whole_cost(
            policy in 0usize..3,
            price in 0u64..100_000_000,
            free in 0u128..(50 * HOUR),
            tenants in proptest::collection::vec((1u128..(20 * HOUR), 0u128..(30_000 * HOUR_MS as u128)), 0..6),
        ) {
            let policy = RecoveryPolicy::ALL[policy];
            let held: u128 = tenants.iter().map(|t| t.0).sum();
            let s = PricedStretch {
                gpu_hour_micros: price,
                policy,
                physical_part_ms: held + free,
                tenants: tenants
                    .iter()
                    .enumerate()
                    .map(|(i, (h, u))| (TenantId::new(i as i64 + 1), TenantTime { held_part_ms: *h, used_milli_ms: *u }))
                    .collect(),
            };
            let r = recover(&s);
            prop_assert_eq!(sum(&r), r.cost);
            prop_assert_eq!(r.cost, priced(held + free, price));
            let direct: u128 = r.tenants.values().map(|c| c.direct).sum();
            let overhead: u128 = r.tenants.values().map(|c| c.overhead).sum();
            match policy {
                RecoveryPolicy::Showback => prop_assert_eq!(overhead, 0),
                RecoveryPolicy::FullRecovery => {
                    if held > 0 { prop_assert_eq!(r.platform, 0) }
                }
                RecoveryPolicy::UsedBased => {
                    // Tenants together pay exactly what their slices held.
                    prop_assert_eq!(direct + overhead, priced(held, price).min(r.cost));
                }
            }
        }
    }
}
