use super::*;
use crate::catalogue::lookup;
use crate::sharing::PoolPolicy;

const H: i64 = HOUR_MS;

fn pool(name: &str, mode: SharingMode) -> PoolOffer {
    let mut policy = PoolPolicy::new(mode);
    if mode == SharingMode::TimeSlicing {
        policy.time_slice_replicas = 4;
    }
    PoolOffer {
        pool: name.to_owned(),
        policy,
        models: vec!["H100-80GB".to_owned()],
        max_lease_hours: 72,
    }
}

fn used(peak_gib_tenths: u64, p95: u8, hours: i64) -> MeasuredUse {
    MeasuredUse {
        peak_mem_mib: peak_gib_tenths * 1024 / 10,
        util_p95_pct: p95,
        measured_ms: hours * H,
    }
}

fn whole() -> SliceShape {
    SliceShape::Whole {
        count: 1,
        nvlink_local: false,
    }
}

fn advice_for(
    shape: &SliceShape,
    own: &PoolOffer,
    gpus: u32,
    u: &MeasuredUse,
    offers: &[&PoolOffer],
) -> Advice {
    let model = lookup("H100-80GB", 0);
    let share = if gpus > 1 {
        GpuShare::WHOLE
    } else {
        share_of(shape, &model, &own.policy).unwrap()
    };
    let held = Held {
        shape,
        pool: own,
        model: &model,
        gpus,
        share,
        gpu_hour_micros: Some(2_000_000),
    };
    let offers: Vec<Offer<'_>> = offers
        .iter()
        .map(|p| Offer {
            pool: p,
            gpu_hour_micros: Some(2_000_000),
        })
        .collect();
    advise(&RightSizing::default(), &held, u, &offers, &|_, _| true)
}

#[test]
fn a_whole_gpu_used_like_a_seventh_is_told_a_1g_10gb_would_do() {
    let exclusive = pool("h100", SharingMode::Exclusive);
    let mig = pool("h100-mig", SharingMode::Mig);
    let u = used(81, 12, 6 * 24);
    let advice = advice_for(&whole(), &exclusive, 1, &u, &[&exclusive, &mig]);
    let Advice::Smaller { resize, confidence } = &advice else {
        panic!("expected a smaller shape, got {advice:?}");
    };
    assert_eq!(resize.label, "MIG 1g.10gb");
    assert_eq!(resize.pool, "h100-mig");
    assert_eq!(*confidence, Confidence::Medium);
    // 1 − 1/7 of a GPU for 730 h: 625.7 GPU-hours, 1,251.43 at 2.00/h.
    assert!(
        (resize.saves_gpu_hours_month - 625.714).abs() < 0.01,
        "{resize:?}"
    );
    assert_eq!(resize.saves_micros_month, Some(1_251_428_571));
    assert_eq!(
        advice.sentence(&u),
        "Used at most 8.1 GiB and 12 % of its compute over 6 days: a MIG 1g.10gb in h100-mig would do — saves 626 GPU-hours a month."
    );
}

#[test]
fn memory_decides_when_compute_would_fit_a_smaller_instance() {
    let mig = pool("h100-mig", SharingMode::Mig);
    // 15 GiB peak + 10 % does not fit a 1g.10gb; 1g.20gb (a quarter at
    // worst) is smaller than 2g.20gb (2/7).
    let u = used(150, 10, 30);
    let advice = advice_for(
        &SliceShape::Mig {
            profile: "3g.40gb".into(),
        },
        &mig,
        1,
        &u,
        &[&mig],
    );
    let Advice::Smaller { resize, .. } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    assert_eq!(resize.label, "MIG 1g.20gb");
}

#[test]
fn compute_decides_when_memory_is_small() {
    let mig = pool("h100-mig", SharingMode::Mig);
    // 40 % of a 4g.40gb (4/7 GPU) + 10 % is 0.251 GPU: more than a 1g
    // (0.142), within a 2g.20gb (0.285).
    let u = used(50, 40, 30);
    let advice = advice_for(
        &SliceShape::Mig {
            profile: "4g.40gb".into(),
        },
        &mig,
        1,
        &u,
        &[&mig],
    );
    let Advice::Smaller { resize, .. } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    assert_eq!(resize.label, "MIG 2g.20gb");
}

