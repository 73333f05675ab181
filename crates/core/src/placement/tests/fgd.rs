//! The FGD reference policy, the paper's target workload, and what `pack`
//! does beyond FGD (CPU-only placement, stranded GPU).

use crate::ids::named::hid;
use crate::units::{CpuMilli, MemMiB};

use super::super::frag::fgd_score;
use super::super::{Demand, Fleet, Policy, Workload};
use super::{class, frac, gpu, host, shared, whole, L4};

#[test]
fn the_fgd_score_is_the_papers_quantised_sigmoid() {
    // ⌊100 · sigmoid(−Δ/1000)⌋ with Δ the frequency-weighted change.
    assert_eq!(fgd_score(0, 4), 50);
    assert_eq!(fgd_score(-4000, 4), 73); // one GPU less fragmented
    assert_eq!(fgd_score(4000, 4), 26); // one GPU more
    assert_eq!(fgd_score(20, 4), 49); // a little worse is already 49
    assert_eq!(fgd_score(-20, 4), 50); // a little better is still 50
    assert_eq!(fgd_score(123, 0), 50);
}

/// Host `a` has an idle shared GPU, host `b` one with 300 taken; the
/// workload is half-GPU shares. A 0.1 share leaves both hosts able to run
/// them, so FGD scores both 50 and takes the first host; `pack` and
/// best-fit take the tighter GPU.
#[test]
fn fgd_ties_go_to_the_first_host_where_pack_fits_tightest() {
    let workload = Workload::new(vec![class(&frac(500), 1)]);
    let f = Fleet::new(
        vec![
            host("a", vec![shared(0, L4, 0)]),
            host("b", vec![shared(0, L4, 300)]),
        ],
        workload,
    )
    .unwrap();
    assert_eq!(f.place(&frac(100), Policy::Fgd).unwrap().host, hid("a"));
    assert_eq!(f.place(&frac(100), Policy::Pack).unwrap().host, hid("b"));
    assert_eq!(f.place(&frac(100), Policy::BestFit).unwrap().host, hid("b"));
    // A share that would strand b's rest scores below 50 there.
    assert_eq!(f.place(&frac(300), Policy::Fgd).unwrap().host, hid("a"));
}

#[test]
fn the_typical_workload_counts_cpu_only_work_and_stops_at_the_popularity() {
    let cpu = |r: crate::placement::PlacementRequest, c: u32| r.with_host(CpuMilli(c), MemMiB(64));
    let none = crate::placement::PlacementRequest::new(Demand::None);
    let mut requests = vec![cpu(frac(500), 4000); 6];
    requests.extend(vec![cpu(none.clone(), 0); 3]);
    requests.push(cpu(whole(1), 8000));
    let typical = Workload::typical(&requests, 0.9);
    let shapes: Vec<_> = typical
        .classes()
        .iter()
        .map(|c| (c.demand.clone(), c.cpu, c.weight, c.memory))
        .collect();
    assert_eq!(
        shapes,
        vec![
            (frac(500).demand, CpuMilli(4000), 6, MemMiB(0)),
            // CPU 0 counts as Kubernetes' 100 millicores.
            (Demand::None, CpuMilli(100), 3, MemMiB(0)),
        ]
    );
    assert_eq!(Workload::typical(&requests, 1.0).classes().len(), 3);
    // Exact CPU is part of the shape.
    requests.push(cpu(frac(500), 4001));
    assert_eq!(Workload::typical(&requests, 1.0).classes().len(), 4);
}

#[test]
fn pack_puts_cpu_only_work_where_no_gpu_is_free() {
    let mut busy = host("busy", vec![gpu(0, L4)]);
    busy.gpus[0].allocated = true;
    let f = Fleet::new(
        vec![host("idle", vec![gpu(0, L4), gpu(1, L4)]), busy],
        Workload::new(vec![class(&whole(1), 1)]),
    )
    .unwrap();
    let cpu_only = crate::placement::PlacementRequest::new(Demand::None)
        .with_host(CpuMilli(8000), MemMiB(1024));
    assert_eq!(f.place(&cpu_only, Policy::Pack).unwrap().host, hid("busy"));
}
