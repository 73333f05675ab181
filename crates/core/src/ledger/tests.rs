#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::catalogue::lookup;
use proptest::prelude::*;

const H: i64 = crate::metering::HOUR_MS;
const D: u128 = PARTS_PER_GPU as u128;

fn tenant(n: u64) -> TenantId {
    TenantId::new(n as i64)
}

fn hold(id: u64, t: u64, share: GpuShare, start: i64, end: Option<i64>) -> Holding {
    Holding {
        allocation: AllocationId::new(id as i64),
        tenant: tenant(t),
        share,
        start,
        end,
        fit: HeldFit::Whole,
    }
}

fn span(from: i64, until: Option<i64>, condition: GpuCondition) -> ConditionSpan {
    ConditionSpan {
        from,
        until,
        condition,
    }
}

#[test]
fn condition_precedence() {
    use GpuCondition as C;
    let ok = HealthVerdict::Healthy;
    assert_eq!(C::of(ok, OpsMode::Available, true), C::Schedulable);
    assert_eq!(
        C::of(HealthVerdict::Degraded, OpsMode::Available, true),
        C::Schedulable
    );
    assert_eq!(
        C::of(HealthVerdict::Unhealthy, OpsMode::Cordoned, true),
        C::Unhealthy
    );
    assert_eq!(
        C::of(HealthVerdict::Unhealthy, OpsMode::Available, false),
        C::Silent
    );
    assert_eq!(C::of(ok, OpsMode::Maintenance, false), C::Maintenance);
    assert_eq!(C::of(ok, OpsMode::Draining, true), C::Draining);
    assert_eq!(C::of(ok, OpsMode::Cordoned, true), C::Draining);
}

#[test]
fn a_day_of_one_gpu_lands_in_its_buckets() {
    // 0–8 h schedulable, 8–10 h draining, 10–12 h maintenance, 12–24 h
    // schedulable again; vision holds half the GPU 2–9 h, nlp a quarter
    // 4–20 h.
    let spans = [
        span(0, Some(8 * H), GpuCondition::Schedulable),
        span(8 * H, Some(10 * H), GpuCondition::Draining),
        span(10 * H, Some(12 * H), GpuCondition::Maintenance),
        span(12 * H, None, GpuCondition::Schedulable),
    ];
    let half = GpuShare(PARTS_PER_GPU / 2);
    let quarter = GpuShare(PARTS_PER_GPU / 4);
    let holdings = [
        hold(1, 1, half, 2 * H, Some(9 * H)),
        hold(2, 2, quarter, 4 * H, Some(20 * H)),
    ];
    let b = account(&spans, &holdings, 0, 24 * H, 30 * H, |_| false);
    let h = |n: i64| D * n as u128 * H as u128;
    assert_eq!(b.tenants[&tenant(1)], h(7) / 2);
    assert_eq!(b.tenants[&tenant(2)], h(16) / 4);
    // Free while draining 8–9 h: a quarter; 9–10 h: three quarters.
    assert_eq!(b.draining, h(1) / 4 + h(1) * 3 / 4);
    // Maintenance 10–12 h with nlp's quarter still held.
    assert_eq!(b.maintenance, h(2) * 3 / 4);
    assert_eq!(b.total(), h(24));
    assert_eq!(b.overbooked + b.unrecorded, 0);
    assert!((gpu_hours(b.total()) - 24.0).abs() < 1e-9);
}

#[test]
fn time_outside_the_record_is_not_the_gpus_and_overlaps_are_flagged() {
    let spans = [span(2 * H, None, GpuCondition::Schedulable)];
    let holdings = [
        hold(1, 1, GpuShare::WHOLE, 0, Some(4 * H)),
        hold(2, 2, GpuShare(PARTS_PER_GPU / 2), 3 * H, Some(4 * H)),
    ];
    let b = account(&spans, &holdings, 0, 4 * H, 4 * H, |_| false);
    let h = |n: i64| D * n as u128 * H as u128;
    assert_eq!(b.unrecorded, h(2));
    assert_eq!(b.total(), h(2));
    assert_eq!(b.overbooked, h(1) / 2);
}

#[test]
fn a_full_mig_gpu_strands_nothing_and_a_fragmented_one_strands_its_gap() {
    let m = lookup("A100-80GB", 0);
    let policy = PoolPolicy::new(SharingMode::Mig);
    let mig = |id: u64, profile: &str, start: u8| Holding {
        allocation: AllocationId::new(id as i64),
        tenant: tenant(1),
        share: mig_share(&m, profile).unwrap(),
        start: 0,
        end: None,
        fit: HeldFit::Mig(MigPlacement::new(profile, start)),
    };
    // 4g at 0 + 2g at 4: a 1g fits at 6, the free part is usable.
    let a = [mig(1, "4g.40gb", 0), mig(2, "2g.20gb", 4)];
    let refs: Vec<&Holding> = a.iter().collect();
    assert!(!free_is_stranded(&m, &policy, &refs));
    // Allow only 2g and bigger: the free 1g gap is stranded.
    let mut only_big = policy.clone();
    only_big.allowed_mig_profiles = vec!["2g.20gb".into(), "3g.40gb".into()];
    assert!(free_is_stranded(&m, &only_big, &refs));
    let b = account(
        &[span(0, None, GpuCondition::Schedulable)],
        &a,
        0,
        H,
        H,
        |held| free_is_stranded(&m, &only_big, held),
    );
    assert_eq!(b.stranded, D / 7 * H as u128);
    assert_eq!(b.total(), D * H as u128);
    // Seven 1g: the GPU is all billed.
    let seven: Vec<Holding> = (0..7).map(|i| mig(i + 10, "1g.10gb", i as u8)).collect();
    let b = account(
        &[span(0, None, GpuCondition::Schedulable)],
        &seven,
        0,
        H,
        H,
        |_| true,
    );
    assert_eq!(b.allocated(), D * H as u128);
}