#[test]
fn an_mps_share_is_sized_to_the_need_in_5_percent_steps_and_whole_gib() {
    let mps = pool("h100-mps", SharingMode::Mps);
    let u = used(200, 30, 200);
    let advice = advice_for(
        &whole(),
        &pool("h100", SharingMode::Exclusive),
        1,
        &u,
        &[&mps],
    );
    let Advice::Smaller { resize, confidence } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    // 30 % × 1.1 = 33 % → 35 %; 20 GiB × 1.1 = 22 GiB.
    assert_eq!(
        resize.shape,
        SliceShape::Mps {
            compute_percent: 35,
            memory_mib: MemMiB(22 * 1024)
        }
    );
    assert_eq!(confidence, Confidence::High);
}

#[test]
fn slices_already_right_or_at_their_limit_keep_their_shape() {
    let mig = pool("h100-mig", SharingMode::Mig);
    let one = SliceShape::Mig {
        profile: "1g.10gb".into(),
    };
    let idle = used(5, 3, 30);
    assert!(matches!(
        advice_for(&one, &mig, 1, &idle, &[&mig]),
        Advice::Keep {
            reason: KeepReason::NothingSmaller,
            ..
        }
    ));
    let busy = used(50, 97, 30);
    assert!(matches!(
        advice_for(
            &SliceShape::Mig {
                profile: "3g.40gb".into()
            },
            &mig,
            1,
            &busy,
            &[&mig]
        ),
        Advice::Keep {
            reason: KeepReason::AtItsLimit,
            ..
        }
    ));
    let exclusive = pool("h100", SharingMode::Exclusive);
    let four = SliceShape::Whole {
        count: 4,
        nvlink_local: true,
    };
    assert!(matches!(
        advice_for(&four, &exclusive, 4, &used(10, 5, 30), &[&exclusive, &mig]),
        Advice::Keep {
            reason: KeepReason::MultiGpu,
            ..
        }
    ));
}

#[test]
fn a_peak_no_offered_shape_holds_keeps_the_whole_gpu() {
    let exclusive = pool("h100", SharingMode::Exclusive);
    let mig = pool("h100-mig", SharingMode::Mig);
    // 70 GiB is under the 95 % limit of 80 GiB, but +10 % needs 77 GiB:
    // only the 7g.80gb (a whole GPU's share) holds it, which is no smaller.
    let advice = advice_for(
        &whole(),
        &exclusive,
        1,
        &used(700, 20, 30),
        &[&exclusive, &mig],
    );
    assert!(
        matches!(
            advice,
            Advice::Keep {
                reason: KeepReason::NothingSmaller,
                ..
            }
        ),
        "{advice:?}"
    );
}

#[test]
fn too_little_data_says_how_much_is_missing() {
    let mig = pool("h100-mig", SharingMode::Mig);
    let u = MeasuredUse {
        peak_mem_mib: 1024,
        util_p95_pct: 5,
        measured_ms: 23 * 60_000,
    };
    let advice = advice_for(
        &whole(),
        &pool("h100", SharingMode::Exclusive),
        1,
        &u,
        &[&mig],
    );
    assert_eq!(
        advice,
        Advice::TooLittleData {
            measured_ms: 23 * 60_000,
            needed_ms: H
        }
    );
    assert_eq!(
        advice.sentence(&u),
        "Not enough telemetry to advise yet: 23 min measured, 60 min needed."
    );
}

#[test]
fn pools_without_the_slices_model_are_not_offered() {
    let exclusive = pool("h100", SharingMode::Exclusive);
    let mut a100 = pool("a100-mig", SharingMode::Mig);
    a100.models = vec!["A100-80GB".into()];
    let advice = advice_for(
        &whole(),
        &exclusive,
        1,
        &used(50, 10, 30),
        &[&exclusive, &a100],
    );
    assert!(matches!(advice, Advice::Keep { .. }), "{advice:?}");
}

