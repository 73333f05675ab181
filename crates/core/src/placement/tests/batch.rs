//! The batch entry point and NVLink locality.

use super::super::{BatchOrder, Fleet, PlacementError, Policy, Workload};
use super::{frac, gpu, host, shared, whole, L4};

fn nvlink_host() -> Fleet {
    let mut busy = gpu(1, L4).nvlink(0);
    busy.allocated = true;
    Fleet::new(
        vec![host(
            "h",
            vec![
                gpu(0, L4).nvlink(0),
                busy,
                gpu(2, L4).nvlink(1),
                gpu(3, L4).nvlink(1),
            ],
        )],
        Workload::default(),
    )
    .unwrap()
}

#[test]
fn nvlink_local_requests_stay_in_one_group() {
    let f = nvlink_host();
    let d = f.place(&whole(2).nvlink(), Policy::Pack).unwrap();
    assert_eq!(d.gpus, vec![2, 3]);
    assert_eq!(
        f.place(&whole(3).nvlink(), Policy::Pack),
        Err(PlacementError::NoNvlinkGroup { count: 3 })
    );
    assert!(f.place(&whole(3), Policy::Pack).is_ok());
}

#[test]
fn non_local_requests_take_from_the_smallest_group_first() {
    let f = nvlink_host();
    let d = f.place(&whole(1), Policy::Pack).unwrap();
    assert_eq!(d.gpus, vec![0]);
}

#[test]
fn batch_applies_in_order_and_skips_what_does_not_fit() {
    let mut f = Fleet::new(vec![host("h", vec![shared(0, L4, 0)])], Workload::default()).unwrap();
    let queue = [frac(600), frac(600), frac(400)];
    let results = f.place_batch(&queue, Policy::Pack, BatchOrder::Arrival);
    assert!(results[0].is_ok());
    assert_eq!(results[1], Err(PlacementError::InsufficientCapacity));
    assert!(results[2].is_ok());
    assert_eq!(f.free_gpu_milli(), 0);
}

#[test]
fn largest_first_places_big_requests_before_small_ones() {
    let mut f = Fleet::new(vec![host("h", vec![shared(0, L4, 0)])], Workload::default()).unwrap();
    let queue = [frac(400), frac(700), frac(600)];
    let results = f.place_batch(&queue, Policy::Pack, BatchOrder::LargestFirst);
    assert!(results[0].is_err());
    assert!(results[1].is_ok());
    assert!(results[2].is_err());
}

#[test]
fn random_batches_are_reproducible() {
    let hosts: Vec<_> = (0..6)
        .map(|i| host(&format!("h{i}"), vec![shared(0, L4, 0), shared(1, L4, 0)]))
        .collect();
    let queue: Vec<_> = (0..10).map(|i| frac(100 + 50 * (i % 5))).collect();
    let run = |seed| {
        let mut f = Fleet::new(hosts.clone(), Workload::default()).unwrap();
        f.place_batch(&queue, Policy::Random { seed }, BatchOrder::Arrival)
            .into_iter()
            .map(|r| r.map(|d| (d.host, d.gpus)))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn largest_first_counts_a_mig_profile_by_its_compute_share() {
    let big = super::mig("7g.80gb");
    let small = frac(300);
    assert_eq!(big.gpu_milli(), 1000);
    assert_eq!(super::mig("1g.10gb").gpu_milli(), 142);
    assert_eq!(super::mig("nonsense").gpu_milli(), 0);
    let mut f = Fleet::new(
        vec![host("h", vec![gpu(0, super::A100).mig_enabled()])],
        Workload::default(),
    )
    .unwrap();
    let results = f.place_batch(&[small, big], Policy::Pack, BatchOrder::LargestFirst);
    assert!(results[0].is_err(), "{results:?}");
    assert!(results[1].is_ok(), "{results:?}");
}
