//! GPU telemetry: the load simulated hosts produce, and the per-minute
//! rollups that metering and the charts read.
//!
//! What a sample means (the agent fills it from NVML on real hosts):
//! - `util_pct`: percent of the sample period during which one or more
//!   kernels ran on the GPU (`nvmlDeviceGetUtilizationRates().gpu`, DCGM's
//!   `DCGM_FI_DEV_GPU_UTIL`); for a MIG device, the graphics-engine activity
//!   of that instance where the driver measures it (GPM on Hopper,
//!   `DCGM_FI_PROF_GR_ENGINE_ACTIVE`), otherwise unknown;
//! - memory used in MiB (`nvmlDeviceGetMemoryInfo().used`, per MIG device
//!   from the MIG device handle; `DCGM_FI_DEV_FB_USED`).
//!
//! Used GPU-time of a slice is its utilisation times the time it covers,
//! in whole milliseconds ("busy ms"), so metering stays integer and exact.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Milliseconds in a minute.
pub const MINUTE_MS: i64 = 60_000;

/// How long after a minute ends its rollup waits for the rest of its
/// samples. Agents send what they sampled once a minute, each at its own
/// phase, so a minute's samples come in two batches: the first while the
/// minute runs, the last up to a minute after it ended. Rolled up when it
/// ended, every minute would be rolled up twice (and the second time
/// while ingest marks it again); a minute and 5 s on (a batch in flight),
/// once. A batch later still (an agent catching up) marks its minute due
/// again and it is rolled up again, so waiting only saves work.
pub const ROLLUP_SETTLE_MS: i64 = 65_000;

/// How busy a simulated slice is over time, so the demo and the tests have
/// real-looking, reproducible load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadProfile {
    /// Nothing runs.
    Idle,
    /// A notebook: mostly idle, with bursts of work (about one 5-minute
    /// window in five).
    #[default]
    Notebook,
    /// Training: steady around 90 %.
    Training,
    /// Inference: follows the day, busiest in the afternoon (UTC).
    Inference,
}

impl WorkloadProfile {
    /// Every profile.
    pub const ALL: [Self; 4] = [Self::Idle, Self::Notebook, Self::Training, Self::Inference];

    /// The name configuration files use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Notebook => "notebook",
            Self::Training => "training",
            Self::Inference => "inference",
        }
    }

    /// Utilisation in percent at `at_ms` of the device seeded `seed`:
    /// a pure function of its arguments.
    pub fn utilisation_pct(self, seed: u64, at_ms: i64) -> u8 {
        let jitter = |bucket: i64, span: u64| mix(seed, bucket) % span;
        let minute = at_ms.div_euclid(MINUTE_MS);
        let pct = match self {
            Self::Idle => 0,
            Self::Notebook => {
                let window = at_ms.div_euclid(5 * MINUTE_MS);
                if mix(seed ^ 0x6e6f_7465, window).is_multiple_of(5) {
                    55 + jitter(minute, 41)
                } else {
                    jitter(minute, 4)
                }
            }
            Self::Training => 86 + jitter(minute, 11),
            Self::Inference => {
                // Hour of the day, 0..24, with the peak at 15:00 UTC.
                let hour = at_ms.rem_euclid(24 * 60 * MINUTE_MS) / (60 * MINUTE_MS);
                let from_peak = (hour - 15).abs().min(24 - (hour - 15).abs());
                let base = 75 - 5 * from_peak as u64;
                base.saturating_sub(jitter(minute, 8)).max(8)
            }
        };
        u8::try_from(pct.min(100)).unwrap_or(100)
    }

    /// Memory in use, in MiB of a device with `total_mib` (held steady: a
    /// process keeps what it allocated; `_at_ms` for later profiles).
    pub fn memory_used_mib(self, seed: u64, _at_ms: i64, total_mib: u64) -> u64 {
        let permille: u64 = match self {
            Self::Idle => 0,
            // A notebook holds its model between bursts.
            Self::Notebook => 250 + mix(seed, 1) % 200,
            Self::Training => 850 + mix(seed, 2) % 100,
            Self::Inference => 500 + mix(seed, 3) % 200,
        };
        total_mib * permille / 1000
    }
}

