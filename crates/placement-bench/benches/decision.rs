//! Time of one placement decision on fleets of 100, 1,000 and 10,000 GPUs,
//! half full (requested GPU = 50 % of capacity), with the default mix, for
//! `pack` (with and without MIG), the `fgd` reference and `best-fit`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use placement_bench::run::prefilled;
use placement_bench::synthetic::Mix;
use tessera_core::placement::Policy;

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("decision");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for gpus in [100usize, 1_000, 10_000] {
        for (label, policy, mig) in [
            ("pack", Policy::Pack, false),
            ("pack-mig", Policy::Pack, true),
            ("fgd", Policy::Fgd, false),
            ("best-fit", Policy::BestFit, false),
        ] {
            let (fleet, requests) = prefilled(gpus, 0.5, Mix::Default, mig, policy, 1).unwrap();
            group.bench_with_input(BenchmarkId::new(label, fleet.gpu_count()), &gpus, |b, _| {
                let mut i = 0usize;
                b.iter(|| {
                    let request = &requests[i % requests.len()];
                    i += 1;
                    black_box(fleet.place(black_box(request), policy))
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
