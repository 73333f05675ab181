//! Property tests over random fleets and request streams: every policy
//! returns only placements the fleet can take (they apply, and they honour
//! CPU, memory, GPU count, model and tenant-exclusivity constraints), and
//! replaying the same stream gives the same decisions.

use proptest::prelude::*;

use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use super::super::{
    Decision, Demand, Fleet, HostState, PlacementRequest, Policy, Slice, Workload, WorkloadClass,
    WorkloadTally,
};
use super::{gpu, A100, L4};

/// splitmix64: the whole scenario comes from one proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_fleet(rng: &mut Rng) -> Vec<HostState> {
    (0..1 + rng.below(6))
        .map(|h| {
            let kind = rng.below(3);
            let gpus = (0..1 + rng.below(4) as u32)
                .map(|i| match kind {
                    0 => gpu(i, L4).shared(48),
                    1 => gpu(i, A100).mig_enabled(),
                    _ => gpu(i, A100),
                })
                .collect();
            HostState {
                id: crate::ids::HostId::new(h as i64),
                cpu_free: CpuMilli(4000 + 4000 * rng.below(16) as u32),
                memory_free: MemMiB(16_384 * (1 + rng.below(16))),
                gpus,
            }
        })
        .collect()
}

fn random_request(rng: &mut Rng) -> PlacementRequest {
    let demand = match rng.below(5) {
        0 => Demand::None,
        1 => Demand::Whole {
            count: 1 + rng.below(3) as u32,
        },
        2 => Demand::Mig {
            profile: ["1g.10gb", "2g.20gb", "3g.40gb"][rng.below(3) as usize].to_string(),
        },
        _ => Demand::Fraction {
            compute: ComputeMilli(50 * (1 + rng.below(20) as u32)),
            memory: None,
        },
    };
    let request = PlacementRequest::new(demand).with_host(
        CpuMilli(1000 * rng.below(24) as u32),
        MemMiB(4096 * rng.below(24)),
    );
    let request = match rng.below(4) {
        0 => request.with_models([L4.to_string()]),
        1 => request.with_models([A100.to_string()]),
        _ => request,
    };
    let tenant = ["red", "blue", "green"][rng.below(3) as usize];
    request.for_tenant(crate::ids::named::tid(tenant), rng.below(2) == 0)
}

const POLICIES: [Policy; 6] = [
    Policy::Pack,
    Policy::Spread,
    Policy::Fgd,
    Policy::BestFit,
    Policy::FirstFit,
    Policy::Random { seed: 11 },
];

