#![allow(clippy::unwrap_used)]
use super::*;

fn params() -> Params {
    Params {
        hosts: 4,
        jobs: 150,
        load: 0.9,
        tenants: 4,
        heavy_share: 0.5,
        idle_share: 0.3,
        idle_reclaim_ms: 60 * MINUTE_MS,
        grace_ms: 5 * MINUTE_MS,
        placement: tessera_core::placement::PoolPlacement::Pack,
        seed: 7,
    }
}

#[test]
fn borrowing_fills_idle_quota_and_reclaim_gives_idle_gpus_back() {
    let p = params();
    let jobs = workload(&p);
    let [hard, qos, reclaim] = VARIANTS.map(|v| replay(&p, &jobs, &v).unwrap());
    // Hard quota never preempts or reclaims.
    assert_eq!((hard.preemptions, hard.reclaimed_gpu_hours), (0, 0.0));
    // Borrowing unused quota does more work in the same time.
    assert!(
        qos.busy_ratio > hard.busy_ratio,
        "{} vs {}",
        qos.busy_ratio,
        hard.busy_ratio
    );
    // Somebody had to give way, and the lost work is counted.
    assert!(qos.preemptions > 0 && qos.lost_gpu_hours > 0.0, "{qos:?}");
    // Reclaiming idle slices gives GPU-hours back, and they go to work.
    assert!(reclaim.reclaimed_gpu_hours > 0.0);
    assert_eq!(qos.reclaimed_gpu_hours, 0.0);
    assert!(reclaim.busy_ratio > qos.busy_ratio, "{reclaim:?} {qos:?}");
    // Every job starts in the end, under every policy.
    for o in [&hard, &qos, &reclaim] {
        assert_eq!(o.never_started, 0, "{o:?}");
    }
    // Deterministic for a seed.
    assert_eq!(replay(&p, &jobs, &VARIANTS[1]).unwrap(), qos);
}

#[test]
fn the_table_has_a_row_per_policy() {
    let t = table(
        &compare_seeds(
            &Params {
                jobs: 60,
                ..params()
            },
            1,
        )
        .unwrap(),
    );
    assert_eq!(t.lines().count(), 2 + VARIANTS.len());
    assert!(t.contains("| QoS + preemption + idle reclaim |"), "{t}");
}
