#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::catalogue::{all_models, lookup};
use crate::mig::maximal_layouts_with;
use crate::sharing::SharingMode;
use crate::units::MemMiB;

fn d(num: u64, den: u64) -> GpuShare {
    GpuShare(PARTS_PER_GPU * num / den)
}

#[test]
fn the_parts_divide_every_usual_fraction_exactly() {
    for den in (1..=16).chain([20, 24, 25, 32, 48, 64, 100]) {
        assert_eq!(PARTS_PER_GPU % den, 0, "1/{den}");
    }
}

#[test]
fn a100_and_h100_profiles_pay_for_what_they_block() {
    for model in ["A100-80GB", "H100-80GB"] {
        let m = lookup(model, 0);
        let at = |p: &str, s: u8| mig_share_at(&m, p, s).unwrap();
        for s in 0..7 {
            assert_eq!(at("1g.10gb", s), d(1, 7), "{model} 1g.10gb at {s}");
            assert_eq!(at("1g.10gb+me", s), d(1, 7), "{model}: +me is its twin");
        }
        // Two of eight memory slices where a 1g.10gb could have gone: 1/4;
        // at 6–7, beside six 1g.10gb that fill the GPU, no more than they.
        assert_eq!(at("1g.20gb", 0), d(1, 4), "{model}");
        assert_eq!(at("1g.20gb", 6), d(1, 7), "{model}");
        assert_eq!(
            mig_share(&m, "1g.20gb").unwrap(),
            d(1, 4),
            "{model}: the quote"
        );
        assert_eq!(mig_share(&m, "2g.20gb").unwrap(), d(2, 7), "{model}");
        // Half the memory at 0–3; at 4–7 a 3g beside four 1g fills the GPU.
        assert_eq!(at("3g.40gb", 0), d(1, 2), "{model}");
        assert_eq!(at("3g.40gb", 4), d(3, 7), "{model}");
        assert_eq!(at("4g.40gb", 0), d(4, 7), "{model}");
        assert_eq!(at("7g.80gb", 0), GpuShare::WHOLE, "{model}");
        assert_eq!(
            mig_share_at(&m, "4g.40gb", 4),
            None,
            "{model}: no such start"
        );
    }
}

#[test]
fn seven_1g_slices_are_exactly_one_gpu_not_0_994() {
    let m = lookup("A100-80GB", 0);
    let sum: u64 = (0..7)
        .map(|s| mig_share_at(&m, "1g.10gb", s).unwrap().0)
        .sum();
    assert_eq!(sum, PARTS_PER_GPU);
}

/// Every profile of every MIG model is at least its compute fraction and at
/// most one GPU, and every maximal layout (with and without `+me`
/// profiles: any valid layout is part of one) adds up to at most one GPU.
#[test]
fn no_layout_of_any_catalogue_model_sums_past_one_gpu() {
    let mut full = 0;
    for model in all_models().iter().filter(|m| m.mig.is_some()) {
        let spec = model.mig.unwrap();
        for (p, start) in spec
            .profiles
            .iter()
            .flat_map(|p| p.placements.iter().map(move |s| (p, *s)))
        {
            let s = mig_share_at(model, p.name, start).unwrap();
            let compute =
                GpuShare::fraction(u64::from(p.compute_slices), u64::from(spec.compute_slices));
            assert!(
                s >= compute,
                "{} {}: {s:?} < {compute:?}",
                model.name,
                p.name
            );
            assert!(s <= GpuShare::WHOLE);
        }
        for layout in maximal_layouts_with(model, |_| true) {
            let sum: u64 = layout
                .iter()
                .map(|i| mig_share_at(model, &i.profile, i.start).unwrap().0)
                .sum();
            assert!(
                sum <= PARTS_PER_GPU,
                "{}: {layout:?} sums to {sum}",
                model.name
            );
            if sum == PARTS_PER_GPU {
                full += 1;
            }
        }
        // The smallest profile's full layout is exactly one GPU.
        let smallest = spec.profiles.iter().find(|p| !p.media_extensions).unwrap();
        let sum: u64 = smallest
            .placements
            .iter()
            .map(|s| mig_share_at(model, smallest.name, *s).unwrap().0)
            .sum();
        assert_eq!(
            sum, PARTS_PER_GPU,
            "{}: {} × {}",
            model.name, smallest.max_count, smallest.name
        );
    }
    assert!(full > 20, "only {full} layouts add up to exactly one GPU");
}

#[test]
fn mps_is_the_mean_of_threads_and_memory_and_never_overbills() {
    let m = lookup("A100-80GB", 0);
    let policy = PoolPolicy::new(SharingMode::Mps);
    let mps = |pct: u8, gib: u64| {
        share_of(
            &SliceShape::Mps {
                compute_percent: pct,
                memory_mib: MemMiB(m.memory_mib * gib / 80),
            },
            &m,
            &policy,
        )
        .unwrap()
    };
    assert_eq!(mps(50, 40), d(1, 2));
    assert_eq!(mps(10, 72), GpuShare((d(10, 100).0 + d(72, 80).0) / 2));
    // Opposite skews on one GPU: 0.5 + 0.5, not 1.8.
    assert_eq!(mps(10, 72).0 + mps(90, 8).0, PARTS_PER_GPU);
}