#[test]
fn mps_and_time_slices_strand_only_when_full() {
    let m = lookup("L4", 0);
    let mut ts = PoolPolicy::new(SharingMode::TimeSlicing);
    ts.time_slice_replicas = 2;
    let r = |id| Holding {
        fit: HeldFit::TimeSlice,
        ..hold(id, 1, GpuShare(PARTS_PER_GPU / 2), 0, None)
    };
    let (a, b) = (r(1), r(2));
    assert!(!free_is_stranded(&m, &ts, &[&a]));
    assert!(free_is_stranded(&m, &ts, &[&a, &b]));
    assert!(!free_is_stranded(&m, &ts, &[]));
    let mps = PoolPolicy::new(SharingMode::Mps);
    let client = |id, pct: u8, mib: u64| Holding {
        fit: HeldFit::Mps {
            compute_percent: pct,
            memory: MemMiB(mib),
        },
        ..hold(id, 1, GpuShare(0), 0, None)
    };
    let (c, d) = (client(1, 60, 1000), client(2, 40, 1000));
    assert!(!free_is_stranded(&m, &mps, &[&c]));
    assert!(free_is_stranded(&m, &mps, &[&c, &d]), "no threads left");
    let e = client(3, 10, m.memory_mib);
    assert!(free_is_stranded(&m, &mps, &[&e]), "no memory left");
}

fn condition() -> impl Strategy<Value = GpuCondition> {
    prop::sample::select(GpuCondition::ALL.to_vec())
}

/// The buckets by brute force: every millisecond on its own.
fn by_millisecond(
    spans: &[ConditionSpan],
    holdings: &[Holding],
    from: i64,
    to: i64,
    now: i64,
    stranded: impl Fn(&[&Holding]) -> bool,
) -> Buckets {
    let mut out = Buckets::default();
    for t in from..to.min(now) {
        let mut active: Vec<&Holding> = holdings
            .iter()
            .filter(|h| h.start <= t && t < h.end.unwrap_or(now))
            .collect();
        active.sort_by_key(|h| h.allocation);
        let Some(span) = spans
            .iter()
            .find(|s| s.from <= t && t < s.until.unwrap_or(now))
        else {
            out.unrecorded += active.iter().map(|h| u128::from(h.share.0)).sum::<u128>();
            continue;
        };
        let mut left = D;
        for h in &active {
            let billed = u128::from(h.share.0).min(left);
            left -= billed;
            *out.tenants.entry(h.tenant).or_default() += billed;
            out.overbooked += u128::from(h.share.0) - billed;
        }
        if left > 0 {
            out.free(span.condition, stranded(&active), left);
        }
    }
    out.tenants.retain(|_, v| *v > 0);
    out
}

proptest! {
    /// Random lifecycles of one GPU: a history of conditions with gaps
    /// (enrolled late, gone for a while, decommissioned), slices of random
    /// shares coming and going, sometimes more than the GPU. The interval
    /// arithmetic agrees with a millisecond-by-millisecond count in every
    /// bucket, and the buckets add up to the recorded time × one GPU.
    #[test]
    fn the_buckets_add_up_to_the_recorded_gpu_time(
        cuts in prop::collection::vec(0i64..2_000, 1..8),
        conditions in prop::collection::vec(condition(), 8),
        gaps in prop::collection::vec(any::<bool>(), 8),
        open_end in any::<bool>(),
        slices in prop::collection::vec((0i64..2_000, 1i64..1_200, 0u64..3, any::<bool>(), 1u64..8), 0..6),
        window in (0i64..1_000, 1_000i64..2_400),
        now in 1_200i64..2_600,
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        cuts.dedup();
        let spans: Vec<ConditionSpan> = cuts
            .windows(2)
            .enumerate()
            .filter(|(i, _)| !gaps[*i % 8])
            .map(|(i, w)| span(w[0], Some(w[1]), conditions[i % 8]))
            .chain(open_end.then(|| span(*cuts.last().unwrap(), None, conditions[7])))
            .collect();
        let holdings: Vec<Holding> = slices
            .iter()
            .enumerate()
            .map(|(i, (start, len, t, running, eighths))| {
                let share = GpuShare(PARTS_PER_GPU / 8 * eighths - i as u64 * 7);
                hold(i as u64 + 1, *t, share, *start, (!running).then_some(start + len))
            })
            .collect();
        let (from, to) = window;
        let stranded = |held: &[&Holding]| held.len() % 2 == 1;
        let b = account(&spans, &holdings, from, to, now, stranded);
        let mut got = b.clone();
        got.tenants.retain(|_, v| *v > 0);
        let want = by_millisecond(&spans, &holdings, from, to, now, stranded);
        prop_assert_eq!(&got, &want);
        let end = to.min(now);
        let overlap = |a: i64, b: i64| u128::try_from((b.min(end) - a.max(from)).max(0)).unwrap();
        let recorded: u128 = spans.iter().map(|s| overlap(s.from, s.until.unwrap_or(now))).sum();
        prop_assert_eq!(b.total(), recorded * D);
    }
}