/// Replays `requests`, checking each decision before applying it.
fn replay(fleet: &Fleet, requests: &[PlacementRequest], policy: Policy) -> Vec<Option<Decision>> {
    let mut fleet = fleet.clone();
    requests
        .iter()
        .map(|request| {
            let decision = fleet.place(request, policy).ok()?;
            assert_eq!(decision.cpu, request.cpu, "{policy}");
            assert_eq!(decision.memory, request.memory, "{policy}");
            let host = fleet
                .hosts()
                .iter()
                .find(|h| h.id == decision.host)
                .expect("a host of the fleet");
            assert!(host.cpu_free >= request.cpu && host.memory_free >= request.memory);
            for index in &decision.gpus {
                let g = host
                    .gpus
                    .iter()
                    .find(|g| g.index == *index)
                    .expect("its GPU");
                assert!(!g.allocated, "{policy} chose a GPU held whole");
                assert!(
                    request.allowed_models.is_empty() || request.allowed_models.contains(&g.model),
                    "{policy} chose {} for {:?}",
                    g.model,
                    request.allowed_models
                );
            }
            match (&request.demand, &decision.slice) {
                (Demand::None, Slice::HostOnly) => assert!(decision.gpus.is_empty()),
                (Demand::Whole { count }, Slice::Whole) => {
                    assert_eq!(decision.gpus.len(), *count as usize)
                }
                (Demand::Fraction { .. }, Slice::Shared { .. } | Slice::Mig(_))
                | (Demand::Mig { .. }, Slice::Mig(_)) => assert_eq!(decision.gpus.len(), 1),
                (demand, slice) => panic!("{policy}: {slice:?} for {demand:?}"),
            }
            fleet
                .apply(&decision)
                .unwrap_or_else(|e| panic!("{policy}: its own decision did not apply: {e}"));
            if request.tenant_exclusive {
                let host = fleet
                    .hosts()
                    .iter()
                    .find(|h| h.id == decision.host)
                    .expect("host");
                for index in &decision.gpus {
                    let g = host.gpus.iter().find(|g| g.index == *index).expect("GPU");
                    assert!(
                        g.tenants.iter().all(|t| Some(t) == request.tenant.as_ref()),
                        "{policy} put an exclusive slice next to {:?}",
                        g.tenants
                    );
                }
            }
            Some(decision)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_policy_places_only_what_fits_and_decides_the_same_twice(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let hosts = random_fleet(&mut rng);
        let requests: Vec<_> = (0..24).map(|_| random_request(&mut rng)).collect();
        for workload in [
            Workload::from_requests(&requests, 8),
            Workload::typical(&requests, 0.95),
        ] {
            let fleet = Fleet::new(hosts.clone(), workload).unwrap();
            for policy in POLICIES {
                let first = replay(&fleet, &requests, policy);
                prop_assert_eq!(&first, &replay(&fleet, &requests, policy), "{}", policy);
            }
        }
    }

    #[test]
    fn a_mix_grown_one_request_at_a_time_judges_as_one_built_afresh(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let hosts = random_fleet(&mut rng);
        // Few shapes, so that most requests only reweigh the mix.
        let shapes: Vec<_> = (0..3).map(|_| random_request(&mut rng)).collect();
        let requests: Vec<_> = (0..64)
            .map(|_| {
                let mut r = shapes[rng.below(3) as usize].clone();
                r.cpu = CpuMilli(2000 * rng.below(16) as u32);
                r
            })
            .collect();
        let mut fleet = Fleet::new(hosts, Workload::default()).unwrap();
        let mut tally = WorkloadTally::default();
        for (i, request) in requests.iter().enumerate() {
            if let Ok(d) = fleet.place(request, Policy::Pack) {
                fleet.apply(&d).unwrap();
            }
            tally.add(request);
            prop_assert_eq!(&tally, &WorkloadTally::from_requests(&requests[..=i]));
            let workload = tally.workload(2);
            prop_assert_eq!(&workload, &reference_mix(&requests[..=i], 2));
            fleet.set_workload(workload.clone());
            let fresh = Fleet::new(fleet.hosts().to_vec(), workload).unwrap();
            prop_assert_eq!(fleet.fragmentation(), fresh.fragmentation());
            for next in &requests {
                prop_assert_eq!(
                    fleet.place(next, Policy::Pack).ok(),
                    fresh.place(next, Policy::Pack).ok()
                );
            }
        }
    }
}

/// The mix of `requests` computed directly: per (GPU demand, models, pool),
/// the count and the middle CPU and memory; most frequent first, ties in
/// shape order; the first `max` kept.
fn reference_mix(requests: &[PlacementRequest], max: usize) -> Workload {
    let mut keys: Vec<_> = requests
        .iter()
        .filter(|r| r.demand != Demand::None)
        .map(|r| {
            let mut models = r.allowed_models.clone();
            models.sort_unstable();
            models.dedup();
            (r.demand.clone(), models, r.pool.clone())
        })
        .collect();
    keys.sort();
    keys.dedup();
    let mut classes: Vec<WorkloadClass> = keys
        .into_iter()
        .map(|key| {
            let members: Vec<_> = requests
                .iter()
                .filter(|r| {
                    let mut models = r.allowed_models.clone();
                    models.sort_unstable();
                    models.dedup();
                    (&r.demand, &models, &r.pool) == (&key.0, &key.1, &key.2)
                })
                .collect();
            let mut cpus: Vec<_> = members.iter().map(|r| r.cpu).collect();
            let mut mems: Vec<_> = members.iter().map(|r| r.memory).collect();
            cpus.sort_unstable();
            mems.sort_unstable();
            WorkloadClass {
                demand: key.0,
                allowed_models: key.1,
                pool: key.2,
                weight: members.len() as u64,
                cpu: cpus[members.len() / 2],
                memory: mems[members.len() / 2],
            }
        })
        .collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.weight));
    classes.truncate(max);
    Workload::new(classes)
}