#[test]
fn time_slices_and_whole_gpus() {
    let m = lookup("L4", 0);
    let mut policy = PoolPolicy::new(SharingMode::TimeSlicing);
    for n in [1, 2, 3, 4, 7, 8, 10, 16, 64] {
        policy.time_slice_replicas = n;
        let s = share_of(&SliceShape::TimeSlice {}, &m, &policy).unwrap();
        assert_eq!(s.0 * u64::from(n), PARTS_PER_GPU, "{n} replicas");
    }
    policy.time_slice_replicas = 17;
    let s = share_of(&SliceShape::TimeSlice {}, &m, &policy).unwrap();
    assert!(s.0 * 17 <= PARTS_PER_GPU && s.0 * 17 > PARTS_PER_GPU - 17);
    let whole = SliceShape::Whole {
        count: 2,
        nvlink_local: false,
    };
    let policy = PoolPolicy::new(SharingMode::Exclusive);
    assert_eq!(share_of(&whole, &m, &policy).unwrap(), GpuShare::WHOLE);
}

#[test]
fn a_shape_the_pool_refuses_has_no_share() {
    let m = lookup("L4", 0);
    let policy = PoolPolicy::new(SharingMode::Mig);
    assert!(share_of(
        &SliceShape::Mig {
            profile: "1g.10gb".into()
        },
        &m,
        &policy
    )
    .is_err());
}

#[test]
fn a_placed_slice_keeps_the_share_its_shape_had() {
    use crate::placement::Slice;
    for model in all_models() {
        let mut ts = PoolPolicy::new(SharingMode::TimeSlicing);
        for n in 1..=crate::sharing::MAX_TIME_SLICE_REPLICAS {
            ts.time_slice_replicas = n;
            let shape = SliceShape::TimeSlice {};
            let demand = cost(&shape, model, &ts).unwrap();
            let placed = Slice::Shared {
                compute: demand.compute,
                memory: demand.memory,
            };
            assert_eq!(
                share_of_placed(&shape, &placed, model),
                share_of(&shape, model, &ts).unwrap(),
                "{} with {n} replicas",
                model.name
            );
        }
        let mps = PoolPolicy::new(SharingMode::Mps);
        let shape = SliceShape::Mps {
            compute_percent: 30,
            memory_mib: MemMiB(model.memory_mib / 5),
        };
        let demand = cost(&shape, model, &mps).unwrap();
        let placed = Slice::Shared {
            compute: demand.compute,
            memory: demand.memory,
        };
        assert_eq!(
            share_of_placed(&shape, &placed, model),
            share_of(&shape, model, &mps).unwrap()
        );
    }
    let a100 = lookup("A100-80GB", 0);
    let shape = SliceShape::Mig {
        profile: "3g.40gb".into(),
    };
    let placed = Slice::Mig(crate::mig::MigPlacement::new("3g.40gb", 4));
    assert_eq!(share_of_placed(&shape, &placed, &a100), d(3, 7));
}

#[test]
fn a_gpu_outside_the_catalogue_is_billed_by_what_is_known_of_it() {
    use crate::catalogue::GpuModel;
    use crate::placement::Slice;
    use crate::units::ComputeMilli;
    // Its reported memory known: as for any GPU.
    let known = GpuModel::generic(49_152);
    let mut ts = PoolPolicy::new(SharingMode::TimeSlicing);
    ts.time_slice_replicas = 4;
    let shape = SliceShape::TimeSlice {};
    let demand = cost(&shape, &known, &ts).unwrap();
    let placed = Slice::Shared {
        compute: demand.compute,
        memory: demand.memory,
    };
    assert_eq!(share_of_placed(&shape, &placed, &known), d(1, 4));
    // Unknown memory: N from the compute, an MPS client by its threads.
    let unknown = GpuModel::generic(0);
    assert_eq!(share_of_placed(&shape, &placed, &unknown), d(1, 4));
    let mps = SliceShape::Mps {
        compute_percent: 30,
        memory_mib: MemMiB(8192),
    };
    let client = Slice::Shared {
        compute: ComputeMilli(300),
        memory: MemMiB(8192),
    };
    assert_eq!(share_of_placed(&mps, &client, &unknown), d(3, 10));
    // Half its threads held, memory unknown: the rest is usable.
    let holding = crate::ledger::Holding {
        allocation: crate::ids::AllocationId::new(1),
        tenant: crate::ids::TenantId::new(1),
        share: d(1, 2),
        start: 0,
        end: None,
        fit: crate::ledger::HeldFit::Mps {
            compute_percent: 50,
            memory: MemMiB(8192),
        },
    };
    let m = PoolPolicy::new(SharingMode::Mps);
    assert!(!crate::ledger::free_is_stranded(&unknown, &m, &[&holding]));
}
