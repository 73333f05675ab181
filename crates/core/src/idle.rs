//! Idle reclaim ("scale to zero"): a pool may say that a slice whose
//! utilisation stays below a threshold for a while is warned, and released
//! if its owner does not keep it by a deadline. The rule is pure: it reads
//! the slice's per-minute telemetry rollups and the clock it is given.
//!
//! A minute without telemetry is never idle: Tessera only reclaims what it
//! has measured, so an agent that stops sending cannot get slices taken
//! away.

use crate::ids::AllocationId;
use crate::placement::Slice;
use crate::plan::GpuObserved;
use serde::{Deserialize, Serialize};

pub use crate::telemetry::MINUTE_MS;
use crate::telemetry::ROLLUP_SETTLE_MS;

/// Whole minutes the newest rollups may lag behind the clock: a minute is
/// rolled up [`ROLLUP_SETTLE_MS`] after it ends, by the next round (which
/// leaves the rounds most of a minute to spare).
pub const ROLLUP_LAG_MINUTES: i64 = 2;
const _: () = assert!(ROLLUP_SETTLE_MS + MINUTE_MS / 2 <= ROLLUP_LAG_MINUTES * MINUTE_MS);

/// A pool's idle reclaim policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IdlePolicy {
    /// A minute whose mean utilisation is below this percent is idle.
    #[serde(default = "default_below_pct")]
    pub below_pct: u8,
    /// Idle this many minutes in a row: the owner is warned.
    pub idle_minutes: u32,
    /// Minutes the owner has after the warning to keep the slice; then it
    /// is released.
    #[serde(default = "default_notice_minutes")]
    pub notice_minutes: u32,
    /// How often an owner may keep one slice (0: never).
    #[serde(default = "default_max_keeps")]
    pub max_keeps: u32,
}

fn default_below_pct() -> u8 {
    15
}

fn default_notice_minutes() -> u32 {
    60
}

fn default_max_keeps() -> u32 {
    2
}

/// What is wrong with a policy: the field (inside `idle_reclaim`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdlePolicyError {
    /// `below_pct`, `idle_minutes`, ...
    pub field: &'static str,
    /// What would be right.
    pub reason: String,
}

impl IdlePolicy {
    /// A policy: idle below `below_pct` for `idle_minutes`, with the
    /// default notice and keeps.
    pub fn new(below_pct: u8, idle_minutes: u32) -> Self {
        Self {
            below_pct,
            idle_minutes,
            notice_minutes: default_notice_minutes(),
            max_keeps: default_max_keeps(),
        }
    }

    /// Checks the figures.
    pub fn validate(&self) -> Result<(), IdlePolicyError> {
        let bad = |field, reason: &str| {
            Err(IdlePolicyError {
                field,
                reason: reason.to_owned(),
            })
        };
        if self.below_pct == 0 || self.below_pct > 100 {
            return bad("below_pct", "must be between 1 and 100 (percent)");
        }
        if !(5..=30 * 24 * 60).contains(&self.idle_minutes) {
            return bad("idle_minutes", "must be between 5 and 43200 (30 days)");
        }
        if !(1..=7 * 24 * 60).contains(&self.notice_minutes) {
            return bad("notice_minutes", "must be between 1 and 10080 (a week)");
        }
        if self.max_keeps > 100 {
            return bad("max_keeps", "must be at most 100");
        }
        Ok(())
    }

    /// Whether a minute with this mean utilisation is idle.
    pub fn idle_minute(&self, util_avg_pct: u8) -> bool {
        util_avg_pct < self.below_pct
    }
}

/// One minute of a slice's telemetry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinuteUse {
    /// Start of the minute (ms).
    pub start_ms: i64,
    /// Mean utilisation over the samples of the minute.
    pub util_avg_pct: u8,
}

/// Where a watched slice stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleVerdict {
    /// Busy in the window, watched for too short a time, or not measured
    /// throughout.
    InUse,
    /// Measured idle for the whole window.
    Idle,
}

/// Judges a slice watched since `watch_from_ms` as [`judge`] does, and
/// keeps one that processes hold (where the driver tells) in use: a slice
/// is idle only when it is measured idle and nothing runs on it.
pub fn judge_held(
    policy: &IdlePolicy,
    minutes: &[MinuteUse],
    held: Option<bool>,
    watch_from_ms: i64,
    now_ms: i64,
) -> IdleVerdict {
    if held == Some(true) {
        return IdleVerdict::InUse;
    }
    judge(policy, minutes, watch_from_ms, now_ms)
}

