//! Tenant anti-affinity: a request marked tenant-exclusive only goes on GPUs
//! that hold no other tenant's slices; `apply` and `release` keep the
//! record of whose slices each GPU holds.

use super::super::{Fleet, PlacementError, Policy, Workload};
use super::{fleet, frac, gpu, host, mig, shared, whole, A100, L4};
use crate::ids::named::{hid, tid};

fn for_tenant(
    request: crate::placement::PlacementRequest,
    tenant: &str,
    exclusive: bool,
) -> crate::placement::PlacementRequest {
    request.for_tenant(tid(tenant), exclusive)
}

#[test]
fn an_exclusive_request_avoids_gpus_holding_another_tenants_slices() {
    // GPU 0 has room but holds a slice of "red"; GPU 1 is idle.
    let f = fleet(vec![host(
        "h",
        vec![shared(0, L4, 500).held_by(tid("red")), shared(1, L4, 0)],
    )]);
    // Without the rule, pack fills the used GPU.
    assert_eq!(f.place(&frac(300), Policy::Pack).unwrap().gpus, vec![0]);
    let blue = for_tenant(frac(300), "blue", true);
    assert_eq!(f.place(&blue, Policy::Pack).unwrap().gpus, vec![1]);
    // The same tenant may join its own GPU; a non-exclusive request may share.
    let red = for_tenant(frac(300), "red", true);
    assert_eq!(f.place(&red, Policy::Pack).unwrap().gpus, vec![0]);
    let shared_ok = for_tenant(frac(300), "blue", false);
    assert_eq!(f.place(&shared_ok, Policy::Pack).unwrap().gpus, vec![0]);
    for policy in [
        Policy::Fgd,
        Policy::BestFit,
        Policy::FirstFit,
        Policy::Spread,
    ] {
        assert_eq!(f.place(&blue, policy).unwrap().gpus, vec![1], "{policy}");
    }
}

#[test]
fn room_only_next_to_other_tenants_is_named() {
    let f = fleet(vec![host(
        "h",
        vec![shared(0, L4, 500).held_by(tid("red"))],
    )]);
    let blue = for_tenant(frac(300), "blue", true);
    assert_eq!(
        f.place(&blue, Policy::Pack),
        Err(PlacementError::TenantIsolation)
    );
    // Truly full stays "insufficient capacity".
    let big = for_tenant(frac(800), "blue", true);
    assert_eq!(
        f.place(&big, Policy::Pack),
        Err(PlacementError::InsufficientCapacity)
    );
}

#[test]
fn apply_and_release_keep_the_record_of_whose_slices_a_gpu_holds() {
    let mut f = fleet(vec![host("h", vec![shared(0, L4, 0)])]);
    let red = for_tenant(frac(300), "red", true);
    let first = f.place(&red, Policy::Pack).unwrap();
    f.apply(&first).unwrap();
    let second = f.place(&red, Policy::Pack).unwrap();
    f.apply(&second).unwrap();
    assert_eq!(f.hosts()[0].gpus[0].tenants, vec![tid("red"), tid("red")]);
    let blue = for_tenant(frac(100), "blue", true);
    assert_eq!(
        f.place(&blue, Policy::Pack),
        Err(PlacementError::TenantIsolation)
    );
    f.release(&first).unwrap();
    assert_eq!(f.hosts()[0].gpus[0].tenants, vec![tid("red")]);
    f.release(&second).unwrap();
    assert!(f.hosts()[0].gpus[0].tenants.is_empty());
    assert_eq!(f.place(&blue, Policy::Pack).unwrap().gpus, vec![0]);
}

#[test]
fn mig_and_whole_gpus_follow_the_rule_too() {
    let mut f = Fleet::new(
        vec![host(
            "h",
            vec![gpu(0, A100).mig_enabled(), gpu(1, A100).mig_enabled()],
        )],
        Workload::default(),
    )
    .unwrap();
    let red = f
        .place(&for_tenant(mig("1g.10gb"), "red", true), Policy::Pack)
        .unwrap();
    f.apply(&red).unwrap();
    let blue = f
        .place(&for_tenant(mig("1g.10gb"), "blue", true), Policy::Pack)
        .unwrap();
    assert_ne!(blue.gpus, red.gpus, "blue must not share red's GPU");
    f.apply(&blue).unwrap();
    // Both GPUs now hold someone: a third tenant's MIG slice and a whole GPU wait.
    let green = for_tenant(mig("1g.10gb"), "green", true);
    assert_eq!(
        f.place(&green, Policy::Pack),
        Err(PlacementError::TenantIsolation)
    );
    assert!(f
        .place(&for_tenant(whole(1), "green", true), Policy::Pack)
        .is_err());
}

#[test]
fn identical_hosts_are_not_skipped_when_they_differ_in_tenants() {
    // Equal capacity everywhere; only the second host holds blue's slice.
    let f = fleet(vec![
        host("a", vec![shared(0, L4, 500).held_by(tid("red"))]),
        host("b", vec![shared(0, L4, 500).held_by(tid("blue"))]),
    ]);
    let blue = for_tenant(frac(300), "blue", true);
    assert_eq!(f.place(&blue, Policy::Pack).unwrap().host, hid("b"));
}

#[test]
fn spread_puts_a_tenants_replicas_on_different_hosts_and_others_where_they_fit_best() {
    // Two hosts of two time-sliced L4s; "a" is the emptier host.
    let two_hosts = || {
        fleet(vec![
            host("a", vec![shared(0, L4, 0), shared(1, L4, 0)]),
            host("b", vec![shared(0, L4, 250), shared(1, L4, 0)]),
        ])
    };
    let mut f = two_hosts();
    let red = for_tenant(frac(250), "red", false);
    let first = f.place(&red, Policy::Spread).unwrap();
    assert_eq!(first.host, hid("a"), "the least-loaded host first");
    f.apply(&first).unwrap();
    // Host a is still the less loaded (1.75 free against 1.75): the tie
    // goes to the host without red's slice, b.
    let second = f.place(&red, Policy::Spread).unwrap();
    assert_eq!(
        second.host,
        hid("b"),
        "red's second replica on another host"
    );
    f.apply(&second).unwrap();
    // A third replica has to share a host with one of them: the emptier.
    let third = f.place(&red, Policy::Spread).unwrap();
    assert_eq!(third.host, hid("a"));
    // Pack on the same fleet keeps red together where it packs best.
    let mut g = two_hosts();
    let d = g.place(&red, Policy::Pack).unwrap();
    assert_eq!(d.host, hid("b"));
    g.apply(&d).unwrap();
    assert_eq!(g.place(&red, Policy::Pack).unwrap().host, hid("b"));
}

#[test]
fn spread_still_keeps_tenants_apart_in_isolating_pools() {
    // Host a is empty but its only GPU holds blue's slice; b holds red's.
    let f = fleet(vec![
        host("a", vec![shared(0, L4, 100).held_by(tid("blue"))]),
        host("b", vec![shared(0, L4, 300).held_by(tid("red"))]),
    ]);
    // Spread alone would pick a (less loaded, no red there).
    let shared_ok = for_tenant(frac(200), "red", false);
    assert_eq!(f.place(&shared_ok, Policy::Spread).unwrap().host, hid("a"));
    // With the isolation rule, red goes next to its own slice.
    let isolated = for_tenant(frac(200), "red", true);
    assert_eq!(f.place(&isolated, Policy::Spread).unwrap().host, hid("b"));
}
