#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::ids::AllocationId;
use crate::placement;
use crate::sharing::{MpsShare, PoolPolicy, SharingMode, SliceShape};
use crate::units::{ComputeMilli, MemMiB};

fn offer(mode: SharingMode, models: &[&str]) -> PoolOffer {
    PoolOffer {
        pool: "p".into(),
        policy: PoolPolicy::new(mode),
        models: models.iter().map(|m| m.to_string()).collect(),
        max_lease_hours: 24,
    }
}

#[test]
fn mig_profile_valid_on_one_model_of_a_mixed_pool() {
    let pool = offer(SharingMode::Mig, &["A100-SXM4-40GB", "H100-80GB"]);
    let shape = SliceShape::Mig {
        profile: "1g.10gb".into(),
    };
    let models = pool.models_for(&shape).unwrap();
    assert_eq!(
        models.len(),
        2,
        "1g.10gb is the two-memory-slice profile on A100-40GB too"
    );
    let d = pool.admit(&shape, 4).unwrap();
    assert_eq!(d.slices, 1);
    assert_eq!(
        d.memory,
        MemMiB(
            models
                .iter()
                .map(|m| m.mig.unwrap().profile("1g.10gb").unwrap().memory_mib)
                .max()
                .unwrap()
        )
    );
    let req = pool.placement_request(&shape).unwrap();
    assert_eq!(req.pool.as_deref(), Some("p"));
    assert_eq!(
        req.demand,
        placement::Demand::Mig {
            profile: "1g.10gb".into()
        }
    );

    let bad = SliceShape::Mig {
        profile: "1g.12gb".into(),
    };
    assert!(matches!(pool.admit(&bad, 4), Err(PoolShapeError::Shape(_))));
}

#[test]
fn lease_and_size_limits() {
    let pool = offer(SharingMode::Exclusive, &["A100-SXM4-40GB"]);
    let one = SliceShape::Whole {
        count: 1,
        nvlink_local: false,
    };
    assert_eq!(
        pool.admit(&one, 25),
        Err(PoolShapeError::LeaseOutOfRange { hours: 25, max: 24 })
    );
    assert!(matches!(
        pool.admit(&one, 0),
        Err(PoolShapeError::LeaseOutOfRange { .. })
    ));
    let huge = SliceShape::Whole {
        count: 1000,
        nvlink_local: false,
    };
    assert!(matches!(
        pool.admit(&huge, 1),
        Err(PoolShapeError::TooManyGpus { .. })
    ));
    let zero = SliceShape::Whole {
        count: 0,
        nvlink_local: false,
    };
    assert!(pool.admit(&zero, 1).is_err());
    let two = SliceShape::Whole {
        count: 2,
        nvlink_local: true,
    };
    let d = pool.admit(&two, 1).unwrap();
    assert_eq!((d.compute, d.slices), (ComputeMilli(2000), 2));
    assert!(pool.placement_request(&two).unwrap().nvlink_local);
    // A MIG shape in an exclusive pool is the wrong kind.
    let mig = SliceShape::Mig {
        profile: "1g.5gb".into(),
    };
    assert!(pool
        .admit(&mig, 1)
        .unwrap_err()
        .to_string()
        .contains("whole GPU"));
}

#[test]
fn time_slice_and_mps_demands() {
    let mut ts = offer(SharingMode::TimeSlicing, &["L4"]);
    ts.policy.time_slice_replicas = 4;
    let d = ts.admit(&SliceShape::TimeSlice {}, 1).unwrap();
    assert_eq!(d.compute, ComputeMilli(250));
    match ts
        .placement_request(&SliceShape::TimeSlice {})
        .unwrap()
        .demand
    {
        placement::Demand::Fraction { compute, memory } => {
            assert_eq!(compute, ComputeMilli(250));
            assert_eq!(memory, Some(d.memory));
        }
        other => panic!("{other:?}"),
    }
    let mps = offer(SharingMode::Mps, &["L4"]);
    let shape = SliceShape::Mps {
        compute_percent: 30,
        memory_mib: MemMiB(4096),
    };
    assert_eq!(mps.admit(&shape, 1).unwrap().compute, ComputeMilli(300));
    let too_big = SliceShape::Mps {
        compute_percent: 30,
        memory_mib: MemMiB(1 << 30),
    };
    assert!(mps.admit(&too_big, 1).is_err());
}

#[test]
fn labels() {
    assert_eq!(
        label(&SliceShape::Mig {
            profile: "1g.10gb".into()
        }),
        "MIG 1g.10gb"
    );
    assert_eq!(
        label(&SliceShape::Mps {
            compute_percent: 25,
            memory_mib: MemMiB(20 * 1024)
        }),
        "MPS 25% · 20 GiB"
    );
    assert_eq!(
        label(&SliceShape::Whole {
            count: 2,
            nvlink_local: true
        }),
        "2 whole GPUs (NVLink)"
    );
}