/// Judges a slice watched since `watch_from_ms` (its start, or when its
/// owner last kept it): idle when the last `idle_minutes` whole minutes
/// that the rollups have surely folded in (those ending
/// [`ROLLUP_LAG_MINUTES`] before `now_ms`) all lie within the watch, and
/// each was measured and idle. `minutes` may hold other minutes too, in any
/// order.
pub fn judge(
    policy: &IdlePolicy,
    minutes: &[MinuteUse],
    watch_from_ms: i64,
    now_ms: i64,
) -> IdleVerdict {
    let end = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS - ROLLUP_LAG_MINUTES * MINUTE_MS;
    let first = end - i64::from(policy.idle_minutes) * MINUTE_MS;
    let watched_from = (watch_from_ms + MINUTE_MS - 1).div_euclid(MINUTE_MS) * MINUTE_MS;
    if first < watched_from {
        return IdleVerdict::InUse;
    }
    let all_idle = (0..i64::from(policy.idle_minutes)).all(|i| {
        let start = first + i * MINUTE_MS;
        minutes
            .iter()
            .any(|m| m.start_ms == start && policy.idle_minute(m.util_avg_pct))
    });
    if all_idle {
        IdleVerdict::Idle
    } else {
        IdleVerdict::InUse
    }
}

/// Whether the driver says processes hold the slice, from its GPUs' latest
/// reports: its MIG instance is in use, or processes run on its whole GPUs.
/// A shared slice (MPS, time-slicing) is held when a process naming it
/// (`TESSERA_ALLOCATION`) runs on its GPU; without one the host cannot
/// tell (an untagged process may be its). `None` where the driver cannot
/// tell, and for a GPU not reported yet.
pub fn held_by_processes(
    allocation: AllocationId,
    slice: &Slice,
    gpus: &[Option<&GpuObserved>],
) -> Option<bool> {
    match slice {
        Slice::Mig(m) => {
            let observed = gpus.first().copied().flatten()?;
            observed
                .instances
                .iter()
                .find(|i| i.placement.start == m.start)
                .map(|i| i.in_use)
        }
        Slice::Whole => {
            let mut any = false;
            for g in gpus {
                any |= g.as_ref()?.processes_running;
            }
            (!gpus.is_empty()).then_some(any)
        }
        Slice::Shared { .. } => {
            let observed = gpus.first().copied().flatten()?;
            observed
                .allocations_running
                .contains(&allocation)
                .then_some(true)
        }
        Slice::HostOnly => None,
    }
}

/// What reclaiming a slice gave back: its share of a GPU (in any unit:
/// the ledger's parts) × the milliseconds its lease still had to run (0
/// without a lease end or when it was past).
pub fn reclaimed_gpu_time(share: u64, reclaimed_ms: i64, lease_end_ms: Option<i64>) -> u128 {
    let left = lease_end_ms.map_or(0, |end| end.saturating_sub(reclaimed_ms).max(0));
    u128::from(share) * u128::try_from(left).unwrap_or(0)
}

