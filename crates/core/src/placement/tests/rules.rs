//! Each hardware and policy rule, one test at a time.

use crate::ids::named::hid;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use super::super::{
    Demand, Fleet, FleetError, GpuMode, PlacementError, PlacementRequest, Policy, Slice, Workload,
};
use super::{fleet, frac, gpu, host, mig, shared, whole, A100, L4};

#[test]
fn host_cpu_and_memory_are_respected() {
    let mut small = host("small", vec![gpu(0, L4)]);
    small.cpu_free = CpuMilli(2_000);
    let f = fleet(vec![small, host("big", vec![gpu(0, L4)])]);
    let request = whole(1).with_host(CpuMilli(8_000), MemMiB(1024));
    let d = f.place(&request, Policy::FirstFit).unwrap();
    assert_eq!(d.host, hid("big"));
    let too_much = whole(1).with_host(CpuMilli(100_000), MemMiB(0));
    assert!(matches!(
        f.place(&too_much, Policy::Pack),
        Err(PlacementError::InsufficientHostResources { .. })
    ));
}

#[test]
fn allowed_models_are_respected_and_lookup_tolerant() {
    let f = fleet(vec![
        host("l4", vec![gpu(0, L4)]),
        host("a100", vec![gpu(0, A100)]),
    ]);
    let d = f
        .place(&whole(1).with_models(["A100-80GB"]), Policy::FirstFit)
        .unwrap();
    assert_eq!(d.host, hid("a100"));
    // NVML's spelling resolves to the same catalogue model.
    let d = f
        .place(
            &whole(1).with_models(["NVIDIA A100 80GB PCIe"]),
            Policy::FirstFit,
        )
        .unwrap();
    assert_eq!(d.host, hid("a100"));
    assert!(matches!(
        f.place(&whole(1).with_models(["H100-80GB"]), Policy::Pack),
        Err(PlacementError::NoMatchingGpu { .. })
    ));
}

#[test]
fn pools_are_respected() {
    let f = fleet(vec![
        host("batch", vec![gpu(0, L4).in_pool("batch")]),
        host("prod", vec![gpu(0, L4).in_pool("prod")]),
    ]);
    let d = f
        .place(&whole(1).in_pool("prod"), Policy::FirstFit)
        .unwrap();
    assert_eq!(d.host, hid("prod"));
    assert!(matches!(
        f.place(&whole(1).in_pool("dev"), Policy::Pack),
        Err(PlacementError::NoMatchingGpu { .. })
    ));
}

#[test]
fn whole_gpus_must_be_idle_and_on_one_host() {
    let mut busy = gpu(1, L4);
    busy.allocated = true;
    let f = fleet(vec![
        host("a", vec![gpu(0, L4), busy]),
        host("b", vec![shared(0, L4, 100), gpu(1, L4)]),
        host("c", vec![gpu(0, L4), gpu(1, L4)]),
    ]);
    let d = f.place(&whole(2), Policy::Pack).unwrap();
    assert_eq!(d.host, hid("c"));
    assert_eq!(d.gpus, vec![0, 1]);
    assert_eq!(d.slice, Slice::Whole);
    assert!(matches!(
        f.place(&whole(3), Policy::Pack),
        Err(PlacementError::InsufficientCapacity)
    ));
}

#[test]
fn fractions_never_land_on_exclusive_gpus() {
    let f = fleet(vec![host("a", vec![gpu(0, L4)])]);
    assert!(matches!(
        f.place(&frac(300), Policy::Pack),
        Err(PlacementError::NoMatchingGpu { .. })
    ));
}

#[test]
fn shared_gpus_respect_compute_memory_and_client_limits() {
    let mut full_clients = shared(0, L4, 100);
    if let GpuMode::Shared {
        clients,
        max_clients,
        ..
    } = &mut full_clients.mode
    {
        *clients = 2;
        *max_clients = 2;
    }
    let f = fleet(vec![
        host("busy", vec![shared(0, L4, 800)]),
        host("clients", vec![full_clients]),
        host("free", vec![shared(0, L4, 500)]),
    ]);
    let d = f.place(&frac(300), Policy::BestFit).unwrap();
    assert_eq!(d.host, hid("free"));
    let memory = gpu(0, L4).memory.0 * 3 / 10;
    assert_eq!(
        d.slice,
        Slice::Shared {
            compute: ComputeMilli(300),
            memory: MemMiB(memory)
        }
    );
    // Explicit memory beyond what is free.
    let greedy = PlacementRequest::new(Demand::Fraction {
        compute: ComputeMilli(100),
        memory: Some(MemMiB(20 * 1024)),
    });
    assert!(f.place(&greedy, Policy::Pack).is_err());
}