impl fmt::Display for WorkloadProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WorkloadProfile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.as_str()).collect();
                format!(
                    "unknown workload profile '{s}'; one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A well-mixed 64-bit hash of a seed and a bucket (splitmix64's finaliser).
fn mix(seed: u64, bucket: i64) -> u64 {
    let mut z = seed ^ (bucket as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A stable seed for a device from its UUID (FNV-1a), so a simulated
/// device's load does not depend on the process that simulates it.
pub fn seed_of(uuid: &str) -> u64 {
    uuid.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One sample of one device, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When (ms since the epoch).
    pub at_ms: i64,
    /// Utilisation, percent.
    pub util_pct: u8,
    /// Memory used, MiB.
    pub mem_used_mib: u64,
    /// How long the sample stands for (the agent's sampling interval), ms.
    pub covered_ms: u32,
    /// Thousandths of a GPU the slice holds on the device (a MIG slice's
    /// compute slices / 7, an MPS client's compute %, ...; 0 when no slice
    /// holds it).
    pub weight_milli: u32,
}

impl Sample {
    /// Busy time this sample stands for: utilisation × covered time, in ms
    /// (exact while the interval is a multiple of 100 ms, as agents send).
    pub fn busy_ms(&self) -> u64 {
        u64::from(self.covered_ms) * u64::from(self.util_pct) / 100
    }

    /// Used GPU time in GPU-thousandths × ms: busy time × the slice's share.
    pub fn used_milli_ms(&self) -> u64 {
        self.busy_ms() * u64::from(self.weight_milli)
    }
}

/// The aggregate of one device over one period (a minute or an hour).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rollup {
    /// Start of the period (ms since the epoch).
    pub start_ms: i64,
    /// Samples in it.
    pub samples: u32,
    /// Lowest utilisation, percent.
    pub util_min: u8,
    /// Mean utilisation over the time covered (busy / covered), percent,
    /// rounded down.
    pub util_avg: u8,
    /// Highest utilisation, percent.
    pub util_max: u8,
    /// 95th percentile of utilisation (nearest rank over the samples; for
    /// an hour, over its minutes' means), percent.
    pub util_p95: u8,
    /// Utilisation × time, ms (see [`Sample::busy_ms`]).
    pub busy_ms: u64,
    /// Time the samples stand for, ms.
    pub covered_ms: u64,
    /// Used GPU time, GPU-thousandths × ms (see [`Sample::used_milli_ms`]).
    pub used_milli_ms: u64,
    /// Most memory used, MiB.
    pub mem_max_mib: u64,
}

fn mean_pct(busy_ms: u64, covered_ms: u64) -> u8 {
    u8::try_from((busy_ms * 100).checked_div(covered_ms).unwrap_or(0)).unwrap_or(100)
}

/// The 95th percentile by nearest rank (`values` need not be sorted).
pub fn p95(values: &mut [u8]) -> u8 {
    percentile(values, 95).unwrap_or(0)
}

/// The `pct` percentile (0-100) by nearest rank; sorts `values`.
pub fn percentile<T: Ord + Copy>(values: &mut [T], pct: u8) -> Option<T> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    // Nearest rank: ceil(pct/100 × n), 1-based.
    let rank = (usize::from(pct.min(100)) * values.len())
        .div_ceil(100)
        .max(1);
    values.get(rank - 1).copied()
}

/// How busy a MIG GPU is: its instances' utilisation weighted by their
/// compute slices, over the instances measured (`(compute slices,
/// utilisation)`); `None` when none is.
pub fn weighted_busy_pct(instances: &[(u8, Option<u8>)]) -> Option<u8> {
    let (busy, slices) = instances
        .iter()
        .filter_map(|(g, u)| u.map(|u| (u32::from(*g) * u32::from(u), u32::from(*g))))
        .fold((0u32, 0u32), |(b, s), (bi, si)| (b + bi, s + si));
    busy.checked_div(slices)
        .map(|p| u8::try_from(p).unwrap_or(100))
}

/// Aggregates `samples` (of one device) into periods of `period_ms`
/// aligned to the epoch, in time order.
pub fn roll_up(samples: &[Sample], period_ms: i64) -> Vec<Rollup> {
    let mut by_period: std::collections::BTreeMap<i64, Vec<&Sample>> = Default::default();
    for s in samples {
        by_period
            .entry(s.at_ms.div_euclid(period_ms) * period_ms)
            .or_default()
            .push(s);
    }
    by_period
        .into_iter()
        .map(|(start_ms, group)| {
            let mut utils: Vec<u8> = group.iter().map(|s| s.util_pct).collect();
            let busy_ms = group.iter().map(|s| s.busy_ms()).sum();
            let covered_ms = group.iter().map(|s| u64::from(s.covered_ms)).sum();
            Rollup {
                start_ms,
                samples: u32::try_from(group.len()).unwrap_or(u32::MAX),
                util_min: utils.iter().copied().min().unwrap_or(0),
                util_max: utils.iter().copied().max().unwrap_or(0),
                util_avg: mean_pct(busy_ms, covered_ms),
                util_p95: p95(&mut utils),
                busy_ms,
                covered_ms,
                used_milli_ms: group.iter().map(|s| s.used_milli_ms()).sum(),
                mem_max_mib: group.iter().map(|s| s.mem_used_mib).max().unwrap_or(0),
            }
        })
        .collect()
}

/// Combines rollups of shorter periods (an hour's minutes) into one that
/// starts at `start_ms`: sums, extremes, the mean over the time covered, and
/// the 95th percentile of the parts' means. `None` without parts.
pub fn combine(parts: &[Rollup], start_ms: i64) -> Option<Rollup> {
    if parts.is_empty() {
        return None;
    }
    let busy_ms = parts.iter().map(|r| r.busy_ms).sum();
    let covered_ms = parts.iter().map(|r| r.covered_ms).sum();
    let mut means: Vec<u8> = parts.iter().map(|r| r.util_avg).collect();
    Some(Rollup {
        start_ms,
        samples: parts.iter().map(|r| r.samples).sum(),
        util_min: parts.iter().map(|r| r.util_min).min().unwrap_or(0),
        util_max: parts.iter().map(|r| r.util_max).max().unwrap_or(0),
        util_avg: mean_pct(busy_ms, covered_ms),
        util_p95: p95(&mut means),
        busy_ms,
        covered_ms,
        used_milli_ms: parts.iter().map(|r| r.used_milli_ms).sum(),
        mem_max_mib: parts.iter().map(|r| r.mem_max_mib).max().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let mut waits: Vec<i64> = (1..=20).rev().collect();
        assert_eq!(percentile(&mut waits, 50), Some(10));
        assert_eq!(percentile(&mut waits, 95), Some(19));
        assert_eq!(percentile(&mut waits, 100), Some(20));
        assert_eq!(percentile(&mut [7], 95), Some(7));
        assert_eq!(percentile::<i64>(&mut [], 50), None);
    }

    #[test]
    fn mig_gpus_are_as_busy_as_their_instances_weighted_by_slices() {
        // A 4g at 90 % and a 3g at 20 %: (360 + 60) / 7 = 60 %.
        assert_eq!(weighted_busy_pct(&[(4, Some(90)), (3, Some(20))]), Some(60));
        // Unmeasured instances do not count.
        assert_eq!(weighted_busy_pct(&[(1, Some(50)), (2, None)]), Some(50));
        assert_eq!(weighted_busy_pct(&[(2, None)]), None);
        assert_eq!(weighted_busy_pct(&[]), None);
    }

    const DAY: i64 = 24 * 60 * MINUTE_MS;

    fn mean(profile: WorkloadProfile, seed: u64) -> f64 {
        let n = 6 * 60 * 24;
        let sum: u64 = (0..n)
            .map(|i| u64::from(profile.utilisation_pct(seed, 1_800_000_000_000 + i * 10_000)))
            .sum();
        sum as f64 / n as f64
    }

    #[test]
    fn profiles_look_like_their_workloads_and_repeat_exactly() {
        let seed = seed_of("MIG-1234");
        assert_eq!(mean(WorkloadProfile::Idle, seed), 0.0);
        let training = mean(WorkloadProfile::Training, seed);
        assert!((86.0..=96.0).contains(&training), "{training}");
        let notebook = mean(WorkloadProfile::Notebook, seed);
        assert!((5.0..=25.0).contains(&notebook), "{notebook}");
        let inference = mean(WorkloadProfile::Inference, seed);
        assert!((25.0..=60.0).contains(&inference), "{inference}");
        // Inference follows the day: the afternoon is busier than the night.
        let at =
            |h: i64| WorkloadProfile::Inference.utilisation_pct(seed, 20_000 * DAY + h * 3_600_000);
        assert!(at(15) > at(3) + 30, "{} vs {}", at(15), at(3));
        // The same device at the same moment: the same figure, every time.
        for p in WorkloadProfile::ALL {
            assert_eq!(
                p.utilisation_pct(seed, 1_234_567),
                p.utilisation_pct(seed, 1_234_567)
            );
            assert!(p.utilisation_pct(seed, 99) <= 100);
        }
        // Two devices do not move in lockstep.
        let other = seed_of("MIG-5678");
        let differ = (0..100)
            .filter(|i| {
                WorkloadProfile::Notebook.utilisation_pct(seed, i * MINUTE_MS)
                    != WorkloadProfile::Notebook.utilisation_pct(other, i * MINUTE_MS)
            })
            .count();
        assert!(differ > 50, "{differ}");
        let training_mem = WorkloadProfile::Training.memory_used_mib(seed, 0, 10_000);
        assert!((8_500..9_500).contains(&training_mem), "{training_mem}");
        assert_eq!(WorkloadProfile::Idle.memory_used_mib(seed, 0, 10_000), 0);
        assert_eq!(
            "training".parse::<WorkloadProfile>(),
            Ok(WorkloadProfile::Training)
        );
        assert!("busy"
            .parse::<WorkloadProfile>()
            .unwrap_err()
            .contains("notebook"));
    }

    #[test]
    fn minutes_aggregate_by_hand() {
        let s = |at_ms, util_pct| Sample {
            at_ms,
            util_pct,
            mem_used_mib: u64::from(util_pct) * 10,
            covered_ms: 10_000,
            weight_milli: 142,
        };
        // Minute 0: 0, 50, 100 (10 s each); minute 1: 30.
        let rolled = roll_up(
            &[s(0, 0), s(10_000, 50), s(59_999, 100), s(60_000, 30)],
            MINUTE_MS,
        );
        assert_eq!(
            rolled,
            vec![
                Rollup {
                    start_ms: 0,
                    samples: 3,
                    util_min: 0,
                    util_avg: 50,
                    util_max: 100,
                    util_p95: 100,
                    busy_ms: 15_000,
                    covered_ms: 30_000,
                    used_milli_ms: 15_000 * 142,
                    mem_max_mib: 1000,
                },
                Rollup {
                    start_ms: 60_000,
                    samples: 1,
                    util_min: 30,
                    util_avg: 30,
                    util_max: 30,
                    util_p95: 30,
                    busy_ms: 3_000,
                    covered_ms: 10_000,
                    used_milli_ms: 3_000 * 142,
                    mem_max_mib: 300,
                },
            ]
        );
        // The hour of those two minutes: 18 s busy of 40 s covered = 45 %.
        let hour = combine(&rolled, 0).unwrap();
        assert_eq!(
            (hour.samples, hour.util_min, hour.util_avg, hour.util_max),
            (4, 0, 45, 100)
        );
        assert_eq!(hour.util_p95, 50);
        assert_eq!((hour.busy_ms, hour.covered_ms), (18_000, 40_000));
        assert_eq!(hour.used_milli_ms, 18_000 * 142);
        assert_eq!(combine(&[], 0), None);
        // Before the epoch, too: periods are aligned by floor division.
        assert_eq!(roll_up(&[s(-1, 10)], MINUTE_MS)[0].start_ms, -MINUTE_MS);
    }

    #[test]
    fn p95_is_the_nearest_rank() {
        assert_eq!(p95(&mut []), 0);
        assert_eq!(p95(&mut [7]), 7);
        let mut v: Vec<u8> = (1..=100).rev().collect();
        assert_eq!(p95(&mut v), 95);
        let mut v: Vec<u8> = (1..=20).collect();
        assert_eq!(p95(&mut v), 19);
    }
}
