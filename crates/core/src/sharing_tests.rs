#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::catalogue::lookup;

fn mps(percent: u8, mib: u64) -> SliceShape {
    SliceShape::Mps {
        compute_percent: percent,
        memory_mib: MemMiB(mib),
    }
}

fn mig(profile: &str) -> SliceShape {
    SliceShape::Mig {
        profile: profile.into(),
    }
}

#[test]
fn shapes_serialize_tagged_snake_case() {
    let json = serde_json::to_string(&mps(25, 4096)).unwrap();
    assert_eq!(
        json,
        r#"{"kind":"mps","compute_percent":25,"memory_mib":4096}"#
    );
    assert_eq!(
        serde_json::to_string(&SliceShape::TimeSlice {}).unwrap(),
        r#"{"kind":"time_slice"}"#
    );
    let whole: SliceShape =
        serde_json::from_str(r#"{"kind":"whole","count":2,"nvlink_local":true}"#).unwrap();
    assert_eq!(
        whole,
        SliceShape::Whole {
            count: 2,
            nvlink_local: true
        }
    );
    assert_eq!(
        serde_json::to_string(&mig("1g.10gb")).unwrap(),
        r#"{"kind":"mig","profile":"1g.10gb"}"#
    );
    assert_eq!(
        serde_json::to_string(&SharingMode::TimeSlicing).unwrap(),
        r#""time-slicing""#
    );
    let policy: PoolPolicy = serde_json::from_str(r#"{"mode":"mig"}"#).unwrap();
    assert_eq!(policy, PoolPolicy::new(SharingMode::Mig));
}

#[test]
fn mig_shapes_are_checked_against_the_model_and_pool() {
    let h100 = lookup("NVIDIA H100 80GB HBM3", 81559);
    let pool = PoolPolicy::new(SharingMode::Mig);
    assert_eq!(validate_shape(&mig("1g.10gb"), &h100, &pool), Ok(()));
    assert!(matches!(
        validate_shape(&mig("1g.5gb"), &h100, &pool),
        Err(ShapeError::Layout(LayoutError::UnknownProfile { .. }))
    ));
    assert!(matches!(
        validate_shape(&mig("1g.10gb"), &lookup("NVIDIA L4", 23034), &pool),
        Err(ShapeError::Layout(LayoutError::NotMigCapable { .. }))
    ));
    let restricted = PoolPolicy {
        allowed_mig_profiles: vec!["3g.40gb".into()],
        ..pool.clone()
    };
    let err = validate_shape(&mig("1g.10gb"), &h100, &restricted).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"this pool does not offer 1g.10gb; choose one of ["3g.40gb"]"#
    );
    assert_eq!(validate_shape(&mig("3G.40GB"), &h100, &restricted), Ok(()));
}

#[test]
fn mps_inside_mig_and_wrong_kinds_are_refused() {
    let h100 = lookup("H100-80GB", 0);
    assert_eq!(
        validate_shape(&mps(50, 1024), &h100, &PoolPolicy::new(SharingMode::Mig)),
        Err(ShapeError::MpsInsideMig)
    );
    let err =
        validate_shape(&mig("1g.10gb"), &h100, &PoolPolicy::new(SharingMode::Mps)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "this pool shares GPUs by mps; ask for a MPS share instead of a MIG instance"
    );
    assert!(matches!(
        validate_shape(
            &SliceShape::TimeSlice {},
            &h100,
            &PoolPolicy::new(SharingMode::Exclusive)
        ),
        Err(ShapeError::WrongKindForPool { .. })
    ));
}

#[test]
fn mps_limits_are_checked() {
    let l4 = lookup("NVIDIA L4", 23034);
    let pool = PoolPolicy::new(SharingMode::Mps);
    assert_eq!(validate_shape(&mps(100, 23034), &l4, &pool), Ok(()));
    assert_eq!(
        validate_shape(&mps(0, 1024), &l4, &pool),
        Err(ShapeError::ComputePercentOutOfRange { percent: 0 })
    );
    assert_eq!(
        validate_shape(&mps(101, 1024), &l4, &pool),
        Err(ShapeError::ComputePercentOutOfRange { percent: 101 })
    );
    assert_eq!(
        validate_shape(&mps(10, 0), &l4, &pool),
        Err(ShapeError::MpsMemoryZero)
    );
    assert!(matches!(
        validate_shape(&mps(10, 23035), &l4, &pool),
        Err(ShapeError::MpsMemoryExceedsGpu { .. })
    ));
}

#[test]
fn mps_env_uses_nvidia_formats() {
    let share = MpsShare {
        compute_percent: 25,
        memory: MemMiB(4096),
    };
    assert_eq!(
        share.env(0),
        vec![
            ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25".to_string()),
            ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M".to_string()),
        ]
    );
}

#[test]
fn mps_admission_caps_clients_memory_and_compute() {
    let l4 = lookup("NVIDIA L4", 23034);
    let small = MpsShare {
        compute_percent: 1,
        memory: MemMiB(100),
    };
    let full: Vec<MpsShare> = vec![small; 48];
    assert_eq!(
        check_mps_admission(&l4, &full, &small),
        Err(MpsCapacityError::TooManyClients { max: 48 })
    );
    assert_eq!(check_mps_admission(&l4, &full[..47], &small), Ok(()));
    let big = MpsShare {
        compute_percent: 50,
        memory: MemMiB(12_000),
    };
    assert_eq!(
        check_mps_admission(&l4, &[big], &big),
        Err(MpsCapacityError::MemoryExhausted {
            requested: MemMiB(12_000),
            available: MemMiB(11_034)
        })
    );
    let lean = MpsShare {
        compute_percent: 60,
        memory: MemMiB(1000),
    };
    assert_eq!(
        check_mps_admission(&l4, &[lean], &lean),
        Err(MpsCapacityError::ComputeExhausted {
            requested_percent: 60,
            available_percent: 40
        })
    );
}

#[test]
fn costs_are_integer_shares() {
    let a100 = lookup("NVIDIA A100-SXM4-40GB", 40960);
    let mig_pool = PoolPolicy::new(SharingMode::Mig);
    assert_eq!(
        cost(&mig("3g.20gb"), &a100, &mig_pool),
        Ok(Demand {
            compute: ComputeMilli(428),
            memory: MemMiB(19968),
            slices: 1
        })
    );
    assert_eq!(
        cost(&mig("7g.40gb"), &a100, &mig_pool).unwrap().compute,
        ComputeMilli(1000)
    );
    let l4 = lookup("NVIDIA L4", 23034);
    assert_eq!(
        cost(&mps(25, 4096), &l4, &PoolPolicy::new(SharingMode::Mps)),
        Ok(Demand {
            compute: ComputeMilli(250),
            memory: MemMiB(4096),
            slices: 1
        })
    );
    assert_eq!(
        cost(&SliceShape::TimeSlice {}, &l4, &PoolPolicy::time_slicing(3)),
        Ok(Demand {
            compute: ComputeMilli(333),
            memory: MemMiB(7678),
            slices: 1
        })
    );
    assert_eq!(
        cost(
            &SliceShape::Whole {
                count: 2,
                nvlink_local: true
            },
            &a100,
            &PoolPolicy::new(SharingMode::Exclusive)
        ),
        Ok(Demand {
            compute: ComputeMilli(2000),
            memory: MemMiB(81920),
            slices: 2
        })
    );
    assert_eq!(
        cost(
            &SliceShape::Whole {
                count: 0,
                nvlink_local: false
            },
            &a100,
            &PoolPolicy::new(SharingMode::Exclusive)
        ),
        Err(ShapeError::WholeCountZero)
    );
}

#[test]
fn time_slicing_replicas_are_bounded() {
    let t4 = lookup("Tesla T4", 15360);
    for bad in [0, 65] {
        assert_eq!(
            cost(
                &SliceShape::TimeSlice {},
                &t4,
                &PoolPolicy::time_slicing(bad)
            ),
            Err(ShapeError::ReplicasOutOfRange {
                replicas: bad,
                max: MAX_TIME_SLICE_REPLICAS
            })
        );
    }
    assert!(cost(
        &SliceShape::TimeSlice {},
        &t4,
        &PoolPolicy::time_slicing(64)
    )
    .is_ok());
}

#[test]
fn pool_policy_validates_allowed_profiles() {
    let a30 = lookup("NVIDIA A30", 24576);
    let mut policy = PoolPolicy::new(SharingMode::Mig);
    policy.allowed_mig_profiles = vec!["1g.6gb".into(), "3g.20gb".into()];
    assert!(matches!(
        policy.validate(&a30),
        Err(ShapeError::Layout(LayoutError::UnknownProfile { .. }))
    ));
    policy.allowed_mig_profiles.pop();
    assert_eq!(policy.validate(&a30), Ok(()));
}