#[test]
fn invalid_requests_are_rejected() {
    let f = fleet(vec![host("a", vec![shared(0, L4, 0)])]);
    for bad in [frac(0), frac(1001), whole(0)] {
        assert!(matches!(
            f.place(&bad, Policy::Pack),
            Err(PlacementError::InvalidRequest { .. })
        ));
    }
    assert!(matches!(
        f.place(&mig("1g.10gb"), Policy::Pack),
        Err(PlacementError::UnknownProfile { .. })
    ));
}

#[test]
fn host_only_requests_use_cpu_and_memory() {
    let mut f = fleet(vec![host("a", vec![gpu(0, L4)]), host("cpu", vec![])]);
    let request = PlacementRequest::new(Demand::None).with_host(CpuMilli(4_000), MemMiB(8192));
    let d = f.place(&request, Policy::BestFit).unwrap();
    assert_eq!(d.slice, Slice::HostOnly);
    assert!(d.gpus.is_empty());
    f.apply(&d).unwrap();
    let h = f.hosts().iter().find(|h| h.id == d.host).unwrap();
    assert_eq!(h.cpu_free, CpuMilli(60_000));
}

#[test]
fn apply_is_all_or_nothing_and_release_undoes_it() {
    let mut f = fleet(vec![host("a", vec![shared(0, L4, 0), gpu(1, L4)])]);
    let d = f.place(&frac(600), Policy::Pack).unwrap();
    let before = f.hosts().to_vec();
    f.apply(&d).unwrap();
    // Applying the same share again no longer fits and changes nothing.
    let after = f.hosts().to_vec();
    assert!(f.apply(&d).is_err());
    assert_eq!(f.hosts(), &after[..]);
    f.release(&d).unwrap();
    assert_eq!(f.hosts(), &before[..]);
    assert!(f.release(&d).is_err());
}

#[test]
fn bad_snapshots_are_refused() {
    let dup = Fleet::new(
        vec![host("a", vec![gpu(0, L4)]), host("a", vec![gpu(0, L4)])],
        Workload::default(),
    );
    assert!(matches!(dup, Err(FleetError::DuplicateHost { .. })));
    let dup_gpu = Fleet::new(
        vec![host("a", vec![gpu(0, L4), gpu(0, L4)])],
        Workload::default(),
    );
    assert!(matches!(dup_gpu, Err(FleetError::DuplicateGpu { .. })));
    let not_mig = Fleet::new(
        vec![host("a", vec![gpu(0, L4).mig_enabled()])],
        Workload::default(),
    );
    assert!(matches!(not_mig, Err(FleetError::InvalidMigLayout { .. })));
}

#[test]
fn errors_and_decisions_serialise() {
    let f = fleet(vec![host("a", vec![shared(0, L4, 0)])]);
    let d = f.place(&frac(250), Policy::Pack).unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"policy\":\"pack\""));
    let e = PlacementError::NoNvlinkGroup { count: 4 };
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(json, r#"{"kind":"no-nvlink-group","count":4}"#);
}

#[test]
fn a_share_cannot_be_released_from_a_gpu_allocated_whole() {
    let mut held = shared(0, L4, 100);
    held.allocated = true;
    let mut f = fleet(vec![host("a", vec![held, shared(1, L4, 0)])]);
    let d = f.place(&frac(100), Policy::Pack).unwrap();
    assert_eq!(d.gpus, vec![1]);
    let wrong = crate::placement::Decision { gpus: vec![0], ..d };
    let before = f.hosts().to_vec();
    assert_eq!(
        f.release(&wrong),
        Err(crate::placement::ApplyError::HeldWhole {
            host: hid("a"),
            index: 0
        })
    );
    assert_eq!(f.hosts(), &before[..]);
    assert_eq!(f.free_gpu_milli(), 1000);
}
