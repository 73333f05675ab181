//! The right-sizing replay: seeded slices on H100s, each held in a shape
//! teams tend to ask for and running one of the simulator's workload
//! profiles ([`WorkloadProfile`]: idle, notebook, inference, training),
//! measured per minute for a week and advised by
//! [`tessera_core::rightsize::advise`] against four pools (MIG, whole GPUs,
//! MPS, four time-sliced replicas). It reports the GPU-hours a month the
//! advice would free, and checks each advised shape against the *next*
//! week of the same slice: an advised shape that would not have held that
//! week's peak memory or 95th percentile of compute counts as undersized.

use serde::Serialize;
use tessera_core::catalogue::lookup;
use tessera_core::ledger::share::{share_of, PARTS_PER_GPU};
use tessera_core::placement::SplitMix64;
use tessera_core::rightsize::{
    advise, Advice, Held, MeasuredUse, Offer, Period, RightSizing, HOURS_PER_MONTH,
};
use tessera_core::sharing::{cost, PoolPolicy, SharingMode, SliceShape};
use tessera_core::slice::PoolOffer;
use tessera_core::telemetry::{WorkloadProfile, MINUTE_MS};

const WEEK_MINUTES: i64 = 7 * 24 * 60;
/// Monday 2026-11-30 00:00 UTC: the replay's first minute.
const START_MS: i64 = 1_764_460_800_000;

/// One row of the report: a workload profile, or every slice.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The profile (`all` for every slice).
    pub variant: String,
    /// Slices.
    pub slices: u64,
    /// GPU-hours a month the slices hold as they are.
    pub held_gpu_hours_month: f64,
    /// GPU-hours a month the advised shapes would free.
    pub freed_gpu_hours_month: f64,
    /// Freed / held.
    pub freed_ratio: f64,
    /// Slices advised a smaller shape.
    pub smaller: u64,
    /// Of those, advised shapes the next week would have outgrown.
    pub undersized_next_week: u64,
}

fn pool(name: &str, mode: SharingMode) -> PoolOffer {
    let mut policy = PoolPolicy::new(mode);
    if mode == SharingMode::TimeSlicing {
        policy.time_slice_replicas = 4;
    }
    PoolOffer {
        pool: name.to_owned(),
        policy,
        models: vec!["H100-80GB".to_owned()],
        max_lease_hours: 168,
    }
}

/// What teams ask for "to be safe": mostly whole GPUs and big instances.
const HELD: [(&str, u64); 6] = [
    ("whole", 35),
    ("7g.80gb", 10),
    ("4g.40gb", 15),
    ("3g.40gb", 20),
    ("2g.20gb", 12),
    ("1g.10gb", 8),
];
const PROFILES: [(WorkloadProfile, u64); 4] = [
    (WorkloadProfile::Idle, 10),
    (WorkloadProfile::Notebook, 40),
    (WorkloadProfile::Inference, 30),
    (WorkloadProfile::Training, 20),
];

fn pick<T: Copy>(rng: &mut SplitMix64, table: &[(T, u64)]) -> T {
    let total: u64 = table.iter().map(|(_, w)| w).sum();
    let mut at = rng.below(total);
    for (item, weight) in table {
        if at < *weight {
            return *item;
        }
        at -= weight;
    }
    table[0].0
}

/// A week of minutes of a slice holding `memory_mib`, from `from_ms`.
fn week(profile: WorkloadProfile, seed: u64, memory_mib: u64, from_ms: i64) -> Vec<Period> {
    (0..WEEK_MINUTES)
        .map(|m| {
            let at = from_ms + m * MINUTE_MS;
            Period {
                util_pct: profile.utilisation_pct(seed, at),
                covered_ms: 60_000,
                mem_max_mib: profile.memory_used_mib(seed, at, memory_mib),
            }
        })
        .collect()
}