/// Why a keep is refused, if it is.
pub fn keep_refusal(policy: &IdlePolicy, kept: u32) -> Option<String> {
    (kept >= policy.max_keeps).then(|| {
        format!(
            "this slice was kept {kept} time{} already; the pool allows {} (release it and ask again when you need it)",
            if kept == 1 { "" } else { "s" },
            policy.max_keeps
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: i64 = MINUTE_MS;

    fn minutes(from: i64, utils: &[u8]) -> Vec<MinuteUse> {
        utils
            .iter()
            .enumerate()
            .map(|(i, u)| MinuteUse {
                start_ms: from + i as i64 * M,
                util_avg_pct: *u,
            })
            .collect()
    }

    #[test]
    fn a_slice_measured_idle_for_the_window_is_idle() {
        let p = IdlePolicy::new(15, 10);
        // Watched from 0; at minute 20 the window is minutes 8 to 17
        // (minutes 18 and 19 may not be rolled up yet).
        let all = minutes(0, &[3; 20]);
        assert_eq!(judge(&p, &all, 0, 20 * M), IdleVerdict::Idle);
        // One busy minute inside the window keeps it.
        let mut busy = all.clone();
        busy[14].util_avg_pct = 15;
        assert_eq!(judge(&p, &busy, 0, 20 * M), IdleVerdict::InUse);
        // A busy minute before the window, or in the lag, does not count.
        let mut early = all.clone();
        early[5].util_avg_pct = 90;
        early[19].util_avg_pct = 90;
        assert_eq!(judge(&p, &early, 0, 20 * M), IdleVerdict::Idle);
    }

    #[test]
    fn unmeasured_or_young_slices_are_in_use() {
        let p = IdlePolicy::new(15, 10);
        // A minute missing from the window: not measured, not idle.
        let mut gap = minutes(0, &[0; 20]);
        gap.remove(12);
        assert_eq!(judge(&p, &gap, 0, 20 * M), IdleVerdict::InUse);
        assert_eq!(judge(&p, &[], 0, 20 * M), IdleVerdict::InUse);
        // Watched from minute 11 only (started, or kept, then).
        let all = minutes(0, &[0; 20]);
        assert_eq!(judge(&p, &all, 11 * M, 20 * M), IdleVerdict::InUse);
        // Kept just after minute 5: judged on minutes 6 to 15 once they are
        // rolled up, at minute 18.
        assert_eq!(judge(&p, &all, 5 * M + 1, 16 * M), IdleVerdict::InUse);
        assert_eq!(judge(&p, &all, 5 * M + 1, 18 * M), IdleVerdict::Idle);
    }

    #[test]
    fn processes_keep_a_slice_in_use_where_the_driver_tells() {
        use crate::mig::MigPlacement;
        use crate::plan::ObservedInstance;
        let instance = |start: u8, in_use: bool| ObservedInstance {
            placement: MigPlacement {
                profile: "1g.10gb".into(),
                start,
            },
            compute_instances: Vec::new(),
            in_use,
        };
        let mig = GpuObserved {
            mig_enabled: true,
            instances: vec![instance(0, false), instance(1, true)],
            ..GpuObserved::default()
        };
        let on = |start: u8| {
            Slice::Mig(MigPlacement {
                profile: "1g.10gb".into(),
                start,
            })
        };
        assert_eq!(
            held_by_processes(AllocationId::new(1), &on(1), &[Some(&mig)]),
            Some(true)
        );
        assert_eq!(
            held_by_processes(AllocationId::new(1), &on(0), &[Some(&mig)]),
            Some(false)
        );
        // Not reported yet, or the instance is not in the report.
        assert_eq!(
            held_by_processes(AllocationId::new(1), &on(0), &[None]),
            None
        );
        assert_eq!(
            held_by_processes(AllocationId::new(1), &on(4), &[Some(&mig)]),
            None
        );
        let busy = GpuObserved {
            processes_running: true,
            ..GpuObserved::default()
        };
        let free = GpuObserved::default();
        assert_eq!(
            held_by_processes(
                AllocationId::new(1),
                &Slice::Whole,
                &[Some(&free), Some(&busy)]
            ),
            Some(true)
        );
        assert_eq!(
            held_by_processes(AllocationId::new(1), &Slice::Whole, &[Some(&free)]),
            Some(false)
        );
        assert_eq!(
            held_by_processes(AllocationId::new(1), &Slice::Whole, &[Some(&free), None]),
            None
        );
        // A shared GPU's process list is every client's.
        let shared = Slice::Shared {
            compute: crate::units::ComputeMilli(250),
            memory: crate::units::MemMiB(4096),
        };
        assert_eq!(
            held_by_processes(AllocationId::new(1), &shared, &[Some(&busy)]),
            None
        );
        // ...but a process naming the slice holds it.
        let tagged = GpuObserved {
            processes_running: true,
            allocations_running: vec![AllocationId::new(1)],
            ..GpuObserved::default()
        };
        assert_eq!(
            held_by_processes(AllocationId::new(1), &shared, &[Some(&tagged)]),
            Some(true)
        );
        assert_eq!(
            held_by_processes(AllocationId::new(2), &shared, &[Some(&tagged)]),
            None
        );

        // Held: in use whatever the telemetry says; unknown or free: judged.
        let p = IdlePolicy::new(15, 10);
        let idle = minutes(0, &[0; 20]);
        assert_eq!(
            judge_held(&p, &idle, Some(true), 0, 20 * M),
            IdleVerdict::InUse
        );
        assert_eq!(
            judge_held(&p, &idle, Some(false), 0, 20 * M),
            IdleVerdict::Idle
        );
        assert_eq!(judge_held(&p, &idle, None, 0, 20 * M), IdleVerdict::Idle);
    }

    #[test]
    fn policies_are_checked_and_keeps_are_limited() {
        assert!(IdlePolicy::new(15, 120).validate().is_ok());
        assert_eq!(
            IdlePolicy::new(0, 120).validate().unwrap_err().field,
            "below_pct"
        );
        assert_eq!(
            IdlePolicy::new(101, 120).validate().unwrap_err().field,
            "below_pct"
        );
        assert_eq!(
            IdlePolicy::new(15, 4).validate().unwrap_err().field,
            "idle_minutes"
        );
        let p = IdlePolicy {
            notice_minutes: 0,
            ..IdlePolicy::new(15, 60)
        };
        assert_eq!(p.validate().unwrap_err().field, "notice_minutes");
        let p = IdlePolicy::new(15, 60);
        assert_eq!(keep_refusal(&p, 1), None);
        assert!(keep_refusal(&p, 2)
            .unwrap()
            .contains("kept 2 times already; the pool allows 2"));
        let never = IdlePolicy { max_keeps: 0, ..p };
        assert!(keep_refusal(&never, 0).is_some());
        // A 3g slice (3/7 = 428 milli) reclaimed 2 h before its lease end.
        let h = 3_600_000;
        assert_eq!(
            reclaimed_gpu_time(428, 10 * h, Some(12 * h)),
            428 * 2 * h as u128
        );
        assert_eq!(reclaimed_gpu_time(428, 10 * h, Some(9 * h)), 0);
        assert_eq!(reclaimed_gpu_time(428, 10 * h, None), 0);
        // The wire form: defaults fill what a pool file leaves out.
        let parsed: IdlePolicy = serde_json::from_str(r#"{"idle_minutes": 90}"#).unwrap();
        assert_eq!(parsed, IdlePolicy::new(15, 90));
    }
}