#[test]
fn a_time_sliced_replica_is_offered_when_it_is_the_smallest_that_fits() {
    let exclusive = pool("h100", SharingMode::Exclusive);
    let ts = pool("h100-shared", SharingMode::TimeSlicing);
    // A quarter of an H100: 20 GiB, 0.25 GPU.
    let advice = advice_for(
        &whole(),
        &exclusive,
        1,
        &used(120, 15, 30),
        &[&exclusive, &ts],
    );
    let Advice::Smaller { resize, .. } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    assert_eq!(resize.label, "Time-sliced replica");
    assert!((resize.saves_gpu_hours_month - 547.5).abs() < 0.01);
}

#[test]
fn ties_go_to_the_slices_own_pool() {
    let a = pool("mig-a", SharingMode::Mig);
    let b = pool("mig-b", SharingMode::Mig);
    let advice = advice_for(
        &SliceShape::Mig {
            profile: "7g.80gb".into(),
        },
        &b,
        1,
        &used(50, 5, 30),
        &[&a, &b],
    );
    let Advice::Smaller { resize, .. } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    assert_eq!(resize.pool, "mig-b");
}

#[test]
fn confidence_grows_with_the_time_measured() {
    assert_eq!(Confidence::of(2 * H), Confidence::Low);
    assert_eq!(Confidence::of(24 * H), Confidence::Medium);
    assert_eq!(Confidence::of(7 * 24 * H), Confidence::High);
}

#[test]
fn measured_use_weighs_each_period_by_the_time_it_covers() {
    let minute = |util, mem| Period {
        util_pct: util,
        covered_ms: 60_000,
        mem_max_mib: mem,
    };
    // 96 quiet minutes and 4 busy ones: the busy 4 % fall above the 95th
    // percentile.
    let mut periods: Vec<Period> = (0..96).map(|_| minute(10, 1000)).collect();
    periods.extend((0..4).map(|_| minute(90, 3000)));
    let u = MeasuredUse::of(&periods, 1);
    assert_eq!(u.util_p95_pct, 10);
    assert_eq!(u.peak_mem_mib, 3000);
    assert_eq!(u.measured_ms, 100 * 60_000);
    // An hour at 50 % outweighs the busy minutes: it sets the percentile.
    periods.push(Period {
        util_pct: 50,
        covered_ms: 3_600_000,
        mem_max_mib: 2000,
    });
    assert_eq!(MeasuredUse::of(&periods, 1).util_p95_pct, 50);
    // Two GPUs: the time is per GPU.
    assert_eq!(MeasuredUse::of(&periods, 2).measured_ms, 80 * 60_000);
    assert_eq!(MeasuredUse::of(&[], 1), MeasuredUse::default());
}

#[test]
fn shapes_the_hosts_cannot_hold_are_not_advised() {
    let mig = pool("h100-mig", SharingMode::Mig);
    let model = lookup("H100-80GB", 0);
    let three = SliceShape::Mig {
        profile: "3g.40gb".into(),
    };
    let held = Held {
        shape: &three,
        pool: &mig,
        model: &model,
        gpus: 1,
        share: share_of(&three, &model, &mig.policy).unwrap(),
        gpu_hour_micros: None,
    };
    let offers = [Offer {
        pool: &mig,
        gpu_hour_micros: None,
    }];
    // 15 GiB would take a 1g.20gb; without it on the hosts, a 2g.20gb.
    let no_1g_20gb = |_: &PoolOffer, s: &SliceShape| {
        *s != SliceShape::Mig {
            profile: "1g.20gb".into(),
        }
    };
    let advice = advise(
        &RightSizing::default(),
        &held,
        &used(150, 10, 30),
        &offers,
        &no_1g_20gb,
    );
    let Advice::Smaller { resize, .. } = advice else {
        panic!("expected smaller: {advice:?}");
    };
    assert_eq!(resize.label, "MIG 2g.20gb");
    assert_eq!(resize.saves_micros_month, None);
}
