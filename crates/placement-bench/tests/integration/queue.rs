//! The queue replay: backfill allocates more and makes jobs wait less than
//! strict FIFO once the pool is busy, every job starts, and the replay is
//! deterministic. Seeded and untimed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use placement_bench::queue_sim::{compare, compare_seeds, replay, variants, workload, Params};

fn busy() -> Params {
    Params {
        hosts: 16,
        jobs: 1_500,
        load: 1.0,
        tenants: 4,
        heavy_share: 0.5,
        placement: tessera_core::placement::PoolPlacement::Pack,
        seed: 7,
    }
}

#[test]
fn backfill_beats_fifo_on_a_busy_pool() {
    let out = compare_seeds(&busy(), 2, 30 * 60_000).unwrap();
    let (fifo, plain, easy, fair) = (&out[0], &out[1], &out[2], &out[3]);
    assert_eq!(fifo.variant, "fifo");
    for o in [plain, easy, fair] {
        assert!(
            o.allocation_ratio > fifo.allocation_ratio + 0.02,
            "{o:?} vs {fifo:?}"
        );
        assert!(o.wait_p95_h < fifo.wait_p95_h, "{o:?} vs {fifo:?}");
        assert!(o.small_wait_p95_h < fifo.small_wait_p95_h);
    }
    // Fair share serves the tenants that submit less first: they wait less
    // than without it, the tenant that submits half the work more.
    assert!(
        fair.light_tenants_wait_p95_h < easy.light_tenants_wait_p95_h,
        "{fair:?} vs {easy:?}"
    );
    assert!(fair.heavy_tenant_wait_p95_h > easy.heavy_tenant_wait_p95_h);
    for o in &out {
        assert_eq!(o.never_started, 0, "{o:?}");
        assert!(
            o.allocation_ratio > 0.5 && o.allocation_ratio <= 1.0,
            "{o:?}"
        );
        assert!((0.0..=1.0).contains(&o.jain_fairness));
    }
}

#[test]
fn the_replay_is_deterministic_and_follows_the_workload() {
    let p = busy();
    assert_eq!(compare(&p, 0).unwrap(), compare(&p, 0).unwrap());
    let jobs = workload(&p);
    assert_eq!(jobs.len(), p.jobs);
    assert!(jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    assert!(jobs
        .iter()
        .all(|j| j.lease >= j.runs && [1, 2, 4, 8].contains(&j.gpus)));
    // An idle pool: nobody waits, whatever the discipline.
    let quiet = Params { load: 0.05, ..p };
    let jobs = workload(&quiet);
    for v in variants(0) {
        let o = replay(&quiet, &jobs, &v).unwrap();
        assert_eq!(o.wait_p95_h, 0.0, "{o:?}");
    }
}

#[test]
fn the_replay_runs_the_pools_placement_policy() {
    use tessera_core::placement::PoolPlacement;
    // Whole GPUs on hosts of eight: spreading 1- and 2-GPU jobs over the
    // hosts leaves fewer hosts with eight free for the 8-GPU jobs, so they
    // wait longer than under pack; every job still starts.
    let pack = busy();
    let spread = Params {
        placement: PoolPlacement::Spread,
        ..pack
    };
    let jobs = workload(&pack);
    let v = &variants(30 * 60_000)[2];
    let (a, b) = (
        replay(&pack, &jobs, v).unwrap(),
        replay(&spread, &jobs, v).unwrap(),
    );
    assert_ne!(a, b, "the policy changes the replay");
    assert!(b.large_wait_p95_h > a.large_wait_p95_h, "{b:?} vs {a:?}");
    assert_eq!((a.never_started, b.never_started), (0, 0));
}