#[test]
fn connection_details() {
    let mig = connection(
        "gpu-1",
        AllocationId::new(7),
        &ConnectionTarget::Mig {
            profile: "1g.10gb".into(),
            device_uuid: "MIG-abc".into(),
        },
    );
    assert_eq!(
        mig.env,
        vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), "MIG-abc".to_string()),
            ("TESSERA_ALLOCATION".to_string(), "7".to_string())
        ]
    );
    assert_eq!(mig.k8s_resource, "nvidia.com/mig-1g.10gb");
    assert!(mig.pod_snippet.contains("nvidia.com/mig-1g.10gb: 1"));
    assert!(mig.pod_snippet.contains("kubernetes.io/hostname: gpu-1"));

    let mps = connection(
        "gpu-2",
        AllocationId::new(8),
        &ConnectionTarget::Mps {
            gpu_uuid: "GPU-1".into(),
            share: MpsShare {
                compute_percent: 25,
                memory: MemMiB(2048),
            },
        },
    );
    let get = |k: &str| mps.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("CUDA_MPS_PIPE_DIRECTORY").as_deref(),
        Some("/var/run/tessera/mps/GPU-1")
    );
    assert_eq!(
        get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE").as_deref(),
        Some("25")
    );
    assert_eq!(
        get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT").as_deref(),
        Some("0=2048M")
    );

    // The pod gets the tag and the limits; the device plugin picks the GPU.
    for needed in [
        "- name: TESSERA_ALLOCATION\n          value: \"8\"",
        "- name: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\n          value: \"25\"",
        "- name: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT\n          value: \"0=2048M\"",
    ] {
        assert!(
            mps.pod_snippet.contains(needed),
            "{needed}: {}",
            mps.pod_snippet
        );
    }
    assert!(!mps.pod_snippet.contains("CUDA_VISIBLE_DEVICES"));

    let whole = connection(
        "gpu-3",
        AllocationId::new(9),
        &ConnectionTarget::Whole {
            gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
        },
    );
    assert_eq!(whole.env[0].1, "GPU-a,GPU-b");
    assert_eq!(
        (whole.k8s_resource.as_str(), whole.k8s_count),
        ("nvidia.com/gpu", 2)
    );
}

#[test]
fn offered_mig_profiles_are_the_union_the_policy_allows() {
    let mut pool = offer(SharingMode::Mig, &["A100-SXM4-40GB", "H100-80GB"]);
    let names =
        |p: &PoolOffer| -> Vec<&str> { p.mig_profiles().iter().map(|o| o.profile.name).collect() };
    let all = names(&pool);
    assert!(all.contains(&"1g.5gb"), "{all:?}");
    assert!(all.contains(&"7g.80gb"), "{all:?}");
    assert_eq!(
        all.iter().filter(|n| **n == "1g.10gb").count(),
        1,
        "a profile both models have is offered once"
    );
    pool.policy.allowed_mig_profiles = vec!["1G.10GB".into(), "3g.40gb".into()];
    assert_eq!(names(&pool), ["1g.10gb", "3g.40gb"]);
    // What is offered is exactly what validation accepts.
    for o in pool.mig_profiles() {
        let shape = SliceShape::Mig {
            profile: o.profile.name.into(),
        };
        assert!(pool.admit(&shape, 1).is_ok(), "{}", o.profile.name);
        assert_eq!(o.of_compute_slices, 7);
    }
    let refused = SliceShape::Mig {
        profile: "7g.80gb".into(),
    };
    assert!(pool.admit(&refused, 1).is_err());
    assert!(offer(SharingMode::Exclusive, &["L4"])
        .mig_profiles()
        .is_empty());
}

#[test]
fn probe_shapes_are_what_each_mode_offers_and_the_pool_accepts() {
    let mut mig = offer(SharingMode::Mig, &["H100-80GB"]);
    let labels: Vec<String> = mig.probe_shapes().iter().map(label).collect();
    assert!(labels.contains(&"MIG 1g.10gb".to_owned()), "{labels:?}");
    assert!(labels.contains(&"MIG 7g.80gb".to_owned()), "{labels:?}");
    assert!(labels.iter().all(|l| !l.contains("+me")), "{labels:?}");
    mig.policy.allowed_mig_profiles = vec!["1g.10gb".into(), "3g.40gb".into()];
    assert_eq!(mig.probe_shapes().len(), 2, "only what the pool allows");
    let whole = offer(SharingMode::Exclusive, &["A100-SXM4-40GB"]);
    assert_eq!(whole.probe_shapes().len(), 4);
    assert_eq!(
        offer(SharingMode::TimeSlicing, &["L4"]).probe_shapes(),
        vec![SliceShape::TimeSlice {}]
    );
    let mps = offer(SharingMode::Mps, &["L4"]).probe_shapes();
    assert!(
        matches!(
            mps.as_slice(),
            [SliceShape::Mps {
                compute_percent: 25,
                ..
            }]
        ),
        "{mps:?}"
    );
}