/// Replays `slices` seeded slices; one row per profile, then `all`.
pub fn replay(slices: u64, seed: u64) -> Vec<Row> {
    let model = lookup("H100-80GB", 0);
    let pools = [
        pool("h100-mig", SharingMode::Mig),
        pool("h100", SharingMode::Exclusive),
        pool("h100-mps", SharingMode::Mps),
        pool("h100-shared", SharingMode::TimeSlicing),
    ];
    let offers: Vec<Offer<'_>> = pools
        .iter()
        .map(|pool| Offer {
            pool,
            gpu_hour_micros: None,
        })
        .collect();
    let rules = RightSizing::default();
    let mut rng = SplitMix64::new(seed);
    let mut rows: Vec<Row> = PROFILES
        .iter()
        .map(|(p, _)| p.as_str())
        .chain(["all"])
        .map(|v| Row {
            variant: v.to_owned(),
            slices: 0,
            held_gpu_hours_month: 0.0,
            freed_gpu_hours_month: 0.0,
            freed_ratio: 0.0,
            smaller: 0,
            undersized_next_week: 0,
        })
        .collect();
    for i in 0..slices {
        let (shape, own) = match pick(&mut rng, &HELD) {
            "whole" => (
                SliceShape::Whole {
                    count: 1,
                    nvlink_local: false,
                },
                &pools[1],
            ),
            profile => (
                SliceShape::Mig {
                    profile: profile.to_owned(),
                },
                &pools[0],
            ),
        };
        let profile = pick(&mut rng, &PROFILES);
        let slice_seed = rng.next_u64() ^ i;
        let Ok(held_demand) = cost(&shape, &model, &own.policy) else {
            continue;
        };
        let Ok(share) = share_of(&shape, &model, &own.policy) else {
            continue;
        };
        let held = Held {
            shape: &shape,
            pool: own,
            model: &model,
            gpus: 1,
            share,
            gpu_hour_micros: None,
        };
        let measured = MeasuredUse::of(
            &week(profile, slice_seed, held_demand.memory.0, START_MS),
            1,
        );
        let advice = advise(&rules, &held, &measured, &offers, &|_, _| true);
        let held_hours = share.0 as f64 * HOURS_PER_MONTH as f64 / PARTS_PER_GPU as f64;
        let (smaller, undersized) = match &advice {
            Advice::Smaller { resize, .. } => {
                let next = MeasuredUse::of(
                    &week(
                        profile,
                        slice_seed,
                        held_demand.memory.0,
                        START_MS + WEEK_MINUTES * MINUTE_MS,
                    ),
                    1,
                );
                let offer = pools.iter().find(|p| p.pool == resize.pool);
                let fits = offer
                    .and_then(|o| cost(&resize.shape, &model, &o.policy).ok())
                    .is_some_and(|d| {
                        let compute_needed =
                            u64::from(held_demand.compute.0) * u64::from(next.util_p95_pct) / 100;
                        d.memory.0 >= next.peak_mem_mib && u64::from(d.compute.0) >= compute_needed
                    });
                (true, !fits)
            }
            _ => (false, false),
        };
        for row in rows
            .iter_mut()
            .filter(|r| r.variant == profile.as_str() || r.variant == "all")
        {
            row.slices += 1;
            row.held_gpu_hours_month += held_hours;
            row.freed_gpu_hours_month += advice.saves_gpu_hours_month();
            row.smaller += u64::from(smaller);
            row.undersized_next_week += u64::from(undersized);
        }
    }
    for row in &mut rows {
        if row.held_gpu_hours_month > 0.0 {
            row.freed_ratio = row.freed_gpu_hours_month / row.held_gpu_hours_month;
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_and_notebook_slices_free_most_and_training_keeps_its_size() {
        let rows = replay(200, 7);
        let row = |v: &str| rows.iter().find(|r| r.variant == v).unwrap().clone();
        let all = row("all");
        assert_eq!(all.slices, 200);
        let sum: u64 = rows
            .iter()
            .filter(|r| r.variant != "all")
            .map(|r| r.slices)
            .sum();
        assert_eq!(sum, 200);
        // Training runs at ~90 % and holds ~90 % of its memory: at its limit.
        assert_eq!(row("training").smaller, 0);
        assert!(row("idle").freed_ratio > 0.8, "{:?}", row("idle"));
        assert!(row("idle").freed_ratio > row("notebook").freed_ratio);
        assert!(all.freed_gpu_hours_month > 0.0 && all.freed_ratio < 1.0);
        // The next week of the same slices fits what was advised.
        assert_eq!(all.undersized_next_week, 0, "{all:?}");
        // Seeded: the same seed, the same figures.
        assert_eq!(replay(200, 7), rows);
    }
}
