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

proptest! {
    /// Random lifecycles of one GPU: a history of conditions (possibly
    /// starting late and ending early: enrolled, decommissioned), slices of
    /// random shares coming and going within it. The buckets add up to the
    /// recorded time × one GPU exactly, and each tenant gets exactly its
    /// shares × overlap.
    #[test]
    fn the_buckets_add_up_to_the_recorded_gpu_time(
        cuts in prop::collection::vec(0i64..100_000, 1..8),
        conditions in prop::collection::vec(condition(), 8),
        open_end in any::<bool>(),
        slices in prop::collection::vec((0i64..100_000, 1i64..60_000, 0u64..4, any::<bool>()), 0..6),
        window in (0i64..50_000, 50_000i64..120_000),
        now in 60_000i64..130_000,
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        cuts.dedup();
        let spans: Vec<ConditionSpan> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| span(w[0], Some(w[1]), conditions[i % 8]))
            .chain(open_end.then(|| span(*cuts.last().unwrap(), None, conditions[7])))
            .collect();
        // Shares of at most a quarter each: four never overbook.
        let holdings: Vec<Holding> = slices
            .iter()
            .enumerate()
            .map(|(i, (start, len, t, running))| {
                let share = GpuShare(PARTS_PER_GPU / 4 - i as u64 * 7);
                hold(i as u64 + 1, *t, share, *start, (!running).then_some(start + len))
            })
            .collect();
        let holdings: Vec<Holding> = holdings.into_iter().take(4).collect();
        let (from, to) = window;
        let b = account(&spans, &holdings, from, to, now, |held| held.len() % 2 == 1);
        let end = to.min(now);
        let overlap = |a: i64, b: i64| u128::try_from((b.min(end) - a.max(from)).max(0)).unwrap();
        let recorded: u128 = spans.iter().map(|s| overlap(s.from, s.until.unwrap_or(now))).sum();
        prop_assert_eq!(b.total(), recorded * D);
        prop_assert_eq!(b.overbooked, 0);
        // Each tenant: share × time its slices overlap the record.
        let mut want: BTreeMap<TenantId, u128> = BTreeMap::new();
        for h in &holdings {
            let hs = h.start;
            let he = h.end.unwrap_or(now);
            let inside: u128 = spans
                .iter()
                .map(|s| overlap(hs.max(s.from), he.min(s.until.unwrap_or(now))))
                .sum();
            if inside > 0 {
                *want.entry(h.tenant).or_default() += inside * u128::from(h.share.0);
            }
        }
        let got: BTreeMap<TenantId, u128> = b.tenants.iter().filter(|(_, v)| **v > 0).map(|(k, v)| (*k, *v)).collect();
        prop_assert_eq!(got, want);
    }
}
